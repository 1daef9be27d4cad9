"""What the CUDA parity tests share: arrays moved to the device and back, so that the CPU reference
computes on exactly the rounded values the GPU holds (bfloat16 travels as float32), and the
comparison of a device result with the reference. The ``cb`` fixture (tests/conftest.py) is the CUDA
backend they take."""

import numpy as np

from adcuda import dtypes as dt


def host_dtype(dtype):
    """The dtype a device array of ``dtype`` has on the host: float32 for bfloat16, else ``dtype``."""
    return dt.float32 if dtype is dt.bfloat16 else dtype


def to_device(cb, x, dtype):
    return cb.from_numpy(np.asarray(x).astype(host_dtype(dtype).numpy), dtype)


def to_host(cb, a):
    return np.array(cb.to_numpy(a))


def held(cb, x, dtype):
    """(device array, the values it holds as a host array): the CPU reference sees exactly the GPU's
    rounded inputs."""
    a = to_device(cb, x, dtype)
    return a, to_host(cb, a)


def assert_close_to_scale(cb, got, want, rtol, atol):
    """The device array ``got`` against ``want`` in float64, ``atol`` relative to the largest |want|
    (at least 1), so that large outputs are judged by the rounding they carry."""
    got = np.array(cb.to_numpy(got), dtype=np.float64)
    want = np.asarray(want, dtype=np.float64)
    assert got.shape == want.shape
    scale = max(1.0, float(np.abs(want).max())) if want.size else 1.0
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol * scale)


def assert_matches(cb, got, expected, tolerance):
    """The device array ``got`` against ``expected``: within ``tolerance`` (rtol, atol) in float64, NaN
    matching NaN, or exactly where ``tolerance`` is None (integers, booleans)."""
    got_host = to_host(cb, got)
    expected = np.asarray(expected)
    assert got_host.shape == expected.shape, (got_host.shape, expected.shape)
    if tolerance is None:
        np.testing.assert_array_equal(got_host, expected)
        return
    rtol, atol = tolerance
    np.testing.assert_allclose(
        got_host.astype(np.float64), expected.astype(np.float64), rtol=rtol, atol=atol, equal_nan=True
    )
