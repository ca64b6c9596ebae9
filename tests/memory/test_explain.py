"""explain_peak / compare_peaks: named storages, the seed's arena sentence, policy warnings."""

from helpers.dags import chain
from helpers.schedules import asap, sequential
from streamplan.memory import compare_peaks, explain_peak
from streamplan.zoo.seed import example2


def test_explains_seed_example2_asap_in_words():
    g = example2()
    e = explain_peak(g, asap(g))
    text = str(e)
    assert "five tensors (a, b, c, d, e) may pairwise be live together" in text
    assert "at most four ever are at once" in text
    assert "no fixed placement fits in 4.000 MiB" in text
    assert {s.storage for s in e.worst_case_live} == {"a", "b", "c", "d"}
    assert {s.producer for s in e.worst_case_live} == {"a", "b", "c", "d"}
    assert {s.stream for s in e.worst_case_live} == {0, 1}
    assert e.to_dict()["memory"]["arena_bytes"] == 5 << 20


def test_compare_names_the_overlap_that_raised_the_peak():
    g = example2()
    c = compare_peaks(g, sequential(g), asap(g))
    pairs = {(o.first, o.second, o.u, o.v) for o in c.overlaps}
    assert ("a", "d", "c", "d") in pairs
    assert c.newly_concurrent_op_pairs and c.newly_concurrent_op_pairs > 0
    assert "worst-case" in str(c) and c.to_dict()["overlaps"]


def test_warns_when_nothing_is_independent():
    g = chain(4)
    e = explain_peak(g, sequential(g))
    assert any("no two ops" in w and "fusion" in w for w in e.warnings)


def test_warns_on_single_op_graph():
    g = chain(1)
    e = explain_peak(g, sequential(g))
    assert any("single op" in w for w in e.warnings)


def test_no_warning_when_branches_exist():
    g = example2()
    assert explain_peak(g, asap(g)).warnings == ()
