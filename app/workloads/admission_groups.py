"""Which group a user's creations wait with, for fair admission (``app.engine.admission``).

Fairness is between groups, so that a group submitting a burst (a class starting its labs
at once) shares the places with everyone else instead of taking them all. A user's group
is, in order:

1. the first of ``admission.groups`` they belong to: the operator names the groups to share
   between (collaborations, classes), since Gafaelfawr does not say which of a user's
   groups matters;
2. their primary group, the one whose GID is their GID: where every user has a private
   primary group, as on many platforms, this makes admission fair between users;
3. themselves alone (``user:<username>``), for a user without a primary group.

Apps belong to a group already and wait with it (``AppService``).
"""

from __future__ import annotations

from app.models.config import AdmissionConfig
from app.models.identity import UserInfo


def admission_group(user: UserInfo, config: AdmissionConfig) -> str:
    """The group whose turn ``user``'s creations wait for."""
    names = {group.name for group in user.groups}
    for name in config.groups:
        if name in names:
            return name
    if user.gid is not None:
        for group in user.groups:
            if group.id == user.gid:
                return group.name
    return f"user:{user.username}"
