"""The op registry: every op declared once, in one place.

An op is one decorated forward function in the module of its family (``adcuda/ops/<family>.py``,
named like the backend families)::

    @op("mul", doc="Elementwise product, broadcasting, with PyTorch's type promotion.",
        node="MulBackward0", inplace=True, operators=("__mul__", "__rmul__"), aliases=("multiply",),
        grads={"input": lambda grad, other: grad * other,
               "other": lambda grad, input: grad * input})
    def mul(input, other):
        return binary("mul", input, other)

The declaration says everything the rest of adcuda needs:

- **forward**: the decorated function, written with backend primitives (``primitives(t).binary``);
  it records nothing. A ``composite=True`` op is written with other ops instead and is
  differentiated through them (``relu6 = hardtanh(x, 0, 6)``).
- **backward**: ``grads`` maps each differentiable input (a forward parameter name, or a tuple of
  names computed together) to a formula written with differentiable ops, so ``create_graph=True``
  keeps giving higher orders. A formula's parameter names say what it reads: ``grad`` (the output's
  gradient), ``result`` (the output), any forward parameter, ``<parameter>_shape`` (only the shape of
  a tensor parameter, which then is not kept alive; ``_dtype`` and ``_device`` likewise; ``_layout``:
  its shape, strides and storage offset, in elements), or an
  ``extra_outputs`` name (values the forward computes for backward only, like layer_norm's
  ``mean``/``rstd``). The dispatch point saves exactly
  those (tensors with their version counters), for the inputs that require grad. Gradients are
  brought back to each input's shape (undoing broadcasting) and dtype after the formula.
- **fused backward**: ``fused`` has the same form, with formulas that call a fused backward
  primitive (or the forward's own primitives, with no op call around each: linear_2d); it runs for
  plain first-order backward, the ``grads`` formulas (its backward rule) whenever a graph of the
  backward is being built. tests/test_fused_backward.py checks for every op
  that has one that both agree.
- **dtypes**: ``dtypes`` (a rule of ``dtype_support``: ``FLOATING``, ``NUMBERS``, ...) says which
  dtypes the op's first tensor argument may have, as PyTorch defines the op; the dispatch point
  refuses the others before the forward runs (``abs`` of a bool tensor, ``gelu`` of an integer one).
- **plain case**: ``plain="binary"`` (one word, the kind of lane: ``dispatch._PLAIN_KERNELS`` lists
  them) says that the forward, given CPU tensors of one floating dtype (float32 or float64; the
  ``"unary_any"``/``"binary_any"`` kinds: any one dtype of ``dispatch._ANY_DTYPES``; ``"where"``: a bool
  mask and two floating tensors) as its first arguments (``"binary"``: the second may also be a Python
  float; ``"binary_tensors"``: a tensor only; ``"product"``: two tensors, ``"add_product"``: three, addmm's
  kind with beta and alpha at their defaults), every other argument at its default (the ``"scalars"``
  kinds: or a Python float, passed on), computes exactly what the CPU backend's kernel for the op
  computes (``plain_unary``, ``plain_binary``, ``plain_scalars``, ``plain_reduce``, ``plain_product``):
  the dispatch point then computes the output with that kernel directly while no hook is attached (its fast lane,
  adcuda/ops/dispatch.py), and with the forward otherwise. An op that says nothing gets the kind of
  its namesake row of the unary table, if any (``_table_plain``); ``plain=False``: none.
  ``plain="index"``: a float32/float64 tensor as the one first argument, every other argument at its
  default, for which the CPU index family's kernel of the op's name (``plain_index``) computes what
  the forward does (trace, tril, triu).
- **view**: ``view=True`` says the output is a view of the first argument (it shares its memory and
  version counter, and the dispatch point can rebuild it from its base). A view op may declare
  instead, as ``view=``, the function that makes its output's array from a CPU input's NumPy array and
  the op's other arguments, giving None where it is not sure to give what the forward would: the
  dispatch point's view lane then calls it directly while no hook is attached (dispatch.py).
- **direct case**: ``direct=fn`` (an op that records nothing itself: composite, or not differentiable)
  gives the op's common case as one function of the forward's parameters, by position (a ``*args``
  parameter as its tuple), returning the result or None where the call takes the forward after all:
  the entry calls it first while no hook is attached (its direct lane, adcuda/ops/dispatch.py), without
  switching NumPy's error state, so it makes no NumPy call that can warn (a factory's allocation, a
  host module's draw). The factories' and random draws' CPU case.
- **lane**: ``lane=fn`` (an op of one output, neither view nor composite, with no ``plain`` kind) gives
  the op's common case on the CPU as one function of the forward's parameters, by position, returning
  the output's host array, or None (or raising) where the call takes the forward after all: the
  entry wraps that array and records as its path does, while no hook is attached (its kernel lane,
  adcuda/ops/dispatch.py), without switching NumPy's error state (``fn`` makes no call that can
  warn). cat and the stack family's joins.
- **policy**: ``autocast`` (``"lower"``, ``"float32"``, ``"promote"``, ``"float32_result"`` or None) is applied at the
  dispatch point; type promotion is the forward's (``result_type``).
- **forms**: ``function`` (``adcuda.<name>``), ``method`` (``Tensor.<name>``), ``inplace``
  (``Tensor.<name>_``, generated from the out-of-place op), ``operators`` (``__rsub__``-style
  reflected names swap the operands), ``aliases``, ``functional`` (``adcuda.nn.functional``;
  ``functional="inplace"`` gives it PyTorch's ``inplace=False`` keyword and an ``F.<name>_``),
  ``property`` (``Tensor.T``).

``all_ops()`` enumerates the registry (name, doc, signature, forms, differentiable, fused) for the
API reference and the tests; ``get(name)`` finds one op.
"""

import inspect
from collections.abc import Callable
from inspect import Parameter
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar, overload

from ..backends.elementwise_table import BITWISE, LOGICAL, UNARY_BY_NAME
from . import dispatch, dtype_support

if TYPE_CHECKING:
    from ..types import Tensor

VAR_POSITIONAL, KEYWORD_ONLY = Parameter.VAR_POSITIONAL, Parameter.KEYWORD_ONLY
POSITIONAL_ONLY, POSITIONAL_OR_KEYWORD = Parameter.POSITIONAL_ONLY, Parameter.POSITIONAL_OR_KEYWORD

_REGISTRY: "dict[str, OpDef]" = {}  # name -> declaration (OpDef is defined below)

# what type checkers see ``@op(...)`` make of a forward: a function of the same signature (the entry)
Forward = TypeVar("Forward", bound=Callable[..., Any])
Inputs = ParamSpec("Inputs")

_FORMULA_INPUTS = ("grad", "result")
_METADATA = ("shape", "dtype", "device", "layout")  # ``input_shape``: only that of a tensor parameter is kept


class Formula:
    """One backward formula: the inputs it gives gradients for and the values it reads."""

    __slots__ = ("targets", "fn", "reads")

    def __init__(self, targets, fn):
        self.targets = targets
        self.fn = fn
        self.reads = tuple(inspect.signature(fn).parameters)


class OpDef:
    """Everything adcuda knows about one op (see the module docstring)."""

    def __init__(
        self,
        name,
        forward,
        *,
        doc,
        grads,
        fused,
        composite,
        node,
        autocast,
        view,
        extra_outputs,
        function,
        method,
        inplace,
        operators,
        aliases,
        functional,
        as_property,
        differentiable,
        dtypes=None,
        plain=None,
        direct=None,
        lane=None,
    ):
        if not doc or "\n" in doc.strip():
            raise ValueError(f"op {name!r}: doc must be one line")
        if composite and (grads or fused):
            raise ValueError(f"op {name!r}: a composite op is differentiated through its ops; it has no grads")
        self.name = name
        if dtypes is not None and dtypes.same:
            forward = dtype_support.checking_same(name, dtypes, forward)
        self.forward = forward
        self.doc = doc.strip()
        self.family = forward.__module__.rpartition(".")[2]
        self.signature = inspect.signature(forward)
        self.composite = composite
        self.autocast = autocast
        self.dtypes = dtypes
        self.plain = _table_plain(name, self.signature) if plain is None else plain or None
        self.direct = direct
        self.lane = lane
        self.view = view
        self.extra_outputs = tuple(extra_outputs)
        self.node = node
        self.forms = {
            "function": [name] if function else [],
            "method": [name] if method else [],
            "inplace": [],
            "operators": [o if isinstance(o, str) else o[0] for o in operators],
            "functional": [],
            "property": [],
        }
        if as_property:
            self.forms["method"] = []
            self.forms["property"] = [name]
        if inplace:
            self.forms["inplace"] = (
                [name + "_"] if inplace is True else ([inplace] if isinstance(inplace, str) else list(inplace))
            )
        for alias in aliases:
            if function:
                self.forms["function"].append(alias)
            if method:
                self.forms["method"].append(alias)
            if inplace is True and method:  # x.multiply_(y), x.absolute_(): each name has its in-place form
                self.forms["inplace"].append(alias + "_")
        if functional:
            self.forms["functional"] = [name]
        # adapters: a form whose signature differs from the function's (Tensor.where(condition, other),
        # t == None, F.softmax's _stacklevel)
        self.method_adapter = method if callable(method) else None
        self.functional_adapter = functional if callable(functional) else None
        for adapter in (self.method_adapter, self.functional_adapter):
            if adapter is not None:  # help() and the API reference read the form as the op
                adapter.__name__ = adapter.__qualname__ = name
                adapter.__doc__ = self.doc
        self.functional_inplace = functional == "inplace"
        if self.functional_inplace and not inplace:
            raise ValueError(f"op {name!r}: functional='inplace' needs an in-place form")
        self.operator_adapters = {o[0]: o[1] for o in operators if not isinstance(o, str)}
        self.params = _parameters(self.signature)
        self._kinds = tuple(p.kind for p in self.signature.parameters.values())
        self.grads = self._formulas(grads)
        self.fused = self._formulas(fused) if fused else None
        if fused and {f.targets for f in self.fused} != {f.targets for f in self.grads}:
            raise ValueError(f"op {name!r}: fused formulas must cover the same inputs as grads")
        # differentiable inputs, in forward-parameter order
        targets = {t for f in self.grads for t in f.targets}
        self.inputs = tuple(p for p in self.params if p in targets)
        self.differentiable = bool(self.grads) if differentiable is None else differentiable
        if direct is not None and self.differentiable and not composite:
            raise ValueError(f"op {name!r}: direct= is for an op that records nothing itself")
        if lane is not None and (view or self.extra_outputs or self.plain or direct or composite):
            raise ValueError(f"op {name!r}: lane= is for an op of one output, no view, with no other lane")
        if self.differentiable and not composite and not self.grads:
            raise ValueError(f"op {name!r}: a differentiable op needs grads (or composite=True)")
        # backward plans by the bit mask of the inputs that require grad, made on first use
        self.plans = [None] * (1 << len(self.inputs))
        self.entry = dispatch.make_entry(self)
        self.inplace_entry = dispatch.make_inplace_entry(self) if inplace else None

    def _formulas(self, spec):
        formulas = []
        for targets, fn in (spec or {}).items():
            targets = targets if isinstance(targets, tuple) else (targets,)
            for t in targets:
                if t not in self.params:
                    raise ValueError(f"op {self.name!r}: grads names {t!r}, which is not a forward parameter")
            formula = Formula(targets, fn)
            for r in formula.reads:
                if r.rpartition("_")[2] in _METADATA and r.rpartition("_")[0] in self.params:
                    continue
                if r not in self.params and r not in _FORMULA_INPUTS and r not in self.extra_outputs:
                    raise ValueError(
                        f"op {self.name!r}: a formula reads {r!r}, which is neither a forward "
                        f"parameter nor one of {_FORMULA_INPUTS + self.extra_outputs}"
                    )
            formulas.append(formula)
        return tuple(formulas)

    def plan(self, mask):
        """What to save and run when the inputs flagged in the bit mask ``mask`` (bit i for entry i of
        ``inputs``) require grad; made once per mask."""
        plan = self.plans[mask]
        if plan is None:
            plan = self.plans[mask] = BackwardPlan(self, mask)
        return plan

    def call(self, fn, values):
        """``fn`` called with the arguments ``values`` (the forward's parameters in order) as the
        forward was: for node names that depend on the arguments."""
        args, kwargs = [], {}
        for value, kind, pname in zip(values, self._kinds, self.params):
            if kind == VAR_POSITIONAL:
                args.extend(value)
            elif kind == KEYWORD_ONLY:
                kwargs[pname] = value
            else:
                args.append(value)
        return fn(*args, **kwargs)

    def __repr__(self):
        return f"<op {self.name} ({self.family})>"


class BackwardPlan:
    """For one op and one set of inputs requiring grad: the values to keep (``reads``, in order) and
    the formulas to run, each with the positions of its arguments in ``reads`` (-1 for ``grad``) and
    the input positions it fills."""

    __slots__ = ("reads", "sources", "formulas", "fused", "n_inputs", "input_positions", "record", "backward")

    def __init__(self, op, mask):
        self.n_inputs = len(op.inputs)
        self.input_positions = tuple(op.positions[name] for name in op.inputs)
        wanted = {name for i, name in enumerate(op.inputs) if mask >> i & 1}
        chosen = [f for f in op.grads if wanted & set(f.targets)]
        chosen_fused = [f for f in op.fused if wanted & set(f.targets)] if op.fused else []
        reads = []
        for f in chosen + chosen_fused:
            for r in f.reads:
                if r != "grad" and r not in reads:
                    reads.append(r)
        self.reads = tuple(reads)
        self.sources = tuple(dispatch.read_source(op, r) for r in reads)
        self.formulas = tuple(self._compiled(op, f) for f in chosen)
        self.fused = tuple(self._compiled(op, f) for f in chosen_fused) if op.fused else None
        # recording and backward for this plan, generated (see dispatch.plan_functions)
        self.record, self.backward = dispatch.plan_functions(op, self, mask)

    def _compiled(self, op, formula):
        slots = tuple(-1 if r == "grad" else self.reads.index(r) for r in formula.reads)
        return formula.fn, slots, tuple(op.inputs.index(t) for t in formula.targets)


def _parameters(signature):
    return tuple(signature.parameters)


# For type checkers: the entry is the forward, but an op with ``extra_outputs`` (values its forward
# computes for its backward only) returns what its forward returns first, its output
@overload
def op(
    name: str,
    *,
    doc: str,
    grads=None,
    fused=None,
    composite=False,
    node=None,
    autocast=None,
    view=False,
    extra_outputs: tuple[()] = (),
    function=True,
    method=True,
    inplace=False,
    operators=(),
    aliases=(),
    functional=False,
    as_property=False,
    differentiable=None,
    dtypes=None,
    plain=None,
    direct=None,
    lane=None,
) -> Callable[[Forward], Forward]: ...
@overload
def op(
    name: str,
    *,
    doc: str,
    grads=None,
    fused=None,
    composite=False,
    node=None,
    autocast=None,
    view=False,
    extra_outputs: tuple[str, ...],
    function=True,
    method=True,
    inplace=False,
    operators=(),
    aliases=(),
    functional=False,
    as_property=False,
    differentiable=None,
    dtypes=None,
    plain=None,
    direct=None,
    lane=None,
) -> "Callable[[Callable[Inputs, Any]], Callable[Inputs, Tensor]]": ...
def op(
    name: str,
    *,
    doc: str,
    grads=None,
    fused=None,
    composite=False,
    node=None,
    autocast=None,
    view=False,
    extra_outputs: tuple[str, ...] = (),
    function=True,
    method=True,
    inplace=False,
    operators=(),
    aliases=(),
    functional=False,
    as_property=False,
    differentiable=None,
    dtypes=None,
    plain=None,
    direct=None,
    lane=None,
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Declare an op (see the module docstring); returns its dispatching entry point, which
    carries the declaration as ``.op``."""
    if name in _REGISTRY:
        raise ValueError(f"op {name!r} is declared twice")

    def declare(forward):
        if grads and node is None:
            raise ValueError(f"op {name!r}: a differentiable op names its autograd node (node=...)")
        definition = OpDef(
            name,
            forward,
            doc=doc,
            grads=grads,
            fused=fused,
            composite=composite,
            node=node,
            autocast=autocast,
            view=view,
            extra_outputs=extra_outputs,
            function=function,
            method=method,
            inplace=inplace,
            operators=operators,
            aliases=aliases,
            functional=functional,
            as_property=as_property,
            differentiable=differentiable,
            dtypes=dtypes,
            plain=plain,
            direct=direct,
            lane=lane,
        )
        _REGISTRY[name] = definition
        return definition.entry

    return declare


def _table_plain(name, signature):
    """The ``plain`` kind of an op that says none: the one table's (backends/elementwise_table.py) for a
    row's namesake whose parameters after the first all have defaults (its forward, at those defaults,
    is the row's primitive: tests/test_dispatch_fast_lane.py checks every such op against its path), so
    that a new row's op cannot forget it; None for any other. ``plain=False`` says none."""
    row = UNARY_BY_NAME.get(name)
    parameters = list(signature.parameters.values())
    if row is None or not parameters or any(p.default is p.empty for p in parameters[1:]):
        return None
    return "unary_any" if row.kind in (BITWISE, LOGICAL) else "unary"


def get(name):
    """The declaration of the op called ``name``."""
    return _REGISTRY[name]


def all_ops():
    """Every declared op, in declaration order."""
    return list(_REGISTRY.values())


# ----------------------------------------------------------------------------------------------
# exposure: what the registry generates
_BINARY_OPERATORS = ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "and", "or", "xor")
_INPLACE_OPERATORS = {f"__i{o}__" for o in _BINARY_OPERATORS}
_REFLECTED_OPERATORS = {f"__r{o}__" for o in _BINARY_OPERATORS}


def _reflected(entry):
    def reflected(self, other):
        return entry(other, self)

    reflected.__name__ = entry.__name__
    return reflected


def install_methods(cls):
    """Attach every op's method, in-place, operator and property forms to ``cls`` (Tensor)."""
    for definition in _REGISTRY.values():
        entry = definition.entry
        for name in definition.forms["method"]:
            setattr(cls, name, definition.method_adapter or entry)
        for name in definition.forms["property"]:
            setattr(cls, name, property(entry, doc=definition.doc))
        for name in definition.forms["inplace"]:
            setattr(cls, name, definition.inplace_entry)
        for name in definition.forms["operators"]:
            if name in definition.operator_adapters:
                setattr(cls, name, definition.operator_adapters[name])
            elif name in _INPLACE_OPERATORS:
                setattr(cls, name, definition.inplace_entry)
            elif name in _REFLECTED_OPERATORS:
                setattr(cls, name, _reflected(entry))
            else:
                setattr(cls, name, entry)


def functions():
    """``{name: entry}`` for the ``adcuda.<name>`` functions."""
    return {name: d.entry for d in _REGISTRY.values() for name in d.forms["function"]}


def functional_forms():
    """``{name: callable}`` for ``adcuda.nn.functional``."""
    out = {}
    for d in _REGISTRY.values():
        for name in d.forms["functional"]:
            if d.functional_adapter is not None:
                out[name] = d.functional_adapter
            elif d.functional_inplace:
                out[name] = _with_inplace_keyword(d)
                out[name + "_"] = _functional_inplace(d)
            else:
                out[name] = d.entry
    return out


def _functional_inplace(definition):
    """``F.<name>_(input, ...)``: the in-place form, whose tensor PyTorch's functional names ``input``
    (the method's is ``self``)."""
    inplace_entry = definition.inplace_entry

    def functional(input, *args, **kwargs):
        return inplace_entry(input, *args, **kwargs)

    functional.__name__ = functional.__qualname__ = inplace_entry.__name__
    functional.__doc__ = inplace_entry.__doc__
    signature = inspect.signature(inplace_entry)
    parameters = list(signature.parameters.values())
    parameters[0] = parameters[0].replace(name="input")
    functional.__signature__ = signature.replace(parameters=parameters)
    return functional


def _with_inplace_keyword(definition):
    entry, inplace_entry = definition.entry, definition.inplace_entry
    parameters = list(definition.signature.parameters.values())
    positional = [p for p in parameters if p.kind in (POSITIONAL_ONLY, POSITIONAL_OR_KEYWORD)]
    # PyTorch's F.x(input, ..., inplace=False) also takes inplace by position, after the op's own
    # positional parameters: F.leaky_relu(x, 0.2, True).
    inplace_position = len(positional)

    def functional(*args, inplace=False, **kwargs):
        if len(args) == inplace_position + 1:
            args, inplace = args[:-1], args[-1]
        return (inplace_entry if inplace else entry)(*args, **kwargs)

    functional.__name__ = definition.name
    functional.__doc__ = definition.doc
    inplace = Parameter("inplace", POSITIONAL_OR_KEYWORD, default=False, annotation="bool")
    parameters.insert(inplace_position, inplace)
    functional.__signature__ = definition.signature.replace(parameters=parameters)
    return functional


# ----------------------------------------------------------------------------------------------
# lowerings: what the layers above the ops (the ONNX and C exporters, graph capture) know of the backend
# primitives an op calls, declared next to that op (``lowering(...)`` after its ``@op``), so that no
# exporter keeps a table keyed by primitive names. The exporters pass their own builder objects to the
# callables declared here, so nothing below the exporters imports them.
class Lowering:
    """One backend primitive (or one ``op`` of the ``unary``, ``binary`` and ``reduce`` primitives), as
    the layers above the ops see it:

    - ``onnx``: for a whole primitive, ``onnx(writer, node, **params)`` writes the traced call as ONNX
      nodes (``adcuda/onnx/exporter.py``'s writer: ``emit``, ``name``, ``const``...). For an op of
      ``unary``/``binary``/``reduce``, the ONNX operator's name (``"Exp"``: one node, same operands),
      or ``onnx(writer, *operand_names, dtype, out)`` (a NumPy dtype; ``out`` the result's name).
    - ``c``: for a whole primitive, ``c(lowerer, node)`` gives the call's C loop nests
      (``adcuda/export/c_graph.py``'s ``Lowerer``). For a ``unary`` op, its C expression over the float
      ``v``; for a ``binary`` op, over ``{a}`` and ``{b}``; for a ``reduce`` op, (the accumulator's start,
      how it takes one more ``{v}`` into ``{acc}``, how the result is finished from ``{acc}`` and the
      ``{count}`` of values, or None).
    - ``c_fusable``: a ``unary`` op a Linear or a Conv2d applies in its own C loop when it follows one.
    - ``replay_passes``: a ``unary`` op whose CPU replay kernels make so many passes over their arrays that
      graph capture runs them chunk by chunk (``adcuda/capture/program.py``).
    - ``replay_keeps``: a ``ReplayKeep``, what capture's CPU replay keeps from the forward for its backward.
    - ``strided_operands``: positions of the operands the CPU primitive reads through BLAS matrix calls,
      which take row-strided views as they are: the replay passes such a view instead of a contiguous
      copy made only for the primitive (attention's q, k, v).
    """

    __slots__ = ("primitive", "op", "onnx", "c", "c_fusable", "replay_passes", "replay_keeps", "strided_operands")

    def __init__(self, primitive, op, onnx, c, c_fusable, replay_passes, replay_keeps, strided_operands):
        self.primitive = primitive
        self.op = op
        self.onnx = onnx
        self.c = c
        self.c_fusable = c_fusable
        self.replay_passes = replay_passes
        self.replay_keeps = replay_keeps
        self.strided_operands = strided_operands

    def __repr__(self):
        return f"<lowering {self.primitive}{'' if self.op is None else ' ' + self.op}>"


class ReplayKeep:
    """What graph capture's CPU replay keeps from a forward primitive's call for a backward primitive's
    call that would compute it again: the forward writes it into an array passed as ``keyword`` (a CPU
    primitive's keyword, seam.CPU_REPLAY_KEYWORDS), the backward reads it from there, the same numbers.

    - ``backward``: the backward primitive (for a ``unary`` op: ``unary_backward`` of the same op);
    - ``results``/``reads``: positions of the forward's results that the backward reads as its arguments
      at positions ``reads``: a backward pairs with the forward whose results it reads. Without them
      (``None``) it pairs with the latest earlier forward that ``pair`` accepts;
    - ``arity``: the fewest arguments a backward call has for a pairing;
    - ``pair(same, shape_of, forward_args, backward_args)``: None where the backward may not read what the
      forward kept, else (the kept array's shape, the operands whose dtype it has: the first one's, all
      equal). ``same(a, b)`` says whether the forward's operand ``a`` and the backward's ``b`` hold the
      same numbers; ``shape_of(a)`` is an operand's shape;
    - ``kernels_only``: only forwards and backwards that the replay runs by its own kernels take the keyword
      (``unary``'s ``out=`` kernels).
    """

    __slots__ = ("keyword", "backward", "results", "reads", "arity", "pair", "kernels_only")

    def __init__(self, keyword, backward, *, pair, results=None, reads=None, arity=0, kernels_only=False):
        self.keyword = keyword
        self.backward = backward
        self.results = results
        self.reads = reads
        self.arity = arity
        self.pair = pair
        self.kernels_only = kernels_only


_LOWERINGS: "dict[tuple[str, str | None], Lowering]" = {}
_REPLAY_KEEPS: "dict[tuple[str, str | None], ReplayKeep]" = {}  # by (backward primitive, op)


def lowering(
    primitive: str,
    op: str | None = None,
    *,
    onnx=None,
    c=None,
    c_fusable=False,
    replay_passes=False,
    replay_keeps: ReplayKeep | None = None,
    strided_operands: tuple[int, ...] = (),
) -> None:
    """Declare what export and capture know of backend primitive ``primitive`` (of its ``op``, for the
    unary, binary and reduce primitives): see ``Lowering``."""
    key = (primitive, op)
    if key in _LOWERINGS:
        raise ValueError(f"the lowering of {primitive}{'' if op is None else ' ' + op} is declared twice")
    _LOWERINGS[key] = Lowering(primitive, op, onnx, c, c_fusable, replay_passes, replay_keeps, strided_operands)
    if replay_keeps is not None:
        _REPLAY_KEEPS[replay_keeps.backward, op] = replay_keeps


def lowering_of(primitive: str, op: str | None = None) -> Lowering | None:
    """The declared lowering of ``primitive`` (of its ``op``), or None where none is declared."""
    return _LOWERINGS.get((primitive, op))


def replay_keep_of_backward(backward: str, op: str | None = None) -> ReplayKeep | None:
    """The ``ReplayKeep`` whose backward primitive is ``backward`` (of ``op``, for ``unary_backward``), or None."""
    return _REPLAY_KEEPS.get((backward, op))


def lowerings(primitive: str) -> list[Lowering]:
    """Every declared lowering of an op of ``primitive`` (``unary``, ``binary``, ``reduce``)."""
    return [d for (p, o), d in _LOWERINGS.items() if p == primitive and o is not None]
