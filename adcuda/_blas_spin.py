"""How long NumPy's OpenBLAS workers spin after a product, set before NumPy loads it.

After each product that ran on more than one thread, OpenBLAS's idle workers spin for the next one for
``2 ** OPENBLAS_THREAD_TIMEOUT`` cycles, 2^28 (about 0.1 s) unless set: CPU time the process pays on a
busy machine however short the product was. ``adcuda train`` beside one busy process on 2 cores spent
1.9-2.0 s of CPU time with the default against 1.2-1.3 s with one BLAS thread: the eleven products
large enough for two threads (the test set's, once an epoch) each left a worker spinning. With 2^20
cycles (under a millisecond) the workers still wait through the gaps between the products of one
step, and the same run took 1.3 s (measured on the development machine, OpenBLAS 0.3.31).

OpenBLAS reads the variable once, when it loads, so this only takes effect where ``import adcuda`` comes
before the first ``import numpy`` (the package imports this module first); a value the user set is kept.
"""

import os
import sys

SPIN_CYCLES_LOG2 = "20"


def limit_blas_spin():
    """Set ``OPENBLAS_THREAD_TIMEOUT`` to ``SPIN_CYCLES_LOG2`` where it is unset and NumPy is not loaded yet."""
    if "numpy" not in sys.modules:
        os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", SPIN_CYCLES_LOG2)


limit_blas_spin()
