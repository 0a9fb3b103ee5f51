"""The passwd and group files mounted into the lab."""

from __future__ import annotations

import dataclasses

import pytest

from app.builders.nss import group_file, passwd_file
from app.config import Config
from app.workloads.lab.builders import build_lab
from tests.builders.conftest import COMMA, COPIED, LONER, PULL_DATA, RACHEL, TOKEN, WILE, make_spec

BASE_PASSWD = (
    "root:x:0:0:root:/root:/bin/bash\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
)
BASE_GROUP = "root:x:0:\nnogroup:x:65534:\n"


def test_rachel_primary_group_in_list() -> None:
    assert passwd_file(RACHEL) == (
        BASE_PASSWD + "rachel:x:1101:1101:Rachel Lopez:/home/rachel:/bin/bash\n"
    )
    assert group_file(RACHEL) == BASE_GROUP + "rachel:x:1101:\nlsst-data:x:2001:rachel\n"


def test_wile_primary_group_named_differently() -> None:
    assert passwd_file(WILE) == (
        BASE_PASSWD + "wile:x:1102:1500:Wile E. Coyote:/home/wile:/bin/bash\n"
    )
    assert group_file(WILE) == BASE_GROUP + "staff:x:1500:\nscience:x:2002:wile\n"


def test_user_without_groups_gets_group_for_primary_gid() -> None:
    assert passwd_file(LONER) == BASE_PASSWD + "loner:x:1103:1103::/home/loner:/bin/bash\n"
    assert group_file(LONER) == BASE_GROUP + "loner:x:1103:\n"


def test_primary_gid_missing_from_groups_is_added_first() -> None:
    assert group_file(COMMA) == (
        BASE_GROUP + "roadrunner:x:1104:\nroad-runners:x:3001:roadrunner\n"
    )


def test_name_with_comma_colon_and_spaces_is_made_safe() -> None:
    # "Runner, Road  Beep:Beep": commas split GECOS sub-fields and colons split passwd fields.
    assert passwd_file(COMMA) == (
        BASE_PASSWD + "roadrunner:x:1104:1104:Runner Road Beep Beep:/home/roadrunner:/bin/bash\n"
    )
    newline = dataclasses.replace(COMMA, name="Road\nRunner")
    assert passwd_file(newline).count("\n") == 3


@pytest.mark.parametrize("field", ["uid", "gid"])
def test_user_without_ids_cannot_have_a_lab(field: str, full_config: Config) -> None:
    user = (
        dataclasses.replace(RACHEL, uid=None)
        if field == "uid"
        else dataclasses.replace(RACHEL, gid=None)
    )
    with pytest.raises(ValueError, match="no uid or gid"):
        passwd_file(user)
    with pytest.raises(ValueError, match="no uid or gid"):
        build_lab(
            make_spec(full_config, user),
            full_config,
            token=TOKEN,
            copied_secrets=COPIED,
            pull_secret_data=PULL_DATA,
            provision=False,
        )


def test_nss_config_map(full_config: Config) -> None:
    objects = build_lab(
        make_spec(full_config, WILE),
        full_config,
        token=TOKEN,
        copied_secrets=COPIED,
        pull_secret_data=PULL_DATA,
        provision=False,
    )
    cm = objects.nss_config_map
    assert cm["metadata"]["name"] == "nb-wile-nss"
    assert cm["metadata"]["namespace"] == "nublado-wile"
    assert cm["data"] == {"passwd": passwd_file(WILE), "group": group_file(WILE)}
