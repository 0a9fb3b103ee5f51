"""What every GafaelfawrIngress the service makes shares: its API version, and the host of
the Ingress rule Gafaelfawr makes from it."""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

GAFAELFAWR_GROUP = "gafaelfawr.lsst.io"
GAFAELFAWR_VERSION = "v1alpha1"
GAFAELFAWR_API = f"{GAFAELFAWR_GROUP}/{GAFAELFAWR_VERSION}"
GAFAELFAWR_INGRESSES = "gafaelfawringresses"


def rule_host(base_url: str) -> str | None:
    """The host an Ingress rule matches: the platform's, unless that is an address (an
    Ingress host must be a name; without one the rule matches every host)."""
    host = urlsplit(base_url).hostname
    if host is None:
        return None
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return host
    return None
