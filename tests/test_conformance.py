"""The conformance database (tests/conformance/) run against PyTorch on the CPU: every sample of every
entry through every form the op has (function, Tensor method, in-place, operators, nn.functional), its
values (tolerance per dtype), dtype, shape and the strides of views; float64 samples' first- and
second-order gradients; error samples' exception family, adcuda error class and message.

Known defects are strict expected failures listed in tests/conformance/known_failures.py: a fixed one
fails as XPASS(strict) until its line is removed, and a new one fails.

tests/test_conformance_cuda.py runs a fixed, seeded sample of the database on the CUDA device.
"""

import pytest
from conformance import runner
from conformance.database import ENTRIES
from conformance.known_failures import expected_failure

torch = pytest.importorskip("torch")
TORCH = runner.torch_lib()
ADCUDA = runner.adcuda_lib()

# bfloat16 is CUDA-only in adcuda (docs/differences.md): its samples, and those of the entries that
# make a bfloat16 tensor of another dtype, run in the CUDA variant only; on the CPU they raise the
# documented error (test_bfloat16_is_cuda_only)
CPU_SKIPS = {"bfloat16"}
CPU_SKIPPED_ENTRIES = {"bfloat16"}


# ops whose PyTorch oracle needs CUDA: PyTorch's CPU wheel fails them with AssertionError
NEEDS_TORCH_CUDA = {"cuda"}


def _params(kind):
    out = []
    for entry in ENTRIES:
        if entry.name in NEEDS_TORCH_CUDA and not torch.cuda.is_available():
            continue
        samples = entry.errors if kind == "error" else entry.samples
        for sample in samples:
            if kind != "error" and (sample.dtypes() & CPU_SKIPS or entry.key in CPU_SKIPPED_ENTRIES):
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


@pytest.mark.parametrize("key", sorted(CPU_SKIPPED_ENTRIES))
def test_bfloat16_is_cuda_only(key):
    """The deliberate difference the CPU skips stand for: a bfloat16 tensor on the CPU is refused with
    an adcuda error that says so (docs/differences.md), never made as another dtype."""
    entry = next(e for e in ENTRIES if e.key == key)
    for sample in entry.samples:
        for kind, name in runner.forms(entry):
            _, exc, _ = runner.run_form(entry, ADCUDA, kind, name, sample)
            assert isinstance(exc, runner.AdcudaError), f"{kind} {name} of {sample.name}: {exc!r}"
            assert "bfloat16 is not supported on the CPU" in str(exc)


@pytest.mark.parametrize(("entry", "sample"), _params("value"))
def test_values(entry, sample):
    diffs = runner.value_diffs(entry, sample, TORCH, ADCUDA, TORCH)
    assert not diffs, "\n".join(diffs)


@pytest.mark.parametrize(("entry", "sample"), _params("grad"))
def test_gradients(entry, sample):
    """First- and second-order gradients of a weighted sum of the outputs, w.r.t. every float64
    input, against torch.autograd.grad on the same values."""
    kind, name = _grad_form(entry, sample)
    results = {}
    through = None  # the first-order gradients PyTorch differentiates again (runner.gradients)
    for lib in (TORCH, ADCUDA):
        leaves = []
        args = runner.resolve(sample.args, lib, None, leaves, grad=True)
        kwargs = runner.resolve(sample.kwargs, lib, None, leaves, grad=True)
        ref_name = runner.torch_name(entry, name) if lib is TORCH else name

        def fn(lib=lib, args=args, kwargs=kwargs, ref_name=ref_name):
            return runner.call(entry, lib, kind, ref_name, args, kwargs)

        results[lib is TORCH] = _gradients(lib, fn, leaves, through)
        if lib is TORCH and not isinstance(results[True], Exception):
            through = results[True][3]
    ref, got = results[True], results[False]
    if isinstance(ref, Exception):
        pytest.skip(f"PyTorch has no gradient here: {runner._short(ref)}")
    if isinstance(got, Exception):
        raise AssertionError(f"gradient: raises {runner._short(got)}") from got
    (ref1, ref2, ref_note, _), (got1, got2, got_note, _) = ref, got
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


def _gradients(lib, fn, leaves, through=None):
    """(first, second, note, through), the second an exception where the library has no second order;
    ``through`` as runner.gradients takes and gives it."""
    try:
        first, _, note, _ = runner.gradients(lib, fn, leaves, second_order=False)
    except Exception as exc:  # noqa: BLE001 - compared with the other library's outcome
        return exc
    if note:
        return None, None, note, None
    try:
        _, second, _, through = runner.gradients(lib, fn, leaves, second_order=True, through=through)
    except Exception as exc:  # noqa: BLE001
        second = exc
    return first, second, None, through


@pytest.mark.parametrize(("entry", "sample"), _params("error"))
def test_errors(entry, sample):
    """Arguments PyTorch rejects: adcuda raises an adcuda error of the same family naming the op."""
    diffs = []
    ran = 0
    for kind, name in runner.forms(entry):
        if kind == "inplace" or runner.runnable(entry, sample, kind, name, TORCH):
            continue
        ref, ref_exc, _ = runner.run_form(entry, TORCH, kind, runner.torch_name(entry, name), sample)
        assert ref_exc is not None, f"the database is wrong: PyTorch accepts {kind} {name} of {sample.name}"
        if runner.family(ref_exc) != sample.family:
            continue  # this form rejects the call for another reason (its signature): the signature test's part
        ran += 1
        got, got_exc, _ = runner.run_form(entry, ADCUDA, kind, name, sample)
        diffs += [
            f"{kind} {name}: {d}"
            for d in runner.error_diffs(runner.op_names(entry, name), ref_exc, got_exc, sample.family)
        ]
    assert ran, f"the database is wrong: no form of {entry.name} raises {sample.family} in PyTorch"
    assert not diffs, "\n".join(diffs)
