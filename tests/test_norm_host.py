"""The host module's layer norm forward and backward and group norm forward (kernels/host/norm.cpp)
against the CPU backend's NumPy path, their reference: with and without weight and bias, one or
several normalised dims, groups over channels and spatial dims, constant rows and a NaN."""

import numpy as np
import pytest
from helpers import native_and_numpy

from adcuda.backends.cpu import norm as cpu_norm


def _both(monkeypatch, fn, *args):
    return native_and_numpy(monkeypatch, cpu_norm, fn, *args)


def _layer_norm_both(monkeypatch, fn, *args, **kwargs):
    """``fn`` on the host module's layer norm (kernels/host/norm.cpp), then on NumPy's path."""
    assert cpu_norm._LAYER_NORM is not None, "the host module was built without cpu_layer_norm"
    native = fn(*args, **kwargs)
    with monkeypatch.context() as m:
        m.setattr(cpu_norm, "_LAYER_NORM", None)
        m.setattr(cpu_norm, "_NATIVE", None)
        reference = fn(*args, **kwargs)
    return native, reference


def _assert_close(native, reference, dtype):
    for got, want in zip(native, reference):
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=2e-5 if dtype == np.float32 else 1e-12, atol=2e-6)


def _input(dtype, shape):
    x = np.random.default_rng(0).standard_normal(shape).astype(dtype) * 3 + 1
    x.reshape(-1)[: shape[-1]] = 2.0  # a constant row: variance 0, rstd 1 / sqrt(eps)
    x.reshape(-1)[-1] = np.nan
    return x


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("affine", [False, True])
@pytest.mark.parametrize("shape, n", [((8, 8), 1), ((2, 3, 4), 2), ((5,), 1)])
def test_layer_norm_matches_numpy(monkeypatch, dtype, affine, shape, n):
    x = _input(dtype, shape)
    rng = np.random.default_rng(1)
    weight = rng.standard_normal(shape[len(shape) - n :]).astype(dtype) if affine else None
    bias = rng.standard_normal(shape[len(shape) - n :]).astype(dtype) if affine else None
    _assert_close(*_layer_norm_both(monkeypatch, cpu_norm.layer_norm, x, weight, bias, n, 1e-5), dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("affine", [False, True])
@pytest.mark.parametrize("shape, groups", [((2, 4, 8, 8), 2), ((3, 6), 3), ((2, 4, 5), 1), ((1, 4, 3, 2), 4)])
def test_group_norm_matches_numpy(monkeypatch, dtype, affine, shape, groups):
    x = _input(dtype, shape)
    rng = np.random.default_rng(2)
    weight = rng.standard_normal(shape[1]).astype(dtype) if affine else None
    bias = rng.standard_normal(shape[1]).astype(dtype) if affine else None
    _assert_close(*_both(monkeypatch, cpu_norm.group_norm, x, weight, bias, groups, 1e-5), dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("affine", [False, True])
@pytest.mark.parametrize("keep", [False, True])
@pytest.mark.parametrize("shape, n", [((171, 97), 1), ((3, 61, 2, 47), 2), ((6, 5), 1)])
def test_layer_norm_host_forward_and_backward_match_numpy(monkeypatch, dtype, affine, keep, shape, n):
    x = _input(dtype, shape)
    rng = np.random.default_rng(3)
    normalised = shape[len(shape) - n :]
    weight = rng.standard_normal(normalised).astype(dtype) if affine else None
    bias = rng.standard_normal(normalised).astype(dtype) if affine else None
    kept = [np.empty_like(x), np.empty_like(x)] if keep else [None, None]
    native, reference = _layer_norm_both(
        monkeypatch, lambda: cpu_norm.layer_norm(x, weight, bias, n, 1e-5, xhat=kept.pop(0) if keep else None)
    )
    _assert_close(native, reference, dtype)
    assert native[1].shape == native[2].shape == shape[: len(shape) - n] + (1,) * n
    g = rng.standard_normal(shape).astype(dtype)
    _, mean, rstd = native
    xhat = None
    if keep:  # what the forward kept: (x - mean) * rstd, as the NumPy path rounds it
        xhat = np.multiply(np.subtract(x, mean), rstd)
    native, reference = _layer_norm_both(
        monkeypatch, cpu_norm.layer_norm_backward, g, x, weight, mean, rstd, n, xhat=xhat
    )
    assert (native[1] is None) == (reference[1] is None) == (weight is None)
    for got, want in zip(native, reference):
        if want is not None:
            assert got.dtype == want.dtype and got.shape == want.shape
            # (dweight and dbias sum 171-2000 rows: NumPy's float32 BLAS sums round more than the double ones)
            np.testing.assert_allclose(got, want, rtol=1e-4 if dtype == np.float32 else 1e-12, atol=1e-4)


def test_layer_norm_host_keeps_what_the_numpy_path_keeps(monkeypatch):
    x = _input(np.float32, (200, 96))
    x[-1, -1] = 0.5  # (no NaN: the kept arrays compare bit for bit)
    kept, numpy_kept = np.empty_like(x), np.empty_like(x)
    _, mean, rstd = cpu_norm.layer_norm(x, None, None, 1, 1e-5, xhat=kept)
    np.testing.assert_array_equal(kept, np.multiply(np.subtract(x, mean), rstd))
    with monkeypatch.context() as m:
        m.setattr(cpu_norm, "_LAYER_NORM", None)
        cpu_norm.layer_norm(x, None, None, 1, 1e-5, xhat=numpy_kept)
    np.testing.assert_allclose(kept, numpy_kept, rtol=1e-5, atol=1e-5)


def test_layer_norm_host_takes_numpy_for_strided_or_mixed_arrays(monkeypatch):
    calls = []
    real = cpu_norm._LAYER_NORM.cpu_layer_norm
    spy = type("Spy", (), {"cpu_layer_norm": lambda *a: calls.append(a) or real(*a)})
    x = _input(np.float32, (200, 96))
    monkeypatch.setattr(cpu_norm, "_LAYER_NORM", spy)
    cpu_norm.layer_norm(x, None, None, 1, 1e-5)
    assert len(calls) == 1
    cpu_norm.layer_norm(np.asfortranarray(x), None, None, 1, 1e-5)  # strided
    cpu_norm.layer_norm(x, np.ones(96, np.float64), None, 1, 1e-5)  # a float64 weight
    y, mean, rstd = cpu_norm.layer_norm(x[:0], None, None, 1, 1e-5)  # no rows
    assert len(calls) == 1 and y.shape == (0, 96) and mean.shape == rstd.shape == (0, 1)


def _batch_norm_both(monkeypatch, fn, *args):
    """``fn(*args)`` on the host module's batch norm (kernels/host/norm.cpp), then on NumPy's."""
    assert cpu_norm._NATIVE_BATCH_NORM is not None, "the host module was built without its batch norm"
    native = fn(*args)
    with monkeypatch.context() as m:
        m.setattr(cpu_norm, "_NATIVE_BATCH_NORM", None)
        reference = fn(*args)
    return native, reference


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("affine", [False, True])
@pytest.mark.parametrize("shape", [(4, 3, 5, 6), (9, 4), (2, 3, 13), (3, 2, 2, 4)])
def test_batch_norm_forward_and_backward_match_numpy(monkeypatch, dtype, affine, shape):
    # planes longer and shorter than the native sums' 8 lanes, and a whole multiple of them
    rng = np.random.default_rng(3)
    x = rng.standard_normal(shape).astype(dtype) * 3 + 1
    x[:, 0] = 2.0  # channel 0 constant: variance 0, rstd 1 / sqrt(eps)
    weight = rng.standard_normal(shape[1]).astype(dtype) if affine else None
    bias = rng.standard_normal(shape[1]).astype(dtype) if affine else None
    forward = _batch_norm_both(monkeypatch, cpu_norm.batch_norm, x, weight, bias, 1e-5)
    _assert_close(*forward, dtype)
    y, mean, rstd = forward[1]
    g = rng.standard_normal(shape).astype(dtype)
    native, reference = _batch_norm_both(monkeypatch, cpu_norm.batch_norm_backward, g, x, weight, mean, rstd)
    assert (native[1] is None) == (reference[1] is None) == (weight is None)
    _assert_close([a for a in native if a is not None], [a for a in reference if a is not None], dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("p", [0.0, 1.0, 2.0, 0.5, 3.0])
def test_pair_distances_match_numpy_and_pytorch(dtype, p):
    import torch

    from adcuda.backends.cpu import gemm as cpu_gemm

    assert cpu_gemm._PDIST is not None, "the host module was built without cpu_pdist"
    rng = np.random.default_rng(3)
    for n, m in ((6, 5), (1, 3), (0, 2), (9, 0), (4, 40)):
        x = rng.standard_normal((n, m)).astype(dtype)
        if x.size > 4:
            x[1, 0], x[2, 1] = np.nan, np.inf
            x[0] = x[3]  # a zero distance
        native = cpu_gemm.pdist(x, p)
        reference = cpu_gemm.pdist_reference(x, p)
        assert native.dtype == reference.dtype == x.dtype and native.shape == reference.shape == (n * (n - 1) // 2,)
        tolerance = dict(rtol=2e-5 if dtype == np.float32 else 1e-12, atol=1e-6)
        np.testing.assert_allclose(native, reference, **tolerance)
        np.testing.assert_allclose(native, torch.pdist(torch.from_numpy(x), p).numpy(), **tolerance)
    big = np.full((2, 2), 1e30, dtype)
    big[1] = -1e30  # a square past float32's range: inf, as PyTorch's
    np.testing.assert_array_equal(cpu_gemm.pdist(big, 2.0), torch.pdist(torch.from_numpy(big)).numpy())


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_cross_products_match_numpy(dtype):
    from adcuda.backends.cpu import gemm as cpu_gemm

    assert cpu_gemm._CROSS is not None, "the host module was built without cpu_cross"
    rng = np.random.default_rng(4)
    for shape, axis in (((5, 3), 1), ((3,), 0), ((2, 3, 4), 1), ((4, 2, 3), -1), ((0, 3), 1), ((3, 0), 0)):
        a, b = (rng.standard_normal(shape).astype(dtype) for _ in range(2))
        if a.size:
            a.flat[0], b.flat[1] = np.inf, np.nan
        native = cpu_gemm.cross(a, b, axis)
        reference = cpu_gemm.cross_reference(a, b, axis % a.ndim)
        assert native.dtype == reference.dtype == a.dtype and native.shape == reference.shape
        np.testing.assert_array_equal(native, reference, strict=True)  # the same roundings, bit for bit


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("p", [0.0, 1.0, 2.0, 0.5, 3.0])
def test_row_distances_match_numpy_and_pytorch(dtype, p):
    import torch

    from adcuda.backends.cpu import gemm as cpu_gemm

    rng = np.random.default_rng(5)
    for b, n, r, m in ((2, 5, 4, 3), (1, 1, 6, 8), (3, 0, 2, 2), (1, 3, 3, 0), (1, 2, 2, 40)):
        x1, x2 = rng.standard_normal((b, n, m)).astype(dtype), rng.standard_normal((b, r, m)).astype(dtype)
        if min(n, r, m) >= 2:
            x1[0, 0, 0], x2[0, 1, 1] = np.nan, np.inf
            x2[0, 0] = x1[0, 1]  # a zero distance
        native = cpu_gemm.cdist(x1, x2, p)
        reference = cpu_gemm.cdist_reference(x1, x2, p)
        assert native.dtype == reference.dtype == x1.dtype and native.shape == reference.shape == (b, n, r)
        tolerance = dict(rtol=2e-5 if dtype == np.float32 else 1e-12, atol=1e-6)
        np.testing.assert_allclose(native, reference, **tolerance)
        expected = torch.cdist(
            torch.from_numpy(x1), torch.from_numpy(x2), p, compute_mode="donot_use_mm_for_euclid_dist"
        )
        np.testing.assert_allclose(native, expected.numpy(), **tolerance)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("affine, keep", [(True, False), (False, True), (True, True)])
def test_layer_norm_baseline_and_avx2_builds_agree_bit_for_bit(dtype, affine, keep):
    """kernels/host/layer_norm_loops.h built twice (baseline x86-64 and AVX2, chosen at run time): the
    same y, statistics, kept xhat and gradients bit for bit, on rows of lengths that leave tails of the
    vector loops, a constant row and a NaN; the default build is the one checked against NumPy above.
    Where the CPU has no AVX2, asking for it raises."""
    from adcuda._native import _C

    def run(x, g, weight, bias, avx2):
        kept = np.empty_like(x) if keep else None
        y, mean, rstd = _C.cpu_layer_norm(x, weight, bias, x.shape[0], 1e-5, kept, avx2=avx2)
        grads = _C.cpu_layer_norm_backward(g, x, weight, mean, rstd, x.shape[0], kept, avx2=avx2)
        return [a for a in (y, mean, rstd, kept, *grads) if a is not None]

    rng = np.random.default_rng(7)
    for rows, count in ((37, 96), (5, 13), (3, 1)):
        x = rng.standard_normal((rows, count)).astype(dtype)
        x[0] = 2.5
        x[-1, 0] = np.nan
        g = rng.standard_normal((rows, count)).astype(dtype)
        params = [rng.standard_normal(count).astype(dtype) for _ in range(2)] if affine else [None, None]
        baseline = run(x, g, *params, avx2=False)
        if not _C.host_has_avx2():
            with pytest.raises(RuntimeError, match="no AVX2"):
                run(x, g, *params, avx2=True)
            return
        for a, b in zip(run(x, g, *params, avx2=True), baseline, strict=True):
            assert a.tobytes() == b.tobytes()
