"""The ``adcuda`` command: ``adcuda train`` trains a small model on bundled data; ``adcuda export``
writes a trained model as ONNX or C; ``adcuda info`` says how adcuda was built and whether it can use
a GPU."""

import argparse
import importlib.util
import math
import os
import sys
import tempfile

from . import _info, _native, cuda
from .distributed import launch
from .errors import AdcudaError
from .serialization import CheckpointError
from .train import TASKS, TrainConfig, train
from .train.checkpoint import CheckpointMismatch, saved_task
from .train.errors import SettingsError
from .train.export_run import FORMATS, default_out, export_trained, load_trained_model
from .train.parallel import launched_world

DEFAULT_PROFILE_STEPS = 5

TASK_HELP = {
    "digits": "classify 8x8 handwritten digits (bundled, 1,797 images) with an MLP",
    "chars": "a small GPT that writes text character by character, trained on Python's help() topics",
}


class UsageError(Exception):
    """A command line that cannot run as given; exit status 2, like argparse's own errors."""


def _positive_int(text):
    value = _int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text}")
    return value


def _non_negative_int(text):
    value = _int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be a non-negative integer, got {text}")
    return value


def _int(text):
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None


def _positive_float(text):
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not (value > 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"must be a positive number, got {text}")
    return value


def _task_defaults(name):
    return TASKS[name].defaults


def build_parser():
    parser = argparse.ArgumentParser(
        prog="adcuda", description="adcuda: automatic differentiation with PyTorch's names, on CUDA or the CPU."
    )
    commands = parser.add_subparsers(dest="command", metavar="{train,export,info}")
    commands.required = True

    info = commands.add_parser(
        "info",
        help="how adcuda was built and what it runs on (GPU or why not)",
        description="Show how adcuda was built (CUDA compiled or not, toolkit, "
        "architectures) and which devices it sees at run time, or why none.",
    )
    info.add_argument("--json", action="store_true", help="print the facts as JSON")

    digits, chars = _task_defaults("digits"), _task_defaults("chars")
    train = commands.add_parser(
        "train",
        help="train a small model on data bundled with adcuda",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Train a model on data that ships with adcuda, with a progress bar, per-epoch "
        "validation, a checkpoint after every epoch and a final held-out evaluation.\n\n"
        + "\n".join(f"  {name:<7} {text}" for name, text in TASK_HELP.items()),
        epilog="Interrupt with Ctrl-C at any time: the checkpoint of the last finished epoch stays in --out, "
        "and the same command with --resume continues exactly where it stopped.\n\n"
        "Examples:\n"
        "  adcuda train --task chars --amp                    mixed precision\n"
        "  adcuda train --distributed --nproc-per-node 2      2 processes on this machine\n"
        "  mpirun -n 4 adcuda train --distributed             4 processes started by MPI\n"
        "  adcuda train --profile --profile-steps 10          where 10 steps spend their time\n"
        "  nsys profile -t cuda,nvtx adcuda train --nvtx      the ops on Nsight Systems' timeline",
    )
    train.add_argument(
        "--task", choices=sorted(TASK_HELP), help="what to train (default: digits; with --resume: the checkpoint's)"
    )
    train.add_argument(
        "--device",
        choices=("auto", "cpu", "cuda"),
        default="auto",
        help="where to compute: auto uses the GPU when adcuda can, else the CPU and says why (default: auto)",
    )
    train.add_argument(
        "--epochs",
        type=_positive_int,
        help=f"number of epochs to train to (default: {digits['epochs']} for digits, "
        f"{chars['epochs']} for chars, where an epoch is a fixed number of steps; with "
        f"--resume: the checkpoint's, and a larger value extends the run)",
    )
    train.add_argument(
        "--batch-size",
        type=_positive_int,
        help=f"samples per step (default: {digits['batch_size']} for digits, {chars['batch_size']} for chars)",
    )
    train.add_argument(
        "--lr",
        type=_positive_float,
        help=f"peak learning rate of AdamW, reached after a linear warm-up and followed by a "
        f"cosine decay (default: {digits['lr']:g} for digits, {chars['lr']:g} for chars)",
    )
    train.add_argument(
        "--seed",
        type=_non_negative_int,
        help="seed for the data split, initialisation, shuffling and sampling; the same seed "
        "gives the same run (default: 0)",
    )
    train.add_argument(
        "--out",
        metavar="DIR",
        help="folder for the checkpoint (default: ./adcuda-runs/<task>), created if need be and "
        "checked before training starts; a new run replaces the checkpoint there",
    )
    train.add_argument(
        "--resume",
        action="store_true",
        help="continue the run whose checkpoint is in --out (model, optimizer, schedule, epoch "
        "and random state), keeping its task, batch size, learning rate, seed and --amp",
    )
    train.add_argument(
        "--num-workers",
        type=_non_negative_int,
        default=0,
        help="DataLoader worker processes that prepare batches (default: 0, in this process)",
    )
    train.add_argument(
        "--quiet", action="store_true", help="no progress bar and no per-epoch lines: only the final results"
    )
    train.add_argument(
        "--amp",
        action="store_true",
        default=None,
        help="mixed precision: float16 weights and activations (matmuls in float16; softmax, layer "
        "norm and the loss in float32) stepped through float32 master weights, with dynamic "
        "loss scaling that skips the steps whose gradients overflow (default: off; with "
        "--resume: the checkpoint's)",
    )
    parallel = train.add_argument_group("data-parallel training")
    parallel.add_argument(
        "--distributed",
        action="store_true",
        help="train across the processes of a job (started by --nproc-per-node or by "
        "mpirun -n N), NCCL between GPUs and MPI on the CPU: each process trains on its share "
        "of every batch (--batch-size is the total) and the gradients are averaged; process "
        "0 prints, evaluates and writes the checkpoint",
    )
    parallel.add_argument(
        "--nproc-per-node",
        type=_positive_int,
        metavar="N",
        help="start N processes on this machine through mpiexec (python -m "
        "adcuda.distributed.launch), one GPU each where there are GPUs, and train across "
        "them; implies --distributed",
    )
    train.add_argument(
        "--compile",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="capture each training step once per batch shape and replay it (adcuda.compile, CPU "
        "only): no per-op Python dispatch after the first step, the same results bit for bit "
        "(default: on the CPU, where it is faster; --no-compile runs every step eagerly)",
    )
    profiling = train.add_argument_group("profiling")
    profiling.add_argument(
        "--nvtx",
        action="store_true",
        help="NVTX ranges (domain adcuda) for every op's forward and backward, the optimizer "
        "step and each training step (train_step), shown by Nsight Systems (nsys profile "
        "-t cuda,nvtx) and used by Nsight Compute's --nvtx filters; needs the nvtx package",
    )
    profiling.add_argument(
        "--profile",
        action="store_true",
        help="run --profile-steps training steps under adcuda's profiler, print the per-op "
        "table (sorted by total time) and write a Chrome trace, then stop: no epochs are "
        "finished and no checkpoint is written",
    )
    profiling.add_argument(
        "--profile-steps",
        type=_positive_int,
        metavar="N",
        help=f"how many steps --profile records (default: {DEFAULT_PROFILE_STEPS}; implies --profile)",
    )
    profiling.add_argument(
        "--trace",
        metavar="PATH",
        help="where --profile writes the Chrome trace, for Perfetto or chrome://tracing "
        "(default: <out>/trace.json; implies --profile)",
    )
    add_export_parser(commands)
    return parser


def add_export_parser(commands):
    export = commands.add_parser(
        "export",
        help="write a model trained by 'adcuda train' as ONNX or as dependency-free C",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Rebuild the model of an 'adcuda train' checkpoint (its task and settings are in the "
        "checkpoint) and write its eval forward as ONNX (adcuda.onnx.export, with a dynamic batch "
        "dim) or as C99 with no dependency beyond libm (adcuda.export.to_c, fixed shapes). See "
        "docs/export.md.",
        epilog="Examples:\n"
        "  adcuda export adcuda-runs/digits --format onnx             -> adcuda-runs/digits/model.onnx\n"
        "  adcuda export adcuda-runs/digits --format c --out digits_c -> digits_c/model.c, model.h\n"
        "  adcuda export run/checkpoint.pt --format c --weights file --batch-size 32",
    )
    export.add_argument("checkpoint", metavar="RUN", help="a folder 'adcuda train --out' wrote, or its checkpoint.pt")
    export.add_argument("--format", choices=FORMATS, required=True, help="onnx or c")
    export.add_argument(
        "--out",
        metavar="PATH",
        help="the .onnx file, or the folder for the C files (default: model.onnx or c/ in the run's folder)",
    )
    export.add_argument(
        "--batch-size",
        type=_positive_int,
        default=1,
        metavar="N",
        help="the batch of the example input the model is traced with: the C code's fixed batch; ONNX's "
        "batch dim stays dynamic (default: 1)",
    )
    export.add_argument(
        "--name", default="model", help="C only: the files' and functions' prefix, a C identifier (default: model)"
    )
    export.add_argument(
        "--weights",
        choices=("embedded", "file"),
        default="embedded",
        help="C only: weights as arrays in the source, or in <name>.weights read by <name>_load_weights() "
        "(default: embedded)",
    )
    export.add_argument(
        "--runner",
        action="store_true",
        help="C only: also write <name>_main.c, a program that runs the forward on files of raw float32 "
        "(to check the outputs, or time it)",
    )


def run_export(args):
    """Run ``adcuda export``; returns the exit status. A missing checkpoint, a missing onnx package or a
    bad option raise UsageError (exit status 2); a damaged checkpoint or a model the format cannot
    express print one line (exit status 1)."""
    if args.format == "onnx" and (args.name != "model" or args.weights != "embedded" or args.runner):
        raise UsageError("--name, --weights and --runner are options of --format c")
    if not (args.name.isidentifier() and args.name.isascii()):
        raise UsageError(f"--name {args.name}: must be a C identifier (letters, digits and _, not first a digit)")
    try:
        trained = load_trained_model(args.checkpoint)
        out = args.out or default_out(trained.checkpoint, args.format)
        folder = out if args.format == "c" else os.path.dirname(os.path.abspath(out))
        check_out_folder(folder, f"--out {out}")
        for line in export_trained(trained, args.format, out, args.batch_size, args.name, args.weights, args.runner):
            print(line)
    except SettingsError as error:
        raise UsageError(str(error)) from None
    except (CheckpointError, AdcudaError, OSError) as error:
        print(f"adcuda export: error: {error}", file=sys.stderr)
        return 1
    return 0


def resolve_device(choice, quiet):
    """``"cpu"`` or ``"cuda"`` for ``--device``; a UsageError (with CUDA's reason) for an impossible ask.

    Falling back to the CPU prints one short line; ``adcuda info`` gives the whole story."""
    if choice == "cpu":
        return "cpu"
    if cuda.is_available():
        if choice == "auto" and _native.build_info().get("cuda_emulated"):
            # The emulator runs kernels on the CPU for testing, far slower than the CPU backend.
            if not quiet:
                print(
                    "device: cpu (the CUDA device of this build is the emulator, for tests; --device cuda uses it)",
                    flush=True,
                )
            return "cpu"
        return "cuda"
    if choice == "cuda":
        raise UsageError(f"--device cuda: CUDA is not available: {cuda.unavailable_reason()}")
    if not quiet:
        print(f"device: cpu ({_why_not_cuda(_native.build_info())}; details: adcuda info)", flush=True)
    return "cpu"


def _why_not_cuda(build):
    """A few words on why CUDA is unusable, from the build facts (the details are ``adcuda info``'s)."""
    if not build.get("native_module_loaded"):
        return "the native module is not loaded"
    if not build.get("cuda_compiled"):
        return "this adcuda was built without CUDA"
    return "no usable CUDA device"


def check_out_folder(folder, what):
    """Create ``folder`` if need be and make sure a file can be written in it, before any training:
    otherwise a UsageError naming ``what`` (the option and its value), not an OSError after an epoch."""
    try:
        os.makedirs(folder, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as error:
        raise UsageError(f"{what}: cannot write there ({error.strerror or error}); choose another folder") from None


def settle_task_and_out(args):
    """``(task, out)``: ``--task`` (default digits) and ``--out`` (default ./adcuda-runs/<task>); with
    ``--resume``, the task is the checkpoint's, and a ``--task`` that names another is an error."""
    task = args.task or "digits"
    out = args.out or os.path.join("adcuda-runs", task)
    if args.resume:
        saved = saved_task(out)
        if args.task is not None and args.task != saved:
            raise CheckpointMismatch(f"--resume: the checkpoint in {out} is a '{saved}' run, not '{args.task}'")
        task = saved
    return task, out


def run_train(args, argv):
    """Run ``adcuda train`` as ``args`` says (``argv``: the command line they were parsed from, which a
    ``--nproc-per-node`` run hands on to the processes it starts); returns the exit status.

    Usage errors (bad or clashing options, a ``--resume`` that does not fit its checkpoint, an ``--out``
    that cannot be written) raise UsageError: exit status 2. Errors while training (a damaged
    checkpoint, a diverged loss, a failed write) print one line: exit status 1."""
    world = None
    if args.distributed or args.nproc_per_node is not None:
        # from a plain shell with --nproc-per-node, start the job without asking MPI (which it would start)
        world = parallel_world(ask_mpi=args.nproc_per_node is None)
        if world is None:
            if args.nproc_per_node is None:
                raise UsageError(
                    "--distributed: this process was not started as part of a job; add "
                    "--nproc-per-node N to start N processes, or start them with mpirun -n N"
                )
            return launch_processes(args.nproc_per_node, argv)
        if args.nproc_per_node not in (None, world.size):
            raise UsageError(
                f"--nproc-per-node {args.nproc_per_node}: this process already runs in a job of {world.size} processes"
            )
    if args.nvtx and importlib.util.find_spec("nvtx") is None:
        raise UsageError("--nvtx needs the nvtx package for its NVTX ranges: pip install nvtx")
    profiling = args.profile or args.profile_steps is not None or args.trace is not None
    out = None
    try:
        task, out = settle_task_and_out(args)
        device = resolve_device(args.device, args.quiet or (world is not None and not world.is_main))
        check_out_folder(out, f"--out {out}")
        if args.trace is not None:
            check_out_folder(os.path.dirname(os.path.abspath(args.trace)), f"--trace {args.trace}")
        config = TrainConfig(
            task=task,
            out=out,
            epochs=args.epochs,
            batch_size=args.batch_size,
            lr=args.lr,
            seed=args.seed,
            amp=args.amp,
            device=device,
            num_workers=args.num_workers,
            quiet=args.quiet,
            resume=args.resume,
            distributed=world is not None,
            nvtx=args.nvtx,
            profile_steps=(args.profile_steps or DEFAULT_PROFILE_STEPS) if profiling else 0,
            trace=args.trace,
            compile=args.compile,
        )
        train(config, TASKS[task])
    except KeyboardInterrupt:
        if out is None:
            raise
        print(
            f"\ninterrupted; the checkpoint of the last finished epoch is in {out} "
            f"(continue with: adcuda train --resume --out {out})",
            file=sys.stderr,
        )
        return 130
    except SettingsError as error:
        raise UsageError(str(error)) from None
    except (CheckpointError, AdcudaError, FloatingPointError, OSError) as error:
        print(f"adcuda train: error: {error}", file=sys.stderr)
        return 1
    return 0


def parallel_world(ask_mpi):
    """This process's place in a job started by mpirun or the launcher, or None."""
    return launched_world(ask_mpi)


def launch_processes(nproc, argv):
    """``python -m adcuda.distributed.launch --nproc-per-node N -m adcuda <argv>``: the same command in N
    processes, which find themselves in a job of N and train together; returns the job's exit status."""
    return launch.main(["--nproc-per-node", str(nproc), "-m", "adcuda", *argv])


def main(argv=None):
    """Entry point of the ``adcuda`` console script and ``python -m adcuda``; returns the exit status."""
    parser = build_parser()
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parser.parse_args(argv)
    if args.command == "info":
        if args.json:
            return _info.main_info(["--json"])
        _info.print_info()
        return 0
    try:
        if args.command == "export":
            return run_export(args)
        return run_train(args, argv)
    except UsageError as error:
        parser.exit(2, f"adcuda {args.command}: error: {error}\n")
    except KeyboardInterrupt:
        print("\ninterrupted before training started", file=sys.stderr)
        return 130
