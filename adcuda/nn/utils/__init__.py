"""``adcuda.nn.utils``: training helpers that act on parameters' gradients."""
from .clip_grad import NonFiniteNormError, clip_grad_norm_, clip_grad_value_

__all__ = ["clip_grad_norm_", "clip_grad_value_", "NonFiniteNormError"]
