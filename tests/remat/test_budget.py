"""Reading budgets (``MemoryBudget.parse``, the one reader), and the floor no plan can go below."""

from __future__ import annotations

import pytest

from helpers.dags import chain, diamond
from streamplan.errors import BudgetError
from streamplan.ir.includes import Includes
from streamplan.remat.budget import peak_floor
from streamplan.schedule.context import MemoryBudget

MIB = 1 << 20


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1048576", MIB),
        (4096, 4096),
        ("512MiB", 512 * MIB),
        ("2 GiB", 2 << 30),
        ("1.5KiB", 1536),
        ("64kib", 64 << 10),
        ("100B", 100),
        ("0.4x", 400),
        ("1x", 1000),
    ],
)
def test_budgets_in_bytes_units_and_factors(text, expected):
    assert MemoryBudget.parse(text).limit_for(1000) == expected


@pytest.mark.parametrize("text", ["lots", "-1MiB", "2XB", "1.2.3", "", "nanx", "inf"])
def test_unreadable_budgets_are_user_errors(text):
    with pytest.raises(BudgetError, match="cannot read the memory budget"):
        MemoryBudget.parse(text).limit_for(1000)


def test_a_factor_needs_a_baseline():
    with pytest.raises(BudgetError, match="factor"):
        MemoryBudget.parse("0.5x").limit_for(None)


def test_floor_is_the_largest_op_inputs_and_outputs():
    f = peak_floor(diamond())  # d reads b and c and writes d: 3 MiB
    assert (f.bytes, f.op, f.op_bytes) == (3 * MIB, "n3", 3 * MIB)
    assert "n3 needs its inputs and outputs" in f.reason()


def test_floor_counts_resident_storages_when_asked():
    f = peak_floor(chain(3), Includes(inputs=True))
    assert f.bytes == 2 * MIB + MIB and f.resident_bytes == MIB
    assert "inputs/parameters" in f.reason()
