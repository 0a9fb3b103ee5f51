"""Remote kernels through Jupyter's own machinery: a ``KernelManager`` (or a
``MultiKernelManager``) given a kernelspec that names the ``lab-spawner`` provisioner starts
its kernel in a pod through the service on the real-labs stack, where the pod runs
``python -m labspawner.kernels.launch`` and so a real ipykernel on its own loopback address.
Jupyter's clients compute there, interrupt, restart and shut the kernel down; a new manager
takes a kernel over from persisted provisioner information; and a kernel the service refuses
or that cannot come up fails its launch with the reason."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from jupyter_client import BlockingKernelClient, KernelManager
from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.multikernelmanager import AsyncMultiKernelManager
from jupyter_client.provisioning import KernelProvisionerFactory
from jupyter_core.utils import run_sync
from labspawner import InvalidRequestError, LabSpawnerClient, NotFoundError
from labspawner.errors import KernelFailedError
from labspawner.kernels.kernelspec import install
from labspawner.kernels.provisioner import LabKernelProvisioner

from devstack.stack import LocalStack
from tests.clients.test_client_kernels import delete_kernels, image_pull_fails, kernel_pods
from tests.labs.conftest import wait_for
from tests.support.images import unpulled_image
from tests.support.real_labs import running_lab

USER = "rachel"
NAMESPACE = f"nublado-{USER}"
NAME = "remote-small"


@pytest.fixture(scope="module")
def user_lab(real_lab_stack: LocalStack, real_tokens: dict[str, str]) -> Iterator[None]:
    with running_lab(real_lab_stack, real_tokens, USER):
        yield


@pytest.fixture
def user_client(
    real_lab_stack: LocalStack, real_tokens: dict[str, str], user_lab: None
) -> Iterator[LabSpawnerClient]:
    """rachel's client, with her lab running; kernels a failed test leaves are deleted."""
    client = LabSpawnerClient(real_lab_stack.spawner_url, real_tokens[USER])
    yield client
    delete_kernels(client, USER)
    client.close()


@pytest.fixture
def remote_env(
    monkeypatch: pytest.MonkeyPatch, real_lab_stack: LocalStack, real_tokens: dict[str, str]
) -> None:
    """The environment of rachel's lab as a plain API call spawned it, where the provisioner
    finds the service and her token; whose kernel it is, the service says from the token
    (nothing of JupyterHub's, such as JUPYTERHUB_USER, is there)."""
    monkeypatch.delenv("LAB_SPAWNER_TOKEN", raising=False)
    monkeypatch.delenv("JUPYTERHUB_USER", raising=False)
    monkeypatch.setenv("LAB_SPAWNER_URL", real_lab_stack.spawner_url)
    monkeypatch.setenv("ACCESS_TOKEN", real_tokens[USER])
    monkeypatch.setenv("LAB_OWNER", USER)


def kernelspecs(
    prefix: Path, name: str = NAME, *, env: dict[str, str] | None = None, **config: Any
) -> KernelSpecManager:
    """A kernelspec manager that sees one remote kernelspec, installed as users install it
    (``python -m labspawner.kernels install``), with a kernelspec ``env`` stanza if given."""
    directory = install(name, size=config.pop("size", "small"), prefix=prefix, **config)
    if env:
        spec = json.loads((directory / "kernel.json").read_text())
        spec["env"] = env
        (directory / "kernel.json").write_text(json.dumps(spec))
    return KernelSpecManager(kernel_dirs=[str(directory.parent)])


def run(client: BlockingKernelClient, code: str) -> tuple[dict[str, Any], str, str]:
    """Execute ``code``: the reply's content, the result's text and what was printed."""
    results: list[str] = []
    printed: list[str] = []

    def output(message: dict[str, Any]) -> None:
        if message["msg_type"] == "execute_result":
            results.append(message["content"]["data"]["text/plain"])
        elif message["msg_type"] == "stream":
            printed.append(message["content"]["text"])

    reply = client.execute_interactive(code, timeout=60, output_hook=output)
    return reply["content"], "".join(results), "".join(printed)


def connected(manager: KernelManager) -> BlockingKernelClient:
    client = manager.client()
    client.start_channels()
    client.wait_for_ready(timeout=60)
    return client


def interrupted(manager: KernelManager, client: BlockingKernelClient) -> dict[str, Any]:
    """Run a minute's sleep, interrupt it once the sleep has begun (the cell says so before
    it sleeps), and return the execution's reply once the kernel is idle again (it sets
    requests that arrive before then aside as aborted)."""
    msg_id = client.execute("import time; print('sleeping', flush=True); time.sleep(60)")

    def said(text: str) -> Callable[[], bool]:
        def check() -> bool:
            message = client.get_iopub_msg(timeout=30)
            if message["parent_header"].get("msg_id") != msg_id:
                return False
            content = message["content"]
            return bool(content.get("text") == text or content.get("execution_state") == text)

        return check

    wait_for(said("sleeping\n"), timeout=30, interval=0)
    started = time.monotonic()
    manager.interrupt_kernel()
    reply = client.get_shell_msg(timeout=30)
    assert reply["parent_header"].get("msg_id") == msg_id
    wait_for(said("idle"), timeout=30, interval=0)
    # Interrupted, not finished: well before the minute is over.
    assert time.monotonic() - started < 30
    return dict(reply["content"])


def pod_of(stack: LocalStack, kernel_id: str) -> dict[str, Any] | None:
    found: dict[str, Any] | None = stack.kube.store.get("pods", NAMESPACE, f"kernel-{kernel_id}")
    return found


def no_kernels(stack: LocalStack, client: LabSpawnerClient) -> Callable[[], bool]:
    return lambda: not kernel_pods(stack, USER) and not client.kernels.of(USER)


@pytest.mark.slow
def test_a_remote_kernel_computes_is_interrupted_restarts_and_shuts_down(
    remote_env: None,
    user_client: LabSpawnerClient,
    real_lab_stack: LocalStack,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    specs = kernelspecs(tmp_path, env={"GREETING": "hello ${LAB_OWNER}"})
    monkeypatch.setenv("LAB_ONLY", "stays in the lab")
    manager = KernelManager(kernel_spec_manager=specs, kernel_name=NAME)
    # As Jupyter servers start kernels: their whole environment, plus the session's name.
    manager.start_kernel(env={**os.environ, "JPY_SESSION_NAME": "analysis.ipynb"})
    assert isinstance(manager.provisioner, LabKernelProvisioner) and manager.has_kernel
    kernel = user_client.kernels.get(USER, manager.kernel_id)
    assert kernel.running and (manager.ip, manager.shell_port) == (kernel.ip, 50001)
    assert kernel_pods(real_lab_stack, USER) == [f"kernel-{manager.kernel_id}"]
    key = manager.session.key.decode()
    assert key not in json.dumps(pod_of(real_lab_stack, manager.kernel_id))
    assert manager.is_alive()

    client = connected(manager)
    content, result, _ = run(client, "2 + 2")
    assert (content["status"], result) == ("ok", "4")
    # The pod has what the caller and the kernelspec asked for, not the whole environment.
    _, _, printed = run(
        client,
        "import os; print(os.environ.get('JPY_SESSION_NAME'), os.environ.get('GREETING'),"
        " 'LAB_ONLY' in os.environ, 'KERNEL_KEY' in os.environ)",
    )
    assert printed == "analysis.ipynb hello rachel False False\n"

    reply = interrupted(manager, client)
    assert (reply["status"], reply["ename"]) == ("error", "KeyboardInterrupt")
    content, _, _ = run(client, "x = 41")
    assert content["status"] == "ok"
    client.stop_channels()

    manager.restart_kernel()
    restarted = user_client.kernels.get(USER, manager.kernel_id)
    assert restarted.running and manager.is_alive()
    assert kernel_pods(real_lab_stack, USER) == [f"kernel-{manager.kernel_id}"]
    # A new pod has a key of its own.
    assert manager.session.key.decode() != key
    client = connected(manager)
    content, _, _ = run(client, "x")
    assert (content["status"], content["ename"]) == ("error", "NameError")
    content, result, _ = run(client, "2 + 2")
    assert (content["status"], result) == ("ok", "4")
    client.stop_channels()

    manager.shutdown_kernel()
    assert not manager.has_kernel and not manager.is_alive()
    wait_for(no_kernels(real_lab_stack, user_client), timeout=30)


@pytest.mark.slow
def test_a_multi_kernel_manager_runs_two_remote_kernels_side_by_side(
    remote_env: None, user_client: LabSpawnerClient, real_lab_stack: LocalStack, tmp_path: Path
) -> None:
    specs = kernelspecs(tmp_path)

    async def two_kernels() -> tuple[list[str], list[str], list[str], list[str]]:
        kernels = AsyncMultiKernelManager(kernel_spec_manager=specs)
        # Started together: the provisioner waits for the service off the event loop.
        ids = list(await asyncio.gather(*(kernels.start_kernel(kernel_name=NAME) for _ in "ab")))
        addresses = [kernels.get_kernel(kernel_id).ip for kernel_id in ids]
        listed = sorted(k.kernel_id for k in user_client.kernels.of(USER))
        answers = []
        for index, kernel_id in enumerate(ids):
            client = kernels.get_kernel(kernel_id).client()
            client.start_channels()
            await client.wait_for_ready(timeout=60)
            seen: list[str] = []
            reply = await client.execute_interactive(
                f"mine = {index}\n'mine' in dir(), 'theirs' in dir(), mine * 10",
                timeout=60,
                output_hook=_results(seen),
            )
            await client.execute_interactive("theirs = True", timeout=60)
            assert reply["content"]["status"] == "ok"
            answers += seen
            client.stop_channels()
        await kernels.shutdown_all()
        return ids, addresses, listed, answers

    ids, addresses, listed, answers = asyncio.run(two_kernels())
    assert len(set(ids)) == 2 and listed == sorted(ids)
    assert len(set(addresses)) == 2
    assert answers == ["(True, False, 0)", "(True, False, 10)"]
    wait_for(no_kernels(real_lab_stack, user_client), timeout=30)


def _results(seen: list[str]) -> Callable[[dict[str, Any]], None]:
    def hook(message: dict[str, Any]) -> None:
        if message["msg_type"] == "execute_result":
            seen.append(message["content"]["data"]["text/plain"])

    return hook


@pytest.mark.slow
def test_a_new_manager_takes_over_a_running_kernel_and_removes_it(
    remote_env: None,
    user_client: LabSpawnerClient,
    real_lab_stack: LocalStack,
    real_tokens: dict[str, str],
    tmp_path: Path,
) -> None:
    specs = kernelspecs(tmp_path)
    first = KernelManager(kernel_spec_manager=specs, kernel_name=NAME)
    first.start_kernel()
    assert first.provisioner is not None
    info = run_sync(first.provisioner.get_provisioner_info)()
    # As an application persists it: JSON, without the token.
    stored = json.dumps(info)
    assert real_tokens[USER] not in stored
    assert (info["kernel_id"], info["owner"]) == (first.kernel_id, USER)

    # A restarted server: a new manager of the same kernel, and a new provisioner.
    second = KernelManager(kernel_spec_manager=specs, kernel_name=NAME, kernel_id=first.kernel_id)
    provisioner = KernelProvisionerFactory.instance().create_provisioner_instance(
        first.kernel_id, second.kernel_spec, parent=second
    )
    second.provisioner = provisioner
    run_sync(provisioner.load_provisioner_info)(json.loads(stored))
    assert run_sync(provisioner.poll)() is None and second.is_alive()
    assert (second.ip, second.hb_port, second.session.key) == (
        first.ip,
        first.hb_port,
        first.session.key,
    )
    client = connected(second)
    content, result, _ = run(client, "2 + 2")
    assert (content["status"], result) == ("ok", "4")
    client.stop_channels()

    second.shutdown_kernel(now=True)
    assert not second.has_kernel
    wait_for(no_kernels(real_lab_stack, user_client), timeout=30)
    with pytest.raises(NotFoundError):
        user_client.kernels.get(USER, first.kernel_id)
    # The first manager sees its kernel gone.
    assert not first.is_alive()
    first.cleanup_resources()
    assert not first.has_kernel


@pytest.mark.slow
def test_sigterm_deletes_the_kernel_and_sigint_is_not_sent_as_a_signal(
    remote_env: None,
    user_client: LabSpawnerClient,
    real_lab_stack: LocalStack,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    manager = KernelManager(kernel_spec_manager=kernelspecs(tmp_path), kernel_name=NAME)
    manager.start_kernel()
    assert manager.provisioner is not None
    with caplog.at_level(logging.WARNING):
        manager.signal_kernel(signal.SIGINT)
    assert "interrupted by a message, not a signal" in caplog.text
    assert manager.is_alive() and user_client.kernels.get(USER, manager.kernel_id).running

    manager.signal_kernel(signal.SIGTERM)
    wait_for(lambda: not manager.is_alive(), timeout=30)
    # Deleted on purpose, so it ended well; its pod and record are gone.
    assert run_sync(manager.provisioner.wait)() == 0
    assert no_kernels(real_lab_stack, user_client)()
    manager.cleanup_resources()
    assert not manager.has_kernel


@pytest.mark.slow
def test_a_size_the_user_may_not_have_is_refused_before_any_pod(
    remote_env: None, user_client: LabSpawnerClient, real_lab_stack: LocalStack, tmp_path: Path
) -> None:
    specs = kernelspecs(tmp_path, "remote-nosuch", size="no-such-size")
    manager = KernelManager(kernel_spec_manager=specs, kernel_name="remote-nosuch")
    with pytest.raises(InvalidRequestError) as refused:
        manager.start_kernel()
    assert (refused.value.status, refused.value.code) == (422, "invalid_request")
    assert "no-such-size" in str(refused.value)
    assert not manager.has_kernel
    assert kernel_pods(real_lab_stack, USER) == [] and user_client.kernels.of(USER) == []


@pytest.mark.slow
def test_an_image_that_cannot_be_pulled_fails_the_launch_fast_naming_why(
    remote_env: None,
    user_client: LabSpawnerClient,
    real_lab_stack: LocalStack,
    real_tokens: dict[str, str],
    tmp_path: Path,
) -> None:
    with LabSpawnerClient(real_lab_stack.spawner_url, real_tokens["admin"]) as admin:
        image = unpulled_image(real_lab_stack, admin)
    specs = kernelspecs(tmp_path, "remote-broken", image=image)
    manager = KernelManager(kernel_spec_manager=specs, kernel_name="remote-broken")
    with image_pull_fails(real_lab_stack, image, USER):
        started = time.monotonic()
        with pytest.raises(KernelFailedError) as failed:
            manager.start_kernel()
        elapsed = time.monotonic() - started
        assert failed.value.code == "failed"
        assert manager.kernel_id in str(failed.value) and "manifest unknown" in str(failed.value)
        # Well before the launch's own deadline (300 s): the service says why at once.
        assert elapsed < 30
        assert not manager.has_kernel
        # The kernel that did not come up is deleted with its pod.
        wait_for(no_kernels(real_lab_stack, user_client), timeout=30)


def test_a_token_whose_user_has_no_lab_gets_no_kernel_and_says_why(
    monkeypatch: pytest.MonkeyPatch,
    real_lab_stack: LocalStack,
    real_tokens: dict[str, str],
    tmp_path: Path,
) -> None:
    """The service tells the provisioner whose token it has; a user without a lab gets a
    clear refusal, and nothing is asked of the kernel routes."""
    monkeypatch.delenv("JUPYTERHUB_USER", raising=False)
    monkeypatch.delenv("LAB_SPAWNER_TOKEN", raising=False)
    monkeypatch.setenv("LAB_SPAWNER_URL", real_lab_stack.spawner_url)
    monkeypatch.setenv("ACCESS_TOKEN", real_tokens["wile"])
    manager = KernelManager(kernel_spec_manager=kernelspecs(tmp_path), kernel_name=NAME)
    with pytest.raises(NotFoundError, match="has no lab: a remote kernel runs beside") as refused:
        manager.start_kernel()
    assert real_tokens["wile"] not in str(refused.value)
    assert not manager.has_kernel
    assert not kernel_pods(real_lab_stack, "wile")
