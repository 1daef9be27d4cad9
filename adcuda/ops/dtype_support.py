"""Which dtypes an op is defined for: PyTorch's rule, declared with the op and checked once.

An op declares what its first tensor argument may be with ``@op(..., dtypes=FLOATING)``, or, for an
op whose operands are promoted together first, what their promoted dtype may be
(``dtypes=FLOATING.of("input", "target")``: mse_loss of an int and a float tensor is computed in
float, of two int tensors refused); the dispatch point (every form: function, method, operator,
in-place) checks it before the forward runs and raises UnsupportedDTypeError naming the op and the
dtype, as PyTorch refuses ``abs`` of a bool tensor ("'abs_cpu' not implemented for 'Bool'") or
``gelu`` of an integer one. An op without the declaration takes every dtype its forward takes.
"""

from .. import dtypes as dt
from ..errors import UnsupportedDTypeError
from ..tensor import Tensor


class Takes:
    """The dtypes an op's first tensor argument may have (``accepts(dtype)``), described for the error
    message, or a message of the op's own (PyTorch's wording, with the op and dtype filled in)."""

    __slots__ = ("description", "rejected", "message", "operands")

    def __init__(self, description, accepts, message=None, operands=()):
        self.description = description
        self.rejected = frozenset(d for d in dt.ALL if not accepts(d))
        self.message = message
        self.operands = operands

    def with_message(self, message):
        """The same rule with its own message: ``{op}`` and ``{dtype}`` are filled in."""
        return Takes(self.description, lambda d: d not in self.rejected, message, self.operands)

    def of(self, *operands):
        """The same rule for the promoted dtype of the tensors among the parameters ``operands``."""
        return Takes(self.description, lambda d: d not in self.rejected, self.message, operands)

    def error(self, op_name, dtype):
        if self.message is not None:
            return UnsupportedDTypeError(self.message.format(op=op_name, dtype=dtype))
        return UnsupportedDTypeError(f"{op_name}: not implemented for {dtype} tensors (it takes {self.description})")


FLOATING = Takes("floating point tensors", lambda d: d.is_floating_point)
NUMBERS = Takes("numeric tensors, not bool", lambda d: d is not dt.bool_)
INTEGRAL = Takes("integer and bool tensors", lambda d: not d.is_floating_point)
FLOAT32_64 = Takes("float32 and float64 tensors", lambda d: d in (dt.float32, dt.float64))


def reject(op_name, rule, value):
    """Raise the error of ``rule`` for ``value``, a tensor of a dtype it rejects."""
    raise rule.error(op_name, value.dtype)


def check_promoted(op_name, rule, operands):
    """Raise the error of ``rule`` where the promoted dtype of the tensors among ``operands`` is one
    it rejects (non-tensors are left to the op's own checks)."""
    promoted = None
    for x in operands:
        if isinstance(x, Tensor):
            promoted = x.dtype if promoted is None else dt.promote(promoted, x.dtype)
    if promoted in rule.rejected:
        raise rule.error(op_name, promoted)
