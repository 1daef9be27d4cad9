"""Every public op of adcuda's registry as one small call, the same text for adcuda and PyTorch: the
per-op table of bench_dispatch.py (``--ops``).

``calls(lib)`` gives ``{op name: a function of no arguments}`` for the library ``lib`` (adcuda or torch):
an explicit call from ``SPECS`` where the op needs particular arguments, else one made from the op's
signature (``input`` -> an 8x8 float tensor ``x``, ``other`` -> ``y``, ``tensors`` -> ``[x, y]``),
through a public form PyTorch also has (method, ``nn.functional``, function, property). ``uncovered()`` lists
the ops that have neither, so a new op either runs here or is named; the tests check it is empty.
Inputs are small (8x8, a few batches of 8x8 images), so the time is the per-call cost, not the
arithmetic; the issue's slow composites have rows of their own (``EXTRA``).
"""

import inspect

import numpy as np

# An op's required parameters that a made call knows how to fill, and with what.
MADE_ARGUMENTS = {"input": "x", "self": "x", "other": "y", "tensors": "[x, y]"}

# Ops whose call is written out: required arguments the signature cannot say, or inputs of a kind an
# 8x8 float tensor is not (integers, probabilities, images, batches).
SPECS = {
    # elementwise
    "pow": "L.pow(x, 2.0)",
    "clamp": "L.clamp(x, -0.5, 0.5)",
    "clamp_min": "L.clamp_min(x, 0.0)",
    "clamp_max": "L.clamp_max(x, 0.0)",
    "where": "L.where(mask, x, y)",
    "lerp": "L.lerp(x, y, 0.5)",
    "addcmul": "L.addcmul(x, y, y, value=0.5)",
    "addcdiv": "L.addcdiv(x, y, pos, value=0.5)",
    "threshold": "F.threshold(x, 0.1, 0.0)",
    "prelu": "F.prelu(x, w1)",
    "heaviside": "L.heaviside(x, y)",
    "isin": "L.isin(x, y)",
    "float_power": "L.float_power(pos, 2.0)",
    "bitwise_and": "L.bitwise_and(ints, ints2)",
    "gcd": "L.gcd(ints, ints2)",
    "lcm": "L.lcm(ints, ints2)",
    "bitwise_or": "L.bitwise_or(ints, ints2)",
    "bitwise_xor": "L.bitwise_xor(ints, ints2)",
    "bitwise_not": "L.bitwise_not(ints)",
    "logical_not": "L.logical_not(mask)",
    "silu": "F.silu(x)",
    "gelu": "F.gelu(x)",
    "leaky_relu": "F.leaky_relu(x)",
    "var_mean": "L.var_mean(x)",
    "std_mean": "L.std_mean(x)",
    "log": "L.log(pos)",
    "log2": "L.log2(pos)",
    "log10": "L.log10(pos)",
    "log1p": "L.log1p(pos)",
    "sqrt": "L.sqrt(pos)",
    "rsqrt": "L.rsqrt(pos)",
    "logit": "L.logit(prob)",
    "xlogy": "L.xlogy(pos, pos)",
    "floor_divide": "L.floor_divide(x, pos)",
    "remainder": "L.remainder(x, pos)",
    "fmod": "L.fmod(x, pos)",
    "polygamma": "L.polygamma(1, pos)",
    "mvlgamma": "L.mvlgamma(pos + 2.0, 2)",
    # factories and conversions
    "tensor": "L.tensor(data_list)",
    "from_numpy": "L.from_numpy(array)",
    "as_tensor": "L.as_tensor(array)",
    "from_dlpack": "L.from_dlpack(x)",
    "full": "L.full((8, 8), 2.0)",
    "full_like": "L.full_like(x, 2.0)",
    "arange": "L.arange(8)",
    "linspace": "L.linspace(0, 1, 8)",
    "logspace": "L.logspace(0, 1, 8)",
    "eye": "L.eye(8)",
    "zeros": "L.zeros(8, 8)",
    "ones": "L.ones(8, 8)",
    "empty": "L.empty(8, 8)",
    "rand": "L.rand(8, 8)",
    "randn": "L.randn(8, 8)",
    "randint": "L.randint(0, 8, (8, 8))",
    "randperm": "L.randperm(8)",
    "new_full": "x.new_full((8, 8), 2.0)",
    "new_tensor": "x.new_tensor(data_list)",
    "new_zeros": "x.new_zeros((8, 8))",
    "new_ones": "x.new_ones((8, 8))",
    "new_empty": "x.new_empty((8, 8))",
    "new": "x.new(8, 8)",
    "tril_indices": "L.tril_indices(8, 8)",
    "triu_indices": "L.triu_indices(8, 8)",
    "to": "x.to(L.float64)",
    "bfloat16": None,  # a CUDA-only dtype in adcuda
    "type": "x.type(L.float64)",
    "type_as": "x.type_as(ints)",
    "cuda": None,  # no GPU in a CPU run
    "pin_memory": None,  # needs a GPU runtime to pin with
    "is_pinned": "x.is_pinned()",
    # random
    "multinomial": "L.multinomial(prob_row, 4)",
    "gumbel_softmax": "F.gumbel_softmax(x)",
    "geometric_": "scratch().geometric_(0.5)",
    "bernoulli": "L.bernoulli(prob)",
    "bernoulli_": "scratch().bernoulli_(0.5)",
    "cauchy_": "scratch().cauchy_()",
    "exponential_": "scratch().exponential_()",
    "log_normal_": "scratch().log_normal_()",
    "normal_": "scratch().normal_()",
    "uniform_": "scratch().uniform_()",
    "random_": "scratch().random_(0, 8)",
    "normal": "L.normal(x, pos)",
    "poisson": "L.poisson(pos)",
    "randint_like": "L.randint_like(x, 8)",
    "alpha_dropout": "F.alpha_dropout(x, 0.5, True)",
    "feature_alpha_dropout": "F.feature_alpha_dropout(img, 0.5, True)",
    "rrelu": "F.rrelu(x, training=True)",
    # shape
    "unflatten": "L.unflatten(x, 1, (2, 4))",
    "unsqueeze": "L.unsqueeze(x, 0)",
    "transpose": "L.transpose(x, 0, 1)",
    "movedim": "L.movedim(x, 0, 1)",
    "broadcast_to": "L.broadcast_to(v, (8, 8))",
    "expand": "v.expand(8, 8)",
    "expand_as": "v.expand_as(x)",
    "flip": "L.flip(x, (0,))",
    "narrow": "L.narrow(x, 0, 2, 4)",
    "split": "L.split(x, 4)",
    "chunk": "L.chunk(x, 2)",
    "select": "L.select(x, 0, 3)",
    "pad": "F.pad(x, (1, 1))",
    "roll": "L.roll(x, 1)",
    "tile": "L.tile(x, (2,))",
    "repeat": "x.repeat(2, 1)",
    "tensor_split": "L.tensor_split(x, 2)",
    "hsplit": "L.hsplit(x, 2)",
    "vsplit": "L.vsplit(x, 2)",
    "dsplit": "L.dsplit(b3, 2)",
    "narrow_copy": "L.narrow_copy(x, 0, 2, 4)",
    "select_scatter": "L.select_scatter(x, v, 0, 0)",
    "slice_scatter": "L.slice_scatter(x, y[:2], 0, 0, 2)",
    "broadcast_shapes": "L.broadcast_shapes((8, 1), (1, 8))",
    "pixel_shuffle": "F.pixel_shuffle(img, 2)",
    "pixel_unshuffle": "F.pixel_unshuffle(img, 2)",
    "channel_shuffle": "F.channel_shuffle(img, 2)",
    "reshape": "L.reshape(x, (4, 16))",
    "view": "x.view(4, 16)",
    "view_as": "x.view_as(y)",
    "reshape_as": "x.reshape_as(y)",
    "permute": "L.permute(x, (1, 0))",
    "squeeze": "L.squeeze(col)",
    "unbind": "L.unbind(x)",
    "diag_embed": "L.diag_embed(v)",
    "diagonal": "L.diagonal(x)",
    "stack": "L.stack(rows32)",
    "cat": "L.cat(rows32)",
    "meshgrid": "L.meshgrid(v, v, indexing='ij')",
    "cartesian_prod": "L.cartesian_prod(v, v)",
    "block_diag": "L.block_diag(x, y)",
    "broadcast_tensors": "L.broadcast_tensors(x, v)",
    "atleast_1d": "L.atleast_1d(x)",
    "atleast_2d": "L.atleast_2d(v)",
    "atleast_3d": "L.atleast_3d(x)",
    "fold": "F.fold(cols, (4, 4), 2, stride=2)",
    "unfold": "x.unfold(0, 2, 2)",
    "repeat_interleave": "L.repeat_interleave(x, 2)",
    # indexing
    "getitem": "x[1:5]",
    "setitem": "setitem(scratch(), 3, v)",
    "index_put": "L.index_put(x, (idx,), v)",
    "gather": "L.gather(x, 1, idx2d)",
    "scatter_add": "L.scatter_add(x, 1, idx2d, y)",
    "index_select": "L.index_select(x, 0, idx)",
    "masked_fill": "L.masked_fill(x, mask, 0.0)",
    "one_hot": "F.one_hot(labels, 8)",
    "scatter": "L.scatter(x, 1, idx2d, y)",
    "scatter_reduce": "L.scatter_reduce(x, 1, idx2d, y, 'amax')",
    "masked_select": "L.masked_select(x, mask)",
    "index_add": "L.index_add(x, 0, idx, y[:3])",
    "index_copy": "L.index_copy(x, 0, idx, y[:3])",
    "index_fill": "L.index_fill(x, 0, idx, 0.0)",
    "take_along_dim": "L.take_along_dim(x, idx2d, 1)",
    "take": "L.take(x, idx)",
    "put": "L.put(x, idx, v[:3])",
    "masked_scatter": "L.masked_scatter(x, mask, y)",
    "fill_diagonal_": "scratch().fill_diagonal_(0.0)",
    "nonzero": "L.nonzero(mask)",
    "argwhere": "L.argwhere(mask)",
    "bincount": "L.bincount(labels)",
    "tril": "L.tril(x)",
    "triu": "L.triu(x)",
    # linear algebra
    "mv": "L.mv(x, v)",
    "mm": "L.mm(x, y)",
    "bmm": "L.bmm(b3, b3)",
    "matmul": "L.matmul(x, y)",
    "dot": "L.dot(v128, w128)",
    "inner": "L.inner(v, v)",
    "outer": "L.outer(v, v)",
    "linear": "F.linear(x, y, v)",
    "addmm": "L.addmm(x, x, y)",
    "baddbmm": "L.baddbmm(b3, b3, b3)",
    "addbmm": "L.addbmm(x, b3, b3)",
    "addmv": "L.addmv(v, x, v)",
    "einsum": "L.einsum('ij,jk->ik', x, y)",
    "cdist": "L.cdist(x, y)",
    "pairwise_distance": "F.pairwise_distance(x, y)",
    "cosine_similarity": "F.cosine_similarity(x, y)",
    "tensordot": "L.tensordot(x, y, 1)",
    "bilinear": "F.bilinear(x, y, b3[:, :, :8].expand(2, 8, 8).contiguous(), None)",
    "kron": "L.kron(v, v)",
    "cross": "L.cross(x3, y3, dim=1)",
    "trace": "L.trace(x)",
    "corrcoef": "L.corrcoef(x)",
    "cov": "L.cov(x)",
    "dist": "L.dist(x, y)",
    "pdist": "F.pdist(x)",
    # reductions
    "logsumexp": "L.logsumexp(x, 1)",
    "cumsum": "L.cumsum(x, 1)",
    "cumprod": "L.cumprod(x, 1)",
    "topk": "L.topk(x, 3)",
    "kthvalue": "L.kthvalue(x, 3)",
    "quantile": "L.quantile(x, 0.5)",
    "searchsorted": "L.searchsorted(sorted_v, v)",
    "bucketize": "L.bucketize(v, sorted_v)",
    "histc": "L.histc(x)",
    "unique": "L.unique(labels)",
    "all": "L.all(mask)",
    "any": "L.any(mask)",
    "count_nonzero": "L.count_nonzero(x)",
    # losses
    "mse_loss": "F.mse_loss(x, y)",
    "l1_loss": "F.l1_loss(x, y)",
    "binary_cross_entropy_with_logits": "F.binary_cross_entropy_with_logits(x, prob)",
    "cross_entropy": "F.cross_entropy(x, labels)",
    "nll_loss": "F.nll_loss(x, labels)",
    "smooth_l1_loss": "F.smooth_l1_loss(x, y)",
    "huber_loss": "F.huber_loss(x, y)",
    "binary_cross_entropy": "F.binary_cross_entropy(prob, prob2)",
    "kl_div": "F.kl_div(x, prob, reduction='batchmean')",
    "margin_ranking_loss": "F.margin_ranking_loss(v, w, signs)",
    "hinge_embedding_loss": "F.hinge_embedding_loss(x, sign_matrix)",
    "soft_margin_loss": "F.soft_margin_loss(x, sign_matrix)",
    "multilabel_soft_margin_loss": "F.multilabel_soft_margin_loss(x, prob)",
    "poisson_nll_loss": "F.poisson_nll_loss(x, pos)",
    "gaussian_nll_loss": "F.gaussian_nll_loss(x, y, pos)",
    "cosine_embedding_loss": "F.cosine_embedding_loss(x, y, signs)",
    "triplet_margin_loss": "F.triplet_margin_loss(x, y, pos)",
    "multi_margin_loss": "F.multi_margin_loss(x, labels)",
    "triplet_margin_with_distance_loss": "F.triplet_margin_with_distance_loss(x, y, pos)",
    # nn layers
    "scaled_dot_product_attention": "F.scaled_dot_product_attention(q4, q4, q4)",
    "conv2d": "F.conv2d(img, w_conv2d)",
    "conv1d": "F.conv1d(seq, w_conv1d)",
    "conv_transpose2d": "F.conv_transpose2d(img, w_conv2d.transpose(0, 1).contiguous())",
    "conv_transpose1d": "F.conv_transpose1d(seq, w_conv1d.transpose(0, 1).contiguous())",
    "embedding": "F.embedding(labels, x)",
    "embedding_bag": "F.embedding_bag(idx2d, x)",
    "layer_norm": "F.layer_norm(x, (8,))",
    "batch_norm": "F.batch_norm(img, running4(), running4(), training=True)",
    "instance_norm": "F.instance_norm(img)",
    "group_norm": "F.group_norm(img, 2)",
    "rms_norm": "F.rms_norm(x, (8,))",
    "local_response_norm": "F.local_response_norm(img, 2)",
    "normalize": "F.normalize(x)",
    "max_pool2d": "F.max_pool2d(img, 2)",
    "max_pool1d": "F.max_pool1d(seq, 2)",
    "adaptive_max_pool2d": "F.adaptive_max_pool2d(img, 4)",
    "avg_pool2d": "F.avg_pool2d(img, 2)",
    "avg_pool1d": "F.avg_pool1d(seq, 2)",
    "adaptive_avg_pool2d": "F.adaptive_avg_pool2d(img, 4)",
    "adaptive_avg_pool1d": "F.adaptive_avg_pool1d(seq, 4)",
    "adaptive_max_pool1d": "F.adaptive_max_pool1d(seq, 4)",
    "lp_pool1d": "F.lp_pool1d(seq, 2.0, 2)",
    "lp_pool2d": "F.lp_pool2d(img, 2.0, 2)",
    "max_unpool1d": "F.max_unpool1d(*F.max_pool1d(seq, 2, return_indices=True), 2)",
    "max_unpool2d": "F.max_unpool2d(*F.max_pool2d(img, 2, return_indices=True), 2)",
    "affine_grid": "F.affine_grid(theta, (2, 4, 8, 8), align_corners=False)",
    "interpolate": "F.interpolate(img, scale_factor=2)",
    "dropout": "F.dropout(x, 0.5)",
    "dropout1d": "F.dropout1d(seq, 0.5)",
    "dropout2d": "F.dropout2d(img, 0.5)",
    "dropout3d": "F.dropout3d(img, 0.5)",
    "softmax": "F.softmax(x, 1)",
    "log_softmax": "F.log_softmax(x, 1)",
    "softmin": "F.softmin(x, 1)",
    "glu": "F.glu(x)",
    # in place
    "fill_": "scratch().fill_(1.0)",
    "copy_": "scratch().copy_(y)",
    "zero_": "scratch().zero_()",
    # shapes, scans and windows (PyTorch's names added with the conformance work)
    "scalar_tensor": "L.scalar_tensor(2.5)",
    "swapaxes": "L.swapaxes(x, 0, 1)",
    "as_strided": "L.as_strided(x, (4, 4), (8, 1))",
    "diagonal_scatter": "L.diagonal_scatter(x, v)",
    "unravel_index": "L.unravel_index(idx, (8, 8))",
    "renorm": "L.renorm(x, 2, 0, 1.0)",
    "trapezoid": "L.trapezoid(x)",
    "cumulative_trapezoid": "L.cumulative_trapezoid(x)",
    "cummax": "L.cummax(x, 1)",
    "cummin": "L.cummin(x, 1)",
    "logcumsumexp": "L.logcumsumexp(x, 1)",
    "addr": "L.addr(x, v, w)",
    "vander": "L.vander(v)",
    "hann_window": "L.hann_window(8)",
    "hamming_window": "L.hamming_window(8)",
    "blackman_window": "L.blackman_window(8)",
    "bartlett_window": "L.bartlett_window(8)",
    "kaiser_window": "L.kaiser_window(8)",
    "combinations": "L.combinations(v)",
    "vdot": "L.vdot(v128, w128)",
    # comparisons of tensors as a whole
    "allclose": "L.allclose(x, y)",
    "isclose": "L.isclose(x, y)",
    "equal": "L.equal(x, y)",
}

# The issue's slow composites and the index forms a program uses most: rows beside the ops' own.
EXTRA = {
    "stack of 32 (8,) tensors": "L.stack(rows32)",
    "dot of two 128-vectors": "L.dot(v128, w128)",
    "index write s[i] = v": "setitem(scratch(), 3, v)",
    "slice with 0-d tensor bounds": "x[s1:s5]",
    "index with an int": "x[3]",
    "index with an int tensor": "x[idx]",
    "index with a bool mask": "x[mask]",
}


def _public(op):
    return not op.name.startswith("_") and any(op.forms[form] for form in op.forms)


def _made_call(op):
    """The call made from ``op``'s signature and first public form, or None where it cannot be made."""
    required = [
        p.name
        for p in op.signature.parameters.values()
        if p.default is inspect.Parameter.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
    ]
    if not required or any(name not in MADE_ARGUMENTS for name in required):
        return None
    args = [MADE_ARGUMENTS[name] for name in required]
    # the method first, then nn.functional: the forms PyTorch has wherever adcuda has them (adcuda also
    # has some of nn.functional's and Tensor's names as functions, which PyTorch has not)
    if op.forms["method"] and args[0] == "x":
        return f"{args[0]}.{op.forms['method'][0]}({', '.join(args[1:])})"
    if op.forms["functional"]:
        return f"F.{op.forms['functional'][0]}({', '.join(args)})"
    if op.forms["function"]:
        return f"L.{op.forms['function'][0]}({', '.join(args)})"
    if op.forms["property"] and len(args) == 1:
        return f"{args[0]}.{op.forms['property'][0]}"
    return None


def specs():
    """``{row name: call text}`` for every public op (None: it cannot run in a CPU run), then EXTRA."""
    from adcuda.ops import registry

    out = {}
    for op in registry.all_ops():
        if _public(op):
            out[op.name] = SPECS[op.name] if op.name in SPECS else _made_call(op)
    out.update(EXTRA)
    return out


def uncovered():
    """The public ops with neither a spec nor a call made from their signature."""
    from adcuda.ops import registry

    return [op.name for op in registry.all_ops() if _public(op) and op.name not in SPECS and _made_call(op) is None]


def namespace(lib):
    """The inputs every call reads, made for ``lib`` from the same NumPy values."""
    rng = np.random.default_rng(0)

    def t(a):
        return lib.tensor(np.ascontiguousarray(a))

    f32 = np.float32
    x_np = rng.standard_normal((8, 8)).astype(f32)
    labels_np = rng.integers(0, 8, 8)
    ns = {
        "L": lib,
        "F": lib.nn.functional,
        "x": t(x_np),
        "y": t(rng.standard_normal((8, 8)).astype(f32)),
        "pos": t(rng.random((8, 8)).astype(f32) + 0.5),
        "prob": t(rng.uniform(0.1, 0.9, (8, 8)).astype(f32)),
        "prob2": t(rng.uniform(0.1, 0.9, (8, 8)).astype(f32)),
        "prob_row": t(rng.uniform(0.1, 0.9, 8).astype(f32)),
        "v": t(rng.standard_normal(8).astype(f32)),
        "w": t(rng.standard_normal(8).astype(f32)),
        "w1": t(np.array([0.25], f32)),
        "col": t(rng.standard_normal((8, 1)).astype(f32)),
        "v128": t(rng.standard_normal(128).astype(f32)),
        "w128": t(rng.standard_normal(128).astype(f32)),
        "x3": t(rng.standard_normal((8, 3)).astype(f32)),
        "y3": t(rng.standard_normal((8, 3)).astype(f32)),
        "b3": t(rng.standard_normal((2, 8, 8)).astype(f32)),
        "img": t(rng.standard_normal((2, 4, 8, 8)).astype(f32)),
        "seq": t(rng.standard_normal((2, 4, 16)).astype(f32)),
        "q4": t(rng.standard_normal((2, 2, 8, 8)).astype(f32)),
        "cols": t(rng.standard_normal((2, 16, 4)).astype(f32)),
        "theta": t(rng.standard_normal((2, 2, 3)).astype(f32)),
        "w_conv2d": t(rng.standard_normal((4, 4, 3, 3)).astype(f32)),
        "w_conv1d": t(rng.standard_normal((4, 4, 3)).astype(f32)),
        "ints": t(rng.integers(0, 8, (8, 8))),
        "ints2": t(rng.integers(0, 8, (8, 8))),
        "labels": t(labels_np),
        "idx": t(np.array([0, 5, 2])),
        "idx2d": t(rng.integers(0, 8, (8, 8))),
        "mask": t(x_np > 0),
        "signs": t(np.sign(rng.standard_normal(8)).astype(f32)),
        "sign_matrix": t(np.sign(rng.standard_normal((8, 8))).astype(f32)),
        "sorted_v": t(np.sort(rng.standard_normal(8)).astype(f32)),
        "array": np.ascontiguousarray(x_np),
        "data_list": x_np.tolist(),
        "rows32": [t(rng.standard_normal(8).astype(f32)) for _ in range(32)],
        "s1": lib.tensor(1),
        "s5": lib.tensor(5),
    }
    scratch_tensor = lib.zeros(8, 8)
    ns["scratch"] = lambda: scratch_tensor  # what an in-place call writes into (not the shared inputs)
    ns["running4"] = lambda: lib.zeros(4)
    ns["setitem"] = _setitem
    return ns


def _setitem(target, key, value):
    target[key] = value


def calls(lib):
    """``{row name: a function of no arguments}`` for ``lib``; the rows that cannot run here are left out."""
    ns = namespace(lib)
    out = {}
    for name, text in specs().items():
        if text is not None:
            out[name] = eval(f"lambda: {text}", ns)  # noqa: S307 (the specs above, not outside input)
    return out
