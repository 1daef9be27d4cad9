"""``adcuda.optim``: optimizers (``SGD Adam AdamW Adagrad RMSprop Adadelta LBFGS Adamax NAdam RAdam``) and learning-rate
schedulers (``lr_scheduler``)."""

from . import lr_scheduler
from .adadelta import Adadelta
from .adagrad import Adagrad
from .adam import Adam, AdamW
from .adamax import Adamax
from .lbfgs import LBFGS
from .nadam import NAdam
from .optimizer import Optimizer, OptimizerError
from .radam import RAdam
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
    "Adamax",
    "NAdam",
    "RAdam",
    "lr_scheduler",
]
