"""PyTorch capture: storages of views and in-place ops, FLOPs, multi-output ops, errors, kinds.

A mini-interpreter (decode the attrs, call ``torch.ops`` in node order) checks that a
captured graph carries everything needed to reproduce eager PyTorch.
"""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

from streamplan.errors import CaptureError, UnsupportedError  # noqa: E402
from streamplan.frontends.argcodec import decode  # noqa: E402
from streamplan.frontends.torch_capture import capture, graph_from_fx  # noqa: E402
from streamplan.ir import serialize  # noqa: E402
from streamplan.ir.graph import Graph  # noqa: E402
from streamplan.ir.verify import verify  # noqa: E402

VIEW_OPS = {
    "aten.view.default",
    "aten.transpose.int",
    "aten.slice.Tensor",
    "aten.split.Tensor",
    "aten.chunk.default",
    "aten.expand.default",
    "aten.t.default",
    "aten.select.int",
}


# -- a mini-interpreter: what the runtime does, in graph order on one thread -------------------


def run_graph(graph: Graph, module: nn.Module, inputs: tuple) -> list:
    """Execute ``graph`` with the module's real weights; return the flattened outputs."""
    env: dict = {}
    state = {**module.state_dict(), **dict(module.named_buffers())}
    for vid, fqn in graph.param_names.items():
        if fqn in state:
            env[vid] = state[fqn].clone()
        else:
            dtype = getattr(torch, graph.values[vid].dtype)
            env[vid] = torch.tensor(graph.meta["constant_values"][vid], dtype=dtype)
    env.update(zip(graph.meta["input_names"], [x.clone() for x in inputs], strict=True))
    for node in graph.nodes:
        namespace, name, overload = node.op.split(".")
        fn = getattr(getattr(getattr(torch.ops, namespace), name), overload)
        result = fn(*decode(node.attrs["args"], env), **decode(node.attrs["kwargs"], env))
        if "output_index" in node.attrs:
            for vid, i in zip(node.outputs, node.attrs["output_index"], strict=True):
                env[vid] = result[i]
        elif node.outputs:
            env[node.outputs[0]] = result
    return [decode(leaf, env) for leaf in graph.meta["output_values"]]


def node_by_op(graph: Graph, op: str):
    return next(n for n in graph.nodes if n.op == op)


# -- models -------------------------------------------------------------------------------------


class Views(nn.Module):
    """Every kind of view, a reshape that must copy, and in-place writes."""

    def forward(self, x):  # x: (4, 6)
        y = x * 2
        y[0].mul_(3)  # in-place through a view
        v = y.view(6, 4)
        r = y.reshape(24)  # contiguous: a view
        t = y.transpose(0, 1)
        rc = t.reshape(24)  # not contiguous: a copy
        s = y[1:3]
        a, b = y.split(3, dim=1)
        c0, c1 = y.chunk(2, dim=0)
        e = y[:, :1].expand(4, 6)
        z = rc.relu_()
        z.add_(1.5)
        return v.sum() + r.sum() + s.sum() + a.sum() * b.sum() + c0.sum() - c1.sum() + e.sum(), z


class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 8, 3, padding=1, groups=2)
        self.fc = nn.Linear(8, 5)
        self.register_buffer("offset", torch.full((5,), 0.25))

    def forward(self, x):
        y = self.bn1(self.conv1(x)).relu_()
        y, _ = nn.functional.max_pool2d(y, 2, return_indices=True)
        a, b = y.split(4, dim=1)
        y = torch.cat([b, a], 1)
        z = self.conv2(y)
        z += y  # in-place residual
        z = nn.functional.adaptive_avg_pool2d(z, 1).flatten(1)
        return self.fc(z) * torch.tensor(0.5) + self.offset


def _eval(module: nn.Module) -> nn.Module:
    torch.manual_seed(0)
    for p in module.parameters():
        nn.init.normal_(p, std=0.2)
    for name, buf in module.named_buffers():
        if name.endswith("running_mean"):
            buf.normal_()
        if name.endswith("running_var"):
            buf.uniform_(0.5, 2.0)
    return module.eval()


# -- storages and in-place writes ---------------------------------------------------------------


def test_views_share_the_root_storage_and_inplace_ops_mutate() -> None:
    g = verify(capture(Views(), torch.randn(4, 6)))
    y = node_by_op(g, "aten.mul.Tensor").outputs[0]
    view_nodes = [n for n in g.nodes if n.op in VIEW_OPS]
    assert {n.op for n in view_nodes} >= {
        "aten.view.default",
        "aten.transpose.int",
        "aten.slice.Tensor",
        "aten.split.Tensor",
        "aten.chunk.default",
        "aten.expand.default",
    }
    for n in view_nodes:
        for out in n.outputs:
            assert g.values[out].storage == y, (n.id, out)
            assert g.values[out].nbytes == 4 * math.prod(g.values[out].shape)  # its own view size
        assert (n.flops, n.bytes_read, n.bytes_written) == (0, 0, 0)
    split = node_by_op(g, "aten.split.Tensor")
    assert len(split.outputs) == 2 and split.attrs["output_index"] == [0, 1]
    reshapes = [n for n in g.nodes if n.op == "aten.reshape.default"]
    as_view, as_copy = reshapes  # y.reshape (view) then t.reshape (copy)
    assert g.values[as_view.outputs[0]].storage == y
    copy = as_copy.outputs[0]
    assert g.values[copy].storage == copy and as_copy.bytes_written == 96
    # in-place ops: the result aliases the written input's root, which is listed in mutates
    mul_ = node_by_op(g, "aten.mul_.Tensor")
    assert g.values[mul_.outputs[0]].storage == y and mul_.mutates == mul_.inputs[:1]
    assert g.values[mul_.mutates[0]].storage == y  # it wrote through a select view of y
    relu_ = node_by_op(g, "aten.relu_.default")
    add_ = node_by_op(g, "aten.add_.Tensor")
    assert relu_.mutates == (copy,) and add_.mutates == relu_.outputs
    assert g.values[add_.outputs[0]].storage == copy
    assert g.storages()[y].nbytes == 96 and g.storages()[y].kind == "activation"


def test_a_reader_after_an_inplace_write_through_a_view_waits_for_it() -> None:
    g = capture(Views(), torch.randn(4, 6))
    mul_ = node_by_op(g, "aten.mul_.Tensor")
    for n in g.nodes[g.position(mul_.id) + 1 :]:
        if any(g.values[v].storage == g.values[mul_.outputs[0]].storage for v in n.inputs):
            assert mul_.id in g.predecessors(n.id), n.id


def test_captured_graph_round_trips_through_json_exactly() -> None:
    g = capture(_eval(SmallCNN()), torch.randn(2, 3, 8, 8), name="cnn")
    again = serialize.loads(serialize.dumps(g))
    assert again == g
    assert str(again) == str(g)


# -- cost facts ---------------------------------------------------------------------------------


class Costs(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(8, 16, 3, stride=2, padding=1, groups=2)
        self.fc = nn.Linear(32, 10)
        self.up = nn.ConvTranspose2d(4, 6, 3, stride=2)

    def forward(self, x, h, q, k, v, u, m1, m2):
        att = nn.functional.scaled_dot_product_attention(q, k, v)
        pooled = nn.functional.max_pool2d(u.relu(), 2)
        return self.conv(x), self.fc(h), att, torch.bmm(m1, m2), self.up(u), pooled


def test_flops_and_bytes_of_conv_linear_attention_and_pooling_are_exact() -> None:
    x, h = torch.randn(2, 8, 10, 10), torch.randn(4, 32)
    q, k, v = torch.randn(2, 4, 8, 16), torch.randn(2, 4, 10, 16), torch.randn(2, 4, 10, 16)
    u, m1, m2 = torch.randn(1, 4, 5, 5), torch.randn(3, 4, 5), torch.randn(3, 5, 6)
    g = capture(Costs(), (x, h, q, k, v, u, m1, m2))
    convs = [n for n in g.nodes if n.op.startswith("aten.conv")]
    conv = next(n for n in convs if g.values[n.outputs[0]].shape == (2, 16, 5, 5))
    assert conv.flops == 2 * (2 * 16 * 5 * 5) * (8 // 2) * 3 * 3
    assert conv.bytes_read == 4 * (2 * 8 * 10 * 10 + 16 * 4 * 3 * 3 + 16)
    assert conv.bytes_written == 4 * 2 * 16 * 5 * 5
    up = next(n for n in convs if n is not conv)
    assert up.flops == 2 * (4 * 5 * 5) * 6 * 3 * 3  # transposed: per input element
    assert node_by_op(g, "aten.linear.default").flops == 2 * 4 * 10 * 32
    assert node_by_op(g, "aten.scaled_dot_product_attention.default").flops == 4 * 2 * 4 * 8 * 10 * 16
    assert node_by_op(g, "aten.bmm.default").flops == 2 * 3 * 4 * 6 * 5
    assert node_by_op(g, "aten.max_pool2d.default").flops == (1 * 4 * 2 * 2) * 2 * 2
    assert node_by_op(g, "aten.relu.default").flops == 100


# -- multi-output ops ---------------------------------------------------------------------------


class MultiOut(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("mean", torch.zeros(3))
        self.register_buffer("var", torch.ones(3))

    def forward(self, x):
        values = nn.functional.max_pool2d(x, 2, return_indices=True)[0]
        normed = torch.native_batch_norm(x, None, None, self.mean, self.var, False, 0.1, 1e-5)[0]
        return values, normed


class Lookups(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.table = nn.Embedding(1000, 32)

    def forward(self, ids):
        rows = torch.index_select(self.table.weight, 0, ids[0])
        return self.table(ids) + rows.sum(0) + torch.gather(self.table.weight, 0, ids.T.expand(-1, 32)).sum(0)


def test_a_gather_reads_the_rows_it_picks_not_its_whole_table() -> None:
    """A 1,000-row table looked up with 4 ids: 4 rows read, plus the ids (a lookup is not a table scan)."""
    g = capture(Lookups(), (torch.tensor([[3, 1, 4, 1]]),), name="lookups")
    for op, ids_bytes in (
        ("aten.embedding.default", 4 * 8),
        ("aten.index_select.default", 4 * 8),
        ("aten.gather.default", 4 * 32 * 8),  # an index per element picked
    ):
        n = node_by_op(g, op)
        out = g.values[n.outputs[0]].nbytes
        assert n.bytes_written == out == 4 * 32 * 4, op
        assert n.bytes_read == out + ids_bytes, op


def test_multi_output_ops_give_every_result_a_value() -> None:
    g = capture(MultiOut(), torch.randn(1, 3, 4, 4))
    pool = node_by_op(g, "aten.max_pool2d_with_indices.default")
    values, indices = pool.outputs
    assert values in g.outputs and not g.consumers(indices)  # export keeps an unused getitem
    assert g.values[indices].dtype == "int64" and g.values[indices].nbytes == 8 * 12
    assert pool.bytes_written == 4 * 12 + 8 * 12 and pool.attrs["output_index"] == [0, 1]
    bn = node_by_op(g, "aten.native_batch_norm.default")
    assert len(bn.outputs) == 3 and bn.outputs[0] in g.outputs
    assert all(not g.values[v].is_alias for v in bn.outputs)


def test_results_without_a_getitem_get_numbered_values() -> None:
    from torch.fx.experimental.proxy_tensor import make_fx

    def f(x):
        return torch.ops.aten.max_pool2d_with_indices(x, [2, 2])[0] * 2

    gm = make_fx(f, tracing_mode="fake")(torch.randn(1, 2, 4, 4))
    gm.graph.eliminate_dead_code()  # drops the getitem of the indices
    g = graph_from_fx(gm, name="f")
    pool = node_by_op(g, "aten.max_pool2d_with_indices.default")
    assert pool.outputs == ("getitem", "max_pool2d_with_indices.out1")
    assert g.values["max_pool2d_with_indices.out1"].dtype == "int64"


# -- kinds, names and execution -----------------------------------------------------------------


class Kinds(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(3))
        self.register_buffer("b", torch.randn(3))
        self.register_buffer("scratch", torch.zeros(3), persistent=False)

    def forward(self, x, *, y):
        return x * self.w + self.b + self.scratch + y * torch.tensor([1.0, 2.0, 3.0])


def test_params_buffers_inputs_and_constants_are_classified_and_named() -> None:
    x, y = torch.randn(3), torch.randn(3)
    model = Kinds()
    g = capture(model, ((x,), {"y": y}))
    kinds = {v.id: v.kind for v in g.values.values() if v.id in (*g.inputs, *g.params)}
    names = g.param_names
    by_fqn = {fqn: vid for vid, fqn in names.items()}
    assert kinds[by_fqn["w"]] == "param"
    assert kinds[by_fqn["b"]] == "buffer" and kinds[by_fqn["scratch"]] == "buffer"
    constant = next(vid for vid, k in kinds.items() if k == "constant")
    assert g.meta["constant_values"][constant] == [1.0, 2.0, 3.0] and constant in names
    assert g.meta["input_names"] == ["x", "y"] == list(g.inputs)
    assert all(g.values[v].kind == "input" for v in g.inputs)
    torch.testing.assert_close(run_graph(g, model, (x, y))[0], model(x, y=y))


def test_decoded_attrs_reproduce_eager_output_of_a_small_cnn() -> None:
    model = _eval(SmallCNN())
    x = torch.randn(2, 3, 8, 8)
    g = capture(model, x)
    assert any(n.mutates for n in g.nodes)  # relu_ and the in-place residual
    (out,) = run_graph(g, model, (x,))
    torch.testing.assert_close(out, model(x))


def test_inplace_and_view_semantics_survive_execution() -> None:
    x = torch.randn(4, 6)
    g = capture(Views(), x)
    got = run_graph(g, Views(), (x,))
    for a, b in zip(got, Views()(x.clone()), strict=True):
        torch.testing.assert_close(a, b)


def test_no_grad_regions_are_inlined() -> None:
    class NoGrad(nn.Module):
        def forward(self, x):
            y = x + 1
            with torch.no_grad():
                z = (y * 2).relu()
            return z + y

    x = torch.randn(5)
    g = capture(NoGrad(), x)
    assert not any("higher_order" in n.op for n in g.nodes)
    torch.testing.assert_close(run_graph(g, NoGrad(), (x,))[0], NoGrad()(x))


def test_fake_example_inputs_are_accepted() -> None:
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        x = torch.empty(64, 3, 32, 32)
    g = capture(_eval(SmallCNN()), x)
    assert g.values[g.inputs[0]].shape == (64, 3, 32, 32)


def test_graph_from_fx_converts_an_aten_graph_with_named_params() -> None:
    from torch.fx.experimental.proxy_tensor import make_fx

    def f(x, w):
        y = torch.mm(x, w).relu_()
        return y.t(), y.sum()

    x, w = torch.randn(4, 5), torch.randn(5, 3)
    gm = make_fx(f, tracing_mode="fake")(x, w)
    g = graph_from_fx(gm, name="f", params={"w_1": nn.Parameter(w)})
    assert g.inputs == ("x_1",) and g.params == ("w_1",)
    assert g.param_names == {"w_1": "w_1"}
    assert node_by_op(g, "aten.mm.default").flops == 2 * 4 * 3 * 5
    relu_ = node_by_op(g, "aten.relu_.default")
    assert relu_.mutates == ("mm",) and g.values[node_by_op(g, "aten.t.default").outputs[0]].storage == "mm"
    with pytest.raises(UnsupportedError, match="static shapes"):
        graph_from_fx(make_fx(f, tracing_mode="symbolic")(x, w), name="f")


# -- errors -------------------------------------------------------------------------------------


def test_data_dependent_control_flow_gives_one_clear_error() -> None:
    class Branchy(nn.Module):
        def forward(self, x):
            if x.sum() > 0:
                return x * 2
            return x - 1

    with pytest.raises(CaptureError) as info:
        capture(Branchy(), torch.randn(4))
    text = str(info.value)
    assert "data-dependent control flow" in text and "test_capture.py" in text
    assert "Traceback" not in text and len(text.splitlines()) <= 3


def test_a_forward_that_raises_is_named() -> None:
    class Broken(nn.Module):
        def forward(self, x):
            raise ValueError("shape mismatch in block 3")

    with pytest.raises(CaptureError, match="ValueError: shape mismatch in block 3"):
        capture(Broken(), torch.randn(2))


def test_capture_needs_a_module() -> None:
    with pytest.raises(CaptureError, match="needs a torch.nn.Module"):
        capture(lambda x: x + 1, torch.randn(2))


def test_every_unsupported_construct_is_listed_at_once() -> None:
    class Unsupported(nn.Module):
        def forward(self, x):
            y = torch.cond(x.sum() > 0, lambda t: t.sin(), lambda t: t.cos(), (x,))
            return y, x.nonzero().float().sum()

    with pytest.raises(UnsupportedError) as info:
        capture(Unsupported(), torch.randn(4))
    text = str(info.value)
    assert "2 unsupported constructs" in text
    assert "higher-order op cond" in text and "data-dependent shape" in text


def test_batch32_capture_of_a_mid_size_cnn_runs_no_real_kernel() -> None:
    """A batch-32 capture sees every op at batch 32 but computes nothing: the module's
    forward only ever receives fake tensors (its time is in bench/capture_time.py)."""
    from torch._subclasses.fake_tensor import FakeTensor

    def block(cin, cout):
        return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU(inplace=True))

    model = nn.Sequential(
        block(3, 64),
        block(64, 64),
        nn.MaxPool2d(2),
        block(64, 128),
        block(128, 128),
        nn.MaxPool2d(2),
        block(128, 256),
        block(256, 256),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(256, 1000),
    ).eval()
    seen: list[type] = []
    model[0][0].register_forward_pre_hook(lambda m, args: seen.append(type(args[0])))
    g = capture(model, torch.randn(32, 3, 224, 224))
    assert seen and all(issubclass(t, FakeTensor) for t in seen), seen
    convs = [n for n in g.nodes if "conv" in n.op]
    assert len(convs) == 6
    first = g.values[convs[0].outputs[0]]
    assert first.shape == (32, 64, 224, 224) and first.nbytes == 4 * 32 * 64 * 224 * 224
    # 2 * out numel * Cin * 3 * 3 for the first conv: the FLOPs are counted at batch 32
    assert convs[0].flops == 2 * 32 * 64 * 224 * 224 * 3 * 9
    assert g.values[g.outputs[0]].shape == (32, 1000)
