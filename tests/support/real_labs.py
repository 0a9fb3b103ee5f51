"""What the tests of ``make run``'s real labs share: a spawn as a user would make it."""

from __future__ import annotations

import requests

RECOMMENDED_SMALL = {"options": {"image_class": "recommended", "size": "small"}, "env": {}}


def spawn_recommended(spawner_url: str, token: str, username: str) -> None:
    """Spawn ``username``'s lab with the recommended image through the service, with the
    user's own token, as the README's first call does."""
    response = requests.post(
        f"{spawner_url}/spawner/v1/labs/{username}/spawn",
        headers={"Authorization": f"Bearer {token}"},
        json=RECOMMENDED_SMALL,
        allow_redirects=False,
        timeout=10,
    )
    assert response.status_code == 303, response.text
