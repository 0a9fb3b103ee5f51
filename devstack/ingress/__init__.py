"""The local stack's ingress: ingress-nginx played over the Kubernetes emulator's Ingresses.

:class:`IngressProxy` serves on a loopback port (``ingress_url`` in the stack's state) and
proxies each request by the emulator's Ingresses, asking Gafaelfawr first where an Ingress made
from a GafaelfawrIngress says so: ``routes`` chooses the Ingress path, ``auth`` makes the auth
subrequest, ``backends`` finds the Service's address, ``proxy`` does the rest.
"""

from __future__ import annotations

from .proxy import IngressProxy

__all__ = ["IngressProxy"]
