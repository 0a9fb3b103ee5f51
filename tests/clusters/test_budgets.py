"""Budgets: a user's is the largest of their groups' limit by limit, and a request that would
pass one is refused naming it, with what is held and allowed."""

from __future__ import annotations

from app.models.config import Budget, BudgetsConfig, GroupBudget
from app.models.identity import Group, UserInfo
from app.models.usage import Usage
from app.workloads.budgets import GIB, budget_for, budget_refusal

DEFAULT = Budget(clusters=1, workers=2, kernels=1, cpu=4, memory=16 * GIB, gpus=0)
BUDGETS = BudgetsConfig(
    default=DEFAULT,
    groups=(
        GroupBudget(
            "science", Budget(clusters=3, workers=8, kernels=2, cpu=16, memory=64 * GIB, gpus=0)
        ),
        GroupBudget(
            "gpu", Budget(clusters=1, workers=2, kernels=4, cpu=8, memory=32 * GIB, gpus=2)
        ),
    ),
)


def _user(*groups: str) -> UserInfo:
    return UserInfo(
        username="rachel",
        name=None,
        email=None,
        uid=1101,
        gid=1101,
        groups=tuple(Group(name, None) for name in groups),
        notebook_quota=None,
    )


def test_a_users_budget_is_the_largest_of_their_groups_limit_by_limit() -> None:
    assert budget_for(_user(), BUDGETS) == DEFAULT
    assert budget_for(_user("unrelated"), BUDGETS) == DEFAULT
    assert budget_for(_user("science", "gpu"), BUDGETS) == Budget(
        clusters=3, workers=8, kernels=4, cpu=16, memory=64 * GIB, gpus=2
    )


def test_a_request_within_the_budget_passes_and_one_past_it_names_the_limit() -> None:
    held = Usage(clusters=1, workers=2, cpu=3, memory=8 * GIB)
    science = budget_for(_user("science"), BUDGETS)
    assert (
        budget_refusal(science, held, Usage(clusters=1, workers=4, cpu=5, memory=8 * GIB)) is None
    )
    refusal = budget_refusal(science, held, Usage(clusters=1, workers=2, cpu=14, memory=GIB))
    assert (
        refusal
        == "the cpu budget would be passed: 17 CPU in all, 16 CPU allowed (3 CPU held already)"
    )
    assert "clusters budget" in str(budget_refusal(DEFAULT, held, Usage(clusters=1)))
    gpus = budget_refusal(science, held, Usage(gpus=1))
    assert gpus == "the gpus budget would be passed: 1 in all, 0 allowed (0 held already)"


def test_shrinking_is_never_refused_even_over_a_lowered_budget() -> None:
    """A budget lowered below what a user holds does not stop them from scaling down."""
    held = Usage(clusters=2, workers=6, cpu=10, memory=40 * GIB)
    assert budget_refusal(DEFAULT, held, Usage(workers=-2, cpu=-2, memory=-4 * GIB)) is None
    assert (held - Usage(workers=2)).workers == 4


def test_kernels_count_against_the_same_budget_as_clusters() -> None:
    """A kernel is counted as one kernel and its pod's CPU, memory and GPUs, in the same
    sums as the user's clusters."""
    held = Usage(clusters=1, workers=2, kernels=1, cpu=3, memory=8 * GIB)
    kernel = Usage(kernels=1, cpu=1, memory=4 * GIB)
    assert budget_refusal(DEFAULT, held, kernel) == (
        "the kernels budget would be passed: 2 in all, 1 allowed (1 held already)"
    )
    science = budget_for(_user("science"), BUDGETS)
    assert budget_refusal(science, held, kernel) is None
    big = Usage(kernels=1, cpu=14, memory=GIB)
    assert "the cpu budget would be passed: 17 CPU" in str(budget_refusal(science, held, big))
