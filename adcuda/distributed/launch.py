"""``python -m adcuda.distributed.launch --nproc-per-node N script.py [args ...]``: start N ranks of
``script.py`` on this machine through ``mpiexec``, one GPU each where the machine has GPUs.

Each rank finds ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK`` and ``LOCAL_WORLD_SIZE`` in its environment
(and, with GPUs, ``CUDA_VISIBLE_DEVICES`` naming its own GPU). A rank whose script raises or exits
non-zero aborts the whole job, so the others never wait for it; the launcher exits with the job's
status. ``mpirun -n N python script.py`` works as well, without the per-rank GPU selection.
"""

import argparse
import os
import shutil
import signal
import subprocess
import sys

from .. import cuda


def find_mpiexec(explicit=None):
    """``explicit``, ``$ADCUDA_MPIEXEC``, the one installed beside this Python (``pip install mpich``
    puts it there, matching mpi4py), or the first ``mpiexec``/``mpirun`` on PATH."""
    explicit = explicit or os.environ.get("ADCUDA_MPIEXEC")
    if explicit:
        if os.path.isfile(explicit) and os.access(explicit, os.X_OK):
            return explicit
        raise SystemExit(f"launch: the mpiexec asked for, {explicit}, is not an executable file")
    beside_python = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    for candidate in (beside_python, shutil.which("mpiexec"), shutil.which("mpirun")):
        if candidate and os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    raise SystemExit(
        "launch: no mpiexec found: pip install 'adcuda[distributed]' (mpi4py and MPICH), or put your "
        "MPI's mpiexec on PATH (or name it with --mpiexec / $ADCUDA_MPIEXEC)"
    )


def visible_gpus():
    try:
        return cuda.device_count() if cuda.is_available() else 0
    except Exception:  # a broken CUDA set-up means "no GPU" here; the ranks report it if they need one
        return 0


def build_command(options, gpus):
    command = [
        find_mpiexec(options.mpiexec),
        "-n",
        str(options.nproc_per_node),
        sys.executable,
        "-m",
        "adcuda.distributed._rank",
        "--gpus",
        str(gpus),
    ]
    if options.module:
        command.append("--module")
    return command + [options.target] + options.args


def parse(argv):
    parser = argparse.ArgumentParser(
        prog="python -m adcuda.distributed.launch",
        description="Start N ranks of a training script on this machine through mpiexec.",
    )
    parser.add_argument(
        "--nproc-per-node",
        "--nproc_per_node",
        dest="nproc_per_node",
        type=int,
        default=1,
        help="how many processes to start (default 1); one GPU each where there are GPUs",
    )
    parser.add_argument("--mpiexec", default=None, help="the mpiexec to use (default: found automatically)")
    parser.add_argument("-m", "--module", action="store_true", help="run the target as a module, like python -m")
    parser.add_argument("target", help="the training script (or module, with -m)")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="arguments for the script")
    options = parser.parse_args(argv)
    if options.nproc_per_node < 1:
        parser.error(f"--nproc-per-node must be at least 1, got {options.nproc_per_node}")
    return options


def main(argv=None):
    options = parse(argv)
    gpus = visible_gpus()
    if 0 < gpus < options.nproc_per_node:
        print(
            f"launch: {options.nproc_per_node} processes share {gpus} GPU(s); NCCL needs one GPU per rank",
            file=sys.stderr,
        )
    job = subprocess.Popen(build_command(options, gpus))

    def forward(signum, frame):
        job.send_signal(signum)

    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, forward)
    code = job.wait()
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main())
