"""Volumes of the lab pod and where its containers mount them.

Besides the configured volumes (``/home`` at least, DMTN-222 "Mounts") the lab gets the NSS files
over ``/etc/passwd`` and ``/etc/group``, its Secret read-only at ``lab.secretsPath``, and an
``emptyDir`` at ``/tmp`` (unless ``/tmp`` is configured), so scratch files never land in the
image's layer and vanish with the pod.
"""

from __future__ import annotations

from typing import Any

from app.builders import names
from app.models.config import Config, LabVolume, LabVolumeMount

NSS_VOLUME = "spawner-nss"
SECRET_VOLUME = "spawner-secrets"  # noqa: S105 - a volume name
TMP_VOLUME = "spawner-tmp"
RESERVED_VOLUMES = (NSS_VOLUME, SECRET_VOLUME, TMP_VOLUME)
"""Volume names the builders use; a configured volume of the same name is rejected."""

TMP_PATH = "/tmp"  # noqa: S108 - a mount point inside the lab container, not a file we write


def _source(volume: LabVolume) -> dict[str, Any]:
    """The volume source for a configured type; the schema checked the needed fields."""
    if volume.type == "hostPath":
        return {"hostPath": {"path": volume.path}}
    if volume.type == "nfs":
        return {"nfs": {"server": volume.server, "path": volume.path, "readOnly": volume.read_only}}
    if volume.type == "persistentVolumeClaim":
        return {
            "persistentVolumeClaim": {"claimName": volume.claim_name, "readOnly": volume.read_only}
        }
    if volume.type == "emptyDir":
        return {"emptyDir": {}}
    raise ValueError(f"volume {volume.name}: unknown type {volume.type!r}")


def configured_volumes(config: Config) -> list[dict[str, Any]]:
    """The configured volumes as pod ``volumes`` entries."""
    clashes = sorted({v.name for v in config.lab.volumes} & set(RESERVED_VOLUMES))
    if clashes:
        raise ValueError(f"volume names reserved for the spawner: {', '.join(clashes)}")
    return [{"name": v.name, **_source(v)} for v in config.lab.volumes]


def volume_mount(mount: LabVolumeMount, config: Config) -> dict[str, Any]:
    """A configured mount; read-only when the mount or its volume says so.

    hostPath sources have no read-only switch, so a read-only volume is enforced on each mount.
    """
    volume = next((v for v in config.lab.volumes if v.name == mount.volume_name), None)
    result: dict[str, Any] = {"name": mount.volume_name, "mountPath": mount.mount_path}
    if mount.sub_path:
        result["subPath"] = mount.sub_path
    if mount.read_only or (volume is not None and volume.read_only):
        result["readOnly"] = True
    return result


def _has_tmp(config: Config) -> bool:
    return any(m.mount_path.rstrip("/") == TMP_PATH for m in config.lab.volume_mounts)


def lab_volumes(config: Config, username: str) -> list[dict[str, Any]]:
    """All volumes of the lab pod: configured ones, then the spawner's."""
    volumes = configured_volumes(config)
    volumes.append(
        {"name": NSS_VOLUME, "configMap": {"name": names.object_name(username, names.NSS_SUFFIX)}}
    )
    volumes.append({"name": SECRET_VOLUME, "secret": {"secretName": names.object_name(username)}})
    if not _has_tmp(config):
        volumes.append({"name": TMP_VOLUME, "emptyDir": {}})
    return volumes


def lab_mounts(config: Config) -> list[dict[str, Any]]:
    """The lab container's mounts: configured ones, then the spawner's."""
    mounts = [volume_mount(m, config) for m in config.lab.volume_mounts]
    mounts.extend(
        {"name": NSS_VOLUME, "mountPath": f"/etc/{key}", "subPath": key, "readOnly": True}
        for key in ("passwd", "group")
    )
    mounts.append({"name": SECRET_VOLUME, "mountPath": config.lab.secrets_path, "readOnly": True})
    if not _has_tmp(config):
        mounts.append({"name": TMP_VOLUME, "mountPath": TMP_PATH})
    return mounts
