"""The layers of ``adcuda.nn``, one family per module."""
from .activation import GELU, LeakyReLU, LogSoftmax, ReLU, Sigmoid, SiLU, Softmax, Tanh
from .attention import MultiheadAttention
from .container import ModuleDict, ModuleList, Sequential
from .dropout import Dropout
from .flatten import Flatten, Unflatten
from .linear import Identity, Linear
from .loss import (
    BCELoss,
    BCEWithLogitsLoss,
    CrossEntropyLoss,
    HuberLoss,
    KLDivLoss,
    L1Loss,
    MSELoss,
    NLLLoss,
    SmoothL1Loss,
)
from .module import Module
from .normalization import LayerNorm
from .sparse import Embedding

__all__ = ["Module", "Sequential", "ModuleList", "ModuleDict", "Identity", "Linear", "ReLU", "LeakyReLU",
           "GELU", "SiLU", "Sigmoid", "Tanh", "Softmax", "LogSoftmax", "MultiheadAttention", "Dropout",
           "Flatten", "Unflatten", "CrossEntropyLoss", "NLLLoss", "MSELoss", "L1Loss", "BCEWithLogitsLoss",
           "LayerNorm", "Embedding", "BCELoss", "SmoothL1Loss", "HuberLoss", "KLDivLoss"]
