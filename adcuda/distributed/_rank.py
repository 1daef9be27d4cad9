"""What ``python -m adcuda.distributed.launch`` runs in each process that ``mpiexec`` starts: sets the
launcher's variables (``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``LOCAL_WORLD_SIZE``) from what MPI
gave this process, shows it one GPU where the machine has GPUs, runs the user's script as
``__main__``, and aborts the whole MPI job if the script fails, so that no other rank is left
waiting in a collective for this one."""

import argparse
import os
import runpy
import sys
import time
import traceback

from . import environment

# MPI_Abort tears the job down at once; mpiexec may not have forwarded this rank's last output (the
# traceback saying why) by then, so wait this long after flushing it.
_OUTPUT_GRACE_S = 0.2
_LOCAL_SIZE_VARIABLES = ("LOCAL_WORLD_SIZE", "MPI_LOCALNRANKS", "OMPI_COMM_WORLD_LOCAL_SIZE")


def _set_placement(gpus):
    (rank, _), (world_size, _) = environment.rank_and_world_size()
    local = environment.local_rank()
    local_size = next((os.environ[v] for v in _LOCAL_SIZE_VARIABLES if os.environ.get(v)), None)
    placement = {"RANK": rank, "WORLD_SIZE": world_size, "LOCAL_RANK": local, "LOCAL_WORLD_SIZE": local_size}
    os.environ.update({name: str(value) for name, value in placement.items() if value is not None})
    if gpus > 0:
        visible = os.environ.get("CUDA_VISIBLE_DEVICES", "").strip()
        devices = [d for d in visible.split(",") if d] if visible else [str(i) for i in range(gpus)]
        os.environ["CUDA_VISIBLE_DEVICES"] = devices[(local or 0) % len(devices)]


def _abort_job(code):
    sys.stdout.flush()
    sys.stderr.flush()
    time.sleep(_OUTPUT_GRACE_S)
    try:
        from mpi4py import MPI
    except ImportError:
        os._exit(code)
    MPI.COMM_WORLD.Abort(code)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="adcuda.distributed._rank")
    parser.add_argument("--gpus", type=int, default=0)
    parser.add_argument("--module", action="store_true")
    parser.add_argument("target")
    parser.add_argument("args", nargs=argparse.REMAINDER)
    options = parser.parse_args(argv)
    _set_placement(options.gpus)
    sys.argv = [options.target] + options.args
    try:
        if options.module:
            runpy.run_module(options.target, run_name="__main__", alter_sys=True)
        else:
            sys.path[0] = os.path.dirname(os.path.abspath(options.target))
            runpy.run_path(options.target, run_name="__main__")
    except SystemExit as e:
        if e.code in (None, 0):
            raise
        if not isinstance(e.code, int):
            print(e.code, file=sys.stderr)
        _abort_job(e.code if isinstance(e.code, int) else 1)
    except BaseException:
        traceback.print_exc()
        _abort_job(1)


if __name__ == "__main__":
    main()
