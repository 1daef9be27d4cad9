"""Swapping adcuda's op entry points for observed ones while a session (``emit_nvtx()`` or
``profile()``) is active, and back when the last one ends, so that nothing is paid per op while
none is: after the last session, ``Tensor.__add__ is adcuda.ops.elementwise.add`` again.

The ops a user can reach are Tensor's methods, operators and properties and the public functions
of ``adcuda`` and ``adcuda.nn.functional`` that are defined by an op module. Each is wrapped once
and the wrapper replaces it everywhere adcuda refers to it (Tensor's attributes and every adcuda
module's globals), so an op reached through an internal import (``nn.Linear`` -> ``F.linear``) is
observed as well. While a ``profile()`` records, every backend primitive is wrapped too, to count
kernel launches; the autograd engine runs backward rules through ``observe_backward``; and
``ops._core.record`` is wrapped (wherever bound) to link each node to the op that recorded it.
Optimizer steps, GradScaler and DataLoader batch fetches get ranges too (``library_ranges``).
"""
import functools
import importlib
import sys
import threading
import types

from ..autograd import engine
from ..backends import PRIMITIVES
from ..ops import _core
from ..tensor import Tensor
from . import _state, library_ranges
from .observe import linking_record, observe_backward, observe_op

_OP_MODULES = ("adcuda.factories", "adcuda.nn.functional")
_PUBLIC_NAMESPACES = ("adcuda", "adcuda.nn.functional")
_BACKEND_MODULES = ("adcuda.backends.cpu", "adcuda.backends.cuda")

_lock = threading.Lock()
_sessions = 0               # active sessions (each needs the observed ops)
_counting_sessions = 0      # active profile() sessions (each needs launch counts)
_swapped = []               # (owner, attribute, original, replacement), in the order they were made
_wrappers = {}              # id(wrapper) -> wrapper, for the ops observed now
_counted = []               # (backend module, primitive, original, replacement)


def acquire(count_launches=False):
    global _sessions, _counting_sessions
    with _lock:
        if _sessions == 0:
            _install_ops()
        _sessions += 1
        if count_launches:
            if _counting_sessions == 0:
                _install_launch_counting()
            _counting_sessions += 1


def release(count_launches=False):
    global _sessions, _counting_sessions
    with _lock:
        if count_launches:
            _counting_sessions -= 1
            if _counting_sessions == 0:
                _restore(_counted)
        _sessions -= 1
        if _sessions == 0:
            _uninstall_ops()


def is_installed():
    return _sessions > 0


# ------------------------------------------------------------------------------------------------
# ops
def _is_op_function(fn):
    if type(fn) is not types.FunctionType:
        return False
    module = fn.__module__ or ""
    return (module.startswith("adcuda.ops.") and module != "adcuda.ops._core") or module in _OP_MODULES


def _op_name(fn, attribute):
    """``add`` for ``Tensor.__add__ = add``; for a lambda, the op it wraps (``__radd__`` ->
    ``add``) or else the attribute's name (``cpu``)."""
    name = fn.__name__
    if name == "<lambda>":
        wrapped = [f for f in _closure_values(fn) if _is_op_function(f)]
        name = wrapped[0].__name__ if len(wrapped) == 1 else attribute
    return _plain(name)


def _closure_values(fn):
    for cell in fn.__closure__ or ():
        try:
            yield cell.cell_contents
        except ValueError:  # a cell not filled yet
            continue


def _plain(name):
    """``add`` for ``__add__``, ``T`` for ``_T``; ``add_`` stays ``add_``."""
    if len(name) > 4 and name.startswith("__") and name.endswith("__"):
        return name[2:-2]
    return name.lstrip("_") or name


def _entry_points():
    """``{id(fn): (fn, range name)}`` for every op a user can call."""
    found = {}
    for attribute, value in vars(Tensor).items():
        if isinstance(value, property):
            if _is_op_function(value.fget):
                found.setdefault(id(value.fget), (value.fget, _plain(attribute)))
        elif _is_op_function(value):
            found.setdefault(id(value), (value, _op_name(value, attribute)))
    for namespace in _PUBLIC_NAMESPACES:
        module = sys.modules.get(namespace)
        if module is None:
            continue
        for attribute, value in vars(module).items():
            if not attribute.startswith("_") and _is_op_function(value):
                found.setdefault(id(value), (value, _op_name(value, attribute)))
    return found


def _observed(fn, name):
    thread = _state.thread

    @functools.wraps(fn)
    def observed(*args, **kwargs):
        if thread.depth:
            return fn(*args, **kwargs)
        return observe_op(fn, name, args, kwargs)
    return observed


def _adcuda_modules():
    return [m for name, m in list(sys.modules.items())
            if m is not None and (name == "adcuda" or name.startswith("adcuda."))
            and not name.startswith(__package__)]


def _import_functional():
    """``adcuda.nn.functional`` loads lazily; import it so that its ops are found."""
    try:
        importlib.import_module("adcuda.nn.functional")
    except ModuleNotFoundError as e:
        if e.name not in ("adcuda.nn", "adcuda.nn.functional"):
            raise


def _swap(owner, attribute, replacement):
    _swapped.append((owner, attribute, vars(owner)[attribute], replacement))
    setattr(owner, attribute, replacement)


def _install_ops():
    _import_functional()
    found = _entry_points()
    by_id = {key: _observed(fn, name) for key, (fn, name) in found.items()}
    # ``record`` links each node to the op it was recorded in (see ``observe.linking_record``)
    found[id(_core.record)] = (_core.record, "record")
    by_id[id(_core.record)] = linking_record(_core.record)
    _wrappers.update((id(w), w) for w in by_id.values())
    try:
        for attribute, value in list(vars(Tensor).items()):
            if isinstance(value, property):
                if id(value.fget) in by_id and value.fget is found[id(value.fget)][0]:
                    _swap(Tensor, attribute, property(by_id[id(value.fget)], value.fset, value.fdel, value.__doc__))
            elif id(value) in by_id and value is found[id(value)][0]:
                _swap(Tensor, attribute, by_id[id(value)])
        for module in _adcuda_modules():
            for attribute, value in list(vars(module).items()):
                if id(value) in by_id and value is found[id(value)][0]:
                    _swap(module, attribute, by_id[id(value)])
        library_ranges.install(_swap)
        engine.backward_observer = observe_backward
    except BaseException:
        _uninstall_ops()
        raise


def _uninstall_ops():
    engine.backward_observer = None
    _restore(_swapped)
    # A module imported while ops were observed may have bound a wrapper
    # (``from ..ops.linalg import matmul``): give it the original as well.
    for owner in _adcuda_modules() + [Tensor]:
        for attribute, value in list(vars(owner).items()):
            if id(value) in _wrappers and _wrappers[id(value)] is value:
                setattr(owner, attribute, value.__wrapped__)
    _wrappers.clear()


def _restore(swaps):
    """Undo ``swaps`` in reverse order, leaving alone an attribute someone else has rebound since."""
    while swaps:
        owner, attribute, original, replacement = swaps.pop()
        if vars(owner).get(attribute) is replacement:
            setattr(owner, attribute, original)


# ------------------------------------------------------------------------------------------------
# kernel launches
def _counting(fn):
    thread = _state.thread

    @functools.wraps(fn)
    def counted(*args, **kwargs):
        if thread.in_primitive:
            return fn(*args, **kwargs)
        thread.in_primitive = True
        thread.launches += 1
        try:
            return fn(*args, **kwargs)
        finally:
            thread.in_primitive = False
    return counted


def _install_launch_counting():
    importlib.import_module("adcuda.backends.cpu")  # loaded on a device's first use; count from the start
    for name in _BACKEND_MODULES:
        module = sys.modules.get(name)
        if module is None:
            continue
        for primitive in PRIMITIVES:
            fn = vars(module).get(primitive)
            if callable(fn):
                replacement = _counting(fn)
                _counted.append((module, primitive, fn, replacement))
                setattr(module, primitive, replacement)
