"""A kernel's events: its start and its deletion as streams that replay and resume."""

from __future__ import annotations

from collections.abc import Callable

from flask.testing import FlaskClient

from tests.kernels.conftest import kernel_url, settled, start, with_lab
from tests.labs.conftest import LabUser, read_stream


def test_a_kernels_start_and_deletion_stream_replay_and_resume(
    client: FlaskClient, new_user: Callable[..., LabUser]
) -> None:
    user, stranger = new_user(), new_user()
    with_lab(client, user)
    kernel_id = start(client, user).get_json()["kernel_id"]
    url = kernel_url(user, kernel_id) + "/events"

    started = read_stream(client, url, user.headers)
    assert started[0].data == f"Kernel {kernel_id} requested"
    assert started[-1].type == "complete"
    assert settled(client, user, kernel_id)["status"] == "running"
    resumed = read_stream(client, url, user.headers, last_id=started[-2].id)
    assert [e.id for e in resumed] == [started[-1].id]
    assert client.get(url, headers=stranger.headers).status_code == 403

    deleted = client.delete(kernel_url(user, kernel_id), headers=user.headers)
    assert deleted.status_code == 202
    stopping = read_stream(client, url, user.headers)
    assert stopping[0].data == f"Deletion of kernel {kernel_id} requested"
    assert stopping[-1].type == "complete"
    missing = client.get(kernel_url(user, "no-such-kernel") + "/events", headers=user.headers)
    assert missing.status_code == 404
