"""Each stack's loopback addresses are its own: a block claimed by binding, which no other
stack (or process) can claim while it is held."""

from __future__ import annotations

import socket

import pytest

from devstack.kube.cluster.addresses import CLAIM_PORT, AddressBlock


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
