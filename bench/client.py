"""The service's REST API as a benchmark calls it from the main process (``requests``)."""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass

import requests

from bench.sse import SseEvent, SseParser

TERMINAL = ("complete", "failed")


@dataclass
class Outcome:
    """How an operation ended, as its event stream told it."""

    kind: str
    """``complete``, ``failed``, or ``unfinished`` if the stream ended without either."""
    finished_at: float
    """``time.perf_counter()`` when the terminal event was parsed."""
    events: list[SseEvent]


class SpawnerClient:
    def __init__(self, base_url: str, admin_token: str) -> None:
        self.api = f"{base_url}/spawner/v1"
        self.admin = {"Authorization": f"Bearer {admin_token}"}
        self.session = requests.Session()
        # Talking to a local stack: no proxies or netrc to look up on every request.
        self.session.trust_env = False

    def spawn(self, user: str, token: str, image: str, size: str = "small") -> requests.Response:
        return self.session.post(
            f"{self.api}/labs/{user}/spawn",
            json={"options": {"image": image, "size": size}, "env": {}},
            headers={"Authorization": f"Bearer {token}"},
            allow_redirects=False,
            timeout=30,
        )

    def delete(self, user: str) -> requests.Response:
        return self.session.delete(f"{self.api}/labs/{user}", headers=self.admin, timeout=30)

    def status(self, user: str) -> requests.Response:
        return self.session.get(f"{self.api}/labs/{user}", headers=self.admin, timeout=30)

    def follow(self, user: str, token: str, timeout: float = 120.0) -> Outcome:
        """Read the user's events until the operation completes or fails."""
        parser = SseParser()
        events: list[SseEvent] = []
        deadline = time.monotonic() + timeout
        with self.session.get(
            f"{self.api}/labs/{user}/events",
            headers={"Authorization": f"Bearer {token}"},
            stream=True,
            timeout=timeout,
        ) as response:
            if response.status_code != 200:
                return Outcome(f"http-{response.status_code}", time.perf_counter(), [])
            chunks = response.iter_content(None)
            for chunk in chunks:
                for event in parser.feed(chunk):
                    events.append(event)
                    if event.type in TERMINAL:
                        outcome = Outcome(event.type, time.perf_counter(), events)
                        # The service ends the stream right after its terminal event; reading
                        # to that end returns the connection to the pool for the next request,
                        # as a keep-alive client (JupyterHub's) does.
                        deque(chunks, maxlen=0)
                        return outcome
                if time.monotonic() > deadline:
                    break
        return Outcome("unfinished", time.perf_counter(), events)
