"""Batch, instance, group and RMS norm, channel dropout and the recurrent layers (RNN, LSTM, GRU and
their cells): float64 gradchecks, errors that name the op and shapes, and, where torch is installed,
PyTorch's outputs, gradients, running statistics and state dicts (loaded both ways)."""

import numpy as np
import pytest

import adcuda
import adcuda.nn as nn
import adcuda.nn.functional as F
from adcuda.autograd import gradcheck, gradgradcheck
from adcuda.errors import DTypeError, ShapeError, UnsupportedDTypeError
from adcuda.ops.recurrent import gru_cell_pointwise, gru_layer, lstm_cell_pointwise, lstm_layer

F64 = adcuda.float64


def rng(seed=0):
    return np.random.default_rng(seed)


def leaf(a):
    return adcuda.tensor(np.asarray(a, np.float64), requires_grad=True)


def value(t):
    return t.detach().numpy()


# ------------------------------------------------------------------------------------------------
# gradchecks (float64)
GRADCHECKS = {
    "batch_norm": (lambda x, w, b: F.batch_norm(x, None, None, w, b, True, 0.1, 1e-5), [(4, 3, 5), (3,), (3,)]),
    "batch_norm_2d": (lambda x, w, b: F.batch_norm(x, None, None, w, b, True), [(2, 3, 2, 3), (3,), (3,)]),
    "batch_norm_eval": (
        lambda x, w, b: F.batch_norm(x, adcuda.zeros(3, dtype=F64) + 0.5, adcuda.ones(3, dtype=F64) * 2, w, b, False),
        [(4, 3), (3,), (3,)],
    ),
    "instance_norm": (lambda x, w, b: F.instance_norm(x, weight=w, bias=b), [(2, 3, 5), (3,), (3,)]),
    "group_norm": (lambda x, w, b: F.group_norm(x, 2, w, b), [(2, 4, 3), (4,), (4,)]),
    "rms_norm": (lambda x, w: F.rms_norm(x, (5,), w), [(3, 5), (5,)]),
    "lstm_cell_pointwise": (lambda gi, gh, c: lstm_cell_pointwise(gi, gh, c), [(3, 8), (3, 8), (3, 2)]),
    "gru_cell_pointwise": (lambda gi, gh, h: gru_cell_pointwise(gi, gh, h), [(3, 6), (3, 6), (3, 2)]),
    "lstm_layer": (
        lambda x, h, c, wi, wh, bi, bh: lstm_layer(x, h, c, wi, wh, bi, bh),
        [(3, 2, 5), (2, 2), (2, 2), (8, 5), (8, 2), (8,), (8,)],
    ),
    "lstm_layer_reverse_batch_first": (
        lambda x, h, c, wi, wh, bh: lstm_layer(x, h, c, wi, wh, None, bh, True, True),
        [(2, 3, 5), (2, 2), (2, 2), (8, 5), (8, 2), (8,)],
    ),
    "lstm_layer_no_bias_batch_first": (
        lambda x, h, c, wi, wh: lstm_layer(x, h, c, wi, wh, None, None, False, True),
        [(2, 3, 5), (2, 2), (2, 2), (8, 5), (8, 2)],
    ),
    "gru_layer": (lambda p, h, w, b: gru_layer(p, h, w, b), [(3, 2, 6), (2, 2), (6, 2), (6,)]),
    "gru_layer_reverse": (lambda p, h, w: gru_layer(p, h, w, None, True), [(3, 2, 6), (2, 2), (6, 2)]),
}


@pytest.mark.parametrize("name", sorted(GRADCHECKS))
def test_gradcheck(name):
    fn, shapes = GRADCHECKS[name]
    inputs = tuple(leaf(rng(i).standard_normal(s)) for i, s in enumerate(shapes))
    assert gradcheck(fn, inputs, eps=1e-6, atol=1e-6, rtol=1e-4)


@pytest.mark.parametrize(
    "name", ["lstm_cell_pointwise", "gru_cell_pointwise", "batch_norm", "group_norm", "lstm_layer", "gru_layer"]
)
def test_gradgradcheck(name):
    fn, shapes = GRADCHECKS[name]
    inputs = tuple(leaf(rng(i).standard_normal(s)) for i, s in enumerate(shapes))
    assert gradgradcheck(fn, inputs, atol=1e-5, rtol=1e-3)


@pytest.mark.parametrize("mode", ["RNN", "LSTM", "GRU"])
def test_recurrent_layer_gradcheck(mode):
    adcuda.manual_seed(0)
    layer = getattr(nn, mode)(3, 2, num_layers=2, bidirectional=True).double()
    h0 = leaf(rng(1).standard_normal((4, 2, 2)))
    x = leaf(rng(2).standard_normal((3, 2, 3)))

    def run(x, h0):
        out, _ = layer(x, (h0, h0 * 0.5) if mode == "LSTM" else h0)
        return out

    assert gradcheck(run, (x, h0), eps=1e-6, atol=1e-6, rtol=1e-4)


def graph_nodes(out):
    """{node name: count} of the graph behind ``out``."""
    counts, seen, stack = {}, set(), [out.grad_fn]
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        name = getattr(node, "name", type(node).__name__)
        name = name() if callable(name) else name
        counts[name] = counts.get(name, 0) + 1
        stack.extend(n for n, _ in node.next_functions)
    return counts


def test_a_layer_records_a_few_nodes_whatever_the_length():
    # per layer and direction: the input projection and one recurrence node, never one per step
    for mode, node in (("LSTM", "LstmLayerBackward"), ("GRU", "GruLayerBackward")):
        out, _ = getattr(nn, mode)(4, 3, bidirectional=True).double()(leaf(rng().standard_normal((50, 2, 4))))
        counts = graph_nodes(out)
        assert counts[node] == 2 and sum(counts.values()) <= 24, counts
    out, _ = nn.LSTMCell(4, 3).double()(leaf(rng().standard_normal((2, 4))))
    assert "LstmCellPointwiseBackward" in graph_nodes(out)


def test_empty_sequence_and_layer_op_errors():
    out, (h, c) = nn.LSTM(3, 2)(adcuda.zeros(0, 4, 3))
    assert tuple(out.shape) == (0, 4, 2) and tuple(h.shape) == (1, 4, 2)
    x = leaf(np.zeros((0, 2, 6)))
    gru_layer(x, leaf(np.ones((2, 2))), leaf(np.ones((6, 2)))).sum().backward()
    assert tuple(x.grad.shape) == (0, 2, 6)
    x = leaf(np.zeros((0, 2, 3)))
    h0 = leaf(np.ones((2, 2)))
    out = lstm_layer(x, h0, h0 * 0.5, leaf(np.ones((8, 3))), leaf(np.ones((8, 2))))
    np.testing.assert_array_equal(value(out), [[1, 1], [1, 1], [0.5, 0.5], [0.5, 0.5]])  # no steps: h0, c0
    (out * adcuda.tensor([[1.0], [1.0], [2.0], [2.0]], dtype=F64)).sum().backward()
    assert tuple(x.grad.shape) == (0, 2, 3)
    np.testing.assert_array_equal(h0.grad.numpy(), np.full((2, 2), 2.0))
    z = adcuda.zeros
    for arguments, options, error, match in (  # lstm_layer(input, h0, c0, w_ih, w_hh, ...)
        (
            (z(3, 2, 6), z(2, 2), z(2, 2), z(8, 5), z(8, 2)),
            {},
            ShapeError,
            r"lstm_layer: .*input \(3, 2, 6\), h0 \(2, 2\), c0 \(2, 2\), w_ih \(8, 5\)",
        ),
        (
            (z(2, 3, 6), z(3, 2), z(3, 2), z(8, 6), z(8, 2)),
            {"batch_first": True},
            ShapeError,
            r"lstm_layer: expected input \(B, T, F\).*h0 \(3, 2\)",
        ),
        ((z(3, 2, 6), z(2, 2), z(2, 2), z(8, 6), z(8, 2, dtype=F64)), {}, DTypeError, "lstm_layer: expected one dtype"),
    ):
        with pytest.raises(error, match=match):
            lstm_layer(*arguments, **options)


# ------------------------------------------------------------------------------------------------
# errors name the op and the shapes
def test_bad_input_raises_errors_naming_the_op_and_shapes():
    x = adcuda.randn(4, 3, 5)
    with pytest.raises(ShapeError, match=r"batch_norm.*\(4, 3, 5\).*\(2,\)"):
        F.batch_norm(x, None, None, adcuda.ones(2), None, True)
    with pytest.raises(ShapeError, match=r"batch_norm: expected more than 1 value per channel.*\(1, 3\)"):
        F.batch_norm(adcuda.randn(1, 3), None, None, training=True)
    with pytest.raises(ShapeError, match=r"group_norm.*\(4, 3, 5\).*num_groups=2"):
        F.group_norm(x, 2)
    with pytest.raises(ShapeError, match=r"rms_norm.*\(4,\).*\(4, 3, 5\)"):
        F.rms_norm(x, (4,))
    with pytest.raises(ShapeError, match=r"BatchNorm2d: expected 4D input.*\(4, 3, 5\)"):
        nn.BatchNorm2d(3)(x)
    with pytest.warns(UserWarning, match="Received a 2-D input to dropout2d"):  # PyTorch warns, then drops
        F.dropout2d(adcuda.randn(4, 3))
    with pytest.raises(ShapeError, match=r"LSTM: input.size\(-1\) must be equal to input_size. Expected 4.*\(4, 3, 5"):
        nn.LSTM(4, 2)(x)
    with pytest.raises(ShapeError, match=r"GRU: expected hidden size \(1, 3, 2\), got \(1, 4, 2\)"):
        nn.GRU(5, 2)(x, adcuda.zeros(1, 4, 2))
    with pytest.raises(ShapeError, match=r"RNN: expected input to be 2-D or 3-D.*\(5,\)"):
        nn.RNN(5, 2)(adcuda.randn(5))
    with pytest.raises(ShapeError, match=r"lstm_cell_pointwise.*\(2, 8\), \(2, 8\) and \(2, 3\)"):
        lstm_cell_pointwise(adcuda.randn(2, 8), adcuda.randn(2, 8), adcuda.randn(2, 3))
    with pytest.raises(DTypeError, match=r"gru_cell_pointwise.*float64"):
        gru_cell_pointwise(adcuda.randn(2, 6), adcuda.randn(2, 6), adcuda.randn(2, 2, dtype=F64))
    with pytest.raises(UnsupportedDTypeError, match=r"batch_norm.*int64"):
        F.batch_norm(adcuda.tensor([[1, 2], [3, 4]]), None, None, training=True)


# ------------------------------------------------------------------------------------------------
# module behaviour that needs no reference
def test_batch_norm_buffers_and_modes():
    bn = nn.BatchNorm1d(3)
    assert [k for k, _ in bn.state_dict().items()] == [
        "weight",
        "bias",
        "running_mean",
        "running_var",
        "num_batches_tracked",
    ]
    assert bn.num_batches_tracked.dtype == adcuda.int64
    x = adcuda.randn(8, 3) * 3 + 1
    bn(x)
    bn(x)
    assert int(bn.num_batches_tracked.item()) == 2
    assert not np.allclose(value(bn.running_mean), 0)
    bn.eval()
    before = value(bn.running_mean).copy()
    bn(x)
    np.testing.assert_array_equal(value(bn.running_mean), before)
    free = nn.BatchNorm2d(3, affine=False, track_running_stats=False)
    assert list(free.state_dict()) == [] and free.running_mean is None
    y = free.eval()(adcuda.randn(2, 3, 4, 4) * 5)  # batch statistics even in eval mode
    np.testing.assert_allclose(value(y).mean((0, 2, 3)), 0, atol=1e-5)


def test_empty_batch():
    y = nn.BatchNorm1d(3)(adcuda.zeros(0, 3))
    assert tuple(y.shape) == (0, 3)
    assert tuple(F.group_norm(adcuda.zeros(0, 4, 2), 2).shape) == (0, 4, 2)
    out, h = nn.GRU(3, 2)(adcuda.zeros(4, 0, 3))
    assert tuple(out.shape) == (4, 0, 2) and tuple(h.shape) == (1, 0, 2)


def test_channel_dropout_zeroes_whole_channels():
    adcuda.manual_seed(3)
    x = adcuda.ones(16, 8, 3, 5)
    y = value(nn.Dropout2d(0.5)(x))
    per_channel = y.reshape(16, 8, -1)
    assert np.all(per_channel.min(-1) == per_channel.max(-1))  # each channel all kept or all dropped
    assert set(np.unique(y)) == {0.0, 2.0}
    y1 = value(F.dropout1d(adcuda.ones(4, 6, 7), 0.25))
    assert np.all(y1.min(-1) == y1.max(-1)) and set(np.unique(y1)) <= {0.0, np.float32(4 / 3)}
    assert tuple(F.dropout1d(adcuda.ones(6, 7), 0.5).shape) == (6, 7)
    with pytest.warns(UserWarning, match="interpreted as shape \\(N, C, L\\)"):  # PyTorch's reading of 3-D
        y3 = value(F.dropout2d(adcuda.ones(16, 8, 3), 0.5))
    assert np.all(y3.min(-1) == y3.max(-1)) and 0 < (y3[:, :, 0] == 0).sum() < 128
    d = nn.Dropout1d(0.5).eval()
    np.testing.assert_array_equal(value(d(adcuda.ones(4, 6, 7))), 1.0)
    g = leaf(np.ones((4, 6, 7)))
    out = F.dropout1d(g, 0.5)
    out.sum().backward()
    np.testing.assert_array_equal(value(g.grad), value(out))


def test_dropout_between_layers_only_while_training():
    adcuda.manual_seed(1)
    layer = nn.LSTM(3, 4, num_layers=3, dropout=0.5)
    x = adcuda.randn(5, 2, 3)
    layer.eval()
    a, b = value(layer(x)[0]), value(layer(x)[0])
    np.testing.assert_array_equal(a, b)
    layer.train()
    assert not np.allclose(value(layer(x)[0]), a)


def test_recurrent_parameters_and_init():
    layer = nn.GRU(3, 5, num_layers=2, bidirectional=True, bias=True)
    names = [n for n, _ in layer.named_parameters()]
    assert names[:5] == ["weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0", "weight_ih_l0_reverse"]
    shapes = dict((n, tuple(p.shape)) for n, p in layer.named_parameters())
    assert shapes["weight_ih_l1"] == (15, 10) and shapes["weight_hh_l1_reverse"] == (15, 5)
    bound = 1 / np.sqrt(5)
    for _, p in layer.named_parameters():
        assert np.abs(value(p)).max() <= bound
    assert [n for n, _ in nn.LSTMCell(2, 3, bias=False).named_parameters()] == ["weight_ih", "weight_hh"]
    layer.flatten_parameters()  # cuDNN's packing in PyTorch: nothing to do here, and scripts call it
    assert len(layer.all_weights) == 4 and layer.all_weights[1][0] is layer.weight_ih_l0_reverse


# ------------------------------------------------------------------------------------------------
# against PyTorch
def _torch():
    return pytest.importorskip("torch")


def _copy_state(src_torch, dst):
    dst.load_state_dict({k: adcuda.tensor(v.detach().numpy()) for k, v in src_torch.state_dict().items()})


def _close(a, b, atol=1e-10):
    np.testing.assert_allclose(
        value(a) if isinstance(a, adcuda.Tensor) else a, b.detach().numpy(), rtol=1e-7, atol=atol
    )


def _same_output_and_input_grad(ours, theirs, x):
    """``ours(x)`` is PyTorch's ``theirs(x)``, and so is the gradient of ``sum(y**3)`` to x."""
    xt, xa = _torch().tensor(x, requires_grad=True), leaf(x)
    yt, ya = theirs(xt), ours(xa)
    _close(ya, yt)
    (yt**3).sum().backward()
    (ya**3).sum().backward()
    _close(xa.grad, xt.grad, atol=1e-9)


def _same_state(ours, theirs):
    for k, v in theirs.state_dict().items():
        np.testing.assert_allclose(value(ours.state_dict()[k]), v.numpy(), rtol=1e-12)


@pytest.mark.parametrize("mode", ["RNN", "RNN_relu", "LSTM", "GRU"])
@pytest.mark.parametrize(
    "layout",
    [
        dict(),
        dict(batch_first=True, bidirectional=True, num_layers=2),
        dict(num_layers=3, bias=False),
        dict(unbatched=True, bidirectional=True),
    ],
)
@pytest.mark.parametrize("given_state", [False, True])
def test_recurrent_layers_match_pytorch(mode, layout, given_state):
    torch = _torch()
    layout = dict(layout)
    unbatched = layout.pop("unbatched", False)
    kwargs = dict(layout, nonlinearity="relu") if mode == "RNN_relu" else layout
    cls = mode.split("_")[0]
    theirs = getattr(torch.nn, cls)(4, 3, **kwargs).double()
    ours = getattr(nn, cls)(4, 3, **kwargs).double()
    _copy_state(theirs, ours)
    r = rng(7)
    shape = (5, 4) if unbatched else ((2, 5, 4) if layout.get("batch_first") else (5, 2, 4))
    x = r.standard_normal(shape)
    layers = layout.get("num_layers", 1) * (2 if layout.get("bidirectional") else 1)
    states = (layers,) + (() if unbatched else (2,)) + (3,)
    h0, c0 = r.standard_normal(states), r.standard_normal(states)
    xt, xa = torch.tensor(x, requires_grad=True), leaf(x)
    ht, ha = torch.tensor(h0, requires_grad=True), leaf(h0)
    ct, ca = torch.tensor(c0, requires_grad=True), leaf(c0)
    hx_t = ((ht, ct) if cls == "LSTM" else ht) if given_state else None
    hx_a = ((ha, ca) if cls == "LSTM" else ha) if given_state else None
    out_t, state_t = theirs(xt, hx_t)
    out_a, state_a = ours(xa, hx_a)
    _close(out_a, out_t)
    finals_t = state_t if cls == "LSTM" else (state_t,)
    finals_a = state_a if cls == "LSTM" else (state_a,)
    for a, t in zip(finals_a, finals_t):
        _close(a, t)
    weights = r.standard_normal(tuple(out_t.shape))
    loss_t = (out_t * torch.tensor(weights)).sum() + sum((s**2).sum() for s in finals_t)
    loss_a = (out_a * adcuda.tensor(weights)).sum() + sum((s**2).sum() for s in finals_a)
    loss_t.backward()
    loss_a.backward()
    _close(xa.grad, xt.grad)
    if given_state:
        _close(ha.grad, ht.grad)
        if cls == "LSTM":
            _close(ca.grad, ct.grad)
    for (n_t, p_t), (n_a, p_a) in zip(theirs.named_parameters(), ours.named_parameters()):
        assert n_t == n_a
        _close(p_a.grad, p_t.grad)


def test_state_dicts_load_both_ways():
    torch = _torch()
    ours = nn.LSTM(4, 3, num_layers=2, bidirectional=True)
    theirs = torch.nn.LSTM(4, 3, num_layers=2, bidirectional=True)
    theirs.load_state_dict({k: torch.tensor(value(v)) for k, v in ours.state_dict().items()})
    x = rng(3).standard_normal((5, 2, 4)).astype(np.float32)
    _close(ours(adcuda.tensor(x))[0], theirs(torch.tensor(x))[0], atol=1e-6)
    bn = nn.BatchNorm2d(3)
    bn(adcuda.randn(4, 3, 2, 2) * 2 + 1)
    tbn = torch.nn.BatchNorm2d(3)
    tbn.load_state_dict({k: torch.tensor(value(v)) for k, v in bn.state_dict().items()})
    assert int(tbn.num_batches_tracked) == 1
    back = nn.BatchNorm2d(3)
    _copy_state(tbn, back)
    for k, v in bn.state_dict().items():
        np.testing.assert_array_equal(value(back.state_dict()[k]), value(v))


@pytest.mark.parametrize(
    "layout",
    [dict(), dict(batch_first=True, bidirectional=True, num_layers=2), dict(bias=False, unbatched=True)],
    ids=str,
)
@pytest.mark.parametrize("given_state", [False, True])
def test_projected_lstm_matches_pytorch(layout, given_state):
    # proj_size: h = weight_hr (o * tanh(c)) of size P; c keeps the hidden size H
    torch = _torch()
    layout = dict(layout)
    unbatched = layout.pop("unbatched", False)
    theirs = torch.nn.LSTM(4, 5, proj_size=3, **layout).double()
    ours = nn.LSTM(4, 5, proj_size=3, **layout).double()
    _copy_state(theirs, ours)
    assert [n for n, _ in ours.named_parameters()] == [n for n, _ in theirs.named_parameters()]
    r = rng(8)
    x = r.standard_normal((6, 4) if unbatched else ((2, 6, 4) if layout.get("batch_first") else (6, 2, 4)))
    layers = layout.get("num_layers", 1) * (2 if layout.get("bidirectional") else 1)
    batch = () if unbatched else (2,)
    h0, c0 = r.standard_normal((layers,) + batch + (3,)), r.standard_normal((layers,) + batch + (5,))
    xt, xa = torch.tensor(x, requires_grad=True), leaf(x)
    ht, ha, ct, ca = torch.tensor(h0, requires_grad=True), leaf(h0), torch.tensor(c0, requires_grad=True), leaf(c0)
    out_t, finals_t = theirs(xt, (ht, ct) if given_state else None)
    out_a, finals_a = ours(xa, (ha, ca) if given_state else None)
    for a, t in zip((out_a,) + tuple(finals_a), (out_t,) + tuple(finals_t)):
        assert tuple(a.shape) == tuple(t.shape)
        _close(a, t)
    weights = r.standard_normal(tuple(out_t.shape))
    (out_t * torch.tensor(weights)).sum().add(sum((s**2).sum() for s in finals_t)).backward()
    (out_a * adcuda.tensor(weights)).sum().add(sum((s**2).sum() for s in finals_a)).backward()
    _close(xa.grad, xt.grad)
    if given_state:
        _close(ha.grad, ht.grad)
        _close(ca.grad, ct.grad)
    for (_, p_t), (_, p_a) in zip(theirs.named_parameters(), ours.named_parameters()):
        _close(p_a.grad, p_t.grad)


def test_projected_lstm_state_dicts_gradcheck_and_errors():
    torch = _torch()
    ours = nn.LSTM(4, 5, num_layers=2, proj_size=2, bidirectional=True)
    shapes = {n: tuple(p.shape) for n, p in ours.named_parameters()}
    assert shapes["weight_hr_l0"] == (2, 5) and shapes["weight_hh_l1_reverse"] == (20, 2)
    assert shapes["weight_ih_l1"] == (20, 4) and len(ours.all_weights[3]) == 5
    assert ours.all_weights[3][4] is ours.weight_hr_l1_reverse
    theirs = torch.nn.LSTM(4, 5, num_layers=2, proj_size=2, bidirectional=True)
    theirs.load_state_dict({k: torch.tensor(value(v)) for k, v in ours.state_dict().items()})
    x = rng(3).standard_normal((5, 2, 4)).astype(np.float32)
    _close(ours(adcuda.tensor(x))[0], theirs(torch.tensor(x))[0], atol=1e-6)
    back = nn.LSTM(4, 5, num_layers=2, proj_size=2, bidirectional=True)
    _copy_state(theirs, back)
    _close(back(adcuda.tensor(x))[0], theirs(torch.tensor(x))[0], atol=1e-6)
    assert "proj_size=2" in repr(back)
    adcuda.manual_seed(0)
    layer = nn.LSTM(3, 4, proj_size=2, bidirectional=True).double()
    h0, c0 = leaf(rng(1).standard_normal((2, 2, 2))), leaf(rng(2).standard_normal((2, 2, 4)))
    x = leaf(rng(4).standard_normal((3, 2, 3)))
    assert gradcheck(lambda x, h0, c0: layer(x, (h0, c0))[0], (x, h0, c0), eps=1e-6, atol=1e-6, rtol=1e-4)
    with pytest.raises(ValueError, match="LSTM: proj_size has to be smaller than hidden_size"):
        nn.LSTM(3, 4, proj_size=4)
    with pytest.raises(ValueError, match="LSTM: proj_size should be a positive integer or zero"):
        nn.LSTM(3, 4, proj_size=-1)
    with pytest.raises(ShapeError, match=r"LSTM: expected hidden size \(1, 2, 2\), got \(1, 2, 4\)"):
        nn.LSTM(3, 4, proj_size=2)(adcuda.randn(5, 2, 3), (adcuda.zeros(1, 2, 4), adcuda.zeros(1, 2, 4)))


@pytest.mark.parametrize("mode", ["RNNCell", "LSTMCell", "GRUCell"])
@pytest.mark.parametrize("unbatched", [False, True])
def test_cells_match_pytorch(mode, unbatched):
    torch = _torch()
    theirs = getattr(torch.nn, mode)(4, 3).double()
    ours = getattr(nn, mode)(4, 3).double()
    _copy_state(theirs, ours)
    r = rng(11)
    x = r.standard_normal((4,) if unbatched else (2, 4))
    h = r.standard_normal((3,) if unbatched else (2, 3))
    xt, xa = torch.tensor(x, requires_grad=True), leaf(x)
    ht, ha = torch.tensor(h, requires_grad=True), leaf(h)
    if mode == "LSTMCell":
        out_t, out_a = theirs(xt, (ht, ht * 2)), ours(xa, (ha, ha * 2))
    else:
        out_t, out_a = (theirs(xt, ht),), (ours(xa, ha),)
    for a, t in zip(out_a, out_t):
        _close(a, t)
    sum((o * (i + 1)).sum() for i, o in enumerate(out_t)).backward()
    sum((o * (i + 1)).sum() for i, o in enumerate(out_a)).backward()
    _close(xa.grad, xt.grad)
    _close(ha.grad, ht.grad)
    for (_, p_t), (_, p_a) in zip(theirs.named_parameters(), ours.named_parameters()):
        _close(p_a.grad, p_t.grad)
    assert tuple(ours(xa)[0].shape if mode == "LSTMCell" else ours(xa).shape) == tuple(h.shape)


@pytest.mark.parametrize(
    "cls,shape", [("BatchNorm1d", (6, 3)), ("BatchNorm1d", (4, 3, 5)), ("BatchNorm2d", (4, 3, 2, 5))]
)
@pytest.mark.parametrize(
    "options", [dict(), dict(momentum=None), dict(affine=False, momentum=0.3), dict(track_running_stats=False)]
)
def test_batch_norm_matches_pytorch(cls, shape, options):
    torch = _torch()
    theirs = getattr(torch.nn, cls)(3, **options).double()
    ours = getattr(nn, cls)(3, **options).double()
    if ours.affine:
        w = rng(5).standard_normal(3)
        with torch.no_grad():
            theirs.weight.copy_(torch.tensor(w))
        _copy_state(theirs, ours)
    r = rng(6)
    for _ in range(3):
        x = r.standard_normal(shape) * 2 + 0.5
        _same_output_and_input_grad(ours, theirs, x)
        if ours.affine:
            _close(ours.weight.grad, theirs.weight.grad, atol=1e-9)
            _close(ours.bias.grad, theirs.bias.grad, atol=1e-9)
    _same_state(ours, theirs)
    theirs.eval()
    ours.eval()
    x = r.standard_normal(shape)
    _close(ours(leaf(x)), theirs(torch.tensor(x)))


@pytest.mark.parametrize("options", [dict(), dict(affine=True), dict(track_running_stats=True)])
@pytest.mark.parametrize(
    "cls,shape",
    [
        ("InstanceNorm1d", (2, 3, 5)),
        ("InstanceNorm1d", (3, 5)),
        ("InstanceNorm2d", (2, 3, 4, 2)),
        ("InstanceNorm2d", (3, 4, 2)),
    ],
)
def test_instance_norm_matches_pytorch(cls, shape, options):
    torch = _torch()
    theirs = getattr(torch.nn, cls)(3, **options).double()
    ours = getattr(nn, cls)(3, **options).double()
    if ours.affine:
        with torch.no_grad():
            theirs.weight.copy_(torch.tensor(rng(1).standard_normal(3)))
    _copy_state(theirs, ours)
    x = rng(2).standard_normal(shape) * 3 + 1
    _same_output_and_input_grad(ours, theirs, x)
    _same_state(ours, theirs)
    theirs.eval()
    ours.eval()
    _close(ours(leaf(x)), theirs(torch.tensor(x)))


@pytest.mark.parametrize("groups,shape", [(1, (2, 4, 3)), (2, (2, 4, 3, 2)), (4, (3, 4)), (2, (1, 6, 5))])
def test_group_norm_matches_pytorch(groups, shape):
    torch = _torch()
    theirs = torch.nn.GroupNorm(groups, shape[1]).double()
    with torch.no_grad():
        theirs.weight.copy_(torch.tensor(rng(3).standard_normal(shape[1])))
        theirs.bias.copy_(torch.tensor(rng(4).standard_normal(shape[1])))
    ours = nn.GroupNorm(groups, shape[1]).double()
    _copy_state(theirs, ours)
    x = rng(5).standard_normal(shape) * 2
    _same_output_and_input_grad(ours, theirs, x)
    _close(ours.weight.grad, theirs.weight.grad, atol=1e-9)
    _close(ours.bias.grad, theirs.bias.grad, atol=1e-9)


@pytest.mark.parametrize("shape,normalized,eps", [((3, 5), (5,), None), ((2, 3, 4), (3, 4), 1e-3)])
@pytest.mark.parametrize("affine", [True, False])
def test_rms_norm_matches_pytorch(shape, normalized, eps, affine):
    torch = _torch()
    theirs = torch.nn.RMSNorm(normalized, eps=eps, elementwise_affine=affine).double()
    ours = nn.RMSNorm(normalized, eps=eps, elementwise_affine=affine).double()
    if affine:
        with torch.no_grad():
            theirs.weight.copy_(torch.tensor(rng(8).standard_normal(normalized)))
    _copy_state(theirs, ours)
    x = rng(9).standard_normal(shape)
    _same_output_and_input_grad(ours, theirs, x)
    x32 = x.astype(np.float32)
    np.testing.assert_allclose(
        value(F.rms_norm(adcuda.tensor(x32), normalized)),
        torch.nn.functional.rms_norm(torch.tensor(x32), normalized).numpy(),
        rtol=1e-5,
        atol=1e-6,
    )


@pytest.mark.parametrize("affine", [True, False])
def test_batch_norm_float32_with_an_offset_mean_matches_pytorch(affine):
    # the CPU backend's fused passes (per-channel BLAS sums, rstd folded into the weight) keep
    # float32 results within rounding of PyTorch's when the mean is far from zero
    torch = _torch()
    r = rng(21)
    x = (r.standard_normal((8, 4, 16, 16)) * 3 + 20).astype(np.float32)
    g = r.standard_normal(x.shape).astype(np.float32)
    w, b = r.standard_normal(4).astype(np.float32), r.standard_normal(4).astype(np.float32)
    ours = [adcuda.tensor(a, requires_grad=True) for a in (x, w, b)]
    theirs = [torch.tensor(a, requires_grad=True) for a in (x, w, b)]
    ya = F.batch_norm(ours[0], None, None, *(ours[1:] if affine else (None, None)), training=True)
    yt = torch.nn.functional.batch_norm(theirs[0], None, None, *(theirs[1:] if affine else (None, None)), training=True)
    np.testing.assert_allclose(value(ya), yt.detach().numpy(), rtol=1e-4, atol=1e-5)
    ya.backward(adcuda.tensor(g))
    yt.backward(torch.tensor(g))
    for a, t in zip(ours, theirs) if affine else [(ours[0], theirs[0])]:
        np.testing.assert_allclose(value(a.grad), t.grad.numpy(), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("reverse,batch_first", [(False, False), (True, True)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_native_lstm_steps_equal_the_numpy_loops(monkeypatch, dtype, reverse, batch_first):
    # kernels/host/recurrent.cpp's steps against the NumPy loops they replace: the backward's steps and
    # factors make the same operations in the same order (bit for bit), the forward's (float32, AVX2)
    # differs by its tanh
    from adcuda.backends.cpu import recurrent

    native_forward, native_backward = recurrent._NATIVE_STEP, recurrent._NATIVE_STEP_BACKWARD
    if native_backward is None:
        pytest.skip("the native module is not built")
    r = rng(3)
    t, b, f, h = 5, 3, 4, 6
    x = r.standard_normal((b, t, f) if batch_first else (t, b, f)).astype(dtype)
    h0, c0 = (r.standard_normal((b, h)).astype(dtype) for _ in range(2))
    w_ih, w_hh = (r.standard_normal((4 * h, n)).astype(dtype) for n in (f, h))
    b_ih, b_hh = (r.standard_normal(4 * h).astype(dtype) for _ in range(2))
    grad = r.standard_normal((t * b + 2 * b, h)).astype(dtype)

    def forward():
        return recurrent.lstm_layer(x, h0, c0, w_ih, w_hh, b_ih, b_hh, reverse, batch_first)

    def backward(saved):
        return recurrent.lstm_layer_backward(
            grad, x, h0, c0, w_ih, w_hh, *saved, reverse, batch_first, True, True, True
        )

    calls = []

    def watched(step):
        return lambda *args: (calls.append(1), step(*args))[1]

    monkeypatch.setattr(recurrent, "_NATIVE_STEP_BACKWARD", watched(native_backward))
    monkeypatch.setattr(recurrent, "_NATIVE_FACTORS", watched(recurrent._NATIVE_FACTORS))
    if native_forward is not None:
        monkeypatch.setattr(recurrent, "_NATIVE_STEP", watched(native_forward))
    saved = forward()
    grads = backward(saved)
    forward_native = native_forward is not None and dtype == np.float32
    assert len(calls) == t * (2 if forward_native else 1) + 1  # every step and the factors natively
    for name in ("_NATIVE_STEP", "_NATIVE_STEP_BACKWARD", "_NATIVE_FACTORS"):
        monkeypatch.setattr(recurrent, name, None)
    for ours, theirs in zip(saved, forward()):
        if forward_native:
            np.testing.assert_allclose(ours, theirs, rtol=2e-6, atol=2e-6)
        else:
            np.testing.assert_array_equal(ours, theirs)
    for ours, theirs in zip(grads, backward(saved)):  # the NumPy backward from the same saved arrays
        np.testing.assert_array_equal(ours, theirs)


def test_native_lstm_steps_reject_arrays_that_do_not_fit():
    from adcuda.backends.cpu import recurrent

    if recurrent._NATIVE_STEP_BACKWARD is None:
        pytest.skip("the native module is not built")
    rows = np.zeros((2, 3), np.float32)
    with pytest.raises(ValueError, match="cpu_lstm_step_backward"):  # gates and d_z must be (B, 4H)
        recurrent._NATIVE_STEP_BACKWARD(rows, rows, rows, rows, rows, rows)
    gates = np.zeros((4, 12), np.float32)
    with pytest.raises(ValueError, match="cpu_lstm_backward_factors"):  # cs's 3 rows: not whole steps of 2
        recurrent._NATIVE_FACTORS(gates[:3], np.zeros((3, 3), np.float32), rows, rows, False, gates, rows)
    if recurrent._NATIVE_STEP is not None:
        gates, four = np.zeros((2, 12), np.float32), np.zeros(12, np.float32)
        with pytest.raises(ValueError, match="cpu_lstm_step"):  # h is (2, 2), not (B, H)
            recurrent._NATIVE_STEP(gates, gates, rows, four, four, rows, rows, np.zeros((2, 2), np.float32))
