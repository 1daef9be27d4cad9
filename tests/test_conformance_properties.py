"""The generic rules against PyTorch: the type-promotion table (every dtype pair, tensors, 0-d tensors,
Python scalars and empty operands, ``alpha=``/``beta=``) against ``torch.result_type`` and PyTorch's
ops, broadcasting of random shapes, and zero-size shapes through reductions and elementwise ops
(hypothesis, derandomized: the same examples on every run).

Known defects are strict expected failures in tests/conformance/known_failures.py (checks
``promotion`` and ``property``).
"""

import numpy as np
import pytest
from conformance import runner
from conformance.known_failures import expected_failure
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

import adcuda

torch = pytest.importorskip("torch")

CPU_DTYPES = ("bool", "int32", "int64", "float16", "float32", "float64")
# an operand: a dtype and a kind (tensor of shape (3,), 0-d tensor, empty tensor, or Python scalar)
TENSOR_KINDS = ("tensor", "0d", "empty")
PYTHON_SCALARS = {"bool": True, "int64": 3, "float64": 2.5}
OPERANDS = [(d, k) for d in CPU_DTYPES for k in TENSOR_KINDS] + [(d, "python") for d in PYTHON_SCALARS]
PROMOTING_OPS = ("add", "mul", "div", "maximum", "eq", "where")
# no shrinking: a known defect's test fails on every run, and shrinking it would cost minutes
FAST = settings(
    derandomize=True,
    max_examples=25,
    deadline=None,
    phases=[Phase.explicit, Phase.generate],
    report_multiple_bugs=False,
    suppress_health_check=[HealthCheck.too_slow],
)


def operand(lib, dtype, kind):
    if kind == "python":
        return PYTHON_SCALARS[dtype]
    shape = {"tensor": (3,), "0d": (), "empty": (0,)}[kind]
    return lib.ones(shape, dtype=getattr(lib, dtype))


def call(lib, op, a, b, **kwargs):
    if op == "where":
        cond = lib.ones((), dtype=lib.bool)
        return lib.where(cond, a, b)
    return getattr(lib, op)(a, b, **kwargs)


def _outcome(lib, op, a, b, **kwargs):
    return runner.outcome(lambda: call(lib, op, operand(lib, *a), operand(lib, *b), **kwargs))


def check(op, a, b, **kwargs):
    """Differences between adcuda's and PyTorch's result dtype (or exception) for ``op(a, b)``."""
    if a[1] == "python" and b[1] == "python":
        return []
    ref, ref_exc = _outcome(torch, op, a, b, **kwargs)
    got, got_exc = _outcome(adcuda, op, a, b, **kwargs)
    if ref_exc is not None:
        return runner.error_diffs({op}, ref_exc, got_exc)
    if got_exc is not None:
        return [f"rejects what PyTorch accepts: {runner._short(got_exc)}"]
    if op in ("add", "mul", "maximum") and not kwargs:
        expected = torch.result_type(operand(torch, *a), operand(torch, *b))
        assert ref.dtype == expected, "PyTorch's op and torch.result_type disagree"
    if runner.dtype_name(ref.dtype) != runner.dtype_name(got.dtype):
        return [f"result: dtype {runner.dtype_name(got.dtype)}, expected {runner.dtype_name(ref.dtype)}"]
    return []


def _operand_id(o):
    return f"{o[0]}:{o[1]}"


def _table():
    out = []
    for op in PROMOTING_OPS:
        for a in OPERANDS:
            if a[1] == "python":
                continue
            for b in OPERANDS:
                sample = f"{_operand_id(a)}-{_operand_id(b)}"
                out.append(pytest.param(op, a, b, id=f"{op}:{sample}", marks=expected_failure("promotion", op, sample)))
    return out


@pytest.mark.parametrize(("op", "a", "b"), _table())
def test_promotion_table(op, a, b):
    diffs = check(op, a, b)
    assert not diffs, "\n".join(diffs)


def _alpha_table():
    out = []
    for op in ("add", "sub"):
        for da in CPU_DTYPES:
            for db in CPU_DTYPES:
                for alpha in (2, 2.5, True):
                    sample = f"{da}-{db}-alpha={alpha!r}"
                    key = f"{op}[alpha]"
                    marks = expected_failure("promotion", key, sample)
                    out.append(pytest.param(op, da, db, alpha, id=f"{key}:{sample}", marks=marks))
    return out


@pytest.mark.parametrize(("op", "da", "db", "alpha"), _alpha_table())
def test_alpha_promotion(op, da, db, alpha):
    """``alpha=`` takes part in PyTorch's checks (no float alpha for integer tensors, no bool alpha
    for non-bool ones) but not in the result dtype."""
    diffs = check(op, (da, "tensor"), (db, "tensor"), alpha=alpha)
    assert not diffs, "\n".join(diffs)


def _beta_table():
    out = []
    for dtype in CPU_DTYPES:
        for beta in (0, 0.5, True):
            sample = f"{dtype}-beta={beta!r}"
            out.append(
                pytest.param(dtype, beta, id=f"addmm:{sample}", marks=expected_failure("promotion", "addmm", sample))
            )
    return out


@pytest.mark.parametrize(("dtype", "beta"), _beta_table())
def test_beta_promotion(dtype, beta):
    """``beta=``/``alpha=`` of addmm: accepted or rejected as PyTorch does, for every dtype."""
    results = []
    for lib in (torch, adcuda):
        d = getattr(lib, dtype)
        m = lib.ones((2, 2), dtype=d)
        results.append(runner.outcome(lambda lib=lib, m=m: lib.addmm(m, m, m, beta=beta, alpha=2)))
    (ref, ref_exc), (got, got_exc) = results
    if ref_exc is not None:
        diffs = runner.error_diffs({"addmm"}, ref_exc, got_exc)
    elif got_exc is not None:
        diffs = [f"rejects what PyTorch accepts: {runner._short(got_exc)}"]
    else:
        diffs = runner.compare(ref, got)
    assert not diffs, "\n".join(diffs)


# --------------------------------------------------------------------------------------------------
# hypothesis: broadcasting and zero-size shapes
def _broadcastable_shapes():
    """Two shapes that broadcast: a common shape, each dim possibly 1 or 0 in one operand, each
    operand possibly of lower rank."""

    @st.composite
    def build(draw):
        rank = draw(st.integers(0, 4))
        common = draw(st.lists(st.integers(0, 3), min_size=rank, max_size=rank))
        a, b = [], []
        for n in common:
            which = draw(st.sampled_from(("both", "a1", "b1")))
            a.append(1 if which == "a1" else n)
            b.append(1 if which == "b1" else n)
        return tuple(a[draw(st.integers(0, rank)) :]), tuple(b[draw(st.integers(0, rank)) :])

    return build()


def _values(shape, seed):
    return np.random.default_rng(seed).uniform(-2, 2, shape).astype(np.float32)


def _per_op(test, ops):
    """One test per op (so that a known defect is a strict expected failure of that op's test)."""
    params = [pytest.param(op, id=op, marks=expected_failure("property", test, op)) for op in ops]
    return pytest.mark.parametrize("op", params)


BROADCASTING_OPS = ("add", "sub", "mul", "maximum", "where")


@_per_op("broadcasting", BROADCASTING_OPS)
@FAST
@given(shapes=_broadcastable_shapes())
def test_broadcasting(op, shapes):
    """Broadcasting of random shapes (zero-size and size-1 dims, lower ranks) gives PyTorch's shape
    and values."""
    a_shape, b_shape = shapes
    a, b = _values(a_shape, 1), _values(b_shape, 2)
    name = op
    results = []
    for lib in (torch, adcuda):
        x, y = lib.from_numpy(a.copy()), lib.from_numpy(b.copy())
        fn = (lambda x, y, lib=lib: lib.where(x > 0, x, y)) if name == "where" else getattr(lib, name)
        results.append(runner.outcome(lambda fn=fn, x=x, y=y: fn(x, y)))
    (ref, ref_exc), (got, got_exc) = results
    assert ref_exc is None, f"the test is wrong: PyTorch rejects {a_shape} and {b_shape}"
    assert got_exc is None, f"{name}{a_shape, b_shape}: rejects what PyTorch accepts: {runner._short(got_exc)}"
    diffs = runner.compare(ref, got)
    assert not diffs, "\n".join(diffs)


REDUCTIONS = ("sum", "mean", "prod", "amax", "amin", "argmax", "logsumexp", "var", "std", "all", "any", "nansum")


@_per_op("zero-size-reductions", REDUCTIONS)
@FAST
@given(
    shape=st.lists(st.integers(0, 3), min_size=1, max_size=3).filter(lambda s: 0 in s),
    dim=st.integers(-3, 2),
    keepdim=st.booleans(),
)
def test_zero_size_reductions(op, shape, dim, keepdim):
    """Reductions over (and beside) zero-size dims: PyTorch's values (0, nan, -inf), shapes, or the
    same exception family."""
    shape = tuple(shape)
    results = []
    for lib in (torch, adcuda):
        x = lib.zeros(shape)
        results.append(runner.outcome(lambda lib=lib, x=x: getattr(lib, op)(x, dim, keepdim=keepdim)))
    (ref, ref_exc), (got, got_exc) = results
    if ref_exc is not None:
        diffs = runner.error_diffs({op}, ref_exc, got_exc)
    elif got_exc is not None:
        diffs = [f"rejects what PyTorch accepts: {runner._short(got_exc)}"]
    else:
        diffs = runner.compare(ref, got)
    assert not diffs, f"{op}(zeros{shape}, {dim}, keepdim={keepdim}): " + "\n".join(diffs)


ELEMENTWISE = ("exp", "neg", "abs", "sigmoid", "relu", "sqrt", "square", "sign", "floor", "tanh")


@_per_op("zero-size-elementwise", ELEMENTWISE + tuple(op + "_" for op in ELEMENTWISE))
@FAST
@given(shape=st.lists(st.integers(0, 3), min_size=1, max_size=4).filter(lambda s: 0 in s))
def test_zero_size_elementwise(op, shape):
    """Elementwise ops of zero-size tensors, out of place and in place (``exp_``): PyTorch's shape
    and strides."""
    shape = tuple(shape)
    results = []
    for lib in (torch, adcuda):
        x = lib.zeros(shape)
        fn = getattr(x, op) if op.endswith("_") else (lambda lib=lib, x=x: getattr(lib, op)(x))
        results.append(runner.outcome(fn))
    (ref, _), (got, got_exc) = results
    assert got_exc is None, f"{op}(zeros{shape}): rejects what PyTorch accepts: {runner._short(got_exc)}"
    diffs = runner.compare(ref, got, strides=True)
    assert not diffs, f"{op}(zeros{shape}): " + "\n".join(diffs)


def test_known_failures_name_existing_cases():
    from conformance.known_failures import KNOWN

    ids = {p.id for p in _table() + _alpha_table() + _beta_table()}
    per_op = {
        "broadcasting": BROADCASTING_OPS,
        "zero-size-reductions": REDUCTIONS,
        "zero-size-elementwise": ELEMENTWISE + tuple(op + "_" for op in ELEMENTWISE),
    }
    stale = [
        (c, k, s)
        for c, k, s in KNOWN
        if (c == "promotion" and f"{k}:{s}" not in ids) or (c == "property" and s not in per_op.get(k, ()))
    ]
    assert not stale, f"known failures of cases that do not exist: {stale}"


@pytest.mark.parametrize("a", OPERANDS, ids=_operand_id)
def test_result_type_function(a):
    """adcuda.result_type against torch.result_type for every operand pair (tensors, 0-d, empty, scalars)."""
    got, want = [], []
    for b in OPERANDS:
        got.append(runner.dtype_name(adcuda.result_type(operand(adcuda, *a), operand(adcuda, *b))))
        want.append(runner.dtype_name(torch.result_type(operand(torch, *a), operand(torch, *b))))
    assert got == want


def test_promote_types_and_can_cast():
    for a in (*CPU_DTYPES, "bfloat16"):
        for b in (*CPU_DTYPES, "bfloat16"):
            da, db, ta, tb = getattr(adcuda, a), getattr(adcuda, b), getattr(torch, a), getattr(torch, b)
            assert runner.dtype_name(adcuda.promote_types(da, db)) == runner.dtype_name(torch.promote_types(ta, tb))
            assert adcuda.can_cast(da, db) == torch.can_cast(ta, tb), (a, b)
    for bad in (lambda: adcuda.can_cast(1, adcuda.float16), lambda: adcuda.result_type(adcuda.ones(1), "a")):
        with pytest.raises(TypeError, match=r"(can_cast|result_type)\(\): argument"):
            bad()
