"""Who is calling: what Gafaelfawr says about a token and its user."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TokenData:
    """The verified facts about a token (from Gafaelfawr's token-info)."""

    username: str
    scopes: frozenset[str]
    token_type: str


@dataclass(frozen=True)
class Group:
    """A group the user belongs to; ``id`` is None for groups without a GID."""

    name: str
    id: int | None


@dataclass(frozen=True)
class NotebookQuota:
    """The user's notebook quota: CPUs, memory in GiB, and whether they may spawn at all."""

    cpu: float
    memory_gib: float
    spawn: bool


@dataclass(frozen=True)
class UserInfo:
    """The user's identity (from Gafaelfawr's user-info)."""

    username: str
    name: str | None
    email: str | None
    uid: int | None
    gid: int | None
    groups: tuple[Group, ...]
    notebook_quota: NotebookQuota | None


@dataclass(frozen=True)
class Caller:
    """An authenticated request: the raw token (for delegation) and what it proves."""

    token: str
    data: TokenData

    @property
    def username(self) -> str:
        return self.data.username

    def __repr__(self) -> str:
        # The token is a credential: keep it out of any log line or traceback.
        return f"Caller(username={self.username!r}, scopes={sorted(self.data.scopes)!r})"
