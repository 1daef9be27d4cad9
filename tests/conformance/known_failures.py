"""Known defects the database finds today, as strict expected failures: the fixers' work list.

Each line is ``(check, entry key, sample name): what differs``, grouped by defect class; check is
``value`` (values, dtype, shape, strides, whether it raises), ``grad`` (float64 first/second-order
gradients), ``error`` (an error input: family, adcuda error class, message) or ``cuda`` (the CUDA
variant). When a defect is fixed, its test fails as XPASS(strict): delete its line (or run
``python tests/conformance/record_known_failures.py``, which drops fixed lines and adds new failures:
read its diff, a new line is a defect to fix or a sample to correct). A defect not listed fails.
"""

import pytest

GROUPS = {
    "NumPy warnings escape": {
        ("value", "acos", "extreme-f16"): "function acos: NumPy warning escapes: invalid value encountered in arccos",
        ("value", "acos", "extreme-f32"): "function acos: NumPy warning escapes: invalid value encountered in arccos",
        ("value", "acos", "extreme-f64"): "function acos: NumPy warning escapes: invalid value encountered in arccos",
        (
            "value",
            "acosh",
            "extreme-f16",
        ): "function acosh: NumPy warning escapes: invalid value encountered in arccosh",
        (
            "value",
            "acosh",
            "extreme-f32",
        ): "function acosh: NumPy warning escapes: invalid value encountered in arccosh",
        (
            "value",
            "acosh",
            "extreme-f64",
        ): "function acosh: NumPy warning escapes: invalid value encountered in arccosh",
        ("value", "asin", "extreme-f16"): "function asin: NumPy warning escapes: invalid value encountered in arcsin",
        ("value", "asin", "extreme-f32"): "function asin: NumPy warning escapes: invalid value encountered in arcsin",
        ("value", "asin", "extreme-f64"): "function asin: NumPy warning escapes: invalid value encountered in arcsin",
        (
            "value",
            "atanh",
            "extreme-f16",
        ): "function atanh: NumPy warning escapes: divide by zero encountered in arctanh",
        (
            "value",
            "atanh",
            "extreme-f32",
        ): "function atanh: NumPy warning escapes: divide by zero encountered in arctanh",
        (
            "value",
            "atanh",
            "extreme-f64",
        ): "function atanh: NumPy warning escapes: divide by zero encountered in arctanh",
        (
            "value",
            "binary_cross_entropy",
            "edges",
        ): "functional binary_cross_entropy: NumPy warning escapes: divide by zero encountered in log",
        (
            "value",
            "binary_cross_entropy",
            "edges-f32",
        ): "functional binary_cross_entropy: NumPy warning escapes: divide by zero encountered in log",
        ("value", "cos", "extreme-f16"): "function cos: NumPy warning escapes: invalid value encountered in cos",
        ("value", "cos", "extreme-f32"): "function cos: NumPy warning escapes: invalid value encountered in cos",
        ("value", "cos", "extreme-f64"): "function cos: NumPy warning escapes: invalid value encountered in cos",
        ("value", "cosh", "extreme-f16"): "function cosh: NumPy warning escapes: overflow encountered in exp",
        ("value", "cosh", "extreme-f32"): "function cosh: NumPy warning escapes: overflow encountered in exp",
        ("value", "cosh", "extreme-f64"): "function cosh: NumPy warning escapes: overflow encountered in exp",
        ("value", "digamma", "extreme-f16"): "function digamma: NumPy warning escapes: overflow encountered in cast",
        ("value", "digamma", "extreme-f32"): "function digamma: NumPy warning escapes: overflow encountered in cast",
        ("value", "digamma", "extreme-f64"): "function digamma: NumPy warning escapes: overflow encountered in divide",
        ("value", "exp", "extreme-f16"): "function exp: NumPy warning escapes: overflow encountered in exp",
        ("value", "exp", "extreme-f32"): "function exp: NumPy warning escapes: overflow encountered in exp",
        ("value", "exp", "extreme-f64"): "function exp: NumPy warning escapes: overflow encountered in exp",
        ("value", "exp2", "extreme-f16"): "function exp2: NumPy warning escapes: overflow encountered in exp2",
        ("value", "exp2", "extreme-f32"): "function exp2: NumPy warning escapes: overflow encountered in exp2",
        ("value", "exp2", "extreme-f64"): "function exp2: NumPy warning escapes: overflow encountered in exp2",
        ("value", "expm1", "extreme-f16"): "function expm1: NumPy warning escapes: overflow encountered in exp",
        ("value", "expm1", "extreme-f32"): "function expm1: NumPy warning escapes: overflow encountered in exp",
        ("value", "expm1", "extreme-f64"): "function expm1: NumPy warning escapes: overflow encountered in exp",
        ("value", "frac", "extreme-f32"): "function frac: NumPy warning escapes: invalid value encountered in subtract",
        ("value", "frac", "extreme-f64"): "function frac: NumPy warning escapes: invalid value encountered in subtract",
        (
            "value",
            "gelu",
            "extreme-f16",
        ): "functional gelu: NumPy warning escapes: invalid value encountered in multiply",
        (
            "value",
            "gelu",
            "extreme-f64",
        ): "functional gelu: NumPy warning escapes: invalid value encountered in multiply",
        (
            "value",
            "hardswish",
            "extreme-f16",
        ): "functional hardswish: NumPy warning escapes: invalid value encountered in multiply",
        ("value", "int", "float32[4]"): "method int: NumPy warning escapes: invalid value encountered in cast",
        (
            "value",
            "isclose",
            "float32[4]-float32[4]",
        ): "function isclose: NumPy warning escapes: invalid value encountered in subtract",
        ("value", "ldexp", "extreme-f16"): "function ldexp: NumPy warning escapes: overflow encountered in cast",
        (
            "value",
            "ldexp",
            "extreme-f32",
        ): "function ldexp: NumPy warning escapes: invalid value encountered in multiply",
        ("value", "lgamma", "extreme-f16"): "function lgamma: NumPy warning escapes: divide by zero encountered in log",
        ("value", "lgamma", "extreme-f32"): "function lgamma: NumPy warning escapes: divide by zero encountered in log",
        ("value", "lgamma", "extreme-f64"): "function lgamma: NumPy warning escapes: overflow encountered in multiply",
        ("value", "log", "extreme-f16"): "function log: NumPy warning escapes: divide by zero encountered in log",
        ("value", "log", "extreme-f32"): "function log: NumPy warning escapes: divide by zero encountered in log",
        ("value", "log", "extreme-f64"): "function log: NumPy warning escapes: divide by zero encountered in log",
        ("value", "log", "kinks-f64"): "function log: NumPy warning escapes: divide by zero encountered in log",
        ("value", "log10", "extreme-f16"): "function log10: NumPy warning escapes: divide by zero encountered in log10",
        ("value", "log10", "extreme-f32"): "function log10: NumPy warning escapes: divide by zero encountered in log10",
        ("value", "log10", "extreme-f64"): "function log10: NumPy warning escapes: divide by zero encountered in log10",
        ("value", "log1p", "extreme-f16"): "function log1p: NumPy warning escapes: invalid value encountered in log1p",
        ("value", "log1p", "extreme-f32"): "function log1p: NumPy warning escapes: invalid value encountered in log1p",
        ("value", "log1p", "extreme-f64"): "function log1p: NumPy warning escapes: invalid value encountered in log1p",
        ("value", "log1p", "kinks-f64"): "function log1p: NumPy warning escapes: divide by zero encountered in log1p",
        ("value", "log2", "extreme-f16"): "function log2: NumPy warning escapes: divide by zero encountered in log2",
        ("value", "log2", "extreme-f32"): "function log2: NumPy warning escapes: divide by zero encountered in log2",
        ("value", "log2", "extreme-f64"): "function log2: NumPy warning escapes: divide by zero encountered in log2",
        (
            "value",
            "logaddexp",
            "extreme-f32",
        ): "function logaddexp: NumPy warning escapes: invalid value encountered in logaddexp",
        (
            "value",
            "logaddexp2",
            "extreme-f32",
        ): "function logaddexp2: NumPy warning escapes: invalid value encountered in logaddexp",
        ("value", "logit", "bool"): "function logit: NumPy warning escapes: divide by zero encountered in log",
        ("value", "logit", "extreme-f16"): "function logit: NumPy warning escapes: divide by zero encountered in log",
        ("value", "logit", "extreme-f32"): "function logit: NumPy warning escapes: divide by zero encountered in log",
        ("value", "logit", "extreme-f64"): "function logit: NumPy warning escapes: divide by zero encountered in log",
        ("value", "logit", "int32"): "function logit: NumPy warning escapes: invalid value encountered in log",
        ("value", "logit", "int64"): "function logit: NumPy warning escapes: invalid value encountered in log",
        ("value", "logit", "kinks-f64"): "function logit: NumPy warning escapes: divide by zero encountered in log",
        ("value", "long", "float32[4]"): "method long: NumPy warning escapes: invalid value encountered in cast",
        (
            "value",
            "mish",
            "extreme-f32",
        ): "functional mish: NumPy warning escapes: invalid value encountered in multiply",
        (
            "value",
            "mish",
            "extreme-f64",
        ): "functional mish: NumPy warning escapes: invalid value encountered in multiply",
        (
            "value",
            "nan_to_num[args]",
            "float16[4]",
        ): "function nan_to_num: NumPy warning escapes: overflow encountered in cast",
        ("value", "norm", "extreme-f32"): "function norm: NumPy warning escapes: overflow encountered in multiply",
        ("value", "norm", "overflow-f32"): "function norm: NumPy warning escapes: overflow encountered in multiply",
        ("value", "pow[signs]", "float32[3]"): "function pow: NumPy warning escapes: invalid value encountered in sqrt",
        (
            "value",
            "pow[signs]",
            "float32[3]#1",
        ): "function pow: NumPy warning escapes: overflow encountered in multiply",
        (
            "value",
            "prod",
            "f16-wide-accumulation",
        ): "function prod: NumPy warning escapes: overflow encountered in cast",
        ("value", "rad2deg", "extreme-f16"): "function rad2deg: NumPy warning escapes: overflow encountered in cast",
        (
            "value",
            "rad2deg",
            "extreme-f32",
        ): "function rad2deg: NumPy warning escapes: overflow encountered in multiply",
        (
            "value",
            "rad2deg",
            "extreme-f64",
        ): "function rad2deg: NumPy warning escapes: overflow encountered in multiply",
        (
            "value",
            "reciprocal",
            "extreme-f16",
        ): "function reciprocal: NumPy warning escapes: overflow encountered in cast",
        ("value", "rsqrt", "extreme-f16"): "function rsqrt: NumPy warning escapes: invalid value encountered in sqrt",
        ("value", "rsqrt", "extreme-f32"): "function rsqrt: NumPy warning escapes: invalid value encountered in sqrt",
        ("value", "rsqrt", "extreme-f64"): "function rsqrt: NumPy warning escapes: invalid value encountered in sqrt",
        ("value", "rsqrt", "kinks-f64"): "function rsqrt: NumPy warning escapes: divide by zero encountered in divide",
        ("value", "selu", "extreme-f16"): "function selu: NumPy warning escapes: overflow encountered in cast",
        ("value", "selu", "extreme-f32"): "function selu: NumPy warning escapes: overflow encountered in multiply",
        ("value", "signbit", "extreme-f16"): "function signbit: NumPy warning escapes: overflow encountered in cast",
        (
            "value",
            "silu",
            "extreme-f16",
        ): "functional silu: NumPy warning escapes: invalid value encountered in multiply",
        (
            "value",
            "silu",
            "extreme-f32",
        ): "functional silu: NumPy warning escapes: invalid value encountered in multiply",
        (
            "value",
            "silu",
            "extreme-f64",
        ): "functional silu: NumPy warning escapes: invalid value encountered in multiply",
        ("value", "sin", "extreme-f16"): "function sin: NumPy warning escapes: invalid value encountered in sin",
        ("value", "sin", "extreme-f32"): "function sin: NumPy warning escapes: invalid value encountered in sin",
        ("value", "sin", "extreme-f64"): "function sin: NumPy warning escapes: invalid value encountered in sin",
        ("value", "sinc", "extreme-f16"): "function sinc: NumPy warning escapes: invalid value encountered in sin",
        ("value", "sinc", "extreme-f32"): "function sinc: NumPy warning escapes: overflow encountered in multiply",
        ("value", "sinc", "extreme-f64"): "function sinc: NumPy warning escapes: overflow encountered in multiply",
        ("value", "sinh", "extreme-f16"): "function sinh: NumPy warning escapes: overflow encountered in exp",
        ("value", "sinh", "extreme-f32"): "function sinh: NumPy warning escapes: overflow encountered in exp",
        ("value", "sinh", "extreme-f64"): "function sinh: NumPy warning escapes: overflow encountered in exp",
        ("value", "sqrt", "extreme-f16"): "function sqrt: NumPy warning escapes: invalid value encountered in sqrt",
        ("value", "sqrt", "extreme-f32"): "function sqrt: NumPy warning escapes: invalid value encountered in sqrt",
        ("value", "sqrt", "extreme-f64"): "function sqrt: NumPy warning escapes: invalid value encountered in sqrt",
        ("value", "square", "extreme-f16"): "function square: NumPy warning escapes: overflow encountered in cast",
        ("value", "square", "extreme-f32"): "function square: NumPy warning escapes: overflow encountered in multiply",
        ("value", "square", "extreme-f64"): "function square: NumPy warning escapes: overflow encountered in multiply",
        ("value", "std", "extreme-f32"): "function std: NumPy warning escapes: invalid value encountered in reduce",
        ("value", "std", "zero-size-all"): "function std: NumPy warning escapes: invalid value encountered in divide",
        ("value", "std", "zero-size-dim0"): "function std: NumPy warning escapes: invalid value encountered in divide",
        (
            "value",
            "std_mean",
            "extreme-f32",
        ): "function std_mean: NumPy warning escapes: invalid value encountered in reduce",
        (
            "value",
            "std_mean",
            "zero-size-all",
        ): "function std_mean: NumPy warning escapes: invalid value encountered in divide",
        (
            "value",
            "std_mean",
            "zero-size-dim0",
        ): "function std_mean: NumPy warning escapes: invalid value encountered in divide",
        ("value", "tan", "extreme-f16"): "function tan: NumPy warning escapes: invalid value encountered in sin",
        ("value", "tan", "extreme-f32"): "function tan: NumPy warning escapes: invalid value encountered in sin",
        ("value", "tan", "extreme-f64"): "function tan: NumPy warning escapes: invalid value encountered in sin",
        ("value", "tensor", "scalars#13"): "function tensor: NumPy warning escapes: overflow encountered in cast",
        ("value", "to", "float32[3]#6"): "method to: NumPy warning escapes: invalid value encountered in cast",
        ("value", "var", "extreme-f32"): "function var: NumPy warning escapes: invalid value encountered in reduce",
        ("value", "var", "zero-size-all"): "function var: NumPy warning escapes: invalid value encountered in divide",
        ("value", "var", "zero-size-dim0"): "function var: NumPy warning escapes: invalid value encountered in divide",
        (
            "value",
            "var_mean",
            "extreme-f32",
        ): "function var_mean: NumPy warning escapes: invalid value encountered in reduce",
        (
            "value",
            "var_mean",
            "zero-size-all",
        ): "function var_mean: NumPy warning escapes: invalid value encountered in divide",
        (
            "value",
            "var_mean",
            "zero-size-dim0",
        ): "function var_mean: NumPy warning escapes: invalid value encountered in divide",
        ("value", "xlog1py", "extreme-f16"): "call xlog1py: NumPy warning escapes: invalid value encountered in log1p",
        ("value", "xlog1py", "extreme-f32"): "call xlog1py: NumPy warning escapes: invalid value encountered in log1p",
        ("value", "xlogy", "extreme-f16"): "function xlogy: NumPy warning escapes: divide by zero encountered in log",
        ("value", "xlogy", "extreme-f32"): "function xlogy: NumPy warning escapes: divide by zero encountered in log",
    },
    "exception family differs from PyTorch's": {
        (
            "error",
            "bincount",
            "float32[3]",
        ): "function bincount: TypeError where PyTorch raises RuntimeError/ValueError: DTypeError: bincount: expected",
        (
            "error",
            "cross_entropy",
            "float32[4x3]-float32[4]",
        ): "functional cross_entropy: TypeError where PyTorch raises RuntimeError/ValueError: DTypeError: cross_entro",
        (
            "error",
            "dot",
            "float32[3]-float64[3]",
        ): "function dot: TypeError where PyTorch raises RuntimeError/ValueError: DTypeError: dot: expected both oper",
        (
            "error",
            "embedding",
            "float32[1]-float32[4x3]",
        ): "functional embedding: TypeError where PyTorch raises RuntimeError/ValueError: DTypeError: embedding: expe",
        (
            "error",
            "kthvalue",
            "float32[5]",
        ): "function kthvalue: IndexError where PyTorch raises RuntimeError/ValueError: IndexOutOfRangeError: kthvalu",
        (
            "error",
            "masked_select",
            "float32[3x4]-float32[3x4]",
        ): "function masked_select: TypeError where PyTorch raises RuntimeError/ValueError: DTypeError: masked_select",
        (
            "error",
            "matmul",
            "float32[3x4]-float64[4x2]",
        ): "function matmul: TypeError where PyTorch raises RuntimeError/ValueError: DTypeError: matmul: expected bot",
        (
            "error",
            "one_hot",
            "float32[3]",
        ): "functional one_hot: TypeError where PyTorch raises RuntimeError/ValueError: DTypeError: one_hot: is only ",
        (
            "error",
            "one_hot",
            "int64[2]",
        ): "functional one_hot: IndexError where PyTorch raises RuntimeError/ValueError: IndexOutOfRangeError: one_ho",
        (
            "error",
            "one_hot",
            "int64[2]#1",
        ): "functional one_hot: IndexError where PyTorch raises RuntimeError/ValueError: IndexOutOfRangeError: one_ho",
        (
            "error",
            "topk",
            "float32[5]",
        ): "function topk: IndexError where PyTorch raises RuntimeError/ValueError: IndexOutOfRangeError: topk: k (6)",
        (
            "property",
            "zero-size-reductions",
            "amax",
        ): "amax(zeros(0,), 0, keepdim=False): RuntimeError/ValueError where PyTorch raises IndexError: ShapeError: a",
        (
            "property",
            "zero-size-reductions",
            "amin",
        ): "amin(zeros(0,), 0, keepdim=False): RuntimeError/ValueError where PyTorch raises IndexError: ShapeError: a",
        (
            "property",
            "zero-size-reductions",
            "argmax",
        ): "argmax(zeros(0,), 0, keepdim=False): RuntimeError/ValueError where PyTorch raises IndexError: ShapeError:",
        (
            "value",
            "amax",
            "zero-size-dim0",
        ): "function amax: RuntimeError/ValueError where PyTorch raises IndexError: ShapeError: amax: cannot reduce a",
        (
            "value",
            "amin",
            "zero-size-dim0",
        ): "function amin: RuntimeError/ValueError where PyTorch raises IndexError: ShapeError: amin: cannot reduce a",
        (
            "value",
            "argmax",
            "zero-size-all",
        ): "function argmax: RuntimeError/ValueError where PyTorch raises IndexError: ShapeError: argmax: cannot redu",
        (
            "value",
            "argmax",
            "zero-size-dim0",
        ): "function argmax: RuntimeError/ValueError where PyTorch raises IndexError: ShapeError: argmax: cannot redu",
        (
            "value",
            "argmin",
            "zero-size-all",
        ): "function argmin: RuntimeError/ValueError where PyTorch raises IndexError: ShapeError: argmin: cannot redu",
        (
            "value",
            "argmin",
            "zero-size-dim0",
        ): "function argmin: RuntimeError/ValueError where PyTorch raises IndexError: ShapeError: argmin: cannot redu",
        (
            "value",
            "bitwise_not",
            "0d-f64",
        ): "function bitwise_not: TypeError where PyTorch raises RuntimeError/ValueError: DTypeError: bitwise_not: on",
        (
            "value",
            "bitwise_not",
            "f32",
        ): "function bitwise_not: TypeError where PyTorch raises RuntimeError/ValueError: DTypeError: bitwise_not: on",
        (
            "value",
            "bitwise_not",
            "f32-expanded",
        ): "function bitwise_not: TypeError where PyTorch raises RuntimeError/ValueError: DTypeError: bitwise_not: on",
        (
            "value",
            "bitwise_not",
            "f32-sliced",
        ): "function bitwise_not: TypeError where PyTorch raises RuntimeError/ValueError: DTypeError: bitwise_not: on",
        (
            "value",
            "bitwise_not",
            "f32-transposed",
        ): "function bitwise_not: TypeError where PyTorch raises RuntimeError/ValueError: DTypeError: bitwise_not: on",
        (
            "value",
            "bitwise_not",
            "f64",
        ): "function bitwise_not: TypeError where PyTorch raises RuntimeError/ValueError: DTypeError: bitwise_not: on",
        (
            "value",
            "bitwise_not",
            "float16",
        ): "function bitwise_not: TypeError where PyTorch raises RuntimeError/ValueError: DTypeError: bitwise_not: on",
        (
            "value",
            "bitwise_not",
            "zero-size",
        ): "function bitwise_not: TypeError where PyTorch raises RuntimeError/ValueError: DTypeError: bitwise_not: on",
        (
            "value",
            "floor_divide",
            "promote-bool-int32",
        ): "inplace floor_divide_: TypeError where PyTorch raises RuntimeError/ValueError: DTypeError: floor_divide_:",
        (
            "value",
            "fmod",
            "bool-bool",
        ): "function fmod: ZeroDivisionError where PyTorch raises RuntimeError/ValueError: ZeroDivisionError: remaind",
        (
            "value",
            "max",
            "zero-size-dim0",
        ): "function max: RuntimeError/ValueError where PyTorch raises IndexError: ShapeError: max: cannot reduce an ",
        (
            "value",
            "min",
            "zero-size-dim0",
        ): "function min: RuntimeError/ValueError where PyTorch raises IndexError: ShapeError: min: cannot reduce an ",
        (
            "value",
            "pow",
            "bool-bool",
        ): "function pow: TypeError where PyTorch raises RuntimeError/ValueError: DTypeError: pow: not defined for dt",
        (
            "value",
            "pow[signs]",
            "int64[3]#1",
        ): "function pow: TypeError where PyTorch raises RuntimeError/ValueError: DTypeError: pow: integers to negati",
        (
            "value",
            "remainder",
            "bool-bool",
        ): "function remainder: ZeroDivisionError where PyTorch raises RuntimeError/ValueError: ZeroDivisionError: re",
        (
            "value",
            "remainder",
            "promote-bool-int32",
        ): "inplace remainder_: TypeError where PyTorch raises RuntimeError/ValueError: DTypeError: remainder_: resul",
    },
    "extreme values (inf, nan, overflow, huge logits)": {
        (
            "value",
            "div",
            "extreme-f16",
        ): "operators __rtruediv__: result: 1 of 11 values differ; at (5,) got np.float16(1.0), expected np.float16(i",
        (
            "value",
            "gelu",
            "extreme-f32",
        ): "PyTorch, not adcuda: its vectorized float32 gelu gives NaN at +inf (its scalar path: inf, as adcuda)",
        (
            "value",
            "hardswish",
            "extreme-f32",
        ): "functional hardswish: result: 2 of 12 values differ; at (0,) got np.float32(1e+38), expected np.float32(i",
        (
            "value",
            "hardswish",
            "extreme-f64",
        ): "functional hardswish: result: 1 of 11 values differ; at (0,) got np.float64(1e+308), expected np.float64(",
    },
    "first-order gradients": {
        (
            "grad",
            "binary_cross_entropy",
            "edges",
        ): "grad[0]: 2 of 3 values differ; at (0,) got np.float64(16.666666666666664), expected np.float64(inf)",
        (
            "grad",
            "kl_div",
            "zero-target",
        ): "grad[0]: 12 of 12 values differ; at (0, 0) got np.float64(0.9935327172279358), expected np.float64(nan)",
        (
            "grad",
            "kl_div",
            "zero-target-noncontig",
        ): "grad[0]: 12 of 12 values differ; at (0, 0) got np.float64(0.9935327172279358), expected np.float64(nan)",
    },
    "gradient: output does not require grad": {
        ("grad", "norm", "0d-dim0"): "gradient: no output requires grad; PyTorch's output requires grad",
    },
    "in-place: result type cast error family": {
        (
            "value",
            "acos",
            "int32",
        ): "inplace acos_: TypeError where PyTorch raises RuntimeError/ValueError: DTypeError: acos_: result type adc",
        (
            "value",
            "acos",
            "int64",
        ): "inplace acos_: TypeError where PyTorch raises RuntimeError/ValueError: DTypeError: acos_: result type adc",
        (
            "value",
            "acosh",
            "bool",
        ): "inplace acosh_: TypeError where PyTorch raises RuntimeError/ValueError: DTypeError: acosh_: result type a",
        (
            "value",
            "asin",
            "int32",
        ): "inplace asin_: TypeError where PyTorch raises RuntimeError/ValueError: DTypeError: asin_: result type adc",
        (
            "value",
            "asin",
            "int64",
        ): "inplace asin_: TypeError where PyTorch raises RuntimeError/ValueError: DTypeError: asin_: result type adc",
        (
            "value",
            "atanh",
            "bool",
        ): "inplace atanh_: TypeError where PyTorch raises RuntimeError/ValueError: DTypeError: atanh_: result type a",
        (
            "value",
            "atanh",
            "int32",
        ): "inplace atanh_: TypeError where PyTorch raises RuntimeError/ValueError: DTypeError: atanh_: result type a",
        (
            "value",
            "atanh",
            "int64",
        ): "inplace atanh_: TypeError where PyTorch raises RuntimeError/ValueError: DTypeError: atanh_: result type a",
        (
            "value",
            "lgamma",
            "bool",
        ): "inplace lgamma_: TypeError where PyTorch raises RuntimeError/ValueError: DTypeError: lgamma_: result type",
        (
            "value",
            "log",
            "bool",
        ): "inplace log_: TypeError where PyTorch raises RuntimeError/ValueError: DTypeError: log_: result type adcud",
        (
            "value",
            "log10",
            "bool",
        ): "inplace log10_: TypeError where PyTorch raises RuntimeError/ValueError: DTypeError: log10_: result type a",
        (
            "value",
            "log2",
            "bool",
        ): "inplace log2_: TypeError where PyTorch raises RuntimeError/ValueError: DTypeError: log2_: result type adc",
        (
            "value",
            "rsqrt",
            "bool",
        ): "inplace rsqrt_: TypeError where PyTorch raises RuntimeError/ValueError: DTypeError: rsqrt_: result type a",
        (
            "value",
            "xlogy",
            "bool-bool",
        ): "inplace xlogy_: TypeError where PyTorch raises RuntimeError/ValueError: DTypeError: xlogy_: result type a",
    },
    "missing op or form": {
        (
            "value",
            "copysign",
            "extreme-f16",
        ): "function copysign: rejects what PyTorch accepts: AttributeError: adcuda has no function copysign",
    },
    "other": {
        (
            "grad",
            "matmul[sparse]",
            "int64[2x4]-float64[4]-float64[4x2]",
        ): "PyTorch, not adcuda: torch's sparse mm backward gives 0 for the dense operand's second-order gradient thr",
        (
            "grad",
            "matmul[sparse]",
            "int64[2x4]-float64[4]-float64[4x2]#1",
        ): "PyTorch, not adcuda: torch's sparse mm backward gives 0 for the dense operand's second-order gradient thr",
        (
            "grad",
            "mm[sparse]",
            "int64[2x4]-float64[4]-float64[4x2]",
        ): "PyTorch, not adcuda: torch's sparse mm backward gives 0 for the dense operand's second-order gradient thr",
        (
            "grad",
            "mm[sparse]",
            "int64[2x4]-float64[4]-float64[4x2]#1",
        ): "PyTorch, not adcuda: torch's sparse mm backward gives 0 for the dense operand's second-order gradient thr",
        (
            "grad",
            "sparse.mm",
            "int64[2x4]-float64[4]-float64[4x2]",
        ): "PyTorch, not adcuda: torch's sparse mm backward gives 0 for the dense operand's second-order gradient thr",
        (
            "grad",
            "sparse.mm",
            "int64[2x4]-float64[4]-float64[4x2]#1",
        ): "PyTorch, not adcuda: torch's sparse mm backward gives 0 for the dense operand's second-order gradient thr",
        (
            "grad",
            "spmm",
            "int64[2x4]-float64[4]-float64[4x2]",
        ): "PyTorch, not adcuda: torch's sparse mm backward gives 0 for the dense operand's second-order gradient thr",
        (
            "grad",
            "spmm",
            "int64[2x4]-float64[4]-float64[4x2]#1",
        ): "PyTorch, not adcuda: torch's sparse mm backward gives 0 for the dense operand's second-order gradient thr",
    },
    "second-order gradients": {
        (
            "grad",
            "celu",
            "kinks-f64",
        ): "gradgrad[0]: 1 of 1 values differ; at (0,) got np.float64(0.25), expected np.float64(0.0)",
        (
            "grad",
            "cosine_similarity",
            "float64[1x2]-float64[1x2]",
        ): "gradgrad[0]: 2 of 2 values differ; at (0, 0) got np.float64(0.0), expected np.float64(nan)",
        (
            "grad",
            "elu",
            "kinks-f64",
        ): "gradgrad[0]: 1 of 1 values differ; at (0,) got np.float64(0.25), expected np.float64(0.0)",
        (
            "grad",
            "mish",
            "kinks-f64",
        ): "gradgrad[0]: 1 of 3 values differ; at (2,) got np.float64(0.0), expected np.float64(nan)",
        (
            "grad",
            "norm",
            "zeros-grad",
        ): "gradgrad[0]: 2 of 2 values differ; at (0,) got np.float64(0.0), expected np.float64(nan)",
        (
            "grad",
            "normalize",
            "float64[2x2]",
        ): "gradgrad[0]: 2 of 4 values differ; at (0, 0) got np.float64(0.0), expected np.float64(nan)",
        (
            "grad",
            "pow[signs]",
            "float64[3]-float64[3]",
        ): "gradgrad[0]: 1 of 3 values differ; at (0,) got np.float64(0.0), expected np.float64(nan)",
        (
            "grad",
            "prelu",
            "float64[3]-float64[1]",
        ): "gradgrad[0]: 1 of 3 values differ; at (0,) got np.float64(0.25), expected np.float64(0.0)",
        (
            "grad",
            "prelu",
            "float64[3]-float64[1]-noncontig",
        ): "gradgrad[0]: 1 of 3 values differ; at (0,) got np.float64(0.25), expected np.float64(0.0)",
        (
            "grad",
            "reciprocal",
            "kinks-f64",
        ): "gradgrad[0]: 2 of 3 values differ; at (0,) got np.float64(nan), expected np.float64(inf)",
        (
            "grad",
            "selu",
            "kinks-f64",
        ): "gradgrad[0]: 1 of 1 values differ; at (0,) got np.float64(0.43952483521184416), expected np.float64(0.0)",
        (
            "grad",
            "softplus",
            "kinks-f64",
        ): "gradgrad[0]: 1 of 4 values differ; at (2,) got np.float64(2.8054591863347315e-09), expected np.float64(0.",
        ("grad", "var", "0d"): "gradgrad[0]: 1 of 1 values differ; at () got np.float64(nan), expected np.float64(0.0)",
        (
            "grad",
            "var",
            "0d-dim0",
        ): "gradgrad[0]: 1 of 1 values differ; at () got np.float64(nan), expected np.float64(0.0)",
        (
            "grad",
            "var_mean",
            "0d",
        ): "gradgrad[0]: 1 of 1 values differ; at () got np.float64(nan), expected np.float64(0.0)",
        (
            "grad",
            "var_mean",
            "0d-dim0",
        ): "gradgrad[0]: 1 of 1 values differ; at () got np.float64(nan), expected np.float64(0.0)",
    },
    "strides of new tensors": {
        ("value", "clone", "float32[0x3]-noncontig"): "function clone: result: strides (3, 1), expected (0, 0)",
        ("value", "from_numpy", "scalars#3"): "function from_numpy: result: strides (3, 1), expected (0, 0)",
        ("value", "ones_like", "float32[0x3]-noncontig"): "function ones_like: result: strides (3, 1), expected (0, 0)",
        (
            "value",
            "zeros_like",
            "float32[0x3]-noncontig",
        ): "function zeros_like: result: strides (3, 1), expected (0, 0)",
    },
}

KNOWN = {ident: reason for group in GROUPS.values() for ident, reason in group.items()}


def expected_failure(check, key, sample):
    """The pytest marks for one test: a strict xfail with the recorded reason, or none."""
    reason = KNOWN.get((check, key, sample))
    return [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
