"""The primitive seam's vocabulary: the names every backend implements (``PRIMITIVES``, each
documented by one row of the table in ``adcuda/backends/__init__.py``) and the types their
signatures are annotated with, the same on both sides (tests/test_backend_seam.py compares them).
"""

import inspect
from collections.abc import Sequence
from types import EllipsisType
from typing import Any, Protocol

import numpy as np
from numpy.typing import ArrayLike

from ..dtypes import dtype as DType

__all__ = [
    "PRIMITIVES",
    "BackendArray",
    "DType",
    "Shape",
    "Axes",
    "Scalar",
    "ArrayOrScalar",
    "Arrays",
    "BasicKey",
    "IndexKey",
    "ArrayLike",
    "Scratch",
    "CPU_REPLAY_KEYWORDS",
    "seam_signature",
]

PRIMITIVES = (
    "from_numpy",
    "to_numpy",
    "empty",
    "full",
    "arange",
    "dtype_of",
    "shape_of",
    "astype",
    "contiguous",
    "copy_",
    "view",
    "permute",
    "expand",
    "slice",
    "flip",
    "as_strided",
    "shares_memory",
    "unary",
    "binary",
    "unary_backward",
    "where",
    "clamp",
    "reduce",
    "argreduce",
    "var",
    "logsumexp",
    "sort",
    "cumsum",
    "index",
    "index_put_",
    "gather",
    "scatter_add",
    "cat",
    "tril",
    "triu",
    "matmul",
    "softmax",
    "softmax_backward",
    "classifier_loss",
    "classifier_loss_backward",
    "layer_norm",
    "layer_norm_backward",
    "attention",
    "attention_backward",
    "attention_dropout_mask",
    "rand",
    "randn",
    "randint",
    "bernoulli",
    "sgd_step_",
    "adam_step_",
    "unscale_and_check_",
    "update_scale_",
    "embedding",
    "embedding_backward",
    "dropout",
    "dropout_backward",
    "global_norm",
    "cumprod",
    "scatter_reduce",
    "conv2d",
    "conv2d_backward_input",
    "conv2d_backward_weight",
    "max_pool2d",
    "adaptive_max_pool2d",
    "max_pool2d_backward",
    # batch norm and recurrent cells (issue 15)
    "batch_norm",
    "batch_norm_backward",
    "lstm_cell",
    "lstm_cell_backward",
    "gru_cell",
    "gru_cell_backward",
    "lstm_layer",
    "lstm_layer_backward",
    # fused RMS norm and group norm (issue 15, CUDA kernels)
    "rms_norm",
    "rms_norm_backward",
    "group_norm",
    "group_norm_backward",
    # average pooling kernels (issue 15)
    "avg_pool2d",
    "avg_pool2d_backward",
    "adaptive_avg_pool2d",
    "adaptive_avg_pool2d_backward",
    # resampling kernels: interpolate and pad (issue 15)
    "interpolate_nearest",
    "interpolate_nearest_backward",
    "interpolate_bilinear",
    "interpolate_bilinear_backward",
    "pad",
    "pad_backward",
    # sparse COO tensors (issue 28): CSR products
    "coo_to_csr",
    "spmm",
    "sddmm",
)


class BackendArray(Protocol):
    """A backend's array: ``numpy.ndarray`` on the CPU, ``adcuda._C.DeviceArray`` on CUDA. Callers read
    only these, which both have; everything else goes through the primitives (``dtype_of``,
    ``shape_of``...), or through ``CPUArray``/``CUDAArray`` where a caller has checked the device."""

    @property
    def shape(self) -> tuple[int, ...]: ...

    @property
    def ndim(self) -> int: ...

    @property
    def size(self) -> int: ...

    @property
    def itemsize(self) -> int: ...

    @property
    def strides(self) -> tuple[int, ...]:
        """In bytes, as NumPy's."""

    @property
    def dtype(self) -> Any:
        """The backend's own dtype object (a ``numpy.dtype``, or the native module's, which has no type
        stubs, hence ``Any``): ``dtype_of`` gives adcuda's."""


CPUArray = np.ndarray
"""The CPU backend's array, for type checkers (where a caller has checked the device is the CPU)."""
CUDAArray = Any
"""The CUDA backend's array (``adcuda._C.DeviceArray``), for type checkers: the native module has no
type stubs, so its methods are not checked."""


Shape = tuple[int, ...]
"""Sizes of the dims; also a list, or one int, as NumPy takes them."""
Axes = tuple[int, ...]
"""Dims of an array, negative ones counted from the end (a 0-d array has none)."""
Scalar = bool | int | float
"""A Python scalar (NumPy scalars act as Python ones); an int must fit an integer dtype it is taken in."""
ArrayOrScalar = BackendArray | Scalar
Arrays = Sequence[BackendArray]
BasicKey = tuple[int | slice | None | EllipsisType, ...]
"""A view's key: ints (negative counted from the end), slices, None (a new dim of size 1), one Ellipsis."""
IndexKey = tuple[int | bool | slice | None | EllipsisType | BackendArray, ...]
"""NumPy's advanced indexing: a BasicKey's items, integer index arrays and boolean masks."""


class Scratch(Protocol):
    """Reusable temporaries for a CPU primitive: ``scratch(shape, dtype, k)`` is an array of that shape
    and dtype the primitive may overwrite, its ``k``-th of that layout (one needing two takes k = 0
    and 1); it may hold anything and may be handed out again after the primitive returns. Graph
    capture's replay passes one that keeps its arrays across replays; ``None`` makes new ones."""

    def __call__(self, shape: Shape, dtype: np.dtype, k: int = 0) -> np.ndarray: ...


# Keyword-only parameters that only the CPU backend's primitives take, beyond the table in
# adcuda/backends/__init__.py: ``out`` (an array of the result's shape and dtype to write it into; it
# may be an operand), ``scratch`` (a ``Scratch``), and what a forward keeps for its backward to read
# instead of computing it again (attention's ``probs``, layer_norm's ``xhat``, gelu_tanh's ``inner``: the
# primitives' docstrings say what). Only graph capture's CPU replay passes them
# (adcuda/capture/program.py calls the CPU backend alone); eager dispatch never does, and the CUDA
# primitives do not take them (tests/test_backend_seam.py compares the signatures without them).
CPU_REPLAY_KEYWORDS = {
    "unary": ("out", "scratch", "inner"),
    "unary_backward": ("out", "scratch", "inner"),
    "sgd_step_": ("scratch",),
    "adam_step_": ("scratch",),
    "attention": ("probs",),
    "attention_backward": ("probs",),
    "layer_norm": ("xhat",),
    "layer_norm_backward": ("xhat",),
}


def seam_signature(name: str, primitive) -> inspect.Signature:
    """``primitive``'s (backend primitive ``name``'s) signature as the seam's table writes it, without
    the CPU replay's keywords: what both backends take, and what a traced call records."""
    signature = inspect.signature(primitive)
    extras = CPU_REPLAY_KEYWORDS.get(name, ())
    return signature.replace(parameters=[p for p in signature.parameters.values() if p.name not in extras])
