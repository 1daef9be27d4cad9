"""The primitive seam's vocabulary: the names every backend implements (``PRIMITIVES``, each
documented in the table of ``adcuda/backends/__init__.py``) and the types in their signatures, which
both ``cpu/`` and ``cuda/`` annotate with, so that one test can compare the two sides.
"""
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
