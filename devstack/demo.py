"""The demo data of the local stack: users, their tokens, and the registry's images.

``make run`` and the tests build their Gafaelfawr and registry emulators from here, so a
developer sees the same users, tokens and tags everywhere.

* :func:`demo_users` — the users Gafaelfawr's user-info reports;
* :func:`demo_group_mapping` — the scope ``app:<group>`` for each of their groups, granted to
  its members (Gafaelfawr's ``groupMapping``): what a group's apps ask of a token;
* :func:`demo_tokens` — tokens by name (``admin``, ``rachel``, ``wile``,
  ``rachel-readonly``, ``admin-user``); their values are derived from :data:`DEMO_SEED`
  so they are the same on every run and can be pasted into a browser or notebook. The
  people's tokens (``rachel``, ``wile``, ``admin-user``) carry :data:`FILES_SCOPE`, which
  their file servers ask for; ``rachel-readonly`` and the hub's ``admin`` do not;
* :func:`demo_registry_repositories` — ``{repository: {tag: image_id}}`` with
  SQR-059-style tags in :data:`LAB_REPOSITORY`, a small :data:`SIMPLE_REPOSITORY`, the
  group app image :data:`DEMO_APP_REPOSITORY`, the maintenance pod's
  :data:`FSADMIN_REPOSITORY` and the users' file servers' :data:`FILESERVER_REPOSITORY`;
* :func:`demo_gafaelfawr` and :func:`demo_registry` — emulators loaded with the above.
"""

from __future__ import annotations

from dataclasses import dataclass

from devstack.gafaelfawr import (
    GafaelfawrEmulator,
    GroupSpec,
    NotebookQuotaSpec,
    TokenSpec,
    UserSpec,
    derive_token,
)
from devstack.registry import RegistryEmulator

__all__ = [
    "ADMIN_POD_SCOPE",
    "ADMIN_SCOPE",
    "APP_SCOPE",
    "DEMO_APP_REPOSITORY",
    "DEMO_CREATED",
    "DEMO_SEED",
    "EXEC_SCOPE",
    "FILESERVER_REPOSITORY",
    "FILES_SCOPE",
    "FSADMIN_REPOSITORY",
    "HUB_USERNAME",
    "IMAGE_SCOPE",
    "LAB_REPOSITORY",
    "RECOMMENDED_TAG",
    "SIMPLE_REPOSITORY",
    "DemoToken",
    "demo_gafaelfawr",
    "demo_group_mapping",
    "demo_registry",
    "demo_registry_repositories",
    "demo_tokens",
    "demo_users",
]

DEMO_SEED = "nublado-devstack-demo"
"""Seed the demo token values are derived from; change it to rotate every demo token."""

DEMO_CREATED = 1730419200
"""Creation time reported for demo tokens (2024-11-01T00:00:00Z), fixed like the tokens."""

ADMIN_SCOPE = "admin:notebook"
EXEC_SCOPE = "exec:notebook"
IMAGE_SCOPE = "read:image"
ADMIN_POD_SCOPE = "admin:lab-pods"
"""The maintenance pod's scope (``admin.pod.scope``'s default): a person's, not the hub's."""
FILES_SCOPE = "write:files"
"""The scope a user's file server asks for (``fileserver.scope``'s default)."""

HUB_USERNAME = "jupyterhub"
"""The service identity whose token JupyterHub uses for admin calls."""

LAB_REPOSITORY = "lsstsqre/sciplat-lab"
SIMPLE_REPOSITORY = "lsstsqre/simple-lab"
BROKEN_REPOSITORY = "lsstsqre/broken-lab"
"""A lab image whose Python is broken (``devstack/images/programs.yaml``): the demo's
validated source offers it beside a good build, and its validation rejects it."""
FSADMIN_REPOSITORY = "lsstsqre/fsadmin"
"""The maintenance pod's image: ``devstack/images/fsadmin.py``, which lists its mounts."""
FILESERVER_REPOSITORY = "lsstsqre/fileserver"
"""A user's file server's image: the repository's WebDAV server (``devstack/images/
fileserver.py``)."""
PROVISIONER_REPOSITORY = "lsstsqre/provision-home"
"""The init container's image: never a lab, so the local stack never runs it as a process
(its command prepares home directories as root, on the machine it runs on)."""
RECOMMENDED_TAG = "recommended"
DEMO_APP_REPOSITORY = "lsstsqre/demo-app"
"""A group app's image: ``devstack/images/app.py``, a small web server under its base URL."""
APP_SCOPE = "app:{group}"
"""The scope the demo group mapping grants each group's members."""


@dataclass(frozen=True)
class DemoToken:
    """A named demo token before its value is derived."""

    name: str
    username: str
    scopes: tuple[str, ...]
    token_type: str


_DEMO_TOKENS = (
    DemoToken("admin", HUB_USERNAME, (ADMIN_SCOPE,), "service"),
    DemoToken("rachel", "rachel", (EXEC_SCOPE, IMAGE_SCOPE, FILES_SCOPE), "notebook"),
    DemoToken("wile", "wile", (EXEC_SCOPE, IMAGE_SCOPE, FILES_SCOPE), "notebook"),
    # Rachel's token without write:files (nor exec:notebook): what a file server refuses.
    DemoToken("rachel-readonly", "rachel", (IMAGE_SCOPE,), "user"),
    DemoToken(
        "admin-user",
        "admin-user",
        (ADMIN_SCOPE, ADMIN_POD_SCOPE, IMAGE_SCOPE, FILES_SCOPE),
        "session",
    ),
)


def demo_users() -> list[UserSpec]:
    """The demo users, chosen to cover the shapes user-info can take.

    ``rachel`` has a quota and her primary group in the group list; ``wile``'s primary
    group differs from his username and he has no quota; ``admin-user`` has no GID, name
    or email; ``jupyterhub`` is a service identity with no POSIX data at all.

    ``rachel`` and ``admin-user`` share ``lsst-data``, which ``wile`` (who can log in and
    spawn labs) is not in: a group's apps let two of them in and refuse the third.
    """
    return [
        UserSpec(
            username="rachel",
            uid=1101,
            gid=1101,
            name="Rachel Example",
            email="rachel@example.com",
            groups=(
                GroupSpec("rachel", 1101),
                GroupSpec("lsst-data", 2001),
                GroupSpec("g-no-gid"),
            ),
            notebook_quota=NotebookQuotaSpec(cpu=8.0, memory=32.0),
        ),
        UserSpec(
            username="wile",
            uid=1102,
            gid=1500,
            name="Wile E. Coyote",
            groups=(
                GroupSpec("staff", 1500),
                GroupSpec("science", 2002),
                GroupSpec("cloud-users"),
            ),
        ),
        UserSpec(
            username="admin-user",
            uid=1103,
            groups=(GroupSpec("g-admins", 2003), GroupSpec("lsst-data", 2001)),
        ),
        UserSpec(username=HUB_USERNAME),
    ]


def demo_group_mapping() -> dict[str, list[str]]:
    """``app:<group>`` for every group of a demo user, granted to that group's members."""
    groups = sorted({g.name for user in demo_users() for g in user.groups})
    return {APP_SCOPE.format(group=group): [group] for group in groups}


def demo_tokens() -> dict[str, TokenSpec]:
    """The demo tokens by name; the same values on every run (derived from DEMO_SEED)."""
    return {
        t.name: TokenSpec(
            token=derive_token(DEMO_SEED, t.name),
            username=t.username,
            scopes=t.scopes,
            token_type=t.token_type,
            created=DEMO_CREATED,
        )
        for t in _DEMO_TOKENS
    }


_RELEASES = ("r26_0_0", "r25_0_1", "r24_1_0", "r22_0_1")
_RELEASE_CANDIDATES = ("r26_0_0_rc1", "r26_0_0_rc2")
_WEEKLIES = ("w_2024_40", "w_2024_41", "w_2024_42", "w_2024_43", "w_2024_44")
_DAILIES = ("d_2024_11_01", "d_2024_11_04", "d_2024_11_05")
_EXPERIMENTALS = ("exp_w_2024_44_nosudo", "exp_w_2024_42_fix")
_OTHERS = ("w_2024_44_c0040.001", "w_2024_44-amd64", "w_2024_44-arm64", "something-else")
_ALIASES = {
    RECOMMENDED_TAG: "w_2024_42",
    "latest": "w_2024_44",
    "latest_weekly": "w_2024_44",
    "latest_daily": "d_2024_11_05",
    "latest_release": "r26_0_0",
}


def demo_registry_repositories() -> dict[str, dict[str, str]]:
    """``{repository: {tag: image_id}}`` for the demo registry.

    Every non-alias tag is its own image (its id is the repository and tag); each alias
    maps to the id of the tag it stands for, so it shares that tag's digest.
    """
    lab: dict[str, str] = {}
    for tag in (*_RELEASES, *_RELEASE_CANDIDATES, *_WEEKLIES, *_DAILIES, *_EXPERIMENTALS, *_OTHERS):
        lab[tag] = f"{LAB_REPOSITORY}:{tag}"
    for alias, target in _ALIASES.items():
        lab[alias] = lab[target]
    simple = {
        "1.0": f"{SIMPLE_REPOSITORY}:1.0",
        "1.1": f"{SIMPLE_REPOSITORY}:1.1",
        "2.0": f"{SIMPLE_REPOSITORY}:2.0",
    }
    simple["latest"] = simple["2.0"]
    broken = {"1.0": f"{BROKEN_REPOSITORY}:1.0"}
    provisioner = {"1.0": f"{PROVISIONER_REPOSITORY}:1.0"}
    fsadmin = {"1.0": f"{FSADMIN_REPOSITORY}:1.0"}
    fileserver = {"1.0": f"{FILESERVER_REPOSITORY}:1.0"}
    app = {"1.0": f"{DEMO_APP_REPOSITORY}:1.0", "1.1": f"{DEMO_APP_REPOSITORY}:1.1"}
    app["latest"] = app["1.1"]
    return {
        LAB_REPOSITORY: lab,
        SIMPLE_REPOSITORY: simple,
        BROKEN_REPOSITORY: broken,
        PROVISIONER_REPOSITORY: provisioner,
        FSADMIN_REPOSITORY: fsadmin,
        DEMO_APP_REPOSITORY: app,
        FILESERVER_REPOSITORY: fileserver,
    }


LOAD_SCOPES = ("exec:notebook", "read:image")
"""What a load test's users' tokens hold: enough to spawn and follow their own labs."""


def add_load_users(
    gafaelfawr: GafaelfawrEmulator, names: list[str], *, first_uid: int, group: GroupSpec
) -> dict[str, str]:
    """Register users for a load test or benchmark, each with a UID, a primary group of its
    own and ``group``; their tokens (``LOAD_SCOPES``) by name."""
    tokens = {}
    for index, name in enumerate(names):
        uid = first_uid + index
        gafaelfawr.add_user(
            UserSpec(
                username=name,
                uid=uid,
                gid=uid,
                name=f"Load {name}",
                groups=(GroupSpec(name, uid), group),
            )
        )
        tokens[name] = gafaelfawr.issue_token(name, LOAD_SCOPES)
    return tokens


def demo_gafaelfawr(port: int = 0) -> GafaelfawrEmulator:
    """A Gafaelfawr emulator (not started) loaded with the demo users, tokens and group
    mapping."""
    return GafaelfawrEmulator(
        users=demo_users(), tokens=demo_tokens(), port=port, group_mapping=demo_group_mapping()
    )


def demo_registry(
    credentials: tuple[str, str] | None = None, page_size: int = 100, port: int = 0
) -> RegistryEmulator:
    """A registry emulator (not started) loaded with the demo repositories."""
    return RegistryEmulator(
        repositories=demo_registry_repositories(),
        credentials=credentials,
        page_size=page_size,
        port=port,
    )
