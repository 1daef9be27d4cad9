"""adcuda.export.trace_forward: the frozen eval-forward graph the exporters read."""

import numpy as np
import pytest

import adcuda
import adcuda.nn as nn
from adcuda.backends import cpu
from adcuda.export import Dim, ExportError, Ref, trace_forward


def evaluate(graph, inputs):
    """Run a graph on the CPU backend, node by node (what an exporter must reproduce)."""
    env = {v: c.array for v, c in graph.constants.items()}
    env.update(zip(graph.inputs, inputs))

    def arg(value):
        if isinstance(value, Ref):
            return env[value.value]
        if value.__class__ in (list, tuple):
            return value.__class__(arg(v) for v in value)
        return value

    for node in graph.nodes:
        args = {k: arg(v) for k, v in node.params.items()}
        if node.op in ("index_put_", "copy_"):  # the graph reads them as making a new array
            first = next(iter(args))
            args[first] = args[first].copy()
        if node.op == "view":  # values are logical arrays: a view of a permuted value reshapes its elements
            result = np.reshape(args["a"], args["shape"])
        else:
            result = getattr(cpu, node.op)(**args)
        results = result if isinstance(result, tuple) else (result,)
        for r, out in zip(results, node.outputs):
            if out is not None:
                env[out] = r
    return [env[v] for v in graph.outputs]


def test_mlp_graph_reads_folded_weight_transposes():
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4), nn.Softmax(-1))
    x = adcuda.randn(3, 8)
    graph = trace_forward(model, x)
    assert [n.op for n in graph.nodes] == ["matmul", "binary", "unary", "matmul", "binary", "softmax"]
    first = graph.nodes[0]
    weight = graph.constants[first.params["b"].value]
    assert weight.name is None and weight.source == "0.weight"
    np.testing.assert_array_equal(weight.array, model[0].weight.detach().numpy().T)
    bias = graph.constants[graph.nodes[1].params["b"].value]
    assert bias.name == "0.bias"
    assert graph.values[graph.outputs[0]].shape == (3, 4)
    assert graph.values[graph.inputs[0]].dtype == adcuda.float32
    assert "test_export_trace.py:" in graph.nodes[0].where
    np.testing.assert_allclose(evaluate(graph, [x.numpy()])[0], model(x).detach().numpy(), rtol=1e-6)


def test_cnn_graph_restores_train_mode_and_drops_dead_results():
    model = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2))
    model.train()
    x = adcuda.randn(2, 1, 8, 8)
    graph = trace_forward(model, x)
    assert model.training and model[1].training
    pool = [n for n in graph.nodes if n.op == "max_pool2d"][0]
    assert pool.params["kernel"] == (2, 2) and pool.outputs[1] is None  # the indices reach nothing
    model.eval()
    with adcuda.no_grad():
        expected = model(x).numpy()
    np.testing.assert_allclose(evaluate(graph, [x.numpy()])[0], expected, rtol=1e-5, atol=1e-6)


def test_embedding_and_layer_norm():
    model = nn.Sequential(nn.Embedding(10, 6), nn.LayerNorm(6))
    ids = adcuda.tensor([[1, 2, 3], [4, 5, 9]])
    graph = trace_forward(model, ids)
    assert [n.op for n in graph.nodes] == ["embedding", "layer_norm"]
    assert graph.values[graph.inputs[0]].dtype == adcuda.int64
    assert graph.nodes[1].outputs[1:] == (None, None)
    assert "embedding" in str(graph)


class _HostRead(nn.Module):
    def forward(self, x):
        return x * float(x.sum())


class _Draws(nn.Module):
    def forward(self, x):
        return x + adcuda.randn(*x.shape)


class _InPlace(nn.Module):
    def forward(self, x):
        x[0] = 1.0
        return x * 2


@pytest.mark.parametrize(
    "model, message",
    [(_HostRead(), "reads a tensor's value on the host"), (_Draws(), "random draw"), (_InPlace(), "in place")],
)
def test_refusals_name_the_op_and_the_line(model, message):
    with pytest.raises(ExportError, match=message) as info:
        trace_forward(model, adcuda.randn(3, 4))
    assert "test_export_trace.py:" in str(info.value)


def test_forward_hook_and_bad_arguments_are_refused():
    model = nn.Linear(4, 2)
    model.register_forward_hook(lambda m, i, o: None)
    with pytest.raises(ExportError, match="forward hook"):
        trace_forward(model, adcuda.randn(3, 4))
    with pytest.raises(ExportError, match="args must be a tensor"):
        trace_forward(nn.Linear(4, 2), [1.0, 2.0])


def test_dynamic_axes_make_reshape_sizes_symbolic():
    layer = nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, batch_first=True)
    graph = trace_forward(layer, adcuda.randn(2, 5, 8), dynamic_axes={0: {0: "batch"}})
    batch = Dim(1, ("batch",))
    assert graph.values[graph.outputs[0]].symbolic_shape == (batch, 5, 8)
    assert graph.values[graph.outputs[0]].shape == (2, 5, 8)
    views = [n.params["shape"] for n in graph.nodes if n.op == "view"]
    assert (Dim(5, ("batch",)), 8) in views and (5, batch, 8) in views
    assert Dim(5, ("batch",)).evaluate({"batch": 3}) == 15


class _Positions(nn.Module):
    def forward(self, x):
        return x + adcuda.arange(x.shape[1], dtype=adcuda.float32)


class _HostSize(nn.Module):
    def forward(self, x):
        return x * adcuda.tensor(1.0 / x.shape[1])


def test_dynamic_axes_keep_size_made_tensors_as_nodes():
    graph = trace_forward(_Positions(), adcuda.randn(2, 5), dynamic_axes={0: {1: "seq"}})
    (arange,) = [n for n in graph.nodes if n.op == "arange"]
    assert arange.params["stop"] == Dim(1, ("seq",))
    static = trace_forward(_Positions(), adcuda.randn(2, 5), dynamic_axes={0: {0: "batch"}})
    assert [n.op for n in static.nodes] == ["binary"]  # the positions folded into a constant


def test_dynamic_axes_refuse_constants_and_sizes_that_follow_the_input():
    with pytest.raises(ExportError, match="constant .* changes with the dynamic sizes"):
        trace_forward(_HostSize(), adcuda.randn(2, 5), dynamic_axes={0: {1: "seq"}})
    pool = nn.Sequential(nn.MaxPool2d(2), nn.Flatten())
    with pytest.raises(ExportError, match="other than as a product"):
        trace_forward(pool, adcuda.randn(1, 1, 6, 6), dynamic_axes={0: {2: "h", 3: "h"}})


class _ZeroPadded(nn.Module):
    """Zero padding written out: a buffer of the padded shape, the input written into it."""

    def forward(self, x):
        n, c, h, w = x.shape
        out = adcuda.zeros(n, c, h + 2, w + 2)
        out[:, :, 2:, 1:-1] = x
        return out * 2.0


@pytest.mark.parametrize(
    "model, shape",
    [(_ZeroPadded(), (2, 3, 6, 5)), (nn.GRU(4, 3, num_layers=2, batch_first=True), (2, 5, 4))],
)
def test_writes_into_buffers_the_forward_made_are_new_values(model, shape):
    x = adcuda.randn(*shape)
    graph = trace_forward(model, x)
    assert "index_put_" in [n.op for n in graph.nodes]
    with adcuda.no_grad():
        expected = model(x)
    if isinstance(expected, adcuda.Tensor):
        expected = [expected]
    else:
        output, state = expected
        expected = [output, *state] if isinstance(state, tuple) else [output, state]
    for got, want in zip(evaluate(graph, [x.numpy()]), expected):
        np.testing.assert_allclose(got, want.numpy(), rtol=1e-6, atol=1e-7)


class _StaleView(nn.Module):
    def forward(self, x):
        buffer = adcuda.zeros(3, 4)
        row = buffer[0]
        buffer[0] = x
        return row * 2


def test_a_view_read_after_a_write_into_its_tensor_is_refused():
    with pytest.raises(ExportError, match="written in place after the view was made"):
        trace_forward(_StaleView(), adcuda.randn(4))
