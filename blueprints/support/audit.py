"""Every administrator's action goes into the audit log, however it ends.

``audited`` wraps an administrators' route inside ``requires``: only callers allowed to act
reach it, and each call leaves one entry (who, what, on what, when, and the answer's status
and code) whether the action succeeded or was refused with an error.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable
from typing import Any, TypeVar, cast

import redis

from app.errors import ServiceError
from app.extensions import labs_ext
from app.models.admin import AuditEntry
from blueprints.support.auth import current_caller

logger = logging.getLogger(__name__)

F = TypeVar("F", bound=Callable[..., Any])


def audited(action: str, *, status: int = 200, target: str = "username") -> Callable[[F], F]:
    """Record each call of the route as ``action`` on the URL parameter named ``target``
    (the platform itself when the route has none); ``status`` is the route's success status
    (a view returning ``(body, status)`` says its own)."""

    def decorate(view: F) -> F:
        @functools.wraps(view)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            on = str(kwargs.get(target) or "platform")
            try:
                result = view(*args, **kwargs)
            except ServiceError as exc:
                _record(action, on, exc.code, exc.status, exc.message)
                raise
            except Exception:
                _record(action, on, "internal_error", 500, "")
                raise
            answered = result[1] if isinstance(result, tuple) else status
            _record(action, on, "ok", int(answered), _detail(result))
            return result

        return cast(F, wrapper)

    return decorate


def _detail(result: Any) -> str:
    """What an action's answer says of itself, for the entry: its ``detail`` field."""
    body = result[0] if isinstance(result, tuple) else result
    if isinstance(body, dict) and body.get("detail"):
        return str(body["detail"])
    return ""


def _record(action: str, target: str, outcome: str, status: int, detail: str) -> None:
    entry = AuditEntry(
        at=time.time(),
        actor=current_caller().username,
        action=action,
        target=target,
        outcome=outcome,
        status=status,
        detail=detail[:500],
    )
    try:
        labs_ext.machinery.audit.append(entry)
    except redis.RedisError as exc:
        # The action's own answer stands; the log line is the record of last resort.
        logger.warning("audit entry not stored (%s): %s", type(exc).__name__, entry.to_json())
