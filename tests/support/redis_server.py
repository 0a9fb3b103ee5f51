"""A private redis-server for tests that they can stop and restart on the same port."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from devstack.redis_process import RedisProcess


class RedisServer(RedisProcess):
    """``RedisProcess`` in its own temporary directory, removed by ``close``."""

    def __init__(self) -> None:
        self._tmp = Path(tempfile.mkdtemp(prefix="spawner-redis-"))
        super().__init__(self._tmp)

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self._tmp, ignore_errors=True)
