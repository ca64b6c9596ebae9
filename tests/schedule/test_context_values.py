"""A scheduling context and its settings are values, and each policy's options are typed."""

import pytest

from streamplan.budget.policy import BudgetOptions
from streamplan.cost.measured import MeasuredCostModel, MeasuredTable
from streamplan.cost.opcost import AnalyticCostModel
from streamplan.errors import ScheduleError
from streamplan.models import load_model
from streamplan.schedule.context import ScheduleContext
from streamplan.schedule.ios import IosOptions
from streamplan.schedule.registry import POLICIES, make_schedule, policy_info, policy_options
from streamplan.schedule.settings import Settings


def test_contexts_with_equal_fields_are_equal_and_hash_alike():
    assert ScheduleContext() == ScheduleContext() and hash(ScheduleContext()) == hash(ScheduleContext())
    a = ScheduleContext(cost="h100", options={"r": 2}, progress=print)
    b = ScheduleContext(cost=AnalyticCostModel("h100"), options={"r": 2})
    assert a == b and len({a, b}) == 1  # the progress callback is not part of the value
    assert a != b.replace(seed=1) and a != b.replace(cost="v100")
    assert ScheduleContext(cost=AnalyticCostModel("h100", cuda_graphs=True)) != ScheduleContext(cost="h100")
    s = Settings(device="h100", policy_options={"ios": {"r": 2}})
    assert s.context("ios") == s.context("ios") and s.context("ios").options == IosOptions(r=2)


def test_a_measured_cost_model_is_a_value_without_counters():
    g = load_model("seed-example2")
    a = MeasuredCostModel(MeasuredTable("fake", {"x": 1.0}), fallback="v100")
    b = MeasuredCostModel(MeasuredTable("fake", {"x": 1.0}), fallback=AnalyticCostModel("v100"))
    make_schedule(g, "ios", ScheduleContext(cost=a))  # using it changes nothing about it
    assert a == b and hash(a) == hash(b) and not hasattr(a, "hits")
    assert a.coverage(g) == (0, len(g.nodes))


@pytest.mark.parametrize("policy", POLICIES)
def test_every_policy_declares_an_options_class(policy):
    info = policy_info(policy)
    cls = info.options_type()
    default = cls()
    assert hash(default) == hash(cls()) and policy_options(policy, {}) == default
    assert policy_options(policy, default) is default


def test_options_are_checked_and_typed():
    assert policy_options("ios", {"r": 2, "s": "4"}) == IosOptions(r=2, s=4)
    with pytest.raises(ScheduleError, match="no option 'q'"):
        policy_options("ios", {"q": 1})
    with pytest.raises(ScheduleError, match="r must be an integer"):
        policy_options("ios", {"r": 0})
    with pytest.raises(ScheduleError, match="unknown budget solver"):
        BudgetOptions(solver="magic")
    with pytest.raises(ScheduleError, match="takes IosOptions"):
        policy_options("ios", BudgetOptions())
    # settings keep the typed options, and only where they differ from the defaults
    assert Settings(policy_options={"ios": {"r": 2}}) == Settings(policy_options={"ios": IosOptions(r=2)})
    assert Settings(policy_options={"ios": {}}) == Settings()
    g = load_model("seed-example2")
    typed = make_schedule(g, "ios", ScheduleContext(options=IosOptions(r=1, s=1)))
    assert typed == make_schedule(g, "ios", ScheduleContext(options={"r": 1, "s": 1}))
