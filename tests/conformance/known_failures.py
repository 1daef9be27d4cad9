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
        ("promotion", "addmm", "int32-beta=0.5"): "result: dtype float32, expected int32",
        ("promotion", "addmm", "int64-beta=0.5"): "result: dtype float32, expected int64",
        ("value", "div", "promote-int64-0d-f64"): "operators __rtruediv__: result: dtype float64, expected float32",
    },
    "exception family differs from PyTorch's": {
        (
            "error",
            "bincount",
            "float32[3]",
        ): "function bincount: TypeError where PyTorch raises RuntimeError/ValueError: DTypeError: bincount: expected",
        (
            "error",
            "bitwise_and",
            "float-operands",
        ): "function bitwise_and: TypeError where PyTorch raises RuntimeError/ValueError: DTypeError: bitwise_and: on",
        (
            "error",
            "bitwise_or",
            "float-operands",
        ): "function bitwise_or: TypeError where PyTorch raises RuntimeError/ValueError: DTypeError: bitwise_or: only",
        (
            "error",
            "bitwise_xor",
            "float-operands",
        ): "function bitwise_xor: TypeError where PyTorch raises RuntimeError/ValueError: DTypeError: bitwise_xor: on",
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
            "quantile",
            "int64[5]",
        ): "function quantile: TypeError where PyTorch raises RuntimeError/ValueError: DTypeError: quantile: expected",
        (
            "promotion",
            "sub[alpha]",
            "bool-bool-alpha=True",
        ): "TypeError where PyTorch raises RuntimeError/ValueError: DTypeError: sub: subtraction, the `-` operator, w",
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
            "bool-bool",
        ): "function floor_divide: TypeError where PyTorch raises RuntimeError/ValueError: DTypeError: floor_divide: ",
        (
            "value",
            "frac",
            "bool",
        ): "function frac: TypeError where PyTorch raises RuntimeError/ValueError: DTypeError: frac: sub: subtraction",
        (
            "value",
            "log_softmax",
            "int64",
        ): "function log_softmax: TypeError where PyTorch raises RuntimeError/ValueError: DTypeError: log_softmax: ex",
        (
            "value",
            "logsigmoid",
            "bool",
        ): "functional logsigmoid: TypeError where PyTorch raises RuntimeError/ValueError: DTypeError: logsigmoid: ne",
        (
            "value",
            "logsigmoid",
            "int32",
        ): "functional logsigmoid: TypeError where PyTorch raises RuntimeError/ValueError: DTypeError: logsigmoid: so",
        (
            "value",
            "logsigmoid",
            "int64",
        ): "functional logsigmoid: TypeError where PyTorch raises RuntimeError/ValueError: DTypeError: logsigmoid: so",
        (
            "value",
            "mean",
            "dtype-int32-from-f64",
        ): "function mean: TypeError where PyTorch raises RuntimeError/ValueError: DTypeError: mean: could not infer ",
        (
            "value",
            "mean",
            "dtype-int64-from-int32",
        ): "function mean: TypeError where PyTorch raises RuntimeError/ValueError: DTypeError: mean: could not infer ",
        (
            "value",
            "mish",
            "bool",
        ): "functional mish: TypeError where PyTorch raises RuntimeError/ValueError: DTypeError: mish: expected input",
        (
            "value",
            "mish",
            "int32",
        ): "functional mish: TypeError where PyTorch raises RuntimeError/ValueError: DTypeError: mish: expected input",
        (
            "value",
            "mish",
            "int64",
        ): "functional mish: TypeError where PyTorch raises RuntimeError/ValueError: DTypeError: mish: expected input",
        (
            "value",
            "neg",
            "bool",
        ): "function neg: TypeError where PyTorch raises RuntimeError/ValueError: DTypeError: neg: negation, the `-` ",
        (
            "value",
            "pow",
            "bool-bool",
        ): "function pow: TypeError where PyTorch raises RuntimeError/ValueError: DTypeError: pow: not defined for dt",
        (
            "value",
            "rsub",
            "bool-alpha-bool",
        ): "function rsub: TypeError where PyTorch raises RuntimeError/ValueError: DTypeError: rsub: sub: subtraction",
        (
            "value",
            "rsub",
            "bool-bool",
        ): "function rsub: TypeError where PyTorch raises RuntimeError/ValueError: DTypeError: rsub: sub: subtraction",
        (
            "value",
            "rsub",
            "int32-python-bool",
        ): "function rsub: TypeError where PyTorch raises RuntimeError/ValueError: DTypeError: rsub: sub: subtraction",
        (
            "value",
            "rsub",
            "int64-alpha-float",
        ): "function rsub: TypeError where PyTorch raises RuntimeError/ValueError: DTypeError: rsub: sub: for integra",
        (
            "value",
            "rsub",
            "promote-bool-f32",
        ): "function rsub: TypeError where PyTorch raises RuntimeError/ValueError: DTypeError: rsub: sub: subtraction",
        (
            "value",
            "rsub",
            "promote-bool-int32",
        ): "function rsub: TypeError where PyTorch raises RuntimeError/ValueError: DTypeError: rsub: sub: subtraction",
        (
            "value",
            "softmax",
            "int64",
        ): "function softmax: TypeError where PyTorch raises RuntimeError/ValueError: DTypeError: softmax: expected a",
        (
            "value",
            "softmin",
            "int64",
        ): "functional softmin: TypeError where PyTorch raises RuntimeError/ValueError: DTypeError: softmin: softmax:",
        (
            "value",
            "softplus",
            "bool",
        ): "functional softplus: TypeError where PyTorch raises RuntimeError/ValueError: DTypeError: softplus: expect",
        (
            "value",
            "softplus",
            "int32",
        ): "functional softplus: TypeError where PyTorch raises RuntimeError/ValueError: DTypeError: softplus: expect",
        (
            "value",
            "softplus",
            "int64",
        ): "functional softplus: TypeError where PyTorch raises RuntimeError/ValueError: DTypeError: softplus: expect",
        (
            "value",
            "sub",
            "bool-alpha-bool",
        ): "function sub: TypeError where PyTorch raises RuntimeError/ValueError: DTypeError: sub: subtraction, the `",
        (
            "value",
            "sub",
            "bool-bool",
        ): "function sub: TypeError where PyTorch raises RuntimeError/ValueError: DTypeError: sub: subtraction, the `",
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
        ): "functional gelu: result: 2 of 12 values differ; at (2,) got np.float32(3.4e+38), expected np.float32(inf)",
    },
    "first-order gradients": {
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
    "invalid input accepted (PyTorch raises)": {
        (
            "error",
            "where",
            "float-condition",
        ): "function where: accepts what PyTorch rejects (RuntimeError: where expected condition to be a boolean tens",
        (
            "promotion",
            "add[alpha]",
            "bool-bool-alpha=2.5",
        ): "accepts what PyTorch rejects (RuntimeError: For integral input tensors, argument alpha must not be a floa",
        (
            "promotion",
            "add[alpha]",
            "bool-float16-alpha=True",
        ): "accepts what PyTorch rejects (RuntimeError: Boolean alpha only supported for Boolean results.)",
        (
            "promotion",
            "add[alpha]",
            "bool-float32-alpha=True",
        ): "accepts what PyTorch rejects (RuntimeError: Boolean alpha only supported for Boolean results.)",
        (
            "promotion",
            "add[alpha]",
            "bool-float64-alpha=True",
        ): "accepts what PyTorch rejects (RuntimeError: Boolean alpha only supported for Boolean results.)",
        (
            "promotion",
            "add[alpha]",
            "bool-int32-alpha=2.5",
        ): "accepts what PyTorch rejects (RuntimeError: For integral input tensors, argument alpha must not be a floa",
        (
            "promotion",
            "add[alpha]",
            "bool-int32-alpha=True",
        ): "accepts what PyTorch rejects (RuntimeError: Boolean alpha only supported for Boolean results.)",
        (
            "promotion",
            "add[alpha]",
            "bool-int64-alpha=2.5",
        ): "accepts what PyTorch rejects (RuntimeError: For integral input tensors, argument alpha must not be a floa",
        (
            "promotion",
            "add[alpha]",
            "bool-int64-alpha=True",
        ): "accepts what PyTorch rejects (RuntimeError: Boolean alpha only supported for Boolean results.)",
        (
            "promotion",
            "add[alpha]",
            "float16-bool-alpha=True",
        ): "accepts what PyTorch rejects (RuntimeError: Boolean alpha only supported for Boolean results.)",
        (
            "promotion",
            "add[alpha]",
            "float16-float16-alpha=True",
        ): "accepts what PyTorch rejects (RuntimeError: Boolean alpha only supported for Boolean results.)",
        (
            "promotion",
            "add[alpha]",
            "float16-float32-alpha=True",
        ): "accepts what PyTorch rejects (RuntimeError: Boolean alpha only supported for Boolean results.)",
        (
            "promotion",
            "add[alpha]",
            "float16-float64-alpha=True",
        ): "accepts what PyTorch rejects (RuntimeError: Boolean alpha only supported for Boolean results.)",
        (
            "promotion",
            "add[alpha]",
            "float16-int32-alpha=True",
        ): "accepts what PyTorch rejects (RuntimeError: Boolean alpha only supported for Boolean results.)",
        (
            "promotion",
            "add[alpha]",
            "float16-int64-alpha=True",
        ): "accepts what PyTorch rejects (RuntimeError: Boolean alpha only supported for Boolean results.)",
        (
            "promotion",
            "add[alpha]",
            "float32-bool-alpha=True",
        ): "accepts what PyTorch rejects (RuntimeError: Boolean alpha only supported for Boolean results.)",
        (
            "promotion",
            "add[alpha]",
            "float32-float16-alpha=True",
        ): "accepts what PyTorch rejects (RuntimeError: Boolean alpha only supported for Boolean results.)",
        (
            "promotion",
            "add[alpha]",
            "float32-float32-alpha=True",
        ): "accepts what PyTorch rejects (RuntimeError: Boolean alpha only supported for Boolean results.)",
        (
            "promotion",
            "add[alpha]",
            "float32-float64-alpha=True",
        ): "accepts what PyTorch rejects (RuntimeError: Boolean alpha only supported for Boolean results.)",
        (
            "promotion",
            "add[alpha]",
            "float32-int32-alpha=True",
        ): "accepts what PyTorch rejects (RuntimeError: Boolean alpha only supported for Boolean results.)",
        (
            "promotion",
            "add[alpha]",
            "float32-int64-alpha=True",
        ): "accepts what PyTorch rejects (RuntimeError: Boolean alpha only supported for Boolean results.)",
        (
            "promotion",
            "add[alpha]",
            "float64-bool-alpha=True",
        ): "accepts what PyTorch rejects (RuntimeError: Boolean alpha only supported for Boolean results.)",
        (
            "promotion",
            "add[alpha]",
            "float64-float16-alpha=True",
        ): "accepts what PyTorch rejects (RuntimeError: Boolean alpha only supported for Boolean results.)",
        (
            "promotion",
            "add[alpha]",
            "float64-float32-alpha=True",
        ): "accepts what PyTorch rejects (RuntimeError: Boolean alpha only supported for Boolean results.)",
        (
            "promotion",
            "add[alpha]",
            "float64-float64-alpha=True",
        ): "accepts what PyTorch rejects (RuntimeError: Boolean alpha only supported for Boolean results.)",
        (
            "promotion",
            "add[alpha]",
            "float64-int32-alpha=True",
        ): "accepts what PyTorch rejects (RuntimeError: Boolean alpha only supported for Boolean results.)",
        (
            "promotion",
            "add[alpha]",
            "float64-int64-alpha=True",
        ): "accepts what PyTorch rejects (RuntimeError: Boolean alpha only supported for Boolean results.)",
        (
            "promotion",
            "add[alpha]",
            "int32-bool-alpha=2.5",
        ): "accepts what PyTorch rejects (RuntimeError: For integral input tensors, argument alpha must not be a floa",
        (
            "promotion",
            "add[alpha]",
            "int32-bool-alpha=True",
        ): "accepts what PyTorch rejects (RuntimeError: Boolean alpha only supported for Boolean results.)",
        (
            "promotion",
            "add[alpha]",
            "int32-float16-alpha=True",
        ): "accepts what PyTorch rejects (RuntimeError: Boolean alpha only supported for Boolean results.)",
        (
            "promotion",
            "add[alpha]",
            "int32-float32-alpha=True",
        ): "accepts what PyTorch rejects (RuntimeError: Boolean alpha only supported for Boolean results.)",
        (
            "promotion",
            "add[alpha]",
            "int32-float64-alpha=True",
        ): "accepts what PyTorch rejects (RuntimeError: Boolean alpha only supported for Boolean results.)",
        (
            "promotion",
            "add[alpha]",
            "int32-int32-alpha=2.5",
        ): "accepts what PyTorch rejects (RuntimeError: For integral input tensors, argument alpha must not be a floa",
        (
            "promotion",
            "add[alpha]",
            "int32-int32-alpha=True",
        ): "accepts what PyTorch rejects (RuntimeError: Boolean alpha only supported for Boolean results.)",
        (
            "promotion",
            "add[alpha]",
            "int32-int64-alpha=2.5",
        ): "accepts what PyTorch rejects (RuntimeError: For integral input tensors, argument alpha must not be a floa",
        (
            "promotion",
            "add[alpha]",
            "int32-int64-alpha=True",
        ): "accepts what PyTorch rejects (RuntimeError: Boolean alpha only supported for Boolean results.)",
        (
            "promotion",
            "add[alpha]",
            "int64-bool-alpha=2.5",
        ): "accepts what PyTorch rejects (RuntimeError: For integral input tensors, argument alpha must not be a floa",
        (
            "promotion",
            "add[alpha]",
            "int64-bool-alpha=True",
        ): "accepts what PyTorch rejects (RuntimeError: Boolean alpha only supported for Boolean results.)",
        (
            "promotion",
            "add[alpha]",
            "int64-float16-alpha=True",
        ): "accepts what PyTorch rejects (RuntimeError: Boolean alpha only supported for Boolean results.)",
        (
            "promotion",
            "add[alpha]",
            "int64-float32-alpha=True",
        ): "accepts what PyTorch rejects (RuntimeError: Boolean alpha only supported for Boolean results.)",
        (
            "promotion",
            "add[alpha]",
            "int64-float64-alpha=True",
        ): "accepts what PyTorch rejects (RuntimeError: Boolean alpha only supported for Boolean results.)",
        (
            "promotion",
            "add[alpha]",
            "int64-int32-alpha=2.5",
        ): "accepts what PyTorch rejects (RuntimeError: For integral input tensors, argument alpha must not be a floa",
        (
            "promotion",
            "add[alpha]",
            "int64-int32-alpha=True",
        ): "accepts what PyTorch rejects (RuntimeError: Boolean alpha only supported for Boolean results.)",
        (
            "promotion",
            "add[alpha]",
            "int64-int64-alpha=2.5",
        ): "accepts what PyTorch rejects (RuntimeError: For integral input tensors, argument alpha must not be a floa",
        (
            "promotion",
            "add[alpha]",
            "int64-int64-alpha=True",
        ): "accepts what PyTorch rejects (RuntimeError: Boolean alpha only supported for Boolean results.)",
        (
            "promotion",
            "addmm",
            "bool-beta=0",
        ): "accepts what PyTorch rejects (NotImplementedError: 'addmm_impl_cpu_' not implemented for 'Bool')",
        (
            "promotion",
            "addmm",
            "bool-beta=0.5",
        ): "accepts what PyTorch rejects (NotImplementedError: 'addmm_impl_cpu_' not implemented for 'Bool')",
        (
            "promotion",
            "addmm",
            "bool-beta=True",
        ): "accepts what PyTorch rejects (NotImplementedError: 'addmm_impl_cpu_' not implemented for 'Bool')",
        (
            "promotion",
            "sub[alpha]",
            "bool-bool-alpha=2",
        ): "accepts what PyTorch rejects (RuntimeError: Subtraction, the `-` operator, with two bool tensors is not s",
        (
            "promotion",
            "sub[alpha]",
            "bool-bool-alpha=2.5",
        ): "accepts what PyTorch rejects (RuntimeError: Subtraction, the `-` operator, with two bool tensors is not s",
        (
            "promotion",
            "sub[alpha]",
            "bool-float16-alpha=2",
        ): "accepts what PyTorch rejects (RuntimeError: Subtraction, the `-` operator, with a bool tensor is not supp",
        (
            "promotion",
            "sub[alpha]",
            "bool-float16-alpha=2.5",
        ): "accepts what PyTorch rejects (RuntimeError: Subtraction, the `-` operator, with a bool tensor is not supp",
        (
            "promotion",
            "sub[alpha]",
            "bool-float16-alpha=True",
        ): "accepts what PyTorch rejects (RuntimeError: Subtraction, the `-` operator, with a bool tensor is not supp",
        (
            "promotion",
            "sub[alpha]",
            "bool-float32-alpha=2",
        ): "accepts what PyTorch rejects (RuntimeError: Subtraction, the `-` operator, with a bool tensor is not supp",
        (
            "promotion",
            "sub[alpha]",
            "bool-float32-alpha=2.5",
        ): "accepts what PyTorch rejects (RuntimeError: Subtraction, the `-` operator, with a bool tensor is not supp",
        (
            "promotion",
            "sub[alpha]",
            "bool-float32-alpha=True",
        ): "accepts what PyTorch rejects (RuntimeError: Subtraction, the `-` operator, with a bool tensor is not supp",
        (
            "promotion",
            "sub[alpha]",
            "bool-float64-alpha=2",
        ): "accepts what PyTorch rejects (RuntimeError: Subtraction, the `-` operator, with a bool tensor is not supp",
        (
            "promotion",
            "sub[alpha]",
            "bool-float64-alpha=2.5",
        ): "accepts what PyTorch rejects (RuntimeError: Subtraction, the `-` operator, with a bool tensor is not supp",
        (
            "promotion",
            "sub[alpha]",
            "bool-float64-alpha=True",
        ): "accepts what PyTorch rejects (RuntimeError: Subtraction, the `-` operator, with a bool tensor is not supp",
        (
            "promotion",
            "sub[alpha]",
            "bool-int32-alpha=2",
        ): "accepts what PyTorch rejects (RuntimeError: Subtraction, the `-` operator, with a bool tensor is not supp",
        (
            "promotion",
            "sub[alpha]",
            "bool-int32-alpha=2.5",
        ): "accepts what PyTorch rejects (RuntimeError: Subtraction, the `-` operator, with a bool tensor is not supp",
        (
            "promotion",
            "sub[alpha]",
            "bool-int32-alpha=True",
        ): "accepts what PyTorch rejects (RuntimeError: Subtraction, the `-` operator, with a bool tensor is not supp",
        (
            "promotion",
            "sub[alpha]",
            "bool-int64-alpha=2",
        ): "accepts what PyTorch rejects (RuntimeError: Subtraction, the `-` operator, with a bool tensor is not supp",
        (
            "promotion",
            "sub[alpha]",
            "bool-int64-alpha=2.5",
        ): "accepts what PyTorch rejects (RuntimeError: Subtraction, the `-` operator, with a bool tensor is not supp",
        (
            "promotion",
            "sub[alpha]",
            "bool-int64-alpha=True",
        ): "accepts what PyTorch rejects (RuntimeError: Subtraction, the `-` operator, with a bool tensor is not supp",
        (
            "promotion",
            "sub[alpha]",
            "float16-bool-alpha=2",
        ): "accepts what PyTorch rejects (RuntimeError: Subtraction, the `-` operator, with a bool tensor is not supp",
        (
            "promotion",
            "sub[alpha]",
            "float16-bool-alpha=2.5",
        ): "accepts what PyTorch rejects (RuntimeError: Subtraction, the `-` operator, with a bool tensor is not supp",
        (
            "promotion",
            "sub[alpha]",
            "float16-bool-alpha=True",
        ): "accepts what PyTorch rejects (RuntimeError: Subtraction, the `-` operator, with a bool tensor is not supp",
        (
            "promotion",
            "sub[alpha]",
            "float16-float16-alpha=True",
        ): "accepts what PyTorch rejects (RuntimeError: Boolean alpha only supported for Boolean results.)",
        (
            "promotion",
            "sub[alpha]",
            "float16-float32-alpha=True",
        ): "accepts what PyTorch rejects (RuntimeError: Boolean alpha only supported for Boolean results.)",
        (
            "promotion",
            "sub[alpha]",
            "float16-float64-alpha=True",
        ): "accepts what PyTorch rejects (RuntimeError: Boolean alpha only supported for Boolean results.)",
        (
            "promotion",
            "sub[alpha]",
            "float16-int32-alpha=True",
        ): "accepts what PyTorch rejects (RuntimeError: Boolean alpha only supported for Boolean results.)",
        (
            "promotion",
            "sub[alpha]",
            "float16-int64-alpha=True",
        ): "accepts what PyTorch rejects (RuntimeError: Boolean alpha only supported for Boolean results.)",
        (
            "promotion",
            "sub[alpha]",
            "float32-bool-alpha=2",
        ): "accepts what PyTorch rejects (RuntimeError: Subtraction, the `-` operator, with a bool tensor is not supp",
        (
            "promotion",
            "sub[alpha]",
            "float32-bool-alpha=2.5",
        ): "accepts what PyTorch rejects (RuntimeError: Subtraction, the `-` operator, with a bool tensor is not supp",
        (
            "promotion",
            "sub[alpha]",
            "float32-bool-alpha=True",
        ): "accepts what PyTorch rejects (RuntimeError: Subtraction, the `-` operator, with a bool tensor is not supp",
        (
            "promotion",
            "sub[alpha]",
            "float32-float16-alpha=True",
        ): "accepts what PyTorch rejects (RuntimeError: Boolean alpha only supported for Boolean results.)",
        (
            "promotion",
            "sub[alpha]",
            "float32-float32-alpha=True",
        ): "accepts what PyTorch rejects (RuntimeError: Boolean alpha only supported for Boolean results.)",
        (
            "promotion",
            "sub[alpha]",
            "float32-float64-alpha=True",
        ): "accepts what PyTorch rejects (RuntimeError: Boolean alpha only supported for Boolean results.)",
        (
            "promotion",
            "sub[alpha]",
            "float32-int32-alpha=True",
        ): "accepts what PyTorch rejects (RuntimeError: Boolean alpha only supported for Boolean results.)",
        (
            "promotion",
            "sub[alpha]",
            "float32-int64-alpha=True",
        ): "accepts what PyTorch rejects (RuntimeError: Boolean alpha only supported for Boolean results.)",
        (
            "promotion",
            "sub[alpha]",
            "float64-bool-alpha=2",
        ): "accepts what PyTorch rejects (RuntimeError: Subtraction, the `-` operator, with a bool tensor is not supp",
        (
            "promotion",
            "sub[alpha]",
            "float64-bool-alpha=2.5",
        ): "accepts what PyTorch rejects (RuntimeError: Subtraction, the `-` operator, with a bool tensor is not supp",
        (
            "promotion",
            "sub[alpha]",
            "float64-bool-alpha=True",
        ): "accepts what PyTorch rejects (RuntimeError: Subtraction, the `-` operator, with a bool tensor is not supp",
        (
            "promotion",
            "sub[alpha]",
            "float64-float16-alpha=True",
        ): "accepts what PyTorch rejects (RuntimeError: Boolean alpha only supported for Boolean results.)",
        (
            "promotion",
            "sub[alpha]",
            "float64-float32-alpha=True",
        ): "accepts what PyTorch rejects (RuntimeError: Boolean alpha only supported for Boolean results.)",
        (
            "promotion",
            "sub[alpha]",
            "float64-float64-alpha=True",
        ): "accepts what PyTorch rejects (RuntimeError: Boolean alpha only supported for Boolean results.)",
        (
            "promotion",
            "sub[alpha]",
            "float64-int32-alpha=True",
        ): "accepts what PyTorch rejects (RuntimeError: Boolean alpha only supported for Boolean results.)",
        (
            "promotion",
            "sub[alpha]",
            "float64-int64-alpha=True",
        ): "accepts what PyTorch rejects (RuntimeError: Boolean alpha only supported for Boolean results.)",
        (
            "promotion",
            "sub[alpha]",
            "int32-bool-alpha=2",
        ): "accepts what PyTorch rejects (RuntimeError: Subtraction, the `-` operator, with a bool tensor is not supp",
        (
            "promotion",
            "sub[alpha]",
            "int32-bool-alpha=2.5",
        ): "accepts what PyTorch rejects (RuntimeError: Subtraction, the `-` operator, with a bool tensor is not supp",
        (
            "promotion",
            "sub[alpha]",
            "int32-bool-alpha=True",
        ): "accepts what PyTorch rejects (RuntimeError: Subtraction, the `-` operator, with a bool tensor is not supp",
        (
            "promotion",
            "sub[alpha]",
            "int32-float16-alpha=True",
        ): "accepts what PyTorch rejects (RuntimeError: Boolean alpha only supported for Boolean results.)",
        (
            "promotion",
            "sub[alpha]",
            "int32-float32-alpha=True",
        ): "accepts what PyTorch rejects (RuntimeError: Boolean alpha only supported for Boolean results.)",
        (
            "promotion",
            "sub[alpha]",
            "int32-float64-alpha=True",
        ): "accepts what PyTorch rejects (RuntimeError: Boolean alpha only supported for Boolean results.)",
        (
            "promotion",
            "sub[alpha]",
            "int32-int32-alpha=2.5",
        ): "accepts what PyTorch rejects (RuntimeError: For integral input tensors, argument alpha must not be a floa",
        (
            "promotion",
            "sub[alpha]",
            "int32-int32-alpha=True",
        ): "accepts what PyTorch rejects (RuntimeError: Boolean alpha only supported for Boolean results.)",
        (
            "promotion",
            "sub[alpha]",
            "int32-int64-alpha=2.5",
        ): "accepts what PyTorch rejects (RuntimeError: For integral input tensors, argument alpha must not be a floa",
        (
            "promotion",
            "sub[alpha]",
            "int32-int64-alpha=True",
        ): "accepts what PyTorch rejects (RuntimeError: Boolean alpha only supported for Boolean results.)",
        (
            "promotion",
            "sub[alpha]",
            "int64-bool-alpha=2",
        ): "accepts what PyTorch rejects (RuntimeError: Subtraction, the `-` operator, with a bool tensor is not supp",
        (
            "promotion",
            "sub[alpha]",
            "int64-bool-alpha=2.5",
        ): "accepts what PyTorch rejects (RuntimeError: Subtraction, the `-` operator, with a bool tensor is not supp",
        (
            "promotion",
            "sub[alpha]",
            "int64-bool-alpha=True",
        ): "accepts what PyTorch rejects (RuntimeError: Subtraction, the `-` operator, with a bool tensor is not supp",
        (
            "promotion",
            "sub[alpha]",
            "int64-float16-alpha=True",
        ): "accepts what PyTorch rejects (RuntimeError: Boolean alpha only supported for Boolean results.)",
        (
            "promotion",
            "sub[alpha]",
            "int64-float32-alpha=True",
        ): "accepts what PyTorch rejects (RuntimeError: Boolean alpha only supported for Boolean results.)",
        (
            "promotion",
            "sub[alpha]",
            "int64-float64-alpha=True",
        ): "accepts what PyTorch rejects (RuntimeError: Boolean alpha only supported for Boolean results.)",
        (
            "promotion",
            "sub[alpha]",
            "int64-int32-alpha=2.5",
        ): "accepts what PyTorch rejects (RuntimeError: For integral input tensors, argument alpha must not be a floa",
        (
            "promotion",
            "sub[alpha]",
            "int64-int32-alpha=True",
        ): "accepts what PyTorch rejects (RuntimeError: Boolean alpha only supported for Boolean results.)",
        (
            "promotion",
            "sub[alpha]",
            "int64-int64-alpha=2.5",
        ): "accepts what PyTorch rejects (RuntimeError: For integral input tensors, argument alpha must not be a floa",
        (
            "promotion",
            "sub[alpha]",
            "int64-int64-alpha=True",
        ): "accepts what PyTorch rejects (RuntimeError: Boolean alpha only supported for Boolean results.)",
        (
            "value",
            "abs",
            "bool",
        ): "function abs: accepts what PyTorch rejects (NotImplementedError: 'abs_cpu' not implemented for 'Bool')",
        (
            "value",
            "add",
            "int64-alpha-float",
        ): "function add: accepts what PyTorch rejects (RuntimeError: For integral input tensors, argument alpha must",
        (
            "value",
            "argmax",
            "bool",
        ): "function argmax: accepts what PyTorch rejects (RuntimeError: argmax(): does not support bool input)",
        (
            "value",
            "argmin",
            "bool",
        ): "function argmin: accepts what PyTorch rejects (RuntimeError: argmin(): does not support bool input)",
        (
            "value",
            "ceil",
            "bool",
        ): "function ceil: accepts what PyTorch rejects (NotImplementedError: 'ceil_vml_cpu' not implemented for 'Boo",
        (
            "value",
            "celu",
            "bool",
        ): "function celu: accepts what PyTorch rejects (NotImplementedError: 'elu_cpu' not implemented for 'Bool')",
        (
            "value",
            "celu",
            "int32",
        ): "function celu: accepts what PyTorch rejects (NotImplementedError: 'elu_cpu' not implemented for 'Int')",
        (
            "value",
            "celu",
            "int64",
        ): "function celu: accepts what PyTorch rejects (NotImplementedError: 'elu_cpu' not implemented for 'Long')",
        (
            "value",
            "elu",
            "bool",
        ): "functional elu: accepts what PyTorch rejects (NotImplementedError: 'elu_cpu' not implemented for 'Bool')",
        (
            "value",
            "elu",
            "int32",
        ): "functional elu: accepts what PyTorch rejects (NotImplementedError: 'elu_cpu' not implemented for 'Int')",
        (
            "value",
            "elu",
            "int64",
        ): "functional elu: accepts what PyTorch rejects (NotImplementedError: 'elu_cpu' not implemented for 'Long')",
        (
            "value",
            "floor",
            "bool",
        ): "function floor: accepts what PyTorch rejects (NotImplementedError: 'floor_vml_cpu' not implemented for 'B",
        (
            "value",
            "frac",
            "int32",
        ): "function frac: accepts what PyTorch rejects (NotImplementedError: 'frac_cpu' not implemented for 'Int')",
        (
            "value",
            "frac",
            "int64",
        ): "function frac: accepts what PyTorch rejects (NotImplementedError: 'frac_cpu' not implemented for 'Long')",
        (
            "value",
            "gelu",
            "bool",
        ): "functional gelu: accepts what PyTorch rejects (NotImplementedError: 'GeluKernelImpl' not implemented for ",
        (
            "value",
            "gelu",
            "int32",
        ): "functional gelu: accepts what PyTorch rejects (NotImplementedError: 'GeluKernelImpl' not implemented for ",
        (
            "value",
            "gelu",
            "int64",
        ): "functional gelu: accepts what PyTorch rejects (NotImplementedError: 'GeluKernelImpl' not implemented for ",
        (
            "value",
            "hardshrink",
            "bool",
        ): "function hardshrink: accepts what PyTorch rejects (NotImplementedError: 'hardshrink_cpu' not implemented ",
        (
            "value",
            "hardshrink",
            "int32",
        ): "function hardshrink: accepts what PyTorch rejects (NotImplementedError: 'hardshrink_cpu' not implemented ",
        (
            "value",
            "hardshrink",
            "int64",
        ): "function hardshrink: accepts what PyTorch rejects (NotImplementedError: 'hardshrink_cpu' not implemented ",
        (
            "value",
            "hardsigmoid",
            "bool",
        ): "functional hardsigmoid: accepts what PyTorch rejects (NotImplementedError: 'hardsigmoid_cpu' not implemen",
        (
            "value",
            "hardsigmoid",
            "int32",
        ): "functional hardsigmoid: accepts what PyTorch rejects (NotImplementedError: 'hardsigmoid_cpu' not implemen",
        (
            "value",
            "hardsigmoid",
            "int64",
        ): "functional hardsigmoid: accepts what PyTorch rejects (NotImplementedError: 'hardsigmoid_cpu' not implemen",
        (
            "value",
            "hardswish",
            "bool",
        ): "functional hardswish: accepts what PyTorch rejects (NotImplementedError: 'hardswish_cpu' not implemented ",
        (
            "value",
            "hardswish",
            "int32",
        ): "functional hardswish: accepts what PyTorch rejects (NotImplementedError: 'hardswish_cpu' not implemented ",
        (
            "value",
            "hardswish",
            "int64",
        ): "functional hardswish: accepts what PyTorch rejects (NotImplementedError: 'hardswish_cpu' not implemented ",
        (
            "value",
            "hardtanh",
            "bool",
        ): "functional hardtanh: accepts what PyTorch rejects (RuntimeError: Bool inputs not supported for hardtanh)",
        (
            "value",
            "heaviside",
            "promote-bool-f32",
        ): "function heaviside: accepts what PyTorch rejects (RuntimeError: heaviside is not yet implemented for tens",
        (
            "value",
            "heaviside",
            "promote-bool-int32",
        ): "function heaviside: accepts what PyTorch rejects (RuntimeError: heaviside is not yet implemented for tens",
        (
            "value",
            "heaviside",
            "promote-f16-0d-f64",
        ): "function heaviside: accepts what PyTorch rejects (RuntimeError: heaviside is not yet implemented for tens",
        (
            "value",
            "heaviside",
            "promote-f16-f32",
        ): "function heaviside: accepts what PyTorch rejects (RuntimeError: heaviside is not yet implemented for tens",
        (
            "value",
            "heaviside",
            "promote-int32-f32",
        ): "function heaviside: accepts what PyTorch rejects (RuntimeError: heaviside is not yet implemented for tens",
        (
            "value",
            "heaviside",
            "promote-int32-int64",
        ): "function heaviside: accepts what PyTorch rejects (RuntimeError: heaviside is not yet implemented for tens",
        (
            "value",
            "heaviside",
            "promote-int64-0d-f64",
        ): "function heaviside: accepts what PyTorch rejects (RuntimeError: heaviside is not yet implemented for tens",
        (
            "value",
            "leaky_relu",
            "bool",
        ): "functional leaky_relu: accepts what PyTorch rejects (NotImplementedError: 'leaky_relu_cpu' not implemente",
        (
            "value",
            "leaky_relu",
            "int32",
        ): "functional leaky_relu: accepts what PyTorch rejects (NotImplementedError: 'leaky_relu_cpu' not implemente",
        (
            "value",
            "leaky_relu",
            "int64",
        ): "functional leaky_relu: accepts what PyTorch rejects (NotImplementedError: 'leaky_relu_cpu' not implemente",
        (
            "value",
            "logsumexp",
            "dims-empty-tuple",
        ): "function logsumexp: accepts what PyTorch rejects (RuntimeError: output with shape [] doesn't match the br",
        (
            "value",
            "median",
            "bool",
        ): "function median: accepts what PyTorch rejects (NotImplementedError: 'median_cpu' not implemented for 'Boo",
        (
            "value",
            "positive",
            "bool",
        ): "function positive: accepts what PyTorch rejects (RuntimeError: The `+` operator, on a bool tensor is not ",
        (
            "value",
            "relu",
            "bool",
        ): "function relu: accepts what PyTorch rejects (RuntimeError: Boolean inputs not supported for relu)",
        (
            "value",
            "relu6",
            "bool",
        ): "functional relu6: accepts what PyTorch rejects (RuntimeError: Bool inputs not supported for hardtanh)",
        (
            "value",
            "round",
            "bool",
        ): "function round: accepts what PyTorch rejects (NotImplementedError: 'round_vml_cpu' not implemented for 'B",
        (
            "value",
            "selu",
            "bool",
        ): "function selu: accepts what PyTorch rejects (NotImplementedError: 'elu_cpu' not implemented for 'Bool')",
        (
            "value",
            "selu",
            "int32",
        ): "function selu: accepts what PyTorch rejects (NotImplementedError: 'elu_cpu' not implemented for 'Int')",
        (
            "value",
            "selu",
            "int64",
        ): "function selu: accepts what PyTorch rejects (NotImplementedError: 'elu_cpu' not implemented for 'Long')",
        (
            "value",
            "silu",
            "bool",
        ): "functional silu: accepts what PyTorch rejects (NotImplementedError: 'silu_cpu' not implemented for 'Bool'",
        (
            "value",
            "silu",
            "int32",
        ): "functional silu: accepts what PyTorch rejects (NotImplementedError: 'silu_cpu' not implemented for 'Int')",
        (
            "value",
            "silu",
            "int64",
        ): "functional silu: accepts what PyTorch rejects (NotImplementedError: 'silu_cpu' not implemented for 'Long'",
        (
            "value",
            "softshrink",
            "bool",
        ): "functional softshrink: accepts what PyTorch rejects (NotImplementedError: 'softshrink_check' not implemen",
        (
            "value",
            "softshrink",
            "int32",
        ): "functional softshrink: accepts what PyTorch rejects (NotImplementedError: 'softshrink_check' not implemen",
        (
            "value",
            "softshrink",
            "int64",
        ): "functional softshrink: accepts what PyTorch rejects (NotImplementedError: 'softshrink_check' not implemen",
        (
            "value",
            "softsign",
            "bool",
        ): "functional softsign: accepts what PyTorch rejects (NotImplementedError: 'abs_cpu' not implemented for 'Bo",
        (
            "value",
            "sub",
            "int32-python-bool",
        ): "function sub: accepts what PyTorch rejects (RuntimeError: Subtraction, the `-` operator, with a bool tens",
        (
            "value",
            "sub",
            "int64-alpha-float",
        ): "function sub: accepts what PyTorch rejects (RuntimeError: For integral input tensors, argument alpha must",
        (
            "value",
            "sub",
            "promote-bool-f32",
        ): "function sub: accepts what PyTorch rejects (RuntimeError: Subtraction, the `-` operator, with a bool tens",
        (
            "value",
            "sub",
            "promote-bool-int32",
        ): "function sub: accepts what PyTorch rejects (RuntimeError: Subtraction, the `-` operator, with a bool tens",
        (
            "value",
            "take_along_dim",
            "float32[3x4]-int64[3]-noncontig",
        ): "function take_along_dim: accepts what PyTorch rejects (RuntimeError: view size is not compatible with inp",
        (
            "value",
            "tanhshrink",
            "bool",
        ): "functional tanhshrink: accepts what PyTorch rejects (RuntimeError: Subtraction, the `-` operator, with a ",
        (
            "value",
            "trunc",
            "bool",
        ): "function trunc: accepts what PyTorch rejects (NotImplementedError: 'trunc_vml_cpu' not implemented for 'B",
        (
            "value",
            "where",
            "bool[3]-float64[3]-float64[3]",
        ): "method where: accepts what PyTorch rejects (RuntimeError: where expected condition to be a boolean tensor",
        (
            "value",
            "where",
            "bool[3]-float64[3]-float64[3]-f32",
        ): "method where: accepts what PyTorch rejects (RuntimeError: where expected condition to be a boolean tensor",
        (
            "value",
            "where",
            "bool[3]-float64[3]-float64[3]-noncontig",
        ): "method where: accepts what PyTorch rejects (RuntimeError: where expected condition to be a boolean tensor",
        (
            "value",
            "where",
            "broadcast",
        ): "method where: accepts what PyTorch rejects (RuntimeError: where expected condition to be a boolean tensor",
        (
            "value",
            "where",
            "broadcast-noncontig",
        ): "method where: accepts what PyTorch rejects (RuntimeError: where expected condition to be a boolean tensor",
        (
            "value",
            "where",
            "promote",
        ): "method where: accepts what PyTorch rejects (RuntimeError: where expected condition to be a boolean tensor",
        (
            "value",
            "where",
            "promote-int-python-float",
        ): "method where: accepts what PyTorch rejects (RuntimeError: where expected condition to be a boolean tensor",
        (
            "value",
            "where",
            "python-other",
        ): "method where: accepts what PyTorch rejects (RuntimeError: where expected condition to be a boolean tensor",
        (
            "value",
            "where",
            "python-other-noncontig",
        ): "method where: accepts what PyTorch rejects (RuntimeError: where expected condition to be a boolean tensor",
        (
            "value",
            "where",
            "zero-size",
        ): "method where: accepts what PyTorch rejects (RuntimeError: where expected condition to be a boolean tensor",
        (
            "value",
            "where",
            "zero-size-noncontig",
        ): "method where: accepts what PyTorch rejects (RuntimeError: where expected condition to be a boolean tensor",
    },
    "second-order gradients": {
        (
            "grad",
            "mish",
            "kinks-f64",
        ): "gradgrad[0]: 1 of 3 values differ; at (2,) got np.float64(0.0), expected np.float64(nan)",
    },
    "shape": {
        ("value", "all", "dims-empty-tuple"): "function all: result: shape (), expected (2, 3)",
        ("value", "any", "dims-empty-tuple"): "function any: result: shape (), expected (2, 3)",
    },
    "strides of new tensors": {
        ("value", "clone", "float32[0x3]-noncontig"): "function clone: result: strides (3, 1), expected (0, 0)",
        ("value", "clone", "float32[3x4]t"): "function clone: result: strides (4, 1), expected (1, 3)",
        ("value", "clone", "float64[3x4]-noncontig"): "function clone: result: strides (4, 1), expected (1, 3)",
        ("value", "from_numpy", "scalars#3"): "function from_numpy: result: strides (3, 1), expected (0, 0)",
        (
            "value",
            "full_like",
            "float32[2x3]#1-noncontig",
        ): "function full_like: result: strides (3, 1), expected (1, 2)",
        ("value", "full_like", "float32[2x3]-noncontig"): "function full_like: result: strides (3, 1), expected (1, 2)",
        ("value", "ones_like", "float32[0x3]-noncontig"): "function ones_like: result: strides (3, 1), expected (0, 0)",
        (
            "value",
            "ones_like",
            "float32[2x3]#1-noncontig",
        ): "function ones_like: result: strides (3, 1), expected (1, 2)",
        ("value", "ones_like", "float32[2x3]-noncontig"): "function ones_like: result: strides (3, 1), expected (1, 2)",
        ("value", "ones_like", "float32[3x4]t"): "function ones_like: result: strides (4, 1), expected (1, 3)",
        (
            "value",
            "zeros_like",
            "float32[0x3]-noncontig",
        ): "function zeros_like: result: strides (3, 1), expected (0, 0)",
        (
            "value",
            "zeros_like",
            "float32[2x3]#1-noncontig",
        ): "function zeros_like: result: strides (3, 1), expected (1, 2)",
        (
            "value",
            "zeros_like",
            "float32[2x3]-noncontig",
        ): "function zeros_like: result: strides (3, 1), expected (1, 2)",
        ("value", "zeros_like", "float32[3x4]t"): "function zeros_like: result: strides (4, 1), expected (1, 3)",
    },
    "valid input rejected (PyTorch returns a result)": {
        (
            "property",
            "zero-size-reductions",
            "logsumexp",
        ): "logsumexp(zeros(0,), 0, keepdim=False): rejects what PyTorch accepts: ValueError: zero-size array to redu",
        (
            "value",
            "bfloat16",
            "float32[3x4]",
        ): "method bfloat16: rejects what PyTorch accepts: DTypeError: bfloat16 is not supported on the CPU backend (",
        (
            "value",
            "bfloat16",
            "float32[3x4]-noncontig",
        ): "method bfloat16: rejects what PyTorch accepts: DTypeError: bfloat16 is not supported on the CPU backend (",
        (
            "value",
            "logsumexp",
            "zero-size-dim0",
        ): "function logsumexp: rejects what PyTorch accepts: ValueError: zero-size array to reduction operation maxi",
        (
            "value",
            "randint",
            "scalars#3",
        ): "function randint: rejects what PyTorch accepts: TypeError: randint() missing 1 required positional argume",
        (
            "value",
            "type",
            "float32[3]#2",
        ): "call type: rejects what PyTorch accepts: DTypeError: type: NumPy dtype adcuda.IntTensor is not supported ",
        (
            "value",
            "type",
            "float32[3]#2-noncontig",
        ): "call type: rejects what PyTorch accepts: DTypeError: type: NumPy dtype adcuda.IntTensor is not supported ",
    },
    "values": {
        (
            "value",
            "adaptive_max_pool1d",
            "float64[2x3x8]",
        ): "function adaptive_max_pool1d: result: expected a sequence, got Tensor",
        (
            "value",
            "adaptive_max_pool1d",
            "float64[2x3x8]-f32",
        ): "function adaptive_max_pool1d: result: expected a sequence, got Tensor",
        (
            "value",
            "adaptive_max_pool1d",
            "float64[2x3x8]-noncontig",
        ): "function adaptive_max_pool1d: result: expected a sequence, got Tensor",
        (
            "value",
            "div",
            "promote-f16-f32",
        ): "operators __rtruediv__: result: 3 of 4 values differ; at (0,) got np.float32(3.7557569), expected np.floa",
    },
    "views: a copy or other strides": {
        ("value", "einsum", "float32[3x3]"): "function einsum: result: a copy, PyTorch returns a view of the input",
        (
            "value",
            "einsum",
            "float32[3x3]-noncontig",
        ): "function einsum: result: a copy, PyTorch returns a view of the input",
        ("value", "getitem", "0d-int-tensor"): "call getitem: result: a copy, PyTorch returns a view of the input",
        (
            "value",
            "getitem",
            "0d-int-tensor-noncontig",
        ): "call getitem: result: a copy, PyTorch returns a view of the input",
        (
            "value",
            "unfold[method]",
            "float32[3x4]",
        ): "method unfold: result: a copy, PyTorch returns a view of the input",
        (
            "value",
            "unfold[method]",
            "float32[3x4]-noncontig",
        ): "method unfold: result: a copy, PyTorch returns a view of the input",
        (
            "value",
            "unfold[method]",
            "float32[3x7]",
        ): "method unfold: result: a copy, PyTorch returns a view of the input",
        (
            "value",
            "unfold[method]",
            "float32[3x7]-noncontig",
        ): "method unfold: result: a copy, PyTorch returns a view of the input",
        ("value", "unfold[method]", "float64[7]"): "method unfold: result: a copy, PyTorch returns a view of the input",
        (
            "value",
            "unfold[method]",
            "float64[7]-f32",
        ): "method unfold: result: a copy, PyTorch returns a view of the input",
        (
            "value",
            "unfold[method]",
            "float64[7]-noncontig",
        ): "method unfold: result: a copy, PyTorch returns a view of the input",
    },
}

KNOWN = {ident: reason for group in GROUPS.values() for ident, reason in group.items()}


def expected_failure(check, key, sample):
    """The pytest marks for one test: a strict xfail with the recorded reason, or none."""
    reason = KNOWN.get((check, key, sample))
    return [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
