"""The loopback addresses of a stack that runs pods as processes: a block of its own.

Each pod's processes listen on an address of their own, and each Service's forwarder on its
cluster IP, all in 127.0.0.0/8. Two stacks on one machine (``make run`` beside ``make test``,
or two checkouts) must never hand out the same addresses: a lab whose port is taken at its
address would otherwise look ready because the other stack's lab answers there. So each stack
claims a /16 of its own, ``127.B.0.0/16``, by binding a listening socket at ``127.B.0.1`` on
``CLAIM_PORT``, held as long as the stack runs: the kernel gives that address and port to one
socket only, whichever stack asks first, and takes it back when the process ends however it
ends. A stack tries ``B`` from 1 up and keeps the first block it can claim (127.0.0.0/16
stays the stack's own servers', on 127.0.0.1).

Inside the block, pods get addresses from ``127.B.1.1`` to ``127.B.127.254`` and Services
from ``127.B.128.1`` to ``127.B.254.254``; ``127.B.0.0/24`` holds the claim only.

A pod never gets an address the kernel still has a socket at. In a cluster each pod has a
network namespace of its own, so nothing a pod leaves behind reaches the next pod given its
address; here the sockets outlive the pod on the shared loopback: a connection its server
closed waits out TIME_WAIT for a minute, and a server that does not set ``SO_REUSEADDR``
cannot bind that address and port until it ends. A block claimed again by the next stack
hands out the same addresses from the start, so the check is the kernel's table, not memory.
"""

from __future__ import annotations

import errno
import socket
import threading
from collections import deque
from collections.abc import Container

from devstack.kube.cluster.listeners import addresses_with_sockets

CLAIM_PORT = 17661
"""The port bound at ``127.B.0.1`` to claim block ``B``."""

FIRST_BLOCK, LAST_BLOCK = 1, 253
_PER_ROW = 254
_POD_ROWS = range(1, 128)
_SERVICE_ROWS = range(128, 255)


class AddressBlocksTaken(RuntimeError):
    """Every block is claimed by another stack."""


class AddressBlock:
    """``127.B.0.0/16``, claimed for as long as this object holds its socket."""

    def __init__(self, block: int, claim: socket.socket) -> None:
        self.block = block
        self._claim = claim
        self._lock = threading.Lock()
        self._free_pods: deque[int] = deque()
        """Addresses given back (and fresh ones passed over), the longest free first."""
        self._next_pod = 0
        self._next_service = 0

    @classmethod
    def claim(cls) -> AddressBlock:
        """The first block no other stack holds."""
        for block in range(FIRST_BLOCK, LAST_BLOCK + 1):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            try:
                sock.bind((f"127.{block}.0.1", CLAIM_PORT))
                sock.listen(1)
            except OSError as exc:
                sock.close()
                if exc.errno == errno.EADDRINUSE:
                    continue
                raise
            return cls(block, sock)
        raise AddressBlocksTaken("every loopback address block is claimed by another stack")

    def release(self) -> None:
        self._claim.close()

    @property
    def prefix(self) -> str:
        return f"127.{self.block}."

    def describe(self) -> dict[str, str]:
        """The block's ranges, as the stack's state file lists them."""
        return {
            "pods": f"{self.prefix}{_POD_ROWS[0]}.1-{self.prefix}{_POD_ROWS[-1]}.254",
            "services": f"{self.prefix}{_SERVICE_ROWS[0]}.1-{self.prefix}{_SERVICE_ROWS[-1]}.254",
        }

    # Pods: taken and given back, as pods come and go -----------------------------------

    def take_pod_address(self, in_use: Container[str] = frozenset()) -> str:
        """A free address none of ``in_use`` (addresses the kernel has sockets at): the one
        given back longest ago, else the next never handed out."""
        with self._lock:
            for index in self._free_pods:
                if self._pod_address(index) not in in_use:
                    self._free_pods.remove(index)
                    return self._pod_address(index)
            capacity = len(_POD_ROWS) * _PER_ROW
            while self._next_pod < capacity:
                index, self._next_pod = self._next_pod, self._next_pod + 1
                if self._pod_address(index) not in in_use:
                    return self._pod_address(index)
                self._free_pods.append(index)  # taken again once its sockets are gone
            raise AddressBlocksTaken(f"all {capacity} pod addresses of the block are in use")

    def give_back_pod_address(self, address: str) -> None:
        parts = address.split(".")
        if len(parts) != 4 or not address.startswith(self.prefix):
            return
        index = (int(parts[2]) - _POD_ROWS[0]) * _PER_ROW + int(parts[3]) - 1
        with self._lock:
            if index not in self._free_pods:
                self._free_pods.append(index)

    def _pod_address(self, index: int) -> str:
        return f"{self.prefix}{_POD_ROWS[0] + index // _PER_ROW}.{index % _PER_ROW + 1}"

    # Services: handed out in turn, never the same twice while the block lasts --------------

    def service_address(self, count: int) -> str:
        """The ``count``-th Service's cluster IP (counts wrap round the Services' range)."""
        index = count % (len(_SERVICE_ROWS) * _PER_ROW)
        return f"{self.prefix}{_SERVICE_ROWS[0] + index // _PER_ROW}.{index % _PER_ROW + 1}"

    def is_service_address(self, address: str) -> bool:
        parts = address.split(".")
        return (
            len(parts) == 4
            and address.startswith(self.prefix)
            and parts[2].isdigit()
            and int(parts[2]) in _SERVICE_ROWS
        )


class LoopbackAddresses:
    """The stack's block, claimed when a pod or a Service first needs an address (a stack
    that runs no process claims none) and let go when the cluster stops."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._block: AddressBlock | None = None

    def block(self) -> AddressBlock:
        with self._lock:
            if self._block is None:
                self._block = AddressBlock.claim()
            return self._block

    def claimed(self) -> AddressBlock | None:
        """The block, if one was claimed."""
        with self._lock:
            return self._block

    def take(self) -> str:
        """A free pod address no socket lingers at."""
        block = self.block()
        return block.take_pod_address(addresses_with_sockets(block.prefix))

    def give_back(self, address: str) -> None:
        block = self.claimed()
        if block is not None:
            block.give_back_pod_address(address)

    def service_address(self, count: int) -> str:
        return self.block().service_address(count)

    def is_service_address(self, address: str) -> bool:
        block = self.claimed()
        return block is not None and block.is_service_address(address)

    def release(self) -> None:
        with self._lock:
            block, self._block = self._block, None
        if block is not None:
            block.release()
