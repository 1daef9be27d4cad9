"""The GPT-2 step's fusions on CUDA (issue 29), against the CPU backend: Adam/AdamW writing the
half-precision working copy of float32 weights in the same multi-tensor pass, and clip_grad_norm_'s
coefficient applied inside that pass (``grad_multiplier``, read on the device). Run without a GPU by
scripts/emulated_cuda_tests.sh, also under ADCUDA_EMULATOR_SCHEDULE=reverse and random."""

import numpy as np
import pytest
from helpers import fused_adam_step

import adcuda
from adcuda import dtypes as dt
from adcuda.backends import cpu

pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not adcuda.cuda.is_available(), reason="needs a usable CUDA device"),
]

# odd sizes (one element, a partial 16-byte vector, a partial chunk), a tensor over one 65536-element
# chunk, and a tensor whose start is not 16-byte aligned (a view at offset 1: the element loop)
SIZES = [(1,), (7,), (1023,), (3, 5), (65537,)]


def host(cb, a):
    return np.array(cb.to_numpy(a))


def lists(cb, seed, sizes=SIZES):
    g = np.random.default_rng(seed)
    out = {}
    for name in ("params", "grads", "m", "v"):
        arrays = [g.standard_normal(s).astype(np.float32) * (0.1 if name in "mv" else 1.0) for s in sizes]
        if name == "v":
            arrays = [np.abs(a) for a in arrays]
        out[name] = arrays
    return out


def on_device(cb, arrays, dtype=dt.float32):
    return [cb.from_numpy(a if dtype is not dt.bfloat16 else a.astype(np.float32), dtype) for a in arrays]


def rounded(cb, arrays, dtype):
    """The arrays rounded to ``dtype`` by the device's own cast, as float32 host arrays."""
    return [host(cb, cb.astype(cb.astype(cb.from_numpy(a, dt.float32), dtype), dt.float32)) for a in arrays]


@pytest.mark.parametrize("copy_dtype", (dt.float16, dt.bfloat16), ids=str)
@pytest.mark.parametrize("decoupled, amsgrad, weight_decay", [(True, False, 0.1), (False, True, 0.01)])
def test_adam_writes_the_working_copy_in_the_same_pass(cb, copy_dtype, decoupled, amsgrad, weight_decay):
    """float32 weights (the masters) with float32 gradients and state, and a half working copy as the
    "parameter": the masters and moments follow the CPU backend, and the copy is each master rounded
    to half (exactly what the cast it replaces gives)."""
    t = lists(cb, 0)
    masters = on_device(cb, t["params"])
    grads, m, v = on_device(cb, t["grads"]), on_device(cb, t["m"]), on_device(cb, t["v"])
    maxes = on_device(cb, [a.copy() for a in t["v"]]) if amsgrad else None
    copies = [cb.empty(a.shape, copy_dtype) for a in t["params"]]
    ref = {k: [a.copy() for a in arrays] for k, arrays in t.items()}
    ref_max = [a.copy() for a in t["v"]] if amsgrad else None
    for step in (1, 2, 3):
        args = (step, 1e-2, 0.9, 0.95, 1e-8, weight_decay, decoupled)
        cb.adam_step_(copies, grads, m, v, *args, masters, maxes)
        cpu.adam_step_(ref["params"], ref["grads"], ref["m"], ref["v"], *args, None, ref_max)
    for name, got in (("params", masters), ("m", m), ("v", v)):
        for a, expected in zip(got, ref[name]):
            np.testing.assert_allclose(host(cb, a), expected, rtol=2e-5, atol=2e-6, err_msg=name)
    for copy, master in zip(copies, masters):
        assert cb.dtype_of(copy) is copy_dtype
        np.testing.assert_array_equal(
            host(cb, cb.astype(copy, dt.float32)), rounded(cb, [host(cb, master)], copy_dtype)[0]
        )


def _adamw_tensors(device, dtype, sizes, seed, master=False, offset=0):
    """Parameters (views at ``offset`` elements into a larger buffer: offset 1 is not 16-byte
    aligned), float32 or ``dtype`` gradients, moments and step counts for ``adcuda._fused_adamw_``."""
    g = np.random.default_rng(seed)
    state_dtype = adcuda.float32 if master else dtype

    def make(shape, dt_, scale=1.0, positive=False):
        values = g.standard_normal((int(np.prod(shape)) + offset,)).astype(np.float32) * scale
        values = np.abs(values) if positive else values
        return adcuda.tensor(values, device=device).to(dt_)[offset:].view(shape)

    return {
        "params": [make(s, dtype) for s in sizes],
        "grads": [make(s, adcuda.float32 if master else dtype) for s in sizes],
        "m": [make(s, state_dtype, 0.1) for s in sizes],
        "v": [make(s, state_dtype, 0.1, positive=True) for s in sizes],
        "steps": [adcuda.tensor(0.0) for _ in sizes],
    }


def _clone(t):
    return {k: [x.clone() for x in v] for k, v in t.items()}


def _step(t, masters=None, multiplier=None, steps=3):
    for _ in range(steps):
        adcuda._foreach_add_(t["steps"], 1)
        fused_adam_step(
            t["params"], t["grads"], t["m"], t["v"], t["steps"], master_params=masters, grad_multiplier=multiplier
        )


def _host(x):
    return x.detach().float().cpu().numpy()


@pytest.mark.parametrize("offset", (0, 1))
@pytest.mark.parametrize("copy_dtype", ("float16", "bfloat16"))
def test_working_copy_through_the_fused_op(copy_dtype, offset):
    """At the op level, with views that are (offset 0) and are not (offset 1) 16-byte aligned: the
    float32 weights step as on the CPU backend and the copy is each weight rounded to half."""
    copy_dtype = getattr(adcuda, copy_dtype)
    t = _adamw_tensors("cuda", adcuda.float32, SIZES, 7, offset=offset)
    ref = {k: [x.cpu().clone() for x in v] for k, v in t.items()}
    copies = [adcuda.empty(p.shape, dtype=copy_dtype, device="cuda") for p in t["params"]]
    weights = t["params"]
    _step({**t, "params": copies}, masters=weights)
    _step(ref)
    for w, r, c in zip(weights, ref["params"], copies):
        np.testing.assert_allclose(_host(w), _host(r), rtol=2e-5, atol=2e-6)
        np.testing.assert_array_equal(_host(c), _host(w.to(copy_dtype)))


@pytest.mark.parametrize(
    "dtype, master", [("float32", False), ("float16", False), ("float16", True), ("bfloat16", True)]
)
@pytest.mark.parametrize("coefficient", (0.37, 1.0))
def test_grad_multiplier_is_the_separate_multiply_fused(dtype, master, coefficient):
    """The step with ``grad_multiplier`` equals ``_foreach_mul_(grads, c)`` then the step, bit for bit,
    on the device (where, as in every elementwise kernel, both operands are taken in the gradient's
    dtype: c is rounded to half for half gradients, which the CPU backend does not do); the
    gradients themselves are not written; and the CPU backend agrees within half precision."""
    dtype = getattr(adcuda, dtype)
    fused = _adamw_tensors("cuda", dtype, SIZES, 11, master=master)
    if master:
        # half parameters with half gradients and float32 masters and moments
        fused["grads"] = [g.to(dtype) for g in fused["grads"]]
    separate = _clone(fused)
    grads_before = [_host(g) for g in fused["grads"]]
    masters_fused = [p.float() for p in fused["params"]] if master else None
    masters_separate = [p.float() for p in separate["params"]] if master else None
    c = adcuda.tensor(coefficient, device="cuda")
    _step(fused, masters_fused, multiplier=c, steps=1)
    adcuda._foreach_mul_(separate["grads"], c)
    _step(separate, masters_separate, steps=1)
    for a, b in zip(fused["params"] + fused["m"] + fused["v"], separate["params"] + separate["m"] + separate["v"]):
        np.testing.assert_array_equal(_host(a), _host(b))
    for g, before in zip(fused["grads"], grads_before):
        np.testing.assert_array_equal(_host(g), before)
    if dtype is adcuda.bfloat16:
        return  # the CPU backend has no bfloat16
    on_cpu = {k: [x.cpu() for x in v] for k, v in _adamw_tensors("cuda", dtype, SIZES, 11, master=master).items()}
    if master:
        on_cpu["grads"] = [g.to(dtype) for g in on_cpu["grads"]]
    _step(
        on_cpu,
        [p.float() for p in on_cpu["params"]] if master else None,
        multiplier=adcuda.tensor(coefficient),
        steps=1,
    )
    tol = 2e-5 if dtype is adcuda.float32 else 4e-3
    for a, b in zip(fused["params"], on_cpu["params"]):
        np.testing.assert_allclose(_host(a), _host(b), rtol=tol, atol=tol)


def test_grad_multiplier_is_checked():
    t = _adamw_tensors("cuda", adcuda.float32, [(3,)], 0)
    with pytest.raises(adcuda.errors.DTypeError, match="grad_multiplier"):
        _step(t, multiplier=adcuda.tensor([0.5, 0.5], device="cuda"), steps=1)
    with pytest.raises(adcuda.errors.DeviceError, match="grad_multiplier"):
        _step(t, multiplier=adcuda.tensor(0.5), steps=1)


@pytest.mark.parametrize("dtype", ("float16", "bfloat16"))
def test_autocast_reads_the_working_copies_and_trains_identically(dtype, monkeypatch):
    """A small model under autocast with AdamW and the optimizer's clip: with working copies (the
    default) every loss and weight is bit for bit what plain per-step casts give (cache_enabled=False:
    no copies), and from the second step on the regions read the copies instead of casting."""
    from adcuda.ops import autocast as regions

    reads = []
    real = regions.working_copy_cast
    monkeypatch.setattr(regions, "working_copy_cast", lambda t, c: reads.append(t) or real(t, c))
    dtype = getattr(adcuda, dtype)
    losses, weights, copies_read = {}, {}, {}
    for cache in (True, False):
        adcuda.manual_seed(0)
        model = adcuda.nn.Sequential(adcuda.nn.Linear(7, 33), adcuda.nn.GELU(), adcuda.nn.Linear(33, 5)).cuda()
        opt = adcuda.optim.AdamW(model.parameters(), lr=1e-2)
        x = adcuda.randn(9, 7, device="cuda")
        y = adcuda.randint(0, 5, (9,), device="cuda")
        losses[cache] = []
        reads.clear()
        for _ in range(4):
            opt.zero_grad()
            with adcuda.amp.autocast("cuda", dtype=dtype, cache_enabled=cache):
                loss = adcuda.nn.functional.cross_entropy(model(x).float(), y)
            loss.backward()
            opt.clip_grad_norm_(0.5)
            opt.step()
            losses[cache].append(float(loss))
        weights[cache] = [_host(p) for p in model.parameters()]
        copies_read[cache] = len(reads)
    assert losses[True] == losses[False]
    for a, b in zip(weights[True], weights[False]):
        np.testing.assert_array_equal(a, b)
    assert copies_read == {True: 3 * 4, False: 0}  # steps 2-4 read the copies of the 4 weights
