"""``adcuda.cuda.amp``: PyTorch's older spelling of ``adcuda.amp`` for CUDA, still common in scripts
(``torch.cuda.amp.autocast()``, ``torch.cuda.amp.GradScaler()``). Both are ``adcuda.amp``'s, with
``device_type``/``device`` fixed to ``"cuda"``; without a GPU autocast warns and affects nothing (there
are no CUDA tensors), as ``adcuda.amp.autocast("cuda")`` does.

It sits above ``adcuda.cuda`` (adcuda.amp itself uses adcuda.cuda), so ``adcuda/cuda/__init__.py``
does not import it; ``adcuda`` does, which makes ``adcuda.cuda.amp`` there as in PyTorch.
"""

from .. import amp as _amp
from ..dtypes import float16


class autocast(_amp.autocast):
    """``autocast(enabled=True, dtype=float16, cache_enabled=True)`` on CUDA."""

    def __init__(self, enabled=True, dtype=float16, cache_enabled=True):
        super().__init__("cuda", dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)


class GradScaler(_amp.GradScaler):
    """``GradScaler(init_scale=2.0**16, growth_factor=2.0, backoff_factor=0.5, growth_interval=2000,
    enabled=True)`` for CUDA tensors."""

    def __init__(self, init_scale=2.0**16, growth_factor=2.0, backoff_factor=0.5, growth_interval=2000, enabled=True):
        super().__init__("cuda", init_scale, growth_factor, backoff_factor, growth_interval, enabled)


__all__ = ["autocast", "GradScaler"]
