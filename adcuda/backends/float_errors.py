"""PyTorch's floating-point policy for the NumPy that adcuda computes with: an overflow, a division by
zero or an invalid operation (``exp(1e4)``, ``log(0)``, ``inf - inf``, a NaN cast to an integer) gives
its IEEE value (inf, nan) and says nothing, as PyTorch does. NumPy's default is a ``RuntimeWarning``
per such call, which no PyTorch program expects (and which ``-W error`` turns into an exception).

Every public op's entry (adcuda/ops/dispatch.py) and the autograd engine's backward pass run their
NumPy calls with NumPy's error state set to "ignore", and put the caller's state back after: a user's
own NumPy code keeps its warnings. ``np.errstate`` would cost about 1 us per entry (3 us on a busy
machine, as much as a small op's whole dispatch); this sets NumPy's error-state context variable
directly, to an "ignore all" state made once, about 0.1 us per entry::

    token = quiet(QUIET)
    try:
        ...  # NumPy calls
    finally:
        restore(token)

An op called inside another op (a composite's pieces, a forward that calls other ops) finds the state
already quiet (``current() is QUIET``) and leaves it alone: only the outermost entry pays for the switch.

NumPy 2 keeps the state in a context variable (``numpy._core._ufunc_config._extobj_contextvar``, not
public API, hence the fallback); NumPy 1.x in a per-thread object read and set by ``geterrobj`` and
``seterrobj``, where ``quiet`` returns the previous object as the token.
"""

from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = ["QUIET", "current", "quiet", "restore"]

current: Callable[[], Any]  # the state now (``QUIET`` itself inside an op)
quiet: Callable[[Any], Any]
restore: Callable[[Any], Any]

try:
    from numpy._core import _ufunc_config  # NumPy 2

    # (read with getattr: a later NumPy may rename it, and NumPy's stubs do not declare it)
    _state: Any = getattr(_ufunc_config, "_extobj_contextvar", None)
except ImportError:  # NumPy 1.x: the public per-thread calls below
    _state = None

if _state is not None:
    with np.errstate(all="ignore"):
        QUIET = _state.get()
    current = _state.get
    quiet = _state.set  # returns a token for ``restore``
    restore = _state.reset
elif hasattr(np, "geterrobj"):  # NumPy 1.x
    _get_state, _set_state = getattr(np, "geterrobj"), getattr(np, "seterrobj")  # noqa: B009 (not in NumPy 2's stubs)
    with np.errstate(all="ignore"):
        QUIET = _get_state()
    current = _get_state  # (a new list per call: never QUIET itself, so every entry switches)

    def quiet(state):
        previous = _get_state()
        _set_state(state)
        return previous

    restore = _set_state
else:  # neither: np.errstate itself, the slow public way
    QUIET = "ignore"

    def current():
        return None  # no state to read: every entry switches

    def quiet(state):
        scope = np.errstate(all=state)
        scope.__enter__()
        return scope

    def restore(scope):
        scope.__exit__(None, None, None)
