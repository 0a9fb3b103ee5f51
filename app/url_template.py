"""The ``lab.internalUrl`` template: how JupyterHub reaches a lab, as operators choose.

The default names the lab's Service by its short cluster DNS name, which resolves only for a
JupyterHub running in the cluster's DNS search path. A hub elsewhere needs the fully qualified
``.svc.cluster.local`` name, the Service's cluster IP (a hub on the cluster network that does not
use its DNS, as on the local stack), a proxy or a fixed address, so the URL is a template filled in
per user.

JupyterHub keeps only the scheme, host and port of the URL a spawner reports and appends its own
``/user/<name>/`` path, so a template is checked to yield exactly that: an absolute http or
https URL with a host, an optional port and no path, query, fragment or credentials. Checking
happens when the configuration is loaded, with sample values, so a bad template stops start-up
instead of failing every spawn. No network library is imported here: gunicorn's arbiter loads the
configuration before the gevent workers patch the standard library.
"""

from __future__ import annotations

import ipaddress
import re
from string import Formatter
from urllib.parse import urlsplit

PLACEHOLDERS = ("username", "namespace", "service", "port", "cluster_ip")
"""The names a template may use, each as a plain ``{name}``."""

SERVICE_ADDRESS = "cluster_ip"
"""The placeholder known only once the lab's Service exists: the address Kubernetes gave it."""

DEFAULT_TEMPLATE = "http://{service}.{namespace}:{port}"
"""The lab Service's short DNS name, for a JupyterHub running inside the cluster."""

_SAMPLE = {
    "username": "someone",
    "namespace": "nublado-someone",
    "service": "nb-someone-lab",
    "port": 8888,
    "cluster_ip": "10.96.0.10",
}
"""Values shaped like real ones; what a template yields for them decides its validity."""

_LABEL = r"[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?"
_DNS_NAME = re.compile(rf"^{_LABEL}(\.{_LABEL})*\.?$")
"""A host name: dot-separated labels, optionally fully qualified with a final dot."""


def render(
    template: str, *, username: str, namespace: str, service: str, port: int, cluster_ip: str
) -> str:
    """Fill in a template that :func:`template_problem` accepted."""
    return template.format(
        username=username, namespace=namespace, service=service, port=port, cluster_ip=cluster_ip
    )


def uses_service_address(template: str) -> bool:
    """Whether the template needs the Service's cluster IP (and so a Service to read)."""
    return any(field == SERVICE_ADDRESS for _, field, _, _ in Formatter().parse(template))


def template_problem(template: str) -> str | None:
    """Why ``template`` cannot be used as ``lab.internalUrl``, or None when it can."""
    allowed = ", ".join(f"{{{name}}}" for name in PLACEHOLDERS)
    try:
        parts = list(Formatter().parse(template))
    except ValueError as exc:
        return (
            f"not a valid template ({exc}); write placeholders as {allowed} "
            "and a literal brace doubled, {{ or }}"
        )
    for _literal, field, spec, conversion in parts:
        if field is None:
            continue
        written = _as_written(field, conversion, spec)
        if field not in PLACEHOLDERS:
            return f"unknown placeholder {written}; placeholders are {allowed}"
        if spec or conversion:
            return f"placeholder {written} must be written plainly as {{{field}}}"
    return _url_problem(template.format_map(_SAMPLE))


def _as_written(field: str, conversion: str | None, spec: str | None) -> str:
    """A placeholder as the operator wrote it, for the error message."""
    suffix = (f"!{conversion}" if conversion else "") + (f":{spec}" if spec else "")
    return "{" + field + suffix + "}"


def _url_problem(url: str) -> str | None:
    """Why ``url`` (a template filled with sample values) is not one JupyterHub can use."""
    example = f"gives {url!r} for user {_SAMPLE['username']!r}"
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        return f"must give an absolute http or https URL; it {example} ({exc})"
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return f"must give an absolute http or https URL with a host; it {example}"
    if parts.username is not None or parts.password is not None:
        return f"must not carry credentials; it {example}"
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        return (
            "must give only scheme, host and port (JupyterHub adds its own path and ignores "
            f"the rest); it {example}"
        )
    if not _valid_host(parts.hostname):
        return f"must give a host that is a DNS name or an IP address; it {example}"
    if port == 0:
        return f"must give a port from 1 to 65535; it {example}"
    return None


def _valid_host(host: str) -> bool:
    """A DNS name or an IP address (``urlsplit`` lets spaces and other junk through)."""
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return bool(_DNS_NAME.match(host))
    return True
