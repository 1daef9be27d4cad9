"""``adcuda train``: train a small model on data bundled with adcuda, as a working example and a check
of the whole stack (data loading, autograd, nn, optim, checkpoints).

``train(TrainConfig(task="digits", out="runs/digits"), TASKS["digits"])`` from Python; the command
line is ``adcuda train`` (see ``adcuda.cli``).
"""

from .chars import CharsTask
from .digits import DigitsTask
from .loop import TrainConfig, train

TASKS = {"digits": DigitsTask, "chars": CharsTask}

__all__ = ["TASKS", "TrainConfig", "train", "DigitsTask", "CharsTask"]
