"""The training checkpoint: everything a run needs to continue exactly where it stopped.

One file, ``<out>/checkpoint.pt``, written with ``adcuda.save`` (a temporary file renamed over the old
one, so an interrupted save never leaves half a checkpoint) after every epoch.
"""

import os

from .. import random as adcuda_random
from ..serialization import load, save
from .errors import SettingsError

CHECKPOINT_NAME = "checkpoint.pt"
FORMAT = "adcuda-train-checkpoint"
VERSION = 1


class CheckpointMismatch(SettingsError):
    """A checkpoint that belongs to another task or run than the one asked for."""


class CheckpointMissing(SettingsError):
    """``--resume`` with no checkpoint in ``--out``."""


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
    return state


def saved_task(out_dir):
    """The task of the run whose checkpoint is in ``out_dir`` (what ``--resume`` continues)."""
    return load_checkpoint(out_dir, "cpu")["config"]["task"]


def restore_rng(state, loader_generator):
    adcuda_random.set_rng_state(tuple(state["rng"]["default"]))
    loader_generator.set_state(tuple(state["rng"]["loader"]))
