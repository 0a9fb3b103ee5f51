"""``GafaelfawrTokenAuthenticator``: logs users in by their Gafaelfawr token.

``LabSpawner`` acts as the user with a delegated token kept in the user's auth state. This
authenticator puts it there. Behind a Gafaelfawr ingress the token arrives in the
``X-Auth-Request-Token`` header, and the login needs no form. Without one, as on the local
stack, the login form's password field takes the token. Either way the token is checked against
Gafaelfawr's ``token-info`` API, which names its user; a form's username must match it.

JupyterHub needs ``c.JupyterHub.enable_auth_state = True`` and ``JUPYTERHUB_CRYPT_KEY`` set
(auth state is encrypted in its database).
"""

from __future__ import annotations

import os
from typing import Any

import aiohttp
from jupyterhub.auth import Authenticator
from traitlets import Float, Unicode, default

TOKEN_HEADER = "X-Auth-Request-Token"  # noqa: S105 - a header name


class GafaelfawrTokenAuthenticator(Authenticator):
    """Accepts a user whose Gafaelfawr token is valid; keeps the token as auth state."""

    gafaelfawr_url = Unicode(help="Base URL of Gafaelfawr (default: $GAFAELFAWR_URL).").tag(
        config=True
    )
    auth_state_token_key = Unicode("token", help="Auth state key the token is kept under.").tag(
        config=True
    )
    request_timeout = Float(10.0, help="Seconds a token-info call may take.").tag(config=True)

    @default("gafaelfawr_url")
    def _default_gafaelfawr_url(self) -> str:
        return os.environ.get("GAFAELFAWR_URL", "")

    @default("enable_auth_state")
    def _default_enable_auth_state(self) -> bool:
        return True

    async def authenticate(self, handler: Any, data: dict[str, str] | None) -> Any:
        data = data or {}
        token = (handler.request.headers.get(TOKEN_HEADER) or data.get("password") or "").strip()
        if not token:
            return None
        username = await self._token_user(token)
        if username is None:
            self.log.warning("Login refused: Gafaelfawr does not accept the token")
            return None
        claimed = (data.get("username") or "").strip()
        if claimed and claimed != username:
            self.log.warning("Login refused: the token belongs to another user than %s", claimed)
            return None
        return {"name": username, "auth_state": {self.auth_state_token_key: token}}

    async def _token_user(self, token: str) -> str | None:
        url = f"{self.gafaelfawr_url.rstrip('/')}/auth/api/v1/token-info"
        timeout = aiohttp.ClientTimeout(total=self.request_timeout)
        async with (
            aiohttp.ClientSession(timeout=timeout) as session,
            session.get(url, headers={"Authorization": f"Bearer {token}"}) as response,
        ):
            if response.status != 200:
                return None
            body = await response.json()
        name = body.get("username") if isinstance(body, dict) else None
        return str(name) if name else None
