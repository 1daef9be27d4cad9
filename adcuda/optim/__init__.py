"""``adcuda.optim``: optimizers (``SGD Adam AdamW``) and learning-rate schedulers (``lr_scheduler``)."""
from .optimizer import Optimizer, OptimizerError
from .sgd import SGD
from .adam import Adam, AdamW
from . import lr_scheduler

__all__ = ["Optimizer", "OptimizerError", "SGD", "Adam", "AdamW", "lr_scheduler"]
