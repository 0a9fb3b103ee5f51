"""Remote kernels through the service: ask for one beside the lab, read it, wait for it to
run, delete it.

Reached as ``LabSpawnerClient.kernels``; the routes are ``/spawner/v1/labs/<user>/kernels``.
The caller chooses the kernel's connection key and sends it once, when the kernel is
created: the service keeps it in the kernel's Secret and never answers it, so only the
caller can talk to the kernel. :class:`~labspawner.kernels.provisioner.LabKernelProvisioner`
makes these calls for Jupyter; they are here too for anyone who manages kernels directly.
Waiting is polling, as for clusters: a kernel's state is one small record.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping
from typing import Any

import requests

from labspawner.errors import InvalidRequestError, KernelFailedError, LabSpawnerError, NotFoundError
from labspawner.models import Kernel

TRANSPORT = "tcp"
SIGNATURE_SCHEME = "hmac-sha256"
KEY_PATTERN = re.compile(r"^[0-9a-f]{32,128}$")
"""A key as the service (and the kernel pod's start-up) accepts it: 16 to 64 random bytes, in
lowercase hex. Not imported from :mod:`.launch`, which ``python -m`` runs as a script: the
client imports this module, and so would import the script before it runs."""
POLL_SECONDS = 0.25

Request = Callable[..., requests.Response]
"""``LabSpawnerClient._request``: (method, path, *, prefix=..., **requests' arguments)."""


def started(kernel: Kernel) -> bool:
    """Whether ``kernel`` runs (true) or is still starting (false).

    Raises :class:`KernelFailedError` when it will never run: it failed (the service's reason
    in the message), its process ended, or it is being deleted. The code says which:
    ``failed``, ``exited`` or ``terminating``.
    """
    if kernel.running:
        return True
    if kernel.failed:
        raise KernelFailedError(f"kernel {kernel.kernel_id} failed: {kernel.error}", code="failed")
    if kernel.exited:
        raise KernelFailedError(
            f"kernel {kernel.kernel_id} exited with code {kernel.exit_code} before it ran",
            code="exited",
        )
    if kernel.terminating:
        raise KernelFailedError(f"kernel {kernel.kernel_id} is being deleted", code="terminating")
    return False


class Kernels:
    """The kernel calls of one :class:`~labspawner.LabSpawnerClient`."""

    def __init__(self, request: Request) -> None:
        self._request = request

    def create(
        self,
        username: str,
        size: str,
        *,
        key: str,
        image: str | None = None,
        env: Mapping[str, str] | None = None,
        kernel_id: str | None = None,
        wait: bool = True,
        timeout: float = 300.0,
    ) -> Kernel:
        """Start a kernel of ``size`` (a lab size or hardware tier name) in ``username``'s lab
        namespace, listening with ``key`` (32 to 128 lowercase hex digits; keep it, since the
        service never gives it back); with ``wait``, return it once it runs.

        ``image`` defaults to the lab's, ``env`` is the kernel's extra environment and
        ``kernel_id`` its name (the service makes one if absent). The service's errors come
        as they are: ``ConflictError`` with code ``conflict`` without a running lab or when
        the id is taken, ``quota_exceeded`` past the budget; ``InvalidRequestError`` for a
        size or image the user may not have. Raises :class:`KernelFailedError` if it cannot
        come up while waited for.
        """
        if not KEY_PATTERN.match(key):
            # Checked here so that a malformed key never travels, nor comes back in an error.
            raise InvalidRequestError(
                "the key must be 32 to 128 lowercase hex digits", code="invalid_request"
            )
        body: dict[str, Any] = {
            "size": size,
            "connection": {
                "transport": TRANSPORT,
                "signature_scheme": SIGNATURE_SCHEME,
                "key": key,
            },
        }
        if image is not None:
            body["image"] = image
        if env:
            body["env"] = {str(name): str(value) for name, value in env.items()}
        if kernel_id is not None:
            body["kernel_id"] = kernel_id
        created = Kernel.from_json(
            self._request("POST", f"/labs/{username}/kernels", json=body).json()
        )
        if not wait:
            return created
        return self.wait(username, created.kernel_id, timeout=timeout)

    def of(self, username: str) -> list[Kernel]:
        """The user's kernels."""
        answer = self._request("GET", f"/labs/{username}/kernels").json()
        return [Kernel.from_json(item) for item in answer]

    def get(self, username: str, kernel_id: str) -> Kernel:
        """One kernel; :class:`NotFoundError` if the user has none of that id."""
        answer = self._request("GET", f"/labs/{username}/kernels/{kernel_id}").json()
        return Kernel.from_json(answer)

    def wait(self, username: str, kernel_id: str, *, timeout: float = 300.0) -> Kernel:
        """The kernel once it runs; :class:`KernelFailedError` if it never will (see
        :func:`started`), or with code ``timeout`` if ``timeout`` seconds pass first."""
        deadline = time.monotonic() + timeout
        while True:
            kernel = self.get(username, kernel_id)
            if started(kernel):
                return kernel
            if time.monotonic() > deadline:
                raise KernelFailedError(f"kernel {kernel_id} did not start in time", code="timeout")
            time.sleep(POLL_SECONDS)

    def delete(
        self,
        username: str,
        kernel_id: str,
        *,
        grace_seconds: int | None = None,
        wait: bool = False,
        timeout: float = 120.0,
    ) -> Kernel:
        """Delete a kernel: its process gets ``grace_seconds`` (0 to 300; the service's
        default is 5) to end before it is killed. Returns the kernel as the service answered
        (``terminating``); with ``wait``, once the service no longer has it."""
        params = {} if grace_seconds is None else {"grace_seconds": int(grace_seconds)}
        answer = self._request("DELETE", f"/labs/{username}/kernels/{kernel_id}", params=params)
        kernel = Kernel.from_json(answer.json())
        if wait:
            self.wait_gone(username, kernel_id, timeout=timeout)
        return kernel

    def wait_gone(self, username: str, kernel_id: str, *, timeout: float = 120.0) -> None:
        """Return once the service no longer has the kernel (its pod is gone)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                self.get(username, kernel_id)
            except NotFoundError:
                return
            if time.monotonic() > deadline:
                raise LabSpawnerError(f"kernel {kernel_id} was not deleted in time", code="timeout")
            time.sleep(POLL_SECONDS)
