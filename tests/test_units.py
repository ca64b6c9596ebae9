"""The one grammar of sizes and budgets (``streamplan.units``), used by every budget a user types."""

import pytest

from streamplan.errors import BudgetError
from streamplan.schedule.context import MemoryBudget
from streamplan.units import MAX_BYTES, parse_bytes, parse_size_text


@pytest.mark.parametrize(
    "text, expected",
    [
        ("4096", 4096),
        (4096, 4096),
        ("12MiB", 12 << 20),
        ("1.5 GiB", 3 << 29),
        ("1.5gib", 3 << 29),
        ("800MB", 800_000_000),
        ("2GB", 2_000_000_000),
        ("64KiB", 65536),
        ("1kb", 1000),
        ("0.1KiB", 102),  # rounded down: a budget is a ceiling
        ("1e3", 1000),
        ("0", 0),
    ],
)
def test_sizes(text, expected):
    assert parse_size_text(text).limit_bytes == expected
    assert parse_bytes(text) == expected


def test_factors():
    assert parse_size_text("1.2x").factor == 1.2
    assert parse_size_text("0.5X").factor == 0.5
    with pytest.raises(BudgetError, match="is a factor"):
        parse_bytes("1.2x")


@pytest.mark.parametrize(
    "text, fragment",
    [
        ("0.7", "fraction of a byte"),
        ("1e30", "larger than any device"),
        ("1e25", "larger than any device"),
        ("2EiB", "cannot read"),
        ("1e300x", "not a usable factor"),
        ("0x", "not a usable factor"),
        ("lots", "cannot read"),
        ("-1MiB", "cannot read"),
        ("inf", "cannot read"),
        ("nan", "cannot read"),
        (float("nan"), "cannot read"),
        (True, "cannot read"),
    ],
)
def test_refused(text, fragment):
    with pytest.raises(BudgetError, match=fragment):
        parse_size_text(text)


def test_the_largest_size_is_one_exbibyte():
    assert parse_bytes(str(MAX_BYTES)) == MAX_BYTES
    with pytest.raises(BudgetError):
        parse_bytes(str(MAX_BYTES + 1))


@pytest.mark.parametrize("text", ["800MB", "12MiB", "4096", "1.5GiB", "0.7", "1e30"])
def test_every_budget_reader_agrees(text):
    """A budget is read by ``MemoryBudget.parse`` alone (the budget policy, remat, sweeps and
    ``Settings`` all call it): the grammar's size, or the grammar's refusal."""
    from streamplan.schedule.settings import Settings

    try:
        expected = parse_size_text(text).limit_bytes
    except BudgetError:
        with pytest.raises(BudgetError):
            MemoryBudget.parse(text)
        with pytest.raises(BudgetError):
            Settings(budget=text)
        return
    assert MemoryBudget.parse(text).limit_bytes == expected
    assert Settings(budget=text).budget.limit_bytes == expected
