"""The CUDA backend's random primitives (kernels/random.cu): ``rand randn randint bernoulli`` from
Philox4x32-10 keyed by ``(seed, offset)``, as the CPU backend's signatures have them.

Element i of a draw depends only on (seed, offset, i): the same call gives the same numbers on any
GPU and launch configuration, and the first n values of a larger draw equal a draw of n. The streams
differ from the CPU backend's (NumPy's Philox4x64 with its own conversions); both are reproducible under
``adcuda.manual_seed``. ``adcuda._C`` is looked up when a primitive runs, so importing this module never
needs CUDA.
"""
from .. import _native
from ..errors import DTypeError
from . import _cuda_kernels as _k

__all__ = ["rand", "randn", "randint", "bernoulli"]

_U64 = (1 << 64) - 1


def _C():
    return _native._C


def _floating(op, dtype):
    if not dtype.is_floating_point:
        raise DTypeError(f"{op}: expected a floating point dtype, got {dtype}")
    return _k.scalar_type(dtype.name)


def rand(shape, dtype, seed, offset):
    return _C().rand(tuple(shape), _floating("rand", dtype), int(seed) & _U64, int(offset) & _U64)


def randn(shape, dtype, seed, offset):
    return _C().randn(tuple(shape), _floating("randn", dtype), int(seed) & _U64, int(offset) & _U64)


def randint(low, high, shape, dtype, seed, offset):
    return _C().randint(int(low), int(high), tuple(shape), _k.scalar_type(dtype.name), int(seed) & _U64,
                        int(offset) & _U64)


def bernoulli(shape, p, dtype, seed, offset):
    return _C().bernoulli(tuple(shape), float(p), _k.scalar_type(dtype.name), int(seed) & _U64, int(offset) & _U64)
