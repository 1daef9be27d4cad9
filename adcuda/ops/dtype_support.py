"""Which dtypes an op is defined for: PyTorch's rule, declared with the op and checked once.

An op declares what its first tensor argument may be with ``@op(..., dtypes=FLOATING)``, or, for an
op whose operands are promoted together first, what their promoted dtype may be
(``dtypes=FLOATING.of("input", "target")``: mse_loss of an int and a float tensor is computed in
float, of two int tensors refused); the dispatch point (every form: function, method, operator,
in-place) checks it before the forward runs and raises UnsupportedDTypeError naming the op and the
dtype, as PyTorch refuses ``abs`` of a bool tensor ("'abs_cpu' not implemented for 'Bool'") or
``gelu`` of an integer one. An op without the declaration takes every dtype its forward takes.
"""

import functools
import inspect

from .. import dtypes as dt
from ..errors import UnsupportedDTypeError
from ..tensor import Tensor
from .common import result_type


class Takes:
    """The dtypes an op's first tensor argument may have (``accepts(dtype)``), described for the error
    message, or a message of the op's own (PyTorch's wording, with the op and dtype filled in)."""

    __slots__ = ("description", "rejected", "message", "operands", "each", "empty_ok", "same", "accepted_arrays")

    def __init__(self, description, accepts, message=None, operands=(), each=False, empty_ok=False, same=()):
        self.description = description
        self.rejected = frozenset(d for d in dt.ALL if not accepts(d))
        self.message = message
        self.operands = operands
        self.each = each
        self.empty_ok = empty_ok
        self.same = same
        # the array dtypes (NumPy's, the CUDA runtime's) of first tensors found accepted: the dispatch
        # point's check is one lookup in it after the first call (``check_first``)
        self.accepted_arrays = set()

    def _copy(self, **changes):
        fields = {k: getattr(self, k) for k in ("message", "operands", "each", "empty_ok", "same")}
        fields.update(changes)
        return Takes(self.description, lambda d: d not in self.rejected, **fields)

    def with_message(self, message):
        """The same rule with its own message: ``{op}`` and ``{dtype}`` are filled in."""
        return self._copy(message=message)

    def of(self, *operands):
        """The same rule for the promoted dtype of the tensors among the parameters ``operands``."""
        return self._copy(operands=operands)

    def of_each(self, *operands):
        """The same rule for the dtype of each tensor among the parameters ``operands`` (isin refuses a
        bool tensor on either side)."""
        return self._copy(operands=operands, each=True)

    def one_dtype(self, *operands):
        """The same rule, and the tensors among the parameters ``operands`` of one dtype: PyTorch's
        matrix products and scatters promote nothing (``index_add`` of int64 source into float32)."""
        return self._copy(same=operands)

    def unless_empty(self):
        """The same rule, not applied to an empty first tensor (to operands all empty): PyTorch's
        matrix products and searches check the dtype in the kernel, which an empty call never runs
        (``mm`` of empty bool matrices)."""
        return self._copy(empty_ok=True)

    def error(self, op_name, dtype):
        if self.message is not None:
            return UnsupportedDTypeError(self.message.format(op=op_name, dtype=dtype))
        return UnsupportedDTypeError(f"{op_name}: not implemented for {dtype} tensors (it takes {self.description})")


FLOATING = Takes("floating point tensors", lambda d: d.is_floating_point)
NUMBERS = Takes("numeric tensors, not bool", lambda d: d is not dt.bool_)
ANY = Takes("tensors of any dtype", lambda d: True)  # for a rule of operands of one dtype alone
INTEGRAL = Takes("integer and bool tensors", lambda d: not d.is_floating_point)
FLOATING_OR_BOOL = Takes("floating point and bool tensors", lambda d: d.is_floating_point or d is dt.bool_)
FLOAT32_64 = Takes("float32 and float64 tensors", lambda d: d in (dt.float32, dt.float64))


def reject(op_name, rule, value):
    """Raise the error of ``rule`` for ``value``, a tensor of a dtype it rejects (unless the rule lets an
    empty one through)."""
    if rule.empty_ok and value.numel() == 0:
        return
    raise rule.error(op_name, value.dtype)


def check_first(op_name, rule, value):
    """The rule applied to a first tensor argument whose array dtype is not yet known accepted: raise
    for a dtype it rejects, else note the array dtype as accepted (an array dtype is one dtype)."""
    if value.dtype in rule.rejected:
        reject(op_name, rule, value)
    else:
        rule.accepted_arrays.add(value._data.dtype)


def check_operands(op_name, rule, operands):
    """Raise the error of ``rule`` where the promoted dtype of ``operands`` (tensors and Python numbers)
    or, for an ``of_each`` rule, any tensor's dtype is one it rejects (other values are left to the
    op's own checks)."""
    # the common call, tensors of one array dtype already found accepted: one lookup, none of the
    # promotion below (a microsecond and more per call of searchsorted and the other rules of operands)
    known = rule.accepted_arrays
    first = operands[0]._data.dtype if operands and operands[0].__class__ is Tensor else None
    if first in known:
        for x in operands:
            if x.__class__ is not Tensor or x._data.dtype is not first:
                break
        else:
            return
    tensors = [x for x in operands if isinstance(x, Tensor)]
    if not tensors or rule.empty_ok and all(x.numel() == 0 for x in tensors):
        return
    if rule.each:
        for x in tensors:
            if x.dtype in rule.rejected:
                raise rule.error(op_name, x.dtype)
        return
    # PyTorch's promotion, Python scalars included: searchsorted of a bool tensor by 1 is an int64 search
    promoted = result_type(*(x for x in operands if isinstance(x, (Tensor, bool, int, float))))
    if promoted in rule.rejected:
        raise rule.error(op_name, promoted)
    if len(tensors) == len(operands) and all(x._data.dtype is tensors[0]._data.dtype for x in tensors):
        known.add(tensors[0]._data.dtype)  # tensors of this one dtype promote to it: accepted


def check_same(op_name, rule, operands):
    """Raise where the tensors among ``operands`` (the values of the parameters ``rule.same``) are not
    all of one dtype."""
    first = None
    for name, x in zip(rule.same, operands):
        if isinstance(x, Tensor):
            if first is None:
                first = (name, x.dtype)
            elif x.dtype is not first[1]:
                raise UnsupportedDTypeError(
                    f"{op_name}: expected {first[0]} and {name} to have the same dtype, got {first[1]} and {x.dtype}"
                )


def checking_same(op_name, rule, forward):
    """``forward`` checking first that the tensors among its parameters ``rule.same`` share one dtype:
    part of the forward, so that it sees the arguments after autocast has cast them (an autocast
    region runs addmm of float32 and float16 operands in float16)."""
    names = tuple(inspect.signature(forward).parameters)
    for name in rule.same:
        if name not in names:
            raise ValueError(f"op {op_name!r}: dtypes= names {name!r}, which is not a forward parameter")
    exact = _exactly_checking_same(op_name, rule, forward)
    if exact is not None:
        return exact
    positions = tuple(names.index(name) for name in rule.same)
    last = max(positions)

    @functools.wraps(forward)
    def forward_checking_same(*args, **kwargs):
        if len(args) > last:
            # the common case in a few reads: every operand a tensor given by position, their arrays of
            # one dtype object (then of one dtype)
            dtype = None
            for i in positions:
                x = args[i]
                if x.__class__ is not Tensor or dtype is not None and x._data.dtype is not dtype:
                    break
                dtype = x._data.dtype
            else:
                return forward(*args, **kwargs)
        check_same(op_name, rule, [args[i] if i < len(args) else kwargs.get(n) for i, n in zip(positions, rule.same)])
        return forward(*args, **kwargs)

    return forward_checking_same


_MAKER_NAMES = frozenset(("forward", "check_same", "Tensor", "_defaults", "OP_NAME", "RULE"))


def _exactly_checking_same(op_name, rule, forward):
    """``checking_same``'s wrapper written with the forward's own parameters (its source generated, as the
    dispatch point's entries are): the operands read by name, no packing of ``*args`` and ``**kwargs``
    (a third of the generic wrapper's cost); None for a forward with other kinds of parameters."""
    parameters = list(inspect.signature(forward).parameters.values())
    plain, keyword = inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY
    if forward.__name__ in _MAKER_NAMES or any(
        p.kind not in (plain, keyword) or p.name in _MAKER_NAMES for p in parameters
    ):
        return None
    signature, call, defaults = [], [], {}
    for p in parameters:
        if p.kind is keyword and "*" not in signature:
            signature.append("*")
        default = ""
        if p.default is not p.empty:
            defaults[p.name] = p.default
            default = f"=_defaults[{p.name!r}]"
        signature.append(p.name + default)
        call.append(p.name if p.kind is plain else f"{p.name}={p.name}")
    first, others = rule.same[0], rule.same[1:]
    tests = [f"{first}.__class__ is Tensor"]
    tests += [f"{x}.__class__ is Tensor and {x}._data.dtype is {first}._data.dtype" for x in others]
    source = (
        "def make(forward, check_same, Tensor, _defaults, OP_NAME, RULE):\n"
        f"    def {forward.__name__}({', '.join(signature)}):\n"
        f"        if not ({' and '.join(tests)}):\n"
        f"            check_same(OP_NAME, RULE, ({', '.join(rule.same)},))\n"
        f"        return forward({', '.join(call)})\n"
        f"    return {forward.__name__}\n"
    )
    made: dict = {}
    exec(compile(source, f"<dtype check of op {op_name}>", "exec"), {}, made)  # noqa: S102 (source made above)
    return functools.wraps(forward)(made["make"](forward, check_same, Tensor, defaults, op_name, rule))


def check(op_name, rule, value):
    """The rule applied by hand, where a form does not pass the dispatch point (F.unfold's im2col)."""
    if isinstance(value, Tensor) and value.dtype in rule.rejected:
        reject(op_name, rule, value)
