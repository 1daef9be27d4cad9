"""PyTorch's ``torch.special`` names for adcuda's special functions (the ops themselves are declared
in adcuda/ops/special.py and elementwise.py)."""

from .ops.elementwise import erf, exp2, expm1, log1p, sigmoid, xlogy
from .ops.reduce import logsumexp
from .ops.softmax_loss import log_softmax, softmax
from .ops.special import digamma, erfinv, i0, lgamma, mvlgamma, polygamma, xlog1py

__all__ = [
    "digamma",
    "erf",
    "erfinv",
    "exp2",
    "expit",
    "expm1",
    "gammaln",
    "i0",
    "log1p",
    "log_softmax",
    "logsumexp",
    "multigammaln",
    "polygamma",
    "psi",
    "softmax",
    "xlog1py",
    "xlogy",
]

gammaln = lgamma
psi = digamma
multigammaln = mvlgamma
expit = sigmoid
