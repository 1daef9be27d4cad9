"""The CUDA backend's fused NN primitives over adcuda's kernels: softmax / log-softmax and the fused
cross-entropy (kernels/softmax_loss.cu), layer norm (kernels/norm.cu) and memory-efficient attention
(kernels/attention.cu), forward and backward, with the CPU backend's signatures, dtype rules and
results (adcuda/backends/cpu.py is the oracle). Half types are computed in fp32.

Arguments are made to fit the kernels here: contiguous where a kernel walks rows, operands in one
dtype (converted like the CPU backend's fp32 compute would see them), int64 class targets. Results
come back in the dtypes the CPU backend gives.
"""
from .. import _native
from ..errors import DTypeError, ShapeError, fmt_shape
from ._cuda_kernels import broadcast_shape, cast, dense, is_floating, rows_dense, scalar_type

__all__ = ["softmax", "softmax_backward", "cross_entropy", "cross_entropy_backward", "layer_norm",
           "layer_norm_backward", "attention", "attention_backward", "attention_dropout_mask"]

_U64 = (1 << 64) - 1  # seeds and offsets are taken modulo 2^64, as the kernels' counters are


def _require_floating(op, name, a):
    if not is_floating(a):
        raise DTypeError(f"{op}: expected {name} to be a floating point array, got {a.dtype.name}")


def _check_axis(op, a, axis):
    if not 0 <= axis < a.ndim:
        raise ShapeError(f"{op}: axis {axis} is out of range for shape {fmt_shape(a.shape)}")


def _statistics_type(a):
    return scalar_type("float64" if a.dtype.name == "float64" else "float32")


# ---------------------------------------------------------------------------------------------
# softmax
def softmax(a, axis, log):
    _require_floating("softmax", "the input", a)
    _check_axis("softmax", a, axis)
    return _native._C.softmax(dense(a), axis, log)


def softmax_backward(y, g, axis, log):
    _require_floating("softmax_backward", "the gradient", g)
    if tuple(y.shape) != tuple(g.shape):
        raise ShapeError(f"softmax_backward: output {fmt_shape(y.shape)} and gradient {fmt_shape(g.shape)} differ")
    _check_axis("softmax_backward", g, axis)
    return _native._C.softmax_backward(dense(cast(y, g.dtype)), dense(g), axis, log)


# ---------------------------------------------------------------------------------------------
# cross-entropy
def _class_rows(op, rows, target):
    if rows.ndim != 2 or target.ndim != 1 or target.shape[0] != rows.shape[0]:
        raise ShapeError(f"{op}: expected (N, C) rows and (N,) class targets, got {fmt_shape(rows.shape)} and "
                         f"{fmt_shape(target.shape)}")
    if target.dtype.name not in ("int32", "int64"):
        raise DTypeError(f"{op}: class targets must be integers, got {target.dtype.name}")
    return dense(cast(target, scalar_type("int64")))


def cross_entropy(logits, target, ignore_index, label_smoothing):
    """Per-row losses of ``logits`` (N, C) against class indices ``target`` (N,) -> (losses, log-probs)."""
    _require_floating("cross_entropy", "the logits", logits)
    target = _class_rows("cross_entropy", logits, target)
    return _native._C.cross_entropy(dense(logits), target, int(ignore_index), float(label_smoothing))


def cross_entropy_backward(logp, target, g_rows, ignore_index, label_smoothing):
    _require_floating("cross_entropy_backward", "the log-probabilities", logp)
    target = _class_rows("cross_entropy_backward", logp, target)
    if tuple(g_rows.shape) != (logp.shape[0],):
        raise ShapeError(f"cross_entropy_backward: row gradients {fmt_shape(g_rows.shape)} do not match "
                         f"{logp.shape[0]} rows")
    return _native._C.cross_entropy_backward(dense(logp), target, dense(cast(g_rows, logp.dtype)), int(ignore_index),
                                             float(label_smoothing))


# ---------------------------------------------------------------------------------------------
# layer norm: weight and bias go to the kernel in x's dtype (their gradients come back in theirs)
def _check_normalized(op, x, n, *params):
    if not 1 <= n <= x.ndim:
        raise ShapeError(f"{op}: cannot normalise the last {n} dims of shape {fmt_shape(x.shape)}")
    shape = tuple(x.shape[x.ndim - n:])
    for p in params:
        if p is not None and tuple(p.shape) != shape:
            raise ShapeError(f"{op}: weight/bias of shape {fmt_shape(p.shape)} do not match the normalised shape "
                             f"{fmt_shape(shape)}")


def layer_norm(x, weight, bias, n, eps):
    """Normalise the last ``n`` dims -> (y, mean, rstd); mean and rstd keep x's dims (size 1 there)."""
    _require_floating("layer_norm", "the input", x)
    _check_normalized("layer_norm", x, n, weight, bias)
    params = [None if p is None else dense(cast(p, x.dtype)) for p in (weight, bias)]
    return tuple(_native._C.layer_norm(dense(x), params[0], params[1], n, float(eps)))


def layer_norm_backward(g, x, weight, mean, rstd, n):
    """-> (dx, dweight (None without a weight), dbias)."""
    _require_floating("layer_norm_backward", "the input", x)
    _check_normalized("layer_norm_backward", x, n, weight)
    stats = _statistics_type(x)
    dx, dweight, dbias = _native._C.layer_norm_backward(
        dense(cast(g, x.dtype)), dense(x), None if weight is None else dense(cast(weight, x.dtype)),
        dense(cast(mean, stats)), dense(cast(rstd, stats)), n)
    # the CPU backend's dtypes: dweight in weight's, dbias in weight's (g's without a weight)
    if weight is not None:
        dweight = cast(dweight, weight.dtype)
    return dx, dweight, cast(dbias, weight.dtype if weight is not None else g.dtype)


# ---------------------------------------------------------------------------------------------
# attention
def _attention_operands(op, q, k, v, mask):
    for name, t in (("q", q), ("k", k), ("v", v)):
        _require_floating(op, name, t)
        if t.ndim < 2:
            raise ShapeError(f"{op}: {name} must have at least 2 dims (..., L, E), got {fmt_shape(t.shape)}")
    if q.shape[-1] != k.shape[-1] or k.shape[-2] != v.shape[-2]:
        raise ShapeError(f"{op}: q {fmt_shape(q.shape)}, k {fmt_shape(k.shape)} and v {fmt_shape(v.shape)} do not "
                         "fit: q and k need the same last dim, k and v the same sequence length")
    batch = broadcast_shape(tuple(q.shape[:-2]), tuple(k.shape[:-2]), tuple(v.shape[:-2]))
    if batch is None:
        raise ShapeError(f"{op}: the batch dims of q {fmt_shape(q.shape)}, k {fmt_shape(k.shape)} and v "
                         f"{fmt_shape(v.shape)} cannot be broadcast")
    if mask is not None:
        scores = batch + (q.shape[-2], k.shape[-2])
        if broadcast_shape(tuple(mask.shape), scores) != scores:
            raise ShapeError(f"{op}: mask of shape {fmt_shape(mask.shape)} does not broadcast to the scores' shape "
                             f"{fmt_shape(scores)}")
        if mask.dtype.name != "bool":
            mask = cast(mask, q.dtype)  # an additive mask, added in q's dtype
    return rows_dense(q), rows_dense(cast(k, q.dtype)), rows_dense(cast(v, q.dtype)), mask, batch


def attention(q, k, v, mask, is_causal, scale, dropout_p=0.0, seed=0, offset=0):
    """Softmax(q k^T * scale + mask) v -> (out, logsumexp rows) without keeping the probabilities; with
    ``dropout_p`` the probabilities are dropped by the Philox draw ``(seed, offset)`` (the CPU backend
    draws the same mask)."""
    q, k, v, mask, _ = _attention_operands("attention", q, k, v, mask)
    return tuple(_native._C.attention(q, k, v, mask, bool(is_causal), float(scale), float(dropout_p),
                                      int(seed) & _U64, int(offset) & _U64))


def attention_dropout_mask(shape, p, seed, offset):
    """The bool keep-mask (batch..., L, S) that attention's dropout with (p, seed, offset) applies."""
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"attention_dropout_mask: dropout probability has to be between 0 and 1, but got {p}")
    return _native._C.attention_dropout_mask(tuple(int(n) for n in shape), float(p), int(seed) & _U64,
                                             int(offset) & _U64)


def attention_backward(g, q, k, v, out, lse, mask, is_causal, scale, dropout_p=0.0, seed=0, offset=0):
    """-> (dq, dk, dv), each in its input's dtype, with the broadcast batch shape; the dropout arguments
    are the forward's."""
    dtypes = (q.dtype, k.dtype, v.dtype)
    q, k, v, mask, batch = _attention_operands("attention_backward", q, k, v, mask)
    expected = batch + (q.shape[-2], v.shape[-1])
    for name, t in (("gradient", g), ("output", out)):
        if tuple(t.shape) != expected:
            raise ShapeError(f"attention_backward: the {name} has shape {fmt_shape(t.shape)}, expected "
                             f"{fmt_shape(expected)}")
    grads = _native._C.attention_backward(dense(cast(g, q.dtype)), q, k, v, dense(cast(out, q.dtype)),
                                          dense(cast(lse, _statistics_type(q))), mask, bool(is_causal), float(scale),
                                          float(dropout_p), int(seed) & _U64, int(offset) & _U64)
    return tuple(cast(d, dtype) for d, dtype in zip(grads, dtypes))
