"""Training roles are part of the IR: checked, printed nowhere they do not belong, and kept by JSON."""

from __future__ import annotations

import json

import pytest

from streamplan.errors import GraphError
from streamplan.ir import dumps, loads, verify
from streamplan.ir.graph import ROLES
from streamplan.ir.serialize import graph_to_dict
from streamplan.ir.training import training_step
from streamplan.models import load_model


def test_roles_and_training_facts_round_trip_through_json():
    g = load_model("random:12", train=True, optimizer="adam")
    assert g.is_training and set(g.roles.values()) <= set(ROLES)
    back = loads(dumps(g))
    assert back == g and dict(back.roles) == dict(g.roles)
    assert training_step(back) == training_step(g)


def test_a_file_without_roles_still_loads():
    g = load_model("random:12", train=True)
    data = graph_to_dict(g)
    data.pop("roles")
    old = loads(json.dumps(data))
    assert not old.roles and not old.is_training and len(old.nodes) == len(g.nodes)


def test_inference_graphs_have_no_roles_and_write_no_roles_key():
    g = load_model("random:12")
    assert not g.roles and training_step(g) is None
    assert "roles" not in graph_to_dict(g)


def test_verify_rejects_unknown_roles_and_roles_of_aliases():
    g = load_model("random:12", train=True, optimizer="sgd")
    with pytest.raises(GraphError, match="unknown role 'weights'"):
        verify(g.replace(roles={**g.roles, "w0": "weights"}))
    alias = next(v.id for v in g.values.values() if v.is_alias)  # an in-place update's result
    with pytest.raises(GraphError, match="not a storage"):
        verify(g.replace(roles={**g.roles, alias: "parameter"}))


def test_every_storage_of_a_step_has_a_role_or_is_an_input():
    g = load_model("random:20", train=True, optimizer="momentum")
    for sid, st in g.storages().items():
        assert (sid in g.roles) != (st.kind == "input"), sid
    step = training_step(g)
    assert [step.phase(g, op) for op in (g.node_ids[0], step.first_backward_op, step.first_optimizer_op)] == [
        "forward",
        "backward",
        "optimizer",
    ]
