"""What a user types as a budget: bytes, binary and decimal units, a factor of the sequential peak."""

from __future__ import annotations

import pytest

from streamplan.errors import BudgetError
from streamplan.schedule import MemoryBudget


@pytest.mark.parametrize(
    ("text", "limit", "factor"),
    [
        ("12MiB", 12 << 20, None),
        ("1.5 GiB", 3 << 29, None),
        ("4096", 4096, None),
        ("800MB", 800_000_000, None),
        ("2kib", 2048, None),
        ("1.2x", None, 1.2),
        ("0.5X", None, 0.5),
    ],
)
def test_parse(text, limit, factor):
    b = MemoryBudget.parse(text)
    assert (b.limit_bytes, b.factor, b.figure) == (limit, factor, "worst_case")


def test_factor_resolves_against_the_sequential_figure():
    assert MemoryBudget.parse("1.5x").limit_for(10 << 20) == 15 << 20
    assert MemoryBudget.parse("3MiB").limit_for(10 << 20) == 3 << 20


@pytest.mark.parametrize("text", ["12 furlongs", "", "MiB", "-3MiB", "0x", "1.2.3"])
def test_unreadable_budgets_are_budget_errors(text):
    with pytest.raises(BudgetError) as e:
        MemoryBudget.parse(text)
    assert isinstance(e.value, ValueError)


def test_one_of_bytes_or_factor_and_a_known_figure():
    with pytest.raises(BudgetError):
        MemoryBudget()
    with pytest.raises(BudgetError):
        MemoryBudget(limit_bytes=1, factor=1.0)
    with pytest.raises(BudgetError, match="figure"):
        MemoryBudget(limit_bytes=1, figure="simulated")
    assert MemoryBudget.parse("1MiB", figure="arena").describe().startswith("the static arena")
