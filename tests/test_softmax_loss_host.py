"""The host module's softmax, log_softmax and classifier-loss forwards (kernels/host/softmax_loss.cpp)
against the CPU backend's NumPy path, their reference: rows along any axis, NaN and infinite rows,
empty arrays, class weights, label smoothing, ignored targets, and out-of-range targets named as the
NumPy path names them."""

import numpy as np
import pytest
from helpers import native_and_numpy

from adcuda.backends.cpu import softmax_loss as cpu_softmax_loss
from adcuda.errors import IndexOutOfRangeError


def _both(monkeypatch, fn, *args):
    return native_and_numpy(monkeypatch, cpu_softmax_loss, fn, *args)


def _close(got, want, dtype):
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=3e-6 if dtype == np.float32 else 1e-14, atol=1e-7)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("log", [False, True])
@pytest.mark.parametrize(
    "shape, axis", [((8, 8), 1), ((8, 8), 0), ((2, 3, 4), 1), ((7,), 0), ((2, 1, 3), 2), ((3, 0), 1), ((0, 4), 1)]
)
def test_softmax_matches_numpy(monkeypatch, dtype, log, shape, axis):
    x = (np.random.default_rng(0).standard_normal(shape) * 5).astype(dtype)
    if x.size > 3:  # a NaN row and a +inf row: NaN throughout
        x.flat[0], x.flat[-1] = np.nan, np.inf
    _close(*_both(monkeypatch, cpu_softmax_loss.softmax, x, axis, log), dtype)


def test_a_row_of_only_minus_infinity_is_nan(monkeypatch):
    x = np.array([[-np.inf, -np.inf], [0.0, -np.inf]], np.float32)
    native, _ = _both(monkeypatch, cpu_softmax_loss.softmax, x, 1, False)
    assert np.isnan(native[0]).all()
    np.testing.assert_array_equal(native[1], [1.0, 0.0])


def _classifier_case(rng, dtype, weighted):
    """(logits, target, weight) of 6 rows and 8 classes: a NaN logit, a row of -inf, row 1 ignored (-100)."""
    logits = rng.standard_normal((6, 8)).astype(dtype)
    logits[2, 3], logits[4] = np.nan, -np.inf
    target = rng.integers(0, 8, 6)
    target[1] = -100
    return logits, target, rng.random(8).astype(dtype) if weighted else None


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("label_smoothing", [0.0, 0.1])
@pytest.mark.parametrize("weighted", [False, True])
def test_classifier_loss_matches_numpy(monkeypatch, dtype, label_smoothing, weighted):
    logits, target, weight = _classifier_case(np.random.default_rng(1), dtype, weighted)
    native, reference = _both(
        monkeypatch, cpu_softmax_loss.classifier_loss, logits, target, weight, -100, label_smoothing
    )
    for got, want in zip(native, reference):
        _close(got, want, dtype)
    assert native[0][1] == 0.0  # the ignored row


def test_classifier_loss_names_a_target_out_of_range():
    with pytest.raises(IndexOutOfRangeError, match="target 5 is out of bounds for 3 classes"):
        cpu_softmax_loss.classifier_loss(np.zeros((2, 3), np.float32), np.array([0, 5]), None, -100, 0.0)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("weighted", [False, True])
def test_nll_loss_matches_numpy(monkeypatch, dtype, reduction, weighted):
    rng = np.random.default_rng(2)
    logp = rng.standard_normal((6, 5)).astype(dtype)
    logp[1, 0] = -np.inf  # an ignored row's infinite log-probability is no NaN
    target = rng.integers(0, 5, 6)
    target[1] = -1
    weight = rng.random(5).astype(dtype) if weighted else None
    native, reference = _both(monkeypatch, cpu_softmax_loss.nll_loss, logp, target, weight, -1, reduction)
    for got, want in zip(native, reference):
        _close(got, want, dtype)
    counted = np.delete(np.arange(6), 1)
    w = np.ones(5) if weight is None else weight
    np.testing.assert_allclose(native[1], w[target[counted]].sum(), rtol=1e-6)  # the total weight


def test_nll_loss_of_only_ignored_rows_is_nan_on_both_paths(monkeypatch):
    for got in _both(
        monkeypatch, cpu_softmax_loss.nll_loss, np.zeros((2, 3), np.float32), np.array([-100, -100]), None, -100, "mean"
    ):
        assert np.isnan(got[0]) and got[1] == 0.0


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("p, weighted", [(1, False), (2, True)])
def test_multi_margin_loss_matches_numpy(monkeypatch, dtype, reduction, p, weighted):
    rng = np.random.default_rng(3)
    scores = rng.standard_normal((5, 4)).astype(dtype)
    scores[2, 1] = np.nan  # a NaN hinge adds nothing (PyTorch's), on both paths
    target = rng.integers(0, 4, 5)
    target[2] = 0
    weight = rng.random(4).astype(dtype) if weighted else None
    native, reference = _both(
        monkeypatch, cpu_softmax_loss.multi_margin_loss, scores, target, p, 0.7, weight, reduction
    )
    _close(native, reference, dtype)
    assert not np.isnan(native).any()


@pytest.mark.parametrize(
    "fn, args",
    [
        (cpu_softmax_loss.nll_loss, (np.array([0, 3]), None, -100, "mean")),
        (cpu_softmax_loss.multi_margin_loss, (np.array([-1, 0]), 1, 1.0, None, "sum")),
    ],
)
def test_the_class_losses_name_a_target_out_of_range(fn, args):
    with pytest.raises(IndexOutOfRangeError, match=r"target (3|-1) is out of bounds for 3 classes"):
        fn(np.zeros((2, 3), np.float32), *args)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("label_smoothing", [0.0, 0.1])
@pytest.mark.parametrize("weighted", [False, True])
def test_classifier_loss_backward_matches_numpy(monkeypatch, dtype, label_smoothing, weighted):
    """The host module's one-pass backward (kernels/host/softmax_loss.cpp) against the NumPy path: a NaN
    logit, a row of -inf, an ignored row (0 even with an infinite row gradient), class weights, smoothing."""
    rng = np.random.default_rng(2)
    logits, target, weight = _classifier_case(rng, dtype, weighted)
    _, stats = cpu_softmax_loss.classifier_loss(logits, target, weight, -100, label_smoothing)
    g_rows = rng.standard_normal(6).astype(dtype)
    g_rows[1] = np.inf
    calls = []
    real = cpu_softmax_loss._NATIVE.cpu_classifier_loss_backward
    spy = type("Spy", (), {"cpu_classifier_loss_backward": lambda *a: calls.append(a) or real(*a)})
    monkeypatch.setattr(cpu_softmax_loss, "_NATIVE", spy)
    native = cpu_softmax_loss.classifier_loss_backward(logits, stats, target, weight, g_rows, -100, label_smoothing)
    assert len(calls) == 1
    monkeypatch.setattr(cpu_softmax_loss, "_NATIVE", None)
    reference = cpu_softmax_loss.classifier_loss_backward(logits, stats, target, weight, g_rows, -100, label_smoothing)
    _close(native, reference, dtype)
    assert (native[1] == 0).all()


def test_classifier_loss_backward_names_a_target_out_of_range():
    logits = np.zeros((2, 3), np.float32)
    stats = np.zeros((2, 2), np.float32)
    with pytest.raises(IndexOutOfRangeError, match="classifier_loss_backward"):
        cpu_softmax_loss.classifier_loss_backward(
            logits, stats, np.array([0, 3]), None, np.ones(2, np.float32), -100, 0.0
        )


# The elementwise losses' host path (cpu_pointwise_loss, called by the ops where nothing records or
# watches primitives) against their terms' primitives and reduction, the reference: the ops' results.
def _losses():
    import adcuda as t

    F = t.nn.functional
    rng = np.random.default_rng(3)
    scale = rng.standard_normal((6, 5)) * 3
    # probabilities and targets at 0 and 1 exactly (the logs' bound at -100), KL targets at 0 and below
    p = rng.uniform(0, 1, (6, 5))
    p[0, :2], p[1, :2] = 0.0, 1.0
    q = rng.uniform(0, 1, (6, 5))
    q[0, 0], q[1, 1] = 1.0, 0.0
    kl_t = p.copy()
    kl_t[2, :3] = [0.0, -0.5, 0.0]

    def calls(dtype, reduction):
        T = lambda a: t.tensor(a.astype(dtype))  # noqa: E731
        x, y = T(scale), T(rng.standard_normal((6, 5)))
        kl_reduction = "batchmean" if reduction == "mean" else reduction
        return {
            "binary_cross_entropy": lambda: F.binary_cross_entropy(T(p), T(q), reduction=reduction),
            "kl_div": lambda: F.kl_div(x, T(kl_t), reduction=kl_reduction),
            "kl_div_log_target": lambda: F.kl_div(x, y, reduction=reduction, log_target=True),
            "huber_loss": lambda: F.huber_loss(x, y, reduction=reduction, delta=0.7),
            "smooth_l1_loss": lambda: F.smooth_l1_loss(x, y, reduction=reduction, beta=1.5),
        }

    return calls


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
@pytest.mark.parametrize("loss", sorted(cpu_softmax_loss.POINTWISE_LOSSES))
def test_pointwise_losses_match_their_terms(monkeypatch, dtype, reduction, loss):
    kinds = []
    host = cpu_softmax_loss._POINTWISE
    assert host is not None, "the host module was built without cpu_pointwise_loss"
    monkeypatch.setattr(cpu_softmax_loss, "_POINTWISE", lambda kind, *args: kinds.append(kind) or host(kind, *args))
    got = _losses()(dtype, reduction)[loss]().numpy()
    assert kinds == [cpu_softmax_loss.POINTWISE_LOSSES[loss]]  # (the host path was taken)
    monkeypatch.setattr(cpu_softmax_loss, "_POINTWISE", None)
    want = _losses()(dtype, reduction)[loss]().numpy()
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=3e-6 if dtype == np.float32 else 1e-14, atol=1e-6)


def test_pointwise_losses_leave_recording_and_watched_calls_to_their_terms(monkeypatch):
    import importlib

    import adcuda as t

    tensor_module = importlib.import_module("adcuda.tensor")

    class Watched:  # (graph capture's seat: a view of the backend that every primitive call passes)
        def __init__(self, backend):
            self.backend = backend

        def __getattr__(self, name):
            return getattr(self.backend, name)

    calls = []
    monkeypatch.setattr(cpu_softmax_loss, "_POINTWISE", lambda *args: calls.append(args))
    x = t.rand(4, 3, requires_grad=True)
    loss = t.nn.functional.binary_cross_entropy(x, t.rand(4, 3))
    loss.backward()
    assert loss.grad_fn is not None and x.grad is not None
    previous = tensor_module.set_primitive_observer(Watched)
    try:
        t.nn.functional.huber_loss(t.ones(3), t.zeros(3))
    finally:
        tensor_module.set_primitive_observer(previous)
    assert calls == []


@pytest.mark.parametrize("host", [True, False])
@pytest.mark.parametrize(
    "p, q, named",
    [
        ([0.5, 1.5], [0.5, 0.5], "input"),
        ([0.5, -0.0001], [0.5, 0.5], "input"),
        ([0.5, 0.5], [2.0, 0.5], "target"),
        # (a NaN fails PyTorch's check 0 <= v <= 1 too)
        ([0.5, np.nan], [0.5, 0.5], "input"),
        ([0.5, 0.5], [np.nan, 0.5], "target"),
    ],
)
def test_binary_cross_entropy_outside_the_unit_interval_is_named(monkeypatch, host, p, q, named):
    import adcuda as t

    if not host:
        monkeypatch.setattr(cpu_softmax_loss, "_POINTWISE", None)
    with pytest.raises(ValueError, match=f"binary_cross_entropy: all elements of {named}"):
        t.nn.functional.binary_cross_entropy(t.tensor(p), t.tensor(q))


@pytest.mark.parametrize("host", [True, False])
def test_kl_div_of_a_negative_target_is_nan_as_torch(monkeypatch, host):
    torch = pytest.importorskip("torch")
    import adcuda as t

    if not host:
        monkeypatch.setattr(cpu_softmax_loss, "_POINTWISE", None)
    x, target = [-1.0, -2.0, -3.0], [0.0, -1.0, 0.5]
    for reduction in ("none", "sum"):
        want = torch.nn.functional.kl_div(torch.tensor(x), torch.tensor(target), reduction=reduction).numpy()
        got = t.nn.functional.kl_div(t.tensor(x), t.tensor(target), reduction=reduction).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-6)  # (NaN where PyTorch's is)
    leaf = t.tensor(target, requires_grad=True)
    t.nn.functional.kl_div(t.tensor(x), leaf, reduction="sum").backward()
    assert np.isnan(leaf.grad.numpy()[1]) and np.isfinite(leaf.grad.numpy()[[0, 2]]).all()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(
    "shape, dim", [((8, 8), -1), ((8, 8), 0), ((2, 6, 3), 1), ((4,), 0), ((3, 0, 2), 2), ((2, 2), 1)]
)
def test_glu_on_the_host_is_the_primitives_bit_for_bit(monkeypatch, dtype, shape, dim):
    import adcuda as t

    x = (np.random.default_rng(1).standard_normal(shape) * 30).astype(dtype)
    if x.size > 4:  # NaN, infinities and a sigmoid that saturates
        x.flat[:4] = [np.nan, np.inf, -np.inf, 1e4]
    calls = []
    host = cpu_softmax_loss._GLU
    assert host is not None, "the host module was built without cpu_glu"
    monkeypatch.setattr(cpu_softmax_loss, "_GLU", lambda *args: calls.append(args) or host(*args))
    got = t.nn.functional.glu(t.tensor(x), dim).numpy()
    assert len(calls) == 1  # (the host path was taken)
    monkeypatch.setattr(cpu_softmax_loss, "_GLU", None)
    want = t.nn.functional.glu(t.tensor(x), dim).numpy()
    assert got.dtype == want.dtype and got.shape == want.shape
    assert got.tobytes() == want.tobytes()
