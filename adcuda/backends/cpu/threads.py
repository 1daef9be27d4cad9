"""How many threads the CPU backend computes on: PyTorch's ``set_num_threads`` / ``get_num_threads``, and
the policy that keeps small products on one thread.

The CPU backend's threads are those of NumPy's BLAS (OpenBLAS in NumPy's wheels): everything else it
computes runs on the calling thread. Left to itself, OpenBLAS runs every product above 64x64x64 on all
its threads, and after each one its workers spin for the next (up to 2^28 cycles, about 0.1 s). A
small model's products gain little from a second thread even on an idle machine, and on a busy one the
spinning costs much: ``adcuda train`` (batch 32, 64-256-256-10) spent 20 s of CPU time, against 1.8 s
with ``OPENBLAS_NUM_THREADS=1``, on 2 cores that 8 other jobs shared. So the backend sets NumPy's BLAS
pool to one thread the first time it multiplies, and raises it, for the length of one call, only for
products of at least ``WORK_PER_THREAD`` multiply-adds per thread. Switching through threadpoolctl's
per-library ``set_num_threads`` costs about 0.8 us a call (1.5 us a raised product), and nothing for
the small ones, which keep the one-thread pool; its ``limit()`` context manager would cost 58 us and
``threadpool_limits`` 1.8 ms a call (measured on the development machine), too much for every product.

After a product that used more than one thread, OpenBLAS's idle workers spin up to 2^28 cycles; the
package limits that to 2^20 before NumPy loads OpenBLAS (``adcuda/_blas_spin.py``).

The thread count follows PyTorch: ``OMP_NUM_THREADS`` (then ``MKL_NUM_THREADS``) at import, else the
cores this process may run on; ``OPENBLAS_NUM_THREADS``, where set, caps it, since those are the
threads adcuda's products use. DataLoader workers start with one thread, as PyTorch's do.
"""

import operator
import os
import sys

import numpy as np

from ...errors import SettingError

__all__ = [
    "dot_into",
    "get_num_interop_threads",
    "get_num_threads",
    "matmul",
    "product_threads",
    "run_product",
    "set_up",
    "set_num_interop_threads",
    "set_num_threads",
]

# The multiply-adds (M * K * N) a product needs per thread before it runs on more than one thread.
# Measured with ``python benchmarks/bench_threads.py --sweep`` (float32, NumPy 2.4's OpenBLAS 0.3.31 on
# 2 AMD EPYC cores, the 5th percentile of many calls so that only the runs in which both threads had a
# core count): 2 threads take 0.9-1.1x the time of one up to 96x96x96 (0.9M), 1.1-1.3x faster at
# 2-4M, 1.5-1.8x faster from 128x256x256 (8M) up. Below 2 x 4M a second thread saves a few
# microseconds at best, and costs a spinning worker on a busy machine.
WORK_PER_THREAD = 1 << 22


def _positive_int(text):
    """The leading integer of an environment variable (``OMP_NUM_THREADS=4,2`` means 4 at the outer
    level), or None where it is unset or no positive integer."""
    try:
        value = int((text or "").split(",")[0])
    except ValueError:
        return None
    return value if value > 0 else None


def _cores():
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not on Linux
        return os.cpu_count() or 1


def default_threads():
    """PyTorch's default intra-op thread count, capped by ``OPENBLAS_NUM_THREADS`` where it is set."""
    cores = _cores()
    threads = _positive_int(os.environ.get("OMP_NUM_THREADS")) or _positive_int(os.environ.get("MKL_NUM_THREADS"))
    # PyTorch 2.13 takes OMP_NUM_THREADS up to the cores there are (8 on 2 cores gives 2)
    threads = min(threads, cores) if threads else cores
    blas = _positive_int(os.environ.get("OPENBLAS_NUM_THREADS"))
    return min(threads, blas) if blas else threads


_threads = default_threads()
_interop_threads = None  # set_num_interop_threads's value once called

# Products of fewer multiply-adds run on the BLAS pool as it stands (one thread once the pool is set
# up). 0 until then, so that the first product, whatever its size, sets the pool up on its way.
min_work = 0
_pool = None  # the BLAS libraries' set_num_threads functions, once set up (threadpoolctl finds them)


def _threshold():
    return 2 * WORK_PER_THREAD if _threads > 1 else sys.maxsize


def set_up():
    """Set NumPy's BLAS pool to one thread, once (every product does it on its way; a caller of BLAS that
    bypasses ``run_product`` for the products too small for threads calls it first)."""
    global _pool, min_work
    if _pool is not None:
        return
    try:
        from threadpoolctl import ThreadpoolController  # a dependency; imported here, as the first product needs it
    except ImportError:  # an install without its dependencies: NumPy's BLAS keeps its own threads
        _pool, min_work = [], sys.maxsize
        return
    _pool = [lib.set_num_threads for lib in ThreadpoolController().select(user_api="blas").lib_controllers]
    for set_threads in _pool:
        set_threads(1)
    min_work = _threshold() if _pool else sys.maxsize


def product_threads(work):
    """The threads a product of ``work`` multiply-adds runs on (1 below the threshold)."""
    if _pool is None:
        set_up()
    if not _pool or work < min_work:
        return 1
    return max(1, min(_threads, work // WORK_PER_THREAD))


def run_product(fn, *args, work):
    """``fn(*args)``, a BLAS product of ``work`` multiply-adds, on the threads ``product_threads`` gives."""
    threads = product_threads(work)
    if threads == 1:
        return fn(*args)
    for set_threads in _pool:
        set_threads(threads)
    try:
        return fn(*args)
    finally:
        for set_threads in _pool:
            set_threads(1)


def dot_into(a, b, *, out, work):
    """``np.dot(a, b, out=out)`` of two matrices, a product of ``work`` multiply-adds, on the threads
    ``product_threads`` gives (a compiled program's kernel for the products large enough for threads)."""
    return run_product(np.dot, a, b, out, work=work)


def matmul_work(x, y):
    """The multiply-adds of ``np.matmul(x, y)`` (operands of 2 dims or more; either may be broadcast)."""
    return max(x.size * y.shape[-1], y.size * x.shape[-2])


def matmul(x, y):
    """``np.matmul(x, y)`` of arrays of 2 dims or more, on as many threads as its size pays for."""
    if x.ndim < 2 or y.ndim < 2:
        return np.matmul(x, y)
    work = matmul_work(x, y)
    if work < min_work:
        return np.matmul(x, y)
    return run_product(np.matmul, x, y, work=work)


def _thread_count(name, n):
    """``n`` as a positive int (NumPy's integers too, not bool), or PyTorch's error."""
    if isinstance(n, bool):
        raise SettingError(f"{name} expects an int, but got bool")
    try:
        n = operator.index(n)
    except TypeError:
        raise SettingError(f"{name} expects an int, but got {type(n).__name__}") from None
    if n < 1:
        raise SettingError(f"{name} expects a positive integer, got {n}")
    return n


def get_num_threads() -> int:
    """The number of threads the CPU backend's large products use (PyTorch's ``get_num_threads``)."""
    return _threads


def set_num_threads(n: int) -> None:
    """Sets the number of threads the CPU backend's products use, as PyTorch's ``set_num_threads``;
    products too small to gain from threads run on one whatever it says."""
    global _threads, min_work
    _threads = _thread_count("set_num_threads", n)
    if _pool:
        min_work = _threshold()


def get_num_interop_threads() -> int:
    """PyTorch's inter-op thread count (its default: the cores there are). adcuda runs one op at a time,
    so it computes nothing differently whatever this is."""
    return _interop_threads or _cores()


def set_num_interop_threads(n: int) -> None:
    """Accepted once, as PyTorch accepts it (a second call is an error); adcuda has no inter-op pool, so
    it only changes what ``get_num_interop_threads`` returns."""
    global _interop_threads
    n = _thread_count("set_num_interop_threads", n)
    if _interop_threads is not None:
        raise SettingError(
            "Error: cannot set number of interop threads after parallel work has started or "
            "set_num_interop_threads called"
        )
    _interop_threads = n
