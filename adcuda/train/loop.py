"""The training loop behind ``adcuda train``: a task supplies data, model and metrics; this module
owns the optimizer, schedule, progress display, per-epoch checkpoints and resuming."""
import dataclasses
import math
import os
import sys
import time

from .. import nn
from .. import optim
from .. import random as adcuda_random
from ..autograd import no_grad
from .checkpoint import CheckpointMismatch, checkpoint_path, load_checkpoint, restore_rng, save_checkpoint
from .schedule import WarmupCosine

# gradients are clipped to this global norm before every step
MAX_GRAD_NORM = 1.0
WEIGHT_DECAY = 0.01
# the cosine ends at this fraction of the peak learning rate
LR_FLOOR = 0.05
# the settings a resumed run takes from its checkpoint (changing them mid-run would not continue it)
RUN_SETTINGS = ("batch_size", "lr", "seed")
DEFAULT_SEED = 0


@dataclasses.dataclass
class TrainConfig:
    """What to train and how. ``epochs``, ``batch_size``, ``lr`` and ``seed`` left as None come from the
    checkpoint when resuming, else from the task's defaults."""
    task: str
    out: str
    epochs: int = None
    batch_size: int = None
    lr: float = None
    seed: int = None
    device: str = "cpu"
    num_workers: int = 0
    quiet: bool = False
    resume: bool = False


class Reporter:
    """Per-epoch lines on stdout and a progress bar on stderr (only on a terminal, never when quiet)."""

    def __init__(self, quiet):
        self.quiet = quiet

    def line(self, text):
        if not self.quiet:
            print(text, flush=True)

    def result(self, text):
        print(text, flush=True)

    def progress(self, iterable, total, description):
        from tqdm import tqdm
        return tqdm(iterable, total=total, desc=description, unit="batch", leave=False, dynamic_ncols=True,
                    disable=self.quiet or not sys.stderr.isatty(), file=sys.stderr)


def make_optimizer(model, lr):
    """AdamW; matrices (weights, embeddings) decay, vectors (biases, LayerNorm) do not."""
    params = list(model.parameters())
    decay = [p for p in params if p.ndim >= 2]
    no_decay = [p for p in params if p.ndim < 2]
    return optim.AdamW([{"params": decay, "weight_decay": WEIGHT_DECAY},
                        {"params": no_decay, "weight_decay": 0.0}], lr=lr)


def make_scheduler(optimizer, total_steps):
    warmup = max(1, min(100, total_steps // 20))
    return optim.lr_scheduler.LambdaLR(optimizer, WarmupCosine(warmup, total_steps, floor=LR_FLOOR))


def _to_device(batch, device):
    return [t.to(device) for t in batch]


def _settle(config, task_type, saved):
    """Fill the settings left as None: from the checkpoint's run when resuming, else the task's defaults."""
    if saved is None:
        defaults = dict(task_type.defaults, seed=DEFAULT_SEED)
        return dataclasses.replace(config, **{k: defaults[k] for k in ("epochs", "batch_size", "lr", "seed")
                                               if getattr(config, k) is None})
    if saved["task"] != config.task:
        raise CheckpointMismatch(f"--resume: the checkpoint in {config.out} is a '{saved['task']}' run, "
                                 f"not '{config.task}'")
    for key in RUN_SETTINGS:
        given = getattr(config, key)
        if given is not None and given != saved[key]:
            raise CheckpointMismatch(
                f"--resume: --{key.replace('_', '-')} {given!r} differs from the checkpoint's {saved[key]!r}; "
                f"a resumed run keeps the settings it started with (use another --out for a new run)")
    settled = {key: saved[key] for key in RUN_SETTINGS}
    if config.epochs is None:
        settled["epochs"] = saved["epochs"]
    return dataclasses.replace(config, **settled)


def train(config, task_type, reporter=None):
    """Train the task ``task_type`` (a class from ``adcuda.train.TASKS``) as ``config`` says; returns
    the task's final metrics (a dict)."""
    reporter = reporter or Reporter(config.quiet)
    state = load_checkpoint(config.out, config.device) if config.resume else None
    config = _settle(config, task_type, state["config"] if state else None)
    if config.epochs < 0 or config.batch_size <= 0 or not config.lr > 0:
        raise ValueError(f"need --epochs >= 0, --batch-size > 0 and --lr > 0, got {config.epochs}, "
                         f"{config.batch_size} and {config.lr}")
    task = task_type(config.seed)
    adcuda_random.manual_seed(config.seed)
    loader_generator = adcuda_random.Generator().manual_seed(config.seed)
    model = task.build_model().to(config.device)
    loader = task.train_loader(config.batch_size, loader_generator, config.num_workers)
    steps_per_epoch = len(loader)
    optimizer = make_optimizer(model, config.lr)
    scheduler = make_scheduler(optimizer, config.epochs * steps_per_epoch)
    start_epoch, history = 0, []

    if state is not None:
        task.check_checkpoint(state["extra"])
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        scheduler.load_state_dict(state["scheduler"])
        restore_rng(state, loader_generator)
        start_epoch, history = state["epoch"], list(state["history"])
        planned = state["config"]["epochs"]
        schedule = scheduler.lr_lambdas[0]
        if config.epochs != planned:
            # the cosine was laid out for the planned length: stretch (or cut) it to the new one
            schedule.total = max(config.epochs * steps_per_epoch, schedule.warmup + 1)
            reporter.line(f"resuming after epoch {start_epoch} of {planned}; training to epoch {config.epochs} "
                          f"(learning-rate schedule re-laid for {config.epochs} epochs)")
        else:
            reporter.line(f"resuming after epoch {start_epoch} of {planned}")
    elif _exists(config.out):
        reporter.line(f"note: starting a new run; the checkpoint in {config.out} will be replaced "
                      f"(use --resume to continue it)")

    reporter.line(f"task {task.name}: {task.describe()}; {_count_parameters(model):,} parameters; "
                  f"device {config.device}; {steps_per_epoch} steps per epoch")
    for epoch in range(start_epoch, config.epochs):
        started = time.perf_counter()
        train_loss = _train_one_epoch(model, loader, optimizer, scheduler, task, config, reporter,
                                      f"epoch {epoch + 1}/{config.epochs}")
        model.eval()
        with no_grad():
            val = task.evaluate(model, "val", config.device)
        seconds = time.perf_counter() - started
        record = {"epoch": epoch + 1, "train_loss": train_loss, "lr": scheduler.get_last_lr()[0],
                  "seconds": seconds, **{f"val_{k}": v for k, v in val.items()}}
        history.append(record)
        save_checkpoint(config.out, config=dataclasses.asdict(config), epoch=epoch + 1, model=model, optimizer=optimizer,
                        scheduler=scheduler, loader_generator=loader_generator, history=history,
                        extra=task.checkpoint_extra())
        reporter.line(f"epoch {epoch + 1:>3}/{config.epochs}  train loss {train_loss:.4f}  "
                      + "  ".join(f"val {k} {v:.4f}" for k, v in val.items())
                      + f"  lr {scheduler.get_last_lr()[0]:.2e}  {seconds:.1f}s")
    if start_epoch >= config.epochs:
        reporter.line(f"the checkpoint has already trained {start_epoch} epochs (--epochs {config.epochs})")

    model.eval()
    with no_grad():
        final = task.final_report(model, config, reporter)
    reporter.line(f"checkpoint: {checkpoint_path(config.out)}")
    return final


def _train_one_epoch(model, loader, optimizer, scheduler, task, config, reporter, description):
    model.train()
    total, count = 0.0, 0
    bar = reporter.progress(loader, len(loader), description)
    for batch in bar:
        batch = _to_device(batch, config.device)
        loss = task.training_loss(model, batch)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), MAX_GRAD_NORM)
        optimizer.step()
        scheduler.step()
        value = loss.item()
        if not math.isfinite(value):
            raise FloatingPointError(f"training diverged: the loss became {value} at {description} "
                                     f"(try a smaller --lr)")
        size = batch[0].shape[0]
        total += value * size
        count += size
        bar.set_postfix(loss=f"{value:.4f}", refresh=False)
    bar.close()
    return total / max(count, 1)


def _count_parameters(model):
    return sum(p.numel() for p in model.parameters())


def _exists(out_dir):
    return os.path.exists(checkpoint_path(out_dir))
