"""``adcuda.amp``: mixed precision. ``autocast`` runs the matmul-class ops in float16 and keeps the
numerically touchy ones (softmax, losses, layer norm) in float32; ``GradScaler`` scales the loss so
float16 gradients do not underflow, and skips the steps where they overflow. Pair them with an
optimizer built with ``master_weights=True`` to train float16 weights through float32 masters."""

from .autocast import autocast, get_autocast_dtype, is_autocast_enabled
from .grad_scaler import GradScaler, GradScalerError, GradScalerValueError

__all__ = [
    "autocast",
    "get_autocast_dtype",
    "is_autocast_enabled",
    "GradScaler",
    "GradScalerError",
    "GradScalerValueError",
]
