"""Spawn storms against a local stack of several replicas, driven through its balancer.

Each user's spawn is sent as JupyterHub sends it, and sent again when the balancer could not
get an answer from the replica it chose (a replica killed or stopping under the request), as
JupyterHub retries a spawn that failed to start: a repeated spawn of a lab already spawning
is answered 409 and changes nothing. A spawn queued is answered 303 to the lab's status.
"""

from __future__ import annotations

import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import requests

from devstack.demo import add_load_users
from devstack.gafaelfawr import GroupSpec
from devstack.stack import LocalStack

STORM_GROUP = GroupSpec("storm-users", 4000)
RETRIED = {502, 503, 504}
"""Answers after which a spawn is sent again: the balancer's, or 503 while Redis is away."""


@dataclass
class Storm:
    """What happened to each user's spawn."""

    tokens: dict[str, str]
    answers: dict[str, list[int]] = field(default_factory=dict)
    """Every status a user's spawn POSTs got, in order (connection failures as 0)."""
    refusals: dict[str, str] = field(default_factory=dict)
    """The body of each spawn's last answer that was not 303 (queued)."""

    def retried(self) -> int:
        return sum(len(codes) - 1 for codes in self.answers.values())

    def accepted(self) -> list[str]:
        return [user for user, codes in self.answers.items() if codes and codes[-1] in (303, 409)]


def add_users(stack: LocalStack, prefix: str, count: int, first_uid: int) -> dict[str, str]:
    """Register ``count`` users with Gafaelfawr; their tokens by name."""
    names = [f"{prefix}{index:03d}" for index in range(count)]
    return add_load_users(stack.gafaelfawr, names, first_uid=first_uid, group=STORM_GROUP)


def spawn(
    stack: LocalStack, user: str, token: str, deadline: float, refusals: dict[str, str]
) -> list[int]:
    """POST the user's spawn until a replica answers it; every status seen (the body of
    the last that is not 303 in ``refusals``)."""
    body = {"options": {"image": stack.demo_image, "size": "small"}, "env": {}}
    codes: list[int] = []
    while time.monotonic() < deadline:
        try:
            response = requests.post(
                f"{stack.spawner_url}/spawner/v1/labs/{user}/spawn",
                json=body,
                headers={"Authorization": f"Bearer {token}"},
                timeout=30,
                allow_redirects=False,
            )
            codes.append(response.status_code)
            if response.status_code != 303:
                refusals[user] = response.text
            if response.status_code not in RETRIED:
                return codes
        except requests.ConnectionError:
            codes.append(0)
        time.sleep(0.2)
    return codes


def start_storm(
    stack: LocalStack, tokens: dict[str, str], pool: ThreadPoolExecutor, timeout: float = 120
) -> tuple[Storm, list[Any]]:
    """Send every user's spawn at once from ``pool``; the storm and its futures."""
    storm = Storm(tokens)
    deadline = time.monotonic() + timeout

    def one(user: str) -> None:
        storm.answers[user] = spawn(stack, user, tokens[user], deadline, storm.refusals)

    return storm, [pool.submit(one, user) for user in tokens]


def statuses(stack: LocalStack, admin: str, users: list[str]) -> dict[str, str | None]:
    """Each user's lab status through the balancer (None when it could not be read)."""
    found: dict[str, str | None] = {}
    headers = {"Authorization": f"Bearer {admin}"}
    for user in users:
        try:
            response = requests.get(
                f"{stack.spawner_url}/spawner/v1/labs/{user}", headers=headers, timeout=10
            )
            found[user] = response.json()["status"] if response.status_code == 200 else None
        except (requests.RequestException, ValueError, KeyError):
            found[user] = None
    return found


def lab_pods_per_user(stack: LocalStack, users: list[str]) -> Counter[str]:
    """How many pods the emulated cluster holds in each of ``users``' lab namespaces (a
    storm's users run nothing but their lab)."""
    prefix = stack.service_config()["namespacePrefix"]
    return Counter({user: len(stack.kube.store.list("pods", f"{prefix}-{user}")) for user in users})


def await_running(stack: LocalStack, admin: str, users: list[str], timeout: float) -> None:
    """Wait until every one of ``users``' labs is running, as the balancer answers."""
    deadline = time.monotonic() + timeout
    while set(statuses(stack, admin, users).values()) != {"running"}:
        assert time.monotonic() < deadline, "not every lab is running in time"
        time.sleep(0.5)
