"""What ``load(weights_only=True)`` may build: PyTorch's default allowlist and the user's safe globals.

A pickle names the functions and classes it calls by ``module.name``. A weights-only load admits only
the names listed here: the tensor rebuild functions, storage types, dtypes, ``device``, ``Size``,
``OrderedDict``, ``Counter``, ``set``, ``complex``, ``bytearray`` and ``_codecs.encode`` (how protocol
2 pickles ``bytes``), spelled as PyTorch spells them (``torch._utils._rebuild_tensor_v2``), plus what
``add_safe_globals`` or ``safe_globals(...)`` allowed. A user's global is found under its own
``module.qualname`` and, for an adcuda class, also under PyTorch's spelling of the same path
(``adcuda.nn.modules.linear.Linear`` answers to ``torch.nn.modules.linear.Linear``), so that a module
saved by PyTorch loads as the adcuda module the user allowed.
"""

from __future__ import annotations

import _compat_pickle
import collections
import contextlib
import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..types import Any, Iterator

_lock = threading.Lock()
_user_globals: list[Any] = []


def _entry_names(entry):
    """(object, the names a pickle may call it by) of one allowlist entry: an object or (object, name)."""
    if isinstance(entry, tuple):
        if len(entry) != 2 or not isinstance(entry[1], str):
            raise TypeError(f"add_safe_globals: expected an object or an (object, 'module.name') pair, got {entry!r}")
        return entry[0], (entry[1],)
    module = getattr(entry, "__module__", None)
    name = getattr(entry, "__qualname__", None) or getattr(entry, "__name__", None)
    if not isinstance(module, str) or not isinstance(name, str):
        raise TypeError(
            f"add_safe_globals: {entry!r} has no __module__ and __qualname__; pass it as (object, 'module.name')"
        )
    names = [f"{module}.{name}"]
    if module == "adcuda" or module.startswith("adcuda."):
        names.append(f"torch{module[len('adcuda') :]}.{name}")
    return entry, tuple(names)


def add_safe_globals(safe_globals: list[Any]) -> None:
    """Allow ``load(weights_only=True)`` to build these classes and call these functions (only for
    files you trust to use them as intended: a weights-only load calls what the allowlist names)."""
    entries = list(safe_globals)
    for entry in entries:
        _entry_names(entry)
    with _lock:
        _user_globals.extend(entries)


def get_safe_globals() -> list[Any]:
    """The globals ``add_safe_globals`` and any open ``safe_globals`` contexts allowed."""
    with _lock:
        return list(_user_globals)


def clear_safe_globals() -> None:
    with _lock:
        _user_globals.clear()


@contextlib.contextmanager
def safe_globals(safe_globals: list[Any]) -> Iterator[None]:
    """``with safe_globals([MyNet, nn.Linear]): model = adcuda.load(path)``: allowed inside only."""
    with _lock:
        before = list(_user_globals)
    add_safe_globals(safe_globals)
    try:
        yield
    finally:
        with _lock:
            _user_globals[:] = before


def user_allowed() -> dict[str, Any]:
    """name -> object of every user-allowed global."""
    allowed = {}
    for entry in get_safe_globals():
        obj, names = _entry_names(entry)
        for name in names:
            allowed[name] = obj
    return allowed


def python3_name(module: str, name: str) -> tuple[str, str]:
    """Protocol 2 pickles spell Python 2 names (``__builtin__.set``): the Python 3 name of each."""
    if (module, name) in _compat_pickle.NAME_MAPPING:
        return _compat_pickle.NAME_MAPPING[(module, name)]
    return _compat_pickle.IMPORT_MAPPING.get(module, module), name


def _encode(text, encoding="utf-8", errors="strict"):
    """``_codecs.encode``: how protocol 2 pickles a ``bytes`` object (its text and 'latin1')."""
    if not isinstance(text, str) or encoding not in ("latin1", "latin-1", "utf-8", "ascii"):
        raise TypeError(f"_codecs.encode of {type(text).__name__} to {encoding!r} is not how bytes are pickled")
    return text.encode(encoding, errors)


# the plain Python globals PyTorch's weights-only load admits by default
PYTHON_DEFAULTS = {
    "collections.OrderedDict": collections.OrderedDict,
    "collections.Counter": collections.Counter,
    "_codecs.encode": _encode,
    "builtins.bytearray": bytearray,
    "builtins.set": set,
    "builtins.complex": complex,
}
