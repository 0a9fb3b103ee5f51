"""The Python client's kernel calls (``LabSpawnerClient.kernels``) against the service on the
real-labs stack: a kernel pod runs ``python -m labspawner.kernels.launch`` as a real process
on its own loopback address. Read, list, wait and delete, the key that never comes back, and
what another user gets.

The helpers here (a user's running lab, kernels cleared after each test, an image no node
can pull) serve the kernel provisioner's tests too."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import secrets
import socket
from collections.abc import Iterator
from typing import Any

import pytest
from labspawner import (
    ConflictError,
    InvalidRequestError,
    LabSpawnerClient,
    NotFoundError,
    PermissionDeniedError,
)
from labspawner.errors import KernelFailedError
from labspawner.kernels.launch import DEFAULT_PORTS
from labspawner.models import Kernel

from app.workloads.kernel.schemas import KernelSchema
from devstack.stack import LocalStack
from tests.labs.conftest import wait_for
from tests.support.images import unpulled_image
from tests.support.real_labs import running_lab

USER = "wile"
"""Owns the kernels here; the provisioner's tests use rachel's, so that neither user's
mutations a minute (creates and deletes count, with spawns) run out in one test run."""
OTHER = "rachel"


def delete_kernels(client: LabSpawnerClient, user: str) -> None:
    """Delete whatever kernels ``user`` has and wait until the service has none."""
    for kernel in client.kernels.of(user):
        with contextlib.suppress(NotFoundError):
            client.kernels.delete(user, kernel.kernel_id, grace_seconds=0)
    wait_for(lambda: not client.kernels.of(user), timeout=60)


def kernel_pods(stack: LocalStack, user: str) -> list[str]:
    """The names of the kernel pods in ``user``'s lab namespace."""
    return [
        pod["metadata"]["name"]
        for pod in stack.kube.store.list("pods", f"nublado-{user}")
        if pod["metadata"]["name"].startswith("kernel-")
    ]


@pytest.fixture(scope="module")
def user_lab(real_lab_stack: LocalStack, real_tokens: dict[str, str]) -> Iterator[None]:
    with running_lab(real_lab_stack, real_tokens, USER):
        yield


@pytest.fixture
def user_client(
    real_lab_stack: LocalStack, real_tokens: dict[str, str], user_lab: None
) -> Iterator[LabSpawnerClient]:
    """The owner's client, with the lab running; whatever kernels a test leaves are deleted
    and waited out after it, so that each test starts with none."""
    client = LabSpawnerClient(real_lab_stack.spawner_url, real_tokens[USER])
    yield client
    delete_kernels(client, USER)
    client.close()


@pytest.fixture
def other_client(
    real_lab_stack: LocalStack, real_tokens: dict[str, str]
) -> Iterator[LabSpawnerClient]:
    """Another user's client, with a token of her own (and no lab in this module)."""
    client = LabSpawnerClient(real_lab_stack.spawner_url, real_tokens[OTHER])
    yield client
    client.close()


def new_key() -> str:
    return secrets.token_hex(32)


def test_the_clients_kernel_has_the_services_fields() -> None:
    """The client reads every field the service's kernel body has, in its order."""
    served = list(KernelSchema().fields)
    assert [f.name for f in dataclasses.fields(Kernel)] == served


@pytest.mark.slow
def test_create_wait_read_list_and_delete_a_kernel(
    user_client: LabSpawnerClient, real_lab_stack: LocalStack
) -> None:
    key = new_key()
    created = user_client.kernels.create(USER, "small", key=key, env={"GREETING": "hi"}, wait=False)
    assert created.status == "starting" and created.owner == USER
    assert created.namespace == f"nublado-{USER}" and created.size == "small"
    assert created.image  # the lab's, since none was asked for
    # Jupyter's kernel ids are uuid4s; the service makes one the same way.
    assert len(created.kernel_id) == 36 and created.kernel_id.count("-") == 4

    kernel = user_client.kernels.wait(USER, created.kernel_id, timeout=60)
    assert kernel.running and kernel.ip and kernel.ip.startswith("127.")
    assert kernel.ports == DEFAULT_PORTS
    assert kernel.exit_code is None and kernel.error is None
    # Running means its heartbeat port answers, here too.
    with socket.create_connection((kernel.ip, kernel.ports["hb"]), timeout=5):
        pass
    assert f"kernel-{kernel.kernel_id}" in kernel_pods(real_lab_stack, USER)
    assert [k.kernel_id for k in user_client.kernels.of(USER)] == [kernel.kernel_id]
    assert user_client.kernels.get(USER, kernel.kernel_id) == kernel

    # The key went in once and is never answered back, nor written into the pod.
    # The bodies as served, through the client's own authenticated session.
    base = f"{user_client.base_url}/spawner/v1/labs/{USER}/kernels"
    answers = [
        user_client.session.get(base, timeout=10).text,
        user_client.session.get(f"{base}/{kernel.kernel_id}", timeout=10).text,
    ]
    assert all(answers)
    assert not [text for text in answers if key in text]
    (pod,) = [
        p
        for p in real_lab_stack.kube.store.list("pods", f"nublado-{USER}")
        if p["metadata"]["name"] == f"kernel-{kernel.kernel_id}"
    ]
    assert key not in json.dumps(pod)

    deleted = user_client.kernels.delete(USER, kernel.kernel_id, grace_seconds=0, wait=True)
    assert deleted.terminating and deleted.kernel_id == kernel.kernel_id
    with pytest.raises(NotFoundError) as gone:
        user_client.kernels.get(USER, kernel.kernel_id)
    assert (gone.value.status, gone.value.code) == (404, "not_found")
    assert f"kernel-{kernel.kernel_id}" not in kernel_pods(real_lab_stack, USER)
    with pytest.raises(NotFoundError):
        user_client.kernels.delete(USER, kernel.kernel_id)


@pytest.mark.slow
def test_a_kernel_id_is_chosen_once_and_requests_are_checked(
    user_client: LabSpawnerClient, real_lab_stack: LocalStack
) -> None:
    kernel = user_client.kernels.create(USER, "small", key=new_key(), kernel_id="chosen-1")
    assert kernel.kernel_id == "chosen-1" and kernel.running
    with pytest.raises(ConflictError) as taken:
        user_client.kernels.create(USER, "small", key=new_key(), kernel_id="chosen-1")
    assert (taken.value.status, taken.value.code) == (409, "conflict")

    for refused in (
        {"kernel_id": "Not_Valid"},
        {"env": {"1NOT-A-NAME": "x"}},
        {"size": "no-such-size"},
    ):
        arguments: dict[str, Any] = {"size": "small", "key": new_key(), "wait": False, **refused}
        with pytest.raises(InvalidRequestError) as invalid:
            user_client.kernels.create(USER, **arguments)
        assert (invalid.value.status, invalid.value.code) == (422, "invalid_request"), refused
    with pytest.raises(InvalidRequestError) as grace:
        user_client.kernels.delete(USER, "chosen-1", grace_seconds=301)
    assert grace.value.status == 422
    assert user_client.kernels.get(USER, "chosen-1").running

    # A malformed key is refused before it travels, and is not repeated in the error.
    with pytest.raises(InvalidRequestError) as bad_key:
        user_client.kernels.create(USER, "small", key="Secret-Not-Hex")
    assert bad_key.value.status is None and "Secret-Not-Hex" not in str(bad_key.value)
    assert [k.kernel_id for k in user_client.kernels.of(USER)] == ["chosen-1"]
    assert kernel_pods(real_lab_stack, USER) == ["kernel-chosen-1"]


@pytest.mark.slow
def test_another_user_can_neither_see_nor_delete_the_kernel(
    user_client: LabSpawnerClient, other_client: LabSpawnerClient
) -> None:
    kernel = user_client.kernels.create(USER, "small", key=new_key(), timeout=60)

    # Through the owner's routes: her token acts for another user.
    for call in (
        lambda: other_client.kernels.get(USER, kernel.kernel_id),
        lambda: other_client.kernels.of(USER),
        lambda: other_client.kernels.delete(USER, kernel.kernel_id, grace_seconds=0),
    ):
        with pytest.raises(PermissionDeniedError) as denied:
            call()
        assert denied.value.status == 403
    # Through her own: she has no kernel of that id.
    with pytest.raises(NotFoundError):
        other_client.kernels.get(OTHER, kernel.kernel_id)
    with pytest.raises(NotFoundError):
        other_client.kernels.delete(OTHER, kernel.kernel_id, grace_seconds=0)
    assert other_client.kernels.of(OTHER) == []
    assert user_client.kernels.get(USER, kernel.kernel_id).running


@pytest.mark.slow
def test_without_a_running_lab_there_is_no_kernel(other_client: LabSpawnerClient) -> None:
    with pytest.raises(ConflictError) as refused:
        other_client.kernels.create(OTHER, "small", key=new_key(), wait=False)
    assert (refused.value.status, refused.value.code) == (409, "conflict")


@pytest.mark.slow
def test_waiting_for_a_kernel_that_fails_raises_the_services_reason(
    user_client: LabSpawnerClient, real_lab_stack: LocalStack, real_tokens: dict[str, str]
) -> None:
    with LabSpawnerClient(real_lab_stack.spawner_url, real_tokens["admin"]) as admin:
        image = unpulled_image(real_lab_stack, admin)
    with image_pull_fails(real_lab_stack, image, USER):
        with pytest.raises(KernelFailedError) as failed:
            user_client.kernels.create(USER, "small", key=new_key(), image=image, timeout=60)
        assert failed.value.code == "failed"
        assert "manifest unknown" in str(failed.value)
        (kernel,) = user_client.kernels.of(USER)
        assert kernel.failed and kernel.error and "manifest unknown" in kernel.error
        # The service pins the image it was asked for to its digest.
        assert kernel.image.split("@")[0] == image and kernel.ip is None
        user_client.kernels.delete(USER, kernel.kernel_id, grace_seconds=0, wait=True)


@contextlib.contextmanager
def image_pull_fails(stack: LocalStack, image: str, user: str) -> Iterator[None]:
    """Pulls of ``image`` fail (``manifest unknown``) until ``user`` has no kernel pod left:
    clearing the fault earlier would let a waiting pod pull it, and the image would then be on
    a node for the tests that come after."""
    stack.kube.cluster.faults.set("image_pull", f"{image}*", "manifest unknown")
    try:
        yield
        wait_for(lambda: not kernel_pods(stack, user), timeout=30)
    finally:
        stack.kube.cluster.faults.clear("image_pull")
