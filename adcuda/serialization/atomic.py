"""Atomic writes for checkpoints: a temporary file beside the target, synced, renamed over it.

The temporary file is named ``.adcuda-tmp-<pid>-<random>-<name>``. A process killed mid-save leaves it
behind; the next save into the folder removes the temporary files of processes that no longer run (and,
to survive a reused pid, of any whose file is older than the target it was meant to replace and
untouched for an hour). A live saver's file is never touched, so concurrent savers are safe.
"""

from __future__ import annotations

import os
import secrets
import threading
import time
from typing import TYPE_CHECKING

from . import native

if TYPE_CHECKING:
    from ..types import BinaryIO, Callable, PathLike

TEMP_PREFIX = ".adcuda-tmp-"
_STALE_SECONDS = 3600
_in_progress: set[str] = set()
_in_progress_lock = threading.Lock()


def _is_path(f):
    return isinstance(f, (str, bytes, os.PathLike))


def _pid_alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        return True  # someone else's live process (or a platform that cannot tell): leave its file
    return True


def remove_stale_temporaries(directory: str, target_name: str) -> list[str]:
    """Remove the temporary files interrupted saves left in ``directory``; returns their names."""
    removed = []
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return removed
    try:
        target_mtime = os.stat(os.path.join(directory, target_name)).st_mtime
    except OSError:
        target_mtime = None
    now = time.time()
    for entry in entries:
        if not entry.name.startswith(TEMP_PREFIX):
            continue
        pid_text, _, rest = entry.name[len(TEMP_PREFIX) :].partition("-")
        _, _, name = rest.partition("-")
        if not pid_text.isdigit():
            continue
        with _in_progress_lock:
            ours = entry.path in _in_progress
        if ours:
            continue
        try:
            mtime = entry.stat(follow_symlinks=False).st_mtime
        except OSError:
            continue
        pid = int(pid_text)
        dead = pid == os.getpid() or not _pid_alive(pid)  # our own, not in progress: an interrupted save
        abandoned = name == target_name and target_mtime is not None and mtime < target_mtime
        if dead or (abandoned and now - mtime > _STALE_SECONDS):
            try:
                os.unlink(entry.path)
                removed.append(entry.name)
            except OSError:
                pass
    return removed


def atomic_write(f: str | PathLike[str], write: Callable[[BinaryIO], None]) -> None:
    """Call ``write(file)`` on a temporary file beside ``f``, sync it and rename it over ``f``."""
    path = os.path.abspath(os.fsdecode(f))
    directory, name = os.path.split(path)
    remove_stale_temporaries(directory, name)
    tmp = os.path.join(directory, f"{TEMP_PREFIX}{os.getpid()}-{secrets.token_hex(4)}-{name}")
    with _in_progress_lock:
        _in_progress.add(tmp)
    try:
        native._replace_through(tmp, path, lambda: open(tmp, "xb"), write)
    finally:
        with _in_progress_lock:
            _in_progress.discard(tmp)
    native._fsync_directory(directory)
