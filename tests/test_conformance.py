"""The conformance database (tests/conformance/) run against PyTorch on the CPU: every sample of every
entry through every form the op has (function, Tensor method, in-place, operators, nn.functional), its
values (tolerance per dtype), dtype, shape and the strides of views; float64 samples' first- and
second-order gradients; error samples' exception family, adcuda error class and message.

Known defects are strict expected failures listed in tests/conformance/known_failures.py: a fixed one
fails as XPASS(strict) until its line is removed, and a new one fails.

A ``cuda``-marked variant runs a fixed, seeded sample of the database on the CUDA device against the
CPU backend (and PyTorch where installed).
"""

import random

import pytest
from conformance import runner
from conformance.database import ENTRIES
from conformance.known_failures import expected_failure

import adcuda

torch = pytest.importorskip("torch")
TORCH = runner.torch_lib()
ADCUDA = runner.adcuda_lib()
CUDA = adcuda.cuda.is_available()

# bfloat16 is CUDA-only in adcuda (docs/differences.md): its samples run in the CUDA variant only
CPU_SKIPS = {"bfloat16"}


def _params(kind):
    out = []
    for entry in ENTRIES:
        samples = entry.errors if kind == "error" else entry.samples
        for sample in samples:
            if kind != "error" and sample.dtypes() & CPU_SKIPS:
                continue
            if kind == "grad" and not _wants_grad(entry, sample):
                continue
            marks = expected_failure(kind, entry.key, sample.name)
            out.append(pytest.param(entry, sample, id=f"{entry.key}:{sample.name}", marks=marks))
    return out


def _wants_grad(entry, sample):
    return (
        entry.grad and entry.values and sample.grad and any(t.dtype == "float64" and t.grad for t in sample.tensors())
    )


def _run_forms(entry, sample, ref_lib, ref_device, got_device):
    diffs = []
    forms = runner.forms(entry)
    ran = 0
    for kind, name in forms:
        why = runner.runnable(entry, sample, kind, name, TORCH)
        if why:
            continue
        ran += 1
        ref_name = runner.torch_name(entry, name) if ref_lib is TORCH else name
        ref, ref_exc = runner.run_form(entry, ref_lib, kind, ref_name, sample, ref_device)
        got, got_exc = runner.run_form(entry, ADCUDA, kind, name, sample, got_device)
        where = f"{kind} {name}"
        if ref_exc is not None:
            diffs += [f"{where}: {d}" for d in runner.error_diffs(_names(entry, name), ref_exc, got_exc)]
            continue
        if got_exc is not None:
            diffs.append(f"{where}: raises {runner._short(got_exc)}; the reference returns a result")
            continue
        if kind == "inplace":
            (ref_self, ref), (got_self, got) = ref, got
            if ref_self != got_self:
                diffs.append(f"{where}: returns {'self' if got_self else 'a new tensor'}")
        if entry.values:
            diffs += [f"{where}: {d}" for d in runner.compare(ref, got, sample.tol or entry.tol, entry.strides)]
        else:
            diffs += [f"{where}: {d}" for d in runner.compare_meta(ref, got)]
        if ref_lib is TORCH:
            diffs += [f"{where}: {d}" for d in runner.view_diffs(ref, got)]
    if not forms or not ran:
        diffs.append(f"no form of {entry.name} runs this sample (forms: {forms})")
    return diffs


def _names(entry, name):
    return {entry.name, name}


@pytest.mark.parametrize(("entry", "sample"), _params("value"))
def test_values(entry, sample):
    diffs = _run_forms(entry, sample, TORCH, None, None)
    assert not diffs, "\n".join(diffs)


@pytest.mark.parametrize(("entry", "sample"), _params("grad"))
def test_gradients(entry, sample):
    """First- and second-order gradients of a weighted sum of the outputs, w.r.t. every float64
    input, against torch.autograd.grad on the same values."""
    kind, name = _grad_form(entry, sample)
    results = {}
    for lib in (TORCH, ADCUDA):
        leaves = []
        args = runner.resolve(sample.args, lib, None, leaves, grad=True)
        kwargs = runner.resolve(sample.kwargs, lib, None, leaves, grad=True)
        ref_name = runner.torch_name(entry, name) if lib is TORCH else name

        def fn(lib=lib, args=args, kwargs=kwargs, ref_name=ref_name):
            return runner.call(entry, lib, kind, ref_name, args, kwargs)

        results[lib is TORCH] = _gradients(lib, fn, leaves)
    ref, got = results[True], results[False]
    if isinstance(ref, Exception):
        pytest.skip(f"PyTorch has no gradient here: {runner._short(ref)}")
    if isinstance(got, Exception):
        raise AssertionError(f"gradient: raises {runner._short(got)}") from got
    (ref1, ref2, ref_note), (got1, got2, got_note) = ref, got
    if ref_note:
        pytest.skip(ref_note)
    assert not got_note, f"gradient: {got_note}; PyTorch's output requires grad"
    diffs = runner.compare(list(ref1), list(got1), path="grad")
    if ref2 is not None and not isinstance(ref2, Exception):
        if isinstance(got2, Exception):
            diffs.append(f"second-order: raises {runner._short(got2)}")
        else:
            diffs += runner.compare(list(ref2), list(got2), path="gradgrad")
    assert not diffs, "\n".join(diffs)


def _grad_form(entry, sample):
    for kind, name in runner.forms(entry):
        if kind != "inplace" and not runner.runnable(entry, sample, kind, name, TORCH):
            return kind, name
    pytest.skip("no out-of-place form")


def _gradients(lib, fn, leaves):
    """(first, second, note), the second an exception where the library has no second order."""
    try:
        first, _, note = runner.gradients(lib, fn, leaves, second_order=False)
    except Exception as exc:  # noqa: BLE001 - compared with the other library's outcome
        return exc
    if note:
        return None, None, note
    try:
        _, second, _ = runner.gradients(lib, fn, leaves, second_order=True)
    except Exception as exc:  # noqa: BLE001
        second = exc
    return first, second, None


@pytest.mark.parametrize(("entry", "sample"), _params("error"))
def test_errors(entry, sample):
    """Arguments PyTorch rejects: adcuda raises an adcuda error of the same family naming the op."""
    diffs = []
    ran = 0
    for kind, name in runner.forms(entry):
        if kind == "inplace" or runner.runnable(entry, sample, kind, name, TORCH):
            continue
        ref, ref_exc = runner.run_form(entry, TORCH, kind, runner.torch_name(entry, name), sample)
        assert ref_exc is not None, f"the database is wrong: PyTorch accepts {kind} {name} of {sample.name}"
        if runner.family(ref_exc) != sample.family:
            continue  # this form rejects the call for another reason (its signature): the signature test's part
        ran += 1
        got, got_exc = runner.run_form(entry, ADCUDA, kind, name, sample)
        diffs += [
            f"{kind} {name}: {d}" for d in runner.error_diffs(_names(entry, name), ref_exc, got_exc, sample.family)
        ]
    assert ran, f"the database is wrong: no form of {entry.name} raises {sample.family} in PyTorch"
    assert not diffs, "\n".join(diffs)


# --------------------------------------------------------------------------------------------------
# the CUDA variant: a fixed, seeded sample of the database, on the device against the CPU backend
CUDA_SAMPLE_SIZE = 250


def _cuda_params():
    pool = [(e, s) for e in ENTRIES if e.values for s in e.samples]
    chosen = random.Random(27).sample(pool, min(CUDA_SAMPLE_SIZE, len(pool)))
    return [
        pytest.param(e, s, id=f"{e.key}:{s.name}", marks=expected_failure("cuda", e.key, s.name)) for e, s in chosen
    ]


@pytest.mark.cuda
@pytest.mark.skipif(not CUDA, reason="needs a usable CUDA device")
@pytest.mark.parametrize(("entry", "sample"), _cuda_params())
def test_cuda_against_cpu(entry, sample):
    """The same forms on the CUDA device and on the CPU backend agree (bfloat16 samples against
    PyTorch, as the CPU backend has no bfloat16)."""
    if sample.dtypes() & CPU_SKIPS:
        diffs = _run_forms(entry, sample, TORCH, None, "cuda")
    else:
        diffs = _run_forms(entry, sample, ADCUDA, None, "cuda")
    assert not diffs, "\n".join(diffs)
