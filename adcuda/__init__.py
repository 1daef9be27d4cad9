"""adcuda: a CUDA-accelerated automatic-differentiation runtime with PyTorch's names.

``import adcuda as torch`` runs small PyTorch training scripts; without a usable GPU everything runs on
the fp32 CPU fallback (see ``adcuda.info()`` for why).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

__version__ = "0.1.0"

from . import accelerator, autograd, backends, cuda
from . import dtypes as _dtypes
from . import ops as _ops
from ._info import info
from .autograd import (
    enable_grad,
    inference_mode,
    is_grad_enabled,
    is_inference_mode_enabled,
    no_grad,
    set_grad_enabled,
)
from .backends.cpu.threads import get_num_interop_threads, get_num_threads, set_num_interop_threads, set_num_threads
from .cuda import amp as _cuda_amp  # noqa: F401 (makes adcuda.cuda.amp, as torch.cuda.amp)
from .device import device
from .dtypes import (  # noqa: A004
    bfloat16,
    double,
    dtype,
    finfo,
    float,
    float16,
    float32,
    float64,
    get_default_dtype,
    half,
    iinfo,
    int,
    int32,
    int64,
    long,
    set_default_dtype,
)
from .dtypes import bool_ as bool
from .errors import AdcudaError, AutogradError, DeviceError, DTypeError, IndexOutOfRangeError, ShapeError
from .errors import InvalidArgumentError as _InvalidArgumentError
from .layouts import layout, sparse_coo, strided
from .ops.factories import (
    BFloat16Tensor,
    BoolTensor,
    DoubleTensor,
    FloatTensor,
    HalfTensor,
    IntTensor,
    LongTensor,
)
from .ops.sparse import sparse_coo_tensor, spmm
from .random import Generator, default_generator, get_rng_state, initial_seed, manual_seed, seed, set_rng_state
from .tensor import Size, Tensor

if TYPE_CHECKING:
    import builtins  # bool, int and float name dtypes here

    from ._op_functions import *  # noqa: F403 (the op functions made below, for type checkers: scripts/gen_type_stubs.py)
    from .types import Any

# adcuda.add, adcuda.sum, adcuda.zeros, ...: every op declared with a function form (adcuda/ops/)
globals().update(_ops.functions())


def is_tensor(obj: Any) -> builtins.bool:
    return isinstance(obj, Tensor)


def _tensor_argument(name, input):
    """``input``, which must be a Tensor (PyTorch's TypeError for another argument, as an adcuda error)."""
    if not isinstance(input, Tensor):
        raise DTypeError(f"{name}: argument 'input' must be Tensor, not {type(input).__name__}")
    return input


def numel(input: Tensor) -> builtins.int:
    return _tensor_argument("numel", input).numel()


def is_floating_point(input: Tensor) -> builtins.bool:
    return _tensor_argument("is_floating_point", input).dtype.is_floating_point


# ------------------------------------------------------------------------------------------------
# More of PyTorch's top-level names (issue 15)
def is_complex(input: Tensor) -> builtins.bool:
    return _tensor_argument("is_complex", input).is_complex()


_float32_matmul_precision = "highest"


def set_float32_matmul_precision(precision: str) -> None:
    """Accepted as in PyTorch ('highest', 'high' or 'medium'), and mirrored into
    ``backends.cuda.matmul.allow_tf32`` as PyTorch does; adcuda's float32 matmuls stay full fp32
    whatever it says (adcuda/backends/flags.py)."""
    global _float32_matmul_precision
    if precision not in ("highest", "high", "medium"):
        raise _InvalidArgumentError(
            f"set_float32_matmul_precision: expected 'highest', 'high' or 'medium', got {precision!r}"
        )
    _float32_matmul_precision = precision
    backends.cuda.matmul.allow_tf32 = precision != "highest"


def get_float32_matmul_precision() -> str:
    return _float32_matmul_precision


# Parts that load on first use (``__getattr__``), so ``import adcuda`` stays fast: name -> (module,
# attribute; None for the module itself). scripts/gen_api_reference.py lists these names from here.
_LOADED_ON_FIRST_USE = {
    **{name: (f".{name}", None) for name in ("nn", "optim", "utils", "amp", "profiler", "distributed", "data")},
    **{name: (f".{name}", None) for name in ("onnx", "export")},  # the exporters (adcuda/export/, adcuda/onnx/)
    "init_cuda_context": (".cuda", "init_cuda_context"),
    "save": (".serialization", "save"),
    "load": (".serialization", "load"),
    "serialization": (".serialization", None),  # torch.serialization.safe_globals and the rest
    "autocast": (".amp", "autocast"),
    "compile": (".capture", "compile"),  # graph capture and replay (adcuda/capture/)
    # more of PyTorch's names (issue 15): torch.linalg's norms and products, torch.testing's assert_close
    "linalg": (".linalg", None),
    "testing": (".testing", None),
    # torch.distributions and torch.special's names (issue 28)
    "distributions": (".distributions", None),
    "special": (".special", None),
    # sparse COO tensors (issue 28): torch.sparse's mm and sum
    "sparse": (".sparse", None),
}


def __getattr__(name: str) -> Any:
    if name not in _LOADED_ON_FIRST_USE:
        raise AttributeError(f"module 'adcuda' has no attribute {name!r}")
    module, attribute = _LOADED_ON_FIRST_USE[name]
    loaded = importlib.import_module(module, __name__)
    return loaded if attribute is None else getattr(loaded, attribute)


if __import__("os").environ.get("ADCUDA_NVTX", "").strip() not in ("", "0"):
    # NVTX ranges for the whole run, for Nsight; the profiler loads only when asked for
    from .profiler.nvtx_ranges import enable_from_environment as _enable_nvtx

    _enable_nvtx()
