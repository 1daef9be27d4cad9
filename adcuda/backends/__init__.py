"""Backends: the same small set of primitives over raw arrays, one package per device type.

Autograd and ops never touch NumPy or ``adcuda._C`` directly; they call these primitives on a
backend array (``Tensor._data``). The CPU backend (NumPy, fp32 compute, float64 allowed for
gradcheck, float16 stored but computed in fp32) is the reference oracle; the CUDA backend implements
the same names and signatures with the kernels in ``kernels/``, so one parity test can loop over
``PRIMITIVES``.

Both packages, ``cpu/`` and ``cuda/``, have one module per kernel family, named as the kernel file
``kernels/<family>.cu`` and its bindings ``kernels/bindings/<family>.cpp``: ``storage`` (storage and
views; on CUDA the runtime's kernels/runtime/copy.cu), ``elementwise``, ``reduce`` (reduce, argreduce,
var, logsumexp), ``sort`` (sort, cumsum), ``index``, ``layout`` (cat, tril, triu), ``gemm`` (matmul),
``softmax_loss``, ``norm`` (layer norm), ``attention``, ``embedding``, ``random`` (draws and dropout)
and ``optim`` (optimizer steps, global_norm, loss scaling). Each package re-exports every primitive.

Conventions: ``a``/``b`` are backend arrays (``b`` may also be a Python scalar where noted), ``dtype``
is an ``adcuda.dtypes.dtype``, ``axes`` a tuple of non-negative ints, results are new arrays unless
the name ends in ``_`` (writes into its first argument) or the row says "view".

| primitive | what it does |
|---|---|
| **storage** | |
| `from_numpy(x, dtype)` | host NumPy array -> backend array (copy on CUDA; CPU keeps it when dtype matches) |
| `to_numpy(a)` | backend array -> NumPy array (CPU: the same memory) |
| `empty(shape, dtype)` / `full(shape, value, dtype)` | allocation |
| `arange(start, stop, step, dtype)` | 1-D range |
| `dtype_of(a)` / `shape_of(a)` | metadata |
| `astype(a, dtype)` | cast (always a new array) |
| `contiguous(a)` | row-major copy unless already contiguous (then the same array) |
| `copy_(dst, src)` | write ``src`` (array or scalar, broadcast) into ``dst``, which may be a strided view |
| **views (no copy)** | |
| `view(a, shape)` | reshape without copying; ``None`` where the strides do not allow it |
| `permute(a, axes)` / `expand(a, shape)` / `slice(a, key)` / `flip(a, axes)` | strided views; ``key`` holds ints, slices, ``None`` and ``Ellipsis`` |
| `shares_memory(a, b)` | whether two arrays may overlap |
| **elementwise** (broadcasting, strided inputs) | |
| `unary(op, a)` | ``op`` in ``UNARY_OPS`` |
| `binary(op, a, b, dtype)` | ``op`` in ``BINARY_OPS``; ``b`` may be a scalar; result in ``dtype`` |
| `unary_backward(op, x, y, g)` | fused gradient of a unary op from its input ``x`` and/or output ``y`` (``UNARY_BACKWARD_OPS``) |
| `where(cond, a, b, dtype)` / `clamp(a, lo, hi)` | select; clamp with ``None`` for an open bound |
| **reductions** | |
| `reduce(op, a, axes, keepdim)` | ``op`` in ``REDUCE_OPS``; fp32 accumulation for half |
| `argreduce(op, a, axis, keepdim)` | ``argmax``/``argmin``; ``axis=None`` means flattened |
| `var(a, axes, correction, keepdim)` / `logsumexp(a, axes, keepdim)` | two-pass / max-shifted |
| `sort(a, axis, descending, stable)` | stable sort along ``axis`` -> (values, int64 indices); NaN sorts last ascending |
| `cumsum(a, axis)` | inclusive prefix sum; int and bool give int64 |
| **indexing and layout** | |
| `index(a, key)` | advanced indexing (integer arrays, boolean masks, mixed with slices): a copy |
| `index_put_(a, key, values, accumulate)` | ``a[key] = values`` (or ``+=`` with duplicates summed) |
| `gather(a, axis, idx)` / `scatter_add(a, axis, idx, src)` | PyTorch's gather / out-of-place scatter_add |
| `cat(arrays, axis)` | concatenation (stack = unsqueeze + cat) |
| `tril(a, k)` / `triu(a, k)` | triangles of the last two dims |
| **linear algebra** | |
| `matmul(a, b, bias=None, activation=None, save_preactivation=False)` | batched matrix product with broadcast batch dims (2-D or more); the fused epilogue adds ``bias`` (N,), applies ``activation`` (None or ``"gelu_tanh"``) and with ``save_preactivation`` returns ``(out, a @ b + bias)`` |
| **fused NN primitives** | |
| `softmax(a, axis, log)` / `softmax_backward(y, g, axis, log)` | (log-)softmax from its output |
| `cross_entropy(logits, target, ignore_index, label_smoothing)` | per-row losses of a 2-D ``logits`` -> (losses, log-probs) |
| `cross_entropy_backward(logp, target, g_rows, ignore_index, label_smoothing)` | gradient w.r.t. logits |
| `layer_norm(x, weight, bias, n, eps)` | normalise the last ``n`` dims -> (y, mean, rstd) |
| `layer_norm_backward(g, x, weight, mean, rstd, n)` | -> (dx, dweight, dbias) |
| `attention(q, k, v, mask, is_causal, scale)` | -> (out, logsumexp rows) without keeping probabilities |
| `attention_backward(g, q, k, v, out, lse, mask, is_causal, scale)` | -> (dq, dk, dv) |
| `embedding(weight, indices)` | rows of the 2-D ``weight`` at integer ``indices`` -> ``indices.shape + (dim,)``; IndexOutOfRangeError naming the index unless all lie in ``[0, num_embeddings)`` (a device checks on the device: one sync) |
| `embedding_backward(grad, indices, num_embeddings, padding_idx, scale_grad_by_freq)` | dense ``(num_embeddings, dim)`` gradient: each index's grad rows summed in index order (fp32; deterministic, no float atomics), row ``padding_idx`` (or None) zero, divided by the index's count with ``scale_grad_by_freq`` |
| **random** (counter-based Philox: reproducible from ``(seed, offset)``) | |
| `rand(shape, dtype, seed, offset)` / `randn(...)` / `randint(low, high, shape, dtype, seed, offset)` | |
| `bernoulli(shape, p, dtype, seed, offset)` | dropout masks: 1 with probability ``p`` |
| `dropout(x, p, seed, offset)` | -> (out, bool mask) in one pass: mask = ``bernoulli(x.shape, 1 - p, bool, seed, offset)`` (the kept elements), out = ``x * mask / (1 - p)`` (0 where ``p == 1``) |
| `dropout_backward(g, mask, scale)` | ``g * mask * scale`` from the saved mask (nothing redrawn) |
| **optimizers** (in place, many tensors in one call) | |
| `sgd_step_(params, grads, bufs, lr, momentum, dampening, nesterov, weight_decay, first_step, masters=None)` | PyTorch's SGD; ``bufs`` None when ``momentum == 0``; ``first_step`` sets each buffer to the gradient; ``masters`` as in ``adam_step_`` |
| `adam_step_(params, grads, exp_avgs, exp_avg_sqs, step, lr, beta1, beta2, eps, weight_decay, decoupled, masters, max_exp_avg_sqs=None)` | Adam/AdamW (``decoupled``) at the 1-based ``step`` shared by the call; ``masters`` (fp32 copies or None) are stepped and written back to ``params``; ``max_exp_avg_sqs`` (or None) for AMSGrad |
| `global_norm(arrays, norm_type)` | the ``norm_type``-norm (> 0 or inf) of all arrays' elements together -> 0-d float32 (float64 if any array is), left on the device; NaN/inf propagate as in PyTorch |
| **mixed precision** (0-d arrays stay on the device: no host sync until the caller reads one) | |
| `unscale_and_check_(outs, grads, inv_scale)` | ``outs[i] = grads[i] * inv_scale`` (in place, or into wider arrays) for many tensors; -> 0-d float32 found-inf flag (1.0 if any gradient is inf/NaN) |
| `update_scale_(scale, growth_tracker, found_inf, growth_factor, backoff_factor, growth_interval, min_scale, max_scale)` | PyTorch's dynamic loss-scale update, in place, the scale kept in ``[min_scale, max_scale]`` |
"""
from ..errors import DeviceError

PRIMITIVES = (
    "from_numpy", "to_numpy", "empty", "full", "arange", "dtype_of", "shape_of", "astype", "contiguous",
    "copy_", "view", "permute", "expand", "slice", "flip", "shares_memory", "unary", "binary",
    "unary_backward", "where", "clamp", "reduce", "argreduce", "var", "logsumexp", "sort", "cumsum", "index",
    "index_put_", "gather", "scatter_add", "cat", "tril", "triu", "matmul", "softmax",
    "softmax_backward", "cross_entropy", "cross_entropy_backward", "layer_norm",
    "layer_norm_backward", "attention", "attention_backward", "rand", "randn", "randint",
    "bernoulli", "sgd_step_", "adam_step_", "unscale_and_check_", "update_scale_", "embedding",
    "embedding_backward", "dropout", "dropout_backward", "global_norm",
)


def cuda_backend(op):
    """The CUDA primitive module, or a clear error saying why it cannot be used."""
    from .. import cuda
    cuda._require_cuda(op)
    try:
        from . import cuda as cuda_primitives
    except ImportError:
        raise DeviceError(f"{op}: this adcuda build has no CUDA kernels for tensor ops yet; "
                          "use device='cpu'") from None
    return cuda_primitives
