"""The CUDA backend: the primitives of ``adcuda.backends`` over ``adcuda._C.DeviceArray``.

One module per kernel family, named as the CPU backend's module: ``<family>.py`` holds the primitives
over ``kernels/<family>.cu``, whose bindings are ``kernels/bindings/<family>.cpp``; ``storage.py``
holds the storage, view and copy primitives (the runtime's own kernels, kernels/runtime/copy.cu).
This package re-exports every primitive; asking for one that this build does not have raises
``KernelNotBuiltError`` (a ``DeviceError``) naming it. ``adcuda.backends.cuda`` is this package in
every build: in one without CUDA (``is_built()`` is False) it has no primitives, only ``is_built`` and
PyTorch's ``matmul`` flags (``adcuda/backends/flags.py``).

Conventions: arrays are created on the calling thread's current CUDA device (callers that target
another device select it first, ``with adcuda.cuda.device(i):``) and every kernel runs on the thread's
current stream; the runtime orders streams by events where arrays cross them. Host<->device copies
go through the pinned-memory pool (``adcuda.backends.pinned_host``).
"""

from ... import _native
from ...errors import DeviceError
from ..flags import expose_matmul_flags
from ..seam import PRIMITIVES

name = "cuda"


def is_built() -> bool:
    """Whether this adcuda was built with CUDA (PyTorch's ``torch.backends.cuda.is_built``): only then
    does this package have its primitives."""
    return hasattr(_native._C, "DeviceArray")


class KernelNotBuiltError(DeviceError, AttributeError):
    """A primitive this build has no CUDA kernel for. Also an AttributeError, so ``hasattr`` and
    ``getattr(module, name, default)`` see the primitive as absent."""


def __getattr__(primitive):
    if primitive in PRIMITIVES:
        why = "has no CUDA kernel for it yet" if is_built() else "was built without CUDA"
        raise KernelNotBuiltError(
            f"{primitive}: this adcuda build {why}; move the tensor to the CPU (.cpu()) to run it there"
        )
    raise AttributeError(f"module {__name__!r} has no attribute {primitive!r}")


if is_built():
    from .attention import *  # noqa: F401,F403 (attention, attention_backward, attention_dropout_mask)
    from .convolution import *  # noqa: F401,F403 (conv2d, conv2d_backward_input, conv2d_backward_weight)
    from .elementwise import *  # noqa: F401,F403 (unary, binary, unary_backward, where, clamp)
    from .embedding import *  # noqa: F401,F403 (embedding, embedding_backward)
    from .gemm import *  # noqa: F401,F403 (matmul)
    from .index import *  # noqa: F401,F403 (index, index_put_, gather, scatter_add)
    from .index import deterministic_indexing, set_deterministic_indexing  # noqa: F401 (a setting, not a primitive)
    from .layout import *  # noqa: F401,F403 (cat, tril, triu)
    from .norm import *  # noqa: F401,F403 (layer_norm, batch_norm and their backwards)
    from .optim import *  # noqa: F401,F403 (sgd_step_, adam_step_, global_norm, loss scaling)
    from .pooling import *  # noqa: F401,F403 (max_pool2d, adaptive_max_pool2d, max_pool2d_backward)
    from .random import *  # noqa: F401,F403 (rand, randn, randint, bernoulli, dropout, dropout_backward)
    from .recurrent import *  # noqa: F401,F403 (lstm_cell, gru_cell and their backwards)
    from .reduce import *  # noqa: F401,F403 (reduce, argreduce, var, logsumexp)
    from .resample import *  # noqa: F401,F403 (interpolate_nearest, interpolate_bilinear, pad, backwards)
    from .softmax_loss import *  # noqa: F401,F403 (softmax, the fused classifier and their backwards)
    from .sort import *  # noqa: F401,F403 (sort, cumsum)
    from .sparse import *  # noqa: F401,F403 (coo_to_csr, spmm, sddmm)
    from .storage import *  # noqa: F401,F403 (from_numpy ... shares_memory: the runtime's copies, and views)
else:

    def matmul(*args, **kwargs):  # type: ignore[no-redef]  # the stand-in of a build without CUDA, any arguments
        """The CUDA matmul primitive of a build without CUDA: it only carries PyTorch's flags."""
        raise KernelNotBuiltError("matmul: this adcuda build was built without CUDA; use device='cpu'")


# ``adcuda.backends.cuda.matmul.allow_tf32`` and the rest of PyTorch's flags, in every build
expose_matmul_flags(matmul)
