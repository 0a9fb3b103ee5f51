"""Least privilege, proven: the chart grants exactly the Kubernetes calls the service makes.

Every emulator in the test process reports each request to a recorder (``tests/support/rbac``),
which keeps the service's own calls (by its ``User-Agent``). This test runs last and compares
that set with the ClusterRole and Role the chart renders:

- every call the service made is granted (a ClusterRole rule anywhere, a Role rule in its
  namespace: the release's, or the file servers'), in any run;
- every verb on every resource the chart grants was used by some test, when the whole suite ran
  (a subset of the tests cannot be expected to use everything).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from devstack.helm import render_chart
from devstack.stack import REPO_ROOT
from tests.support.rbac import RECORDER, Call

SERVICE_NAMESPACE = "nublado"
"""The service's namespace in every test configuration (``kubernetes.serviceNamespace``)."""
CHART_VALUES = {"ingress": {"host": "example.org"}, "config": {"fileserver": {"enabled": True}}}
"""The release the tests' service stands for: file servers on (their Role is granted only
then), in the namespace the test configurations give them, the default one."""


@dataclass(frozen=True)
class Grant:
    """One (group, resource, verb) a rule allows; ``namespace`` None means cluster-wide."""

    api_group: str
    resource: str
    verb: str
    namespace: str | None

    def allows(self, call: Call) -> bool:
        return (self.api_group, self.resource, self.verb) == (
            call.api_group,
            call.resource,
            call.verb,
        ) and (self.namespace is None or self.namespace == call.namespace)


def _grants() -> set[Grant]:
    documents = render_chart(
        REPO_ROOT / "chart",
        namespace=SERVICE_NAMESPACE,
        values=CHART_VALUES,
    )
    grants = set()
    kinds = set()
    for doc in documents:
        if doc["kind"] not in ("ClusterRole", "Role"):
            continue
        kinds.add(doc["kind"])
        namespace = doc["metadata"]["namespace"] if doc["kind"] == "Role" else None
        for rule in doc["rules"]:
            assert "resourceNames" not in rule and "nonResourceURLs" not in rule
            for group in rule["apiGroups"]:
                for resource in rule["resources"]:
                    for verb in rule["verbs"]:
                        assert "*" not in (group, resource, verb), "no wildcards"
                        grants.add(Grant(group, resource, verb, namespace))
    assert kinds == {"ClusterRole", "Role"}
    return grants


def _whole_suite_ran(session: pytest.Session, config: pytest.Config) -> bool:
    ran = {Path(item.path).resolve() for item in session.items}
    every_file = {p.resolve() for p in (REPO_ROOT / "tests").rglob("test_*.py")}
    return ran == every_file and not config.option.keyword and not config.option.markexpr


def test_grant_matching() -> None:
    cluster = Grant("", "pods", "get", None)
    scoped = Grant("", "secrets", "get", SERVICE_NAMESPACE)
    assert cluster.allows(Call("", "pods", "get", "nublado-rachel"))
    assert not cluster.allows(Call("", "pods", "list", "nublado-rachel"))
    assert not cluster.allows(Call("apps", "pods", "get", ""))
    assert scoped.allows(Call("", "secrets", "get", SERVICE_NAMESPACE))
    assert not scoped.allows(Call("", "secrets", "get", "nublado-rachel"))


@pytest.mark.runs_last
def test_the_chart_grants_exactly_what_the_service_uses(request: pytest.FixtureRequest) -> None:
    grants = _grants()
    calls = set(RECORDER.calls)

    ungranted = sorted(
        (c.api_group, c.resource, c.verb, c.namespace)
        for c in calls
        if not any(g.allows(c) for g in grants)
    )
    assert not ungranted, f"calls the chart does not grant: {ungranted}"

    if _whole_suite_ran(request.session, request.config):
        unused = sorted(
            (g.api_group, g.resource, g.verb, g.namespace or "*")
            for g in grants
            if not any(g.allows(c) for c in calls)
        )
        assert not unused, f"granted but never used by any test: {unused}"
        # The Role is needed: the service reads Secrets in its own namespace only.
        assert Call("", "secrets", "get", SERVICE_NAMESPACE) in calls
        assert not [
            c
            for c in calls
            if c.resource == "secrets"
            and c.verb in ("get", "list")
            and c.namespace != SERVICE_NAMESPACE
        ]
