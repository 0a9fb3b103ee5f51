"""Benchmark: a user's file server, as its user meets it.

The local stack runs as ``make run`` runs it: the file-server image is the repository's real
WebDAV server, a process on its pod's address, behind the stack's ingress proxy and the
Gafaelfawr emulator, with the user's demo home directory as its ``home`` mount. For each of
``rounds`` rounds, with no file server running, it measures the time from ``GET /files``
(which starts the server and answers once it serves) to the first successful ``PROPFIND`` of
the user's home through the ingress, as a WebDAV client's first listing; and the upload and
download of a ``size_mb`` MB file through the ingress (HTTP Basic auth, the token as the
password, as davfs2 sends it), beside a local ``cp`` of the same file on the same disk. The
ingress proxy and the Gafaelfawr emulator are in the path, as the real ingress and Gafaelfawr
are in a deployment's.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import requests

from bench.stats import summary_ms
from devstack.stack import LocalStack, StackOptions

USER = "rachel"
CHUNK = 1 << 20
PROPFIND_BODY = (
    b'<?xml version="1.0" encoding="utf-8"?>'
    b'<propfind xmlns="DAV:"><prop><resourcetype/><getcontentlength/></prop></propfind>'
)


def _chunks(path: Path) -> Iterator[bytes]:
    with path.open("rb") as source:
        while block := source.read(CHUNK):
            yield block


def _digest(path: Path) -> str:
    digest = hashlib.sha256()
    for block in _chunks(path):
        digest.update(block)
    return digest.hexdigest()


def _stopped(session: requests.Session, spawner: str, admin: str) -> None:
    """No file server of the user's running (the admin route answers once it is gone)."""
    session.delete(
        f"{spawner}/fileserver/v1/users/{USER}",
        headers={"Authorization": f"Bearer {admin}"},
        timeout=120,
    )


def _first_listing(session: requests.Session, spawner: str, files: str, token: str) -> float:
    """Seconds from ``GET /files`` to the first successful PROPFIND of the user's home."""
    begun = time.perf_counter()
    answer = session.get(
        f"{spawner}/files",
        headers={"Authorization": f"Bearer {token}", "Accept": "application/json"},
        timeout=180,
    )
    answer.raise_for_status()
    while True:
        listing = session.request(
            "PROPFIND",
            f"{files}home/{USER}/",
            data=PROPFIND_BODY,
            headers={"Depth": "1", "Content-Type": "application/xml"},
            auth=(USER, token),
            timeout=60,
        )
        if listing.status_code == 207:
            return time.perf_counter() - begun
        if time.perf_counter() - begun > 180:
            raise RuntimeError(f"no listing: {listing.status_code} {listing.text[:200]}")


def _transfer(
    session: requests.Session, files: str, token: str, source: Path, back: Path
) -> dict[str, float]:
    """Upload ``source`` to the user's home and download it to ``back``; seconds each."""
    url = f"{files}home/{USER}/bench-{source.name}"
    begun = time.perf_counter()
    with source.open("rb") as body:  # streamed, with its length, as davfs2 sends a file
        put = session.put(url, data=body, auth=(USER, token), timeout=600)
    uploaded = time.perf_counter() - begun
    if put.status_code not in (201, 204):
        raise RuntimeError(f"upload refused: {put.status_code} {put.text[:200]}")
    begun = time.perf_counter()
    with session.get(url, auth=(USER, token), stream=True, timeout=600) as got:
        got.raise_for_status()
        with back.open("wb") as target:
            for block in got.iter_content(CHUNK):
                target.write(block)
    downloaded = time.perf_counter() - begun
    session.delete(url, auth=(USER, token), timeout=60)
    return {"upload": uploaded, "download": downloaded}


def _local_copy(source: Path, target: Path) -> float:
    begun = time.perf_counter()
    subprocess.run(["cp", str(source), str(target)], check=True)
    seconds = time.perf_counter() - begun
    target.unlink()
    return seconds


def run(workdir: Path, *, rounds: int = 5, size_mb: int = 100) -> dict[str, Any]:
    stack = LocalStack(
        StackOptions(state_dir=workdir / "fileservers", real_labs=True, pull_seconds=0.0)
    ).start()
    source = workdir / f"fileserver-{size_mb}mb.bin"
    back = workdir / "fileserver-back.bin"
    with source.open("wb") as out:
        for _ in range(size_mb):
            out.write(os.urandom(CHUNK))
    expected = _digest(source)
    firsts: list[float] = []
    uploads: list[float] = []
    downloads: list[float] = []
    copies: list[float] = []
    try:
        state = stack.state()
        tokens = {name: entry["token"] for name, entry in state["tokens"].items()}
        files = f"{state['ingress_url']}/files/{USER}/"
        spawner = str(stack.spawner_url)
        with requests.Session() as session:
            for _ in range(rounds):
                _stopped(session, spawner, tokens["admin"])
                firsts.append(_first_listing(session, spawner, files, tokens[USER]))
                timed = _transfer(session, files, tokens[USER], source, back)
                if _digest(back) != expected:
                    raise RuntimeError("the file downloaded is not the file uploaded")
                uploads.append(timed["upload"])
                downloads.append(timed["download"])
                copies.append(_local_copy(source, workdir / "fileserver-copy.bin"))
            _stopped(session, spawner, tokens["admin"])
    finally:
        stack.stop()
        for path in (source, back):
            path.unlink(missing_ok=True)
        shutil.rmtree(workdir / "fileservers", ignore_errors=True)

    def rate(seconds: list[float]) -> float:
        return round(size_mb / sorted(seconds)[len(seconds) // 2], 1)

    return {
        "rounds": rounds,
        "size_mb": size_mb,
        "get_files_to_first_propfind": summary_ms(firsts),
        "upload": summary_ms(uploads),
        "download": summary_ms(downloads),
        "local_cp": summary_ms(copies),
        "upload_mb_per_s_p50": rate(uploads),
        "download_mb_per_s_p50": rate(downloads),
        "local_cp_mb_per_s_p50": rate(copies),
        "upload_vs_cp_p50": round(rate(uploads) / rate(copies), 3),
        "download_vs_cp_p50": round(rate(downloads) / rate(copies), 3),
    }
