"""A remote kernel pod's start-up and the kernelspecs that choose remote kernels.

The launcher is run as the kernel pod runs it, with its connection settings in the
environment, and a real ``jupyter_client`` connects to the ipykernel it starts."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from jupyter_client import BlockingKernelClient
from jupyter_client.kernelspec import KernelSpec
from labspawner.kernels.__main__ import main as kernels_main
from labspawner.kernels.kernelspec import PROVISIONER_NAME
from labspawner.kernels.launch import PORT_NAMES, LaunchError, connection_info

from devstack.redis_process import free_port


@pytest.fixture
def launched(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], dict[str, str]]]:
    """The launcher running, with a fresh key and free ports on loopback."""
    env = {
        **os.environ,
        "KERNEL_KEY": secrets.token_hex(32),
        "POD_IP": "127.0.0.1",
        "KERNEL_RUNTIME_DIR": str(tmp_path),
        **{f"KERNEL_{name.upper()}_PORT": str(free_port()) for name in PORT_NAMES},
    }
    process = subprocess.Popen(
        [sys.executable, "-m", "labspawner.kernels.launch"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    yield process, env
    process.kill()
    process.wait()


def test_the_launcher_starts_a_kernel_a_client_reaches_with_the_key(
    launched: tuple[subprocess.Popen[bytes], dict[str, str]], tmp_path: Path
) -> None:
    process, env = launched
    client = BlockingKernelClient()
    client.load_connection_info(connection_info(env))
    client.start_channels()
    try:
        client.wait_for_ready(timeout=30)
        reply = client.execute_interactive("2 + 2", timeout=30, output_hook=_results(seen := []))
        assert reply["content"]["status"] == "ok"
        assert seen == ["4"]
        # The kernel's own environment does not hold the key.
        env_check = client.execute_interactive(
            "import os; print('KERNEL_KEY' in os.environ)",
            timeout=30,
            output_hook=_streams(printed := []),
        )
        assert env_check["content"]["status"] == "ok" and printed == ["False\n"]
    finally:
        client.shutdown()
        client.stop_channels()
    assert process.wait(timeout=30) == 0
    # The key is neither on the kernel's command line nor readable by others.
    (written,) = (tmp_path / "labspawner-kernel").glob("kernel-*.json")
    assert written.stat().st_mode & 0o077 == 0
    assert json.loads(written.read_text())["key"] == env["KERNEL_KEY"]


def _results(seen: list[str]) -> object:
    def hook(message: dict[str, object]) -> None:
        if message["msg_type"] == "execute_result":
            content = message["content"]
            assert isinstance(content, dict)
            seen.append(content["data"]["text/plain"])

    return hook


def _streams(printed: list[str]) -> object:
    def hook(message: dict[str, object]) -> None:
        if message["msg_type"] == "stream":
            content = message["content"]
            assert isinstance(content, dict)
            printed.append(content["text"])

    return hook


@pytest.mark.parametrize(
    ("change", "variable"),
    [
        ({"KERNEL_KEY": ""}, "KERNEL_KEY"),
        ({"KERNEL_KEY": "not-hex"}, "KERNEL_KEY"),
        ({"POD_IP": ""}, "POD_IP"),
        ({"KERNEL_TRANSPORT": "ipc"}, "KERNEL_TRANSPORT"),
        ({"KERNEL_SIGNATURE_SCHEME": "hmac-md5"}, "KERNEL_SIGNATURE_SCHEME"),
        ({"KERNEL_HB_PORT": "70000"}, "KERNEL_HB_PORT"),
    ],
)
def test_a_bad_environment_is_refused_naming_the_variable(
    change: dict[str, str], variable: str
) -> None:
    env = {"KERNEL_KEY": "ab" * 32, "POD_IP": "127.1.1.1", **change}
    with pytest.raises(LaunchError, match=variable) as refused:
        connection_info(env)
    assert "ab" * 32 not in str(refused.value)


def test_the_launcher_exits_with_the_reason_and_never_the_key(tmp_path: Path) -> None:
    key = "cd" * 32
    env = {**os.environ, "KERNEL_KEY": key, "POD_IP": "", "KERNEL_RUNTIME_DIR": str(tmp_path)}
    env.pop("KERNEL_IP", None)
    done = subprocess.run(
        [sys.executable, "-m", "labspawner.kernels.launch"],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 2 and "POD_IP" in done.stderr
    assert key not in done.stderr + done.stdout


def test_install_writes_a_kernelspec_that_chooses_the_provisioner(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kernels_main(
        ["install", "--name", "remote-large", "--size", "large", "--prefix", str(tmp_path)]
    )
    assert "Installed kernelspec remote-large" in capsys.readouterr().out
    # Read as Jupyter reads it (jupyter_client lists it once the provisioner is installed).
    spec = KernelSpec.from_resource_dir(str(tmp_path / "share/jupyter/kernels/remote-large"))
    assert spec.interrupt_mode == "message" and spec.language == "python"
    assert spec.metadata["kernel_provisioner"] == {
        "provisioner_name": PROVISIONER_NAME,
        "config": {"size": "large"},
    }
    with pytest.raises(SystemExit):
        kernels_main(
            ["install", "--name", "Bad Name", "--size", "large", "--prefix", str(tmp_path)]
        )
