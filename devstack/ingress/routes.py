"""Which Ingress path a request takes: ingress-nginx's choice, made over the emulator's Ingresses.

Each path of each rule of an Ingress of the ``nginx`` class (or of no class: ingress-nginx is
the stack's only controller) is a :class:`Route`; so is an Ingress's ``defaultBackend``, as a
prefix ``/`` of any host. As NGINX picks a server by host and then a location by path:

- the rules naming the request's host exactly are used if there are any, else those naming a
  matching wildcard (``*.example.org`` covers one label), else those naming no host;
- among them an ``Exact`` path equal to the request's path wins; otherwise the longest path
  that matches: ``Prefix`` element by element (``/apps/a`` covers ``/apps/a`` and
  ``/apps/a/x``, not ``/apps/ab``; a trailing slash is ignored), ``ImplementationSpecific``
  as NGINX's plain prefix, or, on an Ingress annotated ``nginx.ingress.kubernetes.io/use-regex:
  "true"``, as a case-insensitive regular expression matched from the path's start;
- between equals, the oldest Ingress (ingress-nginx's rule for conflicting Ingresses).

Simplifications: a regular expression competes by its length like a prefix (in NGINX the first
matching regex beats any prefix), and ``rewrite-target`` is not applied.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

USE_REGEX = "nginx.ingress.kubernetes.io/use-regex"
INGRESS_CLASS = "nginx"


@dataclass(frozen=True)
class Route:
    """One path of an Ingress and the Service port it leads to."""

    namespace: str
    ingress: str
    host: str
    """The rule's host, ``""`` for any."""
    path: str
    path_type: str
    regex: bool
    service: str
    port: int | str
    """The Service port's number, or its name."""
    annotations: Mapping[str, str] = field(default_factory=dict)
    age: tuple[str, str, str] = ("", "", "")
    """The Ingress's creation time, namespace and name: older sorts first."""

    def matches(self, path: str) -> bool:
        if self.path_type == "Exact":
            return path == self.path
        if self.path_type == "ImplementationSpecific":
            if self.regex:
                return _regex(self.path).match(path) is not None
            return path.startswith(self.path)
        prefix = self.path.rstrip("/")
        return not prefix or path == prefix or path.startswith(prefix + "/")


_REGEXES: dict[str, re.Pattern[str]] = {}


def _regex(pattern: str) -> re.Pattern[str]:
    compiled = _REGEXES.get(pattern)
    if compiled is None:
        try:
            compiled = re.compile(pattern, re.IGNORECASE)
        except re.error:
            compiled = re.compile(r"(?!)")  # NGINX would refuse the configuration: match nothing
        _REGEXES[pattern] = compiled
    return compiled


def routes_of(ingress: dict[str, Any]) -> list[Route]:
    """The routes an Ingress declares; none when another controller's class is named."""
    meta, spec = ingress["metadata"], ingress.get("spec") or {}
    if spec.get("ingressClassName") not in (None, "", INGRESS_CLASS) or meta.get(
        "deletionTimestamp"
    ):
        return []
    annotations = dict(meta.get("annotations") or {})
    regex = annotations.get(USE_REGEX, "").lower() == "true"
    namespace, name = str(meta.get("namespace") or ""), str(meta["name"])
    age = (str(meta.get("creationTimestamp") or ""), namespace, name)

    def route(host: str, path: str, path_type: str, backend: dict[str, Any]) -> Route | None:
        service = backend.get("service") or {}
        port = service.get("port") or {}
        number = port.get("number")
        target = int(number) if number is not None else port.get("name")
        if not service.get("name") or target is None:
            return None  # a resource backend, or no port: nothing the proxy can reach
        return Route(
            namespace, name, host, path, path_type, regex, service["name"], target, annotations, age
        )

    found = []
    for rule in spec.get("rules") or []:
        host = str(rule.get("host") or "").lower()
        for path in (rule.get("http") or {}).get("paths") or []:
            found.append(
                route(
                    host,
                    str(path.get("path") or "/"),
                    str(path.get("pathType") or "ImplementationSpecific"),
                    path.get("backend") or {},
                )
            )
    if spec.get("defaultBackend"):
        found.append(route("", "/", "Prefix", spec["defaultBackend"]))
    return [r for r in found if r is not None]


def _server(routes: list[Route], host: str) -> list[Route]:
    """The routes of the NGINX server a request for ``host`` reaches."""
    exact = [r for r in routes if r.host == host]
    if exact:
        return exact
    wildcards = [
        r
        for r in routes
        if r.host.startswith("*.")
        and host.endswith(r.host[1:])
        and "." not in host[: -len(r.host) + 1]
    ]
    if wildcards:
        longest = max(len(r.host) for r in wildcards)
        return [r for r in wildcards if len(r.host) == longest]
    return [r for r in routes if not r.host]


def choose(ingresses: Iterable[dict[str, Any]], host: str, path: str) -> Route | None:
    """The route a request for ``host`` (no port) and ``path`` (decoded) takes, if any."""
    routes = [r for ingress in ingresses for r in routes_of(ingress)]
    candidates = [r for r in _server(routes, host.lower()) if r.matches(path)]
    exact = [r for r in candidates if r.path_type == "Exact"]
    if exact:
        return min(exact, key=lambda r: r.age)
    if not candidates:
        return None
    return min(candidates, key=lambda r: (-len(r.path), r.age))
