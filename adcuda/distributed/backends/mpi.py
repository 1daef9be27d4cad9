"""The MPI transport (mpi4py): collectives on CPU tensors (through their NumPy view), and start-up for NCCL.

MPI's blocking collectives wait forever for a rank that died, so every call here is MPI's
non-blocking form (``Iallreduce``, ``Ibcast``, ...) polled with ``Test`` until the group's timeout.
While it polls, a rank also answers liveness pings on a second communicator, so that a rank whose
wait runs out can name the ranks that stopped answering instead of only saying "timed out". After
a timeout the group is unusable (the other ranks may still be inside the collective), and this
process aborts the whole MPI job when it exits, since ``MPI_Finalize`` could wait for the missing
rank forever. An uncaught exception aborts the job too, at once (as ``python -m mpi4py`` does): the
other ranks would otherwise wait for this one until their timeout.
"""

import atexit
import os
import sys
import time

import numpy as np

from ... import dtypes as dt
from ..errors import DistributedError

_PING, _PONG = 1, 2
# Poll without sleeping this long (a collective between ready ranks takes microseconds), yielding the
# core between polls in case a slower rank shares it (that is the rank being waited for); then sleep
# between polls, from _FIRST_PAUSE_S doubling up to _MAX_PAUSE_S, so a long wait costs no CPU.
_SPIN_S = 2e-3
_FIRST_PAUSE_S = 2e-5
_MAX_PAUSE_S = 1e-3
_OUTPUT_GRACE_S = 0.2  # between printing why this rank fails and aborting the job
_LIVENESS_WINDOW_S = 1.0  # how long a rank whose wait ran out waits for the others' answers


def import_mpi():
    """mpi4py's ``MPI`` module (importing it initialises MPI), or an error that says how to get it."""
    try:
        from mpi4py import MPI
    except ImportError as e:
        raise DistributedError(
            "the mpi backend needs mpi4py and an MPI library: pip install 'adcuda[distributed]' (mpi4py and "
            f"MPICH), or mpi4py built against your cluster's MPI (importing mpi4py failed: {e})"
        ) from None
    return MPI


def is_available():
    try:
        import_mpi()
    except DistributedError:
        return False
    return True


class MPIBackend:
    name = "mpi"

    def __init__(self, timeout_s):
        MPI = import_mpi()
        self._MPI = MPI
        self.timeout_s = timeout_s
        self.failure = None  # what broke this group, once something has
        self._closed = False
        world = MPI.COMM_WORLD
        self.rank, self.world_size = world.Get_rank(), world.Get_size()
        self._ops = {"sum": MPI.SUM, "product": MPI.PROD, "max": MPI.MAX, "min": MPI.MIN}
        self._status = MPI.Status()
        self._token = np.zeros(1, np.uint8)
        self._inbox = np.zeros(1, np.uint8)
        self._pongs = []
        self._pings = None
        self._previous_excepthook = None
        if self.world_size > 1:
            self._install_exit_guard()
        arrival = "init_process_group (every rank must call it)"
        self.comm = self._duplicate(world, arrival)
        self._pings = self._duplicate(world, arrival)

    def _duplicate(self, comm, what):
        dup, request = comm.Idup()
        self.wait(request, what)
        return dup

    # ------------------------------------------------------------------ collectives on CPU tensors
    def wire_dtype(self, dtype):
        """MPI has no half-precision sum: float16 is reduced in float32; bool as int32 (MAX = or)."""
        if dtype is dt.float16 or dtype is dt.bfloat16:
            return dt.float32
        if dtype is dt.bool_:
            return dt.int32
        return dtype

    def all_reduce(self, tensor, op):
        return self._start(lambda: self.comm.Iallreduce(self._MPI.IN_PLACE, tensor.numpy(), self._ops[op]))

    def broadcast(self, tensor, src):
        return self._start(lambda: self.comm.Ibcast(self._bytes(tensor), root=src))

    def all_gather(self, out, tensor):
        return self._start(lambda: self.comm.Iallgather(self._bytes(tensor), self._bytes(out)))

    def barrier(self):
        return self._start(self.comm.Ibarrier)

    def all_gather_bytes(self, data, what):
        """Every rank's ``data`` (bytes), in rank order; blocking, within the timeout."""
        counts = np.zeros(self.world_size, np.int64)
        self.wait(self._start(lambda: self.comm.Iallgather(np.array([len(data)], np.int64), counts)), what)
        displacements = np.zeros(self.world_size, np.int64)
        np.cumsum(counts[:-1], out=displacements[1:])
        gathered = np.empty(int(counts.sum()), np.uint8)
        sent = np.frombuffer(data, np.uint8)
        self.wait(
            self._start(lambda: self.comm.Iallgatherv(sent, [gathered, counts, displacements, self._MPI.BYTE])), what
        )
        return [gathered[d : d + c].tobytes() for d, c in zip(displacements.tolist(), counts.tolist())]

    def _start(self, call):
        self._check_usable()
        try:
            return call()
        except self._MPI.Exception as e:
            self._break(f"MPI refused the call: {e}")

    # ------------------------------------------------------------------ waiting, within the timeout
    def test(self, request):
        try:
            return request.Test()
        except self._MPI.Exception as e:
            self._break(f"MPI reported an error: {e}")

    def wait(self, request, what, timeout_s=None):
        self.wait_for(lambda: self.test(request), what, timeout_s)

    def wait_for(self, is_done, what, timeout_s=None):
        """Poll ``is_done()`` (answering other ranks' pings meanwhile) until it is true or the timeout
        runs out; then raise, naming the ranks that stopped answering."""
        self._check_usable()
        if is_done():
            return
        timeout_s = self.timeout_s if timeout_s is None else timeout_s
        start = time.monotonic()
        pause = 0.0
        while True:
            self._answer_pings()
            if is_done():
                return
            now = time.monotonic()
            if now - start >= timeout_s:
                self._time_out(what, timeout_s)
            if now - start > _SPIN_S:
                time.sleep(pause)
                pause = min(_MAX_PAUSE_S, pause * 2 or _FIRST_PAUSE_S)
            else:
                os.sched_yield()

    def _answer_pings(self):
        pings = self._pings
        if pings is None:
            return
        status = self._status
        while pings.Iprobe(self._MPI.ANY_SOURCE, _PING, status):
            source = status.Get_source()
            pings.Recv(self._inbox, source, _PING)
            self._pongs.append(pings.Isend(self._token, source, _PONG))
        if len(self._pongs) > 64:
            self._pongs = [r for r in self._pongs if not r.Test()]

    def _silent_ranks(self):
        """The other ranks that do not answer a ping within the liveness window."""
        pings, status = self._pings, self._status
        others = [r for r in range(self.world_size) if r != self.rank]
        self._pongs.extend(pings.Isend(self._token, r, _PING) for r in others)
        answered = set()
        deadline = time.monotonic() + min(_LIVENESS_WINDOW_S, self.timeout_s)
        while len(answered) < len(others) and time.monotonic() < deadline:
            self._answer_pings()
            while pings.Iprobe(self._MPI.ANY_SOURCE, _PONG, status):
                source = status.Get_source()
                pings.Recv(self._inbox, source, _PONG)
                answered.add(source)
            time.sleep(1e-3)
        return [r for r in others if r not in answered]

    def _time_out(self, what, timeout_s):
        what = what() if callable(what) else what
        limit = f"{timeout_s:g} s"
        if self._pings is None:
            detail = f"not every rank arrived within {limit} (a rank may have died, or never called it)"
        else:
            silent = self._silent_ranks()
            if silent:
                names = ", ".join(str(r) for r in silent)
                detail = (
                    f"rank{'s' if len(silent) > 1 else ''} {names} did not answer within {limit} (it may "
                    "have died, or be stuck outside adcuda.distributed)"
                )
            else:
                detail = (
                    f"it did not complete within {limit} although every rank answers: the ranks are "
                    "probably calling different collectives, or the same ones in a different order or "
                    "with different sizes"
                )
        self._break(f"{what}: {detail}")

    def _break(self, message):
        self.failure = message
        raise DistributedError(
            f"{message}. The process group is unusable now; this process aborts the MPI job when it exits"
        )

    def _check_usable(self):
        if self.failure is not None:
            raise DistributedError(
                f"the process group failed earlier ({self.failure}); no collective can run on it any more"
            )
        if self._closed:
            raise DistributedError("the process group was destroyed")

    # ------------------------------------------------------------------ shutting down
    def _install_exit_guard(self):
        previous = sys.excepthook

        def abort_job_on_uncaught(exc_type, exc, tb):
            previous(exc_type, exc, tb)
            self._abort(1)

        self._previous_excepthook = previous
        sys.excepthook = abort_job_on_uncaught
        atexit.register(self._abort_if_failed)

    def _abort(self, code):
        sys.stdout.flush()
        sys.stderr.flush()
        time.sleep(_OUTPUT_GRACE_S)  # MPI_Abort may outrun mpiexec's forwarding of the error just printed
        self._MPI.COMM_WORLD.Abort(code)

    def _abort_if_failed(self):
        if self.failure is not None:
            self._abort(1)

    def abort(self):
        """End the whole job now (every rank), after a failure that leaves the group inconsistent."""
        self._abort(1)

    def close(self):
        if self._closed:
            return
        self._closed = True
        if self._previous_excepthook is not None:
            sys.excepthook = self._previous_excepthook
            atexit.unregister(self._abort_if_failed)
            self._previous_excepthook = None
        if self.failure is None:
            # after a failure another rank may still be inside a collective on these communicators
            for comm in (self.comm, self._pings):
                comm.Free()

    def _bytes(self, tensor):
        """A contiguous CPU tensor's memory as MPI bytes (broadcast and gather move any dtype unchanged)."""
        return [tensor.numpy(), self._MPI.BYTE]
