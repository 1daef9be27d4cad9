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
    "dtype and type promotion": {
        ("value", "square", "bool"): "function square: result: dtype bool, expected int64",
    },
    "error message does not name the op": {},
    "exception family differs from PyTorch's": {
        (
            "error",
            "bitwise_and",
            "float-operands",
        ): "function bitwise_and: raises DTypeError (DTypeError: bitwise_and: only integer and bool operands are sup",
        (
            "error",
            "bitwise_or",
            "float-operands",
        ): "function bitwise_or: raises DTypeError (DTypeError: bitwise_or: only integer and bool operands are suppo",
        (
            "error",
            "bitwise_xor",
            "float-operands",
        ): "function bitwise_xor: raises DTypeError (DTypeError: bitwise_xor: only integer and bool operands are sup",
        (
            "error",
            "celu",
            "list-input",
        ): "functional celu_: raises AttributeError (AttributeError: 'list' object has no attribute '_data'), PyTorc",
        (
            "error",
            "celu",
            "string-input",
        ): "functional celu_: raises AttributeError (AttributeError: 'str' object has no attribute '_data'), PyTorch",
        (
            "error",
            "cross_entropy",
            "float32[4x3]-float32[4]",
        ): "functional cross_entropy: raises DTypeError (DTypeError: cross_entropy: expected target of class indices",
        (
            "error",
            "dot",
            "float32[3]-float64[3]",
        ): "function dot: raises DTypeError (DTypeError: dot: expected both operands to have the same dtype, but got",
        (
            "error",
            "elu",
            "list-input",
        ): "functional elu_: raises AttributeError (AttributeError: 'list' object has no attribute '_data'), PyTorch",
        (
            "error",
            "elu",
            "string-input",
        ): "functional elu_: raises AttributeError (AttributeError: 'str' object has no attribute '_data'), PyTorch'",
        (
            "error",
            "embedding",
            "float32[1]-float32[4x3]",
        ): "functional embedding: raises DTypeError (DTypeError: embedding: expected indices with an integer dtype (",
        (
            "error",
            "hardtanh",
            "list-input",
        ): "functional hardtanh_: raises AttributeError (AttributeError: 'list' object has no attribute '_data'), Py",
        (
            "error",
            "hardtanh",
            "string-input",
        ): "functional hardtanh_: raises AttributeError (AttributeError: 'str' object has no attribute '_data'), PyT",
        (
            "error",
            "leaky_relu",
            "list-input",
        ): "functional leaky_relu_: raises AttributeError (AttributeError: 'list' object has no attribute '_data'), ",
        (
            "error",
            "leaky_relu",
            "string-input",
        ): "functional leaky_relu_: raises AttributeError (AttributeError: 'str' object has no attribute '_data'), P",
        (
            "error",
            "masked_select",
            "float32[3x4]-float32[3x4]",
        ): "function masked_select: raises DTypeError (DTypeError: masked_select: mask must be a bool tensor, got ad",
        (
            "error",
            "matmul",
            "float32[3x4]-float64[4x2]",
        ): "function matmul: raises DTypeError (DTypeError: matmul: expected both operands to have the same dtype, b",
        (
            "error",
            "one_hot",
            "float32[3]",
        ): "functional one_hot: raises DTypeError (DTypeError: one_hot: is only applicable to index tensors, got adc",
        (
            "error",
            "one_hot",
            "int64[2]",
        ): "functional one_hot: raises IndexOutOfRangeError (IndexOutOfRangeError: one_hot: class value 3 is out of ",
        (
            "error",
            "one_hot",
            "int64[2]#1",
        ): "functional one_hot: raises IndexOutOfRangeError (IndexOutOfRangeError: one_hot: class values must be non",
        (
            "error",
            "quantile",
            "int64[5]",
        ): "function quantile: raises DTypeError (DTypeError: quantile: expected a floating point input, got adcuda.",
        (
            "error",
            "relu",
            "list-input",
        ): "functional relu_: raises AttributeError (AttributeError: 'list' object has no attribute '_data'), PyTorc",
        (
            "error",
            "relu",
            "string-input",
        ): "functional relu_: raises AttributeError (AttributeError: 'str' object has no attribute '_data'), PyTorch",
        (
            "error",
            "selu",
            "list-input",
        ): "functional selu_: raises AttributeError (AttributeError: 'list' object has no attribute '_data'), PyTorc",
        (
            "error",
            "selu",
            "string-input",
        ): "functional selu_: raises AttributeError (AttributeError: 'str' object has no attribute '_data'), PyTorch",
        (
            "value",
            "bitwise_not",
            "0d-f64",
        ): "function bitwise_not: raises DTypeError (DTypeError: bitwise_not: only integer and bool tensors are supp",
        (
            "value",
            "bitwise_not",
            "f32",
        ): "function bitwise_not: raises DTypeError (DTypeError: bitwise_not: only integer and bool tensors are supp",
        (
            "value",
            "bitwise_not",
            "f32-expanded",
        ): "function bitwise_not: raises DTypeError (DTypeError: bitwise_not: only integer and bool tensors are supp",
        (
            "value",
            "bitwise_not",
            "f32-sliced",
        ): "function bitwise_not: raises DTypeError (DTypeError: bitwise_not: only integer and bool tensors are supp",
        (
            "value",
            "bitwise_not",
            "f32-transposed",
        ): "function bitwise_not: raises DTypeError (DTypeError: bitwise_not: only integer and bool tensors are supp",
        (
            "value",
            "bitwise_not",
            "f64",
        ): "function bitwise_not: raises DTypeError (DTypeError: bitwise_not: only integer and bool tensors are supp",
        (
            "value",
            "bitwise_not",
            "float16",
        ): "function bitwise_not: raises DTypeError (DTypeError: bitwise_not: only integer and bool tensors are supp",
        (
            "value",
            "bitwise_not",
            "zero-size",
        ): "function bitwise_not: raises DTypeError (DTypeError: bitwise_not: only integer and bool tensors are supp",
        (
            "value",
            "cuda",
            "float32[3x4]",
        ): "method cuda: raises DeviceError (DeviceError: cuda: device 'cuda' requested but CUDA is not available: t",
        (
            "value",
            "floor_divide",
            "bool-bool",
        ): "function floor_divide: raises ZeroDivisionError (ZeroDivisionError: floor_divide: integer division by ze",
        (
            "value",
            "fmod",
            "bool-bool",
        ): "function fmod: raises ZeroDivisionError (ZeroDivisionError: remainder: integer division by zero), PyTorc",
        (
            "value",
            "frac",
            "bool",
        ): "function frac: raises DTypeError (DTypeError: sub: subtraction, the `-` operator, with two bool tensors ",
        (
            "value",
            "log_softmax",
            "int64",
        ): "function log_softmax: raises DTypeError (DTypeError: log_softmax: expected a floating point tensor, got ",
        (
            "value",
            "logsigmoid",
            "bool",
        ): "functional logsigmoid: raises DTypeError (DTypeError: neg: negation, the `-` operator, on a bool tensor ",
        (
            "value",
            "logsigmoid",
            "int32",
        ): "functional logsigmoid: raises DTypeError (DTypeError: softplus: expected input to be a floating point te",
        (
            "value",
            "logsigmoid",
            "int64",
        ): "functional logsigmoid: raises DTypeError (DTypeError: softplus: expected input to be a floating point te",
        (
            "value",
            "mean",
            "dtype-int32-from-f64",
        ): "function mean: raises DTypeError (DTypeError: mean: could not infer output dtype. Input dtype must be a ",
        (
            "value",
            "mean",
            "dtype-int64-from-int32",
        ): "function mean: raises DTypeError (DTypeError: mean: could not infer output dtype. Input dtype must be a ",
        (
            "value",
            "mish",
            "bool",
        ): "functional mish: raises DTypeError (DTypeError: mish: expected input to be a floating point tensor, got ",
        (
            "value",
            "mish",
            "int32",
        ): "functional mish: raises DTypeError (DTypeError: mish: expected input to be a floating point tensor, got ",
        (
            "value",
            "mish",
            "int64",
        ): "functional mish: raises DTypeError (DTypeError: mish: expected input to be a floating point tensor, got ",
        (
            "value",
            "neg",
            "bool",
        ): "function neg: raises DTypeError (DTypeError: neg: negation, the `-` operator, on a bool tensor is not su",
        (
            "value",
            "pow",
            "bool-bool",
        ): "function pow: raises DTypeError (DTypeError: pow: not defined for dtype bool), PyTorch's family is Runti",
        (
            "value",
            "pow[signs]",
            "int64[3]#1",
        ): "function pow: raises DTypeError (DTypeError: pow: integers to negative integer powers are not allowed), ",
        (
            "value",
            "remainder",
            "bool-bool",
        ): "function remainder: raises ZeroDivisionError (ZeroDivisionError: remainder: integer division by zero), P",
        (
            "value",
            "softmax",
            "int64",
        ): "function softmax: raises DTypeError (DTypeError: softmax: expected a floating point tensor, got adcuda.i",
        (
            "value",
            "softmin",
            "int64",
        ): "functional softmin: raises DTypeError (DTypeError: softmax: expected a floating point tensor, got adcuda",
        (
            "value",
            "softplus",
            "bool",
        ): "functional softplus: raises DTypeError (DTypeError: softplus: expected input to be a floating point tens",
        (
            "value",
            "softplus",
            "int32",
        ): "functional softplus: raises DTypeError (DTypeError: softplus: expected input to be a floating point tens",
        (
            "value",
            "softplus",
            "int64",
        ): "functional softplus: raises DTypeError (DTypeError: softplus: expected input to be a floating point tens",
        (
            "value",
            "sub",
            "bool-alpha-bool",
        ): "function sub: raises DTypeError (DTypeError: sub: subtraction, the `-` operator, with two bool tensors i",
        (
            "value",
            "sub",
            "bool-bool",
        ): "function sub: raises DTypeError (DTypeError: sub: subtraction, the `-` operator, with two bool tensors i",
    },
    "extreme values (inf, nan, overflow, huge logits)": {
        (
            "value",
            "div",
            "extreme-f16",
        ): "operators __rtruediv__: result: 1 of 11 values differ; at (5,) got np.float16(1.0), expected np.float16(",
        (
            "value",
            "gelu",
            "extreme-f32",
        ): "functional gelu: result: 2 of 12 values differ; at (2,) got np.float32(3.4e+38), expected np.float32(inf",
    },
    "first-order gradients": {
        (
            "grad",
            "ldexp",
            "promote-f16-0d-f64",
        ): "grad[0]: 1 of 1 values differ; at () got np.float64(-1.619163319754122), expected np.float64(-1.61914062",
        (
            "grad",
            "binary_cross_entropy",
            "edges",
        ): "grad[0]: 2 of 3 values differ; at (0,) got np.float64(16.666666666666664), expected np.float64(inf)",
        (
            "grad",
            "div",
            "promote-f16-0d-f64",
        ): "grad[0]: 1 of 1 values differ; at () got np.float64(1.634765625), expected np.float64(1.638671875)",
        (
            "grad",
            "kl_div",
            "zero-target",
        ): "grad[0]: 12 of 12 values differ; at (0, 0) got np.float64(0.08536718785762787), expected np.float64(nan)",
        (
            "grad",
            "logaddexp",
            "promote-f16-0d-f64",
        ): "grad[0]: 1 of 1 values differ; at () got np.float64(2.7578125), expected np.float64(2.759765625)",
    },
    "gradient: output does not require grad": {
        ("grad", "norm", "0d-dim0"): "gradient: no output requires grad; PyTorch's output requires grad",
        ("grad", "xlogy", "promote-f16-0d-f64"): "gradient: no output requires grad; PyTorch's output requires grad",
    },
    "in-place: result type cast error family": {
        (
            "value",
            "acos",
            "bool",
        ): "inplace acos_: raises DTypeError (DTypeError: acos_: result type adcuda.float32 can't be cast to the des",
        (
            "value",
            "acos",
            "int32",
        ): "inplace acos_: raises DTypeError (DTypeError: acos_: result type adcuda.float32 can't be cast to the des",
        (
            "value",
            "acos",
            "int64",
        ): "inplace acos_: raises DTypeError (DTypeError: acos_: result type adcuda.float32 can't be cast to the des",
        (
            "value",
            "acosh",
            "bool",
        ): "inplace acosh_: raises DTypeError (DTypeError: acosh_: result type adcuda.float32 can't be cast to the d",
        (
            "value",
            "acosh",
            "int32",
        ): "inplace acosh_: raises DTypeError (DTypeError: acosh_: result type adcuda.float32 can't be cast to the d",
        (
            "value",
            "acosh",
            "int64",
        ): "inplace acosh_: raises DTypeError (DTypeError: acosh_: result type adcuda.float32 can't be cast to the d",
        (
            "value",
            "asin",
            "bool",
        ): "inplace asin_: raises DTypeError (DTypeError: asin_: result type adcuda.float32 can't be cast to the des",
        (
            "value",
            "asin",
            "int32",
        ): "inplace asin_: raises DTypeError (DTypeError: asin_: result type adcuda.float32 can't be cast to the des",
        (
            "value",
            "asin",
            "int64",
        ): "inplace asin_: raises DTypeError (DTypeError: asin_: result type adcuda.float32 can't be cast to the des",
        (
            "value",
            "asinh",
            "bool",
        ): "inplace asinh_: raises DTypeError (DTypeError: asinh_: result type adcuda.float32 can't be cast to the d",
        (
            "value",
            "asinh",
            "int32",
        ): "inplace asinh_: raises DTypeError (DTypeError: asinh_: result type adcuda.float32 can't be cast to the d",
        (
            "value",
            "asinh",
            "int64",
        ): "inplace asinh_: raises DTypeError (DTypeError: asinh_: result type adcuda.float32 can't be cast to the d",
        (
            "value",
            "atan",
            "bool",
        ): "inplace atan_: raises DTypeError (DTypeError: atan_: result type adcuda.float32 can't be cast to the des",
        (
            "value",
            "atan",
            "int32",
        ): "inplace atan_: raises DTypeError (DTypeError: atan_: result type adcuda.float32 can't be cast to the des",
        (
            "value",
            "atan",
            "int64",
        ): "inplace atan_: raises DTypeError (DTypeError: atan_: result type adcuda.float32 can't be cast to the des",
        (
            "value",
            "atan2",
            "bool-bool",
        ): "inplace atan2_: raises DTypeError (DTypeError: atan2_: result type adcuda.float32 can't be cast to the d",
        (
            "value",
            "atan2",
            "int64",
        ): "inplace atan2_: raises DTypeError (DTypeError: atan2_: result type adcuda.float32 can't be cast to the d",
        (
            "value",
            "atan2",
            "promote-bool-f32",
        ): "inplace atan2_: raises DTypeError (DTypeError: atan2_: result type adcuda.float32 can't be cast to the d",
        (
            "value",
            "atan2",
            "promote-bool-int32",
        ): "inplace atan2_: raises DTypeError (DTypeError: atan2_: result type adcuda.float32 can't be cast to the d",
        (
            "value",
            "atan2",
            "promote-int32-f32",
        ): "inplace atan2_: raises DTypeError (DTypeError: atan2_: result type adcuda.float32 can't be cast to the d",
        (
            "value",
            "atan2",
            "promote-int32-int64",
        ): "inplace atan2_: raises DTypeError (DTypeError: atan2_: result type adcuda.float32 can't be cast to the d",
        (
            "value",
            "atan2",
            "promote-int64-0d-f64",
        ): "inplace atan2_: raises DTypeError (DTypeError: atan2_: result type adcuda.float64 can't be cast to the d",
        (
            "value",
            "atanh",
            "bool",
        ): "inplace atanh_: raises DTypeError (DTypeError: atanh_: result type adcuda.float32 can't be cast to the d",
        (
            "value",
            "atanh",
            "int32",
        ): "inplace atanh_: raises DTypeError (DTypeError: atanh_: result type adcuda.float32 can't be cast to the d",
        (
            "value",
            "atanh",
            "int64",
        ): "inplace atanh_: raises DTypeError (DTypeError: atanh_: result type adcuda.float32 can't be cast to the d",
        (
            "value",
            "deg2rad",
            "bool",
        ): "inplace deg2rad_: raises DTypeError (DTypeError: deg2rad_: result type adcuda.float32 can't be cast to t",
        (
            "value",
            "deg2rad",
            "int32",
        ): "inplace deg2rad_: raises DTypeError (DTypeError: deg2rad_: result type adcuda.float32 can't be cast to t",
        (
            "value",
            "deg2rad",
            "int64",
        ): "inplace deg2rad_: raises DTypeError (DTypeError: deg2rad_: result type adcuda.float32 can't be cast to t",
        (
            "value",
            "erfc",
            "bool",
        ): "inplace erfc_: raises DTypeError (DTypeError: erfc_: result type adcuda.float32 can't be cast to the des",
        (
            "value",
            "erfc",
            "int32",
        ): "inplace erfc_: raises DTypeError (DTypeError: erfc_: result type adcuda.float32 can't be cast to the des",
        (
            "value",
            "erfc",
            "int64",
        ): "inplace erfc_: raises DTypeError (DTypeError: erfc_: result type adcuda.float32 can't be cast to the des",
        (
            "value",
            "ldexp",
            "bool-bool",
        ): "inplace ldexp_: raises DTypeError (DTypeError: ldexp_: result type adcuda.float32 can't be cast to the d",
        (
            "value",
            "ldexp",
            "int64",
        ): "inplace ldexp_: raises DTypeError (DTypeError: ldexp_: result type adcuda.float32 can't be cast to the d",
        (
            "value",
            "ldexp",
            "promote-bool-f32",
        ): "inplace ldexp_: raises DTypeError (DTypeError: ldexp_: result type adcuda.float32 can't be cast to the d",
        (
            "value",
            "ldexp",
            "promote-bool-int32",
        ): "inplace ldexp_: raises DTypeError (DTypeError: ldexp_: result type adcuda.float32 can't be cast to the d",
        (
            "value",
            "ldexp",
            "promote-int32-f32",
        ): "inplace ldexp_: raises DTypeError (DTypeError: ldexp_: result type adcuda.float32 can't be cast to the d",
        (
            "value",
            "ldexp",
            "promote-int32-int64",
        ): "inplace ldexp_: raises DTypeError (DTypeError: ldexp_: result type adcuda.float32 can't be cast to the d",
        (
            "value",
            "ldexp",
            "promote-int64-0d-f64",
        ): "inplace ldexp_: raises DTypeError (DTypeError: ldexp_: result type adcuda.float64 can't be cast to the d",
        (
            "value",
            "rad2deg",
            "bool",
        ): "inplace rad2deg_: raises DTypeError (DTypeError: rad2deg_: result type adcuda.float32 can't be cast to t",
        (
            "value",
            "rad2deg",
            "int32",
        ): "inplace rad2deg_: raises DTypeError (DTypeError: rad2deg_: result type adcuda.float32 can't be cast to t",
        (
            "value",
            "rad2deg",
            "int64",
        ): "inplace rad2deg_: raises DTypeError (DTypeError: rad2deg_: result type adcuda.float32 can't be cast to t",
        (
            "value",
            "sinc",
            "bool",
        ): "inplace sinc_: raises DTypeError (DTypeError: sinc_: result type adcuda.float32 can't be cast to the des",
        (
            "value",
            "sinc",
            "int32",
        ): "inplace sinc_: raises DTypeError (DTypeError: sinc_: result type adcuda.float32 can't be cast to the des",
        (
            "value",
            "sinc",
            "int64",
        ): "inplace sinc_: raises DTypeError (DTypeError: sinc_: result type adcuda.float32 can't be cast to the des",
        (
            "value",
            "digamma",
            "bool",
        ): "inplace digamma_: raises DTypeError (DTypeError: digamma_: result type adcuda.float32 can't be cast to t",
        (
            "value",
            "digamma",
            "int32",
        ): "inplace digamma_: raises DTypeError (DTypeError: digamma_: result type adcuda.float32 can't be cast to t",
        (
            "value",
            "digamma",
            "int64",
        ): "inplace digamma_: raises DTypeError (DTypeError: digamma_: result type adcuda.float32 can't be cast to t",
        (
            "value",
            "erfinv",
            "bool",
        ): "inplace erfinv_: raises DTypeError (DTypeError: erfinv_: result type adcuda.float32 can't be cast to the",
        (
            "value",
            "erfinv",
            "int32",
        ): "inplace erfinv_: raises DTypeError (DTypeError: erfinv_: result type adcuda.float32 can't be cast to the",
        (
            "value",
            "erfinv",
            "int64",
        ): "inplace erfinv_: raises DTypeError (DTypeError: erfinv_: result type adcuda.float32 can't be cast to the",
        (
            "value",
            "lgamma",
            "bool",
        ): "inplace lgamma_: raises DTypeError (DTypeError: lgamma_: result type adcuda.float32 can't be cast to the",
        (
            "value",
            "lgamma",
            "int32",
        ): "inplace lgamma_: raises DTypeError (DTypeError: lgamma_: result type adcuda.float32 can't be cast to the",
        (
            "value",
            "lgamma",
            "int64",
        ): "inplace lgamma_: raises DTypeError (DTypeError: lgamma_: result type adcuda.float32 can't be cast to the",
        (
            "value",
            "add",
            "int64-python-float",
        ): "inplace add_: raises DTypeError (DTypeError: add_: result type adcuda.float32 can't be cast to the desir",
        (
            "value",
            "add",
            "promote-bool-f32",
        ): "inplace add_: raises DTypeError (DTypeError: add_: result type adcuda.float32 can't be cast to the desir",
        (
            "value",
            "add",
            "promote-bool-int32",
        ): "inplace add_: raises DTypeError (DTypeError: add_: result type adcuda.int32 can't be cast to the desired",
        (
            "value",
            "add",
            "promote-int32-f32",
        ): "inplace add_: raises DTypeError (DTypeError: add_: result type adcuda.float32 can't be cast to the desir",
        (
            "value",
            "add",
            "promote-int64-0d-f64",
        ): "inplace add_: raises DTypeError (DTypeError: add_: result type adcuda.float64 can't be cast to the desir",
        (
            "value",
            "clamp",
            "int64-float-bounds",
        ): "inplace clamp_: raises DTypeError (DTypeError: clamp_: result type adcuda.float32 can't be cast to the d",
        (
            "value",
            "cos",
            "bool",
        ): "inplace cos_: raises DTypeError (DTypeError: cos_: result type adcuda.float32 can't be cast to the desir",
        (
            "value",
            "cos",
            "int32",
        ): "inplace cos_: raises DTypeError (DTypeError: cos_: result type adcuda.float32 can't be cast to the desir",
        (
            "value",
            "cos",
            "int64",
        ): "inplace cos_: raises DTypeError (DTypeError: cos_: result type adcuda.float32 can't be cast to the desir",
        (
            "value",
            "cosh",
            "int32",
        ): "inplace cosh_: raises DTypeError (DTypeError: cosh_: result type adcuda.float32 can't be cast to the des",
        (
            "value",
            "cosh",
            "int64",
        ): "inplace cosh_: raises DTypeError (DTypeError: cosh_: result type adcuda.float32 can't be cast to the des",
        (
            "value",
            "div",
            "bool-bool",
        ): "inplace div_: raises DTypeError (DTypeError: div_: result type adcuda.float32 can't be cast to the desir",
        (
            "value",
            "div",
            "int32-python-bool",
        ): "inplace div_: raises DTypeError (DTypeError: div_: result type adcuda.float32 can't be cast to the desir",
        (
            "value",
            "div",
            "int32-python-int",
        ): "inplace div_: raises DTypeError (DTypeError: div_: result type adcuda.float32 can't be cast to the desir",
        (
            "value",
            "div",
            "int64",
        ): "inplace div_: raises DTypeError (DTypeError: div_: result type adcuda.float32 can't be cast to the desir",
        (
            "value",
            "div",
            "int64-python-float",
        ): "inplace div_: raises DTypeError (DTypeError: div_: result type adcuda.float32 can't be cast to the desir",
        (
            "value",
            "div",
            "promote-bool-f32",
        ): "inplace div_: raises DTypeError (DTypeError: div_: result type adcuda.float32 can't be cast to the desir",
        (
            "value",
            "div",
            "promote-bool-int32",
        ): "inplace div_: raises DTypeError (DTypeError: div_: result type adcuda.float32 can't be cast to the desir",
        (
            "value",
            "div",
            "promote-int32-f32",
        ): "inplace div_: raises DTypeError (DTypeError: div_: result type adcuda.float32 can't be cast to the desir",
        (
            "value",
            "div",
            "promote-int32-int64",
        ): "inplace div_: raises DTypeError (DTypeError: div_: result type adcuda.float32 can't be cast to the desir",
        (
            "value",
            "div",
            "promote-int64-0d-f64",
        ): "inplace div_: raises DTypeError (DTypeError: div_: result type adcuda.float64 can't be cast to the desir",
        (
            "value",
            "div[rounding_mode]",
            "int64[4]-int64[4]#2",
        ): "inplace div_: raises DTypeError (DTypeError: div_: result type adcuda.float32 can't be cast to the desir",
        (
            "value",
            "erf",
            "bool",
        ): "inplace erf_: raises DTypeError (DTypeError: erf_: result type adcuda.float32 can't be cast to the desir",
        (
            "value",
            "erf",
            "int32",
        ): "inplace erf_: raises DTypeError (DTypeError: erf_: result type adcuda.float32 can't be cast to the desir",
        (
            "value",
            "erf",
            "int64",
        ): "inplace erf_: raises DTypeError (DTypeError: erf_: result type adcuda.float32 can't be cast to the desir",
        (
            "value",
            "exp",
            "bool",
        ): "inplace exp_: raises DTypeError (DTypeError: exp_: result type adcuda.float32 can't be cast to the desir",
        (
            "value",
            "exp",
            "int32",
        ): "inplace exp_: raises DTypeError (DTypeError: exp_: result type adcuda.float32 can't be cast to the desir",
        (
            "value",
            "exp",
            "int64",
        ): "inplace exp_: raises DTypeError (DTypeError: exp_: result type adcuda.float32 can't be cast to the desir",
        (
            "value",
            "exp2",
            "bool",
        ): "inplace exp2_: raises DTypeError (DTypeError: exp2_: result type adcuda.float32 can't be cast to the des",
        (
            "value",
            "exp2",
            "int32",
        ): "inplace exp2_: raises DTypeError (DTypeError: exp2_: result type adcuda.float32 can't be cast to the des",
        (
            "value",
            "exp2",
            "int64",
        ): "inplace exp2_: raises DTypeError (DTypeError: exp2_: result type adcuda.float32 can't be cast to the des",
        (
            "value",
            "expm1",
            "bool",
        ): "inplace expm1_: raises DTypeError (DTypeError: expm1_: result type adcuda.float32 can't be cast to the d",
        (
            "value",
            "expm1",
            "int32",
        ): "inplace expm1_: raises DTypeError (DTypeError: expm1_: result type adcuda.float32 can't be cast to the d",
        (
            "value",
            "expm1",
            "int64",
        ): "inplace expm1_: raises DTypeError (DTypeError: expm1_: result type adcuda.float32 can't be cast to the d",
        (
            "value",
            "floor_divide",
            "int64-python-float",
        ): "inplace floor_divide_: raises DTypeError (DTypeError: floor_divide_: result type adcuda.float32 can't be",
        (
            "value",
            "floor_divide",
            "promote-bool-f32",
        ): "inplace floor_divide_: raises DTypeError (DTypeError: floor_divide_: result type adcuda.float32 can't be",
        (
            "value",
            "floor_divide",
            "promote-bool-int32",
        ): "inplace floor_divide_: raises DTypeError (DTypeError: floor_divide_: result type adcuda.int32 can't be c",
        (
            "value",
            "floor_divide",
            "promote-int32-f32",
        ): "inplace floor_divide_: raises DTypeError (DTypeError: floor_divide_: result type adcuda.float32 can't be",
        (
            "value",
            "floor_divide",
            "promote-int64-0d-f64",
        ): "inplace floor_divide_: raises DTypeError (DTypeError: floor_divide_: result type adcuda.float64 can't be",
        (
            "value",
            "fmod",
            "int64-python-float",
        ): "inplace fmod_: raises DTypeError (DTypeError: fmod_: result type adcuda.float32 can't be cast to the des",
        (
            "value",
            "fmod",
            "promote-bool-f32",
        ): "inplace fmod_: raises DTypeError (DTypeError: fmod_: result type adcuda.float32 can't be cast to the des",
        (
            "value",
            "fmod",
            "promote-bool-int32",
        ): "inplace fmod_: raises DTypeError (DTypeError: fmod_: result type adcuda.int32 can't be cast to the desir",
        (
            "value",
            "fmod",
            "promote-int32-f32",
        ): "inplace fmod_: raises DTypeError (DTypeError: fmod_: result type adcuda.float32 can't be cast to the des",
        (
            "value",
            "fmod",
            "promote-int64-0d-f64",
        ): "inplace fmod_: raises DTypeError (DTypeError: fmod_: result type adcuda.float64 can't be cast to the des",
        (
            "value",
            "log",
            "bool",
        ): "inplace log_: raises DTypeError (DTypeError: log_: result type adcuda.float32 can't be cast to the desir",
        (
            "value",
            "log",
            "int32",
        ): "inplace log_: raises DTypeError (DTypeError: log_: result type adcuda.float32 can't be cast to the desir",
        (
            "value",
            "log",
            "int64",
        ): "inplace log_: raises DTypeError (DTypeError: log_: result type adcuda.float32 can't be cast to the desir",
        (
            "value",
            "log10",
            "bool",
        ): "inplace log10_: raises DTypeError (DTypeError: log10_: result type adcuda.float32 can't be cast to the d",
        (
            "value",
            "log10",
            "int32",
        ): "inplace log10_: raises DTypeError (DTypeError: log10_: result type adcuda.float32 can't be cast to the d",
        (
            "value",
            "log10",
            "int64",
        ): "inplace log10_: raises DTypeError (DTypeError: log10_: result type adcuda.float32 can't be cast to the d",
        (
            "value",
            "log1p",
            "bool",
        ): "inplace log1p_: raises DTypeError (DTypeError: log1p_: result type adcuda.float32 can't be cast to the d",
        (
            "value",
            "log1p",
            "int32",
        ): "inplace log1p_: raises DTypeError (DTypeError: log1p_: result type adcuda.float32 can't be cast to the d",
        (
            "value",
            "log1p",
            "int64",
        ): "inplace log1p_: raises DTypeError (DTypeError: log1p_: result type adcuda.float32 can't be cast to the d",
        (
            "value",
            "log2",
            "bool",
        ): "inplace log2_: raises DTypeError (DTypeError: log2_: result type adcuda.float32 can't be cast to the des",
        (
            "value",
            "log2",
            "int32",
        ): "inplace log2_: raises DTypeError (DTypeError: log2_: result type adcuda.float32 can't be cast to the des",
        (
            "value",
            "log2",
            "int64",
        ): "inplace log2_: raises DTypeError (DTypeError: log2_: result type adcuda.float32 can't be cast to the des",
        (
            "value",
            "mul",
            "int64-python-float",
        ): "inplace mul_: raises DTypeError (DTypeError: mul_: result type adcuda.float32 can't be cast to the desir",
        (
            "value",
            "mul",
            "promote-bool-f32",
        ): "inplace mul_: raises DTypeError (DTypeError: mul_: result type adcuda.float32 can't be cast to the desir",
        (
            "value",
            "mul",
            "promote-bool-int32",
        ): "inplace mul_: raises DTypeError (DTypeError: mul_: result type adcuda.int32 can't be cast to the desired",
        (
            "value",
            "mul",
            "promote-int32-f32",
        ): "inplace mul_: raises DTypeError (DTypeError: mul_: result type adcuda.float32 can't be cast to the desir",
        (
            "value",
            "mul",
            "promote-int64-0d-f64",
        ): "inplace mul_: raises DTypeError (DTypeError: mul_: result type adcuda.float64 can't be cast to the desir",
        (
            "value",
            "pow",
            "int64-python-float",
        ): "inplace pow_: raises DTypeError (DTypeError: pow_: result type adcuda.float32 can't be cast to the desir",
        (
            "value",
            "pow",
            "promote-bool-f32",
        ): "inplace pow_: raises DTypeError (DTypeError: pow_: result type adcuda.float32 can't be cast to the desir",
        (
            "value",
            "pow",
            "promote-bool-int32",
        ): "inplace pow_: raises DTypeError (DTypeError: pow_: result type adcuda.int32 can't be cast to the desired",
        (
            "value",
            "pow",
            "promote-int32-f32",
        ): "inplace pow_: raises DTypeError (DTypeError: pow_: result type adcuda.float32 can't be cast to the desir",
        (
            "value",
            "pow",
            "promote-int64-0d-f64",
        ): "inplace pow_: raises DTypeError (DTypeError: pow_: result type adcuda.float64 can't be cast to the desir",
        (
            "value",
            "reciprocal",
            "bool",
        ): "inplace reciprocal_: raises DTypeError (DTypeError: reciprocal_: result type adcuda.float32 can't be cas",
        (
            "value",
            "reciprocal",
            "int32",
        ): "inplace reciprocal_: raises DTypeError (DTypeError: reciprocal_: result type adcuda.float32 can't be cas",
        (
            "value",
            "reciprocal",
            "int64",
        ): "inplace reciprocal_: raises DTypeError (DTypeError: reciprocal_: result type adcuda.float32 can't be cas",
        (
            "value",
            "remainder",
            "int64-python-float",
        ): "inplace remainder_: raises DTypeError (DTypeError: remainder_: result type adcuda.float32 can't be cast ",
        (
            "value",
            "remainder",
            "promote-bool-f32",
        ): "inplace remainder_: raises DTypeError (DTypeError: remainder_: result type adcuda.float32 can't be cast ",
        (
            "value",
            "remainder",
            "promote-bool-int32",
        ): "inplace remainder_: raises DTypeError (DTypeError: remainder_: result type adcuda.int32 can't be cast to",
        (
            "value",
            "remainder",
            "promote-int32-f32",
        ): "inplace remainder_: raises DTypeError (DTypeError: remainder_: result type adcuda.float32 can't be cast ",
        (
            "value",
            "remainder",
            "promote-int64-0d-f64",
        ): "inplace remainder_: raises DTypeError (DTypeError: remainder_: result type adcuda.float64 can't be cast ",
        (
            "value",
            "rsqrt",
            "bool",
        ): "inplace rsqrt_: raises DTypeError (DTypeError: rsqrt_: result type adcuda.float32 can't be cast to the d",
        (
            "value",
            "rsqrt",
            "int32",
        ): "inplace rsqrt_: raises DTypeError (DTypeError: rsqrt_: result type adcuda.float32 can't be cast to the d",
        (
            "value",
            "rsqrt",
            "int64",
        ): "inplace rsqrt_: raises DTypeError (DTypeError: rsqrt_: result type adcuda.float32 can't be cast to the d",
        (
            "value",
            "sigmoid",
            "bool",
        ): "inplace sigmoid_: raises DTypeError (DTypeError: sigmoid_: result type adcuda.float32 can't be cast to t",
        (
            "value",
            "sigmoid",
            "int32",
        ): "inplace sigmoid_: raises DTypeError (DTypeError: sigmoid_: result type adcuda.float32 can't be cast to t",
        (
            "value",
            "sigmoid",
            "int64",
        ): "inplace sigmoid_: raises DTypeError (DTypeError: sigmoid_: result type adcuda.float32 can't be cast to t",
        (
            "value",
            "sin",
            "bool",
        ): "inplace sin_: raises DTypeError (DTypeError: sin_: result type adcuda.float32 can't be cast to the desir",
        (
            "value",
            "sin",
            "int32",
        ): "inplace sin_: raises DTypeError (DTypeError: sin_: result type adcuda.float32 can't be cast to the desir",
        (
            "value",
            "sin",
            "int64",
        ): "inplace sin_: raises DTypeError (DTypeError: sin_: result type adcuda.float32 can't be cast to the desir",
        (
            "value",
            "sinh",
            "int32",
        ): "inplace sinh_: raises DTypeError (DTypeError: sinh_: result type adcuda.float32 can't be cast to the des",
        (
            "value",
            "sinh",
            "int64",
        ): "inplace sinh_: raises DTypeError (DTypeError: sinh_: result type adcuda.float32 can't be cast to the des",
        (
            "value",
            "sqrt",
            "bool",
        ): "inplace sqrt_: raises DTypeError (DTypeError: sqrt_: result type adcuda.float32 can't be cast to the des",
        (
            "value",
            "sqrt",
            "int32",
        ): "inplace sqrt_: raises DTypeError (DTypeError: sqrt_: result type adcuda.float32 can't be cast to the des",
        (
            "value",
            "sqrt",
            "int64",
        ): "inplace sqrt_: raises DTypeError (DTypeError: sqrt_: result type adcuda.float32 can't be cast to the des",
        (
            "value",
            "sub",
            "int64-python-float",
        ): "inplace sub_: raises DTypeError (DTypeError: sub_: result type adcuda.float32 can't be cast to the desir",
        (
            "value",
            "sub",
            "promote-int32-f32",
        ): "inplace sub_: raises DTypeError (DTypeError: sub_: result type adcuda.float32 can't be cast to the desir",
        (
            "value",
            "sub",
            "promote-int64-0d-f64",
        ): "inplace sub_: raises DTypeError (DTypeError: sub_: result type adcuda.float64 can't be cast to the desir",
        (
            "value",
            "tan",
            "bool",
        ): "inplace tan_: raises DTypeError (DTypeError: tan_: result type adcuda.float32 can't be cast to the desir",
        (
            "value",
            "tan",
            "int32",
        ): "inplace tan_: raises DTypeError (DTypeError: tan_: result type adcuda.float32 can't be cast to the desir",
        (
            "value",
            "tan",
            "int64",
        ): "inplace tan_: raises DTypeError (DTypeError: tan_: result type adcuda.float32 can't be cast to the desir",
        (
            "value",
            "tanh",
            "bool",
        ): "inplace tanh_: raises DTypeError (DTypeError: tanh_: result type adcuda.float32 can't be cast to the des",
        (
            "value",
            "tanh",
            "int32",
        ): "inplace tanh_: raises DTypeError (DTypeError: tanh_: result type adcuda.float32 can't be cast to the des",
        (
            "value",
            "tanh",
            "int64",
        ): "inplace tanh_: raises DTypeError (DTypeError: tanh_: result type adcuda.float32 can't be cast to the des",
        (
            "value",
            "xlogy",
            "bool-bool",
        ): "inplace xlogy_: raises DTypeError (DTypeError: xlogy_: result type adcuda.float32 can't be cast to the d",
        (
            "value",
            "xlogy",
            "int32-python-bool",
        ): "inplace xlogy_: raises DTypeError (DTypeError: xlogy_: result type adcuda.float32 can't be cast to the d",
        (
            "value",
            "xlogy",
            "int32-python-int",
        ): "inplace xlogy_: raises DTypeError (DTypeError: xlogy_: result type adcuda.float32 can't be cast to the d",
        (
            "value",
            "xlogy",
            "int64",
        ): "inplace xlogy_: raises DTypeError (DTypeError: xlogy_: result type adcuda.float32 can't be cast to the d",
        (
            "value",
            "xlogy",
            "int64-python-float",
        ): "inplace xlogy_: raises DTypeError (DTypeError: xlogy_: result type adcuda.float32 can't be cast to the d",
        (
            "value",
            "xlogy",
            "promote-bool-f32",
        ): "inplace xlogy_: raises DTypeError (DTypeError: xlogy_: result type adcuda.float32 can't be cast to the d",
        (
            "value",
            "xlogy",
            "promote-bool-int32",
        ): "inplace xlogy_: raises DTypeError (DTypeError: xlogy_: result type adcuda.float32 can't be cast to the d",
        (
            "value",
            "xlogy",
            "promote-int32-f32",
        ): "inplace xlogy_: raises DTypeError (DTypeError: xlogy_: result type adcuda.float32 can't be cast to the d",
        (
            "value",
            "xlogy",
            "promote-int32-int64",
        ): "inplace xlogy_: raises DTypeError (DTypeError: xlogy_: result type adcuda.float32 can't be cast to the d",
        (
            "value",
            "xlogy",
            "promote-int64-0d-f64",
        ): "inplace xlogy_: raises DTypeError (DTypeError: xlogy_: result type adcuda.float64 can't be cast to the d",
    },
    "invalid input accepted (PyTorch raises)": {
        (
            "error",
            "where",
            "float-condition",
        ): "function where: PyTorch raises RuntimeError/ValueError (RuntimeError: where expected condition to be a b",
        (
            "value",
            "abs",
            "bool",
        ): 'function abs: PyTorch raises RuntimeError/ValueError (NotImplementedError: "abs_cpu" not implemented for',
        (
            "value",
            "adaptive_max_pool1d",
            "float32[2x3x7]",
        ): "function adaptive_max_pool1d: PyTorch raises TypeError (TypeError: adaptive_max_pool1d() takes 2 positio",
        (
            "value",
            "add",
            "int64-alpha-float",
        ): "function add: PyTorch raises RuntimeError/ValueError (RuntimeError: For integral input tensors, argument",
        (
            "value",
            "argmax",
            "bool",
        ): "function argmax: PyTorch raises RuntimeError/ValueError (RuntimeError: argmax(): does not support bool i",
        (
            "value",
            "argmin",
            "bool",
        ): "function argmin: PyTorch raises RuntimeError/ValueError (RuntimeError: argmin(): does not support bool i",
        (
            "value",
            "ceil",
            "bool",
        ): 'function ceil: PyTorch raises RuntimeError/ValueError (NotImplementedError: "ceil_vml_cpu" not implement',
        (
            "value",
            "celu",
            "bool",
        ): 'function celu: PyTorch raises RuntimeError/ValueError (NotImplementedError: "elu_cpu" not implemented fo',
        (
            "value",
            "celu",
            "int32",
        ): 'function celu: PyTorch raises RuntimeError/ValueError (NotImplementedError: "elu_cpu" not implemented fo',
        (
            "value",
            "celu",
            "int64",
        ): 'function celu: PyTorch raises RuntimeError/ValueError (NotImplementedError: "elu_cpu" not implemented fo',
        (
            "value",
            "elu",
            "bool",
        ): 'functional elu: PyTorch raises RuntimeError/ValueError (NotImplementedError: "elu_cpu" not implemented f',
        (
            "value",
            "elu",
            "int32",
        ): 'functional elu: PyTorch raises RuntimeError/ValueError (NotImplementedError: "elu_cpu" not implemented f',
        (
            "value",
            "elu",
            "int64",
        ): 'functional elu: PyTorch raises RuntimeError/ValueError (NotImplementedError: "elu_cpu" not implemented f',
        (
            "value",
            "flip",
            "float32[2x3x4]#1",
        ): "function flip: PyTorch raises TypeError (TypeError: flip(): argument 'dims' (position 2) must be tuple o",
        (
            "value",
            "floor",
            "bool",
        ): 'function floor: PyTorch raises RuntimeError/ValueError (NotImplementedError: "floor_vml_cpu" not impleme',
        (
            "value",
            "frac",
            "int32",
        ): 'function frac: PyTorch raises RuntimeError/ValueError (NotImplementedError: "frac_cpu" not implemented f',
        (
            "value",
            "frac",
            "int64",
        ): 'function frac: PyTorch raises RuntimeError/ValueError (NotImplementedError: "frac_cpu" not implemented f',
        (
            "value",
            "gelu",
            "bool",
        ): 'functional gelu: PyTorch raises RuntimeError/ValueError (NotImplementedError: "GeluKernelImpl" not imple',
        (
            "value",
            "gelu",
            "int32",
        ): 'functional gelu: PyTorch raises RuntimeError/ValueError (NotImplementedError: "GeluKernelImpl" not imple',
        (
            "value",
            "gelu",
            "int64",
        ): 'functional gelu: PyTorch raises RuntimeError/ValueError (NotImplementedError: "GeluKernelImpl" not imple',
        (
            "value",
            "hardshrink",
            "bool",
        ): 'function hardshrink: PyTorch raises RuntimeError/ValueError (NotImplementedError: "hardshrink_cpu" not i',
        (
            "value",
            "hardshrink",
            "int32",
        ): 'function hardshrink: PyTorch raises RuntimeError/ValueError (NotImplementedError: "hardshrink_cpu" not i',
        (
            "value",
            "hardshrink",
            "int64",
        ): 'function hardshrink: PyTorch raises RuntimeError/ValueError (NotImplementedError: "hardshrink_cpu" not i',
        (
            "value",
            "hardsigmoid",
            "bool",
        ): 'functional hardsigmoid: PyTorch raises RuntimeError/ValueError (NotImplementedError: "hardsigmoid_cpu" n',
        (
            "value",
            "hardsigmoid",
            "int32",
        ): 'functional hardsigmoid: PyTorch raises RuntimeError/ValueError (NotImplementedError: "hardsigmoid_cpu" n',
        (
            "value",
            "hardsigmoid",
            "int64",
        ): 'functional hardsigmoid: PyTorch raises RuntimeError/ValueError (NotImplementedError: "hardsigmoid_cpu" n',
        (
            "value",
            "hardswish",
            "bool",
        ): 'functional hardswish: PyTorch raises RuntimeError/ValueError (NotImplementedError: "hardswish_cpu" not i',
        (
            "value",
            "hardswish",
            "int32",
        ): 'functional hardswish: PyTorch raises RuntimeError/ValueError (NotImplementedError: "hardswish_cpu" not i',
        (
            "value",
            "hardswish",
            "int64",
        ): 'functional hardswish: PyTorch raises RuntimeError/ValueError (NotImplementedError: "hardswish_cpu" not i',
        (
            "value",
            "hardtanh",
            "bool",
        ): "functional hardtanh: PyTorch raises RuntimeError/ValueError (RuntimeError: Bool inputs not supported for",
        (
            "value",
            "heaviside",
            "promote-bool-f32",
        ): "function heaviside: PyTorch raises RuntimeError/ValueError (RuntimeError: heaviside is not yet implement",
        (
            "value",
            "heaviside",
            "promote-bool-int32",
        ): "function heaviside: PyTorch raises RuntimeError/ValueError (RuntimeError: heaviside is not yet implement",
        (
            "value",
            "heaviside",
            "promote-f16-0d-f64",
        ): "function heaviside: PyTorch raises RuntimeError/ValueError (RuntimeError: heaviside is not yet implement",
        (
            "value",
            "heaviside",
            "promote-f16-f32",
        ): "function heaviside: PyTorch raises RuntimeError/ValueError (RuntimeError: heaviside is not yet implement",
        (
            "value",
            "heaviside",
            "promote-int32-f32",
        ): "function heaviside: PyTorch raises RuntimeError/ValueError (RuntimeError: heaviside is not yet implement",
        (
            "value",
            "heaviside",
            "promote-int32-int64",
        ): "function heaviside: PyTorch raises RuntimeError/ValueError (RuntimeError: heaviside is not yet implement",
        (
            "value",
            "heaviside",
            "promote-int64-0d-f64",
        ): "function heaviside: PyTorch raises RuntimeError/ValueError (RuntimeError: heaviside is not yet implement",
        (
            "value",
            "leaky_relu",
            "bool",
        ): 'functional leaky_relu: PyTorch raises RuntimeError/ValueError (NotImplementedError: "leaky_relu_cpu" not',
        (
            "value",
            "leaky_relu",
            "int32",
        ): 'functional leaky_relu: PyTorch raises RuntimeError/ValueError (NotImplementedError: "leaky_relu_cpu" not',
        (
            "value",
            "leaky_relu",
            "int64",
        ): 'functional leaky_relu: PyTorch raises RuntimeError/ValueError (NotImplementedError: "leaky_relu_cpu" not',
        (
            "value",
            "logsumexp",
            "dims-empty-tuple",
        ): "function logsumexp: PyTorch raises RuntimeError/ValueError (RuntimeError: output with shape [] doesn't m",
        (
            "value",
            "max_pool1d",
            "float32[2x3x8]",
        ): "function max_pool1d: PyTorch raises TypeError (TypeError: max_pool1d() got an unexpected keyword argumen",
        (
            "value",
            "max_pool2d",
            "float32[1x2x6x6]",
        ): "function max_pool2d: PyTorch raises TypeError (TypeError: max_pool2d() got an unexpected keyword argumen",
        (
            "value",
            "median",
            "bool",
        ): 'function median: PyTorch raises RuntimeError/ValueError (NotImplementedError: "median_cpu" not implement',
        (
            "value",
            "permute",
            "float32[2x3x4]#1",
        ): "function permute: PyTorch raises TypeError (TypeError: permute() takes 2 positional arguments but 4 were",
        (
            "value",
            "permute",
            "float64[2x3x4]",
        ): "function permute: PyTorch raises TypeError (TypeError: permute() takes 2 positional arguments but 4 were",
        (
            "value",
            "positive",
            "bool",
        ): "function positive: PyTorch raises RuntimeError/ValueError (RuntimeError: The `+` operator, on a bool ten",
        (
            "value",
            "relu",
            "bool",
        ): "function relu: PyTorch raises RuntimeError/ValueError (RuntimeError: Boolean inputs not supported for re",
        (
            "value",
            "relu6",
            "bool",
        ): "functional relu6: PyTorch raises RuntimeError/ValueError (RuntimeError: Bool inputs not supported for ha",
        (
            "value",
            "repeat_interleave",
            "int64[3]",
        ): "method repeat_interleave: PyTorch raises TypeError (TypeError: repeat_interleave() received an invalid c",
        (
            "value",
            "reshape",
            "float32[0d]",
        ): "function reshape: PyTorch raises TypeError (TypeError: reshape() takes 2 positional arguments but 3 were",
        (
            "value",
            "reshape",
            "float32[0x3]",
        ): "function reshape: PyTorch raises TypeError (TypeError: reshape() takes 2 positional arguments but 3 were",
        (
            "value",
            "reshape",
            "float32[2x6]",
        ): "function reshape: PyTorch raises TypeError (TypeError: reshape() takes 2 positional arguments but 3 were",
        (
            "value",
            "reshape",
            "float32[2x6]#2",
        ): "function reshape: PyTorch raises TypeError (TypeError: reshape(): argument 'shape' (position 2) must be ",
        (
            "value",
            "reshape",
            "float32[3x4]t",
        ): "function reshape: PyTorch raises TypeError (TypeError: reshape(): argument 'shape' (position 2) must be ",
        (
            "value",
            "reshape",
            "float64[2x6]",
        ): "function reshape: PyTorch raises TypeError (TypeError: reshape() takes 2 positional arguments but 3 were",
        (
            "value",
            "round",
            "bool",
        ): 'function round: PyTorch raises RuntimeError/ValueError (NotImplementedError: "round_vml_cpu" not impleme',
        (
            "value",
            "selu",
            "bool",
        ): 'function selu: PyTorch raises RuntimeError/ValueError (NotImplementedError: "elu_cpu" not implemented fo',
        (
            "value",
            "selu",
            "int32",
        ): 'function selu: PyTorch raises RuntimeError/ValueError (NotImplementedError: "elu_cpu" not implemented fo',
        (
            "value",
            "selu",
            "int64",
        ): 'function selu: PyTorch raises RuntimeError/ValueError (NotImplementedError: "elu_cpu" not implemented fo',
        (
            "value",
            "silu",
            "bool",
        ): 'functional silu: PyTorch raises RuntimeError/ValueError (NotImplementedError: "silu_cpu" not implemented',
        (
            "value",
            "silu",
            "int32",
        ): 'functional silu: PyTorch raises RuntimeError/ValueError (NotImplementedError: "silu_cpu" not implemented',
        (
            "value",
            "silu",
            "int64",
        ): 'functional silu: PyTorch raises RuntimeError/ValueError (NotImplementedError: "silu_cpu" not implemented',
        (
            "value",
            "softshrink",
            "bool",
        ): 'functional softshrink: PyTorch raises RuntimeError/ValueError (NotImplementedError: "softshrink_check" n',
        (
            "value",
            "softshrink",
            "int32",
        ): 'functional softshrink: PyTorch raises RuntimeError/ValueError (NotImplementedError: "softshrink_check" n',
        (
            "value",
            "softshrink",
            "int64",
        ): 'functional softshrink: PyTorch raises RuntimeError/ValueError (NotImplementedError: "softshrink_check" n',
        (
            "value",
            "softsign",
            "bool",
        ): 'functional softsign: PyTorch raises RuntimeError/ValueError (NotImplementedError: "abs_cpu" not implemen',
        (
            "value",
            "split",
            "float32[5x4]#3",
        ): "method split: PyTorch raises TypeError (TypeError: Tensor.split() got an unexpected keyword argument 'sp",
        (
            "value",
            "sub",
            "int32-python-bool",
        ): "function sub: PyTorch raises RuntimeError/ValueError (RuntimeError: Subtraction, the `-` operator, with ",
        (
            "value",
            "sub",
            "int64-alpha-float",
        ): "function sub: PyTorch raises RuntimeError/ValueError (RuntimeError: For integral input tensors, argument",
        (
            "value",
            "sub",
            "promote-bool-f32",
        ): "function sub: PyTorch raises RuntimeError/ValueError (RuntimeError: Subtraction, the `-` operator, with ",
        (
            "value",
            "sub",
            "promote-bool-int32",
        ): "function sub: PyTorch raises RuntimeError/ValueError (RuntimeError: Subtraction, the `-` operator, with ",
        (
            "value",
            "trunc",
            "bool",
        ): 'function trunc: PyTorch raises RuntimeError/ValueError (NotImplementedError: "trunc_vml_cpu" not impleme',
        (
            "value",
            "where",
            "bool[3]-float64[3]-float64[3]",
        ): "method where: PyTorch raises RuntimeError/ValueError (RuntimeError: where expected condition to be a boo",
        (
            "value",
            "where",
            "broadcast",
        ): "method where: PyTorch raises RuntimeError/ValueError (RuntimeError: where expected condition to be a boo",
        (
            "value",
            "where",
            "promote",
        ): "method where: PyTorch raises RuntimeError/ValueError (RuntimeError: where expected condition to be a boo",
        (
            "value",
            "where",
            "promote-int-python-float",
        ): "method where: PyTorch raises RuntimeError/ValueError (RuntimeError: where expected condition to be a boo",
        (
            "value",
            "where",
            "python-other",
        ): "method where: PyTorch raises RuntimeError/ValueError (RuntimeError: where expected condition to be a boo",
        (
            "value",
            "where",
            "zero-size",
        ): "method where: PyTorch raises RuntimeError/ValueError (RuntimeError: where expected condition to be a boo",
    },
    "missing op or form": {
        (
            "value",
            "copysign",
            "bool-bool",
        ): "function copysign: raises AttributeError: adcuda has no function copysign; the reference returns a resul",
        (
            "value",
            "copysign",
            "int32-python-bool",
        ): "function copysign: raises AttributeError: adcuda has no function copysign; the reference returns a resul",
        (
            "value",
            "copysign",
            "int32-python-int",
        ): "function copysign: raises AttributeError: adcuda has no function copysign; the reference returns a resul",
        (
            "value",
            "copysign",
            "int64",
        ): "function copysign: raises AttributeError: adcuda has no function copysign; the reference returns a resul",
        (
            "value",
            "copysign",
            "int64-python-float",
        ): "function copysign: raises AttributeError: adcuda has no function copysign; the reference returns a resul",
        (
            "value",
            "copysign",
            "promote-bool-f32",
        ): "function copysign: raises AttributeError: adcuda has no function copysign; the reference returns a resul",
        (
            "value",
            "copysign",
            "promote-bool-int32",
        ): "function copysign: raises AttributeError: adcuda has no function copysign; the reference returns a resul",
        (
            "value",
            "copysign",
            "promote-int32-f32",
        ): "function copysign: raises AttributeError: adcuda has no function copysign; the reference returns a resul",
        (
            "value",
            "copysign",
            "promote-int32-int64",
        ): "function copysign: raises AttributeError: adcuda has no function copysign; the reference returns a resul",
        (
            "value",
            "copysign",
            "promote-int64-0d-f64",
        ): "function copysign: raises AttributeError: adcuda has no function copysign; the reference returns a resul",
        (
            "value",
            "rsub",
            "bool-alpha-bool",
        ): "function rsub: raises AttributeError (AttributeError: adcuda has no function rsub), PyTorch's family is ",
        (
            "value",
            "rsub",
            "bool-bool",
        ): "function rsub: raises AttributeError (AttributeError: adcuda has no function rsub), PyTorch's family is ",
        (
            "value",
            "rsub",
            "int32-python-bool",
        ): "function rsub: raises AttributeError (AttributeError: adcuda has no function rsub), PyTorch's family is ",
        (
            "value",
            "rsub",
            "int64-alpha-float",
        ): "function rsub: raises AttributeError (AttributeError: adcuda has no function rsub), PyTorch's family is ",
        (
            "value",
            "rsub",
            "promote-bool-f32",
        ): "function rsub: raises AttributeError (AttributeError: adcuda has no function rsub), PyTorch's family is ",
        (
            "value",
            "rsub",
            "promote-bool-int32",
        ): "function rsub: raises AttributeError (AttributeError: adcuda has no function rsub), PyTorch's family is ",
    },
    "other": {
        (
            "value",
            "tanhshrink",
            "bool",
        ): "functional tanhshrink: PyTorch raises RuntimeError/ValueError (RuntimeError: Subtraction, the `-` operat",
    },
    "raw Python/NumPy error leaks": {
        (
            "value",
            "where",
            "condition-only",
        ): "method where: raises a raw TypeError (TypeError: where() missing 2 required positional arguments: 'condi",
    },
    "second-order gradients": {
        (
            "grad",
            "atan2",
            "promote-f16-0d-f64",
        ): "gradgrad[0]: 1 of 1 values differ; at () got np.float64(0.9367186250537994), expected np.float64(0.93731",
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
        ): "gradgrad[0]: 1 of 4 values differ; at (2,) got np.float64(2.8054591863347315e-09), expected np.float64(0",
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
    "shape": {
        (
            "error",
            "bincount",
            "float32[3]",
        ): "function bincount: raises DTypeError (DTypeError: bincount: expected a 1-d tensor of non-negative intege",
        (
            "error",
            "kthvalue",
            "float32[5]",
        ): "function kthvalue: raises IndexOutOfRangeError (IndexOutOfRangeError: kthvalue: k (6) out of range for d",
        (
            "error",
            "topk",
            "float32[5]",
        ): "function topk: raises IndexOutOfRangeError (IndexOutOfRangeError: topk: k (6) is out of range for dimens",
        ("value", "all", "dims-empty-tuple"): "function all: result: shape (), expected (2, 3)",
        (
            "value",
            "amax",
            "zero-size-dim0",
        ): "function amax: raises ShapeError (ShapeError: amax: cannot reduce an empty tensor of shape (0, 3) over d",
        (
            "value",
            "amin",
            "zero-size-dim0",
        ): "function amin: raises ShapeError (ShapeError: amin: cannot reduce an empty tensor of shape (0, 3) over d",
        ("value", "any", "dims-empty-tuple"): "function any: result: shape (), expected (2, 3)",
        (
            "value",
            "argmax",
            "zero-size-all",
        ): "function argmax: raises ShapeError (ShapeError: argmax: cannot reduce an empty tensor of shape (0, 3) ov",
        (
            "value",
            "argmax",
            "zero-size-dim0",
        ): "function argmax: raises ShapeError (ShapeError: argmax: cannot reduce an empty tensor of shape (0, 3) ov",
        (
            "value",
            "argmin",
            "zero-size-all",
        ): "function argmin: raises ShapeError (ShapeError: argmin: cannot reduce an empty tensor of shape (0, 3) ov",
        (
            "value",
            "argmin",
            "zero-size-dim0",
        ): "function argmin: raises ShapeError (ShapeError: argmin: cannot reduce an empty tensor of shape (0, 3) ov",
        (
            "value",
            "max",
            "zero-size-dim0",
        ): "function max: raises ShapeError (ShapeError: max: cannot reduce an empty tensor of shape (0, 3) over dim",
        (
            "value",
            "min",
            "zero-size-dim0",
        ): "function min: raises ShapeError (ShapeError: min: cannot reduce an empty tensor of shape (0, 3) over dim",
    },
    "strides of new tensors": {
        ("value", "clone", "float32[3x4]t"): "function clone: result: strides (4, 1), expected (1, 3)",
        ("value", "ones_like", "float32[3x4]t"): "function ones_like: result: strides (4, 1), expected (1, 3)",
        ("value", "zeros_like", "float32[3x4]t"): "function zeros_like: result: strides (4, 1), expected (1, 3)",
        (
            "value",
            "clone",
            "float32[0x3]",
        ): "from_numpy's empty array: PyTorch's clone keeps its (0, 0) strides, adcuda reports row-major",
        (
            "value",
            "from_numpy",
            "scalars#3",
        ): "an empty NumPy array: PyTorch keeps its (0, 0) strides, adcuda reports row-major",
        (
            "value",
            "ones_like",
            "float32[0x3]",
        ): "from_numpy's empty array: PyTorch's ones_like keeps (0, 0) strides, adcuda row-major",
        (
            "value",
            "stride",
            "float32[0x5]",
        ): "an empty tensor from from_numpy: PyTorch reports (0, 0), adcuda row-major (5, 1)",
        (
            "value",
            "zeros_like",
            "float32[0x3]",
        ): "from_numpy's empty array: PyTorch's zeros_like keeps (0, 0) strides, adcuda row-major",
    },
    "valid input rejected (PyTorch returns a result)": {
        (
            "value",
            "add",
            "alpha-float-f64",
        ): "operators __radd__: raises TypeError: _reflected.<locals>.reflected() got an unexpected keyword argument",
        (
            "value",
            "add",
            "alpha-int",
        ): "operators __radd__: raises TypeError: _reflected.<locals>.reflected() got an unexpected keyword argument",
        (
            "value",
            "add",
            "bool-alpha-bool",
        ): "operators __radd__: raises TypeError: _reflected.<locals>.reflected() got an unexpected keyword argument",
        (
            "value",
            "add",
            "int64-alpha-int",
        ): "operators __radd__: raises TypeError: _reflected.<locals>.reflected() got an unexpected keyword argument",
        (
            "value",
            "bfloat16",
            "float32[3x4]",
        ): "method bfloat16: raises DTypeError: bfloat16 is not supported on the CPU backend (it is a CUDA-only dtyp",
        (
            "value",
            "cosh",
            "bool",
        ): "function cosh: raises DTypeError: neg: negation, the `-` operator, on a bool tensor is not supported; us",
        (
            "value",
            "logsumexp",
            "zero-size-dim0",
        ): "function logsumexp: raises ValueError: zero-size array to reduction operation maximum which has no ident",
        (
            "value",
            "randint",
            "scalars#3",
        ): "function randint: raises TypeError: randint() missing 1 required positional argument: 'low'; the referen",
        (
            "value",
            "sinh",
            "bool",
        ): "function sinh: raises DTypeError: neg: negation, the `-` operator, on a bool tensor is not supported; us",
        (
            "value",
            "sub",
            "alpha-float-f64",
        ): "operators __rsub__: raises TypeError: _reflected.<locals>.reflected() got an unexpected keyword argument",
        (
            "value",
            "sub",
            "alpha-int",
        ): "operators __rsub__: raises TypeError: _reflected.<locals>.reflected() got an unexpected keyword argument",
        (
            "value",
            "sub",
            "int64-alpha-int",
        ): "operators __rsub__: raises TypeError: _reflected.<locals>.reflected() got an unexpected keyword argument",
        (
            "value",
            "type",
            "float32[3]#2",
        ): "call type: raises DTypeError: type: NumPy dtype adcuda.IntTensor is not supported (supported: bool, int3",
    },
    "values": {
        (
            "value",
            "adaptive_max_pool1d",
            "float64[2x3x8]",
        ): "function adaptive_max_pool1d: result: expected a sequence, got Tensor",
        (
            "value",
            "div",
            "promote-f16-f32",
        ): "operators __rtruediv__: result: 4 of 4 values differ; at (0,) got np.float32(2.2859683), expected np.flo",
        (
            "value",
            "median",
            "dim0-expanded",
        ): "function median: result[0]: 3 of 3 values differ; at (0,) got np.float32(-1.7079723), expected np.float3",
        ("value", "type", "float32[3]"): "call type: result: 'adcuda.FloatTensor', expected 'torch.FloatTensor'",
        (
            "value",
            "remainder",
            "promote-f16-0d-f64",
        ): "operators __rmod__: float16 remainder with a 0-d float64 operand: got 0.02374, expected 0.02393",
    },
    "views: a copy or other strides": {
        ("value", "cov", "float32[3x5]-int64[5]"): "function cov: result: a copy, PyTorch returns a view",
        ("value", "cov", "float64[3x5]"): "function cov: result: a copy, PyTorch returns a view",
        ("value", "cov", "float64[3x5]#1"): "function cov: result: a copy, PyTorch returns a view",
        (
            "value",
            "dropout3d[eval]",
            "float64[2x3x4x4]",
        ): "functional dropout3d: result: a copy, PyTorch returns a view",
        ("value", "einsum", "float32[3x3]"): "function einsum: result: view strides (1,), expected (4,)",
        ("value", "getitem", "0d-int-tensor"): "call getitem: result: a copy, PyTorch returns a view",
        ("value", "getitem", "none"): "call getitem: result: view strides (0, 1), expected (12, 1)",
        (
            "value",
            "instance_norm",
            "float64[2x3x4x4]-float64[3]-float64[3]",
        ): "functional instance_norm: result: a copy, PyTorch returns a view",
        (
            "value",
            "instance_norm",
            "float64[2x3x5]",
        ): "functional instance_norm: result: a copy, PyTorch returns a view",
        ("value", "nonzero", "float32[2x2]#1"): "function nonzero: result[0]: a copy, PyTorch returns a view",
        (
            "value",
            "unfold[method]",
            "float32[3x4]",
        ): "method unfold: result: view strides (12, 1, 4), expected (4, 1, 4)",
        (
            "value",
            "unfold[method]",
            "float32[3x7]",
        ): "method unfold: result: view strides (1, 9, 3), expected (7, 2, 1)",
        ("value", "unfold[method]", "float64[7]"): "method unfold: result: view strides (2, 1), expected (1, 1)",
    },
}

KNOWN = {ident: reason for group in GROUPS.values() for ident, reason in group.items()}


def expected_failure(check, key, sample):
    """The pytest marks for one test: a strict xfail with the recorded reason, or none."""
    reason = KNOWN.get((check, key, sample))
    return [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
