"""Each stack's loopback addresses are its own: a block claimed by binding, which no other
stack (or process) can claim while it is held."""

from __future__ import annotations

import socket

import pytest

from devstack.kube.cluster.addresses import CLAIM_PORT, AddressBlock, LoopbackAddresses
from devstack.kube.cluster.listeners import addresses_with_sockets


def test_two_claims_get_two_blocks_and_a_released_block_is_free_again() -> None:
    first = AddressBlock.claim()
    second = AddressBlock.claim()
    try:
        assert first.block != second.block
        # The claim is a socket the kernel gives to one holder only.
        with pytest.raises(OSError):
            socket.create_server((f"127.{first.block}.0.1", CLAIM_PORT), reuse_port=False)
        pods = {first.take_pod_address() for _ in range(300)}
        assert len(pods) == 300 and all(p.startswith(first.prefix) for p in pods)
        assert not any(p.startswith(second.prefix) for p in pods)
        service = second.service_address(0)
        assert second.is_service_address(service) and not first.is_service_address(service)
        assert not second.is_service_address(second.take_pod_address())
        assert set(first.describe()) == {"pods", "services"}
    finally:
        first.release()
        again = AddressBlock.claim()
        second.release()
        again.release()
    assert again.block == first.block


def test_a_pod_address_given_back_is_taken_again() -> None:
    block = AddressBlock.claim()
    try:
        taken = block.take_pod_address()
        block.give_back_pod_address(taken)
        assert block.take_pod_address() == taken
    finally:
        block.release()


def test_an_address_a_socket_lingers_at_is_passed_over_until_the_kernel_lets_it_go() -> None:
    """The next stack to claim a block hands out its addresses from the start again, while a
    connection an earlier pod's server closed still waits out TIME_WAIT at the first one."""
    addresses = LoopbackAddresses()
    try:
        first = addresses.take()
        addresses.give_back(first)
        server = socket.create_server((first, 7000))
        with server, socket.create_connection((first, 7000)) as client:
            server.accept()[0].close()
            client.recv(1)
        assert first in addresses_with_sockets(first)

        second = addresses.take()
        assert second != first
        # Once nothing is there any more, the address passed over is the first taken again.
        assert addresses.block().take_pod_address(in_use=set()) == first
    finally:
        addresses.release()


def test_fresh_addresses_passed_over_are_taken_once_free() -> None:
    block = AddressBlock.claim()
    try:
        lingering = {f"{block.prefix}1.1", f"{block.prefix}1.2"}
        assert block.take_pod_address(lingering) == f"{block.prefix}1.3"
        assert block.take_pod_address(lingering) == f"{block.prefix}1.4"
        assert block.take_pod_address() == f"{block.prefix}1.1"
        assert block.take_pod_address() == f"{block.prefix}1.2"
    finally:
        block.release()
