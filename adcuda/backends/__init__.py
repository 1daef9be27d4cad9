"""Backends: the same small set of primitives over raw arrays, one package per device type.

Autograd and ops never touch NumPy or ``adcuda._C`` directly; they call these primitives on a
backend array (``Tensor._data``), through ``backend_for(device)``. The CPU backend (NumPy, fp32
compute, float64 allowed for gradcheck, float16 stored but computed in fp32) is the reference
oracle; the CUDA backend implements the same names, signatures (annotated with the types of
``backends/seam.py``) and argument conventions with the kernels in ``kernels/``.
tests/test_backend_seam.py holds both to this table, which is the one place each primitive is
documented.

Both packages, ``cpu/`` and ``cuda/``, have one module per kernel family, named as the kernel file
``kernels/<family>.cu`` and its bindings ``kernels/bindings/<family>.cpp``: ``storage`` (storage and
views; on CUDA the runtime's kernels/runtime/copy.cu), ``elementwise``, ``reduce`` (reduce, argreduce,
var, logsumexp), ``sort`` (sort, cumsum, cumprod, scan, running_extreme, searchsorted, bincount), ``index`` (index, index_put_, gather, scatter_add,
scatter_reduce), ``layout`` (cat, tril, triu), ``gemm`` (matmul), ``softmax_loss``, ``norm`` (layer
norm), ``attention``, ``embedding``, ``random`` (draws and dropout), ``convolution`` (conv2d and its
backwards), ``pooling`` (max pooling), ``optim`` (optimizer steps,
global_norm, loss scaling) and ``sparse`` (coo_to_csr, spmm, sddmm). Each package re-exports every primitive.
and batch norm), ``attention``, ``embedding``, ``random`` (draws and dropout), ``optim`` (optimizer
steps, global_norm, loss scaling) and ``recurrent`` (LSTM and GRU cell steps). Each package re-exports
every primitive.

Conventions (NumPy's, which the CPU backend inherits and the CUDA backend follows):

- ``a``, ``b``, ``x``, ``g``... are backend arrays of any layout (strided and broadcast views
  included); results are new arrays unless the name ends in ``_`` (writes into its first argument)
  or the row says "view". ``dtype`` is an ``adcuda.dtypes.dtype``.
- ``shape``: a tuple of sizes (a list or one int work too).
- ``axes``: a tuple of dims, or None for every dim. ``axis``: one dim. Negative dims count from the
  end. A 0-d array has no dims to reduce over (its ``axes`` are ``()`` or None), but where one
  ``axis`` is taken, 0 and -1 name its single element.
- Python scalars (bool, int, float; NumPy scalars act as Python ones) only where a row says
  "scalar". Taken in an integer dtype, an int that does not fit raises OverflowError.
- 0-d and empty arrays are arrays like any other: results keep the dims NumPy gives them, and are
  arrays, never NumPy scalars.
- Errors are adcuda's (or NumPy's on the CPU, of the same built-in class): a dtype an op is not
  defined for raises DTypeError (a TypeError), shapes that do not fit ShapeError (a ValueError), a
  dim or an index out of range an IndexError (an index checked on a CUDA device raises
  ``adcuda.cuda.DeviceIndexError`` at the next call that waits for the device), an unknown ``op``
  name ValueError.
- Where the backends differ, the row says so: CUDA has bfloat16 and the CPU does not; the CPU
  multiplies integer matrices and CUDA does not; checks that would need a host sync on CUDA are the
  ops layer's (the CPU still makes them).
- Beyond the table, a few CPU primitives take keyword-only ``out=`` and ``scratch=``
  (``seam.CPU_REPLAY_KEYWORDS``, from the ``@primitive`` declarations: unary, unary_backward, sgd_step_,
  adam_step_), and a forward and its backward the array the forward keeps for the backward (attention's ``probs=``, layer_norm's
  ``xhat=``, gelu_tanh's ``inner=``): graph capture's CPU replay passes them to write into its
  preplanned buffers, reuse its temporaries and spare a backward what its forward computed; nothing
  else does, and the CUDA primitives do not take them.

| primitive | what it does |
|---|---|
| **storage** | |
| `from_numpy(x, dtype, non_blocking=False)` | host data -> backend array in ``dtype`` (CPU: ``x`` itself when it is a NumPy array of that dtype; CUDA: a copy, queued only with ``non_blocking`` from pinned memory) |
| `to_numpy(a)` | backend array -> NumPy array (CPU: the same memory; CUDA: a host copy, bfloat16 widened to float32) |
| `empty(shape, dtype)` | an uninitialised array |
| `full(shape, value, dtype)` | an array of the scalar ``value`` |
| `arange(start, stop, step, dtype)` | 1-D range, computed in float64 (float dtypes) or int64 and converted |
| `dtype_of(a)` | ``a``'s ``adcuda.dtypes.dtype`` |
| `shape_of(a)` | ``a``'s shape, a tuple |
| `astype(a, dtype)` | cast (always a new array) |
| `contiguous(a)` | row-major copy unless already contiguous (then the same array) |
| `copy_(dst, src)` | write ``src`` (an array, a NumPy array or a scalar, broadcast; cast as needed) into ``dst``, which may be a strided view; -> ``dst`` |
| **views (no copy)** | |
| `view(a, shape)` | reshape without copying (one size may be -1); None where the strides do not allow it; ShapeError where the sizes do not fit |
| `permute(a, axes)` | dims reordered |
| `expand(a, shape)` | broadcast to ``shape`` (stride 0 along the new dims) |
| `slice(a, key)` | basic indexing; ``key`` a tuple of ints, slices, None and one Ellipsis |
| `flip(a, axes)` | reversed along ``axes`` (None: every dim) |
| `shares_memory(a, b)` | whether two arrays may overlap |
| `storage_offset(a)` | where ``a`` starts in the memory it is a view of, in elements from its start |
| `as_strided(a, shape, strides, offset)` | a view of the memory ``a`` is a view of: ``strides`` in elements, ``offset`` in elements from the memory's start; ShapeError where it would reach outside it |
| **elementwise** (broadcasting, strided inputs) | |
| `unary(op, a)` | ``op`` in ``UNARY_OPS``, in ``a``'s dtype (``logical_not``: bool); the floating point functions of bool and integer arrays are computed in float64 and cast back |
| `binary(op, a, b, dtype)` | ``op`` in ``BINARY_OPS`` with both operands taken in ``dtype``; ``a`` or ``b`` may be a scalar; the result in ``dtype`` (comparisons and logical ops: bool) |
| `unary_backward(op, x, y, g)` | fused gradient of a unary op from its input ``x`` and/or output ``y`` (``UNARY_BACKWARD_OPS``; the one it does not need may be None), in ``g``'s dtype |
| `where(cond, a, b, dtype)` | ``cond ? a : b`` in ``dtype``; ``a`` or ``b`` may be a scalar |
| `clamp(a, lo, hi)` | ``a`` clamped to ``[lo, hi]``, scalar bounds, None for an open one |
| **reductions** | |
| `reduce(op, a, axes, keepdim)` | ``op`` in ``REDUCE_OPS`` over ``axes``; fp32 accumulation for half; integer and bool sums and products give int64, ``mean`` of integers float64, ``all``/``any`` bool |
| `argreduce(op, a, axis, keepdim)` | ``argmax``/``argmin`` along ``axis`` (None: of the flattened array) -> int64; the first of equal values; a NaN wins, as in NumPy |
| `var(a, axes, correction, keepdim)` | two-pass variance of a floating point array, divided by ``n - correction`` |
| `logsumexp(a, axes, keepdim)` | max-shifted ``log(sum(exp(a)))`` of a floating point array |
| `sort(a, axis, descending, stable)` | sort along ``axis`` (None: of the flattened array) -> (values, int64 indices); always stable; NaN sorts as the largest value |
| `cumsum(a, axis)` | inclusive prefix sum along ``axis`` (None: of the flattened array); int and bool give int64; a 0-d array gives shape (1,), as NumPy's |
| `cumprod(a, axis)` | inclusive prefix product, with ``cumsum``'s conventions (half types computed in fp32) |
| `scan(op, a, axis)` | inclusive scan along ``axis`` by ``op``: ``max``/``min`` (NaN propagates) of any dtype, ``logaddexp`` of a floating one; in ``a``'s dtype (half types computed in fp32) |
| `running_extreme(op, a, axis)` | the running ``max``/``min`` along ``axis`` and the int64 index of each: an element equal to the running value takes its place and index (a later equal value wins); NaN propagates with the last NaN's index (PyTorch's cummax/cummin) |
| `searchsorted(boundaries, values, right)` | int64 insertion points of ``values`` in the sorted last dim of ``boundaries`` (1-d: for values of any shape; else its dims but the last are values'), before equal boundaries (after them if ``right``); a NaN value goes last; one dtype for both |
| `bincount(slots, size)` | how often each of ``0..size-1`` occurs in the 1-d int64 ``slots`` (each in that range) -> int64 counts of shape ``(size,)`` |
| **indexing and layout** | |
| `index(a, key)` | NumPy's advanced indexing (integer arrays, boolean masks, mixed with a ``slice`` key's items): a copy |
| `index_put_(a, key, values, accumulate)` | ``a[key] = values`` (an array or a scalar, broadcast), or ``+=`` with duplicates summed; -> ``a`` |
| `gather(a, axis, idx)` | PyTorch's gather (``idx`` of ``a``'s rank, integer, no larger than ``a`` but along ``axis``; a 0-d ``a`` with a 0-d or 1-d ``idx``) |
| `scatter_add(a, axis, idx, src)` | PyTorch's scatter_add, out of place (``src`` no smaller than ``idx``) |
| `scatter_reduce(a, axis, idx, src, reduce, include_self)` | PyTorch's scatter_reduce for ``reduce`` 'prod', 'amax' or 'amin', out of place (NaN propagates; without ``include_self`` the scattered-to elements of ``a`` are left out; half types computed in fp32) |
| `cat(arrays, axis)` | concatenation of arrays of one dtype (stack = unsqueeze + cat) |
| `tril(a, k)` | lower triangle of the last two dims (at least 2) |
| `triu(a, k)` | upper triangle of the last two dims (at least 2) |
| **linear algebra** | |
| `matmul(a, b, bias=None, activation=None, save_preactivation=False)` | batched matrix product of arrays of 2 dims or more, batch dims broadcast, in ``a``'s dtype (floating point on CUDA, integers too on the CPU); a vector ``b`` (K,) gives the matrix-vector product (..., M), with no epilogue; the fused epilogue adds ``bias`` (N,), applies ``activation`` (None or ``"gelu_tanh"``) and with ``save_preactivation`` returns ``(out, a @ b + bias)`` |
| `pdist(x, p)` | the p-norms (finite ``p`` >= 0) of the differences of the rows ``i < j`` of the matrix ``x`` (N, M), pairs in row-major order -> (N (N - 1) / 2,) in x's dtype (half types computed in fp32) |
| `cdist(x1, x2, p)` | the p-norms (finite ``p`` >= 0) of the differences of each row of ``x1`` (B, P, M) and each row of ``x2`` (B, R, M), of one dtype -> (B, P, R) (half types computed in fp32) |
| `cross(a, b, axis)` | the cross products of the 3-vectors along ``axis`` (of size 3) of ``a`` and ``b`` (one shape and dtype): ``a[1] b[2] - a[2] b[1]``, ... |
| **fused NN primitives** (floating point arrays; half types computed in fp32) | |
| `softmax(a, axis, log)` | (log-)softmax along ``axis`` |
| `softmax_backward(y, g, axis, log)` | its gradient from the output ``y`` (of ``g``'s shape), in ``g``'s dtype |
| `classifier_loss(logits, target, weight, ignore_index, label_smoothing)` | per-row cross-entropy losses of 2-D ``logits`` (any floating dtype) against integer class ``target`` (N,) with optional class ``weight`` (C,) -> (losses (N,), stats (N, 2): each row's shift and log-sum of exponentials), both float32 (float64 for float64 logits); the logits are read once in their dtype; a target outside ``[0, C)`` that is not ``ignore_index`` is the ops layer's to reject (the CPU raises IndexError, CUDA gives NaN rows) |
| `classifier_loss_backward(logits, stats, target, weight, g_rows, ignore_index, label_smoothing)` | gradient w.r.t. the logits in their dtype, ``(p * a - q) * g_row`` (``p`` the softmax from ``stats``, ``a`` and ``q`` the weighted, smoothed one-hot target's terms; 0 for ignored rows) |
| `nll_loss(logp, target, weight, ignore_index, reduction)` | -> (loss, total_weight): each row's ``-w[t] * logp[t]`` of 2-D floating point ``logp`` (N, C) against integer class ``target`` (N,) (0 where ``t == ignore_index``), with class ``weight`` (C,) of logp's dtype or None (w = 1); ``reduction`` 'none' (the (N,) losses), 'sum', or 'mean' (the sum over total_weight, NaN where it is 0); total_weight the 0-d sum of ``w[t]`` over the rows that count; both in logp's dtype; targets out of range are the ops layer's to reject (the CPU raises IndexError) |
| `multi_margin_loss(scores, target, p, margin, weight, reduction)` | each row's ``sum over j != t of w[t] * max(0, margin - x[t] + x[j]) ** p / C`` of 2-D floating point ``scores`` (N, C) against integer class ``target`` (N,), ``p`` 1 or 2, class ``weight`` as nll_loss's; a NaN hinge adds nothing (PyTorch's); ``reduction`` 'none', 'sum' or 'mean' (over N); in the scores' dtype |
| `layer_norm(x, weight, bias, n, eps)` | normalise the last ``n`` dims (1 <= n <= ndim) -> (y, mean, rstd); ``weight``/``bias`` of the normalised shape or None; mean and rstd float32 (float64 for float64) with x's dims |
| `layer_norm_backward(g, x, weight, mean, rstd, n)` | -> (dx, dweight (None without a weight), dbias) |
| `add_layer_norm(x, residual, weight, bias, n, eps, y_dtype)` | the residual add fused with layer_norm: ``h = x + residual`` (same shape and dtype, rounded to it), normalised as layer_norm -> (y, h, mean, rstd); ``y`` in ``y_dtype``: x's, or float16 / bfloat16 for float32 x (autocast's activation dtype) |
| `add_layer_norm_backward(g, grad_sum, h, weight, mean, rstd, n)` | layer_norm_backward at ``h`` with ``grad_sum`` (h's gradient from its other uses, or None) added to dx in the same pass -> (dh, dweight (None without a weight), dbias); dh is the gradient of both x and residual; ``g`` in any floating dtype |
| `rms_norm(x, weight, n, eps)` | ``x / sqrt(mean(x^2 over the last n dims) + eps) * weight`` -> (y, rstd); ``weight`` of the normalised shape or None; rstd as layer_norm's |
| `rms_norm_backward(g, x, weight, rstd, n)` | -> (dx, dweight (None without a weight), in the weight's dtype) |
| `group_norm(x, weight, bias, groups, eps)` | normalise each of ``groups`` channel groups of ``x`` (N, C, *) per sample, then scale and shift per channel (``weight``/``bias`` (C,) or None) -> (y, mean (N, groups), rstd (N, groups)); statistics as layer_norm's; instance norm is groups = C |
| `group_norm_backward(g, x, weight, mean, rstd, groups)` | -> (dx, dweight (None without a weight), dbias) |
| `batch_norm(x, weight, bias, eps)` | normalise each channel (dim 1) of ``x`` (N, C, *) with its batch statistics over every other dim -> (y, mean (C,), rstd (C,)); ``weight``/``bias`` (C,) or None; mean and rstd float32 (float64 for float64 x); NaN statistics for an empty batch |
| `batch_norm_backward(g, x, weight, mean, rstd)` | -> (dx, dweight (None without a weight), dbias) |
| `attention(q, k, v, mask, is_causal, scale, dropout_p=0.0, seed=0, offset=0)` | dropout(softmax(q k^T * scale + mask)) v for q, k, v of 2 dims or more (batch dims broadcast; k, v taken in q's dtype), a bool or additive ``mask`` or None -> (out, logsumexp rows) without keeping the probabilities; dropout (kept probabilities scaled by 1 / (1 - dropout_p)) is drawn from the Philox draw ``(seed, offset)`` in one counter layout on both backends (kernels/attention_dropout.cuh), so, unlike the other random primitives, they drop the same probabilities; the logsumexp is of the probabilities before dropout |
| `attention_backward(g, q, k, v, out, lse, mask, is_causal, scale, dropout_p=0.0, seed=0, offset=0)` | -> (dq, dk, dv), each in its input's dtype; the forward's dropout drawn again |
| `attention_dropout_mask(shape, p, seed, offset)` | the bool keep-mask (batch..., L, S) that ``attention``'s dropout with ``(p, seed, offset)`` applies (the double-backward rule rebuilds dropout from it) |
| `embedding(weight, indices)` | rows of the 2-D ``weight`` at integer ``indices`` -> ``indices.shape + (dim,)``; IndexOutOfRangeError naming the index unless all lie in ``[0, num_embeddings)`` (CUDA checks on the device without waiting: ``adcuda.cuda.DeviceIndexError`` at the next synchronising call) |
| `embedding_backward(grad, indices, num_embeddings, padding_idx, scale_grad_by_freq)` | dense ``(num_embeddings, dim)`` gradient: each index's grad rows summed in index order (fp32; deterministic, no float atomics), row ``padding_idx`` (or None) zero, divided by the index's count with ``scale_grad_by_freq``; the indices are the ones ``embedding`` checked (CUDA adds one out of range nowhere, the CPU raises) |
| **convolution** (2-d, NCHW; ``stride``, ``padding`` (zeros, each side), ``dilation``: pairs of ints; x and the weight of one floating point dtype; fp32 accumulation) | |
| `conv2d(x, weight, stride, padding, dilation, groups)` | cross-correlation of x (N, C, H, W) with weight (O, C/groups, kh, kw) -> (N, O, Ho, Wo); ShapeError naming the shapes where they do not fit (groups, a kernel larger than the padded input) |
| `conv2d_backward_input(g, weight, input_shape, stride, padding, dilation, groups)` | the gradient of ``conv2d`` w.r.t. its input (N, C, H, W) = ``input_shape`` from g (N, O, Ho, Wo); also the transposed convolution |
| `conv2d_backward_weight(g, x, weight_shape, stride, padding, dilation, groups)` | the gradient of ``conv2d`` w.r.t. its weight (of ``weight_shape``), summed over N, Ho, Wo |
| **pooling** (4-d NCHW; indices are int64 flat positions ``h * W + w`` in each (n, c) plane, as PyTorch's) | |
| `max_pool2d(x, kernel, stride, padding, dilation, out_size)` | max over windows of x padded by ``padding`` (never chosen) -> (values (N, C, Ho, Wo), indices); ``out_size`` (Ho, Wo) is given (ceil_mode's last windows may run past the padded input); a NaN is the maximum (the last NaN of a window, as PyTorch); ties go to the first position |
| `adaptive_max_pool2d(x, out_size)` | max over PyTorch's adaptive windows (rows ``floor(i*H/Ho)`` to ``ceil((i+1)*H/Ho)``) -> (values, indices) |
| `max_pool2d_backward(g, indices, input_shape)` | each gradient of g added at the position its index names -> dx of ``input_shape`` (fp32 accumulation) |
| `avg_pool2d(x, kernel, stride, padding, out_size, count_include_pad, divisor_override)` | window means of floating point ``x`` (N, C, H, W): each window's sum over the input it covers, divided by ``divisor_override`` (an int or None), else by its size clipped to the padded input (``count_include_pad``) or to the input; padding at most half the kernel; ``out_size`` (Ho, Wo) is the op's (ceil_mode) |
| `avg_pool2d_backward(g, input_shape, kernel, stride, padding, count_include_pad, divisor_override)` | its gradient for an input of ``input_shape`` (each input position gathers its windows' shares; no atomics on CUDA) |
| `adaptive_avg_pool2d(x, out_size)` | means over PyTorch's adaptive windows (rows floor(i*H/Ho) to ceil((i+1)*H/Ho)) |
| `adaptive_avg_pool2d_backward(g, input_shape)` | its gradient for an input of ``input_shape`` |
| **resampling** (interpolate on 4-d NCHW, 1-d as H = 1; pad on the last 1-3 dims; the backwards take floating point gradients and are gathers: each input element sums the output gradients that read it, in a fixed order, no atomics on CUDA) | |
| `interpolate_nearest(x, out_size, scales, exact)` | x of any dtype resized to ``out_size`` (Ho, Wo): output o along a dim copies input ``min(floor(o * scale), n - 1)`` ('nearest') or ``floor((o + 0.5) * scale)`` ('nearest-exact', ``exact``), as PyTorch's CPU kernels compute them: ``scales`` (the source step per output position, a pair of floats) and the products in float32 (float64 for float64 data), the exact products in float64, each rounded to float32 before the floor |
| `interpolate_nearest_backward(g, input_shape, scales, exact)` | its gradient for an input of ``input_shape`` |
| `interpolate_bilinear(x, out_size, scales, align_corners)` | bilinear interpolation of floating point x to ``out_size``: source position ``scale * o`` (``align_corners``) or ``max(scale * (o + 0.5) - 0.5, 0)`` in float32 (float64 for float64 x), taps ``i0 = min(floor(src), n - 1)`` and ``min(i0 + 1, n - 1)`` |
| `interpolate_bilinear_backward(g, input_shape, scales, align_corners)` | its gradient for an input of ``input_shape`` |
| `pad(x, pads, mode, value)` | x (any dtype) with its last ``len(pads) // 2`` <= 3 dims padded by (before, after) pairs given for those dims in order (negative ones crop): ``value`` outside ('constant'), the mirror image without the edge repeated ('reflect', pads below the size), the edge ('replicate') or the other end ('circular', pads at most the size); ShapeError otherwise |
| `pad_backward(g, input_shape, pads, mode)` | its gradient for an input of ``input_shape`` |
| **sparse** (sparse COO tensors' products, adcuda/ops/sparse.py; indices int64, each in range: the ops layer checks them; values and dense operands of one floating point dtype, half types accumulated in fp32) | |
| `coo_to_csr(rows, n_rows, rows_sorted)` | (row_ptr int64 (n_rows + 1,), order): CSR row pointers of the entries at ``rows`` (1-D, each in [0, n_rows)), and the stable int64 order that sorts the entries by row (None when ``rows_sorted``) |
| `spmm(row_ptr, order, cols, values, dense)` | the (n_rows, k) product of the CSR matrix (row i's entries ``order[row_ptr[i]:row_ptr[i + 1]]``, or those positions themselves when ``order`` is None; column ``cols``, value ``values``) by the 2-D ``dense`` (n, k), in ``values``' dtype; duplicate entries add |
| `sddmm(rows, cols, a, b)` | ``out[k] = dot(a[rows[k]], b[cols[k]])`` for each entry (a, b 2-D with as many columns): spmm's gradient w.r.t. its values |
| **random** (counter-based Philox: reproducible from ``(seed, offset)``, both taken modulo 2**64; the CPU's streams differ from CUDA's) | |
| `rand(shape, dtype, seed, offset)` | uniform in [0, 1), floating point ``dtype`` |
| `randn(shape, dtype, seed, offset)` | standard normal, floating point ``dtype`` |
| `randint(low, high, shape, dtype, seed, offset)` | uniform integers in [low, high) |
| `bernoulli(shape, p, dtype, seed, offset)` | 1 with probability ``p`` (dropout masks) |
| `dropout(x, p, seed, offset)` | -> (out, bool mask) in one pass: mask = ``bernoulli(x.shape, 1 - p, bool, seed, offset)`` (the kept elements), out = ``x * mask / (1 - p)`` (0 where ``p == 1``) |
| `dropout_backward(g, mask, scale)` | ``g * mask * scale`` from the saved mask (nothing redrawn) |
| **optimizers** (in place, many tensors in one call: floating point, contiguous, one per parameter, each of its parameter's size) | |
| `sgd_step_(params, grads, bufs, lr, momentum, dampening, nesterov, weight_decay, first_step, masters=None)` | PyTorch's SGD; ``bufs`` None when ``momentum == 0``; ``first_step`` sets each buffer to the gradient; ``masters`` as in ``adam_step_`` |
| `adam_step_(params, grads, exp_avgs, exp_avg_sqs, step, lr, beta1, beta2, eps, weight_decay, decoupled, masters, max_exp_avg_sqs=None, grad_multiplier=None)` | Adam/AdamW (``decoupled``) at the 1-based ``step`` shared by the call; ``masters`` (fp32 copies or None) are stepped and written back to ``params`` (an fp32 master with fp32 gradients may have a half ``params`` entry: its working copy); ``max_exp_avg_sqs`` (or None) for AMSGrad; ``grad_multiplier`` (a one-element fp32 array, or None) scales every gradient first, rounded to its dtype (clip_grad_norm_'s coefficient, read on the device) |
| `global_norm(arrays, norm_type)` | the ``norm_type``-norm (> 0 or inf) of all arrays' elements together -> 0-d float32 (float64 if any array is), left on the device; NaN/inf propagate as in PyTorch |
| **mixed precision** (0-d arrays stay on the device: no host sync until the caller reads one) | |
| `unscale_and_check_(outs, grads, inv_scale)` | ``outs[i] = grads[i] * inv_scale`` (a one-element array or a scalar; in place, or into wider arrays) for many tensors; -> 0-d float32 found-inf flag (1.0 if any gradient is inf/NaN) |
| `update_scale_(scale, growth_tracker, found_inf, growth_factor, backoff_factor, growth_interval, min_scale, max_scale)` | PyTorch's dynamic loss-scale update, in place on one-element ``scale`` (float32) and ``growth_tracker`` (int32), the scale kept in ``[min_scale, max_scale]`` |
| **recurrent cells** (one time step after the two matrix products; PyTorch's gate order; floating point arrays of one dtype, half types computed in fp32) | |
| `lstm_cell(gi, gh, c)` | LSTM step from the input and hidden projections ``gi``, ``gh`` (B, 4H; gates i, f, g, o, biases included) and the cell state ``c`` (B, H) -> ``hc`` (2, B, H): ``hc[0] = o * tanh(c')``, ``hc[1] = c' = f * c + i * g`` |
| `lstm_cell_backward(grad, gi, gh, c, hc)` | from the gradient of ``hc`` -> (d_gates (B, 4H), the gradient of both projections, d_c) |
| `gru_cell(gi, gh, h)` | GRU step from ``gi``, ``gh`` (B, 3H; gates r, z, n, biases included) and ``h`` (B, H) -> ``(1 - z) * n + z * h`` with ``n = tanh(gi_n + r * gh_n)`` |
| `gru_cell_backward(grad, gi, gh, h)` | -> (d_gi, d_gh, d_h) |
| `lstm_layer(x, h0, c0, w_ih, w_hh, b_ih, b_hh, reverse, batch_first)` | an LSTM layer over the input ``x`` (T, B, F), or (B, T, F) when ``batch_first``, its projection included, from ``h0``, ``c0`` (B, H), biases (4H,) or None, visiting time backwards when ``reverse`` -> (``out`` (T * B + 2B, H): every step's h in x's row order, then the last h and c; ``gates`` (T * B, 4H) and ``cells`` (2, T * B, H: each step's c and tanh(c)), time-major and kept for the backward; the gates are the backend's own: activated on the CPU, pre-activation on CUDA) |
| `lstm_layer_backward(grad, x, h0, c0, w_ih, w_hh, out, gates, cells, reverse, batch_first, input_grad, h0_grad, bias_grad)` | backpropagation through time from the gradient of ``out`` -> (d_x or None unless ``input_grad``, d_h0 or None unless ``h0_grad``, d_c0, d_w_ih, d_w_hh, d_b (each bias's gradient) or None unless ``bias_grad``) |
"""

from types import ModuleType

from .. import _native
from ..device import device as Device
from ..errors import DeviceError
from . import cpu, cuda, cudnn  # noqa: F401 (cudnn: PyTorch's flags, adcuda.backends.cudnn)
from .cuda_availability import require_cuda
from .seam import PRIMITIVES  # noqa: F401 (the names every backend implements)

# the CUDA primitives, where this build has them (``adcuda.backends.cuda`` is the package either way)
_cuda_primitives = cuda if cuda.is_built() else None


def cuda_backend(op: str) -> ModuleType:
    """The CUDA primitive module, or a clear error naming ``op`` and saying why it cannot be used."""
    require_cuda(op)
    if _cuda_primitives is None:
        raise DeviceError(f"{op}: this adcuda build has no CUDA kernels for tensor ops; use device='cpu'")
    return _cuda_primitives


def backend_for(device: Device, op: str = "tensor") -> ModuleType:
    """The primitive module that computes on ``device`` (an ``adcuda.device``); a clear error naming
    ``op`` where it cannot."""
    if device.type == "cpu":
        return cpu
    return cuda_backend(op)
