"""The one call path of every op: ``make_entry`` turns a registry declaration into the function
users call (``adcuda.mul``, ``Tensor.__mul__``, ``Tensor.mul_``, ...).

On the common path an entry runs the op's forward and, when a gradient is needed, records a node:
a handful of attribute reads beyond the forward itself. Everything else attaches here as a hook
(``add_hook``), so its cost is one falsy check while it is off:

- ``around_op(name, op, call, args, kwargs)``: runs the op (``call(*args, **kwargs)``) in between;
  autocast casts the arguments here, the profiler and NVTX time and name it, graph capture sees
  the op call;
- ``wrap_backend(backend)``: a stand-in for a backend module through which every primitive call of
  the ops and of autograd passes (the profiler counts kernel launches; capture records them);
- ``around_backward(node, fn, *args)``: runs a backward rule or a leaf's accumulation;
- ``on_node(node)``: sees every autograd node as it is recorded.

An op declared ``plain=family`` (registry.py) has a fast lane at the top of its entry,
this dispatch point's own: while no hook is attached at all (``_plain``), a call on CPU tensors of the
kind's dtypes (floats of one dtype; any one dtype for the ``_any`` kinds) and Python float parameters
where the kind passes them runs the CPU backend's kernel for the op and wraps the array, skipping the
forward's helper frames, then records as the path below would; every other call, and every call
while any hook is attached, takes the path below (see ``_LANE_SOURCE``; ``_inplace_lane`` for the
in-place forms).

Recording, views and in-place forms follow the declaration: the values a formula reads are saved
(tensors with their version counters), a view shares its base's version counter and can be rebuilt
from it, an in-place form checks, writes, bumps the version counter and moves the history.
"""

import functools
import numbers
import os
import re
from collections.abc import Callable
from inspect import Parameter
from typing import Any, NamedTuple, TypeVar

import numpy as np

from .. import dtypes as dt
from .. import tensor as tensor_module
from ..autograd import anomaly, engine, graph
from ..autograd.grad_mode import state as grad_state
from ..autograd.graph import (
    FREED_MESSAGE,
    Node,
    _sequence,
    edge_of,
    node_name,
    sum_to_shape,
    unpack,
    version_counter,
    version_of,
)
from ..backends.cpu.elementwise import float_operand as _float_operand  # noqa: F401 (the lanes')
from ..backends.cpu.elementwise import plain_binary, plain_predicate, plain_scalars, plain_unary
from ..backends.cpu.gemm import plain_add_product, plain_product
from ..backends.cpu.index import plain_index
from ..backends.cpu.reduce import plain_reduce
from ..backends.float_errors import QUIET as _QUIET
from ..backends.float_errors import current as _errstate
from ..backends.float_errors import quiet as _quiet
from ..backends.float_errors import restore as _restore
from ..device import CPU as _CPU  # noqa: F401 (read by the generated fast lanes)
from ..errors import AdcudaError, AutogradError, DTypeError, LayoutError, ResultTypeError, adapt_error
from ..tensor import Tensor, primitives
from .dtype_support import check_first as _check_first_dtype
from .dtype_support import check_operands as _check_operand_dtypes
from .mutation import check_inplace_allowed, commit_inplace

# ----------------------------------------------------------------------------------------------
# hooks
_hooks = ()  # innermost last
_slow = False  # True while any hook wants to see op calls
_plain = True  # True while no hook of any kind is attached: the entries' fast lanes are open
_around_chain = None


def add_hook(hook, *, innermost=False):
    """Attach ``hook`` (an object with any of ``around_op``, ``wrap_backend``, ``around_backward``,
    ``on_node``); ``innermost`` puts its ``around_op`` closest to the op (autocast does, so the
    profiler's ranges include its casts)."""
    global _hooks
    _hooks = _hooks + (hook,) if innermost else (hook,) + _hooks
    _refresh()


def remove_hook(hook):
    global _hooks
    _hooks = tuple(h for h in _hooks if h is not hook)
    _refresh()


def _refresh():
    global _slow, _plain, _around_chain
    _plain = not _hooks
    around = [h.around_op for h in _hooks if hasattr(h, "around_op")]
    _around_chain = _chain(around) if around else None
    _slow = bool(around)
    wrappers = [h.wrap_backend for h in _hooks if hasattr(h, "wrap_backend")]
    tensor_module.set_primitive_observer(_compose_backend_wrappers(wrappers) if wrappers else None)
    backward = [h.around_backward for h in _hooks if hasattr(h, "around_backward")]
    engine.set_backward_observer(_chain_backward(backward) if backward else None)
    node_observers = [h.on_node for h in _hooks if hasattr(h, "on_node")]
    graph.set_node_observer(_all_of(node_observers) if node_observers else None)


def _chain(arounds):
    """One function running ``arounds`` outermost first around the op."""

    def run(index, name, op, call, args, kwargs):
        if index == len(arounds):
            return call(*args, **kwargs)

        def inner(*a, **k):
            return run(index + 1, name, op, call, a, k)

        return arounds[index](name, op, inner, args, kwargs)

    return lambda name, op, call, args, kwargs: run(0, name, op, call, args, kwargs)


def _compose_backend_wrappers(wrappers):
    cache = {}

    def observed(backend):
        wrapped = cache.get(backend)
        if wrapped is None:
            wrapped = backend
            for wrap in reversed(wrappers):
                wrapped = wrap(wrapped)
            cache[backend] = wrapped
        return wrapped

    return observed


def _chain_backward(arounds):
    def run(index, node, fn, args):
        if index == len(arounds):
            return fn(*args)
        return arounds[index](node, lambda *a: run(index + 1, node, fn, a), *args)

    return lambda node, fn, *args: run(0, node, fn, args)


def _all_of(observers):
    def observe(node):
        for o in observers:
            o(node)

    return observe


def _hooked(name, op, call, args, kwargs):
    return _around_chain(name, op, call, args, kwargs)


# ----------------------------------------------------------------------------------------------
# entries
def _takes_part(t):
    return t.__class__ is Tensor and (
        t._requires_grad or t._grad_fn is not None or (t._base is not None and t.grad_fn is not None)
    )


def _any_takes_part(values):
    for t in values:
        if t.__class__ is Tensor and (
            t._requires_grad or t._grad_fn is not None or (t._base is not None and t.grad_fn is not None)
        ):
            return True
    return False


def make_entry(op):
    """The function an op is called through."""
    _parameters(op)
    return _name(_generated_entry(op), op)


def _name(entry, op):
    entry.__name__ = entry.__qualname__ = op.name
    entry.__doc__ = op.doc
    entry.__module__ = op.forward.__module__
    entry.__wrapped__ = op.forward  # help() shows the forward's source and annotations
    # inspect.signature: the forward's annotated parameters and the keywords the entry adds
    entry.__signature__ = entry_signature(op)
    entry.op = op
    return entry


def _parameters(op):
    """``op.positions[name]``: where each forward parameter's value is in the ``values`` tuple that
    recording gets (the parameters in order, a variadic one as its tuple)."""
    op.positions = {pname: i for i, pname in enumerate(op.signature.parameters)}


# An op's entry is generated from its forward's signature, so that Python binds the arguments
# (positional or keyword, defaults) and recording finds each input by name: no argument parsing of
# our own on the hot path. ``body`` is the same without the hook check, for the hooks. An op that
# records nothing itself (composite, or not differentiable) only checks for hooks. Every forward runs
# with NumPy silent about inf and NaN, as PyTorch is, the caller's NumPy error state put back after it
# (backends/float_errors.py: about 0.1 us a call, a tenth of what np.errstate costs); an op called
# inside another finds the state quiet already and leaves it (one read). A view op's forward only
# makes views (no arithmetic NumPy could warn about; a copy it falls back to is made by other ops'
# entries), so its entry does not switch at all.
_PLAIN_SOURCE = """
def make(forward, OP, NAME, _defaults, ACCEPTED, KERNEL):
    def entry({signature}):
{prelude}{lane}        _token = None if _errstate() is _QUIET else _quiet(_QUIET)
        try:
            if _slow:
                return _around_chain(NAME, OP, forward, ({positional}), {keywords})
            return forward({call})
        except Exception as _error:
            _adapt(OP, _error, ({tensors}), ({values_tuple}))
        finally:
            if _token is not None:
                _restore(_token)
    return entry
"""

_ENTRY_SOURCE = """
def make(forward, OP, NAME, _defaults, ACCEPTED, PLANS, KERNEL):
    def entry({signature}):
{prelude}{lane}        if _slow:
            try:
                return _around_chain(NAME, OP, body, ({positional}), {keywords})
            except Exception as _error:
                _adapt(OP, _error, ({tensors}), ({values_tuple}))
{body}

    def body({signature}):
{body}
{views}    return entry
"""

# Which inputs take part in the graph is asked before whether grad mode is on (a thread-local read,
# the dearer of the two): most calls have no input that does.
_BODY_SOURCE = """        _token = None if _errstate() is _QUIET else _quiet(_QUIET)
        try:
            _result = forward({call})
        except Exception as _error:
            _adapt(OP, _error, ({tensors}), ({values_tuple}))
        finally:
            if _token is not None:
                _restore(_token)
        _out = {output}
        _mask = 0
{checks}        if _mask and grad_state.enabled:
            (PLANS[_mask] or OP.plan(_mask)).record(_out, _result, {values})
        return _out"""

_VIEW_BODY_SOURCE = """        try:
            _result = forward({call})
        except Exception as _error:
            _adapt(OP, _error, ({tensors}), ({values_tuple}))
        _out = {output}
        if _out is {base}:
            return _out
        if _out.__class__ is NotAView:
            return _out.tensor
{link}"""

# A view op's output shares its base's memory and version counter (its root base's: see
# ``tensor.version_counter``) and knows how to rebuild itself from the root (``replay_view``: the entry
# replayed with the same arguments, after the steps that made the base), so that an in-place write
# through either can give the other a new history. Recorded views note the version they were made at,
# to re-read their history when the base is later written in place.
_VIEW_SOURCE = """        _root = {base}._base
        _vc = {base}._vc
        if _root is None:
            _out._base = {base}
            _out._view_fn = (None, entry, {replay}, {replay_keywords})
        else:
            if _vc is None:
                _vc = _root._vc
            if {base}._view_fn is not None:
                _out._base = _root
                _out._view_fn = ({base}._view_fn, entry, {replay}, {replay_keywords})
            else:
                _out._base = {base}
                _out._view_fn = (None, entry, {replay}, {replay_keywords})
        if _vc is not None:
            _out._vc = _vc  # else version_counter(out) finds the root's once it has one
        if grad_state.enabled:
            _out._view_version = _vc.value if _vc is not None else 0
            _mask = 0
{checks}            if _mask:
                (PLANS[_mask] or OP.plan(_mask)).record(_out, _result, {values})
        return _out
"""

# ----------------------------------------------------------------------------------------------
# the view lane
#
# A view op may declare, as its ``view=``, the function that makes its output's array from a CPU
# input's NumPy array and the op's other arguments (registry.py): the view's plain case. While no hook
# is attached (``_plain``), a call on a CPU tensor runs that function first, wraps the array it gives
# and links the view to its base as the path below does (``_VIEW_SOURCE``: base, rebuild function,
# version counter, recording): what the forward computes, without its frames (the forward, its
# helpers, ``primitives``, the backend's checks, ``wrap``: half of a small view's cost). The function
# gives None, or raises, for anything but the plain case (a stride that allows no view, an argument of
# another kind, an error), which then takes the path below; it gives the input's own array where the
# op gives the input itself back. The array function of a view op is read as ``KERNEL`` (the name the
# plain lanes read theirs by; an op has one or the other). A view needs no quiet NumPy error state
# (see above), so the lane switches none.
_VIEW_LANE_SOURCE = """        if _plain and {base}.__class__ is Tensor and {base}._device is _CPU:
            _d0 = {base}._data
            try:
                _r = KERNEL(_d0{arguments})
            except Exception:
                _r = None  # the path below raises the op's named error
            if _r is not None:
                if _r is _d0:
                    return {base}
                _out = _result = _new(Tensor)
                _out._data = _r
                _out._device = _CPU
{link}"""


# An op with a view lane also gets ``entry.views(base, calls)``: the views of ``base`` that its entry
# would make for each tuple of arguments in ``calls`` (after the base), made in one frame with the lane's
# array function and ``_VIEW_SOURCE``'s links, what the links read of the base read once; None (nothing
# made) where the lane is closed, the base takes part in the graph (each view records: the entry's
# work), or the array function declines any of them, for the caller to call the entry per view, which
# records and names errors. The pieces of unbind, split and chunk: one call for all of them.
_VIEWS_SOURCE = """
    def views({base}, _calls):
        if not (_plain and {base}.__class__ is Tensor and {base}._device is _CPU):
            return None
        _recording = grad_state.enabled
        if _recording:
            _mask = 0
{checks}            if _mask:
                return None
        _d0 = {base}._data
        _root = {base}._base
        _vc = {base}._vc
        _owner, _parent = {base}, None
        if _root is not None:
            if _vc is None:
                _vc = _root._vc
            if {base}._view_fn is not None:
                _owner, _parent = _root, {base}._view_fn
        _version = _vc.value if _vc is not None else 0
        _views = []
        for {arguments} in _calls:
            try:
                _r = KERNEL(_d0, {arguments})
            except Exception:
                return None
            if _r is None or _r is _d0:
                return None
            _out = _new(Tensor)
            _out._data = _r
            _out._device = _CPU
            _out._base = _owner
            _out._view_fn = (_parent, entry, {replay}, {replay_keywords})
            if _vc is not None:
                _out._vc = _vc
            if _recording:
                _out._view_version = _version
            _views.append(_out)
        return _views

    entry.views = views
"""


def _view_lane(op, values, link):
    """The view lane's lines of a view op that declares its array function (``_VIEW_LANE_SOURCE``).
    ``values``: the entry's names of the forward's parameters, in order (the base first); ``link``:
    the lines that link a view to its base and record it (``_VIEW_SOURCE``)."""
    if op.extra_outputs or op.plain is not None:
        raise ValueError(f"op {op.name!r}: a view lane is for a view op of one output, with no plain lane")
    return _VIEW_LANE_SOURCE.format(
        base=values[0], arguments="".join(", " + name for name in values[1:]), link=_indented(link, 8)
    )


# The fast lane of an op declared with ``plain=family`` (registry.py): while no hook is
# attached (``_plain``), a call whose tensor inputs (the first one to three parameters) are CPU tensors of
# one float32/float64 array dtype (or as its ``_LaneKind`` says) and whose other arguments are their
# defaults (identity: an explicit ``alpha=1`` is the same int object; a ``scalars`` kind passes Python
# floats on) computes its output with the CPU backend's kernel for the op (``plain_unary``,
# ``plain_binary``, ``plain_scalars``, ``plain_reduce``), wrapped: what the forward computes,
# without its frames (the op, its helper, ``primitives``, the backend's checks: about half a small op's
# cost). A NumPy kernel runs under the quiet NumPy error state, as the forward would; the reductions'
# (one native call) cannot warn. An op that records then records as the entry's path does (the same
# checks of which inputs take part, the same plan; anomaly mode and version counters are the plan's).
# Autocast, the profiler, NVTX and capture are hooks, which close the lane. Anything else (a scalar,
# another dtype or device, a kernel that declines by returning None or raises) takes the entry's path
# below, which names errors.
_LANE_SOURCE = """        if _plain and {tests}:
{arrays}            if (
                {array_tests}
            ):
{call}                if _r is not None:
                    _out = _new(Tensor)
                    _out._data = _r if _r.__class__ is _ndarray else _asarray(_r)
                    _out._device = _CPU
{finish}                    return _out
"""

# the lane of an op whose kernel gives its result as it is (a Python bool: nothing to wrap or record)
_LANE_VALUE_SOURCE = """        if _plain and {tests}:
{arrays}            if (
                {array_tests}
            ):
{call}                if _r is not None:
                    return _r
"""

# what a differentiable op's lane does with its output before returning it: the entry's recording
_LANE_RECORD_SOURCE = """                    _mask = 0
{checks}                    if _mask and grad_state.enabled:
                        (PLANS[_mask] or OP.plan(_mask)).record(_out, _out, {values})
"""

_LANE_QUIET_CALL_SOURCE = """                _token = None if _errstate() is _QUIET else _quiet(_QUIET)
                try:
                    _r = KERNEL({kernel_args})
                except Exception:
                    _r = None  # the path below raises the op's named error
                finally:
                    if _token is not None:
                        _restore(_token)
"""

_LANE_CALL_SOURCE = """                try:
                    _r = KERNEL({kernel_args})
                except Exception:
                    _r = None  # the path below raises the op's named error
"""


class _LaneKind(NamedTuple):
    """What a ``plain=`` kind's lane takes: the CPU backend's kernels of its ops (``kernel_of(name)``),
    how many leading tensor parameters they read, whether NumPy's error state must be quiet around them
    (nothing a comparison, a logical or bitwise op or a classification computes can warn), whether the
    second operand may also be a Python float (in the first's floating dtype), the tensors' dtypes
    (``"float"``: float32 or float64, of one dtype; ``"any"``: any one dtype of ``_ANY_DTYPES``;
    ``"mask"``: a bool mask, then tensors of one floating dtype: ``where``), whether the parameters after
    the tensors go to the kernel, each a Python float or its default (else they must be their
    defaults), and whether the kernel's result is an array to wrap (else a value to return: equal's
    bool)."""

    kernel_of: Callable[[str], Any]
    tensors: int
    quiet: bool = True
    floats: bool = False
    dtypes: str = "float"
    scalars: bool = False
    wraps: bool = True


_PLAIN_KERNELS = {
    "unary": _LaneKind(plain_unary, 1),
    "binary": _LaneKind(plain_binary, 2, floats=True),
    "binary_tensors": _LaneKind(plain_binary, 2),
    "reduce": _LaneKind(plain_reduce, 1, quiet=False),
    "unary_any": _LaneKind(plain_unary, 1, quiet=False, dtypes="any"),
    "binary_any": _LaneKind(plain_binary, 2, quiet=False, floats=True, dtypes="any"),
    "scalars": _LaneKind(plain_scalars, 1, scalars=True),
    "binary_scalars": _LaneKind(plain_scalars, 2, scalars=True),
    "ternary_scalars": _LaneKind(plain_scalars, 3, scalars=True),
    "where": _LaneKind(plain_scalars, 3, dtypes="mask"),
    "predicate": _LaneKind(plain_predicate, 2, quiet=False, dtypes="any", wraps=False),
    "index": _LaneKind(plain_index, 1),
    # the products (mm, bmm, dot, ...) and the add-a-product ops (addmm, ...: input first, beta and alpha 1)
    "product": _LaneKind(plain_product, 2),
    "add_product": _LaneKind(plain_add_product, 3),
}


def _lane(op, defaults, values):
    """The fast lane's lines of an op declared ``plain`` (see ``_LANE_SOURCE``), and its kernel.
    ``values``: the entry's names of the forward's parameters, in order, which recording is given."""
    kind = _PLAIN_KERNELS[op.plain]
    n = kind.tensors
    kernel = kind.kernel_of(op.name)
    parameters = list(op.signature.parameters.values())
    if (
        op.view
        or op.extra_outputs
        or kernel is None
        or len(parameters) < n
        or any(p.kind != p.POSITIONAL_OR_KEYWORD for p in parameters[:n])
    ):
        raise ValueError(f"op {op.name!r}: plain={op.plain!r}: no such kernel for its first {n} parameters")
    names = [p.name for p in parameters[:n]]
    at_defaults, passed = [], []
    for p in parameters[n:]:
        default = defaults.get(p.name, _UNSET)
        literal = default is None or default is True or default is False
        same = f"{p.name} is {default if literal else f'_defaults[{p.name!r}]'}"
        if kind.scalars and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY):
            passed.append(p.name)
            at_defaults.append(f"({p.name}.__class__ is float{'' if default is _UNSET else f' or {same}'})")
        elif default is _UNSET:
            raise ValueError(f"op {op.name!r}: plain= needs a default for parameter {p.name!r}")
        else:
            at_defaults.append(same)
    finish = ""
    if not (op.composite or not op.differentiable):  # an op that records: as the entry's path does
        checks = "".join(_CHECK_SOURCE.format(x=x, bit=1 << i) for i, x in enumerate(op.inputs))
        finish = _LANE_RECORD_SOURCE.format(checks=_indented(checks, 20), values=", ".join(values))
    # a composite records through the ops it calls: no lane where they might (an input with a history,
    # or a view, which may have one)
    alone = _ALONE if op.composite and kind.wraps else None
    call = _LANE_QUIET_CALL_SOURCE if kind.quiet else _LANE_CALL_SOURCE
    floating = "(_d{i}.dtype is _F32 or _d{i}.dtype is _F64)"
    first = "_d0.dtype in _ANY_DTYPES" if kind.dtypes == "any" else floating.format(i=0)

    def dtype_test(i, first):
        if kind.dtypes == "mask":  # a bool mask, then tensors of one floating dtype
            return "_d0.dtype is _BOOL" if i == 0 else floating.format(i=1) if i == 1 else f"_d{i}.dtype is _d1.dtype"
        return f"_d{i}.dtype is _d0.dtype" if i else first

    def lane(tensors, type_tests, arguments, first):
        array_tests = []
        for i, x in enumerate(tensors):
            array_tests += [f"_d{i}.__class__ is _ndarray", dtype_test(i, first), f"{x}._device is _CPU"]
        untracked = [alone.format(x=x) for x in tensors] if alone else []
        return (_LANE_SOURCE if kind.wraps else _LANE_VALUE_SOURCE).format(
            tests=" and ".join(type_tests + at_defaults + untracked),
            arrays="".join(f"            _d{i} = {x}._data\n" for i, x in enumerate(tensors)),
            array_tests="\n                and ".join(array_tests),
            finish=finish,
            call=call.format(kernel_args=", ".join(arguments + passed)),
        )

    tensor_tests = [f"{x}.__class__ is Tensor" for x in names]
    source = lane(names, tensor_tests, [f"_d{i}" for i in range(n)], first)
    if kind.floats:  # the second operand may be a Python float, in the first's floating dtype
        second = names[1]
        source += lane(
            names[:1],
            [tensor_tests[0], f"{second}.__class__ is float"],
            ["_d0", f"_float_operand({second}, _d0.dtype)"],
            floating.format(i=0),
        )
    return source, kernel


_ALONE = "not ({x}._requires_grad or {x}._grad_fn is not None or {x}._base is not None)"

_CHECK_SOURCE = """if {x}.__class__ is Tensor:
    if {x}._requires_grad or {x}._grad_fn is not None or ({x}._base is not None and {x}.grad_fn is not None):
        _mask |= {bit}
elif {x}.__class__ in _SEQUENCES and _any_takes_part({x}):
    _mask |= {bit}
"""


# The direct lane of an op declared with ``direct=fn`` (registry.py; one that records nothing itself):
# while no hook is attached (``_plain``), the entry first calls ``fn`` with the forward's parameters by
# position, and returns what it gives unless that is None. ``fn`` is the op's common case in one frame
# (a factory's host array wrapped, a draw of the host module): the forward's keyword call, NumPy's error
# state switch (``fn`` makes no call that can warn) and the forward's helper frames are most of a small
# factory's cost. An error in it is the path's to raise, named: the call takes the path below.
_KERNEL_CALL_SOURCE = """        if _plain:
            try:
                _r = KERNEL({arguments})
            except Exception:
                _r = None  # the path below raises the op's named error
            if _r is not None:
"""
_DIRECT_SOURCE = _KERNEL_CALL_SOURCE + "                return _r\n"


# The kernel lane of an op declared with ``lane=fn`` (registry.py; one that records): while no hook is
# attached (``_plain``), the entry first calls ``fn`` with the forward's parameters by position; an
# array it gives is the output's, on the CPU, wrapped and recorded as the entry's path records (the same
# checks of which inputs take part, the same plan). ``fn`` checks its own case (the tensors' kind,
# device, dtype) and makes no NumPy call that can warn, so no error state is switched: the forward's
# frames and switch are what it saves (cat's: half of a small join's cost). None, or an error, takes
# the path below, which names it.
_KERNEL_LANE_SOURCE = _KERNEL_CALL_SOURCE + (
    "                _out = _new(Tensor)\n"
    "                _out._data = _r\n"
    "                _out._device = _CPU\n"
    "{finish}                return _out\n"
)


def _kernel_lane(op, values):
    """The kernel lane's lines of an op declared ``lane=fn`` (``_KERNEL_LANE_SOURCE``), and its kernel."""
    checks = "".join(_CHECK_SOURCE.format(x=x, bit=1 << i) for i, x in enumerate(op.inputs))
    finish = _LANE_RECORD_SOURCE.format(checks=_indented(checks, 20), values=", ".join(values))
    finish = "".join(line[4:] if line.strip() else line for line in finish.splitlines(keepends=True))
    return _KERNEL_LANE_SOURCE.format(arguments=", ".join(values), finish=finish), op.lane


def _indented(source, spaces):
    return "".join(" " * spaces + line if line else line for line in source.splitlines(keepends=True))


_SEQUENCES = (list, tuple)
_new = object.__new__
_ndarray, _asarray = np.ndarray, np.asarray
_F32, _F64, _BOOL = np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.bool_)
# the array dtypes of a lane of ``dtypes="any"``: those the CPU backend computes in as they are
_ANY_DTYPES = frozenset(
    np.dtype(t) for t in (np.bool_, np.uint8, np.int8, np.int16, np.int32, np.int64, np.float32, np.float64)
)
# the array dtypes (NumPy's, the CUDA runtime's) of floating point tensors seen
_FLOAT_ARRAYS: set[Any] = set()
_NO_KEYWORDS: dict[str, Any] = {}  # the keyword arguments a view replay passes (never written)


def _entry_filename(op):
    """Where a generated entry's code says it is: in this package (so user-stack walks such as the
    profiler's and anomaly mode's skip it), named after the op."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), f"<entry of op {op.name}>")


def _tuple(items):
    """The source of a tuple display of ``items`` (``*name`` ones unpacked): ``a, *b,``."""
    return "".join(item + ", " for item in items)


_SINGLE_TENSOR_ANNOTATIONS = ("Tensor", "Tensor | None")


def _tensor_params(op):
    """The parameters that must hold tensors, as (name, whether it is a sequence of them): those
    annotated ``Tensor``, ``Tensor | None`` or ``Sequence[Tensor]``, varargs of tensors, and the
    differentiable inputs. Varargs of sizes or of anything (``to(*args: Any)``: dtypes, devices) are not:
    an error below such an op is not its arguments' kind."""
    found = []
    for p in op.signature.parameters.values():
        if p.annotation in _SINGLE_TENSOR_ANNOTATIONS and p.kind != p.VAR_POSITIONAL:
            found.append((p.name, False))
        elif (
            p.annotation == "Sequence[Tensor]"
            or (p.kind == p.VAR_POSITIONAL and "Tensor" in str(p.annotation))
            or p.name in op.inputs
        ):
            found.append((p.name, True))
    return tuple(found)


def _adapt(op, error, tensors, values):
    """Raise what an op's failed forward raised as an adcuda error naming the op and its arguments
    (errors.adapt_error), the original kept as ``__cause__``: no raw NumPy or Python error reaches a
    user from an op. Runs only when the forward raised, so the hot path pays nothing for it."""
    if isinstance(error, (AttributeError, TypeError)):
        try:
            _check_inputs_are_tensors(op, error, tensors)
        except DTypeError as named:
            raise named from error
    else:
        # PyTorch checks an argument's kind before its value: a list of tensors holding something else
        # is its TypeError, whatever the op then found wrong with the list
        try:
            _check_sequence_items(op, tensors)
        except DTypeError as named:
            raise named from error
    # an internal op (no public form: slice_key, pad_nd) leaves the naming to the op that called it
    public = getattr(op, "forms", None) is None or any(op.forms.values())
    if not public and isinstance(error, AdcudaError):
        raise error
    adapted = adapt_error(op.name, error, zip(op.signature.parameters, values))
    if adapted is error:
        raise error
    raise adapted from error


def _check_sequence_items(op, values):
    """Refuse, naming it, an item of a sequence-of-tensors argument (cat's, meshgrid's) that is no
    Tensor, where PyTorch's argument parser raises TypeError: only once the op has failed, so the hot
    path pays nothing for it."""
    for (name, sequence), value in zip(op.tensor_params, values):
        if sequence and value.__class__ in _SEQUENCES:
            for i, item in enumerate(value):
                # (a nested list of tensors: einsum's operands given as one list; a sparse tensor: a layout error)
                if isinstance(item, Tensor) or getattr(item, "is_sparse", False):
                    continue
                if item.__class__ in _SEQUENCES and all(isinstance(t, Tensor) for t in item):
                    continue
                raise DTypeError(f"{op.name}: expected Tensor as element {i} of {name}, got {type(item).__name__}")


def _check_inputs_are_tensors(op, error, values):
    """After an op's forward failed on a missing attribute or a type (its own or an op it calls):
    name this op and the input that is not a Tensor (a list, a NumPy array), else let the error
    stand. The try around the forward costs nothing until it raises (Python's zero-cost exceptions),
    so the hot path keeps no per-input type check. A differentiable input with another annotation
    may also be a number or a sequence of Tensors."""
    if isinstance(error, AttributeError) or "SparseTensor" in str(error):
        # a sparse tensor has no array to read, and is no plain Tensor: the op takes dense ones only
        for value in values:
            if value.__class__ in _SEQUENCES:
                value = next((v for v in value if getattr(v, "is_sparse", False) is True), None)
            if getattr(value, "is_sparse", False) is True:
                raise LayoutError(
                    f"{op.name}: not supported for sparse tensors (layout {value.layout}); use .to_dense() first"
                ) from error
    if str(error).startswith(op.name + ":"):  # the op's own message says it best
        return
    for (name, sequence), value in zip(op.tensor_params, values):
        if value is None or value.__class__ is Tensor:
            continue
        if sequence and isinstance(value, numbers.Number):
            continue
        if sequence and value.__class__ in _SEQUENCES:
            for i, item in enumerate(value):
                if item.__class__ is not Tensor:
                    raise DTypeError(f"{op.name}: {name}[{i}] must be a Tensor, got {type(item).__name__}")
            continue
        raise DTypeError(f"{op.name}: {name} must be a Tensor, got {type(value).__name__}")


# NumPy's names that PyTorch takes for these parameters of every op (``x.sum(axis=1, keepdims=True)``)
_PARAMETER_ALIASES = (("keepdim", "keepdims"), ("dim", "axis"))
_UNSET = object()  # an alias not given
KEYWORD_ONLY = Parameter.KEYWORD_ONLY


def _aliases(signature):
    """(parameter, alias) for each NumPy name an op with this forward signature also takes."""
    params = signature.parameters
    return [(name, alias) for name, alias in _PARAMETER_ALIASES if name in params and alias not in params]


def _alias_parameters(op):
    """The keyword-only alias parameters of an op's entry, and the lines that read them into the
    parameters they stand for (an alias not given costs one identity check)."""
    aliases = _aliases(op.signature)
    prelude = "".join(f"        if {alias} is not _UNSET:\n            {name} = {alias}\n" for name, alias in aliases)
    return [f"{alias}=_UNSET" for _, alias in aliases], prelude


def _lane_before_dtype_check(op):
    """Whether an op's fast lane may run before its ``dtypes`` rule's check (which then runs only on
    the path): where the rule accepts the float32 and float64 tensors of a ``"float"`` lane, whose
    check (a function call for a rule of several operands) would only find them accepted."""
    rule, kind = op.dtypes, _PLAIN_KERNELS[op.plain]
    return rule is None or kind.dtypes == "float" and not {dt.float32, dt.float64} & rule.rejected


def _dtype_check(op):
    """The lines that refuse a first tensor argument (or promoted operands) of a dtype the op is not
    defined for (its ``dtypes`` rule), before autocast, the hooks or the forward see it; nothing for
    an op without one."""
    if op.dtypes is None:
        return ""
    for name in op.dtypes.operands:
        if name not in op.signature.parameters:
            raise ValueError(f"op {op.name!r}: dtypes= names {name!r}, which is not a forward parameter")
    if op.dtypes.operands:
        return f"        _check_operand_dtypes(NAME, OP.dtypes, ({_tuple(op.dtypes.operands)}))\n"
    first = next(iter(op.signature.parameters.values()))
    if first.kind not in (first.POSITIONAL_OR_KEYWORD, first.POSITIONAL_ONLY):
        raise ValueError(f"op {op.name!r}: dtypes= rules the first parameter, which must be a plain one")
    # one set lookup of the array's dtype once it has been found accepted (ACCEPTED: the rule's cache)
    return (
        f"        if {first.name}.__class__ is Tensor and {first.name}._data.dtype not in ACCEPTED:\n"
        f"            _check_first_dtype(NAME, OP.dtypes, {first.name})\n"
    )


def _maybe_by_alias(op):
    """The required positional parameters from the first one an alias stands for on: these are
    given by position, by name or (the first) by its alias."""
    aliased = {name for name, _ in _aliases(op.signature)}
    out, on = [], False
    for p in op.signature.parameters.values():
        on = on or (p.name in aliased and p.default is p.empty)
        if on and p.kind == p.POSITIONAL_OR_KEYWORD and p.default is p.empty:
            out.append(p.name)
    return out


def _varargs_local(p):
    """The entry's name for a varargs parameter of sizes or dims that also takes one sequence by its
    own name (``*shape_args`` beside ``shape=``), or None for other parameters."""
    if p.kind == p.VAR_POSITIONAL and _takes_its_name_by_keyword(p):
        return f"{p.name}_args"
    return None


def _optional(annotation):
    """A string annotation that also admits None (the default of a keyword not given)."""
    if annotation is Parameter.empty or "None" in str(annotation):
        return annotation
    return f"{annotation} | None"


def entry_signature(op, first=None):
    """What an op's entry takes, as ``inspect.signature`` shows it: the forward's parameters, a
    varargs of sizes or dims under its entry name with the sequence keyword beside it, and the
    keyword-only NumPy aliases (``axis``, ``keepdims``). ``first`` renames the first parameter
    (``self`` of an in-place form)."""
    parameters, extra = [], []
    for p in op.signature.parameters.values():
        local = _varargs_local(p)
        if local is not None:
            extra.append(p.replace(kind=KEYWORD_ONLY, default=None, annotation=_optional(p.annotation)))
            p = p.replace(name=local)
        parameters.append(p)
    for name, alias in _aliases(op.signature):
        aliased = op.signature.parameters[name]
        default, annotation = aliased.default, aliased.annotation
        if default is aliased.empty:  # given by position, by name or by this alias
            default, annotation = None, _optional(annotation)
        extra.append(aliased.replace(name=alias, kind=KEYWORD_ONLY, default=default, annotation=annotation))
    var_keywords = [p for p in parameters if p.kind == p.VAR_KEYWORD]
    parameters = [p for p in parameters if p.kind != p.VAR_KEYWORD] + extra + var_keywords
    if first is not None:
        parameters[0] = parameters[0].replace(name=first, annotation="Tensor")
    returns = "Tensor" if op.extra_outputs or first is not None else op.signature.return_annotation
    return op.signature.replace(parameters=parameters, return_annotation=returns)


def _takes_its_name_by_keyword(p):
    """Whether a varargs parameter of sizes or dims (``*shape``, ``*dims``) also takes one sequence by
    its name, as PyTorch's ``x.reshape(shape=(2, 3))``, ``x.permute(dims=(1, 0))``; not one of tensors."""
    annotation = str(p.annotation)
    return "int" in annotation and "Tensor" not in annotation


def _bare_names(*sources):
    """The names the generated code reads or binds (not attributes, not ``{placeholders}``)."""
    code = re.sub(r"#.*", "", re.sub(r"\{\w*\}", "", "\n".join(sources)))
    return frozenset(re.findall(r"(?<![\w.])[A-Za-z_]\w*", code))


# What an entry's code calls by name besides its parameters: a forward parameter of one of these names
# would shadow it inside the entry (a parameter ``mask`` replaced by the recording's bit mask), so the
# declaration is refused. The entry's own locals start with an underscore, as no PyTorch parameter does.
_RESERVED = _bare_names(
    _PLAIN_SOURCE, _ENTRY_SOURCE, _BODY_SOURCE, _VIEW_BODY_SOURCE, _VIEW_SOURCE, _CHECK_SOURCE,
    _LANE_SOURCE, _LANE_VALUE_SOURCE, _LANE_QUIET_CALL_SOURCE, _LANE_RECORD_SOURCE, _VIEW_LANE_SOURCE,
    _KERNEL_LANE_SOURCE, _VIEWS_SOURCE,
) | {
    "_UNSET", "DTypeError", "_check_operand_dtypes", "_check_first_dtype",  # the preludes' names
}  # fmt: skip


def _generated_entry(op):
    clashes = sorted(set(op.signature.parameters) & _RESERVED)
    if clashes:
        raise ValueError(f"op {op.name!r}: forward parameters {clashes} are names its generated entry uses")
    signature, call, positional, keywords, values = [], [], [], [], []
    local = {}  # a parameter's name in the entry, where it differs: a varargs one that is also a keyword
    defaults = {}
    keyword_only = False
    extra_keywords = None
    # a required parameter that an alias may stand for (gather(x, axis=0, index=i)), and the plain
    # ones after it, default to _UNSET in the entry and are checked after the aliases are read
    required = _maybe_by_alias(op)
    for p in op.signature.parameters.values():
        default = ""
        if p.default is not p.empty:
            defaults[p.name] = p.default
            default = f"=_defaults[{p.name!r}]"
        elif p.name in required:
            default = "=_UNSET"
        if p.kind == p.VAR_POSITIONAL:
            name = p.name
            if _varargs_local(p) is not None:
                name = local[p.name] = _varargs_local(p)
            signature.append("*" + name)
            call.append("*" + name)
            positional.append("*" + name)
            keyword_only = True
            values.append(name)
            continue
        elif p.kind == p.KEYWORD_ONLY:
            if not keyword_only:
                signature.append("*")
                keyword_only = True
            signature.append(p.name + default)
            call.append(f"{p.name}={p.name}")
            keywords.append(f"{p.name!r}: {p.name}")
        elif p.kind == p.POSITIONAL_OR_KEYWORD:
            signature.append(p.name + default)
            call.append(p.name)
            positional.append(p.name)
        elif p.kind == p.VAR_KEYWORD and (op.composite or not op.differentiable):
            signature.append("**" + p.name)
            call.append("**" + p.name)
            extra_keywords = p.name
        else:
            raise ValueError(
                f"op {op.name!r}: forward parameters must be plain, *args or keyword-only "
                "(and **kwargs for an op that records nothing itself)"
            )
        values.append(p.name)
    alias_parameters, prelude = _alias_parameters(op)
    dtype_check = _dtype_check(op)
    lane_first = op.plain is not None and _lane_before_dtype_check(op)
    if not lane_first:
        prelude += dtype_check
    for name, varargs in local.items():  # x.reshape(shape=(2, 3)): the sequence by keyword
        alias_parameters.append(f"{name}=_UNSET")
        prelude += (
            f"        if {name} is not _UNSET:\n"
            f"            if {varargs}:\n"
            f"                raise DTypeError(NAME + ': got {name} both as positional arguments and by keyword')\n"
            f"            {varargs} = ({name},)\n"
        )
    for name in required:
        prelude += (
            f"        if {name} is _UNSET:\n"
            f"            raise DTypeError(NAME + \": missing required argument '{name}'\")\n"
        )
    if alias_parameters:
        at = len(signature) - (1 if extra_keywords else 0)  # before **kwargs
        signature[at:at] = ([] if keyword_only else ["*"]) + alias_parameters
    keywords = "{" + ", ".join(keywords + ([f"**{extra_keywords}"] if extra_keywords else [])) + "}"
    op.tensor_params = _tensor_params(op)
    lane, kernel = _lane(op, defaults, values) if op.plain is not None else ("", None)
    if op.direct is not None:
        lane, kernel = _DIRECT_SOURCE.format(arguments=", ".join(values)), op.direct
    if op.lane is not None:
        lane, kernel = _kernel_lane(op, values)
    if lane_first:
        lane += dtype_check  # (after the lane: the path's)
    if op.composite or not op.differentiable:
        source = _PLAIN_SOURCE.format(
            signature=", ".join(signature),
            positional=_tuple(positional),
            keywords=keywords,
            call=", ".join(call),
            tensors=_tuple(local.get(name, name) for name, _ in op.tensor_params),
            values_tuple=_tuple(values),
            prelude=prelude,
            lane=lane,
        )
        made = {}
        exec(compile(source, _entry_filename(op), "exec"), globals(), made)
        return made["make"](op.forward, op, op.name, defaults, _accepted_arrays(op), kernel)
    checks = "".join(_CHECK_SOURCE.format(x=x, bit=1 << i) for i, x in enumerate(op.inputs))
    views = ""
    if op.view:
        base = values[0]
        rest = [c for c in call[1:] if "=" not in c]
        # the arguments a replay passes after the base: a variadic parameter's tuple as it is, and
        # the keyword-only ones (x.view(dtype=...), x.expand(..., implicit=True)) by name
        replay = rest[0][1:] if len(rest) == 1 and rest[0].startswith("*") else "(" + _tuple(rest) + ")"
        replay_keywords = keywords if len(call) > len(rest) + 1 else "_NO_KEYWORDS"
        link = _VIEW_SOURCE.format(
            base=base,
            replay=replay,
            replay_keywords=replay_keywords,
            checks=_indented(checks, 12),
            values=", ".join(values),
        )
        body = _VIEW_BODY_SOURCE.format(
            call=", ".join(call),
            output="_result[0]" if op.extra_outputs else "_result",
            base=base,
            link=link,
            tensors=_tuple(local.get(name, name) for name, _ in op.tensor_params),
            values_tuple=_tuple(values),
        )
        if callable(op.view):
            lane, kernel = _view_lane(op, values, link), op.view
            if len(values) > 1 and not keyword_only:  # (the arguments after the base, each a name)
                views = _VIEWS_SOURCE.format(
                    base=base,
                    arguments=_tuple(values[1:]),
                    checks=_indented(checks, 12),
                    replay=replay,
                    replay_keywords=replay_keywords,
                )
    else:
        body = _BODY_SOURCE.format(
            call=", ".join(call),
            output="_result[0]" if op.extra_outputs else "_result",
            checks=_indented(checks, 8),
            values=", ".join(values),
            tensors=_tuple(local.get(name, name) for name, _ in op.tensor_params),
            values_tuple=_tuple(values),
        )
    source = _ENTRY_SOURCE.format(
        signature=", ".join(signature),
        body=body,
        views=views,
        positional=_tuple(positional),
        keywords=keywords,
        tensors=_tuple(local.get(name, name) for name, _ in op.tensor_params),
        values_tuple=_tuple(values),
        prelude=prelude,
        lane=lane,
    )
    # defined with this module's globals, so the entry reads _slow and _around_chain as they change
    made = {}
    exec(compile(source, _entry_filename(op), "exec"), globals(), made)
    return made["make"](op.forward, op, op.name, defaults, _accepted_arrays(op), op.plans, kernel)


def _accepted_arrays(op):
    """The array dtypes found accepted by the op's ``dtypes`` rule (shared by the ops of one rule)."""
    return op.dtypes.accepted_arrays if op.dtypes is not None else None


class NotAView:
    """What a view op's forward returns where it had to copy instead (reshape of a tensor whose
    strides allow no view): ``tensor``, made by other ops, which recorded its history."""

    __slots__ = ("tensor",)

    def __init__(self, tensor):
        self.tensor = tensor


# ----------------------------------------------------------------------------------------------
# recording
#
# What a node of an op keeps for its formulas: one item per read of the plan, in order, packed as
# ``graph.pack`` packs them (a tensor with its version counter's value, another value as
# ``(None, value)``). A node with a tensor among them keeps them as ``_saved``, which backward frees
# (and running it again then raises); one with plain values only keeps them as ``raw``, so its graph
# can run backward twice, as in PyTorch.
#
# Recording and backward are generated for each backward plan (an op and the set of its inputs that
# take part), from the plan's reads and formulas: straight-line code, with no loop over inputs or
# reads and nothing looked up by name on the hot path (``plan_functions``). An input passed as a list
# of tensors (cat, stack) takes the general path (``_record_with_lists`` and ``op_backward``).
def _pack(v, out):
    """``graph.pack(v, (out,))`` for one output, inlined in spirit: a value saved for backward."""
    if v.__class__ is not Tensor:
        return (None, v)
    vc = v._vc
    if vc is None:
        vc = version_counter(v)
    if v is out:  # the node's own output: kept as its data, not as the tensor (no cycle through grad_fn)
        return (vc, vc.value, None, v._data, v._device, v._output_nr)
    return (vc, vc.value, v)


# array dtype (NumPy's, the CUDA runtime's) -> adcuda dtype, for what recording notes of each input
_DTYPE_OF_ARRAY: dict[Any, Any] = {}


def _dtype_of(t):
    d = _DTYPE_OF_ARRAY[t._data.dtype] = t.dtype
    return d


def _meta(t):
    """What backward needs of an input to bring its gradient back: shape, array dtype, dtype."""
    data = t._data
    array_dtype = data.dtype
    return (data.shape, array_dtype, _DTYPE_OF_ARRAY.get(array_dtype) or _dtype_of(t))


def _is_float_result(out):
    raw = out._data.dtype
    if raw in _FLOAT_ARRAYS:
        return True
    if not out.dtype.is_floating_point:
        return False
    _FLOAT_ARRAYS.add(raw)
    return True


_RECORD_SOURCE = """
def record(out, result, {params}):
    if out._data.dtype not in _FLOAT_ARRAYS and not _is_float_result(out):
        return
{inputs}    node = _new(NODE)
{name}    node.next_edges = ({edges})
    node.metas = ({metas})
    node.seq = next(_sequence)
    if anomaly.enabled_somewhere and anomaly.is_anomaly_enabled():
        node.trace = anomaly.forward_trace()
    if graph._node_observer is not None:
        graph._node_observer(node)
{saves}    out._grad_fn = node
    if out._view_version is not None:
        out._view_version = version_of(out)
"""

_RECORD_INPUT_SOURCE = """    if {x}.__class__ is not Tensor:
        return _record_with_lists(OP, MASK, out, result, ({values}))
    if {x} is out:  # the op returned its input unchanged (contiguous of a contiguous tensor)
        return
    node = {x}._grad_fn
    if {x}._base is not None:
        edge{i} = edge_of({x})
    elif node is not None:
        edge{i} = (node, {x}._output_nr)
    elif {x}._accumulator is not None:  # a leaf that requires grad (it takes part), seen before
        edge{i} = ({x}._accumulator, 0)
    else:
        edge{i} = edge_of({x})
    data = {x}._data
    meta{i} = (data.shape, data.dtype, _DTYPE_OF_ARRAY.get(data.dtype) or _dtype_of({x}))
"""

# ``_pack`` of the node's output and of a parameter, inlined
_PACK_RESULT_SOURCE = """    vc = out._vc
    if vc is None:
        vc = version_counter(out)
    item{k} = (vc, vc.value, None, out._data, out._device, out._output_nr)
"""

_PACK_PARAMETER_SOURCE = """    if {value}.__class__ is Tensor and {value} is not out:
        vc = {value}._vc
        if vc is None:
            vc = version_counter({value})
        item{k} = (vc, vc.value, {value})
    else:
        item{k} = _pack({value}, out)
"""

_BACKWARD_SOURCE = """
def backward(node, grad):
{unpack}{run}{finish}    return ({grads})
"""

_UNPACK_SOURCE = """    items = node._saved
    if items is None:
        items = node.raw
        if items is None:
            raise AutogradError(FREED_MESSAGE)
"""

# a gradient brought back to its input's shape (undoing broadcasting) and dtype
_FINISH_SOURCE = """    if g{i} is not None:
        meta = node.metas[{i}]
        if g{i}._data.shape != meta[0]:
            g{i} = sum_to_shape(g{i}, meta[0])
        if g{i}._data.dtype != meta[1]:
            g{i} = g{i}.to(dtype=meta[2])
"""


def plan_functions(op, plan, mask):
    """The generated ``record(out, result, *values)`` and ``backward(node, grad)`` of a plan."""
    params = [f"_v{i}" for i in range(len(op.signature.parameters))]  # the forward's arguments, in order
    namespace = {"OP": op, "PLAN": plan, "MASK": mask}
    inputs, edges, metas = [], [], []
    for i, position in enumerate(plan.input_positions):
        if mask >> i & 1:
            inputs.append(_RECORD_INPUT_SOURCE.format(x=params[position], i=i, values=_tuple(params)))
            edges.append(f"edge{i}")
            metas.append(f"meta{i}")
        else:
            edges.append("None")
            metas.append("None")
    # the plan's node class: what every node of the plan shares (its plan, backward and, unless it
    # depends on the arguments, its name) is read from the class, not written into each node
    node_class = {"plan": plan, "__slots__": ()}
    if op.node.__class__ is str:
        node_class["name"] = node_name(op.node)
        name = ""
    else:
        # a name that depends on the arguments: the node function called as the forward was
        namespace["NODE_NAME"] = op.node
        arguments = []
        for value, p in zip(params, op.signature.parameters.values()):
            if p.kind == p.VAR_POSITIONAL:
                arguments.append("*" + value)
            elif p.kind == p.KEYWORD_ONLY:
                arguments.append(f"{p.name}={value}")
            else:
                arguments.append(value)
        name = f"    node.name = node_name(NODE_NAME({', '.join(arguments)}))\n"
    saves = ""
    if plan.sources:
        reads = []
        maybe_tensors = []
        for k, (source, position) in enumerate(plan.sources):
            if source is _RESULT:
                saves += _PACK_RESULT_SOURCE.format(k=k)
            elif source is _PARAMETER:
                saves += _PACK_PARAMETER_SOURCE.format(k=k, value=params[position])
            elif source is _EXTRA:
                saves += f"    item{k} = _pack(result[{position}], out)\n"
            else:
                reads.append(f"(None, _metadata({params[position]}, {source!r}))")
                continue
            reads.append(f"item{k}")
            maybe_tensors.append(k)
        saves += f"    items = [{', '.join(reads)}]\n"
        if maybe_tensors:
            any_tensor = " or ".join(f"items[{k}][0] is not None" for k in maybe_tensors)
            saves += f"    if {any_tensor}:\n        node._saved = items\n    else:\n        node.raw = items\n"
        else:
            saves += "    node.raw = items\n"
    record_source = _RECORD_SOURCE.format(
        params=", ".join(params),
        inputs="".join(inputs),
        name=name,
        edges=_tuple(edges),
        metas=_tuple(metas),
        saves=saves,
    )

    unpack = ""
    if plan.sources:
        unpack = _UNPACK_SOURCE + "".join(f"    read{k} = unpack(items[{k}], node)\n" for k in range(len(plan.sources)))

    def run(formulas, indent):
        lines = []
        for fn, slots, targets in formulas:
            key = f"F{len(namespace)}"
            namespace[key] = fn
            args = ", ".join("grad" if s == -1 else f"read{s}" for s in slots)
            if len(targets) == 1:
                lines.append(f"{indent}g{targets[0]} = {key}({args})")
            else:
                lines.append(f"{indent}both = {key}({args})")
                lines += [f"{indent}g{t} = both[{n}]" for n, t in enumerate(targets)]
        return "\n".join(lines) + "\n"

    wanted = [i for i in range(plan.n_inputs) if mask >> i & 1]
    body = "".join(f"    g{i} = None\n" for i in range(plan.n_inputs))
    if plan.fused is not None:
        # the fused formulas for plain first-order backward; the composite ones (differentiable) while
        # a graph of the backward is being built
        body += "    if grad_state.enabled:\n" + run(plan.formulas, "        ")
        body += "    else:\n" + run(plan.fused, "        ")
    else:
        body += run(plan.formulas, "    ")
    finish = "".join(_FINISH_SOURCE.format(i=i) for i in wanted)
    grads = _tuple(f"g{i}" if i in wanted else "None" for i in range(plan.n_inputs))
    backward_source = _BACKWARD_SOURCE.format(unpack=unpack, run=body, finish=finish, grads=grads)

    # the functions' globals: this module's names (none of which is rebound after import) and the plan's
    scope = {**globals(), **namespace}
    filename = os.path.join(os.path.dirname(os.path.abspath(__file__)), f"<backward plan of op {op.name}>")
    exec(compile(backward_source, filename, "exec"), scope)
    node_class["backward_fn"] = staticmethod(scope["backward"])
    scope["NODE"] = type(OpNode)(node_class.get("name", OpNode.__name__), (OpNode,), node_class)
    exec(compile(record_source, filename, "exec"), scope)
    return scope["record"], scope["backward"]


def _record_with_lists(op, mask, out, result, values):
    """Recording for an op with a list-of-tensors input (cat): one edge per tensor of the list."""
    plan = op.plans[mask]
    edges = []
    metas = []
    bit = 1
    for position in plan.input_positions:
        v = values[position]
        group = v if v.__class__ in _SEQUENCES else (v,)
        for t in group:
            e = edge_of(t) if mask & bit and t.__class__ is Tensor else None
            edges.append(e)
            metas.append(None if e is None else _meta(t))
        bit <<= 1
    node = OpNode(op.node if op.node.__class__ is str else op.call(op.node, values), tuple(edges), plan, metas)
    node.list_sizes = tuple(len(values[p]) if values[p].__class__ in _SEQUENCES else 1 for p in plan.input_positions)
    if plan.sources:
        items = [_pack(_read(source, position, out, result, values), out) for source, position in plan.sources]
        if any(item[0] is not None for item in items):
            node._saved = items
        else:
            node.raw = items
    out._grad_fn = node
    if out._view_version is not None:
        out._view_version = version_of(out)


def _read(source, position, out, result, values):
    if source is _PARAMETER:
        return values[position]
    if source is _RESULT:
        return out
    if source is _EXTRA:
        return result[position]
    return _metadata(values[position], source)


# where a formula's read comes from (BackwardPlan.sources)
_RESULT, _EXTRA, _PARAMETER = "result", "extra", "parameter"


def read_source(op, name):
    """``(source, position)`` for a formula's read: the op's output, an extra output (position: its
    index in what the forward returns), a forward parameter, or a parameter's metadata (source:
    "shape", "dtype" or "device"; position: the parameter's in the forward's arguments)."""
    if name == "result":
        return _RESULT, None
    if name in op.extra_outputs:
        return _EXTRA, op.extra_outputs.index(name) + 1
    if name in op.params:
        return _PARAMETER, op.positions[name]
    param, _, what = name.rpartition("_")
    return what, op.positions[param]


def _metadata(value, what):
    """The shape, dtype, device or layout (shape, strides and storage offset) of a tensor argument (a
    tuple of them for a list of tensors; None for None)."""
    if value.__class__ is Tensor:
        if what == "layout":
            return value._data.shape, value.stride(), value.storage_offset()
        return value._data.shape if what == "shape" else getattr(value, what)
    if value.__class__ in _SEQUENCES:
        return tuple(_metadata(v, what) for v in value)
    return None


def op_backward(node, grad):
    """The general backward of a node of an op (the generated one of its plan does the same, for an
    op without list inputs): run the formulas of ``node``'s plan, the fused ones for plain
    first-order backward, the composite ones while a graph of the backward is being built; then
    bring each gradient back to its input's shape (undoing broadcasting) and dtype."""
    plan = node.plan
    formulas = plan.fused if plan.fused is not None and not grad_state.enabled else plan.formulas
    values = ()
    if plan.sources:
        items = node._saved
        if items is None:
            items = node.raw
            if items is None:
                raise AutogradError(FREED_MESSAGE)
        values = [unpack(item, node) for item in items]
    grads = [None] * plan.n_inputs
    for fn, slots, targets in formulas:
        result = fn(*[grad if s == -1 else values[s] for s in slots])
        if len(targets) == 1:
            grads[targets[0]] = result
        else:
            for t, g in zip(targets, result):
                grads[t] = g
    sizes = node.list_sizes
    if sizes is not None:
        flat = []
        for g, n in zip(grads, sizes):
            if n == 1 and not isinstance(g, _SEQUENCES):
                flat.append(g)
            else:
                flat.extend(g if g is not None else (None,) * n)
        grads = flat
    metas = node.metas
    for i, meta in enumerate(metas):
        g = grads[i]
        if meta is None or g is None:
            grads[i] = None
            continue
        data = g._data
        if data.shape != meta[0]:
            g = sum_to_shape(g, meta[0])
        if g._data.dtype != meta[1]:
            g = g.to(dtype=meta[2])
        grads[i] = g
    return grads


class OpNode(Node):
    """A node of a registry op: its backward runs the op's formulas (the plan's generated backward,
    or ``op_backward``). The generated recording writes its fields directly; ``__init__`` is for the
    general path."""

    backward_fn = staticmethod(op_backward)
    num_outputs = 1
    list_sizes = None
    raw = None

    def __init__(self, name, next_edges, plan, metas):
        self.name = node_name(name)
        self.next_edges = next_edges
        self.plan = plan
        self.metas = metas
        self.seq = next(_sequence)
        if anomaly.enabled_somewhere and anomaly.is_anomaly_enabled():
            self.trace = anomaly.forward_trace()
        if graph._node_observer is not None:
            graph._node_observer(self)


# ----------------------------------------------------------------------------------------------
# in-place forms
def make_inplace_entry(op):
    """``Tensor.<name>_``: the out-of-place op written into the tensor. While recording, the op runs
    on a clone, so a backward rule that saved the old value keeps it."""
    name = op.forms["inplace"][0]
    forward = op.forward
    entry_of = op
    inplace_op = _InplaceName(name, op)
    aliases = _aliases(op.signature)
    rule = op.dtypes
    signature, first = entry_signature(op, first="self"), next(iter(op.signature.parameters))

    def body(self, *args, **kwargs):
        if kwargs:
            for pname, alias in aliases:  # x.index_add_(axis=0, ...): the forward takes dim=
                if alias in kwargs:
                    kwargs[pname] = kwargs.pop(alias)
        check_inplace_allowed(self, name)
        if rule is not None:
            if rule.operands:
                arguments = dict(signature.bind(self, *args, **kwargs).arguments)
                arguments[first] = self  # the forward's name for what the in-place form calls self
                _check_operand_dtypes(name, rule, tuple(arguments.get(n) for n in rule.operands))
            elif self._data.dtype not in rule.accepted_arrays:
                _check_first_dtype(name, rule, self)
        recording = grad_state.enabled and (
            _takes_part(self) or _any_takes_part(args) or (kwargs and _any_takes_part(kwargs.values()))
        )
        if not recording:
            result = forward(self, *args, **kwargs)
            if entry_of.extra_outputs:
                result = result[0]
            result = _as_dtype_of(self, result, name)
            if result._data.shape != self._data.shape:
                try:
                    result = Tensor._make(primitives(result).expand(result._data, self._data.shape), result._device)
                except ValueError:
                    pass  # commit_inplace raises the error naming the op
            return commit_inplace(self, result, name)
        source = self.clone()
        result = _as_dtype_of(self, entry_of.entry(source, *args, **kwargs), name)
        return commit_inplace(self, result, name)

    lane = _inplace_lane(op)

    def inplace_entry(self, *args, **kwargs):
        if lane is not None and _plain and not kwargs:
            done = lane(self, args)
            if done is not None:
                return done
        token = None if _errstate() is _QUIET else _quiet(_QUIET)
        try:
            if _slow:
                return _around_chain(name, op, body, (self,) + args, kwargs)
            return body(self, *args, **kwargs)
        except Exception as error:
            _adapt(inplace_op, error, *_bound_arguments(inplace_op, (self,) + args, kwargs))
        finally:
            if token is not None:
                _restore(token)

    inplace_entry.__name__ = inplace_entry.__qualname__ = name
    inplace_entry.__doc__ = f"In-place {op.name}: {op.doc}"
    inplace_entry.__signature__ = entry_signature(op, first="self")
    inplace_entry.op = op
    return inplace_entry


def _inplace_lane(op):
    """The fast lane of an in-place form of an op declared ``plain`` (see ``_LANE_SOURCE``): a function
    of ``(self, args)`` that writes the kernel's result into ``self`` and returns it, or returns None
    for the in-place entry's path. It takes the case where that path writes the forward's result
    (same shape and dtype) straight back, with nothing to check or record beyond the version
    counter: grad mode off, or neither operand taking part and ``self`` no view (a view's own
    checks and history are the path's)."""
    if op.plain is None:
        return None
    kind = _PLAIN_KERNELS[op.plain]
    rule = op.dtypes
    if kind.dtypes != "float" or kind.scalars or kind.tensors > 2 or (rule is not None and rule.operands):
        return None  # (the in-place path of those: a result of another dtype, parameters to check; addmm_'s)
    kernel, n, quiet, floats = kind.kernel_of(op.name), kind.tensors, kind.quiet, kind.floats

    def lane(self, args):
        if self.__class__ is not Tensor or len(args) != n - 1:
            return None
        data = self._data
        if not (
            data.__class__ is _ndarray
            and (data.dtype is _F32 or data.dtype is _F64)
            and self._device is _CPU
            and 0 not in data.strides  # (an expanded tensor: the path's check names the error)
            and (rule is None or data.dtype in rule.accepted_arrays)  # (as the path found it)
        ):
            return None
        recording = grad_state.enabled
        if recording and (self._base is not None or self._requires_grad or self._grad_fn is not None):
            return None
        operands = (data,)
        if n == 2:
            other = args[0]
            if other.__class__ is Tensor:
                second = other._data
                if second.__class__ is not _ndarray or second.dtype is not data.dtype or other._device is not _CPU:
                    return None
                if recording and _takes_part(other):
                    return None
            elif other.__class__ is float and floats:
                second = _float_operand(other, data.dtype)
            else:
                return None
            operands = (data, second)
        token = None if not quiet or _errstate() is _QUIET else _quiet(_QUIET)
        try:
            result = kernel(*operands)
        except Exception:
            return None  # the path raises the named error
        finally:
            if token is not None:
                _restore(token)
        if result is None or result.shape != data.shape or result.dtype is not data.dtype:
            return None  # (broadcast to another shape, a bool comparison: the path casts or refuses)
        data[...] = result  # as the path's copy_
        version_counter(self).value += 1
        return self

    return lane


class _InplaceName:
    """What ``_adapt`` reads of an op, for its in-place form: the name users called, the signature and
    the tensor parameters (to name an argument that is no tensor)."""

    __slots__ = ("name", "signature", "tensor_params")

    def __init__(self, name, op):
        self.name = name
        self.signature = op.signature
        self.tensor_params = _tensor_params(op)


def _bound_arguments(op, args, kwargs):
    """``(tensors, values)`` of a failed in-place call, as a generated entry passes them to ``_adapt``:
    the values of the op's tensor parameters and of all its parameters, in order (only the
    positional ones where the arguments do not fit the signature)."""
    try:
        bound = op.signature.bind(*args, **kwargs).arguments
    except TypeError:
        return (), args
    tensors = tuple(bound.get(name) for name, _ in op.tensor_params)
    return tensors, tuple(bound.get(name) for name in op.signature.parameters)


def _as_dtype_of(t, result, name):
    if result._data.dtype is t._data.dtype or result.dtype is t.dtype:  # (one array dtype: one dtype)
        return result
    if result.dtype.category > t.dtype.category:
        raise ResultTypeError(f"{name}: result type {result.dtype} can't be cast to the desired output type {t.dtype}")
    return result.to(dtype=t.dtype)


# ----------------------------------------------------------------------------------------------
# host steps: library calls that graph capture replays as Python
_host_step_observer = None
_Step = TypeVar("_Step", bound=Callable[..., Any])  # what host_step gives back: the function's own signature


def host_step(fn: _Step) -> _Step:
    """Mark a library function whose Python side must run on every call: it keeps state on the host
    (an optimizer's step count and learning rate, a scheduler's epoch, a GradScaler's skip decision)
    or reads values to check them (class targets in range). Graph capture (adcuda.capture) records a
    call of it as one step and calls it again on every replay, instead of freezing the primitive calls
    it made; without capture it is the plain call."""

    @functools.wraps(fn)
    def step(*args, **kwargs):
        if _host_step_observer is None:
            return fn(*args, **kwargs)
        return _host_step_observer(fn, args, kwargs)

    step.host_step = fn  # type: ignore[attr-defined]  # capture finds the function to call again here
    return step  # type: ignore[return-value]  # the same signature, by functools.wraps


# Set by graph capture while it records: sees every nn.Module call, so that a program can check that
# the modules it ran are still in the mode (train/eval) they were captured in.
module_call_observer = None


def set_module_call_observer(observer):
    """Install ``observer(module)`` (or None); returns the previous one."""
    global module_call_observer
    previous, module_call_observer = module_call_observer, observer
    return previous


def set_host_step_observer(observer):
    """Install ``observer(fn, args, kwargs)`` (or None), which then runs every host step; returns
    the previous one."""
    global _host_step_observer
    previous, _host_step_observer = _host_step_observer, observer
    return previous
