"""A real JupyterHub on a local stack: ``hub/jupyterhub_config.py``, as the docs show it, with
the npm configurable-http-proxy ``make setup`` installs, on free loopback ports.

The end-to-end tests start one per module: the REST API tests and the browser test.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import requests

from devstack.redis_process import free_port
from devstack.stack import REPO_ROOT, LocalStack
from tests.labs.conftest import wait_for

HUB_CONFIG = REPO_ROOT / "hub" / "jupyterhub_config.py"
PROXY = REPO_ROOT / "hub" / "node_modules" / ".bin" / "configurable-http-proxy"


@dataclass
class Hub:
    url: str
    proxy_api: str
    proxy_token: str
    service_token: str
    log: Path
    command: list[str]
    workdir: Path
    env: dict[str, str]
    process: subprocess.Popen[bytes] | None = None

    def api(self, token: str) -> requests.Session:
        session = requests.Session()
        session.headers["Authorization"] = f"token {token}"
        return session

    def user_model(self, username: str) -> dict[str, Any]:
        response = self.api(self.service_token).get(
            f"{self.url}/hub/api/users/{username}", timeout=10
        )
        response.raise_for_status()
        model: dict[str, Any] = response.json()
        return model

    def start(self) -> None:
        """Start JupyterHub on its database, and wait until its API answers."""
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(
                self.command, cwd=self.workdir, env=self.env, stdout=out, stderr=subprocess.STDOUT
            )
        process = self.process

        def answering() -> bool:
            assert process.poll() is None, self.log.read_text()[-3000:]
            with contextlib.suppress(requests.ConnectionError):
                return requests.get(f"{self.url}/hub/api/", timeout=2).status_code == 200
            return False

        wait_for(answering, timeout=60, interval=0.2)

    def stop(self) -> None:
        """Shut JupyterHub down as an operator does (SIGTERM); its servers keep running."""
        if self.process is None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.process = None


def make_hub(stack: LocalStack, admin_token: str, workdir: Path, extra_config: str = "") -> Hub:
    """A JupyterHub (not started) for ``stack``, its files in ``workdir``; ``extra_config``
    is appended to its configuration file."""
    assert PROXY.exists(), "make setup installs configurable-http-proxy into hub/node_modules"
    public, internal, api = free_port(), free_port(), free_port()
    proxy_token, service_token = secrets.token_hex(16), secrets.token_hex(16)
    (workdir / "jupyterhub_config.py").write_text(
        f"load_subconfig({str(HUB_CONFIG)!r})\n"
        f"c.JupyterHub.bind_url = 'http://127.0.0.1:{public}'\n"
        f"c.JupyterHub.hub_bind_url = 'http://127.0.0.1:{internal}'\n"
        f"c.ConfigurableHTTPProxy.api_url = 'http://127.0.0.1:{api}'\n"
        f"c.ConfigurableHTTPProxy.auth_token = {proxy_token!r}\n"
        f"c.JupyterHub.db_url = 'sqlite:///{workdir}/jupyterhub.sqlite'\n"
        f"c.JupyterHub.cookie_secret_file = '{workdir}/cookie_secret'\n"
        f"c.ConfigurableHTTPProxy.pid_file = '{workdir}/proxy.pid'\n"
        f"c.JupyterHub.services = [{{'name': 'e2e', 'api_token': {service_token!r}}}]\n"
        "c.JupyterHub.load_roles = [{'name': 'e2e', 'services': ['e2e'], 'scopes': "
        "['admin:users', 'admin:servers', 'admin:server_state', 'tokens', 'read:users']}]\n"
        + extra_config
    )
    env = {
        **os.environ,
        "LAB_SPAWNER_URL": stack.spawner_url,
        "LAB_SPAWNER_ADMIN_TOKEN": admin_token,
        "GAFAELFAWR_URL": stack.gafaelfawr.url,
        "JUPYTERHUB_CRYPT_KEY": secrets.token_hex(32),
    }
    jupyterhub = Path(sys.executable).parent / "jupyterhub"
    return Hub(
        url=f"http://127.0.0.1:{public}",
        proxy_api=f"http://127.0.0.1:{api}",
        proxy_token=proxy_token,
        service_token=service_token,
        log=workdir / "jupyterhub.log",
        command=[str(jupyterhub), "-f", str(workdir / "jupyterhub_config.py")],
        workdir=workdir,
        env=env,
    )
