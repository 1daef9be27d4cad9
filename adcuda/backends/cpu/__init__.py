"""The CPU backend: every primitive of ``adcuda.backends`` over NumPy arrays.

fp32 compute: float16 arrays are widened to float32 for the arithmetic and narrowed on the way
out; float64 is kept (gradcheck needs it). This package is also the oracle the CUDA kernels are
tested against, so it favours clarity and exactness over cleverness.

One module per kernel family, named as the CUDA backend's module and ``kernels/<family>.cu``
(``storage`` is the runtime's copies and views); this package re-exports every primitive.
"""

import warnings

name = "cpu"

# NumPy reports floating-point exceptions (0 * inf, overflow to inf, float16 overflow on a cast) as
# RuntimeWarnings attributed to the calling module; PyTorch is silent about them, and wrapping every
# fast-path call in np.errstate would cost about 1 us. A filter scoped to this package costs nothing
# until such a warning is raised (its module pattern matches the start of the module's name, so it
# covers every module of the package).
warnings.filterwarnings("ignore", category=RuntimeWarning, module=__name__)

from ._heap import keep_freed_arrays_in_heap  # noqa: E402

# NumPy's temporaries of a few hundred KiB would otherwise each page-fault fresh memory in (_heap.py)
HEAP_TUNED = keep_freed_arrays_in_heap()

from .attention import *  # noqa: E402,F401,F403 (attention, attention_backward, attention_dropout_mask)
from .convolution import *  # noqa: E402,F401,F403 (conv2d, conv2d_backward_input, conv2d_backward_weight)
from .elementwise import *  # noqa: E402,F401,F403 (unary, binary, unary_backward, where, clamp)
from .embedding import *  # noqa: E402,F401,F403 (embedding, embedding_backward)
from .gemm import *  # noqa: E402,F401,F403 (matmul)
from .index import *  # noqa: E402,F401,F403 (index, index_put_, gather, scatter_add)
from .layout import *  # noqa: E402,F401,F403 (cat, tril, triu)
from .norm import *  # noqa: E402,F401,F403 (layer_norm, batch_norm and their backwards)
from .optim import *  # noqa: E402,F401,F403 (sgd_step_, adam_step_, global_norm, loss scaling)
from .pooling import *  # noqa: E402,F401,F403 (max_pool2d, adaptive_max_pool2d, max_pool2d_backward)
from .random import *  # noqa: E402,F401,F403 (rand, randn, randint, bernoulli, dropout, dropout_backward)
from .recurrent import *  # noqa: E402,F401,F403 (lstm_cell, gru_cell and their backwards)
from .reduce import *  # noqa: E402,F401,F403 (reduce, argreduce, var, logsumexp)
from .resample import *  # noqa: E402,F401,F403 (interpolate_nearest, interpolate_bilinear, pad, backwards)
from .softmax_loss import *  # noqa: E402,F401,F403 (softmax, the fused classifier and their backwards)
from .sort import *  # noqa: E402,F401,F403 (sort, cumsum)
from .sparse import *  # noqa: E402,F401,F403 (coo_to_csr, spmm, sddmm)
from .storage import *  # noqa: E402,F401,F403 (from_numpy ... shares_memory: copies and views)
