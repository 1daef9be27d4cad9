"""The CPU backend's indexing primitives (kernels/index.cu on CUDA): ``index index_put_ gather
scatter_add``, NumPy's advanced indexing and PyTorch's gather/scatter_add.
"""
import numpy as np

__all__ = ["index", "index_put_", "gather", "scatter_add"]


def index(a, key):
    return np.array(a[key], copy=True)


def index_put_(a, key, values, accumulate):
    if accumulate:
        np.add.at(a, key, values)
    else:
        a[key] = values
    return a


def _leading_box(a, idx, axis):
    """The part of ``a`` that ``idx`` addresses in every dim but ``axis`` (PyTorch allows smaller)."""
    box = tuple(np.s_[:] if d == axis else np.s_[:n] for d, n in enumerate(idx.shape))
    return a[box]


def gather(a, axis, idx):
    return np.take_along_axis(_leading_box(a, idx, axis), idx, axis=axis)


def _scatter_key(idx, axis):
    grids = np.indices(idx.shape, sparse=True)
    return tuple(idx if d == axis else grids[d] for d in range(idx.ndim))


def scatter_add(a, axis, idx, src):
    out = np.array(a, copy=True)
    # src is read at the index's own positions, along `axis` too (PyTorch allows a larger src)
    np.add.at(out, _scatter_key(idx, axis), src[tuple(np.s_[:n] for n in idx.shape)])
    return out
