"""A person's path through the local stack in a real browser: log in to JupyterHub, fill the
service's spawn form, work in a real JupyterLab, stop the server, and leave Kubernetes clean.

Debian's Chromium (``make setup`` installs it) driven by Playwright. The stack runs real labs:
the lab pod is a JupyterHub single-user server started by the emulated kubelet, reached by the
hub's proxy through the lab Service's cluster IP. Screenshots of every step are kept in
``.artifacts/browser/`` (not committed) for a person to look at when the test fails.
"""

from __future__ import annotations

import io
import os
import shutil
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from labspawner import LabSpawnerClient
from playwright.sync_api import Browser, Page, expect, sync_playwright
from webdav4.client import Client as WebdavClient

from devstack.stack import REPO_ROOT, LocalStack
from tests.labs.conftest import wait_for
from tests.support.hub import Hub, make_hub
from tests.support.notebooks import process_environment

pytestmark = pytest.mark.slow

USER = "rachel"
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-quic",
    # Nothing but loopback is reachable: no calls home, no updates, no sync.
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
ARTIFACTS = REPO_ROOT / ".artifacts" / "browser"
WAIT_MS = 90_000
"""How long a step may take: a lab's first start and its kernel's, on a busy 2-core machine."""
FROM_LAPTOP = "from-my-laptop.txt"
"""A file rachel copies to her home over WebDAV, from her "laptop", before she logs in."""
CELL = (
    'import os; print(os.environ["JUPYTERHUB_USER"], os.environ["IMAGE_DIGEST"], '
    f'open(os.path.expanduser("~/{FROM_LAPTOP}")).read())'
)
HUB_MEM_LIMIT = "1G"
HUB_CPU_LIMIT = 0.5


@pytest.fixture(scope="module")
def stack(real_lab_stack: LocalStack) -> LocalStack:
    return real_lab_stack


@pytest.fixture(scope="module")
def tokens(stack: LocalStack) -> dict[str, str]:
    return {name: entry["token"] for name, entry in stack.state()["tokens"].items()}


@pytest.fixture(scope="module")
def hub(
    stack: LocalStack, tokens: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Hub]:
    hub = make_hub(
        stack,
        tokens["admin"],
        tmp_path_factory.mktemp("browser-hub"),
        # A hub as many run it: limits of its own, and JupyterHub 4's env_keep, which
        # forwards the hub's PATH. The spawner sends get_env() unchanged (DMTN-222).
        f"c.Spawner.mem_limit = '{HUB_MEM_LIMIT}'\n"
        f"c.Spawner.cpu_limit = {HUB_CPU_LIMIT}\n"
        "c.Spawner.env_keep = ['PATH', 'PYTHONPATH', 'CONDA_ROOT', 'CONDA_DEFAULT_ENV',"
        " 'VIRTUAL_ENV', 'LANG', 'LC_ALL', 'JUPYTERHUB_SINGLEUSER_APP']\n",
    )
    hub.start()
    yield hub
    hub.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    assert CHROMIUM.exists(), "make setup installs Debian's chromium"
    expect.set_options(timeout=WAIT_MS)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
        yield browser
        browser.close()


class Steps:
    """Screenshots of a test's steps, numbered in the order they were taken."""

    def __init__(self, page: Page, directory: Path) -> None:
        shutil.rmtree(directory, ignore_errors=True)
        directory.mkdir(parents=True)
        self._page, self._directory, self._count = page, directory, 0

    def shot(self, name: str) -> None:
        self._count += 1
        self._page.screenshot(path=self._directory / f"{self._count:02d}-{name}.png")


def _answers(address: tuple[str, int]) -> bool:
    """Whether an HTTP request to ``address`` gets any answer."""
    try:
        with socket.create_connection(address, timeout=5) as connection:
            connection.sendall(b"GET / HTTP/1.0\r\n\r\n")
            return bool(connection.recv(64))
    except OSError:
        return False


def _lab_pod(stack: LocalStack) -> dict[str, object] | None:
    return stack.kube.store.get("pods", f"nublado-{USER}", f"nb-{USER}-lab")


def test_log_in_spawn_run_a_cell_stop_and_leave_kubernetes_clean(
    stack: LocalStack, hub: Hub, tokens: dict[str, str], browser: Browser
) -> None:
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    steps = Steps(page, ARTIFACTS)
    page.set_default_timeout(WAIT_MS)

    written = _copy_from_laptop(stack, tokens[USER])
    try:
        _walk_through(page, steps, stack, hub, tokens[USER], written)
    except BaseException:
        steps.shot("failed")
        raise
    finally:
        page.close()


def _copy_from_laptop(stack: LocalStack, token: str) -> str:
    """Start rachel's file server and copy a file into her home through it, as a WebDAV
    client on her laptop would; what the file holds."""
    text = "copied over WebDAV"
    with LabSpawnerClient(stack.spawner_url, token) as client:
        server = client.start_file_server()
    dav = WebdavClient(server.url, auth=(USER, token), timeout=30)
    dav.upload_fileobj(io.BytesIO(text.encode()), f"home/{USER}/{FROM_LAPTOP}", overwrite=True)
    return text


def _walk_through(
    page: Page, steps: Steps, stack: LocalStack, hub: Hub, token: str, written: str
) -> None:
    # Log in with the Gafaelfawr token as the password: the hub shows the service's form.
    page.goto(f"{hub.url}/hub/login")
    steps.shot("login")
    page.fill("#username_input", USER)
    page.fill("#password_input", token)
    page.click("#login_submit")
    page.wait_for_url("**/hub/spawn**")
    form = page.locator("#spawn_form")
    image = form.locator('input[name="image_list"]').first
    image.check()
    chosen = str(image.get_attribute("value"))
    form.locator('select[name="size"]').select_option("small")
    steps.shot("spawn-form")

    # Start: the hub follows the service's progress, then opens JupyterLab.
    form.locator('[type="submit"]').first.click()
    page.wait_for_url(f"**/user/{USER}/lab**")
    notebook_card = page.locator('.jp-LauncherCard[data-category="Notebook"]').first
    expect(notebook_card).to_be_visible()
    steps.shot("jupyterlab")
    pod = _lab_pod(stack)
    assert pod is not None
    uid = str(pod["metadata"]["uid"])  # type: ignore[index]
    pids = stack.kube.cluster.processes.running(uid)
    assert pids, "the lab pod runs a real process"
    # The lab runs with the service's values, not the hub's, and without the hub's PATH.
    config_map = stack.kube.store.get("configmaps", f"nublado-{USER}", f"nb-{USER}-env")
    assert config_map is not None
    given = config_map["data"]
    assert "PATH" not in given and "JUPYTERHUB_API_TOKEN" not in given
    lab_env = process_environment(pids[0])
    assert lab_env["JUPYTERHUB_USER"] == USER
    assert (lab_env["MEM_LIMIT"], lab_env["CPU_LIMIT"]) == (given["MEM_LIMIT"], given["CPU_LIMIT"])
    assert lab_env["MEM_LIMIT"] != str(2**30) and lab_env["CPU_LIMIT"] != str(HUB_CPU_LIMIT)
    assert lab_env["JUPYTERHUB_API_TOKEN"]  # from the lab's Secret
    service = stack.kube.store.get("services", f"nublado-{USER}", f"nb-{USER}-lab")
    assert service is not None
    address = (service["spec"]["clusterIP"], 8888)
    assert _answers(address), "the hub reaches the lab through its Service's address"

    # A notebook cell prints what the lab's environment says about whom and what it runs, and
    # the file she copied from her laptop over WebDAV, from her home.
    notebook_card.click()
    editor = page.locator(".jp-Notebook .jp-Cell .cm-content").first
    expect(editor).to_be_visible()
    # The kernel is a real process the lab starts; a cell run before it is connected is lost.
    expect(page.get_by_text("Python 3 (ipykernel) | Idle")).to_be_visible()
    editor.click()
    page.keyboard.type(CELL)
    page.keyboard.press("Shift+Enter")
    output = page.locator(".jp-OutputArea-output").first
    expect(output).to_contain_text(USER)
    steps.shot("cell-output")
    digest = stack.registry.digest_for_reference(chosen)
    assert digest is not None and digest.startswith("sha256:")
    assert output.inner_text().strip() == f"{USER} {digest} {written}"

    # Stop from the hub's control panel: the lab, its namespace and its process go.
    page.goto(f"{hub.url}/hub/home")
    steps.shot("control-panel")
    page.click("#stop")
    expect(page.locator("#stop")).to_be_hidden()
    expect(page.locator("#start")).to_have_text("Start My Server")
    steps.shot("stopped")
    wait_for(lambda: stack.kube.store.get("namespaces", None, f"nublado-{USER}") is None)
    assert _lab_pod(stack) is None
    assert stack.kube.cluster.processes.running(uid) == []
    assert not _answers(address), "the Service's forwarding went with it"
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
