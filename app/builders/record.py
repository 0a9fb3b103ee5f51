"""The spec annotation: what a lab was built from, stored on its namespace and pod.

Redis holds lab records, but Kubernetes is the truth about what exists: after Redis loses its data
the service rebuilds each record from this annotation. It holds the options, the request's
environment (without credentials), the user's uid, gid, name and groups, the quotas, the image's
reference, digest and description, the size, and the API that created the lab (its events and
its ``DELETE`` keep that API's manners after a rebuild too). Not the token, nor the email
address or notebook quota (not needed to describe a running lab). Keys are sorted so the text
is deterministic.
"""

from __future__ import annotations

import json
from typing import Any

from app.builders.env import public_request_env
from app.builders.resource_quota import quotas
from app.models.config import LabSize
from app.models.identity import Group, UserInfo
from app.models.images import LabImage
from app.models.lab import LabApi, LabOptions, LabSpec

SPEC_VERSION = 1
"""Bumped when the annotation's shape changes, so a reader can tell old objects apart."""


def lab_record(spec: LabSpec) -> dict[str, Any]:
    """The annotation's content as a dict."""
    user = spec.user
    return {
        "version": SPEC_VERSION,
        "username": user.username,
        "name": user.name,
        "uid": user.uid,
        "gid": user.gid,
        "groups": [{"name": g.name, "id": g.id} for g in user.groups],
        "options": spec.options.as_dict(),
        "env": public_request_env(spec),
        "quotas": quotas(spec.size),
        "image": {
            "reference": spec.image.reference,
            "digest": spec.image.digest,
            "description": spec.image.name,
        },
        "size": spec.size.name,
        "api": spec.api.value,
    }


def spec_annotation(spec: LabSpec) -> str:
    """The annotation's value: compact JSON with sorted keys."""
    return json.dumps(lab_record(spec), sort_keys=True, separators=(",", ":"))


def spec_from_annotation(value: str) -> LabSpec:
    """The LabSpec an annotation was written from (email and notebook quota are not kept).

    Raises ``ValueError`` for text this version cannot read.
    """
    try:
        data = json.loads(value)
        if data.get("version") != SPEC_VERSION:
            raise ValueError(f"unknown spec annotation version {data.get('version')!r}")
        limits, requests = data["quotas"]["limits"], data["quotas"]["requests"]
        return LabSpec(
            user=UserInfo(
                username=data["username"],
                name=data["name"],
                email=None,
                uid=data["uid"],
                gid=data["gid"],
                groups=tuple(Group(name=g["name"], id=g["id"]) for g in data["groups"]),
                notebook_quota=None,
            ),
            options=LabOptions(**data["options"]),
            image=LabImage(
                reference=data["image"]["reference"],
                name=data["image"]["description"],
                digest=data["image"]["digest"],
            ),
            size=LabSize(
                name=data["size"],
                cpu=float(limits["cpu"]),
                memory=int(limits["memory"]),
                cpu_request=float(requests["cpu"]),
                memory_request=int(requests["memory"]),
                # Who may choose a size is a question for new spawns, not this running lab.
                groups=(),
            ),
            env=dict(data["env"]),
            # Labs from before the API was recorded were all DMTN-222's.
            api=LabApi(data.get("api", LabApi.DMTN_222)),
        )
    except (KeyError, TypeError, AttributeError, json.JSONDecodeError) as exc:
        raise ValueError(f"unreadable spec annotation: {exc}") from None
