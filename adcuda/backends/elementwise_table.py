"""The unary elementwise ops of both backends, and the binary functions of floating operands, declared
once: ``UNARY`` is the table the CPU dispatch (adcuda/backends/cpu/elementwise.py), the CUDA Python
checks (adcuda/backends/cuda/elementwise.py) and the CUDA kernels' dispatch (kernels/elementwise_unary.cu,
through the X-macro list kernels/elementwise_ops.def that ``python scripts/gen_elementwise_ops.py``
writes from this module; tests/test_elementwise_table.py fails while it differs) are made from;
``FLOAT_BINARY`` likewise makes the CPU's binary formulas for those ops, the CUDA binary table's rows
(kernels/elementwise_binary.cu) and the host module's small-array loops (kernels/host/elementwise.cpp).

A row says, for one op: which dtypes it takes (its ``kind``), the CPU formula (a NumPy ufunc,
``np.<name>``, or a function of the CPU module, ``_gelu``, ``_special.lgamma``), the CUDA functor
(``math::<Functor>`` in kernels/functors.cuh), and, for the ops with a fused gradient
(``unary_backward``), whether that gradient reads the input x or the output y, and its formulas. Adding
a unary op: one row here, its formula in the CPU module, its functor in functors.cuh, then regenerate.
A binary function of floating operands is the same: one ``FloatBinary`` row, a formula, a functor.
"""

from dataclasses import dataclass
from typing import Final, Literal

__all__ = [
    "FLOAT",
    "NUMERIC",
    "ROUNDING",
    "BITWISE",
    "LOGICAL",
    "Backward",
    "Unary",
    "UNARY",
    "UNARY_BY_NAME",
    "FLOAT_ONLY",
    "NOT_FOR_BOOL",
    "FloatBinary",
    "FLOAT_BINARY",
    "elementwise_ops_def",
]

# What dtypes a unary op takes (its kernels are instantiated for those alone):
FLOAT: Final = "FloatOnly"
"""Floating point functions: bool and integer arrays are computed in float64 and cast back."""
NUMERIC: Final = "Numeric"
"""Floating point and integers; bool only where ``bool_is_identity`` (abs, relu), else DTypeError."""
ROUNDING: Final = "Rounding"
"""Floating point; integers (already whole) are copied."""
BITWISE: Final = "Bitwise"
"""bool and integers only."""
LOGICAL: Final = "Logical"
"""Every dtype, a bool result."""

Kind = Literal["FloatOnly", "Numeric", "Rounding", "Bitwise", "Logical"]


@dataclass(frozen=True)
class Backward:
    """The fused gradient ``unary_backward(op, x, y, g)``: ``reads`` is the saved array it needs
    (``"x"``, the input, or ``"y"``, the output; relu's reads its output, passed as x); ``cpu`` and
    ``cuda`` its formulas, as ``Unary``'s. ``cpu_into``: the CPU formula also takes ``out`` and
    ``scratch`` (graph capture's replay writes into its own arrays)."""

    reads: Literal["x", "y"]
    cpu: str
    cuda: str
    cpu_into: bool = False


@dataclass(frozen=True)
class Unary:
    """One unary op. ``half_via_float32``: float16/bfloat16 are computed through float32 between two
    casts on CUDA (the rare ops no training step runs in half precision: no half kernels of their own,
    which would cost build time); ``cpu_into``: the CPU formula also takes ``out`` and ``scratch``;
    ``keeps_inner``: the forward can keep an intermediate (``inner=``) that its backward reads instead
    of computing it again (graph capture's CPU replay)."""

    name: str
    kind: Kind
    cpu: str
    cuda: str
    half_via_float32: bool = False
    bool_is_identity: bool = False
    cpu_into: bool = False
    keeps_inner: bool = False
    backward: Backward | None = None


# One row per op: Unary(name, kind, CPU formula, CUDA functor, flags...), in columns (hence no formatter).
# fmt: off
UNARY = (
    Unary("neg",         NUMERIC,  "np.negative",       "Neg"),
    Unary("abs",         NUMERIC,  "np.abs",            "Abs", bool_is_identity=True),
    Unary("relu",        NUMERIC,  "_relu",             "Relu", bool_is_identity=True, cpu_into=True,
          backward=Backward("x", "_relu_backward", "ReluBackward", cpu_into=True)),
    Unary("sign",        NUMERIC,  "_sign",             "Sign", half_via_float32=True),
    Unary("exp",         FLOAT,    "np.exp",            "Exp"),
    Unary("log",         FLOAT,    "np.log",            "Log"),
    Unary("log1p",       FLOAT,    "np.log1p",          "Log1p", half_via_float32=True),
    Unary("sqrt",        FLOAT,    "np.sqrt",           "Sqrt"),
    Unary("rsqrt",       FLOAT,    "_rsqrt",            "Rsqrt"),
    Unary("sin",         FLOAT,    "np.sin",            "Sin", half_via_float32=True),
    Unary("cos",         FLOAT,    "np.cos",            "Cos", half_via_float32=True),
    Unary("tanh",        FLOAT,    "np.tanh",           "Tanh",
          backward=Backward("y", "_tanh_backward", "TanhBackward")),
    Unary("sigmoid",     FLOAT,    "_sigmoid",          "Sigmoid",
          backward=Backward("y", "_sigmoid_backward", "SigmoidBackward")),
    Unary("gelu",        FLOAT,    "_gelu",             "Gelu",
          backward=Backward("x", "_gelu_backward", "GeluBackward")),
    Unary("gelu_tanh",   FLOAT,    "_gelu_tanh",        "GeluTanh", cpu_into=True, keeps_inner=True,
          backward=Backward("x", "_gelu_tanh_backward", "GeluTanhBackward", cpu_into=True)),
    Unary("silu",        FLOAT,    "_silu",             "Silu",
          backward=Backward("x", "_silu_backward", "SiluBackward")),
    Unary("erf",         FLOAT,    "_erf",              "Erf", half_via_float32=True),
    Unary("exp2",        FLOAT,    "np.exp2",           "Exp2", half_via_float32=True),
    Unary("log2",        FLOAT,    "np.log2",           "Log2", half_via_float32=True),
    Unary("log10",       FLOAT,    "np.log10",          "Log10", half_via_float32=True),
    Unary("floor",       ROUNDING, "np.floor",          "Floor", half_via_float32=True),
    Unary("ceil",        ROUNDING, "np.ceil",           "Ceil", half_via_float32=True),
    Unary("trunc",       ROUNDING, "np.trunc",          "Trunc", half_via_float32=True),
    Unary("round",       ROUNDING, "np.rint",           "Round", half_via_float32=True),
    Unary("bitwise_not", BITWISE,  "np.invert",         "BitwiseNot"),
    Unary("logical_not", LOGICAL,  "np.logical_not",    "LogicalNot"),
    # issue 27's inverse trigonometric and hyperbolic functions and erfc
    Unary("asin",        FLOAT,    "np.arcsin",         "Asin", half_via_float32=True),
    Unary("acos",        FLOAT,    "np.arccos",         "Acos", half_via_float32=True),
    Unary("atan",        FLOAT,    "np.arctan",         "Atan", half_via_float32=True),
    Unary("asinh",       FLOAT,    "np.arcsinh",        "Asinh", half_via_float32=True),
    Unary("acosh",       FLOAT,    "np.arccosh",        "Acosh", half_via_float32=True),
    Unary("atanh",       FLOAT,    "np.arctanh",        "Atanh", half_via_float32=True),
    Unary("erfc",        FLOAT,    "_erfc",             "Erfc", half_via_float32=True),
    # computed in float64 and cast back, on both backends (cpu/_special.py, functors.cuh's special::)
    Unary("lgamma",      FLOAT,    "_special.lgamma",   "Lgamma", half_via_float32=True),
    Unary("digamma",     FLOAT,    "_special.digamma",  "Digamma", half_via_float32=True),
    Unary("trigamma",    FLOAT,    "_special.trigamma", "Trigamma", half_via_float32=True),
    Unary("erfinv",      FLOAT,    "_special.erfinv",   "Erfinv", half_via_float32=True),
    Unary("i0",          FLOAT,    "_special.i0",       "I0", half_via_float32=True),
    # issue 31: ops composed of several dispatched ops, each given one primitive (the activations in
    # float32 for the half types, as PyTorch's kernels compute them)
    Unary("expm1",       FLOAT,    "np.expm1",          "Expm1", half_via_float32=True),
    Unary("sinh",        FLOAT,    "np.sinh",           "Sinh", half_via_float32=True),
    Unary("cosh",        FLOAT,    "np.cosh",           "Cosh", half_via_float32=True),
    Unary("tan",         FLOAT,    "np.tan",            "Tan", half_via_float32=True),
    Unary("selu",        FLOAT,    "_selu",             "Selu", half_via_float32=True),
    Unary("softplus",    FLOAT,    "_softplus",         "Softplus", half_via_float32=True),
    Unary("mish",        FLOAT,    "_mish",             "Mish", half_via_float32=True),
    Unary("hardsigmoid", FLOAT,    "_hardsigmoid",      "Hardsigmoid", half_via_float32=True),
    Unary("hardswish",   FLOAT,    "_hardswish",        "Hardswish", half_via_float32=True),
    Unary("softsign",    FLOAT,    "_softsign",         "Softsign", half_via_float32=True),
    Unary("tanhshrink",  FLOAT,    "_tanhshrink",       "Tanhshrink", half_via_float32=True),
    Unary("logsigmoid",  FLOAT,    "_logsigmoid",       "Logsigmoid", half_via_float32=True),
    Unary("sinc",        FLOAT,    "_sinc",             "Sinc", half_via_float32=True),
    Unary("frac",        FLOAT,    "_frac",             "Frac", half_via_float32=True),
    Unary("logit",       FLOAT,    "_logit",            "Logit", half_via_float32=True),
    # frexp's parts (ops/special.py): the exponent as a value of the input's dtype
    Unary("frexp_mantissa", FLOAT, "_frexp_mantissa",   "FrexpMantissa", half_via_float32=True),
    Unary("frexp_exponent", FLOAT, "_frexp_exponent",   "FrexpExponent", half_via_float32=True),
)
# fmt: on

UNARY_BY_NAME = {op.name: op for op in UNARY}
FLOAT_ONLY = frozenset(op.name for op in UNARY if op.kind == FLOAT)
"""The floating point functions: computed in float64 for bool and integer arrays, then cast back."""
NOT_FOR_BOOL = frozenset(op.name for op in UNARY if op.kind == NUMERIC and not op.bool_is_identity)
"""The numeric ops that raise DTypeError for bool arrays (abs and relu of bools are the bools)."""


@dataclass(frozen=True)
class FloatBinary:
    """A binary function of floating operands (integer ones are promoted to the default float type
    before the primitive is called): the CPU formula (a NumPy ufunc or a function of the CPU module),
    the CUDA functor, launched for every floating dtype. ``host``: small float32/float64 operands go to
    the host module's loop over the functor, one call where NumPy's formula takes several passes or a
    scalar loop slower than the functor (adcuda/backends/cpu/elementwise.py's ``binary``);
    ``float_only`` False for the one such row of another kind (remainder: integers too, its CUDA
    kernels are the division kind's), which is here for its host loop alone."""

    name: str
    cpu: str
    cuda: str
    host: bool = False
    float_only: bool = True


# fmt: off
FLOAT_BINARY = (
    FloatBinary("div",        "np.true_divide", "Div"),
    # (NumPy 2.x's logaddexp, logaddexp2 and hypot: as fast as the host loop, one call with no frame)
    FloatBinary("logaddexp",  "np.logaddexp",   "LogAddExp"),
    FloatBinary("logaddexp2", "np.logaddexp2",  "LogAddExp2"),
    FloatBinary("hypot",      "np.hypot",       "Hypot"),
    FloatBinary("atan2",      "np.arctan2",     "Atan2"),  # (NumPy 2.x: SIMD, faster than the host loop)
    FloatBinary("copysign",   "np.copysign",    "Copysign"),
    FloatBinary("fmax",       "np.fmax",        "Fmax"),
    FloatBinary("fmin",       "np.fmin",        "Fmin"),
    FloatBinary("xlogy",      "_xlogy",         "Xlogy", host=True),
    FloatBinary("remainder",  "_remainder",     "Remainder", host=True, float_only=False),
    # issue 31: a tensor and one parameter (lambd, alpha) or heaviside's values, one pass each
    FloatBinary("hardshrink", "_hardshrink",    "Hardshrink", host=True),
    FloatBinary("softshrink", "_softshrink",    "Softshrink", host=True),
    FloatBinary("celu",       "_celu",          "Celu", host=True),
    FloatBinary("heaviside",  "_heaviside",     "Heaviside", host=True),
    FloatBinary("prelu",      "_prelu",         "Prelu", host=True),
    FloatBinary("nan_to_num", "_nan_to_num",    "NanToNum", host=True),
    FloatBinary("kaiser_window", "_kaiser_window", "KaiserWindow", host=True),
)
# fmt: on


def elementwise_ops_def() -> str:
    """kernels/elementwise_ops.def as ``UNARY`` makes it: one X-macro line per op and per fused
    gradient, in the table's order."""
    lines = [
        "// Generated from adcuda/backends/elementwise_table.py by scripts/gen_elementwise_ops.py: do not edit",
        "// (tests/test_elementwise_table.py checks it is current). The unary ops of kernels/elementwise_unary.cu:",
        "//   ADCUDA_UNARY(name, kind, functor, half_via_float32, bool_is_identity)",
        "//   ADCUDA_UNARY_BACKWARD(name, reads, functor)   reads: X (the input) or Y (the output)",
        "// and the binary functions of floating operands (FLOAT_BINARY) of kernels/elementwise_binary.cu and",
        "// the host module's small-array loops (kernels/host/elementwise.cpp):",
        "//   ADCUDA_FLOAT_BINARY(name, functor)   ADCUDA_HOST_BINARY(name, functor)",
        "// An includer defines the macros it uses; an undefined one expands to nothing.",
        "#ifndef ADCUDA_UNARY",
        "#define ADCUDA_UNARY(name, kind, functor, half_via_float32, bool_is_identity)",
        "#endif",
        "#ifndef ADCUDA_UNARY_BACKWARD",
        "#define ADCUDA_UNARY_BACKWARD(name, reads, functor)",
        "#endif",
        "#ifndef ADCUDA_FLOAT_BINARY",
        "#define ADCUDA_FLOAT_BINARY(name, functor)",
        "#endif",
        "#ifndef ADCUDA_HOST_BINARY",
        "#define ADCUDA_HOST_BINARY(name, functor)",
        "#endif",
    ]
    for op in UNARY:
        flags = f"{str(op.half_via_float32).lower()}, {str(op.bool_is_identity).lower()}"
        lines.append(f"ADCUDA_UNARY({op.name}, {op.kind}, {op.cuda}, {flags})")
    for op in UNARY:
        if op.backward is not None:
            lines.append(f"ADCUDA_UNARY_BACKWARD({op.name}, {op.backward.reads.upper()}, {op.backward.cuda})")
    lines += [f"ADCUDA_FLOAT_BINARY({op.name}, {op.cuda})" for op in FLOAT_BINARY if op.float_only]
    lines += [f"ADCUDA_HOST_BINARY({op.name}, {op.cuda})" for op in FLOAT_BINARY if op.host]
    lines += [
        "#undef ADCUDA_UNARY",
        "#undef ADCUDA_UNARY_BACKWARD",
        "#undef ADCUDA_FLOAT_BINARY",
        "#undef ADCUDA_HOST_BINARY",
        "",
    ]
    return "\n".join(lines)
