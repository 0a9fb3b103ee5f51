"""The spawn form JupyterHub shows a user: what goes into it, decided per user.

The HTML is rendered by a Jinja template with autoescaping (``templates/spawn_form.html``);
this module only decides the content, so the rules are tested without parsing HTML.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.models.admin import Maintenance
from app.models.config import Config
from app.models.identity import UserInfo
from app.models.images import KnownImage
from app.schemas.labs import USE_DROPDOWN
from app.workloads.entitlements import allowed_sizes, format_size, spawn_refusal
from app.workloads.image.service import ImageService

GIB = 1024**3


@dataclass(frozen=True)
class SizeChoice:
    name: str
    label: str
    """``Large (4 CPU, 16 GiB)``."""


@dataclass(frozen=True)
class SpawnForm:
    """What the template renders: either ``refusal`` alone, or the choices."""

    refusal: str | None
    prepulled: list[KnownImage]
    others: list[KnownImage]
    sizes: list[SizeChoice]
    warning: str | None
    dropdown_value: str = USE_DROPDOWN
    debug_field: str = "debug"
    """The debug switch's field: DMTN-222's ``debug``, or nublado's ``enable_debug``."""


def build_spawn_form(
    user: UserInfo, config: Config, images: ImageService, maintenance: Maintenance | None = None
) -> SpawnForm:
    """The form for ``user``; while ``maintenance`` is on, only its message."""
    if maintenance is not None:
        return _refused(f"Labs cannot be started now: {maintenance.message}")
    refusal = spawn_refusal(user)
    if refusal is not None:
        return _refused(f"You cannot start a lab: {refusal}.")
    sizes = allowed_sizes(user, config.lab.sizes)
    if not sizes:
        quota = user.notebook_quota
        limit = f" ({quota.cpu:g} CPU, {quota.memory_gib:g} GiB)" if quota is not None else ""
        return _refused(f"You cannot start a lab: no lab size fits your quota{limit}.")
    menu = images.menu(user)
    if not menu.prepulled and not menu.others:
        return _refused(
            "You cannot start a lab: no lab images are available right now."
            + (f" {menu.warning}" if menu.warning else "")
        )
    return SpawnForm(
        refusal=None,
        prepulled=menu.prepulled,
        others=menu.others,
        sizes=[SizeChoice(s.name, f"{_title(s.name)} ({format_size(s)})") for s in sizes],
        warning=menu.warning,
    )


def _refused(message: str) -> SpawnForm:
    return SpawnForm(refusal=message, prepulled=[], others=[], sizes=[], warning=None)


def _title(name: str) -> str:
    return " ".join(word.capitalize() for word in name.split("-"))
