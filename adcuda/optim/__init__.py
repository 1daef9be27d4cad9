"""``adcuda.optim``: optimizers (``SGD Adam AdamW Adagrad RMSprop Adadelta LBFGS``) and learning-rate
schedulers (``lr_scheduler``)."""

from . import lr_scheduler
from .adadelta import Adadelta
from .adagrad import Adagrad
from .adam import Adam, AdamW
from .lbfgs import LBFGS
from .optimizer import Optimizer, OptimizerError
from .rmsprop import RMSprop
from .sgd import SGD

__all__ = [
    "Optimizer",
    "OptimizerError",
    "SGD",
    "Adam",
    "AdamW",
    "Adagrad",
    "RMSprop",
    "Adadelta",
    "LBFGS",
    "lr_scheduler",
]
