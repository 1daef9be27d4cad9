"""adcuda.amp: GradScaler (dynamic loss scaling) and autocast, on the CPU fallback.

The scale trajectory and the skipped steps are checked against a hand-computed script and, when
torch is installed, against torch.amp.GradScaler("cpu") on the same scripted overflows.
"""

import importlib
import math
import threading
import warnings

import numpy as np
import pytest

import adcuda
import adcuda.nn as nn
import adcuda.nn.functional as F
from adcuda.amp import GradScaler, autocast
from adcuda.optim import SGD, AdamW

F16, F32 = adcuda.float16, adcuda.float32
autocast_module = importlib.import_module("adcuda.ops.autocast")  # where the regions and the cast cache live


@pytest.fixture(autouse=True)
def quiet_not_needed_warning():
    """Most tests scale float32 gradients on purpose; the warning saying so has its own test."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="GradScaler: the gradients on")
        yield


# ------------------------------------------------------------------------------------------ GradScaler
VALUE = {"ok": 1.0, "inf": math.inf, "nan": math.nan}
PATTERN = ["ok", "ok", "inf", "ok", "nan", "ok", "ok", "ok", "ok", "ok", "inf", "inf", "ok", "ok", "ok"]


def _scripted_run(lib, scaler, pattern, optimizers=1, overflowing=(0,)):
    """Each iteration: loss = sum_i p_i . [v, 0.5] where v is 1, inf or nan for the optimizers in
    ``overflowing``; returns (scale, growth tracker, stepped flags, params) after every update."""
    params = [lib.tensor([1.0, 2.0], requires_grad=True) for _ in range(optimizers)]
    opts = [lib.optim.SGD([p], lr=0.1) for p in params]
    history = []
    for kind in pattern:
        loss = 0
        for i, (p, opt) in enumerate(zip(params, opts)):
            opt.zero_grad()
            v = VALUE[kind] if i in overflowing else 1.0
            loss = loss + (p * lib.tensor([v, 0.5])).sum()
        scaler.scale(loss).backward()
        stepped = []
        for opt in opts:
            before = [p.detach().clone() for p in opt.param_groups[0]["params"]]
            result = scaler.step(opt)
            moved = not all(bool((b == p).all()) for b, p in zip(before, opt.param_groups[0]["params"]))
            stepped.append(moved if lib is not adcuda else result)
            if lib is adcuda:
                assert result == moved
        scaler.update()
        history.append(
            (scaler.get_scale(), scaler._get_growth_tracker(), stepped, [p.detach().numpy().tolist() for p in params])
        )
    return history


def test_scale_trajectory_and_skipped_steps_follow_the_algorithm():
    history = _scripted_run(adcuda, GradScaler("cpu", init_scale=2.0**10, growth_interval=3), PATTERN)
    expected = [  # (scale, growth tracker, stepped) worked out by hand from PyTorch's update rule
        (1024, 1, True),
        (1024, 2, True),
        (512, 0, False),
        (512, 1, True),
        (256, 0, False),
        (256, 1, True),
        (256, 2, True),
        (512, 0, True),
        (512, 1, True),
        (512, 2, True),
        (256, 0, False),
        (128, 0, False),
        (128, 1, True),
        (128, 2, True),
        (256, 0, True),
    ]
    assert [(s, t, st[0]) for s, t, st, _ in history] == expected
    ok_steps = np.cumsum([kind == "ok" for kind in PATTERN])
    for (_, _, _, params), k in zip(history, ok_steps):
        np.testing.assert_allclose(params[0], [1.0 - 0.1 * k, 2.0 - 0.05 * k], rtol=0, atol=1e-6)


TORCH_CASES = {
    "defaults_fast_growth": (dict(growth_interval=2), PATTERN, 1, (0,)),
    "odd_factors": (
        dict(init_scale=2.0**10, growth_factor=1.7, backoff_factor=0.3, growth_interval=3),
        PATTERN,
        1,
        (0,),
    ),
    "long_clean_run": (dict(init_scale=3.0, growth_factor=1.25, growth_interval=1), ["ok"] * 12 + ["nan"], 1, (0,)),
    "two_optimizers_one_overflows": (dict(init_scale=2.0**12, growth_interval=2), PATTERN, 2, (1,)),
}


@pytest.mark.parametrize("case", sorted(TORCH_CASES))
def test_scale_trajectory_and_skipped_steps_equal_torch(case):
    torch = pytest.importorskip("torch")
    kwargs, pattern, optimizers, overflowing = TORCH_CASES[case]
    ours = _scripted_run(adcuda, GradScaler("cpu", **kwargs), pattern, optimizers, overflowing)
    theirs = _scripted_run(torch, torch.amp.GradScaler("cpu", **kwargs), pattern, optimizers, overflowing)
    for step, (a, b) in enumerate(zip(ours, theirs)):
        assert a[:3] == b[:3], f"iteration {step}"
        np.testing.assert_array_equal(np.array(a[3], dtype=np.float32), np.array(b[3], dtype=np.float32))


def test_scale_stays_within_min_and_max():
    p = adcuda.tensor([1.0], requires_grad=True)
    opt = SGD([p], lr=0.1)

    def iterate(scaler, value):
        opt.zero_grad()
        scaler.scale((p * value).sum()).backward()
        stepped = scaler.step(opt)
        scaler.update()
        return stepped, scaler.get_scale()

    low = GradScaler("cpu", init_scale=4.0)
    assert [iterate(low, math.inf) for _ in range(2)] == [(False, 2.0), (False, 1.0)]
    with pytest.warns(UserWarning, match="inf/NaN even at the minimum scale 1.0"):
        assert iterate(low, math.inf) == (False, 1.0)
    assert iterate(low, 1.0) == (True, 1.0)
    high = GradScaler("cpu", init_scale=2.0**23, growth_interval=1)
    assert [iterate(high, 1.0)[1] for _ in range(3)] == [2.0**24] * 3
    custom = GradScaler("cpu", init_scale=0.5, min_scale=0.125, max_scale=1.0, growth_interval=1)
    assert [iterate(custom, v)[1] for v in (1.0, 1.0, math.nan, math.nan, math.nan)] == [1.0, 1.0, 0.5, 0.25, 0.125]


def test_unscale_then_clip_then_step():
    p = adcuda.tensor([3.0, 4.0], requires_grad=True)
    opt = SGD([p], lr=1.0)
    scaler = GradScaler("cpu", init_scale=1024.0)
    scaler.scale((p * adcuda.tensor([3.0, 4.0])).sum()).backward()
    np.testing.assert_array_equal(p.grad.numpy(), [3072.0, 4096.0])
    scaler.unscale_(opt)
    np.testing.assert_array_equal(p.grad.numpy(), [3.0, 4.0])
    nn.utils.clip_grad_norm_([p], 1.0)
    assert scaler.step(opt) is True
    np.testing.assert_allclose(p.detach().numpy(), [3.0 - 0.6, 4.0 - 0.8], rtol=1e-5)


def test_scale_accepts_nested_outputs():
    scaler = GradScaler("cpu", init_scale=8.0)
    a, b = adcuda.tensor(1.0), adcuda.tensor([2.0, 3.0])
    scaled = scaler.scale([a, (b, [a])])
    assert isinstance(scaled, list) and isinstance(scaled[1], tuple)
    assert scaled[0].item() == 8.0 and scaled[1][0].tolist() == [16.0, 24.0] and scaled[1][1][0].item() == 8.0
    with pytest.raises(ValueError, match="outputs must be a Tensor or an iterable of Tensors"):
        scaler.scale(3.0)


def test_half_gradients_with_master_weights_unscale_into_float32():
    """A gradient of 2e-8 underflows to 0 in float16; scaled by 2**16 it survives the backward, and
    unscaling into float32 keeps it (unscaling in float16 would flush it again)."""
    p = nn.Parameter(adcuda.ones(3, dtype=F16))
    opt = SGD([p], lr=1000.0, master_weights=True)
    scaler = GradScaler("cpu")
    loss = (p.float() * 2e-8).sum()
    scaler.scale(loss).backward()
    assert p.grad.dtype is F16
    scaler.unscale_(opt)
    assert p.grad.dtype is F32
    np.testing.assert_allclose(p.grad.numpy(), 2e-8, rtol=1e-3)
    assert scaler.step(opt)
    np.testing.assert_allclose(opt.state[p]["master_param"].numpy(), 1.0 - 2e-5, rtol=0, atol=1e-7)
    np.testing.assert_array_equal(p.detach().numpy(), 1.0)  # below float16's resolution at 1
    scaler.update()
    # with the default zero_grad the next backward starts a float16 gradient again
    opt.zero_grad()
    scaler.scale((p.float() * 2e-8).sum()).backward()
    assert p.grad.dtype is F16


def test_float16_gradients_without_master_weights_raise_torchs_error():
    p = nn.Parameter(adcuda.ones(2, dtype=F16))
    opt = SGD([p], lr=0.1)
    scaler = GradScaler("cpu")
    scaler.scale(p.float().sum()).backward()
    with pytest.raises(ValueError, match=r"^Attempting to unscale FP16 gradients\. .*master_weights=True"):
        scaler.step(opt)


def test_scaler_state_dict_round_trip_and_torch_format(tmp_path):
    p = adcuda.tensor([1.0], requires_grad=True)
    opt = SGD([p], lr=0.1)
    scaler = GradScaler("cpu", init_scale=256.0, growth_interval=5)
    for value in (1.0, math.inf, 1.0, 1.0):
        opt.zero_grad()
        scaler.scale(p * value).sum().backward()
        scaler.step(opt)
        scaler.update()
    state = scaler.state_dict()
    assert state == {
        "scale": 128.0,
        "growth_factor": 2.0,
        "backoff_factor": 0.5,
        "growth_interval": 5,
        "_growth_tracker": 2,
        "min_scale": 1.0,
        "max_scale": 2.0**24,
    }
    adcuda.save(state, tmp_path / "scaler.adcuda")
    restored = GradScaler("cpu")
    restored.load_state_dict(adcuda.load(tmp_path / "scaler.adcuda"))
    assert restored.state_dict() == state
    # a scaler already in use takes the loaded values too
    scaler.update(64.0)
    scaler.load_state_dict(state)
    assert scaler.get_scale() == 128.0 and scaler._get_growth_tracker() == 2
    # PyTorch's state dict has no scale bounds: ours stay
    torch_format = {k: v for k, v in state.items() if k not in ("min_scale", "max_scale")}
    bounded = GradScaler("cpu", init_scale=64.0, min_scale=2.0, max_scale=1024.0)
    bounded.load_state_dict(torch_format)
    assert (bounded.get_scale(), bounded.get_min_scale(), bounded.get_max_scale()) == (128.0, 2.0, 1024.0)


def test_disabled_scaler_is_a_pass_through():
    p = adcuda.tensor([1.0], requires_grad=True)
    opt = SGD([p], lr=0.5)
    scaler = GradScaler("cpu", enabled=False)
    loss = (p * 2.0).sum()
    assert scaler.scale(loss) is loss
    loss.backward()
    scaler.unscale_(opt)
    assert scaler.step(opt) is True
    scaler.update()
    assert p.item() == 0.0
    assert (scaler.get_scale(), scaler.state_dict(), scaler.is_enabled()) == (1.0, {}, False)


def test_a_scaler_says_once_where_it_is_not_needed(monkeypatch):
    monkeypatch.setattr(autocast_module, "_float16_regions_entered", False)
    p = adcuda.tensor([1.0], requires_grad=True)
    opt = SGD([p], lr=0.1)
    scaler = GradScaler("cpu")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            opt.zero_grad()
            scaler.scale(p.sum()).backward()
            assert scaler.step(opt)  # it still works
            scaler.update()
    messages = [str(w.message) for w in caught if "not needed here" in str(w.message)]
    assert len(messages) == 1 and "gradients on cpu are not float16" in messages[0]
    # float16 compute under autocast is what scaling protects: then it says nothing
    with autocast("cpu"):
        pass
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        other = GradScaler("cpu")
        opt.zero_grad()
        other.scale(p.sum()).backward()
        other.step(opt)
    assert not [w for w in caught if "not needed here" in str(w.message)]


# ------------------------------------------------------------------------------------------ bad input
def _scaled_backward(scaler, p):
    scaler.scale((p * 2.0).sum()).backward()


def test_out_of_order_calls_raise_torchs_errors():
    p = adcuda.tensor([1.0], requires_grad=True)
    opt = SGD([p], lr=0.1)
    scaler = GradScaler("cpu")
    with pytest.raises(
        RuntimeError,
        match=r"Attempted update but _scale is None\.  This may indicate your script "
        r"did not use scaler.scale\(loss or outputs\)",
    ):
        scaler.update()
    _scaled_backward(scaler, p)
    scaler.unscale_(opt)
    with pytest.raises(
        RuntimeError,
        match=r"^unscale_\(\) has already been called on this optimizer since the "
        r"last update\(\)\.$",
    ):
        scaler.unscale_(opt)
    scaler.step(opt)
    with pytest.raises(RuntimeError, match=r"unscale_\(\) is being called after step\(\)\."):
        scaler.unscale_(opt)
    with pytest.raises(RuntimeError, match=r"step\(\) has already been called since the last update\(\)\."):
        scaler.step(opt)
    scaler.update()
    with pytest.raises(RuntimeError, match=r"Closure use is not currently supported if GradScaler is enabled\."):
        scaler.step(opt, closure=lambda: None)


def test_step_without_backward_raises_no_inf_checks():
    p = adcuda.tensor([1.0], requires_grad=True)
    opt = SGD([p], lr=0.1)
    scaler = GradScaler("cpu")
    scaler.scale((p * 2.0).sum())  # no backward: no gradient to check
    with pytest.raises(RuntimeError, match=r"^No inf checks were recorded for this optimizer\. .*backward"):
        scaler.step(opt)
    fresh = GradScaler("cpu")
    fresh.scale(p.sum())
    with pytest.raises(RuntimeError, match=r"No inf checks were recorded prior to update\."):
        fresh.update()


def test_loading_a_disabled_scalers_state_is_an_error():
    saved = GradScaler("cpu", enabled=False).state_dict()
    with pytest.raises(
        RuntimeError,
        match=r"The source state dict is empty, possibly because it was saved from "
        r"a disabled instance of GradScaler\.",
    ):
        GradScaler("cpu").load_state_dict(saved)
    with pytest.raises(ValueError, match=r"lacks growth_interval, _growth_tracker"):
        GradScaler("cpu").load_state_dict({"scale": 2.0, "growth_factor": 2.0, "backoff_factor": 0.5})
    with pytest.raises(ValueError, match=r"the saved scale 1e\+30 is outside \[min_scale, max_scale\]"):
        GradScaler("cpu").load_state_dict(dict(GradScaler("cpu").state_dict(), scale=1e30))


def test_bad_scaler_arguments_are_reported():
    with pytest.raises(ValueError, match=r"The growth factor must be > 1\.0\."):
        GradScaler("cpu", growth_factor=1.0)
    with pytest.raises(ValueError, match=r"The backoff factor must be < 1\.0\."):
        GradScaler("cpu", backoff_factor=1.5)
    with pytest.raises(ValueError, match=r"growth_interval must be a positive int, got 0"):
        GradScaler("cpu", growth_interval=0)
    with pytest.raises(ValueError, match=r"0 < min_scale <= max_scale < inf, got min_scale=0\.0"):
        GradScaler("cpu", min_scale=0.0)
    with pytest.raises(ValueError, match=r"max_scale=inf"):
        GradScaler("cpu", max_scale=math.inf)
    with pytest.raises(
        ValueError,
        match=r"init_scale 1e\+30 is outside \[min_scale, max_scale\] = "
        r"\[1\.0, 16777216\.0\]",
    ):
        GradScaler("cpu", init_scale=1e30)
    p = adcuda.tensor([1.0], requires_grad=True)
    scaler = GradScaler("cpu")
    scaler.scale(p.sum())
    with pytest.raises(ValueError, match=r"new_scale 0\.5 is outside"):
        scaler.update(0.5)
    with pytest.raises(ValueError, match=r"new_scale should be a float or a 1-element adcuda float32 Tensor"):
        scaler.update(adcuda.tensor([1.0, 2.0]))
    scaler.update(adcuda.tensor(32.0))
    assert scaler.get_scale() == 32.0


# ------------------------------------------------------------------------------------------ autocast
def test_autocast_output_dtypes_follow_the_op_lists():
    x, w, b = adcuda.randn(4, 8), adcuda.randn(5, 8, requires_grad=True), adcuda.randn(5, requires_grad=True)
    target = adcuda.tensor([0, 1, 2, 3])
    q = adcuda.randn(2, 3, 4)
    half = adcuda.randn(4, 5).half()
    with autocast("cpu"):
        assert adcuda.amp.is_autocast_enabled("cpu") and adcuda.amp.get_autocast_dtype("cpu") is F16
        assert not adcuda.amp.is_autocast_enabled("cuda")
        lower = {
            "matmul": x @ w.T,
            "mm": adcuda.mm(x, w.T),
            "bmm": adcuda.bmm(q, q.mT),
            "linear": F.linear(x, w, b),
            "Linear": nn.Linear(8, 3)(x),
            "sdpa": F.scaled_dot_product_attention(q, q, q),
        }
        full = {
            "softmax": F.softmax(half, -1),
            "log_softmax": F.log_softmax(half, -1),
            "cross_entropy": F.cross_entropy(half, target),
            "nll_loss": F.nll_loss(F.log_softmax(half, 1), target),
            "mse_loss": F.mse_loss(half, half),
            "l1_loss": F.l1_loss(half, half),
            "bce_with_logits": F.binary_cross_entropy_with_logits(half, half.sigmoid()),
            "layer_norm": F.layer_norm(half, (5,)),
            "LayerNorm": nn.LayerNorm(5)(half),
            "softplus": F.softplus(half),
            "dot": adcuda.dot(x[0], x[1].half()),
        }
        untouched = {
            "add": x + 1.0,
            "relu": F.relu(x),
            "float64 matmul": adcuda.randn(2, 2).double() @ adcuda.eye(2, dtype=adcuda.float64),
        }
    assert not adcuda.amp.is_autocast_enabled("cpu")
    assert {k: v.dtype for k, v in lower.items()} == {k: F16 for k in lower}
    assert {k: v.dtype for k, v in full.items()} == {k: F32 for k in full}
    assert {k: v.dtype for k, v in untouched.items()} == {"add": F32, "relu": F32, "float64 matmul": adcuda.float64}
    # outside the region nothing is cast: mixing dtypes in a matmul is an error again
    assert (x @ w.T).dtype is F32
    with pytest.raises(RuntimeError, match="matmul: expected both operands to have the same dtype"):
        half @ w


def test_autocast_gradients_reach_float32_weights_in_float32():
    model = nn.Sequential(nn.Linear(6, 8), nn.LayerNorm(8), nn.GELU(), nn.Linear(8, 3))
    x, y = adcuda.randn(5, 6), adcuda.tensor([0, 2, 1, 1, 0])
    with autocast("cpu"):
        logits = model(x)
        loss = F.cross_entropy(logits, y)
    assert logits.dtype is F16 and loss.dtype is F32
    loss.backward()
    for name, p in model.named_parameters():
        assert p.grad is not None and p.grad.dtype is F32, name
    # and they match the float32 gradients to float16 accuracy
    reference = [p.grad.numpy().copy() for p in model.parameters()]
    model.zero_grad()
    F.cross_entropy(model(x), y).backward()
    for got, p in zip(reference, model.parameters()):
        np.testing.assert_allclose(got, p.grad.numpy(), rtol=2e-2, atol=2e-3)


def test_autocast_matmul_is_float16_storage_with_float32_accumulation():
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((7, 1023)).astype(np.float32), rng.standard_normal((1023, 5)).astype(np.float32)
    with autocast("cpu"):
        out = adcuda.from_numpy(a) @ adcuda.from_numpy(b)
    expected = (a.astype(np.float16).astype(np.float32) @ b.astype(np.float16).astype(np.float32)).astype(np.float16)
    np.testing.assert_array_equal(out.numpy(), expected)


def test_autocast_nesting_disabling_decorator_and_threads():
    x = adcuda.randn(2, 2)
    seen = {}

    @autocast("cpu")
    def decorated():
        return (x @ x).dtype

    def other_thread():
        seen["thread"] = (x @ x).dtype

    with autocast("cpu"):
        with autocast("cpu", enabled=False):
            assert (x @ x).dtype is F32
        assert (x @ x).dtype is F16
        worker = threading.Thread(target=other_thread)
        worker.start()
        worker.join()
    assert seen["thread"] is F32  # the state is thread-local, as in PyTorch
    assert decorated() is F16 and (x @ x).dtype is F32
    with adcuda.autocast("cpu", dtype=adcuda.float16):  # also at the top level, like torch.autocast
        assert (x @ x).dtype is F16


def test_autocast_caches_weight_casts_and_recasts_after_a_write():
    w = nn.Parameter(adcuda.randn(3, 3))
    with autocast("cpu"):
        first, second = F.linear(adcuda.randn(1, 3), w), F.linear(adcuda.randn(1, 3), w)
        assert first.grad_fn is not None and second.grad_fn is not None
        cache = autocast_module._state.cache
        ((leaf, _, cast),) = cache.values()
        assert leaf is w and cast.dtype is F16
        with adcuda.no_grad():
            w.mul_(2.0)
        F.linear(adcuda.randn(1, 3), w)
        ((_, _, recast),) = cache.values()
        assert recast is not cast
        np.testing.assert_array_equal(recast.detach().numpy(), (w.detach().numpy()).astype(np.float16))
        with adcuda.no_grad():  # a cast without a graph is never cached (it would cut later uses off)
            F.linear(adcuda.randn(1, 3), nn.Parameter(adcuda.randn(3, 3)))
        assert len(cache) == 1
    assert autocast_module._state.cache is None
    (first.sum() + second.sum()).backward()
    assert w.grad.dtype is F32


def test_bad_autocast_arguments_are_reported():
    with pytest.raises(RuntimeError, match=r"autocast: unsupported device_type 'tpu'"):
        autocast("tpu")
    with pytest.raises(
        TypeError,
        match=r"autocast: dtype must be adcuda.float16 or adcuda.bfloat16, got "
        r"adcuda.float32",
    ):
        autocast("cpu", dtype=adcuda.float32)
    with pytest.raises(TypeError, match=r"bfloat16 is not supported on the CPU backend"):
        autocast("cpu", dtype=adcuda.bfloat16)
    with pytest.raises(TypeError, match=r"expected `enabled` to be of type bool"):
        autocast("cpu", enabled="yes")


def test_autocast_cuda_without_a_gpu_warns_and_leaves_cpu_tensors_alone():
    if adcuda.cuda.is_available():
        pytest.skip("CUDA is available here")
    x = adcuda.randn(2, 2)
    with pytest.warns(UserWarning, match="CUDA is not available"):
        region = autocast("cuda")
    with region:
        assert (x @ x).dtype is F32


# ------------------------------------------------------------------------------------------ training
def _train(mode, steps=120):
    """An MLP on a fixed synthetic 4-class problem: 'fp32', 'half' (float16 weights, float32 masters,
    GradScaler, loss in float32) or 'autocast' (float32 weights, autocast, GradScaler)."""
    rng = np.random.default_rng(0)
    centers = rng.standard_normal((4, 16)) * 0.5
    labels = rng.integers(0, 4, 512)
    data = (centers[labels] + rng.standard_normal((512, 16))).astype(np.float32)
    adcuda.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 4))
    if mode == "half":
        model.half()
    opt = AdamW(model.parameters(), lr=3e-3, master_weights=(mode == "half"))
    scaler = GradScaler("cpu", enabled=(mode != "fp32"))
    x_all = adcuda.from_numpy(data)
    y_all = adcuda.from_numpy(labels.astype(np.int64))
    losses = []
    for step in range(steps):
        idx = slice((step * 64) % 512, (step * 64) % 512 + 64)
        x, y = x_all[idx], y_all[idx]
        opt.zero_grad()
        with autocast("cpu", enabled=(mode == "autocast")):
            logits = model(x.half() if mode == "half" else x)
            loss = F.cross_entropy(logits.float(), y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        losses.append(loss.item())
    return float(np.mean(losses[-16:])), model


def test_mixed_precision_training_reaches_the_float32_loss():
    """Tolerance: the mean of the last 16 batch losses within 2% of the float32 run's (they differ
    by about 0.1% here; the classes overlap, so the loss stays well above 0 and the comparison is
    not between two zeros)."""
    reference, _ = _train("fp32")
    assert 0.1 < reference < 0.5  # starts at ln 4 = 1.39: it learned, and is not trivially separable
    for mode in ("half", "autocast"):
        final, model = _train(mode)
        assert abs(final - reference) <= 0.02 * reference, (mode, final, reference)
        assert {p.dtype for p in model.parameters()} == {F16 if mode == "half" else F32}
