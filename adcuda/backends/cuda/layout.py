"""The CUDA backend's layout primitives (kernels/layout.cu): ``cat tril triu``, with the CPU backend's
(NumPy's) semantics.
"""
from ... import _native

__all__ = ["cat", "tril", "triu"]


def _C():
    return _native._C


def cat(arrays, axis):
    return _C().cat(list(arrays), int(axis))


def tril(a, k):
    return _C().tril(a, int(k))


def triu(a, k):
    return _C().triu(a, int(k))
