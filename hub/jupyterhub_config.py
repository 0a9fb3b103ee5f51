"""JupyterHub on the lab spawner service: the lines an operator needs, runnable on the local stack.

``make hub`` runs it against ``make run``'s stack (addresses and the hub's token are read from
``.devstack/stack.json``); in a deployment the same settings come from the environment:

- ``LAB_SPAWNER_URL``: the service's base URL;
- ``LAB_SPAWNER_ADMIN_TOKEN``: JupyterHub's own Gafaelfawr token, with ``admin:notebook``;
- ``GAFAELFAWR_URL``: where the authenticator checks users' tokens;
- ``JUPYTERHUB_CRYPT_KEY``: the key auth state (which holds users' tokens) is encrypted with.
"""

import json
import os
import secrets
from pathlib import Path

c = get_config()  # type: ignore[name-defined]  # noqa: F821 - provided by JupyterHub

HERE = Path(__file__).resolve().parent
STATE = HERE.parent / ".devstack" / "stack.json"
stack = json.loads(STATE.read_text()) if STATE.exists() else {}


def setting(env: str, from_stack: str) -> str:
    """The environment's value, else the local stack's."""
    value = os.environ.get(env) or stack.get(from_stack, "")
    if not value:
        raise SystemExit(f"set {env} (or start the local stack with `make run`)")
    return str(value)


# The spawner: every lab is the service's business.
c.JupyterHub.spawner_class = "lab-spawner"
# Labs outlive the hub: a restarted hub finds them running (each spawner's poll asks the
# service) instead of deleting every lab when it shuts down.
c.JupyterHub.cleanup_servers = False
c.LabSpawner.spawner_url = setting("LAB_SPAWNER_URL", "spawner_url")
c.LabSpawner.admin_token = os.environ.get("LAB_SPAWNER_ADMIN_TOKEN") or stack.get("tokens", {}).get(
    "admin", {}
).get("token", "")

# Users log in with their Gafaelfawr token (from the ingress's X-Auth-Request-Token header, or
# typed as the password); the token is kept, encrypted, as auth state for the spawner to use.
c.JupyterHub.authenticator_class = "gafaelfawr-token"
c.GafaelfawrTokenAuthenticator.gafaelfawr_url = setting("GAFAELFAWR_URL", "gafaelfawr_url")
c.Authenticator.allow_all = True  # Gafaelfawr already decided who may use the platform
if not os.environ.get("JUPYTERHUB_CRYPT_KEY"):
    c.CryptKeeper.keys = [secrets.token_bytes(32)]  # local stack only: lost on restart

# JupyterHub's public proxy, installed by `make setup` from hub/package.json.
c.ConfigurableHTTPProxy.command = [str(HERE / "node_modules" / ".bin" / "configurable-http-proxy")]
c.JupyterHub.bind_url = os.environ.get("HUB_BIND_URL", "http://127.0.0.1:8000")
