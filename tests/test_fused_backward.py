"""Every op with a fused backward (``fused=`` in the registry) gives the same gradients through the
fused primitive (plain backward) as through its composite rule (``create_graph=True``), in float64;
and for the activations and log-softmax, both match the exact gradient out to |x| = 30.

The list of ops comes from the registry, so an op that gains a fused backward is checked here as
soon as it is declared; it fails until it has sample inputs below."""

import math

import numpy as np
import pytest

import adcuda
import adcuda.nn.functional as F
from adcuda.ops import dispatch, registry

F64 = adcuda.float64
FUSED = sorted(d.name for d in registry.all_ops() if d.fused)


def grid():
    """-30 to 30 in steps of 1/8, with the points where the tanh-GELU rule once lost its tail."""
    return np.unique(np.concatenate([np.arange(-240, 241) / 8.0, [-9.0, -6.0, -1e-3, 1e-3]]))


def leaf(values):
    return adcuda.tensor(np.asarray(values, dtype=np.float64), requires_grad=True)


def rng(seed):
    return np.random.default_rng(seed)


def entry(name):
    return registry.get(name).entry


def activation(name, **kwargs):
    return lambda: [(lambda x: entry(name)(x, **kwargs), [leaf(grid())])]


def softmax_samples(name):
    def samples():
        logits = rng(1).uniform(-30, 30, (5, 9))
        spread = np.array([[-30.0, -29.0, 0.0, 29.0, 30.0], [30.0, 30.0, -30.0, -30.0, 0.0]])
        return [
            (lambda x: entry(name)(x, -1), [leaf(logits)]),
            (lambda x: entry(name)(x, 0), [leaf(logits)]),
            (lambda x: entry(name)(x, 1), [leaf(spread)]),
            (lambda x: entry(name)(x, 0), [leaf(2.5)]),
        ]

    return samples


def cross_entropy_samples():
    logits = rng(2).uniform(-30, 30, (6, 5))
    target = adcuda.tensor([0, 4, 2, -100, 1, 3])
    weight = adcuda.tensor(np.linspace(0.5, 2.0, 5))
    return [
        (lambda x: entry("cross_entropy_rows")(x, target, None, -100, 0.0), [leaf(logits)]),
        (lambda x: entry("cross_entropy_rows")(x, target, None, -100, 0.2), [leaf(logits)]),
        (lambda x: entry("cross_entropy_rows")(x, target, weight, -100, 0.0), [leaf(logits)]),
        (lambda x: entry("cross_entropy_rows")(x, target, weight, -100, 0.3), [leaf(logits)]),
    ]


def layer_norm_samples():
    x = rng(3).standard_normal((3, 4, 5)) * 7
    w, b = rng(4).standard_normal((4, 5)), rng(5).standard_normal((4, 5))
    return [
        (lambda x, w, b: entry("layer_norm")(x, (4, 5), w, b), [leaf(x), leaf(w), leaf(b)]),
        (lambda x: entry("layer_norm")(x, 5), [leaf(x)]),
        (lambda x, w: entry("layer_norm")(x, (5,), w, None, 1e-3), [leaf(x), leaf(w[0])]),
    ]


def attention_samples():
    q, k, v = (rng(s).standard_normal((2, 3, 4, 6)) for s in (6, 7, 8))
    mask = adcuda.tensor(rng(9).standard_normal((4, 5)))
    k5, v5 = (rng(s).standard_normal((2, 3, 5, 6)) for s in (10, 11))
    attention = entry("attention_fused")
    return [
        (lambda q, k, v: attention(q, k, v, None, False, 0.4, 0.0, 0, 0), [leaf(q), leaf(k), leaf(v)]),
        (lambda q, k, v: attention(q, k, v, None, True, 0.4, 0.0, 0, 0), [leaf(q), leaf(k), leaf(v)]),
        (lambda q, k, v: attention(q, k, v, mask, False, 1.0, 0.0, 0, 0), [leaf(q), leaf(k5), leaf(v5)]),
        # dropout drawn inside the primitive: the composite rule draws the same keep-mask again
        (lambda q, k, v: attention(q, k, v, None, True, 0.4, 0.3, 17, 96), [leaf(q), leaf(k), leaf(v)]),
    ]


def embedding_samples():
    idx = adcuda.tensor([[4, 0, 2], [4, 1, 4]])
    weight = rng(12).standard_normal((6, 3))
    return [
        (lambda w: entry("embedding_lookup")(idx, w, 6, None, False), [leaf(weight)]),
        (lambda w: entry("embedding_lookup")(idx, w, 6, 2, True), [leaf(weight)]),
    ]


def dropout_samples():
    adcuda.manual_seed(5)
    x = rng(13).standard_normal((7, 9))
    return [(lambda x: entry("dropout_mask_apply")(x, 0.3), [leaf(x)])]


def lstm_cell_samples():
    gi, gh = rng(14).standard_normal((3, 8)) * 2, rng(15).standard_normal((3, 8))
    c = rng(16).standard_normal((3, 2))
    return [(lambda gi, gh, c: entry("lstm_cell_pointwise")(gi, gh, c), [leaf(gi), leaf(gh), leaf(c)])]


def gru_cell_samples():
    gi, gh = rng(17).standard_normal((3, 6)) * 2, rng(18).standard_normal((3, 6))
    h = rng(19).standard_normal((3, 2))
    return [(lambda gi, gh, h: entry("gru_cell_pointwise")(gi, gh, h), [leaf(gi), leaf(gh), leaf(h)])]


def lstm_layer_samples():
    x, h0, c0 = rng(20).standard_normal((4, 3, 5)), rng(21).standard_normal((3, 2)), rng(22).standard_normal((3, 2))
    w_ih, w_hh, b = rng(29).standard_normal((8, 5)), rng(23).standard_normal((8, 2)), rng(24).standard_normal(8)
    return [
        (
            lambda x, h, c, wi, wh, bi, bh: entry("lstm_layer")(x, h, c, wi, wh, bi, bh, False, False),
            [leaf(x), leaf(h0), leaf(c0), leaf(w_ih), leaf(w_hh), leaf(b), leaf(b * 0.5)],
        ),
        (
            lambda x, h, c, wi, wh: entry("lstm_layer")(x, h, c, wi, wh, None, None, True, True),
            [leaf(x.transpose(1, 0, 2)), leaf(h0), leaf(c0), leaf(w_ih), leaf(w_hh)],
        ),
    ]


def gru_layer_samples():
    proj, h0 = rng(25).standard_normal((4, 3, 6)), rng(26).standard_normal((3, 2))
    w, b = rng(27).standard_normal((6, 2)), rng(28).standard_normal(6)
    return [
        (lambda p, h, w, b: entry("gru_layer")(p, h, w, b, False), [leaf(proj), leaf(h0), leaf(w), leaf(b)]),
        (lambda p, h, w: entry("gru_layer")(p, h, w, None, True), [leaf(proj), leaf(h0), leaf(w)]),
    ]


def batch_norm_samples():
    x = rng(29).standard_normal((4, 3, 5)) * 3 + 1
    w, b = rng(30).standard_normal(3), rng(31).standard_normal(3)
    return [
        (lambda x, w, b: entry("native_batch_norm")(x, w, b), [leaf(x), leaf(w), leaf(b)]),
        (lambda x: entry("native_batch_norm")(x, None, None, None, None, 0.1, 1e-3), [leaf(x[:, :, :1])]),
    ]


def rms_norm_samples():
    x = rng(32).standard_normal((4, 3, 5)) * 3 + 1
    w = rng(33).standard_normal((3, 5))
    return [
        (lambda x, w: entry("native_rms_norm")(x, (3, 5), w, 1e-5), [leaf(x), leaf(w)]),
        (lambda x: entry("native_rms_norm")(x, 5, None, 1e-3), [leaf(x)]),
    ]


def linear_samples():
    x, w, b = rng(37).standard_normal((2, 3, 4)), rng(38).standard_normal((5, 4)), rng(39).standard_normal(5)
    return [
        (lambda x, w, b: entry("linear_2d")(x, w, b), [leaf(x), leaf(w), leaf(b)]),
        (lambda x, w: entry("linear_2d")(x, w), [leaf(x[0]), leaf(w)]),
        (lambda w, b: entry("linear_2d")(adcuda.tensor(x).transpose(0, 1), w, b), [leaf(w), leaf(b)]),
    ]


def slice_samples():
    x = rng(40).standard_normal((4, 6, 5))
    return [
        (lambda x: entry("slice_key")(x, (slice(None), slice(2, 5))), [leaf(x)]),
        (lambda x: entry("slice_key")(x, (1, Ellipsis, slice(None, None, 2))), [leaf(x)]),
        (lambda x: x.split(2, dim=-1)[1], [leaf(x)]),
    ]


def view_samples(name):
    def samples():
        x = rng(41).standard_normal((4, 6, 5))
        return [
            (lambda x: entry(name)(x, 6, 20), [leaf(x)]),
            (lambda x: entry(name)(x, -1), [leaf(x)]),
            # a gradient whose strides allow no view (it comes through a transpose): a copy
            (lambda x: entry(name)(x, 24, 5).mT, [leaf(x)]),
        ]

    return samples


def shape_view_samples():
    """The view ops that only change the shape (reshape's gradient, fused): one sample each."""
    x = rng(43).standard_normal((4, 1, 6))
    return {
        "flatten": [(lambda x: adcuda.flatten(x, 1).mT, [leaf(x)])],
        "ravel": [(lambda x: adcuda.ravel(x.mT), [leaf(x)])],
        "squeeze": [(lambda x: adcuda.squeeze(x), [leaf(x)]), (lambda x: adcuda.squeeze(x, (0, 1)), [leaf(x)])],
        "unsqueeze": [(lambda x: adcuda.unsqueeze(x, -1), [leaf(x)])],
        "unflatten": [(lambda x: adcuda.unflatten(x, 2, (3, 2)), [leaf(x)])],
        "view_as": [(lambda x: x.view_as(adcuda.zeros(6, 4)), [leaf(x)])],
        "reshape_as": [(lambda x: x.mT.reshape_as(adcuda.zeros(24)), [leaf(x)])],
    }


def order_view_samples():
    """The view ops that only reorder dims (their own forward is their fused gradient)."""
    x, m = rng(44).standard_normal((4, 6, 5)), rng(45).standard_normal((4, 6))
    return {
        "transpose": [(lambda x: adcuda.transpose(x, 0, -1), [leaf(x)])],
        "swapaxes": [(lambda x: adcuda.swapaxes(x, 1, 2), [leaf(x)])],
        "t": [(lambda m: adcuda.t(m), [leaf(m)])],
        "T": [(lambda x: x.T, [leaf(x)])],
        "mT": [(lambda x: x.mT, [leaf(x)])],
        "movedim": [
            (lambda x: adcuda.movedim(x, 0, -1), [leaf(x)]),
            (lambda x: adcuda.movedim(x, (0, 2), (1, 0)), [leaf(x)]),
        ],
    }


def permute_samples():
    x = rng(42).standard_normal((4, 6, 5))
    return [
        (lambda x: entry("permute")(x, 2, 0, 1), [leaf(x)]),
        (lambda x: entry("permute")(x, (-1, 1, 0)), [leaf(x)]),
        (lambda x: entry("permute")(x, ()), [leaf(2.5)]),  # PyTorch wants the (empty) dims
    ]


def group_norm_samples():
    x = rng(34).standard_normal((3, 6, 2, 3)) * 2 - 1
    w, b = rng(35).standard_normal(6), rng(36).standard_normal(6)
    return [
        (lambda x, w, b: entry("native_group_norm")(x, 3, w, b, 1e-5), [leaf(x), leaf(w), leaf(b)]),
        (lambda x: entry("native_group_norm")(x, 6, None, None, 1e-3), [leaf(x)]),
    ]


SAMPLES = {
    "tanh": activation("tanh"),
    "sigmoid": activation("sigmoid"),
    "silu": activation("silu"),
    "relu": activation("relu"),
    "leaky_relu": lambda: (
        activation("leaky_relu", negative_slope=0.2)() + activation("leaky_relu", negative_slope=-1.5)()
    ),
    "gelu": lambda: activation("gelu")() + activation("gelu", approximate="tanh")(),
    "softmax": softmax_samples("softmax"),
    "log_softmax": softmax_samples("log_softmax"),
    "cross_entropy_rows": cross_entropy_samples,
    "layer_norm": layer_norm_samples,
    "attention_fused": attention_samples,
    "embedding_lookup": embedding_samples,
    "dropout_mask_apply": dropout_samples,
    "lstm_cell_pointwise": lstm_cell_samples,
    "gru_cell_pointwise": gru_cell_samples,
    "lstm_layer": lstm_layer_samples,
    "gru_layer": gru_layer_samples,
    "native_batch_norm": batch_norm_samples,
    "native_rms_norm": rms_norm_samples,
    "native_group_norm": group_norm_samples,
    "linear_2d": linear_samples,
    "slice_key": slice_samples,
    "view": view_samples("view"),
    "reshape": view_samples("reshape"),
    "permute": permute_samples,
    **{name: (lambda name=name: shape_view_samples()[name]) for name in shape_view_samples()},
    **{name: (lambda name=name: order_view_samples()[name]) for name in order_view_samples()},
}

# ops whose fused formulas call primitives (products, sums, writes into zeros, views, selects) with no op
# around them, rather than a backward primitive
DIRECT = {"linear_2d", "slice_key", "view", "reshape", "permute", "leaky_relu"}
DIRECT |= set(shape_view_samples()) | set(order_view_samples())


class PrimitiveLog:
    """A dispatch hook that notes the name of every primitive the ops and autograd call, and of every
    op called (``ops``)."""

    def __init__(self):
        self.names = []
        self.ops = []

    def around_op(self, name, op, call, args, kwargs):
        self.ops.append(name)
        return call(*args, **kwargs)

    def wrap_backend(self, backend):
        log = self

        class Logged:
            def __getattr__(self, name):
                attr = getattr(backend, name)
                if not callable(attr):
                    return attr

                def logged(*args, **kwargs):
                    log.names.append(name)
                    return attr(*args, **kwargs)

                return logged

        return Logged()

    def __enter__(self):
        dispatch.add_hook(self)
        return self

    def __exit__(self, *exc):
        dispatch.remove_hook(self)


def both_backwards(call, inputs):
    out = call(*inputs)
    g = adcuda.tensor(rng(99).uniform(0.5, 1.5, tuple(out.shape)))
    with PrimitiveLog() as fused_log:
        fused = adcuda.autograd.grad(out, inputs, g, retain_graph=True)
    with PrimitiveLog() as composite_log:
        composite = adcuda.autograd.grad(out, inputs, g, create_graph=True)
    return fused, composite, fused_log, composite_log


def test_every_op_with_a_fused_backward_has_samples():
    assert FUSED and set(FUSED) <= set(SAMPLES), f"add samples for {sorted(set(FUSED) - set(SAMPLES))}"


# Below float64's normal range there is no relative precision left to compare.
TINY = np.finfo(np.float64).tiny


@pytest.mark.parametrize("name", FUSED)
def test_fused_and_composite_backward_agree(name):
    elementwise = registry.get(name).family == "elementwise"
    for call, inputs in SAMPLES[name]():
        fused, composite, fused_log, composite_log = both_backwards(call, inputs)
        fused_prims, composite_prims = fused_log.names, composite_log.names
        # each path ran: the fused one through a fused backward primitive (for DIRECT ops, through
        # primitives alone, with no op call), the composite one without
        if name in DIRECT:
            assert not fused_log.ops and composite_log.ops, (fused_log.ops, composite_log.ops)
        else:
            assert any(p.endswith("_backward") for p in fused_prims), fused_prims
        assert not any(p.endswith("_backward") for p in composite_prims), composite_prims
        for f, c in zip(fused, composite):
            f, c = f.detach().numpy(), c.detach().numpy()
            assert f.dtype == np.float64
            # An elementwise gradient is one formula per element: relative agreement, so a tail that one
            # path flushes to 0 and the other keeps is caught however small. Where a gradient sums or
            # normalises over many elements, an exact 0 in one path (a causal row attending to one key)
            # is rounding noise of the size of the largest term in the other.
            atol = TINY if elementwise else 1e-13 * max(np.abs(c).max(initial=0), 1.0)
            np.testing.assert_allclose(f, c, rtol=1e-8, atol=atol)


# ------------------------------------------------------------------------------------------------
# the tails against exact gradients (float64 formulas that keep their digits there)
def _sigmoid(x):
    e = math.exp(-abs(x))
    return 1 / (1 + e) if x >= 0 else e / (1 + e)


def _sigmoid_slope(x):  # s (1 - s), without 1 - s
    e = math.exp(-abs(x))
    return e / (1 + e) ** 2


_K, _C = math.sqrt(2 / math.pi), 0.044715

EXACT = {
    "sigmoid": _sigmoid_slope,
    "tanh": lambda x: 4 * _sigmoid_slope(2 * x),
    "silu": lambda x: _sigmoid(x) + x * _sigmoid_slope(x),
    "gelu": lambda x: 0.5 * math.erfc(-x / math.sqrt(2)) + x * math.exp(-x * x / 2) / math.sqrt(2 * math.pi),
    "gelu_tanh": lambda x: (
        _sigmoid(2 * _K * (x + _C * x**3))
        + 2 * x * _sigmoid_slope(2 * _K * (x + _C * x**3)) * _K * (1 + 3 * _C * x * x)
    ),
    "softplus": _sigmoid,
}

TAILS = {
    "sigmoid": adcuda.sigmoid,
    "tanh": adcuda.tanh,
    "silu": adcuda.silu,
    "gelu": adcuda.gelu,
    "gelu_tanh": lambda x: adcuda.gelu(x, approximate="tanh"),
    "softplus": lambda x: F.softplus(x, 1.0, math.inf),
}


# Where each gradient keeps its relative precision. sigmoid and tanh take theirs from the output (as
# PyTorch does): y (1 - y) and 1 - y^2 keep only an absolute precision of an ulp of 1 where y
# saturates (tanh on both sides, sigmoid above 0). Exact GELU's 0.5 (1 + erf(x / sqrt 2)) loses the
# Phi(x) term (~1 / x^2 of the gradient) below x = -6, in both paths and in PyTorch's.
RELATIVE = {
    "sigmoid": lambda x: x < 0,
    "tanh": lambda x: np.zeros_like(x, bool),
    "silu": np.isfinite,
    "gelu": lambda x: x > -6,
    "gelu_tanh": np.isfinite,
    "softplus": np.isfinite,
}


@pytest.mark.parametrize("name", sorted(TAILS))
@pytest.mark.parametrize("create_graph", [False, True], ids=["fused", "composite"])
def test_activation_gradients_keep_their_tails(name, create_graph):
    x = leaf(grid())
    (g,) = adcuda.autograd.grad(TAILS[name](x).sum(), x, create_graph=create_graph)
    exact = np.array([EXACT[name](v) for v in grid()])
    got = g.detach().numpy()
    np.testing.assert_allclose(got, exact, rtol=1e-7, atol=1e-15)
    # a tail cancelled to 0 (or of the wrong size), however small, fails the relative bound
    kept = RELATIVE[name](grid())
    np.testing.assert_allclose(got[kept], exact[kept], rtol=1e-7, atol=TINY)


@pytest.mark.parametrize("create_graph", [False, True], ids=["fused", "composite"])
def test_log_softmax_gradient_at_logits_far_apart(create_graph):
    rows = np.array([[-30.0, -29.0, 0.0, 29.0, 30.0], [30.0, 30.0, -30.0, -30.0, 0.0], [-30.0] * 5])
    g = rng(14).uniform(0.5, 1.5, rows.shape)
    x = leaf(rows)
    (got,) = adcuda.autograd.grad(F.log_softmax(x, 1), x, adcuda.tensor(g), create_graph=create_graph)
    shifted = rows - rows.max(1, keepdims=True)
    softmax = np.exp(shifted) / np.exp(shifted).sum(1, keepdims=True)
    np.testing.assert_allclose(got.detach().numpy(), g - softmax * g.sum(1, keepdims=True), rtol=1e-12, atol=1e-14)
