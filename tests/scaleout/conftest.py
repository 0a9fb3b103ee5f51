"""The scale-out stack: three replicas behind the balancer, Redis as a primary, a replica and
three sentinels, and the emulator; short leases so that work moves within seconds.

One stack serves every test of the package (starting it is the slow part); each test leaves
every replica running and Redis with a replica, as it found them.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from devstack.stack import LocalStack, StackOptions

LEASE_SECONDS = 2.0
"""Every elected loop's lease: a dead leader's successor leads within about 1.25 of it."""


@pytest.fixture(scope="package")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    options = StackOptions(
        state_dir=tmp_path_factory.mktemp("devstack-scaleout"),
        replicas=3,
        workers=1,
        redis_sentinel=True,
        nodes=8,
        pull_seconds=0.2,
        # Labs take a moment to start, so spawns are under way when something fails.
        start_seconds=1.0,
        config_overrides={
            "watcher": {"leaseSeconds": LEASE_SECONDS},
            "images": {"leaseSeconds": LEASE_SECONDS},
            "prepuller": {"leaseSeconds": LEASE_SECONDS},
            # An operation whose worker died or lost Redis mid-step is resumed soon after.
            "operations": {"leaseSeconds": 2, "scanSeconds": 0.5},
            "limits": {"mutationsPerMinute": 1000},
        },
    )
    stack = LocalStack(options).start()
    yield stack
    stack.stop()
