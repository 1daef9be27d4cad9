"""The CPU backend: every primitive of ``adcuda.backends`` over NumPy arrays.

fp32 compute: float16 arrays are widened to float32 for the arithmetic and narrowed on the way
out; float64 is kept (gradcheck needs it). This module is also the oracle the CUDA kernels are
tested against, so it favours clarity and exactness over cleverness.
"""
import math
import warnings

import numpy as np

from .. import dtypes as dt
from ..errors import DTypeError, IndexOutOfRangeError, ShapeError

name = "cpu"

_F16 = np.dtype(np.float16)
_F32 = np.dtype(np.float32)


def _np_dtype(dtype):
    if dtype.numpy is None:
        raise DTypeError(f"{dtype.name} is not supported on the CPU backend (it is a CUDA-only dtype)")
    return np.dtype(dtype.numpy)


def _compute(a):
    """Widen float16 to float32 so the arithmetic happens in fp32."""
    if isinstance(a, np.ndarray) and a.dtype == _F16:
        return a.astype(_F32)
    return a


def _finish(result, dtype):
    out_dt = _np_dtype(dtype)
    if result.dtype != out_dt:
        return result.astype(out_dt)
    return result


# ---------------------------------------------------------------------------------------------
# storage
def from_numpy(x, dtype):
    x = np.asarray(x)
    out_dt = _np_dtype(dtype)
    if x.dtype != out_dt:
        x = x.astype(out_dt)
    return x


def to_numpy(a):
    return a


def empty(shape, dtype):
    return np.empty(shape, _np_dtype(dtype))


def full(shape, value, dtype):
    return np.full(shape, value, _np_dtype(dtype))


def arange(start, stop, step, dtype):
    return np.arange(start, stop, step, dtype=np.float64 if dtype.is_floating_point else np.int64).astype(
        _np_dtype(dtype), copy=False)


def dtype_of(a):
    return dt.from_numpy_dtype(a.dtype)


def shape_of(a):
    return a.shape


def astype(a, dtype):
    out_dt = _np_dtype(dtype)
    if out_dt == _F16:
        # overflow to inf is float16's expected behaviour (loss scaling watches for it): no NumPy warning
        with np.errstate(over="ignore"):
            return a.astype(out_dt, copy=True)
    return a.astype(out_dt, copy=True)


def contiguous(a):
    return a if a.flags.c_contiguous else np.ascontiguousarray(a)


def copy_(dst, src):
    np.copyto(dst, src, casting="unsafe")
    return dst


# ---------------------------------------------------------------------------------------------
# views
def view(a, shape):
    try:
        return np.reshape(a, shape, copy=False)
    except ValueError:
        return None


def permute(a, axes):
    return a.transpose(axes)


def expand(a, shape):
    return np.broadcast_to(a, shape)


def slice(a, key):  # noqa: A001 (primitive name)
    if Ellipsis not in key:
        key = key + (Ellipsis,)  # keeps a 0-d result an array view, not a NumPy scalar
    return a[key]


def flip(a, axes):
    return np.flip(a, axes)


def shares_memory(a, b):
    return np.may_share_memory(a, b)


# ---------------------------------------------------------------------------------------------
# elementwise
def _erf(x):
    if x.dtype == np.float64:
        return _erf64(x)
    # Numerical Recipes' erfc approximation: fractional error < 1.2e-7, below fp32 resolution.
    z = np.abs(x)
    t = 1.0 / (1.0 + 0.5 * z)
    poly = -z * z - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 + t * (
        -0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (
            -0.82215223 + t * 0.17087277))))))))
    erfc = t * np.exp(poly)
    # 1 - erfc cancels for small |x| (erf(1e-4) would lose 3 digits): there the Maclaurin series,
    # whose first omitted term is below 3e-8 relative for |x| < 0.5
    x2 = x * x
    series = x * (_TWO_OVER_SQRT_PI + x2 * (-_TWO_OVER_SQRT_PI / 3 + x2 * (_TWO_OVER_SQRT_PI / 10 + x2 * (
        -_TWO_OVER_SQRT_PI / 42 + x2 * (_TWO_OVER_SQRT_PI / 216 - x2 * _TWO_OVER_SQRT_PI / 1320)))))
    tail = np.where(x >= 0, 1.0 - erfc, erfc - 1.0)
    return np.where(z < 0.5, series, tail).astype(x.dtype, copy=False)


_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)


_erf64 = np.vectorize(math.erf, otypes=[np.float64])

_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_INV_SQRT_2 = 1.0 / math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


def _sigmoid(x):
    # exp of a non-positive number only: no overflow warnings for large |x|
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e)).astype(x.dtype, copy=False)


def _sign(x):
    s = np.sign(x)
    if s.dtype.kind == "f":
        s = np.where(s == s, s, 0).astype(s.dtype, copy=False)  # PyTorch: sign(NaN) = 0
    return s


def _gelu(x):
    return 0.5 * x * (1.0 + _erf(x * _INV_SQRT_2))


def _gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(_SQRT_2_OVER_PI * (x + 0.044715 * x * x * x)))


UNARY_OPS = {
    "neg": np.negative, "abs": np.abs, "exp": np.exp, "log": np.log, "log1p": np.log1p,
    "sqrt": np.sqrt, "rsqrt": lambda x: 1.0 / np.sqrt(x), "sin": np.sin, "cos": np.cos,
    "tanh": np.tanh, "sigmoid": _sigmoid, "relu": lambda x: np.maximum(x, 0).astype(x.dtype, copy=False),
    "gelu": _gelu, "gelu_tanh": _gelu_tanh, "silu": lambda x: x * _sigmoid(x), "sign": _sign,
    "logical_not": np.logical_not, "erf": _erf, "floor": np.floor, "ceil": np.ceil, "trunc": np.trunc,
    "round": np.round, "exp2": np.exp2, "log2": np.log2, "log10": np.log10, "bitwise_not": np.invert,
}


def unary(op, a):
    x = _compute(a)
    with np.errstate(all="ignore"):
        r = np.asarray(UNARY_OPS[op](x))
    if r.dtype != a.dtype and op != "logical_not":
        r = r.astype(a.dtype)
    return r


def _gelu_grad(x):
    return 0.5 * (1.0 + _erf(x * _INV_SQRT_2)) + x * _INV_SQRT_2PI * np.exp(-0.5 * x * x)


def _gelu_tanh_grad(x):
    # s = sigmoid(2u) = (1 + tanh u) / 2 keeps the tails precise (1 + tanh u cancels for u << 0)
    inner = _SQRT_2_OVER_PI * (x + 0.044715 * x * x * x)
    s = 1.0 / (1.0 + np.exp(-2.0 * inner))
    return s + 2.0 * x * s * (1.0 - s) * _SQRT_2_OVER_PI * (1.0 + 3 * 0.044715 * x * x)


def _silu_grad(x):
    s = _sigmoid(x)
    return s * (1.0 + x * (1.0 - s))


UNARY_BACKWARD_OPS = {
    "relu": lambda x, y, g: g * (x > 0),
    "gelu": lambda x, y, g: g * _gelu_grad(x),
    "gelu_tanh": lambda x, y, g: g * _gelu_tanh_grad(x),
    "silu": lambda x, y, g: g * _silu_grad(x),
    "sigmoid": lambda x, y, g: g * y * (1.0 - y),
    "tanh": lambda x, y, g: g * (1.0 - y * y),
}


def unary_backward(op, x, y, g):
    out_dt = g.dtype
    with np.errstate(all="ignore"):
        r = np.asarray(UNARY_BACKWARD_OPS[op](_compute(x), _compute(y), _compute(g)))
    return r.astype(out_dt, copy=False)


BINARY_OPS = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.true_divide, "pow": np.power,
    "maximum": np.maximum, "minimum": np.minimum, "eq": np.equal, "ne": np.not_equal, "lt": np.less,
    "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal, "logical_and": np.logical_and,
    "logical_or": np.logical_or, "logical_xor": np.logical_xor, "floor_divide": np.floor_divide,
    "remainder": np.remainder, "bitwise_and": np.bitwise_and, "bitwise_or": np.bitwise_or,
    "bitwise_xor": np.bitwise_xor,
}
_BOOL_RESULT = {"eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_xor"}


# ops whose results can overflow or be undefined for ordinary inputs run inside np.errstate
_MAY_WARN = {"div", "pow", "floor_divide", "remainder"}

# NumPy reports floating-point exceptions (0 * inf, overflow to inf, float16 overflow on a cast) as
# RuntimeWarnings attributed to the calling module; PyTorch is silent about them, and wrapping every
# fast-path call in np.errstate would cost about 1 us. A filter scoped to this module costs nothing
# until such a warning is raised.
warnings.filterwarnings("ignore", category=RuntimeWarning, module=__name__)


def binary(op, a, b, dtype):
    """``op(a, b)`` with both operands in ``dtype`` (computed in fp32 for float16)."""
    work = dtype.numpy
    if (work is not None and work is not np.float16 and op not in _MAY_WARN and a.__class__ is np.ndarray
            and a.dtype == work and (b.__class__ is np.ndarray and b.dtype == work or b.__class__ is float
                                     and work is not np.int32 and work is not np.int64)):
        # fast path: operands already in the result dtype (the common case in training)
        return np.asarray(BINARY_OPS[op](a, b))
    work = _np_dtype(dtype)
    if work == _F16:
        work = _F32
    fn = BINARY_OPS[op]
    if op == "pow" and dtype.category == dt.INTEGER and np.any(np.asarray(b) < 0):
        raise DTypeError("pow: integers to negative integer powers are not allowed")
    if op in ("floor_divide", "remainder") and dtype.category != dt.FLOATING and not np.all(np.asarray(b)):
        # NumPy quietly returns 0 here; PyTorch raises, and a silent 0 would be a wrong answer
        raise ZeroDivisionError(f"{op}: integer division by zero")
    with np.errstate(all="ignore"):
        if op in _BOOL_RESULT:
            return np.asarray(fn(np.asarray(a, work), np.asarray(b, work)))
        r = fn(a, b, dtype=work)
    return _finish(np.asarray(r), dtype)


def where(cond, a, b, dtype):
    return _finish(np.asarray(np.where(cond, a, b)), dtype)


def clamp(a, lo, hi):
    x = _compute(a)
    if lo is not None:
        x = np.maximum(x, lo)
    if hi is not None:
        x = np.minimum(x, hi)
    return np.asarray(x).astype(a.dtype, copy=False)


# ---------------------------------------------------------------------------------------------
# reductions
REDUCE_OPS = {"sum": np.sum, "prod": np.prod, "amax": np.amax, "amin": np.amin, "mean": np.mean,
              "all": np.all, "any": np.any}


def reduce(op, a, axes, keepdim):
    x = _compute(a)
    if op in ("sum", "prod") and x.dtype.kind in "biu":
        r = REDUCE_OPS[op](x, axis=axes, keepdims=keepdim, dtype=np.int64)
    elif op == "mean" and x.size == 0:
        with np.errstate(all="ignore"):  # NaN, as in PyTorch (np.mean would also warn)
            r = np.sum(x, axis=axes, keepdims=keepdim) / 0.0
    else:
        r = REDUCE_OPS[op](x, axis=axes, keepdims=keepdim)
    r = np.asarray(r)
    if op in ("all", "any"):
        return r
    if a.dtype.kind == "b" and op in ("amax", "amin"):
        return r
    return r.astype(a.dtype if a.dtype.kind in "f" or op in ("amax", "amin") else r.dtype, copy=False)


def argreduce(op, a, axis, keepdim):
    fn = np.argmax if op == "argmax" else np.argmin
    x = _compute(a)
    if axis is None:
        r = np.asarray(fn(x))
        return r.reshape((1,) * a.ndim) if keepdim else r
    return np.asarray(fn(x, axis=axis, keepdims=keepdim), dtype=np.int64)


def sort(a, axis, descending, stable):
    """(values, int64 indices) along ``axis``; always stable; NaN sorts as the largest value."""
    x = _compute(a)
    if descending:
        # a stable descending order keeps equal values in their original order: sort the reversed
        # array ascending, then reverse the result and map the indices back
        n = x.shape[axis]
        idx = np.flip(np.argsort(np.flip(x, axis), axis=axis, kind="stable"), axis)
        idx = (n - 1) - idx
    else:
        idx = np.argsort(x, axis=axis, kind="stable")
    idx = np.ascontiguousarray(idx, dtype=np.int64)
    return np.take_along_axis(a, idx, axis=axis), idx


def cumsum(a, axis):
    x = _compute(a)
    if x.dtype.kind in "biu":
        return np.cumsum(x, axis=axis, dtype=np.int64)
    return np.cumsum(x, axis=axis).astype(a.dtype, copy=False)


def var(a, axes, correction, keepdim):
    x = _compute(a)
    n = 1
    for ax in axes:
        n *= x.shape[ax]
    mean = np.mean(x, axis=axes, keepdims=True)
    with np.errstate(all="ignore"):
        r = np.sum((x - mean) ** 2, axis=axes, keepdims=keepdim) / max(n - correction, 0)
    return np.asarray(r).astype(a.dtype, copy=False)


def logsumexp(a, axes, keepdim):
    x = _compute(a)
    m = np.amax(x, axis=axes, keepdims=True)
    m = np.where(np.isfinite(m), m, 0)
    with np.errstate(divide="ignore"):
        r = np.log(np.sum(np.exp(x - m), axis=axes, keepdims=True)) + m
    if not keepdim:
        r = np.squeeze(r, axis=axes)
    return np.asarray(r).astype(a.dtype, copy=False)


# ---------------------------------------------------------------------------------------------
# indexing and layout
def index(a, key):
    return np.array(a[key], copy=True)


def index_put_(a, key, values, accumulate):
    if accumulate:
        np.add.at(a, key, values)
    else:
        a[key] = values
    return a


def _leading_box(a, idx, axis):
    """The part of ``a`` that ``idx`` addresses in every dim but ``axis`` (PyTorch allows smaller)."""
    box = tuple(np.s_[:] if d == axis else np.s_[:n] for d, n in enumerate(idx.shape))
    return a[box]


def gather(a, axis, idx):
    return np.take_along_axis(_leading_box(a, idx, axis), idx, axis=axis)


def _scatter_key(idx, axis):
    grids = np.indices(idx.shape, sparse=True)
    return tuple(idx if d == axis else grids[d] for d in range(idx.ndim))


def scatter_add(a, axis, idx, src):
    out = np.array(a, copy=True)
    # src is read at the index's own positions, along `axis` too (PyTorch allows a larger src)
    np.add.at(out, _scatter_key(idx, axis), src[tuple(np.s_[:n] for n in idx.shape)])
    return out


def cat(arrays, axis):
    return np.concatenate(arrays, axis=axis)


def tril(a, k):
    return np.tril(a, k)


def triu(a, k):
    return np.triu(a, k)


# ---------------------------------------------------------------------------------------------
# linear algebra
def matmul(a, b):
    x, y = _compute(a), _compute(b)
    return np.matmul(x, y).astype(a.dtype, copy=False)


# ---------------------------------------------------------------------------------------------
# fused NN primitives
def softmax(a, axis, log):
    x = _compute(a)
    m = np.amax(x, axis=axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0)
    shifted = x - m
    with np.errstate(divide="ignore", invalid="ignore"):
        e = np.exp(shifted)
        s = np.sum(e, axis=axis, keepdims=True)
        r = shifted - np.log(s) if log else e / s
    return r.astype(a.dtype, copy=False)


def softmax_backward(y, g, axis, log):
    yy, gg = _compute(y), _compute(g)
    if log:
        r = gg - np.exp(yy) * np.sum(gg, axis=axis, keepdims=True)
    else:
        r = yy * (gg - np.sum(gg * yy, axis=axis, keepdims=True))
    return r.astype(g.dtype, copy=False)


def cross_entropy(logits, target, ignore_index, label_smoothing):
    """Per-row losses of ``logits`` (N, C) against class indices ``target`` (N,)."""
    logp = softmax(logits, 1, True)
    lp = _compute(logp)
    n, c = lp.shape
    valid = target != ignore_index
    safe_t = np.where(valid, target, 0)
    picked = lp[np.arange(n), safe_t]
    loss = -(1.0 - label_smoothing) * picked
    if label_smoothing:
        loss = loss - label_smoothing / c * np.sum(lp, axis=1)
    loss = np.where(valid, loss, 0.0)
    return loss.astype(logits.dtype, copy=False), logp


def cross_entropy_backward(logp, target, g_rows, ignore_index, label_smoothing):
    lp = _compute(logp)
    n, c = lp.shape
    valid = target != ignore_index
    q = np.zeros_like(lp)
    q[np.arange(n)[valid], target[valid]] = 1.0 - label_smoothing
    if label_smoothing:
        q += label_smoothing / c
    grad = (np.exp(lp) - q) * (_compute(g_rows) * valid)[:, None]
    return grad.astype(logp.dtype, copy=False)


def layer_norm(x, weight, bias, n, eps):
    xx = _compute(x)
    axes = tuple(range(x.ndim - n, x.ndim))
    mean = np.mean(xx, axis=axes, keepdims=True)
    var_ = np.mean((xx - mean) ** 2, axis=axes, keepdims=True)
    rstd = 1.0 / np.sqrt(var_ + eps)
    y = (xx - mean) * rstd
    if weight is not None:
        y = y * _compute(weight)
    if bias is not None:
        y = y + _compute(bias)
    stat_dt = np.float64 if x.dtype == np.float64 else np.float32
    return y.astype(x.dtype, copy=False), mean.astype(stat_dt), rstd.astype(stat_dt)


def layer_norm_backward(g, x, weight, mean, rstd, n):
    gg, xx = _compute(g), _compute(x)
    axes = tuple(range(x.ndim - n, x.ndim))
    lead = tuple(range(x.ndim - n))
    xhat = (xx - mean) * rstd
    dweight = np.sum(gg * xhat, axis=lead).astype(weight.dtype) if weight is not None else None
    dbias = np.sum(gg, axis=lead).astype(weight.dtype if weight is not None else g.dtype)
    gx = gg * _compute(weight) if weight is not None else gg
    dx = rstd * (gx - np.mean(gx, axis=axes, keepdims=True)
                 - xhat * np.mean(gx * xhat, axis=axes, keepdims=True))
    return dx.astype(x.dtype, copy=False), dweight, dbias


def _attention_scores(q, k, mask, is_causal, scale):
    s = np.matmul(q, np.swapaxes(k, -1, -2)) * scale
    allowed = None
    if is_causal:
        L, S = s.shape[-2], s.shape[-1]
        allowed = np.tril(np.ones((L, S), dtype=bool))
    if mask is not None:
        if mask.dtype == np.bool_:
            allowed = mask if allowed is None else np.logical_and(allowed, mask)
        else:
            s = s + _compute(mask)
    if allowed is not None:
        s = np.where(allowed, s, -np.inf)
    return s


def _philox4x32_10(counter_words, seed):
    """Philox4x32-10 of kernels/philox.cuh over rows of four uint32 counter words, keyed by the 64-bit
    ``seed``: the same words the CUDA kernels draw."""
    mask32 = np.uint64(0xFFFFFFFF)
    c0, c1, c2, c3 = (w.astype(np.uint64) for w in counter_words)
    key0, key1 = np.uint64(seed & 0xFFFFFFFF), np.uint64((seed >> 32) & 0xFFFFFFFF)
    for round_ in range(10):
        if round_:
            key0 = (key0 + np.uint64(0x9E3779B9)) & mask32
            key1 = (key1 + np.uint64(0xBB67AE85)) & mask32
        product0 = np.uint64(0xD2511F53) * c0
        product1 = np.uint64(0xCD9E8D57) * c2
        c0, c1, c2, c3 = ((product1 >> np.uint64(32)) ^ c1 ^ key0, product1 & mask32,
                          (product0 >> np.uint64(32)) ^ c3 ^ key1, product0 & mask32)
    return c0, c1, c2, c3


def _attention_dropout_keep(batch, L, S, p, seed, offset):
    """Which probabilities of a (batch..., L, S) attention dropout keeps: kernels/attention_dropout.cuh's
    counter layout, so that both backends drop the same ones. Per batch entry b, 16 x 16 tile
    (i16, j16) and block (a, c) in 0..7 x 0..7, Philox block ((b * ceil(L/16) + i16) * ceil(S/16) + j16)
    * 64 + 8 a + c at counter offset ``offset`` gives its words to (a, c), (a, c + 8), (a + 8, c),
    (a + 8, c + 8) of the tile; an element is kept when its word is below floor((1 - p) 2^32)."""
    if p == 0.0:
        return np.ones(tuple(batch) + (L, S), dtype=bool)
    entries = int(np.prod(batch, dtype=np.int64))
    query_tiles, key_tiles = -(-L // 16), -(-S // 16)
    blocks = np.arange(entries * query_tiles * key_tiles * 64, dtype=np.uint64)
    offset_words = (np.uint64(offset & 0xFFFFFFFF), np.uint64((offset >> 32) & 0xFFFFFFFF))
    words = _philox4x32_10((blocks & np.uint64(0xFFFFFFFF), blocks >> np.uint64(32),
                            np.full_like(blocks, offset_words[0]), np.full_like(blocks, offset_words[1])), seed)
    threshold = np.uint64(min(math.floor((1.0 - p) * 2.0 ** 32), 2 ** 32 - 1))
    kept = np.stack([w < threshold for w in words], axis=-1)  # (blocks, word); word = 2 * (i >= 8) + (j >= 8)
    kept = kept.reshape(entries, query_tiles, key_tiles, 8, 8, 2, 2)  # (b, i16, j16, a, c, i high, j high)
    kept = kept.transpose(0, 1, 5, 3, 2, 6, 4).reshape(entries, query_tiles * 16, key_tiles * 16)
    return kept[:, :L, :S].reshape(tuple(batch) + (L, S))


def _attention_batch(probs, v):
    """The batch dims dropout draws over: those of the probabilities and of v, broadcast."""
    return np.broadcast_shapes(probs.shape[:-2], v.shape[:-2])


def attention_dropout_mask(shape, p, seed, offset):
    """The bool keep-mask (batch..., L, S) that attention's dropout with (p, seed, offset) applies."""
    _check_dropout_p("attention_dropout_mask", p)
    shape = tuple(int(n) for n in shape)
    if len(shape) < 2:
        raise ShapeError(f"attention_dropout_mask: shape {shape} needs at least 2 dims (..., L, S)")
    return _attention_dropout_keep(shape[:-2], shape[-2], shape[-1], p, seed, offset)


def _attention_dropout_factor(batch, L, S, dropout_p, seed, offset, dtype):
    """z of dropout(p) = p z: 1 / (1 - p) where kept, 0 where dropped (None without dropout)."""
    if not dropout_p:
        return None
    scale = 1.0 / (1.0 - dropout_p) if dropout_p < 1.0 else 0.0
    keep = _attention_dropout_keep(batch, L, S, dropout_p, seed, offset)
    return np.where(keep, dtype.type(scale), dtype.type(0))


def _check_dropout_p(op, dropout_p):
    if not 0.0 <= dropout_p <= 1.0:
        raise ValueError(f"{op}: dropout probability has to be between 0 and 1, but got {dropout_p}")


def attention(q, k, v, mask, is_causal, scale, dropout_p=0.0, seed=0, offset=0):
    """Softmax(q k^T * scale + mask) v; also the rows' logsumexp, which is all backward keeps. With
    ``dropout_p`` the probabilities are dropped by the Philox draw ``(seed, offset)`` and the rest
    scaled by 1 / (1 - dropout_p); the logsumexp is of the probabilities before dropout."""
    _check_dropout_p("attention", dropout_p)
    qq, kk, vv = _compute(q), _compute(k), _compute(v)
    s = _attention_scores(qq, kk, mask, is_causal, scale)
    m = np.amax(s, axis=-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0)
    p = np.exp(s - m)
    denom = np.sum(p, axis=-1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        lse = np.log(denom) + m
        p = np.where(denom > 0, p / np.where(denom > 0, denom, 1), 0)  # fully masked rows -> 0
    z = _attention_dropout_factor(_attention_batch(p, vv), p.shape[-2], p.shape[-1], dropout_p, seed, offset,
                                  p.dtype)
    out = np.matmul(p if z is None else p * z, vv)
    return out.astype(q.dtype, copy=False), lse[..., 0]


def attention_backward(g, q, k, v, out, lse, mask, is_causal, scale, dropout_p=0.0, seed=0, offset=0):
    _check_dropout_p("attention_backward", dropout_p)
    qq, kk, vv, gg, oo = (_compute(t) for t in (q, k, v, g, out))
    s = _attention_scores(qq, kk, mask, is_causal, scale)
    with np.errstate(invalid="ignore"):
        p = np.where(np.isfinite(lse[..., None]), np.exp(s - lse[..., None]), 0.0)
    z = _attention_dropout_factor(_attention_batch(p, vv), p.shape[-2], p.shape[-1], dropout_p, seed, offset,
                                  p.dtype)
    dp = np.matmul(gg, np.swapaxes(vv, -1, -2))
    if z is not None:
        dp = dp * z
    dv = np.matmul(np.swapaxes(p if z is None else p * z, -1, -2), gg)
    ds = p * (dp - np.sum(gg * oo, axis=-1, keepdims=True))
    dq = np.matmul(ds, kk) * scale
    dk = np.matmul(np.swapaxes(ds, -1, -2), qq) * scale
    return dq.astype(q.dtype, copy=False), dk.astype(k.dtype, copy=False), dv.astype(v.dtype, copy=False)


def _check_embedding_indices(op, idx, num_embeddings, weight_shape):
    if idx.dtype.kind not in "iu":
        raise DTypeError(f"{op}: indices must be integers (int32 or int64), got {idx.dtype}")
    bad = (idx < 0) | (idx >= num_embeddings)
    if bad.any():
        raise IndexOutOfRangeError(f"{op}: index {int(idx[bad].flat[0])} is out of range for "
                                   f"num_embeddings={num_embeddings} (weight shape {tuple(weight_shape)})")


def embedding(weight, indices):
    """Rows of the 2-D ``weight`` picked by ``indices`` (any shape) -> ``indices.shape + (dim,)``."""
    if weight.ndim != 2:
        raise ShapeError(f"embedding: weight must be 2-D (num_embeddings, embedding_dim), got shape {weight.shape}")
    idx = np.asarray(indices)
    _check_embedding_indices("embedding", idx, weight.shape[0], weight.shape)
    return np.take(weight, idx, axis=0)


def embedding_backward(grad, indices, num_embeddings, padding_idx, scale_grad_by_freq):
    """The dense ``(num_embeddings, dim)`` weight gradient: the grad rows of each index summed in
    index order in fp32 (fp64 for fp64), the ``padding_idx`` row zero, and with
    ``scale_grad_by_freq`` each row divided by how often its index occurs."""
    op = "embedding_backward"
    idx = np.asarray(indices)
    if grad.ndim != idx.ndim + 1 or tuple(grad.shape[:-1]) != idx.shape:
        raise ShapeError(f"{op}: grad of shape {tuple(grad.shape)} does not fit indices of shape {idx.shape} "
                         "(expected indices.shape + (embedding_dim,))")
    dim = grad.shape[-1]
    _check_embedding_indices(op, idx, num_embeddings, (num_embeddings, dim))
    idx = idx.reshape(-1)
    rows = _compute(grad).reshape(-1, dim)
    if padding_idx is not None:
        used = idx != padding_idx
        idx, rows = idx[used], rows[used]
    out = np.zeros((num_embeddings, dim), rows.dtype)
    np.add.at(out, idx, rows)  # one index after the other: the sequential order the CUDA kernel keeps
    if scale_grad_by_freq:
        counts = np.bincount(idx, minlength=num_embeddings)
        out /= np.maximum(counts, 1).astype(out.dtype)[:, None]
    return out.astype(grad.dtype, copy=False)


# ---------------------------------------------------------------------------------------------
# random: Philox keyed by the seed, its counter advanced to the offset, so a draw depends only
# on (seed, offset) and never on what ran before in this process.
def _rng(seed, offset):
    bitgen = np.random.Philox(key=seed)
    if offset:
        bitgen.advance(offset)
    return np.random.Generator(bitgen)


def rand(shape, dtype, seed, offset):
    out_dt = _np_dtype(dtype)
    r = _rng(seed, offset).random(shape, dtype=np.float64).astype(out_dt)
    # rounding to float16/float32 can reach 1.0 (float16 from about 1 - 2**-12 up): keep [0, 1)
    return np.minimum(r, np.nextafter(out_dt.type(1), out_dt.type(0)), out=r)


def randn(shape, dtype, seed, offset):
    return _rng(seed, offset).standard_normal(shape, dtype=np.float64).astype(_np_dtype(dtype))


def randint(low, high, shape, dtype, seed, offset):
    return _rng(seed, offset).integers(low, high, shape, dtype=np.int64).astype(_np_dtype(dtype))


def bernoulli(shape, p, dtype, seed, offset):
    return (_rng(seed, offset).random(shape) < p).astype(_np_dtype(dtype))


def _masked_scale(a, mask, scale):
    """``a * (scale where mask else 0)`` in fp32 (fp64 for fp64): NaN and inf stay NaN where dropped,
    as PyTorch's ``x * mask * scale`` leaves them."""
    x = _compute(a)
    factor = np.where(mask, x.dtype.type(scale), x.dtype.type(0))
    with np.errstate(invalid="ignore"):
        return np.asarray(x * factor).astype(a.dtype, copy=False)


def _dropout_scale(p):
    return 1.0 / (1.0 - p) if p < 1.0 else 0.0


def dropout(x, p, seed, offset):
    """-> (out, bool mask): the mask is ``bernoulli(x.shape, 1 - p, bool, seed, offset)`` (what is
    kept), ``out = x * mask / (1 - p)``."""
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout: dropout probability has to be between 0 and 1, but got {p}")
    if x.dtype.kind != "f":
        raise DTypeError(f"dropout: expected a floating point array, got {x.dtype}")
    keep = np.asarray(_rng(seed, offset).random(np.shape(x)) < 1.0 - p)
    return _masked_scale(x, keep, _dropout_scale(p)), keep


def dropout_backward(g, mask, scale):
    if np.shape(g) != np.shape(mask):
        raise ShapeError(f"dropout_backward: gradient {np.shape(g)} and mask {np.shape(mask)} differ")
    return _masked_scale(g, mask, scale)


# ---------------------------------------------------------------------------------------------
# optimizers: one call updates every tensor of a parameter group in place (the CUDA backend does
# it in one multi-tensor kernel); the math follows PyTorch's single-tensor SGD and Adam in fp32
# (fp64 for fp64 tensors), whatever the storage dtype.
def sgd_step_(params, grads, bufs, lr, momentum, dampening, nesterov, weight_decay, first_step, masters=None):
    """SGD with momentum: ``bufs`` (one per param, or None when ``momentum == 0``) are the momentum
    buffers; on ``first_step`` they are set to the gradient instead of being decayed. ``masters``
    (fp32 copies of low-precision params, or None) are stepped instead of ``params``, which then
    receive the result."""
    for i, (p, g) in enumerate(zip(params, grads)):
        target = p if masters is None else masters[i]
        w = _compute(target)
        d = _compute(g)
        if weight_decay:
            d = d + weight_decay * w
        if momentum:
            b = d if first_step else _compute(bufs[i]) * momentum + d * (1 - dampening)
            np.copyto(bufs[i], b, casting="unsafe")
            d = d + momentum * b if nesterov else b
        w = w - lr * d
        np.copyto(target, w, casting="unsafe")
        if masters is not None:
            np.copyto(p, w, casting="unsafe")


def adam_step_(params, grads, exp_avgs, exp_avg_sqs, step, lr, beta1, beta2, eps, weight_decay, decoupled,
               masters, max_exp_avg_sqs=None):
    """Adam (``decoupled=False``: L2 added to the gradient) or AdamW (``decoupled=True``: the weights
    decay by ``lr * weight_decay``) at ``step`` (1-based, shared by the tensors of the call).
    ``masters`` (fp32 copies of low-precision params, or None) are stepped instead of ``params``,
    which then receive the result; ``max_exp_avg_sqs`` (or None) makes it AMSGrad."""
    bias_correction1 = 1 - beta1 ** step
    bias_correction2_sqrt = math.sqrt(1 - beta2 ** step)
    step_size = lr / bias_correction1
    for i, g in enumerate(grads):
        target = params[i] if masters is None else masters[i]
        w = _compute(target)
        d = _compute(g)
        if weight_decay:
            if decoupled:
                w = w * (1 - lr * weight_decay)
            else:
                d = d + weight_decay * w
        m = _compute(exp_avgs[i])
        m = m + (d - m) * (1 - beta1)
        v = _compute(exp_avg_sqs[i]) * beta2 + (d * d) * (1 - beta2)
        np.copyto(exp_avgs[i], m, casting="unsafe")
        np.copyto(exp_avg_sqs[i], v, casting="unsafe")
        if max_exp_avg_sqs is not None:
            v = np.maximum(_compute(max_exp_avg_sqs[i]), v)
            np.copyto(max_exp_avg_sqs[i], v, casting="unsafe")
        denom = np.sqrt(v) / bias_correction2_sqrt + eps
        w = w - step_size * (m / denom)
        np.copyto(target, w, casting="unsafe")
        if masters is not None:
            np.copyto(params[i], w, casting="unsafe")


def global_norm(arrays, norm_type):
    """The ``norm_type``-norm (> 0, inf included) of all elements of ``arrays`` taken together, as
    ``clip_grad_norm_`` needs it: a 0-d float32 array (float64 if any array is float64), accumulated
    in that type; a NaN anywhere gives NaN, an inf (and no NaN) inf, as PyTorch's vector_norm."""
    norm_type = float(norm_type)
    if not norm_type > 0:
        raise ValueError(f"global_norm: norm_type must be positive or inf, got {norm_type}")
    arrays = list(arrays)
    for a in arrays:
        if a.dtype.kind != "f":
            raise DTypeError(f"global_norm: expected floating point arrays, got {a.dtype}")
    acc = np.dtype(np.float64) if any(a.dtype == np.float64 for a in arrays) else _F32
    total = acc.type(0)
    with np.errstate(over="ignore", invalid="ignore"):
        for a in arrays:
            x = np.abs(np.asarray(a, dtype=acc).reshape(-1))
            if x.size == 0:
                continue
            if norm_type == math.inf:
                total = np.maximum(total, np.max(x))
            elif norm_type == 2.0:
                total = total + np.sum(x * x)
            elif norm_type == 1.0:
                total = total + np.sum(x)
            else:
                total = total + np.sum(x ** acc.type(norm_type))
        if norm_type == 2.0:
            total = np.sqrt(total)
        elif norm_type not in (1.0, math.inf):
            total = total ** acc.type(1.0 / norm_type)
    return np.array(total, dtype=acc)


# ---------------------------------------------------------------------------------------------
# mixed precision: dynamic loss scaling. The scale, growth tracker and found-inf flag stay backend
# arrays, so a device backend never has to copy them to the host until the caller reads one.
def unscale_and_check_(outs, grads, inv_scale):
    """``outs[i] = grads[i] * inv_scale`` (``outs[i]`` may be ``grads[i]``, or a wider array) over
    many tensors at once, computed in fp32; returns a 0-d float32 array, 1.0 if any gradient holds
    an inf or a NaN, else 0.0 (PyTorch's ``_amp_foreach_non_finite_check_and_unscale_``)."""
    found_inf = False
    for out, g in zip(outs, grads):
        x = _compute(g)
        found_inf = found_inf or not np.isfinite(x).all()
        np.copyto(out, x * inv_scale, casting="unsafe")
    return np.array(1.0 if found_inf else 0.0, dtype=_F32)


def update_scale_(scale, growth_tracker, found_inf, growth_factor, backoff_factor, growth_interval, min_scale,
                  max_scale):
    """PyTorch's ``_amp_update_scale_`` on a 0-d float32 ``scale`` and int32 ``growth_tracker``, in
    place, with the scale kept in ``[min_scale, max_scale]``: back off after an inf/NaN, grow after
    ``growth_interval`` clean steps in a row (products in fp64, stored in fp32, as PyTorch does)."""
    current = float(scale)
    if float(found_inf):
        scale[...] = max(current * backoff_factor, min_scale)
        growth_tracker[...] = 0
        return
    successful = int(growth_tracker) + 1
    if successful == growth_interval:
        scale[...] = min(current * growth_factor, max_scale)  # max_scale is finite: never grows to inf
        growth_tracker[...] = 0
    else:
        growth_tracker[...] = successful
