"""The training checkpoint: everything a run needs to continue exactly where it stopped.

One file, ``<out>/checkpoint.pt``, written with ``adcuda.save`` (a temporary file renamed over the old
one, so an interrupted save never leaves half a checkpoint) after every epoch. ``--resume`` checks every
field it reads (type and range) before training starts, and names the first bad one.
"""

import math
import numbers
import os

from .. import random as adcuda_random
from ..serialization import CheckpointError, load, save
from ..tensor import Tensor
from .errors import SettingsError

CHECKPOINT_NAME = "checkpoint.pt"
FORMAT = "adcuda-train-checkpoint"
VERSION = 1


class CheckpointMismatch(SettingsError):
    """A checkpoint that belongs to another task or run than the one asked for."""


class CheckpointMissing(SettingsError):
    """``--resume`` with no checkpoint in ``--out``."""


class CheckpointInvalid(CheckpointError):
    """A checkpoint whose fields have the wrong types or values (damaged, or edited by hand)."""


def checkpoint_path(out_dir):
    return os.path.join(out_dir, CHECKPOINT_NAME)


def save_checkpoint(out_dir, *, config, epoch, model, optimizer, scheduler, scaler, loader_generator, history, extra):
    """Write the state after ``epoch`` completed epochs. ``scaler``: the GradScaler's state (an empty
    dict without ``--amp``; checkpoints written before ``--amp`` existed have none)."""
    os.makedirs(out_dir, exist_ok=True)
    state = {
        "format": FORMAT,
        "version": VERSION,
        "config": dict(config),
        "epoch": epoch,
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict(),
        "scheduler": scheduler.state_dict(),
        "scaler": scaler.state_dict(),
        "rng": {"default": list(adcuda_random.get_rng_state()), "loader": list(loader_generator.get_state())},
        "history": list(history),
        "extra": dict(extra),
    }
    save(state, checkpoint_path(out_dir))


def load_checkpoint(out_dir, device):
    path = checkpoint_path(out_dir)
    if not os.path.exists(path):
        raise CheckpointMissing(
            f"--resume: there is no checkpoint to resume from at {path}; start a run with this --out first"
        )
    state = load(path, map_location=device)
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        raise CheckpointMismatch(f"--resume: {path} is not an 'adcuda train' checkpoint")
    if state.get("version") != VERSION:
        raise CheckpointMismatch(
            f"--resume: {path} has checkpoint version {state.get('version')}, this adcuda reads version {VERSION}"
        )
    validate(state, path)
    return state


def _is_int(value):
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _check(ok, path, field, expected, value):
    if not ok:
        shown = repr(value) if not isinstance(value, (dict, list, Tensor)) else f"a {type(value).__name__}"
        raise CheckpointInvalid(f"--resume: {path}: the checkpoint's '{field}' must be {expected}, got {shown}")


def _int_list(value):
    return isinstance(value, (list, tuple)) and all(_is_int(v) for v in value)


def validate(state, path):
    """Check the fields ``--resume`` reads; raise ``CheckpointInvalid`` naming the first bad one."""
    for key, kind in (("config", dict), ("model", dict), ("optimizer", dict), ("scheduler", dict)):
        _check(isinstance(state.get(key), kind), path, key, f"a {kind.__name__}", state.get(key, "missing"))
    config = state["config"]
    _check(isinstance(config.get("task"), str), path, "config.task", "a task name", config.get("task"))
    for key, test, expected in (
        ("epochs", lambda v: _is_int(v) and v >= 1, "an int >= 1"),
        ("batch_size", lambda v: _is_int(v) and v >= 1, "an int >= 1"),
        (
            "lr",
            lambda v: isinstance(v, numbers.Real) and not isinstance(v, bool) and math.isfinite(v) and v > 0,
            "a finite number > 0",
        ),
        ("seed", _is_int, "an int"),
        ("amp", lambda v: isinstance(v, bool), "True or False"),
    ):
        if key in config or key != "amp":  # checkpoints from before --amp have none
            _check(test(config.get(key)), path, f"config.{key}", expected, config.get(key, "missing"))
    epoch = state.get("epoch")
    planned = config["epochs"]
    _check(_is_int(epoch) and 1 <= epoch <= planned, path, "epoch", f"an int in 1..{planned} (the run's epochs)", epoch)
    for key, value in state["model"].items():
        _check(isinstance(key, str) and isinstance(value, Tensor), path, f"model[{key!r}]", "a tensor", value)
    optimizer = state["optimizer"]
    _check(
        isinstance(optimizer.get("state"), dict), path, "optimizer.state", "a dict", optimizer.get("state", "missing")
    )
    groups = optimizer.get("param_groups")
    _check(
        isinstance(groups, list) and all(isinstance(g, dict) and _int_list(g.get("params")) for g in groups),
        path,
        "optimizer.param_groups",
        "a list of parameter groups (dicts with their 'params' indices)",
        groups if groups is not None else "missing",
    )
    scaler = state.get("scaler", {})
    _check(isinstance(scaler, dict), path, "scaler", "a dict", scaler)
    rng = state.get("rng")
    _check(
        isinstance(rng, dict) and _int_list(rng.get("default")) and _int_list(rng.get("loader")),
        path,
        "rng",
        "a dict of the 'default' and 'loader' generator states (lists of ints)",
        rng if rng is not None else "missing",
    )
    history = state.get("history")
    _check(
        isinstance(history, list) and all(isinstance(h, dict) for h in history),
        path,
        "history",
        "a list of dicts",
        history if history is not None else "missing",
    )
    _check(isinstance(state.get("extra"), dict), path, "extra", "a dict", state.get("extra", "missing"))


def saved_task(out_dir):
    """The task of the run whose checkpoint is in ``out_dir`` (what ``--resume`` continues)."""
    return load_checkpoint(out_dir, "cpu")["config"]["task"]


def restore_rng(state, loader_generator):
    adcuda_random.set_rng_state(tuple(state["rng"]["default"]))
    loader_generator.set_state(tuple(state["rng"]["loader"]))
