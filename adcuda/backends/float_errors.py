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

NumPy 2 keeps the state in a context variable (``numpy._core._ufunc_config._extobj_contextvar``, not
public API, hence the fallback); NumPy 1.x in a per-thread object read and set by ``geterrobj`` and
``seterrobj``, where ``quiet`` returns the previous object as the token.
"""

from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = ["QUIET", "quiet", "restore", "is_quiet"]

quiet: Callable[[Any], Any]
restore: Callable[[Any], Any]
is_quiet: Callable[[], bool]

try:
    from numpy._core._ufunc_config import _extobj_contextvar as _state  # NumPy 2
except ImportError:  # NumPy 1.x (or a later NumPy that renamed it): the public per-thread calls
    _state = None

if _state is not None:
    with np.errstate(all="ignore"):
        QUIET = _state.get()
    quiet = _state.set  # returns a token for ``restore``
    restore = _state.reset

    def is_quiet() -> bool:
        """Whether NumPy's error state is adcuda's (inside an op, or a backward pass)."""
        return _state.get() is QUIET

elif hasattr(np, "geterrobj"):  # NumPy 1.x
    with np.errstate(all="ignore"):
        QUIET = np.geterrobj()

    def quiet(state):
        previous = np.geterrobj()
        np.seterrobj(state)
        return previous

    restore = np.seterrobj

    def is_quiet() -> bool:
        return np.geterrobj() == QUIET

else:  # neither: np.errstate itself, the slow public way
    QUIET = "ignore"

    def quiet(state):
        scope = np.errstate(all=state)
        scope.__enter__()
        return scope

    def restore(scope):
        scope.__exit__(None, None, None)

    def is_quiet() -> bool:
        return all(mode == "ignore" for mode in np.geterr().values())
