"""``/etc/passwd`` and ``/etc/group`` for the lab, in ConfigMap ``nb-<user>-nss``.

The lab's files live on a POSIX file system keyed by numeric ids; these files give those ids names
inside the container (DMTN-222 "User and group mappings"). They replace the image's files, so they
start from the minimum a container needs (root, and ``nobody``/``nogroup`` that NFS and many tools
map unknown ids to). No shadow files: nothing in a lab authenticates through PAM.
"""

from __future__ import annotations

import re
from typing import Any

from app.builders import names
from app.builders.metadata import lab_object
from app.models.identity import UserInfo
from app.models.lab import LabSpec

BASE_PASSWD = "".join(
    (
        "root:x:0:0:root:/root:/bin/bash\n",
        "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
    )
)
BASE_GROUP = "root:x:0:\nnogroup:x:65534:\n"

_GECOS_UNSAFE = re.compile(r"[:,\x00-\x1f\x7f]+")


def require_ids(user: UserInfo) -> tuple[int, int]:
    """The user's uid and primary gid; a lab cannot run without both."""
    if user.uid is None or user.gid is None:
        raise ValueError(f"user {user.username} has no uid or gid: cannot build a lab")
    return user.uid, user.gid


def gecos(name: str | None) -> str:
    """The user's name made safe for the passwd comment field.

    ``:`` and line breaks would corrupt the file and ``,`` separates the GECOS sub-fields (room,
    phone…), so each run of them becomes one space; ``"Coyote, Wile E."`` → ``"Coyote Wile E."``.
    """
    if not name:
        return ""
    return " ".join(_GECOS_UNSAFE.sub(" ", name).split())


def passwd_file(user: UserInfo) -> str:
    """The base entries plus ``<user>:x:<uid>:<gid>:<name>:/home/<user>:/bin/bash``."""
    uid, gid = require_ids(user)
    entry = f"{user.username}:x:{uid}:{gid}:{gecos(user.name)}:/home/{user.username}:/bin/bash\n"
    return BASE_PASSWD + entry


def group_file(user: UserInfo) -> str:
    """The base entries plus one line per group of the user that has a gid.

    The user is listed as a member of each group except the one whose gid is their primary gid
    (membership there comes from passwd). Groups without a gid cannot be represented and are
    skipped. When no group carries the primary gid, a group named after the user is added for
    it, as nublado does, so that files owned by that gid still show a name.
    """
    _, gid = require_ids(user)
    lines = []
    if not any(group.id == gid for group in user.groups):
        lines.append(f"{user.username}:x:{gid}:\n")
    for group in user.groups:
        if group.id is None:
            continue
        members = "" if group.id == gid else user.username
        lines.append(f"{group.name}:x:{group.id}:{members}\n")
    return BASE_GROUP + "".join(lines)


def build_nss_config_map(spec: LabSpec, namespace: str) -> dict[str, Any]:
    """ConfigMap ``nb-<user>-nss`` with keys ``passwd`` and ``group``."""
    return {
        **lab_object("ConfigMap", spec.username, names.NSS_SUFFIX, namespace=namespace),
        "data": {"group": group_file(spec.user), "passwd": passwd_file(spec.user)},
    }
