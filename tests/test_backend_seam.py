"""The primitive seam (adcuda/backends): one contract for both backends.

- The table in adcuda/backends/__init__.py documents every name of ``PRIMITIVES``, once, with its
  signature; the CPU primitives have exactly those parameters, annotated (any machine).
- Each case below calls one primitive with an argument convention the table promises (``axes`` None
  or a tuple, negative dims, Python scalars, 0-d and empty arrays, result dtypes, the errors of bad
  input) and says what the CPU backend gives: the CPU half checks that (any machine); the CUDA half
  (marked ``cuda``, on a GPU or the emulator) checks that the CUDA backend gives the same results,
  dtypes, shapes and error classes, and that its signatures equal the CPU's, annotations included.
- End to end: with ``detect_anomaly()``, a NaN gradient of ``sqrt`` on CUDA is reported by the anomaly
  check naming ``SqrtBackward0`` (it once died in ``reduce`` on ``axes=None``, which only the CPU
  primitive accepted).

Every case's arrays are tiny: the whole file runs in seconds on the CPU and well under a minute on
the emulator.
"""

import collections
import inspect
import math
import re

import numpy as np
import pytest

import adcuda
from adcuda import backends
from adcuda import dtypes as dt
from adcuda.backends import cpu, seam
from adcuda.backends.seam import CPU_REPLAY_KEYWORDS, seam_signature
from adcuda.errors import DTypeError, IndexOutOfRangeError, ShapeError, UnsupportedDTypeError

CUDA = adcuda.cuda.is_available()


def gpu(test):
    """Marks a test as needing a usable CUDA device (the emulator counts; skipped without one)."""
    return pytest.mark.cuda(pytest.mark.skipif(not CUDA, reason="needs a usable CUDA device")(test))


# =============================================================================================
# the table and the signatures
TABLE_ROW = re.compile(r"^\| `(\w+)\((.*?)\)` \|", re.MULTILINE)


def documented():
    """{primitive: [parameter as written in the table]} and the names in table order."""
    rows = TABLE_ROW.findall(backends.__doc__)
    names = [name for name, _ in rows]
    return {name: [p.strip() for p in params.split(",") if p.strip()] for name, params in rows}, names


def written(signature):
    """A signature's parameters as the table writes them: ``name`` or ``name=default``."""
    return [
        name if p.default is inspect.Parameter.empty else f"{name}={p.default!r}"
        for name, p in signature.parameters.items()
    ]


def test_the_table_documents_every_primitive_once():
    table, names = documented()
    assert len(names) == len(set(names)), f"primitives with two rows: {sorted(n for n in names if names.count(n) > 1)}"
    assert set(names) == set(backends.PRIMITIVES), (
        f"no row: {sorted(set(backends.PRIMITIVES) - set(names))}; a row but not in PRIMITIVES: "
        f"{sorted(set(names) - set(backends.PRIMITIVES))}"
    )


@pytest.mark.parametrize("name", backends.PRIMITIVES)
def test_cpu_signature_is_the_tables_and_annotated(name):
    table, _ = documented()
    signature = seam_signature(name, getattr(cpu, name))
    assert written(signature) == table[name]
    for parameter in signature.parameters.values():
        assert parameter.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD, (name, parameter)
        assert parameter.annotation is not inspect.Parameter.empty, f"{name}: {parameter.name} has no annotation"
    assert signature.return_annotation is not inspect.Signature.empty, f"{name}: no return annotation"


@pytest.mark.parametrize("name", sorted(CPU_REPLAY_KEYWORDS))
def test_cpu_replay_keywords_are_optional_keyword_only(name):
    parameters = inspect.signature(getattr(cpu, name)).parameters
    for keyword in CPU_REPLAY_KEYWORDS[name]:
        p = parameters[keyword]
        assert p.kind is inspect.Parameter.KEYWORD_ONLY and p.default is None, (name, p)
        assert p.annotation is not inspect.Parameter.empty, (name, p)
    assert list(parameters)[-len(CPU_REPLAY_KEYWORDS[name]) :] == list(CPU_REPLAY_KEYWORDS[name])


@gpu
@pytest.mark.parametrize("name", backends.PRIMITIVES)
def test_cuda_signature_equals_the_cpus(name):
    from adcuda.backends import cuda

    # names, order, kinds, defaults and annotations, the return annotation included (the CPU's replay
    # keywords aside)
    assert inspect.signature(getattr(cuda, name)) == seam_signature(name, getattr(cpu, name))


# =============================================================================================
# the argument conventions
X = np.array([[-2.5, -1.5, -0.5], [0.5, 1.5, 2.5]], np.float32)
X3 = np.random.default_rng(0).standard_normal((2, 3, 4)).astype(np.float32)
I = np.array([[-2, -1, 0], [1, 2, 3]], np.int64)  # noqa: E741
B = np.array([[True, False, True], [False, False, True]])
S = np.array(1.5, np.float32)
E = np.zeros((0, 3), np.float32)
F32, F16, F64, I32, I64, BOOL = dt.float32, dt.float16, dt.float64, dt.int32, dt.int64, dt.bool_

Expect = collections.namedtuple("Expect", "dtype shape value")


def ok(dtype, shape, value=None):
    """An array result of ``dtype`` and ``shape`` (and values, where they pin the convention)."""
    return Expect(dtype.name, tuple(shape), value)


class Case(collections.namedtuple("Case", "primitive label call expect same_values")):
    """``call(bk, A)`` runs the primitive on backend ``bk`` (``A`` makes a backend array of a NumPy
    array); ``expect`` is what the CPU gives: an ``ok(...)``, a tuple of them, a plain value, or the
    exception class it raises. ``same_values``: whether the CUDA result must also equal the CPU's
    values (not for random draws, whose streams differ)."""


CASES = []


def case(primitive, label, call, expect, same_values=True):
    CASES.append(Case(primitive, label, call, expect, same_values))


def meta(bk, r):
    """A random draw's dtype and shape: the CPU's and CUDA's streams differ."""
    return bk.dtype_of(r).name, tuple(bk.shape_of(r))


def written_into(bk, a, call):
    """``a`` after ``call(a)``: the primitives ending in ``_`` write into their first argument."""
    call(a)
    return a


# ---- storage
case(
    "from_numpy",
    "non_blocking is accepted everywhere (a host array needs no wait)",
    lambda bk, A: bk.from_numpy(X, F32, non_blocking=True),
    ok(F32, (2, 3), X),
)
case("from_numpy", "a Python list and a NumPy scalar", lambda bk, A: bk.from_numpy([1, 2], F64), ok(F64, (2,), [1, 2]))
case("from_numpy", "a 0-d array", lambda bk, A: bk.from_numpy(np.array(3.0), I32), ok(I32, (), 3))
case("from_numpy", "an empty array", lambda bk, A: bk.from_numpy(np.zeros((0, 2)), I64), ok(I64, (0, 2)))
case("to_numpy", "a 0-d array stays an ndarray", lambda bk, A: type(bk.to_numpy(A(S))).__name__, "ndarray")
case(
    "empty",
    "shape as a tuple, a list or one int",
    lambda bk, A: [tuple(bk.shape_of(bk.empty(s, F32))) for s in ((2, 3), [2, 3], 3, ())],
    [(2, 3), (2, 3), (3,), ()],
)
case("full", "an int value into float32", lambda bk, A: bk.full((2,), 3, F32), ok(F32, (2,), [3, 3]))
case("full", "a NumPy scalar value", lambda bk, A: bk.full((), np.float64(1.25), F32), ok(F32, (), 1.25))
case("full", "one int shape", lambda bk, A: bk.full(3, True, BOOL), ok(BOOL, (3,), [True] * 3))
case("full", "an int that does not fit int32", lambda bk, A: bk.full((2,), 2**40, I32), OverflowError)
case("arange", "a negative step", lambda bk, A: bk.arange(5, 0, -2, I64), ok(I64, (3,), [5, 3, 1]))
case("arange", "empty", lambda bk, A: bk.arange(5, 0, 1, F32), ok(F32, (0,)))
case("dtype_of", "bool", lambda bk, A: bk.dtype_of(A(B)), BOOL)
case("shape_of", "a tuple, () for 0-d", lambda bk, A: (bk.shape_of(A(X)), bk.shape_of(A(S))), ((2, 3), ()))
case("astype", "always a new array", lambda bk, A: (lambda a: bk.shares_memory(a, bk.astype(a, F32)))(A(X)), False)
case("astype", "float to bool", lambda bk, A: bk.astype(A(X), BOOL), ok(BOOL, (2, 3), X != 0))
case(
    "astype",
    "0-d and empty",
    lambda bk, A: (bk.astype(A(S), F64), bk.astype(A(E), I64)),
    (ok(F64, (), 1.5), ok(I64, (0, 3))),
)
case("contiguous", "the same array when contiguous", lambda bk, A: (lambda a: bk.contiguous(a) is a)(A(X)), True)
case("contiguous", "a transposed view", lambda bk, A: bk.contiguous(bk.permute(A(X), (1, 0))), ok(F32, (3, 2), X.T))
case(
    "copy_",
    "a scalar, returning dst",
    lambda bk, A: (lambda a: (bk.copy_(a, 7) is a, a))(A(X)),
    (True, ok(F32, (2, 3), np.full((2, 3), 7))),
)
case(
    "copy_",
    "a host array, broadcast and cast",
    lambda bk, A: written_into(bk, A(I), lambda a: bk.copy_(a, np.ones(3) * 2.7)),
    ok(I64, (2, 3), np.full((2, 3), 2)),
)
case(
    "copy_",
    "a 0-d array into a strided view",
    lambda bk, A: (lambda a: (bk.copy_(bk.permute(a, (1, 0)), A(S)), a)[1])(A(X)),
    ok(F32, (2, 3), np.full((2, 3), 1.5)),
)
case("copy_", "shapes that do not broadcast", lambda bk, A: bk.copy_(A(X), A(np.ones(4, np.float32))), ValueError)
case("copy_", "an int that does not fit int32", lambda bk, A: bk.copy_(A(I.astype(np.int32)), 2**40), OverflowError)

# ---- views
case("view", "one size -1", lambda bk, A: bk.view(A(X), (-1,)), ok(F32, (6,), X.reshape(-1)))
case("view", "None where the strides do not allow it", lambda bk, A: bk.view(bk.permute(A(X), (1, 0)), (6,)), None)
case("view", "sizes that do not fit", lambda bk, A: bk.view(A(X), (4,)), ShapeError)
case("view", "0-d to (1, 1) and back", lambda bk, A: bk.view(bk.view(A(S), (1, 1)), ()), ok(F32, (), 1.5))
case("permute", "negative axes", lambda bk, A: bk.permute(A(X), (-1, 0)), ok(F32, (3, 2), X.T))
case("permute", "not a permutation", lambda bk, A: bk.permute(A(X), (0, 0)), ValueError)
case(
    "expand",
    "new leading dims, one int shape",
    lambda bk, A: (bk.expand(A(np.ones(1, np.float32)), 3), bk.expand(A(S), (2, 2))),
    (ok(F32, (3,), [1, 1, 1]), ok(F32, (2, 2), np.full((2, 2), 1.5))),
)
case("expand", "to a size 0", lambda bk, A: bk.expand(A(np.ones((1, 3), np.float32)), (0, 3)), ok(F32, (0, 3)))
case(
    "slice",
    "negative ints, a negative step, None and Ellipsis",
    lambda bk, A: bk.slice(A(X3), (-1, None, Ellipsis, slice(None, None, -2))),
    ok(F32, (1, 3, 2), X3[-1, None, ..., ::-2]),
)
case("slice", "a 0-d result is an array", lambda bk, A: bk.slice(A(X), (1, -1)), ok(F32, (), 2.5))
case("slice", "an int out of range", lambda bk, A: bk.slice(A(X), (5,)), IndexError)
case(
    "as_strided",
    "overlapping windows of a row (unfold's view)",
    lambda bk, A: bk.as_strided(A(X), (2, 2, 2), (3, 1, 1), 0),
    ok(F32, (2, 2, 2), [[[-2.5, -1.5], [-1.5, -0.5]], [[0.5, 1.5], [1.5, 2.5]]]),
)
case("flip", "negative axes", lambda bk, A: bk.flip(A(X), (-1,)), ok(F32, (2, 3), X[:, ::-1]))
case("flip", "axes None flips every dim", lambda bk, A: bk.flip(A(X), None), ok(F32, (2, 3), X[::-1, ::-1]))
case("flip", "a 0-d array with no axes", lambda bk, A: bk.flip(A(S), ()), ok(F32, (), 1.5))
case("flip", "an axis out of range", lambda bk, A: bk.flip(A(X), (2,)), IndexError)
case(
    "shares_memory",
    "a view and a copy",
    lambda bk, A: (
        lambda a: (bk.shares_memory(a, bk.flip(a, (0,))), bk.shares_memory(a, bk.contiguous(bk.flip(a, (0,)))))
    )(A(X)),
    (True, False),
)
case(
    "storage_offset",
    "of a view, from the memory's start",
    lambda bk, A: (lambda a: (bk.storage_offset(a), bk.storage_offset(bk.slice(a, (1, slice(1, None))))))(A(X)),
    (0, 4),
)
case(
    "as_strided",
    "a strided view of the whole memory, from a view of part of it",
    lambda bk, A: bk.as_strided(bk.slice(A(X), (1,)), (2, 2), (1, 3), 1),
    ok(F32, (2, 2), X.reshape(-1)[[[1, 4], [2, 5]]]),
)
case("as_strided", "out of the memory's bounds", lambda bk, A: bk.as_strided(A(X), (7,), (1,), 0), ShapeError)

# ---- elementwise
for op in sorted(cpu.UNARY_OPS):
    if op in ("bitwise_not", "neg", "sign"):
        continue
    # the floating point functions of bools and integers: computed in float64, cast back
    for name, array in (("bool", B), ("int64", I)):
        expected_dtype = BOOL if op == "logical_not" else dt.from_numpy_dtype(array.dtype)
        case(
            "unary",
            f"{op} of {name}",
            lambda bk, A, op=op, array=array: bk.unary(op, A(array)),
            ok(expected_dtype, (2, 3)),
        )
for op in ("sqrt", "logical_not", "relu"):
    case(
        "unary",
        f"{op} of 0-d and empty arrays",
        lambda bk, A, op=op: (bk.unary(op, A(S)), bk.unary(op, A(E))),
        (ok(BOOL if op == "logical_not" else F32, ()), ok(BOOL if op == "logical_not" else F32, (0, 3))),
    )
case(
    "unary",
    "silu of int64 is not truncated to 0/1 before the product",
    lambda bk, A: bk.unary("silu", A(np.array([3, -3]))),
    ok(I64, (2,), [2, 0]),
)
case("unary", "neg of bool", lambda bk, A: bk.unary("neg", A(B)), DTypeError)
case("unary", "bitwise_not of float32", lambda bk, A: bk.unary("bitwise_not", A(X)), DTypeError)
case("unary", "an unknown op", lambda bk, A: bk.unary("nope", A(X)), ValueError)
case("binary", "a Python float b", lambda bk, A: bk.binary("mul", A(X), 2.0, F32), ok(F32, (2, 3), X * 2))
case("binary", "a Python scalar a", lambda bk, A: bk.binary("sub", 1, A(X), F32), ok(F32, (2, 3), 1 - X))
case("binary", "a NumPy scalar b", lambda bk, A: bk.binary("add", A(I), np.int32(3), I64), ok(I64, (2, 3), I + 3))
case("binary", "a Python bool b", lambda bk, A: bk.binary("logical_and", A(B), True, BOOL), ok(BOOL, (2, 3), B))
case(
    "binary",
    "operands of other dtypes are taken in dtype",
    lambda bk, A: bk.binary("add", A(I), A(X), I64),
    ok(I64, (2, 3), I + X.astype(np.int64)),
)
case(
    "binary",
    "a float scalar taken in an integer dtype",
    lambda bk, A: bk.binary("mul", A(I), 2.5, I64),
    ok(I64, (2, 3), I * 2),
)
case("binary", "comparisons give bool", lambda bk, A: bk.binary("lt", A(X), 0, F32), ok(BOOL, (2, 3), X < 0))
case(
    "binary",
    "0-d and empty operands broadcast",
    lambda bk, A: (bk.binary("add", A(S), A(S), F32), bk.binary("add", A(E), A(np.ones(3, np.float32)), F32)),
    (ok(F32, (), 3.0), ok(F32, (0, 3))),
)
case(
    "binary",
    "float16 computed in float32",
    lambda bk, A: bk.binary("add", A(X.astype(np.float16)), 1.5, F16),
    ok(F16, (2, 3), X + 1.5),
)
case(
    "binary",
    "an int that does not fit int32",
    lambda bk, A: bk.binary("add", A(I.astype(np.int32)), 2**40, I32),
    OverflowError,
)
case("binary", "bitwise_and of float32", lambda bk, A: bk.binary("bitwise_and", A(X), A(X), F32), UnsupportedDTypeError)
case("binary", "div of int64", lambda bk, A: bk.binary("div", A(I), A(I), I64), UnsupportedDTypeError)
case("binary", "sub of bool", lambda bk, A: bk.binary("sub", A(B), True, BOOL), DTypeError)
case(
    "binary",
    "shapes that do not broadcast",
    lambda bk, A: bk.binary("add", A(X), A(np.ones(2, np.float32)), F32),
    ValueError,
)
case("binary", "integer division by zero", lambda bk, A: bk.binary("floor_divide", A(I), 0, I64), ZeroDivisionError)
case("binary", "an unknown op", lambda bk, A: bk.binary("nope", A(X), 1.0, F32), ValueError)
for op in sorted(cpu.UNARY_BACKWARD_OPS):
    needs_y = op in ("sigmoid", "tanh")
    case(
        "unary_backward",
        f"{op}: the input it does not need may be None",
        lambda bk, A, op=op, needs_y=needs_y: bk.unary_backward(
            op, None if needs_y else A(X), bk.unary(op, A(X)) if needs_y else None, A(np.ones((2, 3), np.float16))
        ),
        ok(F16, (2, 3)),
    )
    case(
        "unary_backward",
        f"{op}: the one it needs may not",
        lambda bk, A, op=op, needs_y=needs_y: bk.unary_backward(
            op, A(X) if needs_y else None, None if needs_y else bk.unary(op, A(X)), A(np.ones((2, 3), np.float32))
        ),
        ValueError,
    )
case(
    "unary_backward",
    "0-d and broadcast gradients",
    lambda bk, A: (
        bk.unary_backward("relu", A(S), None, A(S)),
        bk.unary_backward("relu", A(X), None, A(np.ones(3, np.float32))),
    ),
    (ok(F32, (), 1.5), ok(F32, (2, 3), (X > 0).astype(np.float32))),
)
case("where", "Python scalars", lambda bk, A: bk.where(A(B), 1.0, 0, F32), ok(F32, (2, 3), B.astype(np.float32)))
case(
    "where",
    "NumPy scalars and a broadcast 0-d cond",
    lambda bk, A: bk.where(A(np.array(True)), np.float32(2), np.int64(0), F32),
    ok(F32, (), 2.0),
)
case(
    "where",
    "arrays of other dtypes, in dtype",
    lambda bk, A: bk.where(A(B), A(X), A(I), I64),
    ok(I64, (2, 3), np.where(B, X.astype(np.int64), I)),
)
case("where", "an int that does not fit int32", lambda bk, A: bk.where(A(B), 2**40, 0, I32), OverflowError)
case(
    "clamp",
    "one side open",
    lambda bk, A: (bk.clamp(A(X), None, 1.0), bk.clamp(A(X), -1, None)),
    (ok(F32, (2, 3), np.minimum(X, 1)), ok(F32, (2, 3), np.maximum(X, -1))),
)
case(
    "clamp",
    "NumPy scalar bounds on integers",
    lambda bk, A: bk.clamp(A(I), np.int32(-1), np.int64(1)),
    ok(I64, (2, 3), np.clip(I, -1, 1)),
)
case("clamp", "bool arrays", lambda bk, A: bk.clamp(A(B), True, None), ok(BOOL, (2, 3), np.ones((2, 3), bool)))
case("clamp", "lo above hi gives hi", lambda bk, A: bk.clamp(A(X), 1.0, -1.0), ok(F32, (2, 3), np.full((2, 3), -1.0)))
case(
    "clamp",
    "0-d and empty",
    lambda bk, A: (bk.clamp(A(S), 0.0, 1.0), bk.clamp(A(E), 0.0, 1.0)),
    (ok(F32, (), 1.0), ok(F32, (0, 3))),
)
case(
    "clamp",
    "array bounds are the ops layer's",
    lambda bk, A: bk.clamp(A(X), A(np.zeros(3, np.float32)), None),
    DTypeError,
)
case(
    "clamp",
    "an int bound that does not fit int32",
    lambda bk, A: bk.clamp(A(I.astype(np.int32)), -(2**40), None),
    OverflowError,
)

# ---- reductions
for label, axes, shape in (
    ("None (every dim)", None, ()),
    ("()", (), (2, 3)),
    ("(1,)", (1,), (2,)),
    ("negative (-1,)", (-1,), (2,)),
    ("(-1, 0)", (-1, 0), ()),
):
    case(
        "reduce",
        f"sum over axes {label}",
        lambda bk, A, axes=axes: bk.reduce("sum", A(X), axes, False),
        ok(F32, shape, X.sum(axis=axes)),
    )
case("reduce", "keepdim with axes None", lambda bk, A: bk.reduce("amax", A(X), None, True), ok(F32, (1, 1), [[2.5]]))
case("reduce", "axes as a list", lambda bk, A: bk.reduce("prod", A(X), [0], False), ok(F32, (3,), X.prod(axis=0)))
case(
    "reduce",
    "a 0-d array over None and ()",
    lambda bk, A: (bk.reduce("sum", A(S), None, False), bk.reduce("mean", A(S), (), True)),
    (ok(F32, (), 1.5), ok(F32, (), 1.5)),
)
case("reduce", "a 0-d array has no axis 0", lambda bk, A: bk.reduce("sum", A(S), (0,), False), IndexError)
case(
    "reduce",
    "empty: sum 0, mean NaN, any False",
    lambda bk, A: (
        bk.reduce("sum", A(E), (0,), False),
        bk.reduce("mean", A(E), None, False),
        bk.reduce("any", A(E), (1,), False),
    ),
    (ok(F32, (3,), [0, 0, 0]), ok(F32, (), math.nan), ok(BOOL, (0,))),
)
case(
    "reduce",
    "result dtypes: int64 sums of bool, float64 means of ints, bool all",
    lambda bk, A: (
        bk.reduce("sum", A(B), (1,), False),
        bk.reduce("mean", A(I.astype(np.int32)), None, False),
        bk.reduce("all", A(X), (0,), False),
        bk.reduce("amax", A(I.astype(np.int32)), (1,), False),
    ),
    (ok(I64, (2,), [2, 1]), ok(F64, (), 0.5), ok(BOOL, (3,), [True] * 3), ok(I32, (2,), [0, 3])),
)
case("reduce", "an axis out of range", lambda bk, A: bk.reduce("sum", A(X), (2,), False), IndexError)
case("reduce", "a repeated axis", lambda bk, A: bk.reduce("sum", A(X), (1, -1), False), ValueError)
case("reduce", "an unknown op", lambda bk, A: bk.reduce("nope", A(X), None, False), ValueError)
for axis, keepdim, shape in ((None, False, ()), (None, True, (1, 1, 1)), (-1, False, (2, 3)), (0, True, (1, 3, 4))):
    case(
        "argreduce",
        f"argmax axis={axis} keepdim={keepdim}",
        lambda bk, A, axis=axis, keepdim=keepdim: bk.argreduce("argmax", A(X3), axis, keepdim),
        ok(I64, shape, np.argmax(X3, axis=axis, keepdims=keepdim)),
    )
case(
    "argreduce",
    "a 0-d array: axis 0 names its element",
    lambda bk, A: bk.argreduce("argmin", A(S), 0, False),
    ok(I64, (), 0),
)
case("argreduce", "an empty array", lambda bk, A: bk.argreduce("argmax", A(E), 0, False), ValueError)
case("argreduce", "an axis out of range", lambda bk, A: bk.argreduce("argmax", A(X), 2, False), IndexError)
for label, axes in (("None", None), ("(1,)", (1,)), ("negative (-1,)", (-1,)), ("(0, 2)", (0, 2))):
    case(
        "var",
        f"axes {label}",
        lambda bk, A, axes=axes: bk.var(A(X3), axes, 1, False),
        ok(F32, np.var(X3, axis=axes).shape, np.var(X3, axis=axes, ddof=1)),
    )
    case(
        "logsumexp",
        f"axes {label}, keepdim",
        lambda bk, A, axes=axes: bk.logsumexp(A(X3), axes, True),
        ok(F32, np.sum(X3, axis=axes, keepdims=True).shape, np.log(np.sum(np.exp(X3), axis=axes, keepdims=True))),
    )
case("var", "0-d with axes ()", lambda bk, A: bk.var(A(S), (), 0, False), ok(F32, (), 0.0))
case("var", "of integers", lambda bk, A: bk.var(A(I), (1,), 1, False), DTypeError)
case("logsumexp", "of integers", lambda bk, A: bk.logsumexp(A(I), None, False), DTypeError)
case(
    "logsumexp",
    "rows of -inf give -inf",
    lambda bk, A: bk.logsumexp(A(np.full((2, 2), -np.inf, np.float32)), (1,), False),
    ok(F32, (2,), [-np.inf, -np.inf]),
)
case(
    "sort",
    "negative axes, descending, stable",
    lambda bk, A: bk.sort(A(np.array([[1, 3, 1], [2, 2, 0]], np.float32)), -1, True, True),
    (ok(F32, (2, 3), [[3, 1, 1], [2, 2, 0]]), ok(I64, (2, 3), [[1, 0, 2], [0, 1, 2]])),
)
case(
    "sort",
    "axis -2 of a 3-d array",
    lambda bk, A: bk.sort(A(X3), -2, False, True),
    (ok(F32, (2, 3, 4), np.sort(X3, axis=-2)), ok(I64, (2, 3, 4), np.argsort(X3, axis=-2, kind="stable"))),
)
case(
    "sort",
    "axis None sorts the flattened array",
    lambda bk, A: bk.sort(A(X[::-1].copy()), None, False, True),
    (ok(F32, (6,), np.sort(X, axis=None)), ok(I64, (6,), np.argsort(X[::-1], axis=None, kind="stable"))),
)
case(
    "sort",
    "a 0-d array: axis 0 and -1 name its element",
    lambda bk, A: (bk.sort(A(S), 0, False, True), bk.sort(A(S), -1, True, True)),
    ((ok(F32, (), 1.5), ok(I64, (), 0)),) * 2,
)
case(
    "sort",
    "NaN sorts last ascending",
    lambda bk, A: bk.sort(A(np.array([3, np.nan, 1], np.float32)), 0, False, True),
    (ok(F32, (3,), [1, 3, np.nan]), ok(I64, (3,), [2, 0, 1])),
)
case("sort", "an axis out of range", lambda bk, A: bk.sort(A(X), 2, False, True), IndexError)
case(
    "cumsum",
    "a negative axis; int and bool give int64",
    lambda bk, A: (bk.cumsum(A(X), -1), bk.cumsum(A(B), 0), bk.cumsum(A(I.astype(np.int32)), 1)),
    (ok(F32, (2, 3), np.cumsum(X, -1)), ok(I64, (2, 3), np.cumsum(B, 0)), ok(I64, (2, 3), np.cumsum(I, 1))),
)
case(
    "cumsum",
    "axis None, of a strided view",
    lambda bk, A: bk.cumsum(bk.permute(A(X), (1, 0)), None),
    ok(F32, (6,), np.cumsum(X.T)),
)
case(
    "cumsum",
    "a 0-d array gives (1,); an empty one stays empty",
    lambda bk, A: (bk.cumsum(A(S), -1), bk.cumsum(A(E), 0)),
    (ok(F32, (1,), [1.5]), ok(F32, (0, 3))),
)
case("cumsum", "an axis out of range", lambda bk, A: bk.cumsum(A(X), 2), IndexError)

# ---- indexing and layout
case(
    "index",
    "a one-item key, negative indices, int32",
    lambda bk, A: bk.index(A(X), (A(np.array([-1, 0], np.int32)),)),
    ok(F32, (2, 3), X[[-1, 0]]),
)
case("index", "a boolean mask", lambda bk, A: bk.index(A(X), (A(B),)), ok(F32, (3,), X[B]))
case(
    "index",
    "a 0-d bool and a Python bool",
    lambda bk, A: (bk.index(A(X), (A(np.array(True)),)), bk.index(A(X), (False,))),
    (ok(F32, (1, 2, 3), X[None]), ok(F32, (0, 2, 3))),
)
case(
    "index",
    "separated index arrays go first",
    lambda bk, A: bk.index(A(X3), (A(np.array([0, 1])), slice(None), A(np.array([1, 3])))),
    ok(F32, (2, 3), X3[[0, 1], :, [1, 3]]),
)
case(
    "index",
    "an empty index and a 0-d index",
    lambda bk, A: (bk.index(A(X), (A(np.zeros(0, np.int64)),)), bk.index(A(X), (A(np.array(1)),))),
    (ok(F32, (0, 3)), ok(F32, (3,), X[1])),
)
case("index", "an index out of range", lambda bk, A: bk.index(A(X), (A(np.array([2])),)), IndexError)
case("index", "a float index", lambda bk, A: bk.index(A(X), (A(np.array([0.0])),)), IndexError)
case(
    "index_put_",
    "a scalar, returning a",
    lambda bk, A: (lambda a: (bk.index_put_(a, (A(np.array([1])),), 9.0, False) is a, a))(A(X)),
    (True, ok(F32, (2, 3), np.where([[False], [True]], 9, X))),
)
case(
    "index_put_",
    "accumulate sums duplicates",
    lambda bk, A: bk.index_put_(A(X), (A(np.array([1, 1, 0])),), A(np.ones((3, 3), np.float32)), True),
    ok(F32, (2, 3), X + [[1], [2]]),
)
case(
    "index_put_",
    "0-d values of another dtype into a strided view",
    lambda bk, A: (lambda a: (bk.index_put_(bk.permute(a, (1, 0)), (A(np.array([2])),), A(np.array(7)), False), a)[1])(
        A(X)
    ),
    ok(F32, (2, 3), np.where([False, False, True], 7, X)),
)
case("index_put_", "a mask", lambda bk, A: bk.index_put_(A(I), (A(B),), 0, True), ok(I64, (2, 3), I))
case(
    "index_put_",
    "values that do not broadcast",
    lambda bk, A: bk.index_put_(A(X), (A(np.array([0])),), A(np.ones(2, np.float32)), False),
    ValueError,
)
for axis in (1, -1):
    case(
        "gather",
        f"axis {axis}, an index larger along it",
        lambda bk, A, axis=axis: bk.gather(A(X), axis, A(np.array([[0, 2, 2, 1]] * 2))),
        ok(F32, (2, 4), np.take_along_axis(X, np.array([[0, 2, 2, 1]] * 2), 1)),
    )
    case(
        "scatter_add",
        f"axis {axis}, a larger src",
        lambda bk, A, axis=axis: bk.scatter_add(
            A(X), axis, A(np.array([[0, 0], [2, 1]])), A(np.ones((2, 5), np.float32))
        ),
        ok(F32, (2, 3), X + [[2, 0, 0], [0, 1, 1]]),
    )
case(
    "gather",
    "a 0-d input with a 0-d and a 1-d index",
    lambda bk, A: (bk.gather(A(S), 0, A(np.array(0))), bk.gather(A(S), -1, A(np.array([0, 0], np.int32)))),
    (ok(F32, (), 1.5), ok(F32, (2,), [1.5, 1.5])),
)
case(
    "gather",
    "an index larger in another dim",
    lambda bk, A: bk.gather(A(X), 1, A(np.zeros((3, 1), np.int64))),
    ShapeError,
)
case("gather", "a float index", lambda bk, A: bk.gather(A(X), 1, A(np.zeros((2, 1), np.float32))), DTypeError)
case("gather", "an index out of range", lambda bk, A: bk.gather(A(X), 1, A(np.array([[3], [0]]))), IndexError)
case(
    "scatter_add",
    "a 0-d input, index and src",
    lambda bk, A: bk.scatter_add(A(S), 0, A(np.array(0)), A(np.array(2.0, np.float32))),
    ok(F32, (), 3.5),
)
case(
    "scatter_add",
    "a src smaller than the index",
    lambda bk, A: bk.scatter_add(A(X), 1, A(np.zeros((2, 2), np.int64)), A(np.ones((2, 1), np.float32))),
    ShapeError,
)
case(
    "cat",
    "a negative axis, a tuple, an empty member",
    lambda bk, A: bk.cat((A(X), A(E.reshape(2, 0)), A(X)), -1),
    ok(F32, (2, 6), np.concatenate([X, X], 1)),
)
case("cat", "one array is a copy", lambda bk, A: (lambda a: bk.shares_memory(a, bk.cat([a], 0)))(A(X)), False)
case("cat", "arrays of two dtypes (the ops layer converts)", lambda bk, A: bk.cat([A(X), A(I)], 0), DTypeError)
case("cat", "0-d arrays", lambda bk, A: bk.cat([A(S), A(S)], 0), ValueError)
case("cat", "an axis out of range", lambda bk, A: bk.cat([A(X)], 2), IndexError)
case(
    "tril",
    "k positive, negative, far out",
    lambda bk, A: (bk.tril(A(X3), 1), bk.tril(A(X3), -5), bk.tril(A(I), 10**12)),
    (ok(F32, (2, 3, 4), np.tril(X3, 1)), ok(F32, (2, 3, 4), np.zeros_like(X3)), ok(I64, (2, 3), I)),
)
case(
    "triu",
    "bool and empty",
    lambda bk, A: (bk.triu(A(B), 0), bk.triu(A(E), -1)),
    (ok(BOOL, (2, 3), np.triu(B)), ok(F32, (0, 3))),
)
case("tril", "a vector", lambda bk, A: bk.tril(A(X[0]), 0), ValueError)
case("triu", "a 0-d array", lambda bk, A: bk.triu(A(S), 0), ValueError)

# ---- linear algebra
case(
    "matmul",
    "broadcast batch dims, a transposed operand",
    lambda bk, A: bk.matmul(A(X3), bk.permute(A(X3[:1]), (0, 2, 1))),
    ok(F32, (2, 3, 3), X3 @ X3[:1].transpose(0, 2, 1)),
)
case(
    "matmul", "in a's dtype", lambda bk, A: bk.matmul(A(X.astype(np.float64)), A(X.T.copy())), ok(F64, (2, 2), X @ X.T)
)
case(
    "matmul",
    "an empty inner dim gives zeros",
    lambda bk, A: bk.matmul(A(np.zeros((2, 0), np.float32)), A(np.zeros((0, 3), np.float32))),
    ok(F32, (2, 3), np.zeros((2, 3))),
)
case(
    "matmul",
    "the epilogue: a bias, gelu_tanh, the pre-activation",
    lambda bk, A: bk.matmul(A(X), A(X.T.copy()), A(np.array([0.5, -0.5], np.float32)), "gelu_tanh", True),
    (ok(F32, (2, 2)), ok(F32, (2, 2), X @ X.T + [0.5, -0.5])),
)
case(
    "matmul",
    "a bias of another shape",
    lambda bk, A: bk.matmul(A(X), A(X.T.copy()), A(np.zeros(3, np.float32))),
    ShapeError,
)
case(
    "matmul",
    "save_preactivation without a bias or an activation",
    lambda bk, A: bk.matmul(A(X), A(X.T.copy()), None, None, True),
    (ok(F32, (2, 2), X @ X.T), ok(F32, (2, 2), X @ X.T)),
)
VEC = np.array([1.0, -2.0, 0.5], np.float32)
case("matmul", "a vector b: the matrix-vector product", lambda bk, A: bk.matmul(A(X), A(VEC)), ok(F32, (2,), X @ VEC))
case(
    "matmul",
    "a vector b in float16",
    lambda bk, A: bk.matmul(A(X.astype(np.float16)), A(VEC.astype(np.float16))),
    ok(F16, (2,), X @ VEC),
)
case(
    "matmul",
    "a strided vector b, broadcast over a's batch dims",
    lambda bk, A: bk.matmul(A(X3), bk.slice(A(np.arange(8, dtype=np.float32)), (slice(None, None, 2),))),
    ok(F32, (2, 3), X3 @ np.arange(0, 8, 2, dtype=np.float32)),
)
case("matmul", "a vector b with an epilogue", lambda bk, A: bk.matmul(A(X), A(VEC), A(VEC[:1])), ShapeError)
case("matmul", "a vector b that does not multiply", lambda bk, A: bk.matmul(A(X), A(VEC[:2])), ShapeError)
case(
    "matmul",
    "a vector a (the ops layer unsqueezes)",
    lambda bk, A: bk.matmul(A(np.ones(3, np.float32)), A(X.T.copy())),
    ShapeError,
)
case("matmul", "shapes that do not multiply", lambda bk, A: bk.matmul(A(X), A(X)), ShapeError)
PAIRS = np.array([[0.0, 1.0, -2.0], [3.0, 1.0, 2.0], [0.0, -1.0, -2.0]], np.float32)  # rows 0 and 2 differ by 1 place


def _pair_norms(x, p):
    diffs = [x[i] - x[j] for i in range(len(x)) for j in range(i + 1, len(x))]
    return [np.count_nonzero(d) if p == 0 else np.sum(np.abs(d) ** p) ** (1 / p) for d in diffs]


for p in (0.0, 1.0, 2.0, 3.5):
    case(
        "pdist",
        f"p={p}: the pairs in row-major order",
        lambda bk, A, p=p: bk.pdist(A(PAIRS), p),
        ok(F32, (3,), _pair_norms(PAIRS, p)),
    )
case(
    "pdist",
    "float64, a strided matrix, float16 (computed in fp32)",
    lambda bk, A: (
        bk.pdist(bk.permute(A(PAIRS.T.astype(np.float64).copy()), (1, 0)), 2.0),
        bk.pdist(A(PAIRS.astype(np.float16)), 1.0),
    ),
    (ok(F64, (3,), _pair_norms(PAIRS, 2.0)), ok(F16, (3,), _pair_norms(PAIRS, 1.0))),
)
case(
    "pdist",
    "one row, no rows: no pairs",
    lambda bk, A: (bk.pdist(A(PAIRS[:1]), 2.0), bk.pdist(A(PAIRS[:0]), 2.0)),
    (ok(F32, (0,)), ok(F32, (0,))),
)
case(
    "pdist",
    "inf - inf is NaN, which p = 0 gives as PyTorch",
    lambda bk, A: bk.pdist(A(np.array([[np.inf, 1.0], [np.inf, 1.0]], np.float32)), 0.0),
    ok(F32, (1,), [np.nan]),
)
case("pdist", "a vector", lambda bk, A: bk.pdist(A(VEC), 2.0), ShapeError)
for p in (0.0, 1.0, 2.0, 3.5):
    case(
        "cdist",
        f"p={p}: each row of x1 to each of x2",
        lambda bk, A, p=p: bk.cdist(A(PAIRS[None]), A(PAIRS[None, :2]), p),
        ok(F32, (1, 3, 2), [[[_pair_norms(np.stack([a, b]), p)[0] for b in PAIRS[:2]] for a in PAIRS]]),
    )
case(
    "cdist",
    "batches, float64, float16 (computed in fp32), no rows",
    lambda bk, A: (
        bk.cdist(A(X3.astype(np.float64)), A(X3[:, :1].astype(np.float64)), 2.0),
        bk.cdist(A(X3.astype(np.float16)), A(X3.astype(np.float16)), 1.0),
        bk.cdist(A(X3[:, :0]), A(X3), 2.0),
    ),
    (
        ok(F64, (2, 3, 1), np.linalg.norm(X3.astype(np.float64)[:, :, None] - X3[:, None, :1], axis=-1)),
        ok(F16, (2, 3, 3)),
        ok(F32, (2, 0, 3)),
    ),
)
case("cdist", "batches that differ", lambda bk, A: bk.cdist(A(X3), A(X3[:1]), 2.0), ShapeError)
case("cdist", "two dtypes", lambda bk, A: bk.cdist(A(X3), A(X3.astype(np.float64)), 2.0), DTypeError)
case("cdist", "an infinite p", lambda bk, A: bk.cdist(A(X3), A(X3), float("inf")), ValueError)
case(
    "cross",
    "along the middle axis and the last, float64, a strided operand",
    lambda bk, A: (
        bk.cross(A(X3[:, :, :3].copy()), A(X3[:, :, 1:].copy()), 2),
        bk.cross(A(X3[:, :, :2].astype(np.float64)), bk.slice(A(X3[:, :, 2:].astype(np.float64)), (Ellipsis,)), 1),
    ),
    (
        ok(F32, (2, 3, 3), np.cross(X3[:, :, :3], X3[:, :, 1:], axis=2)),
        ok(F64, (2, 3, 2), np.cross(X3[:, :, :2].astype(np.float64), X3[:, :, 2:].astype(np.float64), axis=1)),
    ),
)
case(
    "cross",
    "integers, empty",
    lambda bk, A: (bk.cross(A(I[:, :3]), A(I[::-1].copy()), -1), bk.cross(A(E), A(E), 1)),
    (ok(I64, (2, 3), np.cross(I, I[::-1])), ok(F32, (0, 3))),
)
case("cross", "an axis not of size 3", lambda bk, A: bk.cross(A(X3), A(X3), 2), ShapeError)
case("cross", "two shapes", lambda bk, A: bk.cross(A(X), A(X[:1]), 1), ShapeError)
case("pdist", "an integer matrix", lambda bk, A: bk.pdist(A(I), 2.0), DTypeError)
case("pdist", "an infinite p (the ops layer's)", lambda bk, A: bk.pdist(A(PAIRS), float("inf")), ValueError)

# ---- fused NN primitives
for axis in (0, -1, -3):
    case(
        "softmax",
        f"axis {axis}, log and not",
        lambda bk, A, axis=axis: (bk.softmax(A(X3), axis, False), bk.softmax(A(X3), axis, True)),
        (
            ok(F32, (2, 3, 4), np.exp(X3) / np.exp(X3).sum(axis, keepdims=True)),
            ok(F32, (2, 3, 4), X3 - np.log(np.exp(X3).sum(axis, keepdims=True))),
        ),
    )
case(
    "softmax",
    "a 0-d array: axis 0 and -1",
    lambda bk, A: (bk.softmax(A(S), 0, False), bk.softmax(A(S), -1, True)),
    (ok(F32, (), 1.0), ok(F32, (), 0.0)),
)
case(
    "softmax",
    "an empty dim and an empty batch",
    lambda bk, A: (bk.softmax(A(E.T.copy()), 1, True), bk.softmax(A(E), 1, False)),
    (ok(F32, (3, 0)), ok(F32, (0, 3))),
)
case("softmax", "of integers", lambda bk, A: bk.softmax(A(I), 1, False), DTypeError)
case("softmax", "an axis out of range", lambda bk, A: bk.softmax(A(X), 2, False), IndexError)
case(
    "softmax_backward",
    "a negative axis; g's dtype",
    lambda bk, A: bk.softmax_backward(bk.softmax(A(X), -1, True), A(X.astype(np.float16)), -1, True),
    ok(F16, (2, 3)),
)
case(
    "softmax_backward",
    "a 0-d array",
    lambda bk, A: bk.softmax_backward(A(np.array(1.0, np.float32)), A(S), 0, False),
    ok(F32, (), 0.0),
)
case(
    "softmax_backward", "y and g of two shapes", lambda bk, A: bk.softmax_backward(A(X), A(X[:1]), 1, True), ShapeError
)
LOGITS = np.random.default_rng(1).standard_normal((4, 5)).astype(np.float32)
TARGET = np.array([0, 4, 2, -100])
CLASS_WEIGHT = np.linspace(0.5, 2.0, 5).astype(np.float32)
case(
    "classifier_loss",
    "int32 targets, an ignored row, label smoothing; each row's shift and log-sum",
    lambda bk, A: bk.classifier_loss(A(LOGITS), A(TARGET.astype(np.int32)), None, -100, 0.1),
    (ok(F32, (4,)), ok(F32, (4, 2))),
)
case(
    "classifier_loss",
    "float16 logits: float32 losses and statistics",
    lambda bk, A: bk.classifier_loss(A(LOGITS.astype(np.float16)), A(TARGET), None, -100, 0.0),
    (ok(F32, (4,)), ok(F32, (4, 2))),
)
case(
    "classifier_loss",
    "class weights and label smoothing",
    lambda bk, A: bk.classifier_loss(A(LOGITS), A(TARGET), A(CLASS_WEIGHT), -100, 0.2),
    (ok(F32, (4,)), ok(F32, (4, 2))),
)
case(
    "classifier_loss",
    "no rows",
    lambda bk, A: bk.classifier_loss(A(np.zeros((0, 5), np.float32)), A(np.zeros(0, np.int64)), None, -100, 0.0),
    (ok(F32, (0,)), ok(F32, (0, 2))),
)
case(
    "classifier_loss",
    "1-d logits",
    lambda bk, A: bk.classifier_loss(A(LOGITS[0]), A(np.array(0)), None, -100, 0.0),
    ShapeError,
)
case(
    "classifier_loss",
    "float targets",
    lambda bk, A: bk.classifier_loss(A(LOGITS), A(TARGET.astype(np.float32)), None, -100, 0.0),
    DTypeError,
)
case(
    "classifier_loss",
    "weights of another length",
    lambda bk, A: bk.classifier_loss(A(LOGITS), A(TARGET), A(CLASS_WEIGHT[:4]), -100, 0.0),
    ShapeError,
)
case(
    "classifier_loss_backward",
    "float16 logits and weights: the gradient in the logits' dtype",
    lambda bk, A: bk.classifier_loss_backward(
        A(LOGITS.astype(np.float16)),
        bk.classifier_loss(A(LOGITS.astype(np.float16)), A(TARGET), A(CLASS_WEIGHT), -100, 0.1)[1],
        A(TARGET),
        A(CLASS_WEIGHT),
        A(np.ones(4, np.float32)),
        -100,
        0.1,
    ),
    ok(F16, (4, 5)),
)
case(
    "nll_loss",
    "an ignored row; the mean over the counted rows, and their count",
    lambda bk, A: bk.nll_loss(A(LOGITS), A(TARGET), None, -100, "mean"),
    (ok(F32, (), -(LOGITS[0, 0] + LOGITS[1, 4] + LOGITS[2, 2]) / 3), ok(F32, (), 3.0)),
)
case(
    "nll_loss",
    "class weights, int32 targets, no reduction: an ignored row is 0",
    lambda bk, A: bk.nll_loss(A(LOGITS), A(TARGET.astype(np.int32)), A(CLASS_WEIGHT), -100, "none")[0],
    ok(
        F32,
        (4,),
        [-CLASS_WEIGHT[0] * LOGITS[0, 0], -CLASS_WEIGHT[4] * LOGITS[1, 4], -CLASS_WEIGHT[2] * LOGITS[2, 2], 0],
    ),
)
case(
    "nll_loss",
    "every row ignored: the mean is NaN",
    lambda bk, A: bk.nll_loss(A(LOGITS[:1]), A(TARGET[3:]), None, -100, "mean"),
    (ok(F32, (), np.nan), ok(F32, (), 0.0)),
)
case("nll_loss", "float targets", lambda bk, A: bk.nll_loss(A(LOGITS), A(LOGITS[:, 0]), None, -100, "sum"), DTypeError)
case("nll_loss", "an unknown reduction", lambda bk, A: bk.nll_loss(A(LOGITS), A(TARGET), None, -100, "max"), ValueError)
case(
    "multi_margin_loss",
    "p = 2, class weights, summed",
    lambda bk, A: bk.multi_margin_loss(A(LOGITS[:3]), A(TARGET[:3].copy()), 2, 0.5, A(CLASS_WEIGHT), "sum"),
    ok(F32, ()),
)
case(
    "multi_margin_loss",
    "a NaN hinge adds nothing",
    lambda bk, A: bk.multi_margin_loss(
        A(np.array([[0.0, np.nan, 0.5]], np.float32)), A(np.array([0])), 1, 1.0, None, "none"
    ),
    ok(F32, (1,), [0.5]),
)
case(
    "multi_margin_loss",
    "p = 3",
    lambda bk, A: bk.multi_margin_loss(A(LOGITS[:3]), A(TARGET[:3].copy()), 3, 1.0, None, "mean"),
    ValueError,
)
WEIGHT = np.linspace(0.5, 1.5, 4).astype(np.float32)
case(
    "layer_norm",
    "no weight or bias; statistics keep x's dims",
    lambda bk, A: bk.layer_norm(A(X3), None, None, 2, 1e-5),
    (ok(F32, (2, 3, 4)), ok(F32, (2, 1, 1), X3.mean((1, 2), keepdims=True)), ok(F32, (2, 1, 1))),
)
case(
    "layer_norm",
    "float16 statistics are float32",
    lambda bk, A: bk.layer_norm(A(X3.astype(np.float16)), A(WEIGHT.astype(np.float16)), None, 1, 1e-5),
    (ok(F16, (2, 3, 4)), ok(F32, (2, 3, 1)), ok(F32, (2, 3, 1))),
)
case(
    "layer_norm",
    "an empty batch",
    lambda bk, A: bk.layer_norm(A(np.zeros((0, 4), np.float32)), A(WEIGHT), A(WEIGHT), 1, 1e-5),
    (ok(F32, (0, 4)), ok(F32, (0, 1)), ok(F32, (0, 1))),
)
case("layer_norm", "n = 0", lambda bk, A: bk.layer_norm(A(X3), None, None, 0, 1e-5), ShapeError)
case("layer_norm", "n beyond the dims", lambda bk, A: bk.layer_norm(A(X3), None, None, 4, 1e-5), ShapeError)
case(
    "layer_norm",
    "a weight of another shape",
    lambda bk, A: bk.layer_norm(A(X3), A(WEIGHT[:3]), None, 1, 1e-5),
    ShapeError,
)
case("layer_norm", "of integers", lambda bk, A: bk.layer_norm(A(I), None, None, 1, 1e-5), DTypeError)


def layer_norm_grads(bk, A, weight):
    x = A(X3)
    w = None if weight is None else A(weight)
    _, mean, rstd = bk.layer_norm(x, w, None, 1, 1e-5)
    return bk.layer_norm_backward(A(X3 * 0.5), x, w, mean, rstd, 1)


case(
    "layer_norm_backward",
    "no weight: dweight None, dbias in g's dtype",
    lambda bk, A: layer_norm_grads(bk, A, None),
    (ok(F32, (2, 3, 4)), None, ok(F32, (4,))),
)
case(
    "layer_norm_backward",
    "dweight and dbias in the weight's dtype",
    lambda bk, A: layer_norm_grads(bk, A, WEIGHT.astype(np.float64)),
    (ok(F32, (2, 3, 4)), ok(F64, (4,)), ok(F64, (4,))),
)
case(
    "add_layer_norm",
    "the sum, its layer norm and statistics; y in x's dtype",
    lambda bk, A: bk.add_layer_norm(A(X3), A(X3 * 0.5), A(WEIGHT), A(WEIGHT), 1, 1e-5, dt.float32),
    (ok(F32, (2, 3, 4)), ok(F32, (2, 3, 4), X3 * 1.5), ok(F32, (2, 3, 1)), ok(F32, (2, 3, 1))),
)
case(
    "add_layer_norm",
    "y in float16 for float32 x (autocast's activation dtype)",
    lambda bk, A: bk.add_layer_norm(A(X3), A(X3), None, None, 2, 1e-5, dt.float16),
    (ok(F16, (2, 3, 4)), ok(F32, (2, 3, 4), X3 * 2), ok(F32, (2, 1, 1)), ok(F32, (2, 1, 1))),
)
case(
    "add_layer_norm",
    "a residual of another shape",
    lambda bk, A: bk.add_layer_norm(A(X3), A(X3[:1]), None, None, 1, 1e-5, dt.float32),
    ShapeError,
)
case(
    "add_layer_norm",
    "y narrower than a float16 x",
    lambda bk, A: bk.add_layer_norm(
        A(X3.astype(np.float16)), A(X3.astype(np.float16)), None, None, 1, 1e-5, dt.bfloat16
    ),
    DTypeError,
)
case(
    "add_layer_norm",
    "of integers",
    lambda bk, A: bk.add_layer_norm(A(I), A(I), None, None, 1, 1e-5, dt.float32),
    DTypeError,
)


def add_layer_norm_grads(bk, A, grad_sum):
    x = A(X3)
    w = A(WEIGHT)
    _, h, mean, rstd = bk.add_layer_norm(x, x, w, None, 1, 1e-5, dt.float32)
    return bk.add_layer_norm_backward(A(X3 * 0.5), None if grad_sum is None else A(grad_sum), h, w, mean, rstd, 1)


case(
    "add_layer_norm_backward",
    "without the sum's gradient: layer_norm_backward's",
    lambda bk, A: add_layer_norm_grads(bk, A, None),
    (ok(F32, (2, 3, 4)), ok(F32, (4,)), ok(F32, (4,))),
)
case(
    "add_layer_norm_backward",
    "with it, added to dx",
    lambda bk, A: add_layer_norm_grads(bk, A, X3),
    (ok(F32, (2, 3, 4)), ok(F32, (4,)), ok(F32, (4,))),
)
case(
    "add_layer_norm_backward",
    "a sum's gradient of another shape",
    lambda bk, A: add_layer_norm_grads(bk, A, X3[:1]),
    ShapeError,
)
Q = np.random.default_rng(2).standard_normal((2, 3, 4)).astype(np.float32)
K = np.random.default_rng(3).standard_normal((2, 5, 4)).astype(np.float32)
V = np.random.default_rng(4).standard_normal((2, 5, 6)).astype(np.float32)
MASK = np.random.default_rng(5).random((3, 5)) > 0.3
case(
    "attention",
    "a broadcast bool mask, causal",
    lambda bk, A: bk.attention(A(Q), A(K), A(V), A(MASK), True, 0.5),
    (ok(F32, (2, 3, 6)), ok(F32, (2, 3))),
)
case(
    "attention",
    "k and v are taken in q's dtype",
    lambda bk, A: bk.attention(A(Q), A(K.astype(np.float64)), A(V), None, False, 0.5),
    (ok(F32, (2, 3, 6)), ok(F32, (2, 3))),
)
case(
    "attention",
    "broadcast batch dims, 2-d operands",
    lambda bk, A: (
        bk.attention(A(Q), A(K[:1]), A(V[:1]), None, False, 0.5)[0],
        bk.attention(A(Q[0]), A(K[0]), A(V[0]), None, False, 0.5)[0],
    ),
    (ok(F32, (2, 3, 6)), ok(F32, (3, 6))),
)
case(
    "attention",
    "no keys: zeros, logsumexp -inf",
    lambda bk, A: bk.attention(A(Q), A(K[:, :0]), A(V[:, :0]), None, False, 0.5),
    (ok(F32, (2, 3, 6), np.zeros((2, 3, 6))), ok(F32, (2, 3), np.full((2, 3), -np.inf))),
)
case(
    "attention",
    "1-d operands",
    lambda bk, A: bk.attention(A(Q[0, 0]), A(K[0, 0]), A(V[0, 0]), None, False, 0.5),
    ShapeError,
)
case("attention", "of integers", lambda bk, A: bk.attention(A(I), A(I), A(I), None, False, 0.5), DTypeError)
case(
    "attention_backward",
    "each gradient in its input's dtype",
    lambda bk, A: (
        lambda q, k, v: bk.attention_backward(
            A(np.ones((2, 3, 6), np.float32)), q, k, v, *bk.attention(q, k, v, None, False, 0.5), None, False, 0.5
        )
    )(A(Q), A(K.astype(np.float64)), A(V)),
    (ok(F32, (2, 3, 4)), ok(F64, (2, 5, 4)), ok(F32, (2, 5, 6))),
)
case(
    "attention",
    "dropout: both backends drop the same probabilities (one Philox counter layout)",
    lambda bk, A: bk.attention(A(Q), A(K), A(V), None, True, 0.5, 0.5, 7, 2**40),
    (ok(F32, (2, 3, 6)), ok(F32, (2, 3))),
)
case(
    "attention",
    "a dropout probability outside [0, 1]",
    lambda bk, A: bk.attention(A(Q), A(K), A(V), None, False, 0.5, 1.5, 0, 0),
    ValueError,
)
case(
    "attention_backward",
    "the forward's dropout drawn again",
    lambda bk, A: (
        lambda q, k, v: bk.attention_backward(
            A(np.ones((2, 3, 6), np.float32)),
            q,
            k,
            v,
            *bk.attention(q, k, v, None, False, 0.5, 0.25, 3, 4),
            None,
            False,
            0.5,
            0.25,
            3,
            4,
        )
    )(A(Q), A(K), A(V)),
    (ok(F32, (2, 3, 4)), ok(F32, (2, 5, 4)), ok(F32, (2, 5, 6))),
)
case(
    "attention_dropout_mask",
    "a bool mask of the scores' shape; seed and offset modulo 2**64",
    lambda bk, A: (
        bk.attention_dropout_mask((2, 3, 17, 20), 0.3, -1, 2**64 + 5),
        bk.attention_dropout_mask([4, 5], 0.0, 0, 0),
    ),
    (ok(BOOL, (2, 3, 17, 20)), ok(BOOL, (4, 5), np.ones((4, 5), bool))),
)
case(
    "attention_dropout_mask",
    "fewer than 2 dims",
    lambda bk, A: bk.attention_dropout_mask((5,), 0.3, 0, 0),
    ShapeError,
)
TABLE = np.random.default_rng(6).standard_normal((5, 3)).astype(np.float32)
case(
    "embedding",
    "int32, 0-d and empty indices",
    lambda bk, A: (
        bk.embedding(A(TABLE), A(np.array([[1, 4]], np.int32))),
        bk.embedding(A(TABLE), A(np.array(3))),
        bk.embedding(A(TABLE), A(np.zeros(0, np.int64))),
    ),
    (ok(F32, (1, 2, 3), TABLE[[[1, 4]]]), ok(F32, (3,), TABLE[3]), ok(F32, (0, 3))),
)
case(
    "embedding",
    "an index out of range, negative",
    lambda bk, A: bk.embedding(A(TABLE), A(np.array([-1]))),
    IndexOutOfRangeError,
)
case("embedding", "a 1-d weight", lambda bk, A: bk.embedding(A(TABLE[0]), A(np.array([0]))), ShapeError)
GRAD = np.random.default_rng(7).standard_normal((2, 2, 3)).astype(np.float32)
case(
    "embedding_backward",
    "padding_idx and scale_grad_by_freq, NumPy scalars",
    lambda bk, A: bk.embedding_backward(
        A(GRAD.astype(np.float16)), A(np.array([[0, 4], [2, 2]])), np.int64(5), np.int64(2), np.bool_(True)
    ),
    ok(F16, (5, 3), [GRAD[0, 0], [0, 0, 0], [0, 0, 0], [0, 0, 0], GRAD[0, 1]]),
)
case(
    "embedding_backward",
    "a grad that does not fit the indices",
    lambda bk, A: bk.embedding_backward(A(GRAD[0]), A(np.array([[0, 4]] * 2)), 5, None, False),
    ShapeError,
)
case(
    "embedding_backward",
    "an integer grad",
    lambda bk, A: bk.embedding_backward(A(np.ones((2, 3), np.int64)), A(np.array([0, 1])), 5, None, False),
    DTypeError,
)

# ---- random (the CPU's and CUDA's streams differ: dtypes, shapes and ranges only)
for name in ("rand", "randn"):
    case(
        name,
        "shape as a tuple, a list, one int, ()",
        lambda bk, A, name=name: [meta(bk, getattr(bk, name)(s, F16, 1, 0)) for s in ((2, 3), [2], 3, ())],
        [("float16", (2, 3)), ("float16", (2,)), ("float16", (3,)), ("float16", ())],
    )
    case(
        name,
        "seeds and offsets modulo 2**64, NumPy integers",
        lambda bk, A, name=name: meta(bk, getattr(bk, name)((3,), F64, np.int64(-1), 2**64 + 5)),
        ("float64", (3,)),
    )
    case(name, "an integer dtype", lambda bk, A, name=name: getattr(bk, name)((3,), I64, 1, 0), DTypeError)
case(
    "rand",
    "reproducible, in [0, 1) even in float16",
    lambda bk, A: (lambda a, b: (bool(np.array_equal(a, b)), bool(a.min() >= 0), bool(a.max() < 1)))(
        np.asarray(bk.to_numpy(bk.rand((4096,), F16, 3, 7))), np.asarray(bk.to_numpy(bk.rand((4096,), F16, 3, 7)))
    ),
    (True, True, True),
)
case(
    "randint",
    "in [low, high), any dtype",
    lambda bk, A: (
        lambda r: (
            meta(bk, r),
            bool(np.asarray(bk.to_numpy(r)).min() >= -3),
            bool(np.asarray(bk.to_numpy(r)).max() < 4),
        )
    )(bk.randint(-3, 4, (1000,), I32, 0, 0)),
    (("int32", (1000,)), True, True),
)
case(
    "bernoulli",
    "p = 0 and p = 1, bool and float",
    lambda bk, A: (
        float(np.asarray(bk.to_numpy(bk.bernoulli((100,), 0.0, F32, 0, 0))).sum()),
        bool(np.asarray(bk.to_numpy(bk.bernoulli((100,), 1.0, BOOL, 0, 0))).all()),
    ),
    (0.0, True),
)


def dropped(bk, A, p, x=X):
    """dropout's (dtypes, shapes, out == x * mask / (1 - p), mask == bernoulli's)."""
    out, mask = bk.dropout(A(x), p, 9, 4)
    o, m = np.asarray(bk.to_numpy(out)).astype(np.float64), np.asarray(bk.to_numpy(mask))
    kept = np.asarray(bk.to_numpy(bk.bernoulli(x.shape, 1 - p, BOOL, 9, 4)))
    scaled = np.where(m, x.astype(np.float64) / (1 - p) if p < 1 else 0, 0)
    return meta(bk, out), meta(bk, mask), bool(np.allclose(o, scaled, rtol=1e-3)), bool(np.array_equal(m, kept))


for p in (0.0, 0.3, 1.0):
    case(
        "dropout", f"p = {p}", lambda bk, A, p=p: dropped(bk, A, p), (("float32", (2, 3)), ("bool", (2, 3)), True, True)
    )
case(
    "dropout",
    "0-d and float16",
    lambda bk, A: (dropped(bk, A, 0.5, S), dropped(bk, A, 0.5, X.astype(np.float16))[0]),
    ((("float32", ()), ("bool", ()), True, True), ("float16", (2, 3))),
)
case("dropout", "p outside [0, 1]", lambda bk, A: bk.dropout(A(X), 1.5, 0, 0), ValueError)
case("dropout", "of integers", lambda bk, A: bk.dropout(A(I), 0.5, 0, 0), DTypeError)
case(
    "dropout_backward",
    "g * mask * scale: NaN stays NaN, dropped or not (as in PyTorch)",
    lambda bk, A: bk.dropout_backward(
        A(np.array([np.nan, np.nan, 2, 2], np.float32)), A(np.array([True, False, True, False])), 2.0
    ),
    ok(F32, (4,), [np.nan, np.nan, 4, 0]),
)
case(
    "dropout_backward",
    "a gradient and a mask of two shapes",
    lambda bk, A: bk.dropout_backward(A(X), A(B[:1]), 2.0),
    ShapeError,
)
case("dropout_backward", "an integer gradient", lambda bk, A: bk.dropout_backward(A(I), A(B), 2.0), DTypeError)

# ---- optimizers and loss scaling
P = np.linspace(-1, 1, 6).astype(np.float32).reshape(2, 3)
G = np.linspace(0.5, -0.5, 6).astype(np.float32).reshape(2, 3)


def sgd(bk, A, momentum=0.9, first_step=True, masters=False):
    p, g, buf = A(P.astype(np.float16) if masters else P), A(G), A(np.full((2, 3), 0.1, np.float32))
    master = [A(P)] if masters else None
    result = bk.sgd_step_((p,), [g], [buf] if momentum else None, 0.1, momentum, 0.1, True, 0.01, first_step, master)
    return (result, p, buf) + ((master[0],) if masters else ())


case(
    "sgd_step_",
    "momentum, first and later steps (tuples and lists)",
    lambda bk, A: (sgd(bk, A), sgd(bk, A, first_step=False)),
    ((None, ok(F32, (2, 3)), ok(F32, (2, 3))),) * 2,
)
case(
    "sgd_step_",
    "float16 params through float32 masters",
    lambda bk, A: sgd(bk, A, masters=True),
    (None, ok(F16, (2, 3)), ok(F32, (2, 3)), ok(F32, (2, 3))),
)
case("sgd_step_", "no momentum, bufs None", lambda bk, A: sgd(bk, A, momentum=0.0)[:2], (None, ok(F32, (2, 3))))
case(
    "sgd_step_",
    "momentum without buffers",
    lambda bk, A: bk.sgd_step_([A(P)], [A(G)], None, 0.1, 0.9, 0, False, 0, True),
    ValueError,
)
case(
    "sgd_step_",
    "a non-contiguous parameter",
    lambda bk, A: bk.sgd_step_([bk.permute(A(P), (1, 0))], [A(G.T.copy())], None, 0.1, 0, 0, False, 0, True),
    ValueError,
)
case(
    "sgd_step_",
    "an integer parameter",
    lambda bk, A: bk.sgd_step_([A(I)], [A(G)], None, 0.1, 0, 0, False, 0, True),
    DTypeError,
)
case(
    "sgd_step_",
    "a gradient of another size",
    lambda bk, A: bk.sgd_step_([A(P)], [A(G[0])], None, 0.1, 0, 0, False, 0, True),
    ValueError,
)
case("sgd_step_", "no tensors", lambda bk, A: bk.sgd_step_([], [], [], 0.1, 0.9, 0, False, 0, True), None)


def adam(bk, A, amsgrad=False, step=3):
    p, g, m, v = (
        A(P),
        A(G.astype(np.float64)[:, ::-1].copy().astype(np.float32)),
        A(np.full((2, 3), 0.1, np.float32)),
        A(np.full((2, 3), 0.2, np.float32)),
    )
    maxes = [A(np.full((2, 3), 0.3, np.float32))] if amsgrad else None
    bk.adam_step_([p], [bk.flip(g, (1,))], [m], [v], step, 0.01, 0.9, 0.999, 1e-8, 0.1, True, None, maxes)
    return (p, m, v) + (tuple(maxes) if amsgrad else ())


case(
    "adam_step_",
    "AdamW with a strided gradient, a NumPy step",
    lambda bk, A: adam(bk, A, step=np.int64(3)),
    (ok(F32, (2, 3)),) * 3,
)
case("adam_step_", "AMSGrad", lambda bk, A: adam(bk, A, amsgrad=True), (ok(F32, (2, 3)),) * 4)
case("adam_step_", "step 0 (steps count from 1)", lambda bk, A: adam(bk, A, step=0), ValueError)
for norm_type in (2, 1, 3.5, math.inf):
    case(
        "global_norm",
        f"norm {norm_type} over arrays of any layout, -> 0-d float32",
        lambda bk, A, norm_type=norm_type: bk.global_norm([A(X), bk.permute(A(P), (1, 0)), A(S)], norm_type),
        ok(F32, (), np.linalg.norm(np.concatenate([X.ravel(), P.ravel(), [1.5]]), norm_type)),
    )
case(
    "global_norm",
    "no arrays, empty arrays, float64",
    lambda bk, A: (bk.global_norm([], 2), bk.global_norm([A(E), A(X.astype(np.float64))], 2)),
    (ok(F32, (), 0.0), ok(F64, (), np.linalg.norm(X))),
)
case(
    "global_norm",
    "NaN and inf propagate",
    lambda bk, A: (
        bk.global_norm([A(np.array([1, np.inf], np.float32))], 2),
        bk.global_norm([A(np.array([np.nan, np.inf], np.float32))], math.inf),
    ),
    (ok(F32, (), np.inf), ok(F32, (), np.nan)),
)
case("global_norm", "norm_type 0", lambda bk, A: bk.global_norm([A(X)], 0), ValueError)
case("global_norm", "integers", lambda bk, A: bk.global_norm([A(I)], 2), DTypeError)


def unscaled(bk, A, inv_scale, grad=G, out_dtype=None):
    g = A(grad)
    out = g if out_dtype is None else A(np.zeros(grad.shape, out_dtype))
    return bk.unscale_and_check_([out], [g], inv_scale(bk, A) if callable(inv_scale) else inv_scale), out


case(
    "unscale_and_check_",
    "a Python, a NumPy and a 0-d device scale",
    lambda bk, A: (
        unscaled(bk, A, 0.5),
        unscaled(bk, A, np.float32(0.5)),
        unscaled(bk, A, lambda bk, A: A(np.array([0.5], np.float32))),
    ),
    ((ok(F32, (), 0.0), ok(F32, (2, 3), G * 0.5)),) * 3,
)
case(
    "unscale_and_check_",
    "inf and NaN are found",
    lambda bk, A: (
        unscaled(bk, A, 0.5, np.array([1, np.inf], np.float32))[0],
        unscaled(bk, A, 0.5, np.array([np.nan], np.float16), np.float32),
    ),
    (ok(F32, (), 1.0), (ok(F32, (), 1.0), ok(F32, (1,), [np.nan]))),
)
case("unscale_and_check_", "no tensors", lambda bk, A: bk.unscale_and_check_([], [], 0.5), ok(F32, (), 0.0))
case(
    "unscale_and_check_",
    "an output per gradient",
    lambda bk, A: bk.unscale_and_check_([A(X)], [A(X), A(X)], 0.5),
    ValueError,
)
case("unscale_and_check_", "integer gradients", lambda bk, A: unscaled(bk, A, 0.5, I), DTypeError)


def scale_update(bk, A, found, tracker, scale=1024.0, shape=()):
    s, t = A(np.full(shape, scale, np.float32)), A(np.full(shape, tracker, np.int32))
    return bk.update_scale_(s, t, A(np.full(shape, found)), 2.0, 0.5, 2, 1.0, 2.0**24), s, t


case(
    "update_scale_",
    "back off, grow, count",
    lambda bk, A: (scale_update(bk, A, 1.0, 1), scale_update(bk, A, False, 1), scale_update(bk, A, np.float32(0), 0)),
    (
        (None, ok(F32, (), 512), ok(I32, (), 0)),
        (None, ok(F32, (), 2048), ok(I32, (), 0)),
        (None, ok(F32, (), 1024), ok(I32, (), 1)),
    ),
)
case(
    "update_scale_",
    "one-element arrays of shape (1,), clamped to max_scale",
    lambda bk, A: scale_update(bk, A, 0.0, 1, 2.0**24, (1,)),
    (None, ok(F32, (1,), [2.0**24]), ok(I32, (1,), [0])),
)

# names helper (issue 15): cumprod, scatter_reduce
case(
    "cumprod",
    "a negative axis; int and bool give int64; a zero stops the product",
    lambda bk, A: (
        bk.cumprod(A(np.array([[1.5, -2, 0, 3]], np.float32)), -1),
        bk.cumprod(A(B), 0),
        bk.cumprod(A(I.astype(np.int32)), 1),
    ),
    (ok(F32, (1, 4), [[1.5, -3, 0, 0]]), ok(I64, (2, 3), np.cumprod(B, 0)), ok(I64, (2, 3), np.cumprod(I, 1))),
)
case(
    "cumprod",
    "axis None, of a strided view; a 0-d array gives shape (1,)",
    lambda bk, A: (bk.cumprod(bk.permute(A(X), (1, 0)), None), bk.cumprod(A(S), 0)),
    (ok(F32, (6,), np.cumprod(X.T)), ok(F32, (1,), [1.5])),
)
case("cumprod", "an axis out of range", lambda bk, A: bk.cumprod(A(X), 2), IndexError)
NAN_ROW = np.array([[1.0, 3.0, np.nan, 2.0], [2.0, 2.0, -1.0, 5.0]], np.float32)
case(
    "scan",
    "max and min: NaN propagates; integers and bool keep their dtype; a negative axis",
    lambda bk, A: (
        bk.scan("max", A(NAN_ROW), -1),
        bk.scan("min", A(NAN_ROW), 1),
        bk.scan("min", A(I.astype(np.int32)), 1),
        bk.scan("max", A(B), 0),
    ),
    (
        ok(F32, (2, 4), [[1, 3, np.nan, np.nan], [2, 2, 2, 5]]),
        ok(F32, (2, 4), [[1, 1, np.nan, np.nan], [2, 2, -1, -1]]),
        ok(I32, (2, 3), np.minimum.accumulate(I, 1)),
        ok(BOOL, (2, 3), np.maximum.accumulate(B, 0)),
    ),
)
case(
    "scan",
    "logaddexp of float64 (infinities stay), of a strided view along axis 0; a 0-d array",
    lambda bk, A: (
        bk.scan("logaddexp", A(np.array([-np.inf, 0.0, -np.inf, np.inf])), 0),
        bk.scan("logaddexp", bk.permute(A(X), (1, 0)), 0),
        bk.scan("max", A(S), 0),
    ),
    (
        ok(F64, (4,), [-np.inf, 0.0, 0.0, np.inf]),
        ok(F32, (3, 2), np.logaddexp.accumulate(X.T, 0)),
        ok(F32, (), 1.5),
    ),
)
case("scan", "logaddexp of integers", lambda bk, A: bk.scan("logaddexp", A(I), 0), DTypeError)
case("scan", "an unknown op", lambda bk, A: bk.scan("sum", A(X), 0), ValueError)
case("scan", "an axis out of range", lambda bk, A: bk.scan("max", A(X), 2), IndexError)
TIES = np.array([[1.0, np.nan, 2.0, np.nan], [-0.0, 0.0, -0.0, 1.0]], np.float32)
case(
    "running_extreme",
    "PyTorch's cummax/cummin: a later equal value wins (its zero's sign); NaN propagates, the last NaN's index",
    lambda bk, A: (bk.running_extreme("max", A(TIES), -1), bk.running_extreme("min", A(TIES), 1)),
    (
        (
            ok(F32, (2, 4), [[1, np.nan, np.nan, np.nan], [-0.0, 0.0, -0.0, 1]]),
            ok(I64, (2, 4), [[0, 1, 1, 3], [0, 1, 2, 3]]),
        ),
        (
            ok(F32, (2, 4), [[1, np.nan, np.nan, np.nan], [-0.0, 0.0, -0.0, -0.0]]),
            ok(I64, (2, 4), [[0, 1, 1, 3], [0, 1, 2, 2]]),
        ),
    ),
)
case(
    "running_extreme",
    "integers along axis 0, float16, a strided view, bool; a 0-d array is its own",
    lambda bk, A: (
        bk.running_extreme("max", A(I.astype(np.int32)[::-1]), 0),
        bk.running_extreme("min", A(X.astype(np.float16)), 1),
        bk.running_extreme("min", bk.permute(A(X), (1, 0)), 1),
        bk.running_extreme("max", A(B), 1),
        bk.running_extreme("min", A(S), 0),
    ),
    (
        (ok(I32, (2, 3), [[1, 2, 3], [1, 2, 3]]), ok(I64, (2, 3), [[0, 0, 0], [0, 0, 0]])),
        (ok(F16, (2, 3), [[-2.5, -2.5, -2.5], [0.5, 0.5, 0.5]]), ok(I64, (2, 3), [[0, 0, 0], [0, 0, 0]])),
        (ok(F32, (3, 2), [[-2.5, -2.5], [-1.5, -1.5], [-0.5, -0.5]]), ok(I64, (3, 2), [[0, 0], [0, 0], [0, 0]])),
        (ok(BOOL, (2, 3), [[True, True, True], [False, False, True]]), ok(I64, (2, 3), [[0, 0, 2], [0, 1, 2]])),
        (ok(F32, (), 1.5), ok(I64, (), 0)),
    ),
)
case("running_extreme", "an unknown op", lambda bk, A: bk.running_extreme("sum", A(X), 0), ValueError)
case("running_extreme", "an axis out of range", lambda bk, A: bk.running_extreme("max", A(X), 2), IndexError)
EDGES = np.array([-1.5, 0.5, 0.5, 2.0], np.float32)
case(
    "searchsorted",
    "1-d boundaries: before (after, right) equal ones; values of any shape, 0-d too; a NaN value goes last",
    lambda bk, A: (
        bk.searchsorted(A(EDGES), A(np.array([[-2.0, 0.5], [np.nan, 3.0]], np.float32)), False),
        bk.searchsorted(A(EDGES), A(np.array([0.5, -1.5, np.nan], np.float32)), True),
        bk.searchsorted(A(EDGES), A(np.array(1.0, np.float32)), False),
    ),
    (ok(I64, (2, 2), [[0, 1], [4, 4]]), ok(I64, (3,), [3, 1, 4]), ok(I64, (), 3)),
)
case(
    "searchsorted",
    "rows of boundaries, each searched by its row of values (int64, float64 with a NaN)",
    lambda bk, A: (
        bk.searchsorted(A(np.array([[1, 3, 5], [0, 0, 9]])), A(np.array([[3, 6], [0, 10]])), False),
        bk.searchsorted(A(np.array([[1.0, 3.0], [2.0, 4.0]])), A(np.array([[3.0, np.nan], [1.0, 4.0]])), True),
    ),
    (ok(I64, (2, 2), [[1, 3], [0, 3]]), ok(I64, (2, 2), [[2, 2], [0, 2]])),
)
case("searchsorted", "0-d boundaries", lambda bk, A: bk.searchsorted(A(S), A(X), False), ShapeError)
case(
    "bincount",
    "counts of each slot, the unused ones 0; no slots at all",
    lambda bk, A: (bk.bincount(A(np.array([3, 0, 3, 1])), 6), bk.bincount(A(np.zeros(0, np.int64)), 2)),
    (ok(I64, (6,), [1, 1, 0, 2, 0, 0]), ok(I64, (2,), [0, 0])),
)
case("bincount", "2-d slots", lambda bk, A: bk.bincount(A(np.zeros((2, 2), np.int64)), 2), ShapeError)
for reduce, combine in (("prod", np.multiply), ("amax", np.maximum), ("amin", np.minimum)):
    case(
        "scatter_reduce",
        f"{reduce} with duplicates, with and without the input's own values",
        lambda bk, A, reduce=reduce: (
            bk.scatter_reduce(
                A(X), 1, A(np.array([[0, 0], [2, 1]])), A(np.array([[2, -3, 9], [4, 5, 9]], np.float32)), reduce, True
            ),
            bk.scatter_reduce(
                A(X), 1, A(np.array([[0, 0], [2, 1]])), A(np.array([[2, -3, 9], [4, 5, 9]], np.float32)), reduce, False
            ),
        ),
        (
            ok(
                F32,
                (2, 3),
                [
                    [combine(combine(X[0, 0], 2), -3), X[0, 1], X[0, 2]],
                    [X[1, 0], combine(X[1, 1], 5), combine(X[1, 2], 4)],
                ],
            ),
            ok(F32, (2, 3), [[combine(2, -3), X[0, 1], X[0, 2]], [X[1, 0], 5, 4]]),
        ),
    )
case(
    "scatter_reduce",
    "int64 and bool arrays, a NaN that propagates",
    lambda bk, A: (
        bk.scatter_reduce(A(I), 0, A(np.array([[1, 1, 0]])), A(np.array([[7, -7, 2]])), "amax", True),
        bk.scatter_reduce(A(B), 0, A(np.array([[0, 1, 1]])), A(np.ones((1, 3), bool)), "amin", False),
        bk.scatter_reduce(A(X), 0, A(np.array([[1, 0, 0]])), A(np.array([[np.nan, 1, 1]], np.float32)), "amax", True),
    ),
    (
        ok(I64, (2, 3), [[I[0, 0], I[0, 1], max(I[0, 2], 2)], [max(I[1, 0], 7), I[1, 1], I[1, 2]]]),
        ok(BOOL, (2, 3), [[True, B[0, 1], B[0, 2]], [B[1, 0], True, True]]),
        ok(F32, (2, 3), [[X[0, 0], max(X[0, 1], 1), max(X[0, 2], 1)], [np.nan, X[1, 1], X[1, 2]]]),
    ),
)
case(
    "scatter_reduce",
    "an unknown reduce",
    lambda bk, A: bk.scatter_reduce(
        A(X), 1, A(np.zeros((2, 1), np.int64)), A(np.ones((2, 1), np.float32)), "sum", True
    ),
    ValueError,
)
case(
    "scatter_reduce",
    "a src smaller than the index",
    lambda bk, A: bk.scatter_reduce(
        A(X), 1, A(np.zeros((2, 2), np.int64)), A(np.ones((2, 1), np.float32)), "amax", True
    ),
    ShapeError,
)


# ---------------------------------------------------------------------------------------------
# convolution and pooling (issue 15)
CX = np.random.default_rng(8).standard_normal((2, 4, 5, 6)).astype(np.float32)
CW = np.random.default_rng(9).standard_normal((6, 2, 3, 2)).astype(np.float32)
CONV_ARGS = ((2, 1), (1, 0), (1, 2), 2)  # stride, padding, dilation, groups: output (2, 6, 3, 4)
case("conv2d", "strided, dilated, grouped", lambda bk, A: bk.conv2d(A(CX), A(CW), *CONV_ARGS), ok(F32, (2, 6, 3, 4)))
case("conv2d", "an empty batch", lambda bk, A: bk.conv2d(A(CX[:0]), A(CW), *CONV_ARGS), ok(F32, (0, 6, 3, 4)))
case(
    "conv2d",
    "float16 in, float16 out",
    lambda bk, A: bk.conv2d(A(CX.astype(np.float16)), A(CW.astype(np.float16)), *CONV_ARGS),
    ok(F16, (2, 6, 3, 4)),
)
case(
    "conv2d",
    "channels not divisible by groups",
    lambda bk, A: bk.conv2d(A(CX), A(CW), (1, 1), (0, 0), (1, 1), 3),
    ShapeError,
)
case(
    "conv2d",
    "a kernel larger than the padded input",
    lambda bk, A: bk.conv2d(A(CX[:, :, :2]), A(CW), (1, 1), (0, 0), (1, 1), 2),
    ShapeError,
)
case("conv2d", "dtypes differ", lambda bk, A: bk.conv2d(A(CX), A(CW.astype(np.float64)), *CONV_ARGS), DTypeError)
CG = np.random.default_rng(10).standard_normal((2, 6, 3, 4)).astype(np.float32)
case(
    "conv2d_backward_input",
    "back to the input's shape",
    lambda bk, A: bk.conv2d_backward_input(A(CG), A(CW), (2, 4, 5, 6), *CONV_ARGS),
    ok(F32, (2, 4, 5, 6)),
)
case(
    "conv2d_backward_input",
    "a grad of the wrong shape",
    lambda bk, A: bk.conv2d_backward_input(A(CG[:, :5]), A(CW), (2, 4, 5, 6), *CONV_ARGS),
    ShapeError,
)
case(
    "conv2d_backward_weight",
    "summed over the batch",
    lambda bk, A: bk.conv2d_backward_weight(A(CG), A(CX), (6, 2, 3, 2), *CONV_ARGS),
    ok(F32, (6, 2, 3, 2)),
)
case(
    "conv2d_backward_weight",
    "an empty batch gives zeros",
    lambda bk, A: bk.conv2d_backward_weight(A(CG[:0]), A(CX[:0]), (6, 2, 3, 2), *CONV_ARGS),
    ok(F32, (6, 2, 3, 2), np.zeros((6, 2, 3, 2))),
)
PX = np.array([[[[1, 5, 2], [7, np.nan, 0], [3, 3, 4]]]], np.float32)
case(
    "max_pool2d",
    "NaN wins, ties go first, padded windows past the end",
    lambda bk, A: bk.max_pool2d(A(PX), (2, 2), (2, 2), (1, 1), (1, 1), (2, 2)),
    (ok(F32, (1, 1, 2, 2), [[[[1, 5], [7, np.nan]]]]), ok(I64, (1, 1, 2, 2), [[[[0, 1], [3, 4]]]])),
)
case(
    "max_pool2d",
    "integers",
    lambda bk, A: bk.max_pool2d(A(np.arange(16).reshape(1, 1, 4, 4)), (2, 2), (2, 2), (0, 0), (1, 1), (2, 2)),
    (ok(I64, (1, 1, 2, 2), [[[[5, 7], [13, 15]]]]), ok(I64, (1, 1, 2, 2), [[[[5, 7], [13, 15]]]])),
)
case(
    "max_pool2d", "a 3-d input", lambda bk, A: bk.max_pool2d(A(X3), (2, 2), (2, 2), (0, 0), (1, 1), (1, 2)), ShapeError
)
case(
    "adaptive_max_pool2d",
    "overlapping windows",
    lambda bk, A: bk.adaptive_max_pool2d(A(np.nan_to_num(PX)), (2, 2)),
    (ok(F32, (1, 1, 2, 2), [[[[7, 5], [7, 4]]]]), ok(I64, (1, 1, 2, 2), [[[[3, 1], [3, 8]]]])),
)
case(
    "max_pool2d_backward",
    "repeated indices add up",
    lambda bk, A: bk.max_pool2d_backward(
        A(np.ones((1, 1, 2, 2), np.float32)), A(np.array([[[[3, 1], [3, 8]]]])), (1, 1, 3, 3)
    ),
    ok(F32, (1, 1, 3, 3), [[[[0, 1, 0], [2, 0, 0], [0, 0, 1]]]]),
)
case(
    "max_pool2d_backward",
    "indices of another shape",
    lambda bk, A: bk.max_pool2d_backward(
        A(np.ones((1, 1, 2, 2), np.float32)), A(np.zeros((1, 1, 4), np.int64)), (1, 1, 3, 3)
    ),
    ShapeError,
)


# batch norm and recurrent cells (issue 15)
case(
    "batch_norm",
    "per-channel statistics of shape (C,)",
    lambda bk, A: bk.batch_norm(A(X3), A(WEIGHT[:3]), A(WEIGHT[:3]), 1e-5),
    (ok(F32, (2, 3, 4)), ok(F32, (3,), X3.mean((0, 2))), ok(F32, (3,))),
)
case(
    "batch_norm",
    "float16 statistics are float32; 2-D input",
    lambda bk, A: bk.batch_norm(A(X.astype(np.float16)), None, None, 1e-5),
    (ok(F16, (2, 3)), ok(F32, (3,)), ok(F32, (3,))),
)
case("batch_norm", "a 1-D input", lambda bk, A: bk.batch_norm(A(X[0]), None, None, 1e-5), ShapeError)
case("batch_norm", "a weight of another shape", lambda bk, A: bk.batch_norm(A(X3), A(WEIGHT), None, 1e-5), ShapeError)
case("batch_norm", "of integers", lambda bk, A: bk.batch_norm(A(I), None, None, 1e-5), DTypeError)


def batch_norm_grads(bk, A, weight):
    x = A(X3)
    w = None if weight is None else A(weight)
    _, mean, rstd = bk.batch_norm(x, w, None, 1e-5)
    return bk.batch_norm_backward(A(X3 * 0.5), x, w, mean, rstd)


case(
    "batch_norm_backward",
    "no weight: dweight None, dbias in g's dtype",
    lambda bk, A: batch_norm_grads(bk, A, None),
    (ok(F32, (2, 3, 4)), None, ok(F32, (3,))),
)
case(
    "batch_norm_backward",
    "dweight and dbias in the weight's dtype",
    lambda bk, A: batch_norm_grads(bk, A, WEIGHT[:3].astype(np.float64)),
    (ok(F32, (2, 3, 4)), ok(F64, (3,)), ok(F64, (3,))),
)
GATES4 = np.random.default_rng(20).standard_normal((3, 8)).astype(np.float32)
GATES3 = np.random.default_rng(21).standard_normal((3, 6)).astype(np.float32)
STATE = np.random.default_rng(22).standard_normal((3, 2)).astype(np.float32)
case(
    "lstm_cell",
    "hc stacks h' and c'",
    lambda bk, A: bk.lstm_cell(A(GATES4), A(GATES4 * 0.5), A(STATE)),
    ok(F32, (2, 3, 2)),
)
case(
    "lstm_cell",
    "float16 in, float16 out; an empty batch",
    lambda bk, A: (
        bk.lstm_cell(A(GATES4.astype(np.float16)), A(GATES4.astype(np.float16)), A(STATE.astype(np.float16))),
        bk.lstm_cell(A(GATES4[:0]), A(GATES4[:0]), A(STATE[:0])),
    ),
    (ok(F16, (2, 3, 2)), ok(F32, (2, 0, 2))),
)
case("lstm_cell", "gates not 4H wide", lambda bk, A: bk.lstm_cell(A(GATES3), A(GATES3), A(STATE)), ShapeError)
case("lstm_cell", "of integers", lambda bk, A: bk.lstm_cell(A(I), A(I), A(I[:, :1])), DTypeError)


def lstm_cell_grads(bk, A):
    gi, gh, c = A(GATES4), A(GATES4 * 0.5), A(STATE)
    hc = bk.lstm_cell(gi, gh, c)
    return bk.lstm_cell_backward(A(np.ones((2, 3, 2), np.float32)), gi, gh, c, hc)


case("lstm_cell_backward", "-> (d_gates, d_c)", lstm_cell_grads, (ok(F32, (3, 8)), ok(F32, (3, 2))))
case("gru_cell", "the new state", lambda bk, A: bk.gru_cell(A(GATES3), A(GATES3 * 0.5), A(STATE)), ok(F32, (3, 2)))
case(
    "gru_cell",
    "a hidden projection of another shape",
    lambda bk, A: bk.gru_cell(A(GATES3), A(GATES4), A(STATE)),
    ShapeError,
)
case(
    "gru_cell_backward",
    "-> (d_gi, d_gh, d_h)",
    lambda bk, A: bk.gru_cell_backward(A(STATE), A(GATES3), A(GATES3 * 0.5), A(STATE)),
    (ok(F32, (3, 6)), ok(F32, (3, 6)), ok(F32, (3, 2))),
)

LAYER_X = np.random.default_rng(23).standard_normal((4, 3, 5)).astype(np.float32)
LAYER_W_IH = np.random.default_rng(26).standard_normal((8, 5)).astype(np.float32)
LAYER_W = np.random.default_rng(24).standard_normal((8, 2)).astype(np.float32)


def lstm_layer_run(bk, A, reverse=False, batch_first=False, x=LAYER_X, bias=True):
    """``lstm_layer``'s out and cells (the gates it keeps for the backward are the backend's own:
    activated on the CPU, pre-activation on CUDA)."""
    b = A(GATES4[0]) if bias else None
    out, gates, cells = bk.lstm_layer(
        A(x), A(STATE), A(STATE * 0.5), A(LAYER_W_IH), A(LAYER_W), b, b, reverse, batch_first
    )
    return out, cells


case(
    "lstm_layer",
    "-> (out, cells): forwards, backwards in time, batch first",
    lambda bk, A: (
        lstm_layer_run(bk, A),
        lstm_layer_run(bk, A, reverse=True, bias=False),
        lstm_layer_run(bk, A, batch_first=True, x=LAYER_X.transpose(1, 0, 2)),
    ),
    ((ok(F32, (18, 2)), ok(F32, (2, 12, 2))),) * 3,
)
case(
    "lstm_layer",
    "the gates kept for the backward",
    lambda bk, A: bk.lstm_layer(A(LAYER_X), A(STATE), A(STATE), A(LAYER_W_IH), A(LAYER_W), None, None, False, False)[1],
    ok(F32, (12, 8)),
    same_values=False,
)
case(
    "lstm_layer",
    "float16 in, float16 out; no time steps",
    lambda bk, A: (
        bk.lstm_layer(
            *(A(a.astype(np.float16)) for a in (LAYER_X, STATE, STATE, LAYER_W_IH, LAYER_W)), None, None, False, False
        )[0],
        lstm_layer_run(bk, A, x=LAYER_X[:0]),
    ),
    (ok(F16, (18, 2)), (ok(F32, (6, 2)), ok(F32, (2, 0, 2)))),
    same_values=False,
)
case(
    "lstm_layer",
    "hidden weights not (4H, H)",
    lambda bk, A: bk.lstm_layer(
        A(LAYER_X), A(STATE), A(STATE), A(LAYER_W_IH), A(LAYER_W[:6]), None, None, False, False
    ),
    ShapeError,
)


def lstm_layer_grads(bk, A, reverse, batch_first):
    x = LAYER_X.transpose(1, 0, 2) if batch_first else LAYER_X
    args = (A(x), A(STATE), A(STATE * 0.5), A(LAYER_W_IH), A(LAYER_W))
    out, gates, cells = bk.lstm_layer(*args, None, None, reverse, batch_first)
    grad = A(np.random.default_rng(25).standard_normal((18, 2)).astype(np.float32))
    return bk.lstm_layer_backward(grad, *args, out, gates, cells, reverse, batch_first, True, True, True)


for reverse, batch_first in ((False, False), (True, True)):
    case(
        "lstm_layer_backward",
        f"-> (d_x, d_h0, d_c0, d_w_ih, d_w_hh, d_b), reverse={reverse}, batch_first={batch_first}",
        lambda bk, A, reverse=reverse, batch_first=batch_first: lstm_layer_grads(bk, A, reverse, batch_first),
        (
            ok(F32, (3, 4, 5) if batch_first else (4, 3, 5)),
            ok(F32, (3, 2)),
            ok(F32, (3, 2)),
            ok(F32, (8, 5)),
            ok(F32, (8, 2)),
            ok(F32, (8,)),
        ),
    )
case(
    "lstm_layer_backward",
    "a gradient of another shape",
    lambda bk, A: bk.lstm_layer_backward(
        A(np.ones((17, 2), np.float32)),
        A(LAYER_X),
        A(STATE),
        A(STATE),
        A(LAYER_W_IH),
        A(LAYER_W),
        A(np.ones((18, 2), np.float32)),
        A(np.ones((12, 8), np.float32)),
        A(np.ones((2, 12, 2), np.float32)),
        False,
        False,
        True,
        True,
        True,
    ),
    ShapeError,
)


# fused RMS norm and group norm (issue 15, CUDA kernels)
case(
    "rms_norm",
    "no weight; rstd keeps x's dims",
    lambda bk, A: bk.rms_norm(A(X3), None, 2, 1e-5),
    (ok(F32, (2, 3, 4)), ok(F32, (2, 1, 1), 1 / np.sqrt((X3 * X3).mean((1, 2), keepdims=True) + 1e-5))),
)
case(
    "rms_norm",
    "float16 in, float32 rstd",
    lambda bk, A: bk.rms_norm(A(X3.astype(np.float16)), A(WEIGHT.astype(np.float16)), 1, 1e-5),
    (ok(F16, (2, 3, 4)), ok(F32, (2, 3, 1))),
)
case(
    "rms_norm",
    "an empty batch",
    lambda bk, A: bk.rms_norm(A(np.zeros((0, 4), np.float32)), A(WEIGHT), 1, 1e-5),
    (ok(F32, (0, 4)), ok(F32, (0, 1))),
)
case("rms_norm", "n = 0", lambda bk, A: bk.rms_norm(A(X3), None, 0, 1e-5), ShapeError)
case("rms_norm", "a weight of another shape", lambda bk, A: bk.rms_norm(A(X3), A(WEIGHT[:3]), 1, 1e-5), ShapeError)
case("rms_norm", "of integers", lambda bk, A: bk.rms_norm(A(I), None, 1, 1e-5), DTypeError)


def rms_norm_grads(bk, A, weight):
    x = A(X3)
    w = None if weight is None else A(weight)
    _, rstd = bk.rms_norm(x, w, 1, 1e-5)
    return bk.rms_norm_backward(A(X3 * 0.5), x, w, rstd, 1)


case(
    "rms_norm_backward",
    "no weight: dweight None",
    lambda bk, A: rms_norm_grads(bk, A, None),
    (ok(F32, (2, 3, 4)), None),
)
case(
    "rms_norm_backward",
    "dweight in the weight's dtype",
    lambda bk, A: rms_norm_grads(bk, A, WEIGHT.astype(np.float64)),
    (ok(F32, (2, 3, 4)), ok(F64, (4,))),
)

case(
    "group_norm",
    "statistics of shape (N, groups)",
    lambda bk, A: bk.group_norm(A(X3[:, :2]), A(WEIGHT[:2]), A(WEIGHT[:2]), 2, 1e-5),
    (ok(F32, (2, 2, 4)), ok(F32, (2, 2), X3[:, :2].mean(2)), ok(F32, (2, 2))),
)
case(
    "group_norm",
    "float16 in, float32 statistics; no weight or bias",
    lambda bk, A: bk.group_norm(A(X3.astype(np.float16)), None, None, 3, 1e-5),
    (ok(F16, (2, 3, 4)), ok(F32, (2, 3)), ok(F32, (2, 3))),
)
case(
    "group_norm",
    "an empty batch",
    lambda bk, A: bk.group_norm(A(np.zeros((0, 4, 3), np.float32)), None, None, 2, 1e-5),
    (ok(F32, (0, 4, 3)), ok(F32, (0, 2)), ok(F32, (0, 2))),
)
case("group_norm", "channels not divisible", lambda bk, A: bk.group_norm(A(X3), None, None, 2, 1e-5), ShapeError)
case("group_norm", "of integers", lambda bk, A: bk.group_norm(A(I), None, None, 1, 1e-5), DTypeError)


def group_norm_grads(bk, A, weight):
    x = A(X3)
    w = None if weight is None else A(weight)
    _, mean, rstd = bk.group_norm(x, w, None, 3, 1e-5)
    return bk.group_norm_backward(A(X3 * 0.5), x, w, mean, rstd, 3)


case(
    "group_norm_backward",
    "no weight: dweight None, dbias in g's dtype",
    lambda bk, A: group_norm_grads(bk, A, None),
    (ok(F32, (2, 3, 4)), None, ok(F32, (3,))),
)
case(
    "group_norm_backward",
    "dweight and dbias in the weight's dtype",
    lambda bk, A: group_norm_grads(bk, A, WEIGHT[:3].astype(np.float64)),
    (ok(F32, (2, 3, 4)), ok(F64, (3,)), ok(F64, (3,))),
)

# average pooling kernels (issue 15)
PLANES = np.random.default_rng(40).standard_normal((2, 3, 5, 7)).astype(np.float32)
case(
    "avg_pool2d",
    "padding counted; a ceil_mode window past the end",
    lambda bk, A: bk.avg_pool2d(A(PLANES), (2, 3), (2, 2), (1, 1), (3, 4), True, None),
    ok(F32, (2, 3, 3, 4)),
)
case(
    "avg_pool2d",
    "float16; padding not counted; a divisor override",
    lambda bk, A: (
        bk.avg_pool2d(A(PLANES.astype(np.float16)), (3, 3), (1, 2), (1, 0), (5, 3), False, None),
        bk.avg_pool2d(A(PLANES), (2, 2), (2, 2), (0, 0), (2, 3), True, 3),
    ),
    (ok(F16, (2, 3, 5, 3)), ok(F32, (2, 3, 2, 3))),
)
case(
    "avg_pool2d",
    "an empty batch",
    lambda bk, A: bk.avg_pool2d(A(PLANES[:0]), (2, 2), (2, 2), (0, 0), (2, 3), True, None),
    ok(F32, (0, 3, 2, 3)),
)
case(
    "avg_pool2d",
    "padding over half the kernel",
    lambda bk, A: bk.avg_pool2d(A(PLANES), (2, 2), (1, 1), (2, 0), (8, 6), True, None),
    ShapeError,
)
case(
    "avg_pool2d",
    "of integers",
    lambda bk, A: bk.avg_pool2d(A(PLANES.astype(np.int64)), (2, 2), (2, 2), (0, 0), (2, 3), True, None),
    DTypeError,
)
case(
    "avg_pool2d_backward",
    "the input's shape",
    lambda bk, A: bk.avg_pool2d_backward(A(PLANES[:, :, :3, :4]), (2, 3, 5, 7), (2, 3), (2, 2), (1, 1), False, None),
    ok(F32, (2, 3, 5, 7)),
)
case(
    "avg_pool2d_backward",
    "a divisor override; an empty gradient",
    lambda bk, A: (
        bk.avg_pool2d_backward(A(PLANES[:, :, :2, :3]), (2, 3, 5, 7), (2, 2), (2, 2), (0, 0), True, 3),
        bk.avg_pool2d_backward(A(PLANES[:0, :, :2, :3]), (0, 3, 5, 7), (2, 2), (2, 2), (0, 0), True, None),
    ),
    (ok(F32, (2, 3, 5, 7)), ok(F32, (0, 3, 5, 7))),
)
case(
    "adaptive_avg_pool2d",
    "overlapping windows",
    lambda bk, A: bk.adaptive_avg_pool2d(A(PLANES), (3, 4)),
    ok(F32, (2, 3, 3, 4)),
)
case(
    "adaptive_avg_pool2d",
    "an empty plane",
    lambda bk, A: bk.adaptive_avg_pool2d(A(PLANES[:, :, :0]), (3, 4)),
    ShapeError,
)
case(
    "adaptive_avg_pool2d_backward",
    "float16 in, float16 out, the input's shape",
    lambda bk, A: bk.adaptive_avg_pool2d_backward(A(PLANES[:, :, :3, :4].astype(np.float16)), (2, 3, 5, 7)),
    ok(F16, (2, 3, 5, 7)),
)


# resampling kernels: interpolate and pad (issue 15)
case(
    "interpolate_nearest",
    "any dtype; nearest and nearest-exact; a 1-row plane",
    lambda bk, A: (
        bk.interpolate_nearest(A(PLANES), (7, 3), (5 / 7, 7 / 3), False),
        bk.interpolate_nearest(A(PLANES.astype(np.int64)), (9, 2), (5 / 9, 3.5), True),
        bk.interpolate_nearest(A(PLANES[:, :, :1]), [1, 11], [1.0, 7 / 11], False),
    ),
    (ok(F32, (2, 3, 7, 3)), ok(I64, (2, 3, 9, 2)), ok(F32, (2, 3, 1, 11))),
)
case(
    "interpolate_nearest",
    "empty planes",
    lambda bk, A: bk.interpolate_nearest(A(PLANES[:, :, :0]), (2, 2), (1.0, 1.0), False),
    ShapeError,
)
case(
    "interpolate_nearest_backward",
    "float16 in, float16 out; an empty batch",
    lambda bk, A: (
        bk.interpolate_nearest_backward(
            A(PLANES[:, :, :4, :6].astype(np.float16)), (2, 3, 5, 7), (5 / 4, 7 / 6), False
        ),
        bk.interpolate_nearest_backward(A(PLANES[:0]), (0, 3, 2, 3), (0.4, 3 / 7), True),
    ),
    (ok(F16, (2, 3, 5, 7)), ok(F32, (0, 3, 2, 3))),
)
case(
    "interpolate_bilinear",
    "align_corners both ways",
    lambda bk, A: (
        bk.interpolate_bilinear(A(PLANES), (9, 4), (4 / 8, 6 / 3), True),
        bk.interpolate_bilinear(A(PLANES.astype(np.float64)), (3, 10), (5 / 3, 0.7), False),
    ),
    (ok(F32, (2, 3, 9, 4)), ok(F64, (2, 3, 3, 10))),
)
case(
    "interpolate_bilinear",
    "of integers",
    lambda bk, A: bk.interpolate_bilinear(A(PLANES.astype(np.int64)), (9, 4), (0.5, 2.0), True),
    DTypeError,
)
case(
    "interpolate_bilinear_backward",
    "the input's shape",
    lambda bk, A: bk.interpolate_bilinear_backward(A(PLANES[:, :, :4, :6]), (2, 3, 5, 7), (5 / 4, 7 / 6), False),
    ok(F32, (2, 3, 5, 7)),
)
case(
    "pad",
    "pads for the last dims in dim order; crops; any dtype",
    lambda bk, A: (
        bk.pad(A(PLANES), (1, 2, -1, 3), "reflect", 0),
        bk.pad(A(PLANES.astype(np.int32)), [2, 0], "constant", -3),
        bk.pad(A(PLANES), (1, 1, 0, 2, 3, 1), "replicate", 0),
        bk.pad(A(PLANES), (), "circular", 0),
    ),
    (ok(F32, (2, 3, 8, 9)), ok(I32, (2, 3, 5, 9)), ok(F32, (2, 5, 7, 11)), ok(F32, (2, 3, 5, 7))),
)
case(
    "pad",
    "reflect pads of the dim's size or more",
    lambda bk, A: bk.pad(A(PLANES), (7, 0), "reflect", 0),
    ShapeError,
)
case(
    "pad",
    "more than three dims",
    lambda bk, A: bk.pad(A(PLANES), (1, 1, 1, 1, 1, 1, 1, 1), "constant", 0),
    ShapeError,
)
case(
    "pad_backward",
    "the input's shape; circular; an empty gradient",
    lambda bk, A: (
        bk.pad_backward(A(PLANES[:, :, :4, :6]), (2, 3, 3, 2), (1, 0, 2, 2), "circular"),
        bk.pad_backward(A(PLANES[:0]), (0, 3, 5, 5), (0, 2), "replicate"),
    ),
    (ok(F32, (2, 3, 3, 2)), ok(F32, (0, 3, 5, 5))),
)
case(
    "pad_backward",
    "a gradient that does not fit",
    lambda bk, A: bk.pad_backward(A(PLANES), (2, 3, 5, 7), (1, 1), "reflect"),
    ShapeError,
)


# ---- sparse (CSR products): rows 0 and 2 hold entries, row 1 none; entry 3 repeats entry 0's position
SP_ROWS = np.array([2, 0, 2, 0], np.int64)
SP_COLS = np.array([1, 0, 2, 0], np.int64)
SP_VALUES = np.array([1.0, 2.0, 3.0, 4.0], np.float32)
SP_DENSE = np.arange(12, dtype=np.float32).reshape(3, 4)
case(
    "coo_to_csr",
    "unsorted rows: a stable order and an empty row's pointers",
    lambda bk, A: bk.coo_to_csr(A(SP_ROWS), 3, False),
    (ok(I64, (4,), [0, 2, 2, 4]), ok(I64, (4,), [1, 3, 0, 2])),
)
case(
    "coo_to_csr",
    "sorted rows give no order; no entries",
    lambda bk, A: (
        bk.coo_to_csr(A(np.array([0, 0, 2])), 4, True),
        bk.coo_to_csr(A(np.zeros(0, np.int64)), 2, False)[0],
    ),
    ((ok(I64, (5,), [0, 2, 2, 3, 3]), None), ok(I64, (3,), [0, 0, 0])),
)
case(
    "spmm",
    "duplicates add, an empty row is zero, a transposed dense operand",
    lambda bk, A: bk.spmm(
        A(np.array([0, 2, 2, 4])),
        A(np.array([1, 3, 0, 2])),
        A(SP_COLS),
        A(SP_VALUES),
        bk.permute(A(SP_DENSE.T.copy()), (1, 0)),
    ),
    ok(F32, (3, 4), [6 * SP_DENSE[0], np.zeros(4), SP_DENSE[1] + 3 * SP_DENSE[2]]),
)
case(
    "spmm",
    "values and dense of two dtypes",
    lambda bk, A: bk.spmm(A(np.array([0, 4])), None, A(SP_COLS), A(SP_VALUES), A(SP_DENSE.astype(np.float64))),
    TypeError,
)
case(
    "sddmm",
    "one dot product per entry",
    lambda bk, A: bk.sddmm(A(SP_ROWS), A(SP_COLS), A(SP_DENSE), A(SP_DENSE)),
    ok(
        F32,
        (4,),
        [SP_DENSE[2] @ SP_DENSE[1], SP_DENSE[0] @ SP_DENSE[0], SP_DENSE[2] @ SP_DENSE[2], SP_DENSE[0] @ SP_DENSE[0]],
    ),
)
case(
    "sddmm",
    "a and b with different numbers of columns",
    lambda bk, A: bk.sddmm(A(SP_ROWS), A(SP_COLS), A(SP_DENSE), A(SP_DENSE[:, :3])),
    ShapeError,
)


def test_every_primitive_has_a_case():
    assert sorted(set(backends.PRIMITIVES) - {c.primitive for c in CASES}) == []


# ---------------------------------------------------------------------------------------------
# running a case
def maker(bk):
    def A(x):
        x = np.array(x, copy=True)  # the CPU backend's from_numpy keeps the array: cases must not share
        return bk.from_numpy(x, dt.from_numpy_dtype(x.dtype))

    return A


def outcome(bk, call):
    """What ``call`` gives on ``bk``: its result with arrays as (dtype name, shape, host values), or the
    exception it raised."""
    try:
        return host(bk, call(bk, maker(bk)))
    except Exception as error:  # noqa: BLE001 (the error is the outcome)
        return error


def host(bk, r):
    if isinstance(r, (tuple, list)):
        return type(r)(host(bk, v) for v in r)
    if isinstance(r, np.generic):
        return ("a NumPy scalar", r)  # never a primitive's result: fails every expectation
    if r is None or isinstance(r, (bool, int, float, str, dt.dtype)):
        return r
    if bk.name == "cuda" and isinstance(r, np.ndarray) and not isinstance(r, np.generic):
        return ("a host array", r)
    values = np.asarray(bk.to_numpy(r))
    return Expect(bk.dtype_of(r).name, tuple(bk.shape_of(r)), values)


def assert_matches(got, want, label, same_values=True):
    """``got`` (an outcome) against ``want`` (an expectation or another outcome)."""
    if isinstance(want, type) and issubclass(want, BaseException):
        assert isinstance(got, want), f"{label}: expected {want.__name__}, got {got!r}"
        return
    assert not isinstance(got, BaseException), f"{label}: raised {type(got).__name__}: {got}"
    if isinstance(want, Expect):
        assert isinstance(got, Expect), f"{label}: expected an array, got {got!r}"
        assert (got.dtype, got.shape) == (want.dtype, want.shape), (
            f"{label}: {got.dtype} {got.shape} != {want.dtype} {want.shape}"
        )
        if want.value is not None and same_values:
            expected = np.broadcast_to(np.asarray(want.value), want.shape)
            if got.value.dtype.kind in "biu" and expected.dtype.kind in "biu":
                np.testing.assert_array_equal(got.value, expected, err_msg=label)
            else:
                np.testing.assert_allclose(
                    got.value.astype(np.float64),
                    expected.astype(np.float64),
                    rtol=2e-3,
                    atol=1e-4,
                    equal_nan=True,
                    err_msg=label,
                )
        return
    if isinstance(want, (tuple, list)):
        assert isinstance(got, type(want)) and len(got) == len(want), f"{label}: {got!r} is not like {want!r}"
        for i, (g, w) in enumerate(zip(got, want)):
            assert_matches(g, w, f"{label} [{i}]", same_values)
        return
    assert got == want, f"{label}: {got!r} != {want!r}"


def case_id(c):
    return f"{c.primitive}: {c.label}"


@pytest.mark.parametrize("c", CASES, ids=case_id)
def test_convention_on_the_cpu(c):
    assert_matches(outcome(cpu, c.call), c.expect, case_id(c))


def as_expectation(o, expected):
    """A CPU outcome as what the CUDA one must match: the same values (for arrays), the same built-in
    error class as the expectation (CUDA's errors are adcuda's; NumPy's on the CPU share the class)."""
    if isinstance(o, BaseException):
        return expected if isinstance(expected, type) else type(o)
    return o


@gpu
@pytest.mark.parametrize("c", CASES, ids=case_id)
def test_convention_on_cuda_matches_the_cpu(c):
    from adcuda.backends import cuda

    expected = as_expectation(outcome(cpu, c.call), c.expect)
    assert_matches(outcome(cuda, c.call), expected, case_id(c), c.same_values)


# =============================================================================================
# end to end: anomaly mode on CUDA (the reduction over axes=None that anomaly mode's finiteness check
# makes used to fail inside the CUDA reduce)
@gpu
def test_anomaly_mode_names_sqrt_for_a_nan_gradient_on_cuda():
    x = adcuda.tensor([4.0, -1.0], device="cuda", requires_grad=True)
    with pytest.raises(adcuda.errors.AutogradError, match=r"Function 'SqrtBackward0' returned nan or inf values"):
        with adcuda.autograd.detect_anomaly():
            x.sqrt().sum().backward()


def _trait_samples():
    """A call of each primitive with declared traits, on the CPU backend, over fresh operands:
    (primitive, its operands, the call)."""
    float32 = dt.float32
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    b = np.ones((3, 4), np.float32)
    q, k, v = (np.linspace(-1, 1, 24, dtype=np.float32).reshape(1, 2, 3, 4) * s for s in (1.0, 0.5, 2.0))
    out, lse = cpu.attention(q, k, v, None, True, 0.5)
    return {
        "binary": ((a, b), lambda a, b: cpu.binary("add", a, b, float32)),
        "unary": ((a,), lambda a: cpu.unary("exp", a)),
        "unary_backward": ((a, b), lambda a, g: cpu.unary_backward("tanh", None, a, g)),
        "reduce": ((a,), lambda a: cpu.reduce("sum", a, (1,), False)),
        "scan": ((a,), lambda a: cpu.scan("max", a, 1)),
        "matmul": ((a, b.T.copy()), lambda a, b: cpu.matmul(a, b)),
        "pdist": ((a,), lambda a: cpu.pdist(a, 2.0)),
        "cdist": ((a[None], b[None]), lambda a, b: cpu.cdist(a, b, 2.0)),
        "cross": ((a[:, :3].copy(), b[:, :3].copy()), lambda a, b: cpu.cross(a, b, 1)),
        "full": ((), lambda: cpu.full((2, 3), 1.5, float32)),
        "arange": ((), lambda: cpu.arange(0, 5, 1, float32)),
        "astype": ((a,), lambda a: cpu.astype(a, float32)),
        "contiguous": ((a,), lambda a: cpu.contiguous(a)),
        "view": ((a,), lambda a: cpu.view(a, (12,))),
        "permute": ((a,), lambda a: cpu.permute(a, (1, 0))),
        "expand": ((a[:1],), lambda a: cpu.expand(a, (3, 4))),
        "slice": ((a,), lambda a: cpu.slice(a, (slice(0, 2),))),
        "attention_backward": (
            (v - q, q, k, v, out, lse),
            lambda *arrays: cpu.attention_backward(*arrays, None, True, 0.5),
        ),
    }


def test_every_primitive_with_traits_has_a_sample():
    assert set(seam.TRAITS) == set(_trait_samples())


@pytest.mark.parametrize("name", sorted(_trait_samples()))
def test_declared_traits_hold_on_the_cpu(name):
    """What capture plans a replay's memory by (``seam.Traits``), checked on a call: a ``pure``
    primitive leaves its operands as they were; a ``fresh`` one returns memory no operand shares,
    unless it ``returns_operand`` and hands back the operand itself; one that ``returns_operand``
    writes nothing and returns the operand or memory the operand owns."""
    traits = seam.TRAITS[name]
    operands, call = _trait_samples()[name]
    before = [x.copy() for x in operands]
    result = call(*operands)
    results = result if isinstance(result, tuple) else (result,)
    if traits.pure or traits.returns_operand:
        for x, was in zip(operands, before):
            np.testing.assert_array_equal(x, was)
    for r in results:
        shared = [x for x in operands if np.shares_memory(r, x)]
        if traits.fresh and not (traits.returns_operand and any(r is x for x in operands)):
            assert not shared, f"{name}: a fresh result shares an operand's memory"
        if traits.returns_operand and not traits.fresh:
            assert shared, f"{name}: the result is not the operand's memory"
