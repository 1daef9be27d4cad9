"""The training loop behind ``adcuda train``: a task supplies data, model and metrics; this module
owns the optimizer, schedule, mixed precision, data parallelism, progress display, per-epoch
checkpoints, resuming, and the NVTX and profiler sessions."""

import contextlib
import dataclasses
import math
import os
import sys
import time

from .. import capture, nn, optim
from .. import random as adcuda_random
from ..amp import GradScaler, autocast
from ..autograd import no_grad
from ..device import as_device
from ..errors import AdcudaError
from ..profiler import emit_nvtx, profile, record_function
from ..profiler.nvtx_ranges import NvtxEmitter
from . import parallel
from .checkpoint import (
    CheckpointInvalid,
    CheckpointMismatch,
    checkpoint_path,
    load_checkpoint,
    restore_rng,
    save_checkpoint,
)
from .errors import SettingsError
from .progress import progress
from .schedule import WarmupCosine

# gradients are clipped to this global norm before every step
MAX_GRAD_NORM = 1.0
WEIGHT_DECAY = 0.01
# the cosine ends at this fraction of the peak learning rate
LR_FLOOR = 0.05
# the settings a resumed run takes from its checkpoint (changing them mid-run would not continue it)
RUN_SETTINGS = ("batch_size", "lr", "seed", "amp")
# what a checkpoint written before a setting existed ran with
SETTINGS_OF_OLDER_CHECKPOINTS = {"amp": False}
DEFAULT_SEED = 0
PROFILE_TABLE_ROWS = 25


@dataclasses.dataclass
class TrainConfig:
    """What to train and how. ``epochs``, ``batch_size``, ``lr``, ``seed`` and ``amp`` left as None come
    from the checkpoint when resuming, else from the task's defaults (``amp``: off).

    ``amp``: float16 weights stepped through float32 master weights, dynamic loss scaling, and autocast
    (float16 matmuls; softmax, layer norm and the loss in float32). ``distributed``: data-parallel over
    the processes of an MPI job (``mpirun``, ``adcuda.distributed.launch``), ``batch_size`` being the
    total over the ranks; rank 0 prints, evaluates and checkpoints. ``nvtx``: NVTX ranges for Nsight.
    ``profile_steps`` > 0: run that many steps under ``adcuda.profiler.profile``, print the per-op table,
    write the Chrome trace to ``trace`` (default ``<out>/trace.json``) and stop, writing no checkpoint.
    ``compile``: each training step captured once per batch shape and replayed (``adcuda.compile``,
    which captures CPU programs only); None (the default) compiles on the CPU, where it is faster on
    both tasks, unless ``distributed``, ``amp`` or ``profile_steps``, and runs eagerly elsewhere; True
    asks for it (a note says when the device has none); False runs eagerly.
    """

    task: str
    out: str
    epochs: int = None
    batch_size: int = None
    lr: float = None
    seed: int = None
    amp: bool = None
    device: str = "cpu"
    num_workers: int = 0
    quiet: bool = False
    resume: bool = False
    distributed: bool = False
    nvtx: bool = False
    profile_steps: int = 0
    trace: str = None
    compile: bool | None = None


class Reporter:
    """Per-epoch lines on stdout, and the progress of each epoch on stderr (a bar on a terminal, else a
    line every few seconds; nothing when quiet)."""

    def __init__(self, quiet):
        self.quiet = quiet

    def line(self, text):
        if not self.quiet:
            print(text, flush=True)

    def result(self, text):
        print(text, flush=True)

    def progress(self, iterable, total, description):
        return progress(iterable, total, description, self.quiet, file=sys.stderr)


class SilentReporter(Reporter):
    """What the ranks other than 0 of a distributed run report: nothing (rank 0 speaks for the job)."""

    def __init__(self):
        super().__init__(quiet=True)

    def result(self, text):
        pass


def make_optimizer(model, lr, master_weights=False):
    """AdamW; matrices (weights, embeddings) decay, vectors (biases, LayerNorm) do not.
    ``master_weights``: float16 parameters are stepped through float32 copies kept by the optimizer."""
    params = list(model.parameters())
    decay = [p for p in params if p.ndim >= 2]
    no_decay = [p for p in params if p.ndim < 2]
    return optim.AdamW(
        [{"params": decay, "weight_decay": WEIGHT_DECAY}, {"params": no_decay, "weight_decay": 0.0}],
        lr=lr,
        master_weights=master_weights,
    )


def make_scheduler(optimizer, total_steps):
    warmup = max(1, min(100, total_steps // 20))
    return optim.lr_scheduler.LambdaLR(optimizer, WarmupCosine(warmup, total_steps, floor=LR_FLOOR))


def _to_device(batch, device):
    return [t.to(device) for t in batch]


def _settle(config, task_type, saved):
    """Fill the settings left as None: from the checkpoint's run when resuming, else the task's defaults."""
    if saved is None:
        defaults = dict(task_type.defaults, seed=DEFAULT_SEED, amp=False)
        return dataclasses.replace(
            config,
            **{k: defaults[k] for k in ("epochs", "batch_size", "lr", "seed", "amp") if getattr(config, k) is None},
        )
    if saved["task"] != config.task:
        raise CheckpointMismatch(
            f"--resume: the checkpoint in {config.out} is a '{saved['task']}' run, not '{config.task}'"
        )
    settled = {key: saved[key] if key in saved else SETTINGS_OF_OLDER_CHECKPOINTS[key] for key in RUN_SETTINGS}
    for key in RUN_SETTINGS:
        given, kept = getattr(config, key), settled[key]
        if given is None or given == kept:
            continue
        option = f"--{key.replace('_', '-')}"
        if isinstance(kept, bool):
            difference = f"the checkpoint's run trained {'with' if kept else 'without'} {option}"
        else:
            difference = f"{option} {given!r} differs from the checkpoint's {kept!r}"
        raise CheckpointMismatch(
            f"--resume: {difference}; a resumed run keeps the settings it started with "
            f"(use another --out for a new run)"
        )
    if config.epochs is None:
        settled["epochs"] = saved["epochs"]
    return dataclasses.replace(config, **settled)


def _restore(out, field, target, saved):
    """``target.load_state_dict(saved)``, a mismatch named as the checkpoint field it came from."""
    try:
        target.load_state_dict(saved)
    except (AdcudaError, ValueError, TypeError, KeyError, IndexError) as error:
        raise CheckpointInvalid(
            f"--resume: {checkpoint_path(out)}: the checkpoint's '{field}' does not fit this run's {field}: {error}"
        ) from None


def train(config, task_type, reporter=None):
    """Train the task ``task_type`` (a class from ``adcuda.train.TASKS``) as ``config`` says; returns
    the task's final metrics (a dict), or with ``profile_steps`` the trace's path and the number of steps
    profiled; on the ranks other than 0 of a distributed run, None."""
    session = parallel.process_group(as_device(config.device).type) if config.distributed else contextlib.nullcontext()
    with session as world, emit_nvtx(enabled=config.nvtx):
        if world is not None and not world.is_main:
            reporter = SilentReporter()
        return _train(config, task_type, reporter or Reporter(config.quiet), world)


def _train(config, task_type, reporter, world):
    """``train`` inside its process group (``world``: this rank's place, None when not distributed)."""
    main = world is None or world.is_main
    ranks = 1 if world is None else world.size
    state = load_checkpoint(config.out, config.device) if config.resume else None
    config = _settle(config, task_type, state["config"] if state else None)
    if config.epochs < 0 or config.batch_size <= 0 or not config.lr > 0:
        raise SettingsError(
            f"need --epochs >= 0, --batch-size > 0 and --lr > 0, got {config.epochs}, "
            f"{config.batch_size} and {config.lr}"
        )
    if config.batch_size < ranks:
        raise SettingsError(f"--batch-size {config.batch_size} is smaller than the {ranks} processes sharing it")
    task = task_type(config.seed)
    adcuda_random.manual_seed(config.seed)
    loader_generator = adcuda_random.Generator().manual_seed(config.seed)
    net = task.build_model().to(config.device)
    if config.amp:
        net.half()  # every parameter, LayerNorm's too: the ops autocast keeps in float32 widen their inputs
    loader = task.train_loader(config.batch_size // ranks, loader_generator, config.num_workers, world)
    steps_per_epoch = len(loader)
    optimizer = make_optimizer(net, config.lr, master_weights=config.amp)
    scheduler = make_scheduler(optimizer, config.epochs * steps_per_epoch)
    device_type = as_device(config.device).type
    precision = autocast(device_type, enabled=config.amp)
    scaler = GradScaler(device_type, enabled=config.amp)
    start_epoch, history = 0, []

    if state is not None:
        task.check_checkpoint(state["extra"])
        _restore(config.out, "model", net, state["model"])
        _restore(config.out, "optimizer", optimizer, state["optimizer"])
        _restore(config.out, "scheduler", scheduler, state["scheduler"])
        if state.get("scaler"):  # none in checkpoints from before --amp, empty without it: a fresh scaler
            _restore(config.out, "scaler", scaler, state["scaler"])
        restore_rng(state, loader_generator)
        start_epoch, history = state["epoch"], list(state["history"])
        planned = state["config"]["epochs"]
        schedule = scheduler.lr_lambdas[0]
        if config.epochs != planned and config.epochs > start_epoch:
            # the cosine was laid out for the planned length: stretch (or cut) it to the new one
            schedule.total = max(config.epochs * steps_per_epoch, schedule.warmup + 1)
            reporter.line(
                f"resuming after epoch {start_epoch} of {planned}; training to epoch {config.epochs} "
                f"(learning-rate schedule re-laid for {config.epochs} epochs)"
            )
        else:
            reporter.line(f"resuming after epoch {start_epoch} of {planned}")
        saved_ranks = state["config"].get("world_size", 1)
        if saved_ranks != ranks:
            reporter.line(
                f"note: the checkpoint was trained by {saved_ranks} process(es) and this run has {ranks}: "
                f"the remaining epochs deal their samples out differently from an uninterrupted run"
            )
    elif _exists(config.out) and not config.profile_steps:
        reporter.line(
            f"note: starting a new run; the checkpoint in {config.out} will be replaced (use --resume to continue it)"
        )
    if config.nvtx and not _nvtx_tool_attached():
        reporter.line(
            "note: --nvtx: no NVTX tool is attached, so the ranges go nowhere; run under Nsight "
            "Systems (nsys profile -t cuda,nvtx adcuda train --nvtx ...) or Nsight Compute (ncu --nvtx)"
        )
    # wrapped once the checkpoint's weights are in: every rank then starts from rank 0's
    model = net if world is None else parallel.wrap(net)

    how = (", float16 with float32 master weights (--amp)" if config.amp else "") + (
        f", {ranks} processes of {config.batch_size // ranks} samples per step" if world is not None else ""
    )
    reporter.line(
        f"task {task.name}: {task.describe()}; {_count_parameters(net):,} parameters; "
        f"device {config.device}{how}; {steps_per_epoch} steps per epoch"
    )
    # by default neither across processes (the data-parallel wrapper's gradient hooks end a capture), nor
    # with --amp (the GradScaler's first step makes state the step then reads, which ends it too), nor
    # under --profile (its table names the model's ops; --profile --compile shows the replays instead)
    by_default = config.compile is None and world is None and not config.amp and not config.profile_steps
    compiled = device_type == "cpu" and (config.compile or by_default)
    if config.compile and not compiled:
        reporter.line(f"note: --compile captures CPU programs only; training on {config.device} runs eagerly")
    step = TrainStep(model, optimizer, scheduler, scaler, precision, task, config.device, compiled=compiled)
    if config.profile_steps:
        return _profile(step, loader, config, start_epoch, reporter, main)
    if start_epoch < config.epochs:
        reporter.line(task.validation_note())
    for epoch in range(start_epoch, config.epochs):
        started = time.perf_counter()
        _set_epoch(loader, epoch)
        model.train()
        total, count = _train_one_epoch(step, loader, reporter, f"epoch {epoch + 1}/{config.epochs}")
        train_loss = total / max(count, 1) if world is None else parallel.mean_over_ranks(total, count, config.device)
        if not main:
            continue
        net.eval()
        with no_grad(), precision:
            val = task.evaluate(net, "val", config.device)
        seconds = time.perf_counter() - started
        record = {
            "epoch": epoch + 1,
            "train_loss": train_loss,
            "lr": scheduler.get_last_lr()[0],
            "seconds": seconds,
            **{f"val_{k}": v for k, v in val.items()},
        }
        history.append(record)
        save_checkpoint(
            config.out,
            config=dict(dataclasses.asdict(config), world_size=ranks),
            epoch=epoch + 1,
            model=net,
            optimizer=optimizer,
            scheduler=scheduler,
            scaler=scaler,
            loader_generator=loader_generator,
            history=history,
            extra=task.checkpoint_extra(),
        )
        reporter.line(
            f"epoch {epoch + 1:>3}/{config.epochs}  train loss {train_loss:.4f}  "
            + "  ".join(f"val {k.replace('_', ' ')} {v:.4f}" for k, v in val.items())
            + f"  lr {scheduler.get_last_lr()[0]:.2e}  {seconds:.1f}s"
        )
    if start_epoch >= config.epochs:
        reporter.line(f"the checkpoint has already trained {start_epoch} epochs (--epochs {config.epochs})")
    if not main:
        return None

    net.eval()
    with no_grad(), precision:
        final = task.final_report(net, config, reporter)
    reporter.line(f"checkpoint: {checkpoint_path(config.out)}")
    return final


class TrainStep:
    """One optimizer step on one batch, in a ``train_step`` range (seen by NVTX and the profiler): the
    forward under autocast (a no-op without ``--amp``), the scaled backward, gradients unscaled (into
    float32) before clipping, and the step, skipped with the schedule's when a gradient overflowed (the
    disabled scaler of a float32 run steps every time). With ``compiled`` the step is captured once per
    batch shape and replayed (``adcuda.compile``): the whole of it where the scaler is disabled (it
    always steps, so the optimizer and schedule steps replay with the rest), else the part up to the
    clipping, the scaler's step deciding on the host whether to skip."""

    def __init__(self, model, optimizer, scheduler, scaler, precision, task, device, compiled=False):
        self.model = model
        self.optimizer = optimizer
        self.scheduler = scheduler
        self.scaler = scaler
        self.precision = precision
        self.task = task
        self.device = device
        self.whole = compiled and not scaler.is_enabled()
        if self.whole:
            self.gradients = capture.compile(self._whole_step)
        else:
            self.gradients = capture.compile(self._gradients) if compiled else self._gradients

    def _gradients(self, batch):
        """The loss of ``batch`` and the clipped, unscaled gradients it leaves in ``.grad``."""
        with self.precision:
            loss = self.task.training_loss(self.model, batch)
        self.optimizer.zero_grad(set_to_none=True)
        self.scaler.scale(loss).backward()
        self.scaler.unscale_(self.optimizer)
        nn.utils.clip_grad_norm_(self.model.parameters(), MAX_GRAD_NORM)
        return loss

    def _whole_step(self, batch):
        """The step of a run without loss scaling: what ``__call__`` does with a disabled scaler, whose
        ``step`` is the optimizer's and whose ``update`` does nothing."""
        loss = self._gradients(batch)
        self.optimizer.step()
        self.scheduler.step()
        return loss

    def __call__(self, batch, description):
        """Returns the batch's loss (a float) and its number of samples."""
        with record_function("train_step"):
            batch = _to_device(batch, self.device)
            loss = self.gradients(batch)
            if not self.whole:
                if self.scaler.step(self.optimizer):
                    self.scheduler.step()
                self.scaler.update()
            value = loss.item()
        if not math.isfinite(value):
            raise FloatingPointError(
                f"training diverged: the loss became {value} at {description} (try a smaller --lr)"
            )
        return value, batch[0].shape[0]


def _train_one_epoch(step, loader, reporter, description):
    """One pass over ``loader``; returns the summed loss and the number of samples."""
    total, count = 0.0, 0
    bar = reporter.progress(loader, len(loader), description)
    for batch in bar:
        value, size = step(batch, description)
        total += value * size
        count += size
        bar.set_postfix(loss=f"{value:.4f}", refresh=False)
    bar.close()
    return total, count


def _profile(step, loader, config, start_epoch, reporter, main):
    """Run ``config.profile_steps`` training steps (from where the run stands, across epochs if need be)
    under the profiler, then print the per-op table and write the Chrome trace (rank 0 of a distributed
    run). Nothing is checkpointed: the steps only show where the time goes."""
    trace = config.trace or os.path.join(config.out, "trace.json")
    step.model.train()
    done, epoch = 0, start_epoch
    with profile(enabled=main, record_shapes=True, profile_memory=True) as prof:
        while done < config.profile_steps:
            _set_epoch(loader, epoch)
            for batch in loader:
                step(batch, f"profiled step {done + 1}")
                done += 1
                if done == config.profile_steps:
                    break
            epoch += 1
    if not main:
        return None
    os.makedirs(os.path.dirname(os.path.abspath(trace)), exist_ok=True)
    prof.export_chrome_trace(trace)
    reporter.result(prof.key_averages().table(sort_by="cpu_time_total", row_limit=PROFILE_TABLE_ROWS))
    reporter.result(f"trace of {done} training steps: {trace} (open it in https://ui.perfetto.dev or chrome://tracing)")
    return {"profiled_steps": done, "trace": trace}


def _set_epoch(loader, epoch):
    """A DistributedSampler deals each epoch's shuffle out anew from its seed and the epoch."""
    set_epoch = getattr(loader.sampler, "set_epoch", None)
    if set_epoch is not None:
        set_epoch(epoch)


def _nvtx_tool_attached():
    return NvtxEmitter().tool_attached


def _count_parameters(model):
    return sum(p.numel() for p in model.parameters())


def _exists(out_dir):
    return os.path.exists(checkpoint_path(out_dir))
