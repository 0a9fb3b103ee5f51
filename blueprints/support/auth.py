"""The ``requires`` decorator: authenticate the request and check the route's grants."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar, cast

from flask import current_app, g, request

from app.extensions import gafaelfawr_ext
from app.models.identity import Caller, UserInfo
from app.services.auth import AuthService, Grant
from app.web.request_id import note_user

F = TypeVar("F", bound=Callable[..., Any])


def requires(
    *grants: Grant, user_arg: str = "username", with_user: bool = False
) -> Callable[[F], F]:
    """Allow the route to callers matching any of ``grants``.

    ``user_arg`` names the URL parameter holding the path's user, compared with the
    token's user for grants with ``same_user``. The caller is left in ``g.caller``, with
    the token's user-info too if ``with_user``.
    """

    def decorate(view: F) -> F:
        @functools.wraps(view)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            service = AuthService(gafaelfawr_ext.client)
            caller = service.authenticate(request.headers, with_user=with_user)
            note_user(caller.username)
            service.authorize(caller, _resolved(grants), kwargs.get(user_arg))
            g.caller = caller
            return view(*args, **kwargs)

        wrapper.required_grants = grants  # type: ignore[attr-defined]
        return cast(F, wrapper)

    return decorate


def _resolved(grants: tuple[Grant, ...]) -> tuple[Grant, ...]:
    """The grants with configurable scopes read from this app's configuration."""
    if not any(grant.setting for grant in grants):
        return grants
    config = current_app.config["SPAWNER"]
    return tuple(grant.resolved(config) for grant in grants)


def current_caller() -> Caller:
    """The caller authenticated by ``requires`` for this request."""
    return cast(Caller, g.caller)


def current_user() -> UserInfo:
    """The caller's identity, fetched by ``requires(with_user=True)`` for this request."""
    user = current_caller().user
    if user is None:
        raise RuntimeError("the route must be decorated with requires(with_user=True)")
    return user
