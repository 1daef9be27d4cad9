"""The database: one ``Entry`` per public op, most made by a category generator in one line, some
with hand-written samples. ``ENTRIES`` lists them in a fixed order; ``by_key`` finds one.

A new op adds one line here (see docs/testing.md, "The conformance database").
"""

import collections

import numpy as np

from . import generators as g
from .spec import D, E, Entry, S, T, named, realize

I64 = "int64"


def idx(*values, dtype=I64):
    """An integer index tensor: ``idx(0, 2)`` is 1-d, ``idx([[0], [1]])`` has the nested list's shape."""
    if len(values) == 1 and isinstance(values[0], list):
        values = values[0]
    return T(values=np.array(values), dtype=dtype)


def mask(*values):
    return T(values=np.array(values, dtype=bool), dtype="bool")


ENTRIES = []


def add(name, samples, **kw):
    """An entry; hand-written samples (no category) get their float32 and non-contiguous variants."""
    samples = named(samples)
    if not kw.get("category") and kw.get("values", True):
        realize(samples, name)
        samples += g.variants(samples)
    ENTRIES.append(Entry(name, samples, **kw))


# --------------------------------------------------------------------------------------------------
# unary elementwise (math, rounding, activations): domain, kinks
UNARY = {
    "exp": {},
    "exp2": {},
    "expm1": {},
    "log": {"domain": "positive", "kinks": [0.0, 1.0]},
    "log1p": {"domain": "positive", "kinks": [-1.0, 0.0]},
    "log2": {"domain": "positive"},
    "log10": {"domain": "positive"},
    "sqrt": {"domain": "positive", "kinks": [0.0, 4.0]},
    "rsqrt": {"domain": "positive", "kinks": [0.0, 4.0]},
    "sin": {},
    "cos": {},
    "tan": {"domain": "small"},
    "sinh": {},
    "cosh": {},
    "tanh": {},
    "sigmoid": {"kinks": [-800.0, 0.0, 800.0]},
    "erf": {},
    "erfinv": {"domain": "small", "kinks": [0.0, 0.5, -0.5]},
    "lgamma": {"domain": "positive", "kinks": [1.0, 2.0, -0.5, -2.5]},
    "digamma": {"domain": "positive", "kinks": [1.0, -0.5, -2.5]},
    "silu": {"kinks": [-800.0, 0.0, 800.0]},
    "gelu": {"kinks": [0.0]},
    "relu": {"kinks": [-1.0, 0.0, 1.0]},
    "abs": {"kinks": [0.0, -0.0, 1.0]},
    "neg": {},
    "positive": {},
    "floor": {"kinks": [0.5, -0.5, 1.0]},
    "ceil": {"kinks": [0.5, -0.5, 1.0]},
    "trunc": {"kinks": [0.5, -0.5, 1.0]},
    "round": {"kinks": [0.5, 1.5, 2.5, -0.5, -1.5]},
    "frac": {"kinks": [0.5, -0.5, 1.0]},
    "sign": {"kinks": [0.0, -0.0, 1.0, -1.0]},
    "square": {},
    "reciprocal": {"kinks": [0.0, -0.0, 2.0]},
    "logit": {"domain": "unit", "kinks": [0.0, 1.0, 0.5]},
    "nan_to_num": {},
    "isnan": {"grad": False},
    "isinf": {"grad": False},
    "isfinite": {"grad": False},
    "signbit": {"grad": False},
    "logical_not": {"grad": False},
    "elu": {"kinks": [0.0]},
    "selu": {"kinks": [0.0]},
    "celu": {"kinks": [0.0]},
    "hardtanh": {"kinks": [-1.0, 1.0, 0.0]},
    "relu6": {"kinks": [0.0, 6.0, 3.0]},
    "hardsigmoid": {"kinks": [-3.0, 3.0, 0.0]},
    "hardswish": {"kinks": [-3.0, 3.0, 0.0]},
    "softsign": {},
    "tanhshrink": {},
    "hardshrink": {"kinks": [-0.5, 0.5, 0.0]},
    "softshrink": {"kinks": [-0.5, 0.5, 0.0]},
    "mish": {"kinks": [-800.0, 0.0, 800.0]},
    "logsigmoid": {"kinks": [-800.0, 0.0, 800.0]},
    "softplus": {"kinks": [-800.0, 0.0, 20.0, 800.0]},
    "leaky_relu": {"kinks": [0.0, -1.0]},
    # issue 27's names
    "asin": {"domain": "unit", "kinks": [0.0, 0.5, -0.5]},
    "acos": {"domain": "unit", "kinks": [0.0, 0.5, -0.5]},
    "atan": {"kinks": [0.0, 1.0, -1.0]},
    "asinh": {"kinks": [0.0, 1.0, -1.0]},
    "acosh": {"domain": "above_one", "kinks": [1.5, 2.0]},
    "atanh": {"domain": "unit", "kinks": [0.0, 0.5, -0.5]},
    "erfc": {"kinks": [0.0, 3.0, -3.0]},
    "sinc": {"kinks": [0.0, 1.0, -1.0, 0.5]},
    "deg2rad": {},
    "rad2deg": {},
    "isposinf": {"grad": False},
    "isneginf": {"grad": False},
}
# softsign and tanhshrink are Python compositions in PyTorch: a string fails there with AttributeError
for _name, _kw in UNARY.items():
    add(_name, g.unary(**_kw), errors=[] if _name in ("softsign", "tanhshrink") else g.unary_errors(), category="unary")

add("bitwise_not", g.unary(grad=False, extremes=False, ints=True), category="unary")
# the gamma family's parameterised members (adcuda/ops/special.py)
add(
    "polygamma",
    [
        S(1, T(2, 3, dtype="float64", low=0.1, high=3.0)),
        S(2, T(2, 3, dtype="float64", low=0.1, high=3.0)),
        S(3, T(3, 4, low=0.5, high=5.0)),
        S(1, T(values=[-0.5, -2.5, 1.5])),
        S(0, T(4, dtype="float64", low=0.1, high=3.0)),
    ],
    forms=("function",),
    category="unary",
)
add(
    "mvlgamma",
    [S(T(2, 3, dtype="float64", low=1.5, high=4.0), 3), S(T(4, dtype="float64", low=0.6, high=3.0), p=1)],
    category="unary",
)
# activations with their parameters
add(
    "leaky_relu[slope]",
    [S(T(2, 3, dtype="float64"), 0.2), S(T(values=[0.0, -1.0, 1.0]), negative_slope=0.0)],
    forms=("functional",),
)
add("elu[alpha]", [S(T(2, 3, dtype="float64"), 0.5), S(T(values=[0.0, -1.0]), alpha=2.0)], forms=("functional",))
add("celu[alpha]", [S(T(2, 3, dtype="float64"), 0.5)], forms=("functional",))
add(
    "hardtanh[range]",
    [S(T(2, 3, dtype="float64"), -0.5, 0.5), S(T(values=[-2.0, 0.0, 2.0]), min_val=-2.0, max_val=2.0)],
    forms=("functional",),
)
add(
    "threshold",
    [
        S(T(2, 3, dtype="float64"), 0.1, 20.0),
        S(T(values=[0.1, 0.0, 1.0]), 0.1, -1.0),
        S(T(3, dtype="int64"), 1, 5),
        S(T(values=np.array([-1, 2, -2])), -1.5, 7.9, name="int64-float-bounds"),  # truncated to -1 and 7
    ],
    category="unary",
)
add(
    "softplus[beta]",
    [S(T(2, 3, dtype="float64"), 2.0, 5.0), S(T(values=[10.0, 100.0, -100.0]), beta=10.0, threshold=20.0)],
    forms=("functional",),
)
add(
    "gelu[tanh]",
    [S(T(2, 3, dtype="float64"), approximate="tanh"), S(T(values=[0.0, 1e4, -1e4]), approximate="tanh")],
    forms=("function", "method", "functional"),
)
add(
    "hardshrink[lambd]",
    [S(T(2, 3, dtype="float64"), 1.0), S(T(values=[-1.0, 1.0, 0.0]), lambd=1.0)],
    forms=("method", "functional"),
)
add("softshrink[lambd]", [S(T(2, 3, dtype="float64"), 1.0)], forms=("functional",))
add(
    "logit[eps]",
    [S(T(values=[0.0, 1.0, 0.5, 1e-8], dtype="float64"), 1e-6), S(T(3, dtype="float64", low=0.1, high=0.9), eps=0.2)],
)
add(
    "nan_to_num[args]",
    [
        S(T(values=[np.nan, np.inf, -np.inf, 1.0]), 0.5, 2.0, -2.0),
        S(T(values=[np.nan, np.inf, -np.inf, 1.0], dtype="float16"), posinf=1e5),
        S(T(values=[np.nan, np.inf, -np.inf, 1.0], dtype="float64"), nan=1.0),
        S(T(3, dtype="int32"), nan=1.0),
    ],
)
add(
    "prelu",
    [
        S(T(2, 3, 4, dtype="float64"), T(3, dtype="float64")),
        S(T(2, 3, dtype="float64"), T(1, dtype="float64")),
        S(T(values=[0.0, -1.0, 1.0], dtype="float64"), T(1, dtype="float64")),
    ],
    errors=[E(T(2, 3), T(4), family="RuntimeError/ValueError")],
)
add("rrelu", [S(T(2, 3, dtype="float64"), training=False), S(T(2, 3), 0.1, 0.3)], forms=("functional",))

# binary elementwise: domains, ties, alpha
BINARY = {
    "add": {"alpha": True},
    "sub": {"alpha": True},
    "mul": {},
    "div": {"other_domain": "positive"},
    "floor_divide": {"other_domain": "positive", "grad": False},
    "remainder": {"other_domain": "positive"},
    "fmod": {"other_domain": "positive"},
    "pow": {"domain": "positive"},
    "maximum": {"ties": True, "scalars": False},
    "minimum": {"ties": True, "scalars": False},
    "logaddexp": {"ints": False, "scalars": False, "ties": True},
    "hypot": {"ints": False, "scalars": False},
    "xlogy": {"other_domain": "positive"},
    "heaviside": {"grad": False, "scalars": False},
    "float_power": {"domain": "positive"},
    "copysign": {},
    "fmax": {"ties": True, "scalars": False},
    "fmin": {"ties": True, "scalars": False},
    # issue 27's names
    "atan2": {"scalars": False, "ties": True},
    "logaddexp2": {"ints": False, "scalars": False, "ties": True},
    "ldexp": {"scalars": False},
}
for _name, _kw in BINARY.items():
    add(_name, g.binary(**_kw), errors=g.binary_errors(), category="binary")
# torch.special's alone (no torch.xlog1py, no Tensor method): called by that name in both libraries
add(
    "xlog1py",
    g.binary(other_domain="positive"),
    errors=g.binary_errors(),
    call=lambda lib, input, other: lib.special.xlog1py(input, other),
    category="binary",
)

for _name in ("gcd", "lcm"):
    add(
        _name,
        [
            S(idx(0, 12, -18, 7, 0, 5), idx(0, 8, 12, -21, 5, -10)),
            S(idx(4, 6, 9, dtype="int32"), idx(6, dtype="int32")),
            S(idx(3, 5, dtype="int32"), idx(10, 15)),
            S(T(0, 3, dtype=I64), idx(2, 3, 4)),
        ],
        errors=[E(T(3), T(3), family="RuntimeError/ValueError")],
        grad=False,
    )
add(
    "isin",
    [
        S(T(values=np.array([1, 2, 3, 4, 2])), T(values=np.array([2, 5]))),
        S(T(values=np.array([[1, 2], [3, 4]])), T(values=np.array([[4], [1]]))),
        S(T(values=[1.0, float("nan"), 0.0, -0.0]), T(values=[float("nan"), 0.0])),
        S(T(values=np.array([1, 2, 3])), 2),
        S(2, T(values=np.array([1, 2, 3]))),
        S(T(values=np.array([1, 2, 3])), T(values=np.array([2, 7])), invert=True),
        S(T(0, 3), T(values=[1.0])),
        S(T(values=[1.0, 2.0]), T(0)),
    ],
    errors=[
        E(mask(True, False), T(2), family="RuntimeError/ValueError"),
        E(T(3), mask(True), family="RuntimeError/ValueError"),
    ],
    grad=False,
)
add(
    "div[rounding_mode]",
    [
        S(T(values=[7.0, -7.0, 7.5, -7.5]), T(values=[2.0, 2.0, -2.0, 2.0]), rounding_mode="floor"),
        S(T(values=[7.0, -7.0, 7.5, -7.5]), T(values=[2.0, 2.0, -2.0, 2.0]), rounding_mode="trunc"),
        S(T(values=np.array([7, -7, 9, -9])), T(values=np.array([2, 2, -2, 4])), rounding_mode="floor"),
        S(T(values=np.array([7, -7, 9, -9])), T(values=np.array([2, 2, -2, 4])), rounding_mode="trunc"),
        S(T(values=np.array([7, -7, 9, -9])), T(values=np.array([2, 2, -2, 4]))),
        S(T(values=[1.0, -1.0, 0.0]), T(values=[0.0, 0.0, 0.0])),
    ],
    errors=[E(T(3), T(3), rounding_mode="round", family="RuntimeError/ValueError")],
    forms=("function:div", "function:divide", "method:div", "method:divide", "inplace:div_"),
)
add(
    "remainder[signs]",
    [
        S(T(values=[-0.001, 5.5, -5.5, 1e-30]), 1e5),
        S(T(values=[-3.0, 3.0, -3.0, 3.0], dtype="float64"), T(values=[2.0, -2.0, -2.0, 2.0], dtype="float64")),
        S(T(values=np.array([-7, 7, -7, 7])), T(values=np.array([3, -3, -3, 3]))),
        S(5.0, T(values=[2.0, -3.0])),
    ],
    forms=("function",),
)
add(
    "fmod[signs]",
    [
        S(T(values=[-0.001, 5.5, -5.5, 1e-30]), 1e5),
        S(T(values=[-3.0, 3.0, -3.0, 3.0], dtype="float64"), T(values=[2.0, -2.0, -2.0, 2.0], dtype="float64")),
        S(T(values=np.array([-7, 7, -7, 7])), T(values=np.array([3, -3, -3, 3]))),
        S(T(values=[1.0, -1.0]), 0.0),
    ],
    forms=("function",),
)
add(
    "pow[signs]",
    [
        S(T(values=[-2.0, -0.5, 0.0, 2.0], dtype="float64"), 3),
        S(T(values=[-2.0, -0.5, 0.0, 2.0], dtype="float64"), 2.0),
        S(T(values=[-2.0, 0.0, 2.0]), 0.5),
        S(T(values=[0.0, 0.0, 2.0], dtype="float64"), T(values=[0.0, -1.0, 0.0], dtype="float64")),
        S(T(values=np.array([2, 3, -2])), 3),
        S(T(values=np.array([2, 3, -2])), -1),
        S(2.0, T(values=[1.0, -1.0, 0.5], dtype="float64")),
        S(2, T(values=np.array([1, 2, 3]))),
        S(T(values=[1e20, 3e38, -1e20]), 2),
        # PyTorch computes x ** 2 and x ** 3 as products: the same bits, not just close
        S(T(64, low=-3.0, high=3.0), 3, tol=(0.0, 0.0), name="cube-f32-bitwise"),
        S(T(64, low=-3.0, high=3.0), 2, tol=(0.0, 0.0), name="square-f32-bitwise"),
    ],
    forms=("function",),
)

for _name in ("eq", "ne", "lt", "le", "gt", "ge"):
    add(_name, g.comparison(), errors=g.binary_errors(), category="comparison", grad=False)
for _name in ("logical_and", "logical_or", "logical_xor"):
    add(_name, g.logical(), errors=g.binary_errors(), category="logical", grad=False)
for _name in ("bitwise_and", "bitwise_or", "bitwise_xor"):
    add(_name, g.bitwise(), errors=g.bitwise_errors(), category="bitwise", grad=False)

add(
    "clamp",
    [
        S(T(3, 4, dtype="float64"), -0.5, 0.5),
        S(T(3, 4), min=-0.5),
        S(T(3, 4), max=0.5),
        S(T(values=[-1.0, 0.0, 1.0, 0.5], dtype="float64"), 0.0, 1.0, name="kinks-f64"),
        S(T(3, dtype="float64"), T(3, dtype="float64"), T(3, dtype="float64"), name="tensor-bounds"),
        S(T(3, 4), T(4), None, name="tensor-min-broadcast"),
        S(T(values=[np.nan, 2.0, -2.0]), -1.0, 1.0, name="nan"),
        S(T(3, 4), 1.0, -1.0, name="min-above-max"),
        S(T(5, dtype="int64"), 0, 2, name="int64"),
        S(T(5, dtype="int64"), 0.5, 2.5, name="int64-float-bounds"),
        S(T(3, dtype="float16"), -0.5, 0.5, name="f16"),
        S(T(0, 3), 0, 1, name="zero-size"),
        S(T(), 0.0, 0.1, name="0d"),
        S(T(3, 4, view="t"), -0.5, 0.5, name="transposed"),
    ],
    errors=[E(T(3), family="RuntimeError/ValueError", name="no-bounds")],
)
add(
    "clamp_min",
    [
        S(T(3, 4, dtype="float64"), 0.0),
        S(T(3, dtype="float64"), T(3, dtype="float64")),
        S(T(values=[0.0, 1.0, -1.0], dtype="float64"), 0.0),
        S(T(4, dtype="int64"), 1),
        S(mask(True, False, True), mask(False, False, True), name="bool-tensor-bound"),
    ],
)
add(
    "clamp_max",
    [
        S(T(3, 4, dtype="float64"), 0.0),
        S(T(3, dtype="float64"), T(3, dtype="float64")),
        S(T(values=[0.0, 1.0, -1.0], dtype="float64"), 0.0),
        S(T(4, dtype="int64"), 1),
    ],
)
add(
    "where",
    [
        S(mask(True, False, True), T(3, dtype="float64"), T(3, dtype="float64")),
        S(T(3, 4, dtype="bool"), T(3, 4), T(4), name="broadcast"),
        S(T(3, dtype="bool"), T(3), 0.0, name="python-other"),
        S(T(3, dtype="bool"), 1.0, 0.0, name="python-both"),
        S(T(3, dtype="bool"), T(3, dtype="int64"), T(3, dtype="float16"), name="promote"),
        S(T(3, dtype="bool"), T(3, dtype="int32"), 2.5, name="promote-int-python-float"),
        S(T(0, 3, dtype="bool"), T(0, 3), T(3), name="zero-size"),
        S(mask(True, False, True, False), name="condition-only"),
    ],
    errors=[E(T(3), T(3), T(3), family="RuntimeError/ValueError", name="float-condition")],
)
add(
    "lerp",
    [
        S(T(3, 4, dtype="float64"), T(3, 4, dtype="float64"), 0.3),
        S(T(3, dtype="float64"), T(3, dtype="float64"), T(3, dtype="float64"), name="tensor-weight"),
        S(T(3, 1), T(4), 0.5, name="broadcast"),
        S(T(3, dtype="float16"), T(3, dtype="float16"), 0.75, name="f16"),
    ],
)
for _name in ("addcmul", "addcdiv"):
    add(
        _name,
        [
            S(T(3, 4, dtype="float64"), T(3, 4, dtype="float64"), T(3, 4, dtype="float64", low=0.5, high=2.0)),
            S(T(3, dtype="float64"), T(3, dtype="float64"), T(3, dtype="float64", low=0.5, high=2.0), value=0.5),
            S(T(3, 1), T(4), T(3, 4, low=0.5, high=2.0), name="broadcast"),
            S(
                T(3, dtype="float16"),
                T(3, dtype="float16"),
                T(3, dtype="float16", low=0.5, high=2.0),
                value=2,
                name="f16",
            ),
        ],
    )
add(
    "isclose",
    [
        S(T(values=[1.0, np.nan, np.inf, 1.0]), T(values=[1.0 + 1e-9, np.nan, np.inf, 2.0])),
        S(T(values=[1.0, np.nan]), T(values=[1.0, np.nan]), equal_nan=True),
        S(T(4), T(4), rtol=0.5, atol=0.5),
        S(T(values=np.array([1, 2])), T(values=np.array([1, 3]))),
    ],
    grad=False,
)
add(
    "allclose",
    [
        S(T(values=[1.0, 2.0]), T(values=[1.0, 2.0 + 1e-9])),
        S(T(values=[1.0, np.nan]), T(values=[1.0, np.nan])),
        S(T(values=[1.0, np.nan]), T(values=[1.0, np.nan]), equal_nan=True),
        S(T(3, 1), T(4)),
    ],
    grad=False,
)
add(
    "equal",
    [
        S(T(values=[1.0, 2.0]), T(values=[1.0, 2.0])),
        S(T(3), T(4)),
        S(T(values=[np.nan]), T(values=[np.nan])),
        S(T(values=np.array([1, 2])), T(values=[1.0, 2.0])),
    ],
    grad=False,
)

# --------------------------------------------------------------------------------------------------
# reductions
add("sum", g.reduction(dtype_kw=True), errors=g.reduction_errors(), category="reduction")
# NumPy's keyword names, which PyTorch's argument parser takes too
add("sum[numpy-names]", [S(T(3, 4), 1, keepdims=True), S(T(3, 4), axis=0)], forms=("function", "method"))
add("flip[varargs]", [S(T(2, 3, 4), 0, 2), S(T(2, 3), 1)], forms=("method",))
add("permute[varargs]", [S(T(2, 3, 4), 2, 0, 1)], forms=("method",))
add("nansum", g.reduction(dtype_kw=True), errors=g.reduction_errors(), category="reduction")
add("mean", g.reduction(dtype_kw=True, ints=False), errors=g.reduction_errors(), category="reduction")
add("nanmean", g.reduction(ints=False), errors=g.reduction_errors(), category="reduction")
add("prod", g.reduction(dtype_kw=True, tuple_dims=False), errors=g.reduction_errors(), category="reduction")


def _empty_extreme(family="RuntimeError/ValueError"):
    """A reduction with no identity over a whole empty tensor: PyTorch's RuntimeError (IndexError for
    argmax and argmin; over an empty dim, IndexError for all, as the zero-size samples check)."""
    return [E(T(0, 3), family=family, name="zero-size-no-dim")]


add("amax", g.reduction(ties=True), errors=g.reduction_errors() + _empty_extreme(), category="reduction")
add("amin", g.reduction(ties=True), errors=g.reduction_errors() + _empty_extreme(), category="reduction")
add(
    "max",
    g.reduction(ties=True, tuple_dims=False),
    errors=g.reduction_errors() + _empty_extreme(),
    category="reduction",
)
add(
    "min",
    g.reduction(ties=True, tuple_dims=False),
    errors=g.reduction_errors() + _empty_extreme(),
    category="reduction",
)
add("max[binary]", g.binary(ties=True, scalars=False), forms=("function", "method"))
add("min[binary]", g.binary(ties=True, scalars=False), forms=("function", "method"))
for _name in ("argmax", "argmin"):
    add(
        _name,
        g.reduction(tuple_dims=False, ties=True),
        errors=g.reduction_errors() + _empty_extreme("IndexError"),
        category="reduction",
        grad=False,
    )
add("var", g.reduction(ints=False), errors=g.reduction_errors(), category="reduction")
add("std", g.reduction(ints=False), errors=g.reduction_errors(), category="reduction")
add("var_mean", g.reduction(ints=False), errors=g.reduction_errors(), category="reduction")
add("std_mean", g.reduction(ints=False), errors=g.reduction_errors(), category="reduction")
for _name in ("var", "std"):
    add(
        f"{_name}[correction]",
        [
            S(T(3, 4, dtype="float64"), 1, correction=0),
            S(T(3, 4, dtype="float64"), 1, False),
            S(T(3, 4, dtype="float64"), dim=(0, 1), correction=2),
            S(T(1, 4), 0),
            S(T(3, 4), unbiased=False),
        ],
        forms=("function", "method"),
    )
add(
    "logsumexp",
    g.reduction(dim_required=True)
    + [
        S(T(values=[[1e8, 1e8, 0.0], [-np.inf, -np.inf, -np.inf]]), 1, name="huge-and-all-neg-inf"),
        S(T(values=[np.inf, 1.0]), 0, name="inf"),
    ],
    errors=g.reduction_errors(),
    category="reduction",
)
add(
    "norm",
    g.reduction(tuple_dims=False, ints=False, keepdim=False)
    + [
        S(T(3, 4, dtype="float64"), 1, name="p1"),
        S(T(3, 4, dtype="float64"), 2, 1, True, name="p2-dim1-keepdim"),
        S(T(3, 4, dtype="float64"), float("inf"), name="pinf"),
        S(T(3, 4, dtype="float64"), 3, 1, name="p3-dim1"),
        S(T(3, 4, dtype="float64"), "fro", (0, 1), name="fro-dims"),
        S(T(values=[0.0, 0.0], dtype="float64"), name="zeros-grad"),
        S(T(values=[3e38, 3e38]), name="overflow-f32"),
    ],
    category="reduction",
)
add("all", g.reduction(grad=False), errors=g.reduction_errors(), category="reduction", grad=False)
add("any", g.reduction(grad=False), errors=g.reduction_errors(), category="reduction", grad=False)
add(
    "count_nonzero",
    [
        S(T(values=[[0.0, 1.0], [2.0, 0.0]])),
        S(T(values=[[0.0, 1.0], [2.0, 0.0]]), 1),
        S(T(values=[[0.0, 1.0], [2.0, 0.0]]), (0, 1)),
        S(T(0, 3)),
        S(T(5, dtype="bool")),
    ],
    grad=False,
)
add(
    "aminmax",
    [
        S(T(3, 4)),
        S(T(3, 4), dim=1),
        S(T(3, 4), dim=0, keepdim=True),
        S(T(5, dtype="int64")),
        S(T()),
        S(T(values=[1.0, np.nan])),
    ],
    errors=[E(T(0, 3), family="RuntimeError/ValueError")],
)
add("cumsum", g.cumulative(), errors=g.reduction_errors(), category="reduction")
add("cumprod", g.cumulative(), errors=g.reduction_errors(), category="reduction")
# PyTorch's median of an expanded (stride-0) input is wrong itself (2.13): that sample is left out
add(
    "median",
    [s for s in g.reduction(tuple_dims=False, ties=True, zero_size_full=False) if s.name != "dim0-expanded"]
    + [S(T(0, 3), name="zero-size-whole")],  # NaN
    errors=[E(T(0, 3), 0, family="IndexError", name="zero-size-dim0")],
    category="reduction",
)
add(
    "cov",
    [
        S(T(3, 5, dtype="float64")),
        S(T(5, dtype="float64")),
        S(T(3, 5, dtype="float64"), correction=0),
        S(T(3, 5), fweights=T(values=np.array([1, 2, 1, 1, 3]))),
    ],
)
add("corrcoef", [S(T(3, 5, dtype="float64")), S(T(2, 4))])
add(
    "bincount",
    [S(idx(0, 1, 1, 3)), S(idx(0, 1, 1, 3), T(4, dtype="float64")), S(idx(0, 1), minlength=5), S(T(0, dtype=I64))],
    errors=[E(idx(-1, 2), family="RuntimeError/ValueError"), E(T(3), family="RuntimeError/ValueError")],
    grad=False,
)
add("histc", [S(T(10)), S(T(10), 4, -1.0, 1.0), S(T(values=[0.0, 1.0, 1.0, 2.0]), 2, 0, 2)], grad=False)

# --------------------------------------------------------------------------------------------------
# sorting and searching
SORT_SAMPLES = [
    S(T(3, 4, dtype="float64")),
    S(T(3, 4), 0),
    S(T(3, 4), descending=True),
    S(T(values=[3.0, 1.0, 3.0, 2.0, 1.0]), stable=True, name="ties"),
    S(T(values=[np.nan, 1.0, -np.inf, np.inf, 0.0, -0.0]), name="nan-inf"),
    S(T(5, dtype="int64")),
    S(T(5, dtype="bool")),
    S(T(dtype="float64")),
    S(T(0, 3)),
    S(T(3, 4, view="t")),
]
add("sort", SORT_SAMPLES, errors=[E(T(3, 4), 2, family="IndexError")])
add(
    "argsort",
    [s for s in SORT_SAMPLES if "stable" not in s.kwargs],
    errors=[E(T(3, 4), 2, family="IndexError")],
    grad=False,
)
add("msort", [S(T(3, 4, dtype="float64")), S(T(5, dtype="int64")), S(T(0, 3))])
add(
    "topk",
    [
        S(T(3, 5, dtype="float64"), 2),
        S(T(3, 5), 2, 0),
        S(T(3, 5), 2, largest=False),
        S(T(values=[1.0, 3.0, 3.0, 2.0]), 2, name="ties"),
        S(T(values=[np.nan, 1.0, 2.0]), 1, name="nan"),
        # a wide range, so that no two values tie: PyTorch leaves the order of tied indices to its kernel
        S(T(5, dtype="int64", low=-1000, high=1000), 3),
        S(T(dtype="float64"), 1),
        S(T(3, 5), 0),
    ],
    errors=[
        E(T(5), 6, family="RuntimeError/ValueError"),
        E(T(3, 4), 1, 2, family="IndexError"),
        E(T(5), 1.5, family="TypeError", name="float-k"),
    ],
)
add(
    "kthvalue",
    [
        S(T(3, 5, dtype="float64"), 2),
        S(T(3, 5), 1, 0),
        S(T(3, 5), 2, keepdim=True),
        S(T(values=[2.0, 1.0, 2.0, 2.0]), 2, name="ties"),
        S(T(), 1),
    ],
    errors=[
        E(T(5), 6, family="RuntimeError/ValueError"),
        E(T(), 2, family="RuntimeError/ValueError", name="0d-k2"),
        E(T(0, 3), 1, 0, family="IndexError", name="empty-dim"),  # no identity: PyTorch's IndexError
    ],
)
add(
    "quantile",
    [
        S(T(3, 5, dtype="float64"), 0.3),
        S(T(3, 5, dtype="float64"), 0.3, 1),
        S(T(3, 5), T(values=[0.25, 0.75]), 1, True),
        S(T(7), 0.5, interpolation="lower"),
        S(T(7), 0.5, interpolation="nearest"),
        S(T(7), 0.5, interpolation="midpoint"),
        S(T(7), 0.4, interpolation="higher"),
    ],
    errors=[
        E(T(5), 1.5, family="RuntimeError/ValueError"),
        E(T(5, dtype="int64"), 0.5, family="RuntimeError/ValueError"),
    ],
)
add(
    "unique",
    [
        S(T(values=[3.0, 1.0, 3.0, 2.0])),
        S(T(values=[3.0, 1.0, 3.0, 2.0]), return_inverse=True, return_counts=True),
        S(T(values=np.array([[1, 2], [1, 2], [0, 5]])), dim=0),
        S(T(0)),
        S(T(values=np.array([2, 2, 1])), sorted=True),
    ],
    grad=False,
)
add(
    "unique_consecutive",
    [S(T(values=[1.0, 1.0, 2.0, 2.0, 1.0])), S(T(values=np.array([1, 1, 2])), return_counts=True)],
    grad=False,
)
add(
    "searchsorted",
    [
        S(T(values=[1.0, 2.0, 3.0, 5.0]), T(values=[0.0, 2.0, 4.0, 6.0])),
        S(T(values=[1.0, 2.0, 3.0, 5.0]), T(values=[2.0, 5.0]), right=True),
        S(T(values=[1.0, 2.0, 3.0, 5.0]), 2.0),
        S(T(values=[[1.0, 3.0], [2.0, 4.0]]), T(values=[[2.0], [3.0]])),
        S(T(values=[1.0, 2.0, 3.0]), T(values=[2.0]), side="right", out_int32=True),
    ],
    errors=[E(T(), T(values=[2.0]), family="RuntimeError/ValueError", name="0d-boundaries")],
    grad=False,
)
add(
    "bucketize",
    [
        S(T(values=[0.0, 2.0, 4.0, 6.0]), T(values=[1.0, 2.0, 3.0, 5.0])),
        S(T(values=[2.0, 5.0]), T(values=[1.0, 2.0, 3.0, 5.0]), right=True),
        S(T(values=np.array([1, 4])), T(values=[1.0, 2.0, 3.0, 5.0]), out_int32=True),
    ],
    grad=False,
)
add("rsub", g.binary(alpha=True), errors=g.binary_errors(), category="binary")

# --------------------------------------------------------------------------------------------------
# shape ops (the result is often a view: its strides are compared with PyTorch's)
R = "RuntimeError/ValueError"
add(
    "view",
    [
        S(T(2, 6), 3, 4),
        S(T(2, 6), (4, 3)),
        S(T(2, 6), -1),
        S(T(2, 6), 12, 1),
        S(T(0, 3), 3, 0),
        S(T(), 1),
        S(T(1), ()),
        S(T(2, 6, dtype="float64"), 4, -1),
    ],
    errors=[E(T(2, 6), 5, family=R), E(T(3, 4, view="t"), 12, family=R), E(T(2, 6), -1, -1, family=R)],
)
add(
    "reshape",
    [
        S(T(2, 6), 3, 4),
        S(T(2, 6), (4, 3)),
        S(T(2, 6), -1),
        S(T(3, 4, view="t"), 12),
        S(T(0, 3), -1, 3),
        S(T(), 1, 1),
        S(T(2, 6, dtype="float64"), 4, -1),
        S(T(2, 6), shape=(3, 4)),
    ],
    errors=[E(T(2, 6), 5, family=R), E(T(0, 3), -1, 0, family=R)],
)
add("view_as", [S(T(2, 6), T(3, 4)), S(T(2, 6, dtype="float64"), T(12))])
add("reshape_as", [S(T(2, 6), T(3, 4)), S(T(3, 4, view="t", dtype="float64"), T(12))])
add("expand_as", [S(T(3, 1, dtype="float64"), T(3, 4)), S(T(), T(2, 2))])
add(
    "flatten",
    [
        S(T(2, 3, 4)),
        S(T(2, 3, 4, dtype="float64"), 1),
        S(T(2, 3, 4), 0, 1),
        S(T(2, 3, 4), -2, -1),
        S(T()),
        S(T(0, 3)),
        S(T(2, 3, 4, view="t"), 1),
    ],
    errors=[E(T(2, 3), 3, family="IndexError"), E(T(2, 3, 4), 2, 1, family=R)],
)
add(
    "unflatten",
    [S(T(2, 12), 1, (3, 4)), S(T(2, 12, dtype="float64"), 1, (-1, 4)), S(T(2, 12), -1, (2, 2, 3))],
    errors=[E(T(2, 12), 1, (5, 3), family=R)],
)
add(
    "squeeze",
    [
        S(T(2, 1, 3)),
        S(T(2, 1, 3, dtype="float64"), 1),
        S(T(2, 1, 3), 0),
        S(T(1, 1, 1), (0, 2)),
        S(T()),
        S(T(), 0),
        S(T(1, 0)),
    ],
    errors=[E(T(2, 3), 2, family="IndexError")],
)
add(
    "unsqueeze",
    [S(T(2, 3, dtype="float64"), 0), S(T(2, 3), -1), S(T(), 0), S(T(2, 3), 2), S(T(3, 4, view="t"), 1)],
    errors=[E(T(2, 3), 4, family="IndexError")],
)
add(
    "permute",
    [
        S(T(2, 3, 4, dtype="float64"), 2, 0, 1),
        S(T(2, 3, 4), (2, 0, 1)),
        S(T(2, 3, 4), -1, 0, 1),
        S(T(), ()),
        S(T(2, 3), dims=(1, 0)),
    ],
    errors=[E(T(2, 3, 4), 0, 0, 1, family=R), E(T(2, 3), 0, family=R)],
)
add(
    "transpose",
    [S(T(2, 3, 4, dtype="float64"), 0, 2), S(T(2, 3), -1, 0), S(T(), 0, -1), S(T(3, 4, view="slice"), 0, 1)],
    errors=[E(T(2, 3), 0, 2, family="IndexError")],
)
add(
    "swapaxes",
    [S(T(2, 3, 4, dtype="float64"), 0, 2), S(T(2, 3), axis0=-1, axis1=0), S(T(), 0, -1)],
    errors=[E(T(2, 3), 0, 2, family="IndexError")],
)
add("t", [S(T(3, 4, dtype="float64")), S(T(3)), S(T())], errors=[E(T(2, 3, 4), family=R)])
add("T", [S(T(3, 4, dtype="float64")), S(T(3)), S(T(2, 3, 4))])
add("mT", [S(T(3, 4, dtype="float64")), S(T(2, 3, 4))], errors=[E(T(3), family=R)])
add(
    "movedim",
    [S(T(2, 3, 4, dtype="float64"), 0, 2), S(T(2, 3, 4), (0, 1), (2, 0)), S(T(2, 3, 4), -1, 0)],
    errors=[E(T(2, 3), 0, 2, family="IndexError")],
)
add(
    "expand",
    [
        S(T(3, 1, dtype="float64"), 3, 4),
        S(T(3, 1), -1, 4),
        S(T(3), 2, 3),
        S(T(), 2, 2),
        S(T(3, 1), (2, 3, 4)),
        S(T(1, 3), 0, 3),
    ],
    errors=[E(T(3, 2), 3, 4, family=R), E(T(3, 1), 4, family=R)],
)
add(
    "broadcast_to",
    [S(T(3, 1, dtype="float64"), (3, 4)), S(T(), (2,)), S(T(3), (0, 3))],
    errors=[E(T(3, 2), (3, 4), family=R)],
)
add(
    "broadcast_tensors",
    [S(T(3, 1, dtype="float64"), T(4, dtype="float64")), S(T(), T(2, 3)), S(T(0, 1), T(3))],
    errors=[E(T(3), T(4), family=R)],
)
add(
    "flip",
    [
        S(T(2, 3, 4, dtype="float64"), (0, 2)),
        S(T(2, 3, 4), [1]),
        S(T(2, 3, 4), 0),
        S(T(), (0,)),
        S(T(0, 3), (0,)),
        S(T(3, 4, view="t"), (1,)),
    ],
    errors=[E(T(2, 3), (2,), family="IndexError"), E(T(2, 3), (0, 0), family=R)],
)
add("fliplr", [S(T(3, 4, dtype="float64")), S(T(2, 3, 4))], errors=[E(T(3), family=R)])
add("flipud", [S(T(3, 4, dtype="float64")), S(T(3))], errors=[E(T(), family=R)])
add(
    "narrow",
    [S(T(4, 5, dtype="float64"), 1, 1, 3), S(T(4, 5), -1, 0, 2), S(T(4, 5), 0, 4, 0), S(T(4, 5), 0, -2, 2)],
    errors=[E(T(4, 5), 1, 3, 5, family=R), E(T(), 0, 0, 1, family=R)],
)
add("contiguous", [S(T(3, 4, view="t")), S(T(3, 4, dtype="float64")), S(T(0, 3))])
add("clone", [S(T(3, 4, view="t")), S(T(3, 4, dtype="float64")), S(T(0, 3)), S(T(5, dtype="int32"))], strides=True)
add(
    "cat",
    [
        S([T(2, 3, dtype="float64"), T(1, 3, dtype="float64")]),
        S([T(2, 3), T(2, 4)], 1),
        S((T(2, 3), T(2, 3)), dim=-1),
        S([T(2, 3), T(0, 3)], name="zero-size"),
        S([T(2, 3), T(0)], name="legacy-empty-1d"),
        S([T(2, 3, dtype="int32"), T(2, 3)], name="promote-int32-f32"),
        S([T(2, dtype="bool"), T(2, dtype="int64")], name="promote-bool-int64"),
        S([T(3, 4, view="t"), T(4, 3)], name="views"),
        S([T(3, dtype="float16"), T(3, dtype="float64")], name="promote-f16-f64"),
    ],
    errors=[
        E([T(2, 3), T(2, 4)], family=R),
        E([], family=R),
        E([T(), T()], family=R),
        E([T(2, 3), T(2, 3)], 2, family="IndexError"),
    ],
)
add("concat", [S([T(2, 3), T(1, 3)]), S([T(2, 3, dtype="float64"), T(2, 1, dtype="float64")], 1)])
add("concatenate", [S([T(2, 3), T(1, 3)]), S([T(2, 3), T(2, 1)], 1)])
add(
    "stack",
    [
        S([T(2, 3, dtype="float64"), T(2, 3, dtype="float64")]),
        S([T(2, 3), T(2, 3)], 2),
        S([T(), T()]),
        S([T(2, 3), T(2, 3)], dim=-1),
        S([T(2, dtype="int32"), T(2)], name="promote"),
        S([T(0, 3), T(0, 3)], 1),
    ],
    errors=[E([T(2, 3), T(3, 2)], family=R), E([], family=R), E([T(2), T(2)], 3, family="IndexError")],
)
add(
    "split",
    [
        S(T(5, 4, dtype="float64"), 2),
        S(T(5, 4), [2, 3]),
        S(T(5, 4), 2, 1),
        S(T(5, 4), 10),
        S(T(0, 4), 2),
        S(T(5, 4), split_size_or_sections=(1, 4)),
    ],
    errors=[E(T(5, 4), [2, 2], family=R), E(T(), 1, family=R)],
)
add(
    "chunk",
    [S(T(5, 4, dtype="float64"), 2), S(T(5, 4), 3, 1), S(T(0, 4), 2), S(T(6, 4), 4)],
    errors=[E(T(), 2, family=R), E(T(5), 0, family=R)],
)
add("unbind", [S(T(3, 4, dtype="float64")), S(T(3, 4), 1), S(T(0, 4), 1)], errors=[E(T(), family="IndexError")])
add(
    "select",
    [S(T(3, 4, dtype="float64"), 1, 2), S(T(3, 4), 0, -1), S(T(3, 4, view="t"), 1, 0)],
    errors=[E(T(3, 4), 0, 3, family="IndexError"), E(T(), 0, 0, family="IndexError")],
)
add(
    "repeat",
    [S(T(2, 3, dtype="float64"), 2, 2), S(T(2, 3), 2, 1, 2), S(T(), 3), S(T(3), (2,)), S(T(2, 3), 0, 1)],
    errors=[E(T(2, 3), 2, family=R)],
)
add(
    "roll",
    [
        S(T(3, 4, dtype="float64"), 1),
        S(T(3, 4), 1, 0),
        S(T(3, 4), (1, 2), (0, 1)),
        S(T(3, 4), -5, 1),
        S(T(), 1),
        S(T(0, 3), 1, 0),
    ],
    errors=[E(T(3, 4), (1, 2), 0, family=R)],
)
add(
    "meshgrid",
    [
        S(T(3, dtype="float64"), T(4, dtype="float64"), indexing="ij"),
        S(T(3), T(4), indexing="xy"),
        S([T(2), T(3)], indexing="ij"),
        S(T(), T(2), indexing="ij"),
    ],
    # an item that is no tensor: PyTorch's argument parser refuses it before the shapes are looked at
    errors=[E(T(2, 3), True, family="TypeError", name="not-a-tensor")],
)
add(
    "repeat_interleave",
    [
        S(T(3, dtype="float64"), 2),
        S(T(2, 3), 2, 0),
        S(T(2, 3, dtype="float64"), idx(1, 2), 0),
        S(idx(1, 0, 2)),
        S(T(2, 3), 2),
    ],
    errors=[E(T(2, 3), idx(1, 2, 3), 0, family=R)],
)
for _name in ("atleast_1d", "atleast_2d", "atleast_3d"):
    add(_name, [S(T(dtype="float64")), S(T(3)), S(T(2, 3)), S(T(2, 3, 4, 5))])
for _name in ("hstack", "vstack", "dstack", "column_stack", "row_stack"):
    add(_name, [S([T(2, 3, dtype="float64"), T(2, 3, dtype="float64")]), S([T(3), T(3)]), S([T(), T()])])
add("tile", [S(T(2, 3, dtype="float64"), (2,)), S(T(2, 3), (2, 1, 2)), S(T(), (3,)), S(T(2, 3), [1, 1])])
add(
    "tensor_split",
    [S(T(7, 3, dtype="float64"), 3), S(T(7, 3), [1, 4]), S(T(7, 3), 2, 1), S(T(7, 3), idx(2, 5))],
    errors=[E(T(), 2, family="RuntimeError/ValueError", name="0d")],
)
add(
    "rot90",
    [S(T(3, 4, dtype="float64")), S(T(3, 4), 2), S(T(2, 3, 4), 1, (1, 2)), S(T(3, 4), -1), S(T(3, 4), 4)],
    errors=[E(T(3), family=R), E(T(3, 4), 1, (0, 0), family=R)],
)
add("pixel_shuffle", [S(T(1, 8, 2, 3, dtype="float64"), 2), S(T(8, 2, 3), 2)], errors=[E(T(1, 7, 2, 3), 2, family=R)])
add("pixel_unshuffle", [S(T(1, 2, 4, 6, dtype="float64"), 2), S(T(2, 4, 6), 2)], errors=[E(T(1, 2, 5, 6), 2, family=R)])
add("channel_shuffle", [S(T(1, 6, 2, 2, dtype="float64"), 3), S(T(2, 4, 3), 2)], errors=[E(T(1, 5, 2), 2, family=R)])
add(
    "diff",
    [
        S(T(5, dtype="float64")),
        S(T(3, 4), 2, 0),
        S(T(3, 4, dtype="float64"), 1, -1, prepend=T(3, 1, dtype="float64")),
        S(T(3, 4), append=T(3, 2)),
        S(T(5, dtype="int64")),
        S(T(5, dtype="bool")),
    ],
    errors=[E(T(), family=R)],
)
add(
    "block_diag",
    [S(T(2, 3, dtype="float64"), T(1, 2, dtype="float64")), S(T(2), T()), S(T(2, 2), T(2, 1, dtype="int64"))],
    errors=[E(T(2), (0, 1), family="TypeError", name="not-a-tensor")],
)
add(
    "cartesian_prod",
    [S(T(3, dtype="float64"), T(2, dtype="float64")), S(T(3)), S(idx(1, 2), idx(3, 4), idx(5))],
    errors=[E(T(2), 2, family="TypeError", name="not-a-tensor")],
)
add("diag_embed", [S(T(2, 3, dtype="float64")), S(T(3), 1), S(T(2, 3), -1, 0, 2)])
add(
    "pad",
    [
        S(T(2, 3, dtype="float64"), (1, 2)),
        S(T(1, 2, 3, 4, dtype="float64"), (1, 1, 2, 0)),
        S(T(1, 2, 3, 4), (1, 1), value=2.5),
        S(T(1, 2, 5, dtype="float64"), (2, 1), mode="reflect"),
        S(T(1, 2, 5, dtype="float64"), (2, 1), mode="replicate"),
        S(T(1, 2, 5, dtype="float64"), (2, 1), mode="circular"),
        S(T(1, 2, 3, 4), (1, 1, 1, 1), mode="reflect"),
        S(T(2, 3), (-1, 1)),
        S(T(2, 3, dtype="int64"), (1, 1), value=3),
    ],
    errors=[E(T(2, 3), (1,), family=R), E(T(1, 2, 3), (3, 3), mode="reflect", family=R)],
)

# --------------------------------------------------------------------------------------------------
# indexing
add(
    "gather",
    [
        S(T(3, 4, dtype="float64"), 1, idx([[0, 1], [3, 3], [2, 0]])),
        S(T(3, 4), 0, idx([[0, 1, 2, 0]])),
        S(T(3, 4), -1, idx([[0], [1], [2]])),
        S(T(dtype="float64"), 0, T(values=np.array(0), dtype=I64)),
        S(T(3, 4), 1, T(3, 0, dtype=I64)),
    ],
    errors=[
        E(T(3, 4), 1, idx([[4]]), family=R),
        E(T(3, 4), 1, T(values=[[0.0]]), family=R),
        E(T(3, 4), 2, idx([[0]]), family="IndexError"),
    ],
)
for _name in ("scatter_add", "scatter"):
    add(
        _name,
        [
            S(T(3, 4, dtype="float64"), 1, idx([[0, 1], [3, 3], [2, 0]]), T(3, 2, dtype="float64")),
            S(T(3, 4), 0, idx([[0, 1, 2, 0]]), T(1, 4)),
            S(T(3, 4), 0, idx([[1, 1, 1, 1]]), T(2, 4), name="duplicates-smaller-index"),
        ]
        + (
            [
                S(T(3, 4), 1, idx([[0], [1], [2]]), 2.5, name="scalar-src"),
                S(T(3, 4), 1, idx([[0, 0]]), T(1, 2), reduce="add", name="reduce-add"),
            ]
            if _name == "scatter"
            else []
        ),
        errors=[E(T(3, 4), 1, idx([[4]]), T(1, 1), family=R)],
    )
add(
    "scatter_reduce",
    [
        S(T(3, 4, dtype="float64"), 1, idx([[0, 0], [3, 3], [2, 0]]), T(3, 2, dtype="float64"), "sum"),
        S(T(3, 4, dtype="float64"), 1, idx([[0, 0], [3, 3], [2, 0]]), T(3, 2, dtype="float64"), "prod"),
        S(T(3, 4), 1, idx([[0, 0], [3, 3], [2, 0]]), T(3, 2), "mean"),
        S(T(3, 4, dtype="float64"), 1, idx([[0, 0], [3, 3], [2, 0]]), T(3, 2, dtype="float64"), "amax"),
        S(T(3, 4), 1, idx([[0, 0], [3, 3], [2, 0]]), T(3, 2), "amin", include_self=False),
        S(T(3, 4), 1, idx([[0, 0], [3, 3], [2, 0]]), T(3, 2), "mean", include_self=False),
    ],
    errors=[E(T(3, 4), 1, idx([[0]]), T(1, 1), "bogus", family=R)],
)
add(
    "index_select",
    [
        S(T(3, 4, dtype="float64"), 1, idx(0, 3, 3)),
        S(T(3, 4), 0, idx(2)),
        S(T(3, 4), 0, T(0, dtype=I64)),
        S(T(5), 0, T(values=np.array(2), dtype=I64)),
        S(T(3, 4), 1, idx(1, 2, dtype="int32")),
    ],
    errors=[E(T(3, 4), 1, idx(4), family=R), E(T(3, 4), 0, T(values=[0.0]), family=R)],
)
add(
    "masked_fill",
    [
        S(T(3, 4, dtype="float64"), T(3, 4, dtype="bool"), 2.0),
        S(T(3, 4), T(4, dtype="bool"), -np.inf, name="broadcast-mask"),
        S(T(3, 4, dtype="float64"), T(3, 4, dtype="bool"), T(values=np.array(1.5)), name="0d-value"),
        S(T(3, dtype="int64"), mask(True, False, True), 7, name="int64"),
        S(T(3, dtype="int64"), mask(True, False, True), 7.5, name="int64-float-value"),
    ],
    errors=[
        E(T(3, 4), T(3, 4), 1.0, family=R),
        E(T(3, 4), T(5, dtype="bool"), 1.0, family=R),
        E(T(3, dtype="int32"), mask(True, False, True), 3e9, family=R, name="int32-overflow"),
        E(T(3, dtype="int64"), mask(True, False, True), float("nan"), family=R, name="int64-nan"),
        E(T(3, dtype="float16"), mask(True, False, True), 1e6, family=R, name="float16-overflow"),
    ],
)
for _name in ("tril", "triu"):
    add(
        _name,
        [
            S(T(3, 4, dtype="float64")),
            S(T(3, 4), 1),
            S(T(3, 4), -1),
            S(T(2, 3, 3)),
            S(T(0, 3)),
            S(T(3, 4, dtype="int64")),
        ],
        errors=[E(T(3), family=R)],
    )
add(
    "one_hot",
    [
        S(idx(0, 2, 1)),
        S(idx(0, 2, 1), 5),
        S(idx([[0, 1], [2, 0]])),
        S(T(0, dtype=I64), 3),
        S(T(values=np.array(1), dtype=I64), 3),
    ],
    errors=[E(idx(0, 3), 3, family=R), E(T(3), family=R), E(idx(-1, 0), family=R)],
    grad=False,
)
add(
    "masked_select",
    [
        S(T(3, 4, dtype="float64"), T(3, 4, dtype="bool")),
        S(T(3, 4), T(4, dtype="bool")),
        S(T(3, 4), T(3, 4, dtype="bool", view="t")),
    ],
    errors=[E(T(3, 4), T(3, 4), family=R)],
)
add(
    "nonzero",
    [
        S(T(values=[[0.0, 1.0], [2.0, 0.0]])),
        S(T(values=[[0.0, 1.0], [2.0, 0.0]]), as_tuple=True),
        S(T(0, 3)),
        S(T(values=np.array(1.0))),
        S(T(values=np.array(0.0))),
    ],
    grad=False,
)
add("argwhere", [S(T(values=[[0.0, 1.0], [2.0, 0.0]])), S(T(values=np.array(1.0)))], grad=False)
add(
    "index_add",
    [S(T(3, 4, dtype="float64"), 0, idx(0, 2, 0), T(3, 4, dtype="float64")), S(T(3, 4), 1, idx(1), T(3, 1), alpha=2.0)],
    errors=[
        E(T(3, 4), 0, idx(3), T(1, 4), family=R),
        E(T(3, 4), 0, idx(0), T(1, 4, dtype="int64"), family=R, name="source-of-another-dtype"),  # no promotion
    ],
)
add(
    "index_copy",
    [S(T(3, 4, dtype="float64"), 0, idx(0, 2), T(2, 4, dtype="float64")), S(T(3, 4), 1, idx(3), T(3, 1))],
    errors=[E(T(3, 4), 0, idx(0), T(1, 5), family=R)],
)
add("index_fill", [S(T(3, 4, dtype="float64"), 0, idx(0, 2), -1.0), S(T(3, 4), 1, idx(3), 2.0)])
add(
    "take_along_dim",
    [
        S(T(3, 4, dtype="float64"), idx([[0], [3], [1]]), 1),
        S(T(3, 4), idx(0, 5, 11)),
        S(T(3, 4), idx([[0, 1, 2, 0]]), dim=0),
    ],
)
add(
    "take",
    [S(T(3, 4, dtype="float64"), idx(0, 5, 11)), S(T(3, 4), idx([[0, -1]])), S(T(3, 4, view="t"), idx(1, 2))],
    errors=[E(T(3, 4), idx(12), family="IndexError")],
)
add(
    "put",
    [S(T(3, 4, dtype="float64"), idx(0, 5), T(2, dtype="float64")), S(T(3, 4), idx(0, 0), T(2), accumulate=True)],
    errors=[E(T(3, 4), idx(12), T(1), family="IndexError")],
)
add(
    "masked_scatter",
    [
        S(T(3, 4, dtype="float64"), T(3, 4, dtype="bool"), T(3, 4, dtype="float64")),
        S(T(3, 4), T(4, dtype="bool"), T(12)),
    ],
)
add(
    "diagonal",
    [
        S(T(3, 4, dtype="float64")),
        S(T(3, 4), 1),
        S(T(3, 4), -1),
        S(T(2, 3, 4), 0, 1, 2),
        S(T(3, 4), 5),
        S(T(3, 4, view="t")),
    ],
    errors=[E(T(3), family="IndexError"), E(T(3, 4), 0, 0, 0, family=R)],
)
add(
    "diag",
    [S(T(3, 4, dtype="float64")), S(T(3, dtype="float64")), S(T(3), 1), S(T(3, 4), -1), S(T(0))],
    errors=[E(T(2, 3, 4), family=R)],
)
add("trace", [S(T(3, 4, dtype="float64")), S(T(3, 3, dtype="int32")), S(T(0, 3))], errors=[E(T(3), family=R)])
add("diagflat", [S(T(2, 2, dtype="float64")), S(T(3), 1), S(T(3), -2), S(T()), S(T(0))])
add("ravel", [S(T(3, 4, dtype="float64")), S(T(3, 4, view="t")), S(T()), S(T(0, 3))])
add(
    "broadcast_shapes",
    [S((2, 1), (3,)), S((1,), (2, 3), (4, 1, 1)), S(3, (2, 1)), S()],
    grad=False,
    errors=[E((2,), (3,), family=R)],
)
add(
    "hsplit",
    [S(T(3, 4, dtype="float64"), 2), S(T(6), 3), S(T(3, 4), [1, 3])],
    errors=[E(T(3, 4), 3, family=R), E(T(), 1, family=R)],
)
add("vsplit", [S(T(4, 3, dtype="float64"), 2), S(T(4, 3), [1])], errors=[E(T(3), 3, family=R), E(T(3, 4), 2, family=R)])
add("dsplit", [S(T(2, 3, 4, dtype="float64"), 2), S(T(2, 3, 4), [1, 3])], errors=[E(T(3, 4), 2, family=R)])
add("narrow_copy", [S(T(3, 4, dtype="float64"), 1, 1, 2), S(T(3, 4), 0, -2, 2)], errors=[E(T(3, 4), 1, 3, 2, family=R)])
add(
    "select_scatter",
    [S(T(3, 4, dtype="float64"), T(4, dtype="float64"), 0, 1), S(T(3, 4), T(3), 1, -1)],
    errors=[E(T(3, 4), T(3), 0, 0, family=R)],
)
add(
    "slice_scatter",
    [
        S(T(4, 4, dtype="float64"), T(2, 4, dtype="float64"), 0, 0, 4, 2),
        S(T(3, 4), T(3, 2), 1, 1, 3),
        S(T(3, 4), T(3, 4)),
    ],
    errors=[E(T(3, 4), T(2, 4), 0, 0, 3, family=R)],
)
add("tril_indices", [S(3, 3), S(3, 4, 1), S(4, 3, -1), S(0, 3), S(3, 3, dtype=D("int32"))], grad=False, strides=True)
add("triu_indices", [S(3, 3), S(3, 4, 1), S(4, 3, -1), S(3, 3, dtype=D("int32"))], grad=False, strides=True)
add("fill_diagonal_", [S(T(3, 4), 2.0), S(T(5, 3), 1.0, wrap=True), S(T(3, 3, dtype="int64"), 7)])
add(
    "unfold[method]",
    [S(T(7, dtype="float64"), 0, 2, 1), S(T(3, 7), 1, 3, 2), S(T(3, 4), 0, 3, 1), S(T(), 0, 1, 1)],
    forms=("method",),
    errors=[E(T(7), 0, 8, 1, family=R)],
)
add(
    "unfold",
    [
        S(T(1, 2, 4, 5, dtype="float64"), 2),
        S(T(1, 2, 4, 5), (2, 3), stride=2),
        S(T(2, 4, 5), 2, padding=1, dilation=2),
        S(T(1, 1, 3, 3, dtype="bool"), 2, name="bool"),
    ],
    errors=[E(T(1, 1, 3, 3, dtype="int64"), 2, family=R)],
    forms=("functional",),
)
add("fold", [S(T(1, 8, 6, dtype="float64"), (3, 4), 2), S(T(1, 8, 12), (4, 5), 2, padding=(1, 0), stride=(1, 1))])
add(
    "index_put",
    [
        S(T(3, 4, dtype="float64"), (idx(0, 2),), T(4, dtype="float64")),
        S(T(3, 4, dtype="float64"), (idx(0, 0), idx(1, 1)), T(2, dtype="float64"), True, name="accumulate-duplicates"),
        S(T(3, 4), (T(3, 4, dtype="bool"),), T(values=np.array(1.0)), name="bool-mask"),
    ],
)


def _getitem(lib, x, key):
    return x[key]


def _setitem(lib, x, key, value):
    x[key] = value
    return x


def _range_key(lib, x, key):
    """A key with Python ranges and lists, built per library (both index with them)."""
    return x[key]


GETITEM = [
    S(T(3, 4, dtype="float64"), 1, name="int"),
    S(T(3, 4), -1, name="int-neg"),
    S(T(3, 4), slice(1, None), name="slice"),
    S(T(5, 4), slice(None, None, 2), name="slice-step"),
    S(T(3, 4), (Ellipsis, 1), name="ellipsis"),
    S(T(3, 4), (None, 1), name="none"),
    S(T(3, 4, dtype="float64"), idx(0, 2, 2), name="int-tensor"),
    S(T(3, 4), (idx(0, 2), idx(1, 3)), name="two-int-tensors"),
    S(T(3, 4), (slice(None), idx(1, 3)), name="slice-then-tensor"),
    S(T(3, 4, dtype="float64"), mask(True, False, True), name="bool-mask"),
    S(T(3, 4), T(3, 4, dtype="bool"), name="bool-mask-full"),
    S(T(2, 2, 4), (0, slice(None), [0, 1]), name="int-slice-list-pytorch-order"),
    S(T(2, 3, 4), (idx(0, 1), slice(None), idx(1, 2)), name="separated-advanced"),
    S(T(3, 4), [0, 2], name="list"),
    S(T(3, 4), (range(3), idx(0, 1, 2)), name="range-and-tensor"),
    S(T(3, 4), (), name="empty-tuple"),
    S(T(), (), name="0d-empty-tuple"),
    S(T(), None, name="0d-none"),
    S(T(3, 4), slice(5, 10), name="slice-past-end"),
    S(T(3, 4), (slice(None), slice(None, None, 3)), name="slice-step-dim1"),
    S(T(3, 4), True, name="python-true"),
    S(T(3, 4), idx([[0, 1], [2, 2]]), name="2d-int-tensor"),
    S(T(3, 4), T(values=np.array(1), dtype=I64), name="0d-int-tensor"),
]
add(
    "getitem",
    GETITEM,
    call=_getitem,
    errors=[
        E(T(3, 4), 3, name="int-out-of-range", family="IndexError"),
        E(T(3, 4), (0, 0, 0), name="too-many", family="IndexError"),
        E(T(3, 4), idx(5), name="tensor-out-of-range", family="IndexError"),
        E(T(3, 4), T(values=[0.0]), name="float-index", family="IndexError"),
    ],
)
add(
    "setitem",
    [
        S(T(3, 4), 1, 2.0, name="int"),
        S(T(3, 4), (slice(None), 1), T(3), name="slice-col"),
        S(T(3, 4), idx(0, 2), T(4), name="int-tensor"),
        S(T(3, 4), mask(True, False, True), -1.0, name="bool-mask"),
        S(T(2, 2, 4), (0, slice(None), [0, 1]), T(2, 2), name="int-slice-list-pytorch-order"),
        S(T(3, 4), (range(3), idx(0, 1, 2)), 5.0, name="range-and-tensor"),
        S(T(3, 4, dtype="int64"), 0, 2.7, name="int64-float-value"),
        S(T(), (), 3.0, name="0d"),
    ],
    call=_setitem,
    grad=False,
    errors=[E(T(3, 4), 0, T(5), name="shape-mismatch", family=R)],
)

# --------------------------------------------------------------------------------------------------
# linear algebra
add(
    "matmul",
    [
        S(T(3, 4, dtype="float64"), T(4, 5, dtype="float64")),
        S(T(4, dtype="float64"), T(4, dtype="float64")),
        S(T(4), T(4, 5)),
        S(T(3, 4), T(4)),
        S(T(2, 3, 4, dtype="float64"), T(4, 5, dtype="float64")),
        S(T(2, 1, 3, 4), T(5, 4, 2)),
        S(T(0, 4), T(4, 5)),
        S(T(3, 0), T(0, 5)),
        S(T(3, 4, view="t"), T(3, 2)),
        S(T(3, 4, dtype="float16"), T(4, 2, dtype="float16")),
        S(T(3, 4, dtype="int64"), T(4, 2, dtype="int64")),
    ],
    errors=[E(T(3, 4), T(5, 2), family=R), E(T(), T(3), family=R), E(T(3, 4), T(4, 2, dtype="float64"), family=R)],
)
add(
    "mm",
    [
        S(T(3, 4, dtype="float64"), T(4, 5, dtype="float64")),
        S(T(0, 4), T(4, 5)),
        S(T(3, 4, view="t"), T(3, 2, view="slice")),
        S(T(0, 4, dtype="bool"), T(4, 5, dtype="bool"), name="empty-bool"),  # no kernel runs: no dtype check
    ],
    errors=[
        E(T(3, 4), T(5, 2), family=R),
        E(T(3), T(3, 4), family=R),
        E(T(3, 4, dtype="bool"), T(4, 2, dtype="bool"), family=R),
    ],
)
add(
    "bmm",
    [S(T(2, 3, 4, dtype="float64"), T(2, 4, 5, dtype="float64")), S(T(0, 3, 4), T(0, 4, 5))],
    errors=[E(T(2, 3, 4), T(3, 4, 5), family=R), E(T(3, 4), T(4, 5), family=R)],
)
add("mv", [S(T(3, 4, dtype="float64"), T(4, dtype="float64")), S(T(0, 4), T(4))], errors=[E(T(3, 4), T(3), family=R)])
add(
    "dot",
    [S(T(4, dtype="float64"), T(4, dtype="float64")), S(T(0), T(0)), S(T(4, dtype="int64"), T(4, dtype="int64"))],
    errors=[E(T(3), T(4), family=R), E(T(3), T(3, dtype="float64"), family=R)],
)
add(
    "inner",
    [
        S(T(4, dtype="float64"), T(4, dtype="float64")),
        S(T(2, 4, dtype="float64"), T(3, 4, dtype="float64")),
        S(T(), T(3)),
    ],
)
add("outer", [S(T(3, dtype="float64"), T(4, dtype="float64")), S(T(3, dtype="int64"), T(2)), S(T(0), T(3))])
add(
    "linear",
    [
        S(T(2, 4, dtype="float64"), T(3, 4, dtype="float64"), T(3, dtype="float64")),
        S(T(2, 5, 4), T(3, 4)),
        S(T(4, dtype="float64"), T(3, 4, dtype="float64")),
        S(T(0, 4), T(3, 4), T(3)),
    ],
    errors=[E(T(2, 4), T(3, 5), family=R)],
)
add(
    "addmm",
    [
        S(T(3, 5, dtype="float64"), T(3, 4, dtype="float64"), T(4, 5, dtype="float64")),
        S(T(5), T(3, 4), T(4, 5), beta=0.5, alpha=2.0),
        S(T(3, 5), T(3, 4), T(4, 5), beta=0),
    ],
)
add(
    "addmv",
    [
        S(T(3, dtype="float64"), T(3, 4, dtype="float64"), T(4, dtype="float64")),
        S(T(3), T(3, 4), T(4), beta=0.5, alpha=2.0),
    ],
)
add(
    "addbmm",
    [
        S(T(3, 5, dtype="float64"), T(2, 3, 4, dtype="float64"), T(2, 4, 5, dtype="float64")),
        S(T(5), T(2, 3, 4), T(2, 4, 5), alpha=0.5),
    ],
)
add(
    "baddbmm",
    [
        S(T(2, 3, 5, dtype="float64"), T(2, 3, 4, dtype="float64"), T(2, 4, 5, dtype="float64")),
        S(T(3, 5), T(2, 3, 4), T(2, 4, 5), beta=2.0),
    ],
)
add(
    "einsum",
    [
        S("ij,jk->ik", T(3, 4, dtype="float64"), T(4, 5, dtype="float64")),
        S("bij,bjk->bik", T(2, 3, 4), T(2, 4, 5)),
        S("ii->i", T(3, 3)),
        S("i,j->ij", [T(3), T(4)]),
        S("...ij->...ji", T(2, 3, 4)),
        S("ij->", T(3, 4, dtype="float64")),
    ],
    errors=[E("ij,jk->ik", T(3, 4), T(5, 6), family=R)],
)
add(
    "tensordot",
    [
        S(T(3, 4, 5, dtype="float64"), T(4, 5, 2, dtype="float64")),
        S(T(3, 4), T(4, 5), 1),
        S(T(3, 4, 5), T(5, 4, 2), ([1, 2], [1, 0])),
    ],
)
add("kron", [S(T(2, 3, dtype="float64"), T(2, 2, dtype="float64")), S(T(3), T(2))])
add(
    "cross",
    [S(T(4, 3, dtype="float64"), T(4, 3, dtype="float64"), dim=1), S(T(3, 4), T(3, 4), 0)],
    errors=[E(T(4, 2), T(4, 2), dim=1, family=R)],
)
add(
    "dist",
    [
        S(T(3, 4, dtype="float64"), T(3, 4, dtype="float64")),
        S(T(3, 4), T(4), 1),
        S(T(3, dtype="float64"), T(3, dtype="float64"), float("inf")),
        S(T(3), T(3), 0),
    ],
)
add(
    "cdist",
    [
        S(T(3, 4, dtype="float64"), T(5, 4, dtype="float64")),
        S(T(2, 3, 4), T(2, 5, 4), 1.0),
        S(T(3, 4, dtype="float64"), T(5, 4, dtype="float64"), float("inf")),
    ],
    errors=[E(T(3, 4), T(5, 3), family=R)],
)
add(
    "pairwise_distance",
    [S(T(3, 4, dtype="float64"), T(3, 4, dtype="float64")), S(T(3, 4), T(4), 1.0), S(T(3, 4), T(3, 4), keepdim=True)],
)
add(
    "cosine_similarity",
    [
        S(T(3, 4, dtype="float64"), T(3, 4, dtype="float64")),
        S(T(3, 4), T(4), 0),
        S(T(values=[[0.0, 0.0]], dtype="float64"), T(values=[[1.0, 0.0]], dtype="float64")),
    ],
)
add("pdist", [S(T(4, 3, dtype="float64")), S(T(4, 3), 1.0)])
add(
    "bilinear",
    [
        S(T(2, 3, dtype="float64"), T(2, 4, dtype="float64"), T(5, 3, 4, dtype="float64"), T(5, dtype="float64")),
        S(T(2, 3), T(2, 4), T(5, 3, 4)),
    ],
)

# --------------------------------------------------------------------------------------------------
# softmax and losses


def labels(*values):
    return idx(*values)


for _name in ("softmax", "log_softmax", "softmin"):
    add(
        _name,
        [
            S(T(3, 4, dtype="float64"), 1),
            S(T(3, 4), 0),
            S(T(3, 4), -1),
            S(T(2, 3, 4, dtype="float64"), dim=1),
            S(T(values=[[1e8, 1e8, 0.0], [-1e30, 0.0, 1e30]]), 1, name="huge-logits"),
            S(T(values=[[-np.inf, 0.0, 1.0], [np.inf, 0.0, 1.0]]), 1, name="inf"),
            S(T(dtype="float64"), 0, name="0d"),
            S(T(0, 3), 1, name="zero-size"),
            S(T(3, 4, dtype="float16"), 1, name="f16"),
            S(T(3, 4), 1, dtype=D("float64"), name="dtype-f64"),
            S(T(3, 4, dtype="float16"), 1, dtype=D("float32"), name="dtype-f32-from-f16"),
            S(T(3, 4, view="t"), 1, name="transposed"),
            S(T(3, dtype="int64"), 0, name="int64"),
        ],
        errors=[E(T(3, 4), 2, family="IndexError")],
    )
add(
    "cross_entropy",
    [
        S(T(4, 3, dtype="float64"), labels(0, 2, 1, 1)),
        S(T(4, 3), labels(0, 2, 1, 1), reduction="sum"),
        S(T(4, 3), labels(0, 2, 1, 1), reduction="none"),
        S(T(4, 3, dtype="float64"), labels(0, 2, -100, 1), name="ignore-index"),
        S(T(2, 3, dtype="float64"), labels(-100, -100), name="all-ignored"),
        S(T(4, 3, dtype="float64"), labels(0, 2, 1, 1), ignore_index=1, name="ignore-index-1"),
        S(
            T(4, 3, dtype="float64"),
            labels(0, 2, 1, 1),
            weight=T(3, dtype="float64", low=0.5, high=2.0, grad=False),
            name="weight",
        ),
        S(T(4, 3, dtype="float64"), labels(0, 2, 1, 1), label_smoothing=0.2, name="label-smoothing"),
        S(
            T(4, 3, dtype="float64"),
            T(4, 3, dtype="float64", low=0.0, high=1.0, grad=False),
            name="probability-targets",
        ),
        S(T(2, 3, 5, dtype="float64"), idx([[0, 1, 2, 0, 1], [2, 2, 1, 0, 0]]), name="nd"),
        S(T(3, dtype="float64"), T(values=np.array(1), dtype=I64), name="unbatched"),
        S(T(values=[[1e8, 1e8, 0.0]]), labels(1), name="huge-logits"),
        S(T(values=[[3e4, 3e4 + 1, 0.0]], dtype="float64"), labels(1), name="large-logits-f64"),
        S(T(0, 3), T(0, dtype=I64), name="zero-size"),
        S(T(4, 3, dtype="float16"), labels(0, 2, 1, 1), name="f16"),
    ],
    errors=[
        E(T(4, 3), labels(0, 3, 1, 1), family="IndexError"),
        E(T(4, 3), labels(0, 1), family=R),
        E(T(4, 3), T(4), family=R),
    ],
)
add(
    "nll_loss",
    [
        S(T(4, 3, dtype="float64"), labels(0, 2, 1, 1)),
        S(T(4, 3), labels(0, 2, 1, 1), reduction="none"),
        S(T(4, 3, dtype="float64"), labels(0, 2, -100, 1), name="ignore-index"),
        S(T(2, 3, dtype="float64"), labels(-100, -100), name="all-ignored"),
        S(T(4, 3, dtype="float64"), labels(0, 2, 1, 1), weight=T(3, dtype="float64", grad=False), name="weight"),
        S(T(2, 3, 5), idx([[0, 1, 2, 0, 1], [2, 2, 1, 0, 0]]), name="nd"),
        S(T(0, 3), T(0, dtype=I64), name="zero-size"),
    ],
    errors=[E(T(4, 3), labels(0, 3, 1, 1), family="IndexError"), E(T(4, 3), labels(0, 1), family=R)],
)
add("mse_loss", g.loss(), errors=g.loss_errors())
add("l1_loss", g.loss(), errors=g.loss_errors())
add(
    "smooth_l1_loss",
    g.loss()
    + [
        S(
            T(values=[0.0, 1.0, -1.0, 0.5], dtype="float64"),
            T(values=[0.0, 0.0, 0.0, 0.0], dtype="float64"),
            beta=1.0,
            name="kinks",
        ),
        S(T(3, 4), T(3, 4), beta=0.0, name="beta0"),
    ],
)
add(
    "huber_loss",
    g.loss()
    + [
        S(
            T(values=[0.0, 1.0, -1.0, 0.5], dtype="float64"),
            T(values=[0.0, 0.0, 0.0, 0.0], dtype="float64"),
            delta=1.0,
            name="kinks",
        )
    ],
)
add("soft_margin_loss", g.loss(target_domain="small"))
add(
    "binary_cross_entropy",
    g.loss(domain="unit")
    + [
        S(
            T(values=[0.0, 1.0, 0.5], dtype="float64", grad=False),
            T(values=[0.0, 1.0, 1.0], dtype="float64"),
            name="edges",
        )
    ],
    errors=[
        E(T(3, low=0.1, high=0.9), T(values=[1.5, 0.0, 0.0]), family=R),
        E(T(values=[1.5, 0.5]), T(values=[1.0, 0.0]), family=R),
    ],
)
add(
    "binary_cross_entropy_with_logits",
    g.loss(target_domain="unit")
    + [
        S(T(values=[1e4, -1e4, 0.0], dtype="float64"), T(values=[0.0, 1.0, 1.0], dtype="float64"), name="huge-logits"),
        S(
            T(3, 4, dtype="float64"),
            T(3, 4, dtype="float64", low=0, high=1),
            pos_weight=T(4, dtype="float64", low=0.5, high=2.0),
            name="pos-weight",
        ),
        S(
            T(3, 4, dtype="float64"),
            T(3, 4, dtype="float64", low=0, high=1),
            weight=T(4, dtype="float64", low=0.5, high=2.0),
            name="weight",
        ),
    ],
)
add(
    "kl_div",
    g.loss(domain="small", target_domain="unit")
    + [
        S(
            T(3, 4, dtype="float64"),
            T(3, 4, dtype="float64"),
            log_target=True,
            reduction="batchmean",
            name="log-target",
        ),
        S(T(3, 4), T(values=np.zeros((3, 4))), reduction="sum", name="zero-target"),
    ],
)
add(
    "poisson_nll_loss",
    g.loss(target_domain="positive")
    + [
        S(
            T(3, 4, dtype="float64", low=0.1, high=2.0),
            T(3, 4, dtype="float64", low=0, high=3),
            log_input=False,
            full=True,
            name="full",
        )
    ],
)
add(
    "gaussian_nll_loss",
    [
        S(T(3, 4, dtype="float64"), T(3, 4, dtype="float64"), T(3, 4, dtype="float64", low=0.1, high=2.0)),
        S(T(3, 4), T(3, 4), T(3, 1, low=0.1, high=2.0), full=True, reduction="sum"),
        S(T(3, 4, dtype="float64"), T(3, 4, dtype="float64"), 0.5, name="scalar-var"),
    ],
    errors=[E(T(3, 4), T(3, 4), T(3, 4, low=-2.0, high=-1.0), family=R)],
)
add(
    "margin_ranking_loss",
    [
        S(T(4, dtype="float64"), T(4, dtype="float64"), T(values=[1.0, -1.0, 1.0, -1.0], dtype="float64", grad=False)),
        S(T(4), T(4), T(values=[1.0, -1.0, 1.0, -1.0]), margin=0.5, reduction="none"),
    ],
)
add(
    "hinge_embedding_loss",
    [
        S(T(4, dtype="float64"), T(values=[1.0, -1.0, 1.0, -1.0], dtype="float64", grad=False)),
        S(T(2, 3), T(values=[[1.0, -1.0, 1.0], [-1.0, -1.0, 1.0]]), margin=0.5, reduction="sum"),
    ],
)
add(
    "cosine_embedding_loss",
    [
        S(T(3, 4, dtype="float64"), T(3, 4, dtype="float64"), T(values=[1.0, -1.0, 1.0], dtype="float64", grad=False)),
        S(T(3, 4), T(3, 4), T(values=[1.0, -1.0, 1.0]), margin=0.2, reduction="none"),
    ],
)
add(
    "multilabel_soft_margin_loss",
    [
        S(T(3, 4, dtype="float64"), T(3, 4, dtype="float64", low=0, high=1, grad=False)),
        S(T(3, 4), T(values=np.eye(3, 4, dtype=np.float32)), reduction="none"),
    ],
)
add(
    "multi_margin_loss",
    [
        S(T(4, 3, dtype="float64"), labels(0, 2, 1, 1)),
        S(T(4, 3, dtype="float64"), labels(0, 2, 1, 1), p=2, margin=0.5),
        S(T(4, 3), labels(0, 2, 1, 1), reduction="none"),
    ],
)
add(
    "triplet_margin_loss",
    [
        S(T(3, 4, dtype="float64"), T(3, 4, dtype="float64"), T(3, 4, dtype="float64")),
        S(T(3, 4), T(3, 4), T(3, 4), swap=True, p=1.0, reduction="none"),
    ],
)
add(
    "triplet_margin_with_distance_loss",
    [
        S(T(3, 4, dtype="float64"), T(3, 4, dtype="float64"), T(3, 4, dtype="float64")),
        S(T(3, 4), T(3, 4), T(3, 4), margin=0.5, swap=True, reduction="sum"),
    ],
)
add(
    "glu",
    [S(T(3, 4, dtype="float64")), S(T(4, 3, dtype="float64"), 0), S(T(2, 6), dim=-1)],
    errors=[E(T(3, 5), family=R), E(T(), family=R)],
)
add("gumbel_softmax", [S(T(3, 4)), S(T(3, 4), hard=True)], values=False, grad=False)

# --------------------------------------------------------------------------------------------------
# normalisation
add(
    "layer_norm",
    [
        S(T(2, 3, 4, dtype="float64"), (4,), T(4, dtype="float64"), T(4, dtype="float64")),
        S(T(2, 3, 4, dtype="float64"), (3, 4)),
        S(T(2, 4), [4], eps=1e-3),
        S(T(2, 4, dtype="float16"), (4,)),
        S(T(0, 4), (4,)),
        S(T(values=[[1e4, 1e4 + 1, 1e4 + 2, 1e4 + 3]]), (4,), name="large-offset"),
        S(T(values=[[1.0, 1.0, 1.0]], dtype="float64"), (3,), name="constant-row"),
    ],
    errors=[E(T(2, 4), (3,), family=R)],
)
add(
    "rms_norm",
    [
        S(T(2, 3, 4, dtype="float64"), (4,), T(4, dtype="float64")),
        S(T(2, 4, dtype="float64"), [4]),
        S(T(2, 4), (4,), eps=1e-3),
        S(T(values=[[0.0, 0.0]], dtype="float64"), (2,), name="zeros"),
    ],
    errors=[E(T(2, 4), (3,), family=R)],
)
add(
    "normalize",
    [
        S(T(3, 4, dtype="float64")),
        S(T(3, 4, dtype="float64"), 1.0, 0),
        S(T(values=[[0.0, 0.0], [3.0, 4.0]], dtype="float64")),
        S(T(3), dim=0),
    ],
)
add(
    "batch_norm",
    [
        S(
            T(4, 3, dtype="float64"),
            T(3, grad=False, dtype="float64"),
            T(3, low=0.5, high=2.0, grad=False, dtype="float64"),
        ),
        S(T(4, 3, 5, dtype="float64"), None, None, T(3, dtype="float64"), T(3, dtype="float64"), training=True),
        S(T(4, 3, 2, 2), None, None, training=True, eps=1e-3),
    ],
    errors=[E(T(4, 3), T(2), T(2), family=R)],
)
add(
    "instance_norm",
    [
        S(T(2, 3, 5, dtype="float64")),
        S(T(2, 3, 4, 4, dtype="float64"), weight=T(3, dtype="float64"), bias=T(3, dtype="float64")),
    ],
)
add(
    "group_norm",
    [
        S(T(2, 4, 5, dtype="float64"), 2),
        S(T(2, 4, 5, dtype="float64"), 4, T(4, dtype="float64"), T(4, dtype="float64")),
        S(T(2, 6, 2, 2), 3, eps=1e-3),
    ],
    errors=[E(T(2, 4, 5), 3, family=R)],
)
add("local_response_norm", [S(T(2, 5, 4, dtype="float64"), 3), S(T(2, 5, 3, 3), 2, alpha=1e-2, beta=0.5, k=2.0)])

# --------------------------------------------------------------------------------------------------
# convolution and pooling
add(
    "conv1d",
    [
        S(T(2, 3, 7, dtype="float64"), T(4, 3, 3, dtype="float64"), T(4, dtype="float64")),
        S(T(2, 4, 7), T(4, 2, 3), stride=2, padding=1, groups=2),
        S(T(3, 7), T(2, 3, 2), dilation=2),
        S(T(1, 2, 5), T(2, 2, 3), padding="same"),
    ],
    errors=[E(T(2, 3, 7), T(4, 2, 3), family=R)],
)
add(
    "conv2d",
    [
        S(T(2, 3, 6, 5, dtype="float64"), T(4, 3, 3, 2, dtype="float64"), T(4, dtype="float64")),
        S(T(1, 4, 6, 6), T(4, 1, 3, 3), stride=(2, 1), padding=1, groups=4),
        S(T(1, 2, 7, 7), T(2, 2, 3, 3), dilation=2, padding="valid"),
        S(T(2, 6, 6), T(3, 2, 3, 3), padding="same"),
    ],
    errors=[E(T(2, 3, 6, 5), T(4, 2, 3, 3), family=R)],
)
add(
    "conv_transpose1d",
    [
        S(T(2, 3, 5, dtype="float64"), T(3, 4, 3, dtype="float64"), T(4, dtype="float64")),
        S(T(1, 4, 5), T(4, 2, 3), stride=2, padding=1, output_padding=1, groups=2),
    ],
)
add(
    "conv_transpose2d",
    [
        S(T(2, 3, 4, 3, dtype="float64"), T(3, 2, 3, 3, dtype="float64"), T(2, dtype="float64")),
        S(T(1, 2, 4, 4), T(2, 2, 2, 2), stride=2, padding=1, dilation=1),
    ],
)
add(
    "max_pool1d",
    [
        S(T(2, 3, 8, dtype="float64"), 2),
        S(T(2, 3, 9), 3, 2, 1),
        S(T(3, 8), 2, ceil_mode=True),
        S(T(2, 3, 8), 2, return_indices=True),
        S(T(values=[[[1.0, 1.0, 2.0, 2.0]]], dtype="float64"), 2, name="ties"),
    ],
)
add(
    "max_pool2d",
    [
        S(T(2, 3, 6, 6, dtype="float64"), 2),
        S(T(1, 2, 7, 7), 3, 2, 1),
        S(T(2, 5, 5), (2, 3), ceil_mode=True),
        S(T(1, 2, 6, 6), 2, return_indices=True),
        S(T(1, 1, 5, 5), 2, dilation=2),
        S(T(values=np.ones((1, 1, 4, 4)), dtype="float64"), 2, name="ties"),
    ],
    errors=[E(T(1, 1, 4, 4), 2, padding=2, family=R)],
)
add(
    "avg_pool1d",
    [
        S(T(2, 3, 8, dtype="float64"), 2),
        S(T(2, 3, 9), 3, 2, 1),
        S(T(2, 3, 9), 3, 2, 1, count_include_pad=False),
        S(T(3, 8), 3, ceil_mode=True),
    ],
)
add(
    "avg_pool2d",
    [
        S(T(2, 3, 6, 6, dtype="float64"), 2),
        S(T(1, 2, 7, 7), 3, 2, 1),
        S(T(1, 2, 7, 7), 3, 2, 1, count_include_pad=False),
        S(T(2, 5, 5), 2, divisor_override=3),
        S(T(1, 1, 5, 5), 2, ceil_mode=True),
    ],
)
add("lp_pool1d", [S(T(2, 3, 8, dtype="float64", low=0.1, high=2.0), 2.0, 2), S(T(2, 3, 9), 1.0, 3, 2)])
add("lp_pool2d", [S(T(2, 3, 6, 6, dtype="float64", low=0.1, high=2.0), 2.0, 2), S(T(1, 2, 7, 7), 3.0, 3, 2)])
add("adaptive_avg_pool1d", [S(T(2, 3, 8, dtype="float64"), 4), S(T(2, 3, 7), 3), S(T(3, 5), 1)])
add(
    "adaptive_avg_pool2d",
    [S(T(2, 3, 6, 6, dtype="float64"), 3), S(T(2, 3, 7, 5), (3, 2)), S(T(3, 5, 5), (None, 2)), S(T(1, 1, 4, 4), 1)],
)
add("adaptive_max_pool1d", [S(T(2, 3, 8, dtype="float64"), 4), S(T(2, 3, 7), 3, True)])
add(
    "adaptive_max_pool2d",
    [S(T(2, 3, 6, 6, dtype="float64"), 3), S(T(2, 3, 7, 5), (3, 2)), S(T(1, 1, 4, 4), 2, return_indices=True)],
)
add("max_unpool1d", [S(T(values=[[[4.0, 5.0]]], dtype="float64"), idx([[[1, 2]]]), 2)])
add(
    "max_unpool2d",
    [
        S(T(values=[[[[4.0, 5.0]]]], dtype="float64"), idx([[[[1, 3]]]]), 2),
        S(T(values=[[[[1.0]]]]), idx([[[[2]]]]), 2, output_size=(3, 2)),
    ],
)
add(
    "interpolate",
    [
        S(T(1, 2, 4, 4, dtype="float64"), scale_factor=2),
        S(T(1, 2, 3, 5), size=(6, 4)),
        S(T(1, 2, 4, 4, dtype="float64"), scale_factor=2, mode="bilinear"),
        S(T(1, 2, 4, 4, dtype="float64"), size=(5, 7), mode="bilinear", align_corners=True),
        S(T(1, 2, 5), scale_factor=2, mode="nearest"),
        S(T(1, 2, 5, dtype="float64"), size=8, mode="linear"),
        S(T(1, 2, 4, 4), scale_factor=0.5, mode="bilinear", antialias=False),
    ],
)
add(
    "affine_grid",
    [
        S(T(2, 2, 3, dtype="float64"), (2, 1, 4, 5), align_corners=False),
        S(T(1, 2, 3), [1, 3, 2, 2], align_corners=True),
    ],
)

# --------------------------------------------------------------------------------------------------
# embedding and attention
add(
    "embedding",
    [
        S(idx([0, 2], [1, 1]), T(4, 3, dtype="float64")),
        S(idx(0, 3), T(4, 3, dtype="float64"), padding_idx=0),
        S(T(0, dtype=I64), T(4, 3)),
        S(T(values=np.array(2), dtype=I64), T(4, 3)),
        S(idx(0, 3), T(4, 3, dtype="int64"), name="int64-rows"),
    ],
    errors=[E(idx(4), T(4, 3), family="IndexError"), E(T(values=[1.0]), T(4, 3), family=R)],
)
add(
    "embedding_bag",
    [
        S(idx(0, 2, 1, 3), T(4, 3, dtype="float64"), idx(0, 2)),
        S(idx([0, 2], [1, 3]), T(4, 3, dtype="float64"), mode="sum"),
        S(idx(0, 2, 1, 3), T(4, 3, dtype="float64"), idx(0, 1), mode="max"),
    ],
)
add(
    "scaled_dot_product_attention",
    [
        S(T(2, 3, 4, dtype="float64"), T(2, 5, 4, dtype="float64"), T(2, 5, 6, dtype="float64")),
        S(T(1, 2, 3, 4), T(1, 2, 3, 4), T(1, 2, 3, 4), is_causal=True),
        S(
            T(2, 3, 4, dtype="float64"),
            T(2, 5, 4, dtype="float64"),
            T(2, 5, 4, dtype="float64"),
            attn_mask=T(3, 5, dtype="bool"),
        ),
        S(T(2, 3, 4), T(2, 5, 4), T(2, 5, 4), attn_mask=T(3, 5), scale=0.3),
    ],
)

# --------------------------------------------------------------------------------------------------
# random ops: dtypes and shapes only (values cannot agree), except where the call is deterministic
for _name, _samples in {
    "rand": [S(2, 3), S((2, 3)), S(2, dtype=D("float64")), S(0, 3), S(size=(2, 3))],
    "randn": [S(2, 3), S((2, 3)), S(3, dtype=D("float16")), S(size=(4,))],
    "randint": [S(5, (2, 3)), S(-2, 5, (3,)), S(3, (2,), dtype=D("int32")), S(high=4, size=(2,))],
    "rand_like": [S(T(2, 3)), S(T(2, 3, dtype="float64")), S(T(2, 3), dtype=D("float16"))],
    "randn_like": [S(T(2, 3)), S(T(2, 3, dtype="float64"))],
    "randint_like": [S(T(2, 3), 5), S(T(2, 3, dtype="int32"), 1, 5)],
    "randperm": [S(5), S(0), S(4, dtype=D("int32"))],
    "multinomial": [S(T(4, low=0.1, high=1.0), 2), S(T(2, 4, low=0.1, high=1.0), 3, True)],
    "normal": [S(T(3, 4), T(3, 4, low=0.1, high=1.0)), S(0.0, 1.0, (2, 3)), S(T(3), 1.0)],
    "bernoulli": [S(T(3, 4, low=0.0, high=1.0)), S(T(3, 4), 0.5)],
    "dropout1d": [S(T(2, 3, 4), 0.5)],
    "dropout2d": [S(T(2, 3, 4, 4), 0.5)],
    "dropout3d": [S(T(2, 3, 2, 2, 2), 0.5)],
    "alpha_dropout": [S(T(3, 4), 0.5, True)],
    "feature_alpha_dropout": [S(T(2, 3, 4), 0.5, True)],
    "uniform_": [S(T(3, 4)), S(T(3, 4), -1.0, 1.0)],
    "normal_": [S(T(3, 4)), S(T(3, 4), 1.0, 2.0)],
    "bernoulli_": [S(T(3, 4), 0.3)],
    "exponential_": [S(T(3, 4)), S(T(3, 4), 2.0)],
    "random_": [S(T(3, 4)), S(T(3, 4), 0, 5), S(T(3, dtype="int64"), 10)],
    "log_normal_": [S(T(3, 4))],
    "geometric_": [S(T(3, 4), 0.5)],
    "cauchy_": [S(T(3, 4))],
}.items():
    add(_name, _samples, values=False, grad=False, category="random")
add(
    "dropout",
    [
        S(T(3, 4, dtype="float64"), 0.0),
        S(T(3, 4, dtype="float64"), 0.5, False),
        S(T(3, 4), p=0.5, training=False),
        S(T(3, 4), 1.0),
        S(T(3, 4, dtype="int64"), 0.5, False, name="int64-eval"),  # returned as it is, of any dtype
    ],
    errors=[E(T(3), 1.5, family=R)],
)
add("dropout[random]", [S(T(3, 4), 0.5)], forms=("functional",), values=False, grad=False)
for _name in ("alpha_dropout", "feature_alpha_dropout", "dropout1d", "dropout2d", "dropout3d"):
    add(f"{_name}[eval]", [S(T(2, 3, 4, 4, dtype="float64"), 0.5, False)], forms=("functional",))

# --------------------------------------------------------------------------------------------------
# factories (their outputs' strides are compared: empty tensors have PyTorch's)
FACTORY_SHAPES = [
    S(2, 3),
    S((2, 3)),
    S([4]),
    S(0, 5),
    S(()),
    S(2, 3, dtype=D("float64")),
    S(3, dtype=D("int32")),
    S(2, dtype=D("bool")),
    S(size=(3, 4)),
]
for _name in ("zeros", "ones"):
    add(_name, FACTORY_SHAPES, strides=True, grad=False)
add("empty", FACTORY_SHAPES, values=False, grad=False)
add(
    "full",
    [
        S((2, 3), 1.5),
        S((2, 3), 2),
        S((2,), True),
        S((0, 3), 1.0),
        S((), 7),
        S((2, 3), 1.5, dtype=D("float64")),
        S((2,), 3, dtype=D("float32")),
        S(size=(2,), fill_value=4.0),
    ],
    strides=True,
    grad=False,
)
LIKE = [S(T(2, 3)), S(T(2, 3, dtype="int64")), S(T(2, 3), dtype=D("float64")), S(T(0, 3)), S(T(3, 4, view="t"))]
for _name in ("zeros_like", "ones_like"):
    add(_name, LIKE, strides=True, grad=False)
add("empty_like", LIKE, values=False, grad=False)
add(
    "full_like",
    [S(T(2, 3), 2.5), S(T(2, 3, dtype="int64"), 3), S(T(2, 3, dtype="int64"), 3.7), S(T(2, 3), 1, dtype=D("int32"))],
    strides=True,
    grad=False,
)
add(
    "arange",
    [
        S(5),
        S(1, 4),
        S(0, 1, 0.25),
        S(5.0),
        S(10, 0, -3),
        S(0),
        S(1, 2, 0.3),
        S(3, dtype=D("float64")),
        S(start=2, end=5),
        S(-1.5, 1.5),
    ],
    errors=[E(0, 5, 0, family=R), E(5, 0, 1, family=R)],
    grad=False,
)
add(
    "linspace",
    [
        S(0, 1, 5),
        S(-1.0, 1.0, 4),
        S(0, 10, 1),
        S(0, 1, 0),
        S(0, 10, 5, dtype=D("int64")),
        S(start=0.0, end=2.0, steps=3),
    ],
    grad=False,
)
add("logspace", [S(0, 2, 3), S(0, 1, 4, base=2.0), S(-1, 1, 3, dtype=D("float64"))], grad=False)
add("eye", [S(3), S(2, 4), S(0), S(3, dtype=D("int64")), S(n=2, m=3)], strides=True, grad=False)
add(
    "tensor",
    [
        S([1.0, 2.0]),
        S([1, 2]),
        S([True, False]),
        S([[1, 2], [3, 4]]),
        S(3.5),
        S(7),
        S([]),
        S([[]]),
        S([1, 2.5]),
        S([True, 2]),
        S([1.0, 2.0], dtype=D("float64")),
        S((1, 2, 3)),
        S(range(4)),
        S([1e40]),
        S([2**40]),
        S(np.array([1.0, 2.0], np.float32)),
        S(np.array([1, 2], np.int32)),
        S(np.array(3.0)),
        S(np.float64(2.5)),
        S(collections.deque([1.0, 2.0]), name="deque"),
        S([np.float32(1.5), 2], name="numpy-scalars"),
    ],
    errors=[E([[1, 2], [3]], family="RuntimeError/ValueError"), E("abc", family="TypeError")],
    strides=True,
    grad=False,
)
add("as_tensor", [S([1.0, 2.0]), S([1, 2]), S(np.array([1.0, 2.0])), S(T(3)), S(T(3), dtype=D("float64"))], grad=False)
add(
    "from_numpy",
    [S(np.array([1.0, 2.0])), S(np.array([[1, 2]], np.int32)), S(np.array(True)), S(np.zeros((0, 3), np.float32))],
    strides=True,
    grad=False,
)
for _name, _extra in (("new_zeros", ()), ("new_ones", ()), ("new_empty", ())):
    add(
        _name,
        [
            S(T(2), (2, 3)),
            S(T(2, dtype="int64"), (3,)),
            S(T(2), 2, 3),
            S(T(2), (2,), dtype=D("float64")),
            S(T(2), (0, 3)),
        ],
        values=_name != "new_empty",
        grad=False,
        strides=_name != "new_empty",
    )
add(
    "new_full",
    [S(T(2), (2, 3), 1.5), S(T(2, dtype="int64"), (3,), 2), S(T(2), (2,), 1, dtype=D("float64"))],
    grad=False,
)
add(
    "new_tensor",
    [S(T(2), [1.0, 2.0]), S(T(2, dtype="int64"), [1, 2]), S(T(2), [1, 2]), S(T(2), [1.0], dtype=D("float64"))],
    grad=False,
)
add("from_dlpack", [S(T(3)), S(T(2, 3, dtype="int64"))], call=lambda lib, x: lib.from_dlpack(x), grad=False)

# --------------------------------------------------------------------------------------------------
# conversions and in-place fills
add(
    "to",
    [
        S(T(3), D("float64")),
        S(T(3), dtype=D("int32")),
        S(T(values=[1.7, -1.7, 2.5])),
        S(T(values=[1.7, -1.7, 2.5]), D("int64")),
        S(T(3, dtype="int64"), D("bool")),
        S(T(3), "cpu"),
        S(T(3), T(2, dtype="float16")),
        S(T(values=[1e5, -1e5, np.nan]), D("float16")),
        S(T(values=[np.nan, np.inf, 3e9]), D("int32")),
    ],
    grad=False,
)
for _name in ("float", "half", "double", "long", "int", "bool", "cpu"):
    add(
        _name,
        [
            S(T(3, 4)),
            S(T(values=[1.7, -1.7, 0.0, np.inf])),
            S(T(3, dtype="int64")),
            S(T(3, dtype="bool")),
            S(T(0, 2)),
            S(T(3, 4, view="t")),
        ],
        grad=False,
    )
add("bfloat16", [S(T(3, 4))], grad=False)
add("cuda", [S(T(3, 4))], grad=False, values=False)
add(
    "type_as",
    [S(T(3), T(2, dtype="float64")), S(T(3, dtype="int64"), T(2)), S(T(values=[1.5, -1.5]), T(2, dtype="int32"))],
    grad=False,
)


def _type(lib, x, *args):
    """``x.type(...)`` with type names in the library's own module (``torch.IntTensor``)."""
    mod = lib.module.__name__
    out = x.type(*[a.replace("torch.", mod + ".") if isinstance(a, str) else a for a in args])
    return out.replace(mod + ".", "torch.") if isinstance(out, str) else out


add("type", [S(T(3)), S(T(3), D("float64")), S(T(3), "torch.IntTensor")], call=_type, grad=False)
add("pin_memory", [S(T(3))], values=False, grad=False)
add("is_pinned", [S(T(3))], grad=False)
add(
    "fill_",
    [
        S(T(3, 4), 2.5),
        S(T(3, dtype="int64"), 7),
        S(T(3, dtype="int64"), 2.7),
        S(T(3, 4), T(values=np.array(1.5))),
        S(T(0, 3), 1.0),
        S(T(3, 4, view="t"), 1.0),
    ],
    errors=[E(T(3, dtype="int64"), float("inf"), family=R, name="int64-inf")],
    grad=False,
)
add("zero_", [S(T(3, 4)), S(T(3, 4, view="slice")), S(T(0, 3))], grad=False)
add(
    "copy_",
    [
        S(T(3, 4), T(3, 4, dtype="float64")),
        S(T(3, 4), T(4)),
        S(T(3, dtype="int64"), T(values=[1.7, -1.7, 2.5])),
        S(T(3, 4, view="t"), T(3, 4)),
        S(T(0, 3), T(3)),
    ],
    errors=[E(T(3, 4), T(5), family=R)],
    grad=False,
)


# --------------------------------------------------------------------------------------------------
# Tensor methods outside the registry (attributes that compute something)
def _method(name):
    return lambda lib, x, *args: getattr(x, name)(*args)


def _attribute(name):
    return lambda lib, x: getattr(x, name)


for _name, _samples in {
    "size": [S(T(2, 3)), S(T(2, 3), 1), S(T(2, 3), -1), S(T())],
    "stride": [S(T(2, 3)), S(T(2, 3), 0), S(T(3, 4, view="t")), S(T(0, 5)), S(T(3, 4, view="expand"))],
    "dim": [S(T(2, 3)), S(T())],
    "ndimension": [S(T(2, 3))],
    "numel": [S(T(2, 3)), S(T(0, 3)), S(T())],
    "nelement": [S(T(2, 3))],
    "element_size": [S(T(2)), S(T(2, dtype="float64")), S(T(2, dtype="bool")), S(T(2, dtype="float16"))],
    "item": [
        S(T(values=np.array(2.5))),
        S(T(values=np.array(3), dtype=I64)),
        S(T(values=np.array(True))),
        S(T(values=[1.5])),
    ],
    "tolist": [S(T(values=[[1.0, 2.0]])), S(T(values=np.array(3), dtype=I64)), S(T(values=[True, False]))],
    "is_contiguous": [S(T(3, 4)), S(T(3, 4, view="t")), S(T(0, 3))],
    "is_floating_point": [S(T(3)), S(T(3, dtype="int64")), S(T(3, dtype="float16"))],
    "is_complex": [S(T(3))],
    "detach": [S(T(3, dtype="float64")), S(T(3, 4, view="t"))],
    "detach_": [S(T(3))],
    "get_device": [S(T(3))],
}.items():
    add(_name, _samples, call=_method(_name), grad=False, category="tensor-method")
for _name in (
    *("shape", "ndim", "dtype", "itemsize", "nbytes", "is_cuda", "requires_grad", "is_leaf"),
    *("is_cpu", "is_xpu", "is_mps", "is_meta", "is_quantized", "is_mkldnn", "is_nested"),
):
    add(
        _name,
        [S(T(2, 3)), S(T()), S(T(0, 3, dtype="int64"))],
        call=_attribute(_name),
        grad=False,
        category="tensor-attribute",
    )
add("new", [S(T(2), 2, 3), S(T(2, dtype="int64"), 4), S(T(2))], values=False, grad=False)

# --------------------------------------------------------------------------------------------------
# sparse COO tensors: the dense tensors' forms (the sparse tensors' own ops are tested against PyTorch in
# tests/test_sparse.py)
add(
    "to_sparse",
    [S(T(values=[[0.0, 1.5], [2.0, 0.0]], dtype="float64")), S(T(3, 4)), S(T(0, 3)), S(T(5, dtype="int64"))],
    call=lambda lib, x: x.to_sparse().to_dense(),
    category="sparse",
)
add(
    "to_sparse[sparse_dim]",
    [S(T(values=[[[0.0, 0.0], [1.0, 2.0]], [[0.0, 0.0], [0.0, 0.0]]], dtype="float64"), 1)],
    call=lambda lib, x, d: x.to_sparse(d).to_dense(),
    category="sparse",
)
add("to_dense", [S(T(3, 4)), S(T(2, dtype="int64"))], call=lambda lib, x: x.to_dense(), grad=False, category="sparse")
add("is_sparse", [S(T(3)), S(T())], call=_attribute("is_sparse"), grad=False, category="tensor-attribute")
add(
    "layout",
    [S(T(3)), S(T())],
    call=lambda lib, x: str(x.layout).rpartition(".")[2],
    grad=False,
    category="tensor-attribute",
)

# --------------------------------------------------------------------------------------------------
# sparse COO tensors' own ops: a (3, 4) matrix of 4 entries made from (indices, values), gradients w.r.t.
# the values and the dense operand
_SIZE = (3, 4)


def _coo(i=None):
    return idx([[0, 1, 2, 0], [1, 3, 0, 2]] if i is None else i)


def _sparse(lib, i, v, size=_SIZE):
    return lib.sparse_coo_tensor(i, v, size)


def _sparse_samples(*dense):
    """float64 and float32 samples of (indices, values, *dense shapes), one with duplicate indices."""
    return [
        S(_coo(), T(4, dtype="float64"), *(T(*d, dtype="float64") for d in dense)),
        S(_coo(), T(4), *(T(*d) for d in dense)),
        S(_coo([[0, 0, 2, 0], [1, 1, 0, 1]]), T(4, dtype="float64"), *(T(*d, dtype="float64") for d in dense)),
    ]


_OUT_OF_BOUNDS = E(_coo([[0, 3, 2, 0], [1, 3, 0, 2]]), T(4, dtype="float64"), family="RuntimeError/ValueError")
add(
    "sparse_coo_tensor",
    _sparse_samples(),
    errors=[_OUT_OF_BOUNDS],
    call=lambda lib, i, v: lib.sparse_coo_tensor(i, v, _SIZE, check_invariants=True).to_dense(),
    category="sparse",
)
add(
    "coalesce",
    _sparse_samples(),
    call=lambda lib, i, v: (lambda c: (c.indices(), c.values()))(_sparse(lib, i, v).coalesce()),
    category="sparse",
)
add(
    "to_dense[sparse]",
    _sparse_samples(),
    call=lambda lib, i, v: _sparse(lib, i, v).to_dense(),
    category="sparse",
)
_PRODUCT_ERRORS = [
    E(_coo(), T(4), T(5, 2), name="inner-dims", family="RuntimeError/ValueError"),
    E(_coo(), T(4), T(4, 2, 2), name="rank", family="RuntimeError/ValueError"),
]
for _name, _fn in {
    "sparse.mm": lambda lib, i, v, d: lib.sparse.mm(_sparse(lib, i, v), d),
    "spmm": lambda lib, i, v, d: lib.spmm(_sparse(lib, i, v), d),
    "mm[sparse]": lambda lib, i, v, d: lib.mm(_sparse(lib, i, v), d),
    "matmul[sparse]": lambda lib, i, v, d: lib.matmul(_sparse(lib, i, v), d),
}.items():
    add(_name, _sparse_samples((4, 2)), errors=_PRODUCT_ERRORS, call=_fn, category="sparse")
add(
    "sparse.sum",
    _sparse_samples(),
    call=lambda lib, i, v: lib.sparse.sum(_sparse(lib, i, v)),
    category="sparse",
)
add(
    "sparse.sum[dim]",
    _sparse_samples(),
    call=lambda lib, i, v: lib.sparse.sum(_sparse(lib, i, v), 1).to_dense(),
    category="sparse",
)

# --------------------------------------------------------------------------------------------------
# distributions: their deterministic methods (sampling draws different noise in either library), built
# with validate_args=True, gradients w.r.t. the parameters and the value in float64


def _distribution(lib, name, params, kw):
    cls = getattr(lib.module.distributions, name)
    return cls(*params, **dict(kw), validate_args=True)


def _dist_call(name, method, n_params, keys=(), wrap=None):
    """call(lib, *params, *method args): ``name``'s distribution of the first ``n_params`` tensors
    (positional, or by ``keys``), its ``method`` (or property) applied to the rest; ``wrap`` makes
    a derived distribution (Independent, TransformedDistribution) of it."""

    def call(lib, *args):
        params, rest = args[:n_params], args[n_params:]
        kw = dict(zip(keys, params)) if keys else {}
        dist = _distribution(lib, name, () if keys else params, kw)
        if wrap is not None:
            dist = wrap(lib.module.distributions, dist)
        out = getattr(dist, method)
        return out(*rest) if callable(out) else out

    return call


def _pos(*shape):
    return T(*shape, dtype="float64", low=0.5, high=2.0)


def _unit(*shape, grad=True):
    return T(*shape, dtype="float64", low=0.1, high=0.9, grad=grad)


def _f32(samples):
    """The float64 samples again in float32 (values only)."""
    out = []
    for s in named(samples):
        args = [a.variant(dtype="float32") if isinstance(a, T) and a.dtype == "float64" else a for a in s.args]
        out.append(S(*args, name=s.name + "-f32", grad=False))
    return out


_TRIL = np.array([[1.2, 0.0, 0.0], [0.3, 0.8, 0.0], [-0.4, 0.2, 1.5]])
_SIMPLEX = np.array([[0.2, 0.3, 0.5], [0.6, 0.1, 0.3]])
_ONE_HOT = np.array([[0.0, 1.0, 0.0, 0.0], [0.0, 0.0, 0.0, 1.0]])

# name: (params (a function: fresh tensors), keys, {method: its arguments}, errors of log_prob, wrap)
_DISTRIBUTIONS = {
    "Normal": (
        lambda: [T(3, dtype="float64"), _pos(3)],
        (),
        {"log_prob": [T(3, dtype="float64")], "cdf": [T(3, dtype="float64")], "icdf": [_unit(3)]},
        [
            E(
                T(values=[0.0]),
                T(values=[-1.0]),
                T(values=[0.5]),
                name="negative-scale",
                family="RuntimeError/ValueError",
            )
        ],
    ),
    "Bernoulli": (
        lambda: [_unit(3)],
        ("probs",),
        {"log_prob": [T(values=np.array([0.0, 1.0, 1.0]), grad=False)]},
        [
            E(T(values=[1.5]), T(values=[1.0]), name="probs-above-1", family="RuntimeError/ValueError"),
            E(T(values=[0.5]), T(values=[0.5]), name="value-outside-support", family="RuntimeError/ValueError"),
        ],
    ),
    "Bernoulli[logits]": (
        lambda: [T(3, dtype="float64")],
        ("logits",),
        {"log_prob": [T(values=np.array([0.0, 1.0, 0.0]), grad=False)]},
        [],
    ),
    "Categorical": (
        lambda: [_pos(2, 4)],
        ("probs",),
        {"log_prob": [idx(1, 3)]},
        [E(T(values=[[0.5, 0.5]]), idx(2), name="value-outside-support", family="RuntimeError/ValueError")],
    ),
    "Categorical[logits]": (lambda: [T(2, 4, dtype="float64")], ("logits",), {"log_prob": [idx(0, 2)]}, []),
    "OneHotCategorical": (
        lambda: [_pos(2, 4)],
        ("probs",),
        {"log_prob": [T(values=_ONE_HOT, dtype="float64", grad=False)]},
        [],
    ),
    "MultivariateNormal": (
        lambda: [T(2, 3, dtype="float64"), T(values=_TRIL, dtype="float64")],
        ("loc", "scale_tril"),
        {"log_prob": [T(2, 3, dtype="float64")]},
        [],
    ),
    "Uniform": (
        lambda: [T(3, dtype="float64", low=-2.0, high=-1.0), T(3, dtype="float64", low=1.0, high=2.0)],
        (),
        {"log_prob": [T(3, dtype="float64", low=-0.9, high=0.9)], "cdf": [T(3, dtype="float64", low=-0.9, high=0.9)]},
        [
            E(
                T(values=[0.0]),
                T(values=[1.0]),
                T(values=[1.5]),
                name="value-outside-support",
                family="RuntimeError/ValueError",
            )
        ],
    ),
    "Laplace": (
        lambda: [T(3, dtype="float64"), _pos(3)],
        (),
        {"log_prob": [T(3, dtype="float64")], "cdf": [T(3, dtype="float64")], "icdf": [_unit(3)]},
        [],
    ),
    "Exponential": (
        lambda: [_pos(3)],
        (),
        {"log_prob": [_pos(3)], "cdf": [_pos(3)], "icdf": [_unit(3)]},
        [E(T(values=[1.0]), T(values=[-1.0]), name="value-outside-support", family="RuntimeError/ValueError")],
    ),
    "Gamma": (lambda: [_pos(3), _pos(3)], (), {"log_prob": [_pos(3)]}, []),
    "Beta": (
        lambda: [_pos(3), _pos(3)],
        (),
        {"log_prob": [_unit(3)]},
        [
            E(
                T(values=[1.0]),
                T(values=[1.0]),
                T(values=[1.5]),
                name="value-outside-support",
                family="RuntimeError/ValueError",
            )
        ],
    ),
    "Dirichlet": (lambda: [_pos(2, 3)], (), {"log_prob": [T(values=_SIMPLEX, dtype="float64")]}, []),
    "Poisson": (
        lambda: [_pos(3)],
        (),
        {"log_prob": [T(values=np.array([0.0, 1.0, 3.0]), grad=False)]},
        [E(T(values=[-1.0]), T(values=[1.0]), name="negative-rate", family="RuntimeError/ValueError")],
    ),
    "Gumbel": (
        lambda: [T(3, dtype="float64"), _pos(3)],
        (),
        {"log_prob": [T(3, dtype="float64")], "cdf": [T(3, dtype="float64")]},
        [],
    ),
    "LogNormal": (
        lambda: [T(3, dtype="float64"), _pos(3)],
        (),
        {"log_prob": [_pos(3)], "cdf": [_pos(3)], "icdf": [_unit(3)]},
        [],
    ),
}
_PROPERTIES = {
    "Poisson": ("mean", "variance"),
    "Gumbel": ("entropy", "mean", "variance"),
}
for _dist, (_params, _keys, _methods, _errors) in _DISTRIBUTIONS.items():
    _cls, _, _variant = _dist.partition("[")
    _suffix = f"[{_variant}" if _variant else ""
    _calls = {**{m: [a] for m, a in _methods.items()}}
    for _m in _PROPERTIES.get(_cls, ("entropy", "mean", "variance")):
        _calls[_m] = []
    for _m, _margs in _calls.items():
        _key = f"distributions.{_cls}.{_m}{_suffix}"
        _samples = [S(*_params(), *(_margs[0] if _margs else ()), name="float64")]
        realize(_samples, _key)
        add(
            _key,
            _samples + _f32(_samples),
            errors=_errors if _m == "log_prob" else (),
            call=_dist_call(_cls, _m, len(_samples[0].args) - len(_margs[0] if _margs else ()), _keys),
            category="distributions",
        )


def _normal_samples(key, *value):
    samples = [S(T(2, 3, dtype="float64"), _pos(2, 3), *value, name="float64")]
    realize(samples, key)
    return samples + _f32(samples)


_WRAPPED = {
    "Independent": lambda D, d: D.Independent(d, 1),
    "TransformedDistribution[Affine]": lambda D, d: D.TransformedDistribution(
        d, [D.transforms.AffineTransform(0.5, 2.0)], validate_args=True
    ),
    "TransformedDistribution[Exp]": lambda D, d: D.TransformedDistribution(d, [D.transforms.ExpTransform()]),
    "TransformedDistribution[Sigmoid]": lambda D, d: D.TransformedDistribution(d, [D.transforms.SigmoidTransform()]),
    "TransformedDistribution[Tanh]": lambda D, d: D.TransformedDistribution(d, [D.transforms.TanhTransform()]),
}
# the value of each wrapped distribution's log_prob and cdf, in its support
_WRAPPED_VALUES = {
    "Independent": lambda: T(2, 3, dtype="float64"),
    "TransformedDistribution[Affine]": lambda: T(2, 3, dtype="float64"),
    "TransformedDistribution[Exp]": lambda: _pos(2, 3),
    "TransformedDistribution[Sigmoid]": lambda: _unit(2, 3),
    "TransformedDistribution[Tanh]": lambda: T(2, 3, dtype="float64", low=-0.9, high=0.9),
}
for _dist, _wrap in _WRAPPED.items():
    _cls, _, _variant = _dist.partition("[")
    _suffix = f"[{_variant}" if _variant else ""
    _methods = ("log_prob", "cdf", "icdf") if _variant else ("log_prob", "entropy", "mean", "variance")
    for _m in _methods:
        _key = f"distributions.{_cls}.{_m}{_suffix}"
        _value = {"log_prob": [_WRAPPED_VALUES[_dist]()], "cdf": [_WRAPPED_VALUES[_dist]()], "icdf": [_unit(2, 3)]}
        add(
            _key,
            _normal_samples(_key, *_value.get(_m, [])),
            call=_dist_call("Normal", _m, 2, wrap=_wrap),
            category="distributions",
        )

# KL divergences with a closed form: (distribution, its parameters (a function: fresh tensors), keys)
_KL = {
    "Normal": (lambda: [T(3, dtype="float64"), _pos(3)], ()),
    "Bernoulli": (lambda: [_unit(3)], ("probs",)),
    "Categorical": (lambda: [_pos(2, 4)], ("probs",)),
    "MultivariateNormal": (lambda: [T(2, 3, dtype="float64"), T(values=_TRIL, dtype="float64")], ("loc", "scale_tril")),
    "Exponential": (lambda: [_pos(3)], ()),
    "Gamma": (lambda: [_pos(3), _pos(3)], ()),
    "Beta": (lambda: [_pos(3), _pos(3)], ()),
    "Dirichlet": (lambda: [_pos(2, 3)], ()),
    "Laplace": (lambda: [T(3, dtype="float64"), _pos(3)], ()),
}


def _kl_call(name, n, keys):
    def call(lib, *args):
        D = lib.module.distributions
        p, q = (_distribution(lib, name, () if keys else a, dict(zip(keys, a))) for a in (args[:n], args[n:]))
        return D.kl_divergence(p, q)

    return call


for _dist, (_params, _keys) in _KL.items():
    _key = f"distributions.kl_divergence[{_dist}]"
    _p = _params()
    _samples = [S(*_p, *_params(), name="float64")]
    realize(_samples, _key)
    add(_key, _samples + _f32(_samples), call=_kl_call(_dist, len(_p), _keys), category="distributions")

# --------------------------------------------------------------------------------------------------
# issue 27's missing names: scans, order statistics, frexp, i0, vdot, renorm, strided views
_NAN = np.nan
add(
    "cummax",
    g.cumulative()[:9]
    + [
        S(T(values=np.array([1.0, 3.0, 3.0, 2.0, _NAN, 5.0, _NAN])), 0, name="ties-nan"),
        S(T(values=np.array([[2, 2, 1, 3, 3]])), 1, name="int-ties"),
    ],
    errors=g.reduction_errors(),
)
add(
    "cummin",
    g.cumulative()[:9]
    + [
        S(T(values=np.array([1.0, 0.0, 0.0, 2.0, _NAN, -5.0, _NAN])), 0, name="ties-nan"),
        S(T(values=np.array([[2, 2, 3, 1, 1]])), 1, name="int-ties"),
    ],
    errors=g.reduction_errors(),
)
add(
    "logcumsumexp",
    [
        S(T(3, 4, dtype="float64"), 1),
        S(T(3, 4), 0),
        S(T(2, 5, dtype="float64", view="t"), -1),
        S(T(dtype="float64"), 0),
        S(T(0, 3), 0),
        S(T(5, dtype="float16"), 0),
        S(T(values=np.array([0.0, 1000.0, -1000.0, 3.0])), 0, name="huge", grad=False),
    ],
    errors=g.reduction_errors(),
)
add(
    "nanmedian",
    [
        S(T(values=np.array([[_NAN, 1.0, 2.0, 2.0, _NAN], [_NAN] * 5, [4.0, 3.0, 2.0, 1.0, 0.5]])), 1, name="nan-rows"),
        S(T(values=np.array([_NAN, 3.0, 1.0, 2.0, 2.0])), name="nan-all", grad=False),
        S(T(3, 5, dtype="float64"), 0),
        S(T(3, 5, dtype="float64"), 1, True),
        S(T(3, 5, dtype="float64")),
        S(T(values=np.array([_NAN, _NAN])), name="only-nan", grad=False),
        S(T(6, dtype="int64", low=-1000, high=1000), 0),
        S(T(dtype="float64"), 0),
        S(T(0)),
    ],
    errors=[E(T(3, 4), 2, family="IndexError"), E(T(0, 3), 0, family="IndexError")],
)
add(
    "mode",
    [
        S(T(values=np.array([[1.0, 2.0, 2.0, 1.0, 3.0], [5.0, 5.0, 4.0, 4.0, 4.0]])), 1, name="ties"),
        S(T(values=np.array([3.0, 1.0, 3.0, 1.0])), name="equal-counts"),
        S(T(values=np.array([2, 2, 1, 1, 1, 2])), name="int"),
        S(T(3, 5, dtype="float64"), 0),
        S(T(4, 6, dtype="int64"), 1, True),
        S(T(5, dtype="bool")),
        S(T(dtype="float64")),
    ],
    errors=[E(T(3, 4), 2, family="IndexError"), E(T(0), family="IndexError")],
)
add(
    "frexp",
    [
        S(T(3, 4, dtype="float64")),
        S(T(values=np.array([0.0, -0.0, np.inf, -np.inf, _NAN, 1e-45, 3.4e38, -5.0, 0.75, 1 - 2.0**-24], np.float32))),
        # PyTorch differentiates by 2.0**-exponent in float32 (0 or inf past its range): values only here
        S(T(values=np.array([5e-324, 1.7e308, 1 - 2.0**-53, 2.0**-1022, -3.0])), grad=False),
        S(T(values=np.array([6e-8, 65504.0, 0.3], np.float16))),
        S(T(dtype="float64")),
        S(T(0, 3)),
    ],
    errors=[E(T(3, dtype="int64"), family=R)],
)
add(
    "i0",
    [
        S(T(3, 4, dtype="float64", low=-30.0, high=30.0)),
        S(T(values=np.array([0.0, 1e-5, 19.99, 20.0, 20.01, -25.0, 88.7]), dtype="float64")),
        # where e^|x| overflows PyTorch's formulas give inf (and second derivatives inf - inf): values only
        S(T(values=np.array([88.7, 89.0, 700.0, 710.0, -710.0]), dtype="float32"), name="overflow-f32", grad=False),
        S(T(values=np.array([88.7, 89.0, 700.0, 710.0, -710.0]), dtype="float64"), name="overflow-f64", grad=False),
        S(T(5, dtype="float16")),
        S(T(4, dtype="int64")),
        S(T(3, dtype="bool")),
        S(T(dtype="float64")),
        S(T(0, 2)),
    ],
)
add(
    "vdot",
    [S(T(4, dtype="float64"), T(4, dtype="float64")), S(T(0), T(0)), S(T(3, dtype="int64"), T(3, dtype="int64"))],
    errors=[E(T(3), T(4), family=R), E(T(3), T(3, dtype="float64"), family=R), E(T(2, 2), T(2, 2), family=R)],
)
add(
    "renorm",
    [
        S(T(3, 4, dtype="float64"), 2, 0, 1.0),
        S(T(3, 4, dtype="float64"), 1, 1, 0.5),
        S(T(2, 3, 4, dtype="float64"), 3.0, -1, 100.0),
        S(T(3, 4), 2, 0, 0.0),
        S(T(0, 3), 2, 0, 1.0),
    ],
    errors=[E(T(3, 4), 0, 0, 1.0, family=R), E(T(3), 2, 0, 1.0, family=R), E(T(3, 4), 2, 2, 1.0, family="IndexError")],
)
add(
    "as_strided",
    [
        S(T(3, 4, dtype="float64"), (2, 2), (1, 2), 1),
        S(T(3, 4, dtype="float64"), (3, 3), (1, 1)),
        S(T(3, 4, dtype="float64"), (2, 3), (0, 1), 2),
        S(T(3, 4), (4,), (3,)),
        S(T(6), (0, 2), (1, 1)),
        S(T(6, dtype="int64"), (), ()),
    ],
    errors=[E(T(3), (4,), (1,), family=R), E(T(3), (2,), (1,), 2, family=R)],
    forms=("function", "method"),
)
add(
    "diagonal_scatter",
    [
        S(T(3, 4, dtype="float64"), T(3, dtype="float64")),
        S(T(3, 4, dtype="float64"), T(2, dtype="float64"), 2),
        S(T(2, 3, 4, dtype="float64"), T(2, 3, dtype="float64"), 0, 1, 2),
        S(T(4, 3), T(2, 4), -1, 1, 0),
        S(T(3, 3, dtype="int64"), T(3, dtype="int64")),
    ],
    errors=[E(T(3, 4), T(4), family=R), E(T(3, 4), T(3), 0, 0, 0, family=R)],
)
add(
    "sum_to_size",
    [
        S(T(3, 4, dtype="float64"), 1, 4),
        S(T(3, 4, dtype="float64"), (4,)),
        S(T(2, 3, 4, dtype="float64"), 3, 1),
        S(T(3, 4), 3, 4),
        S(T(3, 4, dtype="int64"), 1, 1),
    ],
    errors=[E(T(3, 4), 2, 4, family=R), E(T(3, 4), 1, 3, 4, family=R)],
)
add("storage_offset", [S(T(3, 4)), S(T(3, 4, view="offset")), S(T(3, 4, view="slice"))], grad=False)

# signal windows, the trapezoidal rule, and other cheap names training scripts call
for _window in ("hann_window", "hamming_window", "bartlett_window", "blackman_window", "kaiser_window"):
    add(
        _window,
        [S(0), S(1), S(2), S(5), S(8, False), S(7, dtype=D("float64")), S(6, True, dtype=D("float64"))],
        errors=[E(5, dtype=D("int64"), family=R)],
        grad=False,
        category="factory",
    )
add("hamming_window[alpha]", [S(6, False, 0.6, 0.3), S(5, True, 0.5, 0.5)], grad=False, category="factory")
add("kaiser_window[beta]", [S(6, True, 5.0), S(5, False, 0.0)], grad=False, category="factory")
add(
    "trapezoid",
    [
        S(T(3, 5, dtype="float64")),
        S(T(3, 5, dtype="float64"), dx=0.5, dim=0),
        S(T(2, 4, dtype="float64"), T(values=np.array([0.0, 1.0, 3.0, 4.5]))),
        S(T(2, 4, dtype="float64"), T(2, 4, dtype="float64"), dim=1),
        S(T(values=np.array([1, 2, 3]))),
        S(T(0)),
        S(T(1)),
    ],
    errors=[E(T(3), T(4), family=R)],
)
add(
    "cumulative_trapezoid",
    [
        S(T(3, 5, dtype="float64")),
        S(T(3, 5, dtype="float64"), dx=2.0, dim=0),
        S(T(2, 4, dtype="float64"), T(values=np.array([0.0, 1.0, 3.0, 4.5]))),
        S(T(values=np.array([1, 2, 3]))),
        S(T(1)),
    ],
)
add(
    "vander",
    [
        S(T(4, dtype="float64")),
        S(T(3, dtype="float64"), 2, True),
        S(T(values=np.array([1, 2, 3]))),
        S(T(values=np.array([True, False]))),
        S(T(2), 0),
        S(T(0)),
    ],
    errors=[E(T(2, 2), family=R)],
)
add(
    "addr",
    [
        S(T(2, 3, dtype="float64"), T(2, dtype="float64"), T(3, dtype="float64")),
        S(T(2, 3, dtype="float64"), T(2, dtype="float64"), T(3, dtype="float64"), beta=2, alpha=0.5),
        S(T(values=np.array([np.nan])), T(2), T(3), beta=0, name="beta0-nan"),
        S(T(3), T(2), T(3)),
        S(T(2, 3, dtype="int64"), T(2, dtype="int64"), T(3, dtype="int64")),
    ],
    errors=[E(T(2, 3), T(2, 2), T(3), family=R)],
)
add(
    "unravel_index",
    [S(T(values=np.array([4, 5, 0])), (2, 3)), S(T(values=np.array(4)), (2, 3)), S(T(values=np.array([7, 1])), 8)],
    errors=[E(T(3), (2, 3), family="TypeError")],
    grad=False,
)
add(
    "combinations",
    [
        S(T(4, dtype="float64")),
        S(T(3, dtype="float64"), 3, True),
        S(T(values=np.array([1, 2, 3])), 1),
        S(T(values=np.array([1, 2])), 0),
        S(T(0)),
        S(T(2), 3),
    ],
)
add("scalar_tensor", [S(3), S(2.5), S(True), S(4, dtype=D("int64")), S(1.5, dtype=D("float64"))], grad=False)
