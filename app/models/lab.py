"""A lab: what was asked for, what it resolved to, and where it stands."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Generic, TypeVar

from app.models.config import LabSize
from app.models.identity import UserInfo
from app.models.images import ImageChoice, LabImage
from app.models.workload import WorkloadStatus

ImageT = TypeVar("ImageT", str, ImageChoice)


class LabApi(StrEnum):
    """The API a lab was created through. It keeps that API's manners for the lab's life: how
    its events read and how its ``DELETE`` answers (see ``docs/admin/nublado.md``)."""

    DMTN_222 = "dmtn-222"
    """``POST .../spawn``: DMTN-222's events (``progress`` carries the percentage, the
    others plain text); ``DELETE`` answers 202 at once."""
    NUBLADO = "nublado"
    """``POST .../create``, as nublado's JupyterHub spawner calls it: events whose ``data``
    is JSON ``{"message", "progress"}``; ``DELETE`` answers 204 once the lab is gone."""


class PodState(StrEnum):
    """Whether the service believes the lab's pod exists."""

    PRESENT = "present"
    MISSING = "missing"


@dataclass(frozen=True)
class LabChoices(Generic[ImageT]):
    """What a spawn chooses: the image (as asked, then as resolved), the size and the
    form's switches."""

    image: ImageT
    size: str
    debug: bool = False
    reset_user_env: bool = False
    unvalidated_image: bool = False
    """An administrator chose to run an image that is not validated."""


@dataclass(frozen=True)
class LabOptions(LabChoices[str]):
    """The spawn form's choices, validated: the image is a reference."""

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


@dataclass(frozen=True)
class SpawnChoices(LabChoices[ImageChoice]):
    """A spawn request's options as parsed, before the image is resolved."""


@dataclass(frozen=True)
class LabSpec:
    """Everything needed to build a user's lab objects; the builders' only input
    besides the configuration."""

    user: UserInfo
    options: LabOptions
    image: LabImage
    size: LabSize
    env: dict[str, str] = field(default_factory=dict)
    """The ``env`` of the spawn request (lowest precedence), screened: what reaches the lab
    (and its credentials, which go to the Secret)."""
    api: LabApi = LabApi.DMTN_222

    @property
    def username(self) -> str:
        return self.user.username


@dataclass
class LabRecord:
    """What Redis holds about a user's lab. It is stored as the status routes' body, written
    and read with ``LabStatusSchema`` (``app.workloads.lab.store``), so those routes serve it as
    stored.

    ``spec_annotation``-style data (options, env, identity, quotas) can be rebuilt from
    the pod's annotation, so losing Redis never loses a running lab.
    """

    username: str
    status: WorkloadStatus
    pod: PodState
    options: dict[str, object]
    env: dict[str, str]
    uid: int | None
    gid: int | None
    groups: list[dict[str, object]]
    quotas: dict[str, dict[str, float | int]]
    internal_url: str | None = None
    error: str | None = None
    api: LabApi = LabApi.DMTN_222
