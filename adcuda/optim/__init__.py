"""``adcuda.optim``: optimizers (``SGD Adam AdamW``) and learning-rate schedulers (``lr_scheduler``)."""
from . import lr_scheduler
from .adam import Adam, AdamW
from .optimizer import Optimizer, OptimizerError
from .sgd import SGD

__all__ = ["Optimizer", "OptimizerError", "SGD", "Adam", "AdamW", "lr_scheduler"]
