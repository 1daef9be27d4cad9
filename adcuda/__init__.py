"""adcuda: a CUDA-accelerated automatic-differentiation runtime with PyTorch's names.

``import adcuda as torch`` runs small PyTorch training scripts; without a usable GPU everything runs on
the fp32 CPU fallback (see ``adcuda.info()`` for why).
"""
__version__ = "0.1.0"

from . import dtypes as _dtypes
from .dtypes import (bfloat16, bool_ as bool, double, dtype, finfo, float, float16, float32, float64,  # noqa: A004
                     get_default_dtype, half, iinfo, int, int32, int64, long, set_default_dtype)
from .device import device
from .errors import (AdcudaError, AutogradError, DeviceError, DTypeError, IndexOutOfRangeError,
                     ShapeError)
from .tensor import Size, Tensor
from . import ops as _ops  # attaches ops to Tensor
from .ops.conversion import to as _to  # noqa: F401
from .ops.elementwise import (abs, add, bitwise_and, bitwise_not, bitwise_or, bitwise_xor, ceil, clamp, cos,
                              div, eq, erf, exp, exp2, floor, ge, gelu, gt, isfinite, isinf, isnan, le,
                              leaky_relu, log, log1p, log2, log10, logical_and, logical_not, logical_or,
                              logical_xor, lt, maximum, minimum, mul, ne, neg, pow, reciprocal, relu, round,
                              rsqrt, sigmoid, sign, silu, sin, sqrt, square, sub, tanh, trunc, where)
from .ops.reduction import (all, amax, amin, any, argmax, argmin, count_nonzero, cumsum, logsumexp, max, mean,
                            min, norm, prod, std, std_mean, sum, var, var_mean)
from .ops.sorting import argsort, median, msort, sort, topk
from .ops.shape import (broadcast_tensors, broadcast_to, cat, chunk, clone, concat, concatenate,
                        contiguous, expand, flatten, flip, movedim, narrow, permute, repeat, reshape,
                        select, split, squeeze, stack, t, transpose, unbind, unflatten, unsqueeze, view)
from .ops.indexing import gather, index_select, masked_fill, one_hot, scatter_add, tril, triu
from .ops.linalg import bmm, dot, matmul, mm, outer
from .ops.nn_ops import log_softmax, softmax
from .ops.foreach import *  # noqa: F401,F403 (adcuda._foreach_add_, _fused_adam_, ...: multi-tensor ops)
from .factories import (arange, as_tensor, empty, empty_like, eye, from_dlpack, from_numpy, full, full_like,
                        linspace, ones, ones_like, rand, rand_like, randint, randn, randn_like, randperm, tensor,
                        zeros, zeros_like)
from .random import Generator, default_generator, get_rng_state, initial_seed, manual_seed, seed, set_rng_state
from .autograd import enable_grad, is_grad_enabled, no_grad, set_grad_enabled
from . import autograd
from . import cuda

clip = clamp
absolute = abs
divide = div
multiply = mul
subtract = sub
negative = neg
true_divide = div
fix = trunc


def is_tensor(obj):
    return isinstance(obj, Tensor)


def numel(input):
    return input.numel()


def is_floating_point(input):
    return input.dtype.is_floating_point


def __getattr__(name):
    # heavier parts load on first use, so ``import adcuda`` stays fast
    import importlib
    if name in ("nn", "optim", "utils", "amp", "profiler", "distributed", "data"):
        return importlib.import_module(f".{name}", __name__)
    if name == "info":
        from ._info import info
        return info
    if name in ("init_cuda_context",):
        return getattr(importlib.import_module(".cuda", __name__), name)
    if name in ("save", "load"):
        return getattr(importlib.import_module(".serialization", __name__), name)
    if name == "autocast":
        return importlib.import_module(".amp", __name__).autocast
    raise AttributeError(f"module 'adcuda' has no attribute {name!r}")


if __import__("os").environ.get("ADCUDA_NVTX", "").strip() not in ("", "0"):
    # NVTX ranges for the whole run, for Nsight; the profiler loads only when asked for
    from .profiler.nvtx_ranges import enable_from_environment as _enable_nvtx
    _enable_nvtx()
