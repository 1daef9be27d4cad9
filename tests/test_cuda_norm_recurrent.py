"""GPU parity tests of the recurrent cell kernels (kernels/recurrent.cu) and the batch-, RMS- and group-norm
kernels (kernels/norm.cu) against the CPU backend, the oracle, in fp32, fp16 and bf16 (fp64 too), on odd sizes
(1, 7, 1023, an empty batch) and strided inputs; then the layers and the normalisation ops on a
device against the same layers on the CPU. Everything here needs a usable CUDA device and is skipped
without one.

bfloat16 has no NumPy type: its references are computed in fp32 from the bf16-held inputs and
compared at bf16's precision.
"""

import numpy as np
import pytest
from cuda_arrays import to_device, to_host

import adcuda
import adcuda.nn.functional as F
from adcuda import dtypes as dt
from adcuda import nn
from adcuda.backends import cpu
from adcuda.errors import DTypeError, ShapeError

pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not adcuda.cuda.is_available(), reason="needs a usable CUDA device"),
]

TOLERANCE = {dt.float32: 1e-5, dt.float64: 1e-12, dt.float16: 2e-3, dt.bfloat16: 2e-2}
SHAPES = [(1, 1), (7, 7), (3, 1023), (0, 5)]


def held(cb, x, dtype):
    """(device array, the values it holds as a host array in fp32/fp64)."""
    a = to_device(cb, x, dtype)
    return a, to_host(cb, a).astype(np.float64 if dtype is dt.float64 else np.float32)


def close(cb, got, want, dtype):
    got = np.array(cb.to_numpy(got), dtype=np.float64)
    tol = TOLERANCE[dtype]
    np.testing.assert_allclose(got, np.asarray(want, np.float64), rtol=tol, atol=tol)


def draws(shape, seed, scale=2.0):
    return np.random.default_rng(seed).standard_normal(shape) * scale


@pytest.mark.parametrize("dtype", [dt.float32, dt.float16, dt.bfloat16, dt.float64], ids=str)
@pytest.mark.parametrize("B,H", SHAPES)
def test_lstm_cell_matches_the_cpu(cb, dtype, B, H):
    gi, gi_v = held(cb, draws((B, 4 * H), 1), dtype)
    gh, gh_v = held(cb, draws((B, 4 * H), 2), dtype)
    c, c_v = held(cb, draws((B, H), 3), dtype)
    hc = cb.lstm_cell(gi, gh, c)
    hc_ref = cpu.lstm_cell(gi_v, gh_v, c_v)
    close(cb, hc, hc_ref, dtype)
    grad, grad_v = held(cb, draws((2, B, H), 4), dtype)
    # the backward reads the saved c' as each backend stored it
    hc_v = np.array(cb.to_numpy(hc)).astype(c_v.dtype)
    for got, want in zip(
        cb.lstm_cell_backward(grad, gi, gh, c, hc), cpu.lstm_cell_backward(grad_v, gi_v, gh_v, c_v, hc_v)
    ):
        close(cb, got, want, dtype)


@pytest.mark.parametrize("dtype", [dt.float32, dt.float16, dt.bfloat16, dt.float64], ids=str)
@pytest.mark.parametrize("B,H", SHAPES)
def test_gru_cell_matches_the_cpu(cb, dtype, B, H):
    gi, gi_v = held(cb, draws((B, 3 * H), 5), dtype)
    gh, gh_v = held(cb, draws((B, 3 * H), 6), dtype)
    h, h_v = held(cb, draws((B, H), 7), dtype)
    close(cb, cb.gru_cell(gi, gh, h), cpu.gru_cell(gi_v, gh_v, h_v), dtype)
    grad, grad_v = held(cb, draws((B, H), 8), dtype)
    for got, want in zip(cb.gru_cell_backward(grad, gi, gh, h), cpu.gru_cell_backward(grad_v, gi_v, gh_v, h_v)):
        close(cb, got, want, dtype)


@pytest.mark.parametrize("dtype", [dt.float32, dt.float16, dt.bfloat16, dt.float64], ids=str)
# (N, C) rows and short planes (S < 32) take the column kernels: (1023, 5) in several chunks of rows
@pytest.mark.parametrize("shape", [(1, 1, 2), (7, 3), (3, 5, 1023), (2, 7, 3, 5), (1023, 5), (130, 33, 3)])
@pytest.mark.parametrize("affine", [True, False])
def test_batch_norm_matches_the_cpu(cb, dtype, shape, affine):
    x, x_v = held(cb, draws(shape, 16, 3.0) + 1.0, dtype)
    channels = shape[1]
    w, w_v = held(cb, draws(channels, 17), dtype) if affine else (None, None)
    b, b_v = held(cb, draws(channels, 18), dtype) if affine else (None, None)
    y, mean, rstd = cb.batch_norm(x, w, b, 1e-5)
    want = cpu.batch_norm(x_v, w_v, b_v, 1e-5)
    for got, ref in zip((y, mean, rstd), want):
        close(cb, got, ref, dtype)
    g, g_v = held(cb, draws(shape, 19), dtype)
    mean_v, rstd_v = np.array(cb.to_numpy(mean)), np.array(cb.to_numpy(rstd))
    got = cb.batch_norm_backward(g, x, w, mean, rstd)
    want = cpu.batch_norm_backward(g_v, x_v, w_v, mean_v, rstd_v)
    compare_sums(cb, got, want, dtype)  # dweight / dbias sum many terms


def compare_sums(cb, got, want, dtype):
    """Gradients that sum many terms, compared at the precision of the largest."""
    for a, r in zip(got, want):
        if r is None:
            assert a is None
            continue
        tol = TOLERANCE[dtype] * 4 * max(1.0, float(np.abs(r).max(initial=0)))
        np.testing.assert_allclose(
            np.array(cb.to_numpy(a), np.float64), np.asarray(r, np.float64), atol=tol, rtol=TOLERANCE[dtype] * 4
        )


# rows of 1, 7 and 1023 (the fused backward), 8200 (past it: the row and column-partial kernels), empty
@pytest.mark.parametrize("dtype", [dt.float32, dt.float16, dt.bfloat16, dt.float64], ids=str)
@pytest.mark.parametrize("shape,n", [((3, 1), 1), ((2, 7), 1), ((5, 3, 1023), 1), ((2, 8200), 1), ((4, 3, 5), 2)])
@pytest.mark.parametrize("affine", [True, False])
def test_rms_norm_matches_the_cpu(cb, dtype, shape, n, affine):
    x, x_v = held(cb, draws(shape, 20, 3.0), dtype)
    normalized = shape[len(shape) - n :]
    w, w_v = held(cb, draws(normalized, 21), dtype) if affine else (None, None)
    y, rstd = cb.rms_norm(x, w, n, 1e-6)
    y_want, rstd_want = cpu.rms_norm(x_v, w_v, n, 1e-6)
    close(cb, y, y_want, dtype)
    close(cb, rstd, rstd_want, dtype)
    g, g_v = held(cb, draws(shape, 22), dtype)
    got = cb.rms_norm_backward(g, x, w, rstd, n)
    compare_sums(cb, got, cpu.rms_norm_backward(g_v, x_v, w_v, np.array(cb.to_numpy(rstd)), n), dtype)


@pytest.mark.parametrize("dtype", [dt.float32, dt.float16, dt.bfloat16, dt.float64], ids=str)
@pytest.mark.parametrize(
    "shape,groups", [((1, 1, 2), 1), ((7, 6, 7), 3), ((2, 4, 1023), 4), ((3, 6, 4, 5), 2), ((2, 64, 1), 32)]
)
@pytest.mark.parametrize("affine", [True, False])
def test_group_norm_matches_the_cpu(cb, dtype, shape, groups, affine):
    x, x_v = held(cb, draws(shape, 23, 3.0) - 1.0, dtype)
    w, w_v = held(cb, draws(shape[1], 24), dtype) if affine else (None, None)
    b, b_v = held(cb, draws(shape[1], 25), dtype) if affine else (None, None)
    y, mean, rstd = cb.group_norm(x, w, b, groups, 1e-5)
    for got, want in zip((y, mean, rstd), cpu.group_norm(x_v, w_v, b_v, groups, 1e-5)):
        close(cb, got, want, dtype)
    g, g_v = held(cb, draws(shape, 26), dtype)
    got = cb.group_norm_backward(g, x, w, mean, rstd, groups)
    mean_v, rstd_v = np.array(cb.to_numpy(mean)), np.array(cb.to_numpy(rstd))
    compare_sums(cb, got, cpu.group_norm_backward(g_v, x_v, w_v, mean_v, rstd_v, groups), dtype)


def test_rms_and_group_norm_strided_empty_and_bad_input(cb):
    wide, wide_v = held(cb, draws((5, 24), 27), dt.float32)
    half = cb.slice(wide, (slice(None), slice(0, 12)))  # rows with a stride of 24
    y, _ = cb.rms_norm(half, None, 1, 1e-6)
    close(cb, y, cpu.rms_norm(wide_v[:, :12], None, 1, 1e-6)[0], dt.float32)
    channels_last = cb.permute(cb.view(wide, (5, 4, 6)), (0, 2, 1))  # (5, 6, 4), not contiguous
    y, _, _ = cb.group_norm(channels_last, None, None, 3, 1e-5)
    close(cb, y, cpu.group_norm(np.transpose(wide_v.reshape(5, 4, 6), (0, 2, 1)), None, None, 3, 1e-5)[0], dt.float32)
    empty = cb.from_numpy(np.zeros((0, 4, 3), np.float32), dt.float32)
    y, mean, _ = cb.group_norm(empty, None, None, 2, 1e-5)
    assert tuple(y.shape) == (0, 4, 3) and tuple(mean.shape) == (0, 2)
    dx, dw, db = cb.group_norm_backward(empty, empty, cb.from_numpy(np.ones(4, np.float32), dt.float32), mean, mean, 2)
    assert tuple(dx.shape) == (0, 4, 3) and not np.array(cb.to_numpy(dw)).any() and not np.array(cb.to_numpy(db)).any()
    y, rstd = cb.rms_norm(cb.from_numpy(np.zeros((0, 3), np.float32), dt.float32), None, 1, 1e-6)
    assert tuple(y.shape) == (0, 3) and tuple(rstd.shape) == (0, 1)
    with pytest.raises(ShapeError, match=r"group_norm: .*\(5, 6, 4\).*4 groups"):
        cb.group_norm(channels_last, None, None, 4, 1e-5)
    with pytest.raises(ShapeError, match="rms_norm"):
        cb.rms_norm(wide, cb.from_numpy(np.ones(5, np.float32), dt.float32), 1, 1e-6)
    with pytest.raises(DTypeError, match="rms_norm"):
        cb.rms_norm(cb.from_numpy(np.ones((4, 3), np.int64), dt.int64), None, 1, 1e-6)


def test_batch_norm_empty_batch_and_bad_input(cb):
    y, mean, _ = cb.batch_norm(cb.from_numpy(np.zeros((0, 3), np.float32), dt.float32), None, None, 1e-5)
    assert tuple(y.shape) == (0, 3) and np.isnan(np.array(cb.to_numpy(mean))).all()
    x = cb.from_numpy(np.ones((4, 3), np.float32), dt.float32)
    with pytest.raises(ShapeError, match=r"batch_norm: .*\(3,\).*\(4, 3\).*\(2,\)"):
        cb.batch_norm(x, cb.from_numpy(np.ones(2, np.float32), dt.float32), None, 1e-5)
    with pytest.raises(DTypeError, match="batch_norm"):
        cb.batch_norm(cb.from_numpy(np.ones((4, 3), np.int64), dt.int64), None, None, 1e-5)


def test_strided_inputs_and_bad_input(cb):
    wide, wide_v = held(cb, draws((5, 24), 9), dt.float32)
    gi = cb.slice(wide, (slice(None), slice(0, 12)))  # rows with a stride of 24
    gh = cb.slice(wide, (slice(None), slice(12, 24)))
    h, h_v = held(cb, draws((5, 4), 10), dt.float32)
    close(cb, cb.gru_cell(gi, gh, h), cpu.gru_cell(wide_v[:, :12], wide_v[:, 12:], h_v), dt.float32)
    with pytest.raises(ShapeError, match=r"lstm_cell: .*\(5, 12\).*\(5, 4\)"):
        cb.lstm_cell(gi, gh, h)
    with pytest.raises(DTypeError, match="gru_cell"):
        cb.gru_cell(gi, gh, cb.astype(h, dt.float16))


@pytest.mark.parametrize("mode", ["RNN", "LSTM", "GRU"])
@pytest.mark.parametrize("dtype", [adcuda.float32, adcuda.float16], ids=str)
def test_recurrent_layers_match_the_cpu(mode, dtype):
    adcuda.manual_seed(0)
    layer = getattr(nn, mode)(5, 7, num_layers=2, bidirectional=True, batch_first=True)
    gpu_layer = getattr(nn, mode)(5, 7, num_layers=2, bidirectional=True, batch_first=True)
    gpu_layer.load_state_dict(layer.state_dict())
    gpu_layer.to("cuda", dtype)
    x = draws((3, 4, 5), 11, 1.0).astype(np.float32)
    x_cpu = adcuda.tensor(x, requires_grad=True)
    x_gpu = adcuda.tensor(x, dtype=dtype, device="cuda", requires_grad=True)
    out_cpu, _ = layer(x_cpu)
    out_gpu, _ = gpu_layer(x_gpu)
    tol = 1e-4 if dtype is adcuda.float32 else 2e-2
    np.testing.assert_allclose(out_gpu.detach().cpu().float().numpy(), out_cpu.detach().numpy(), rtol=tol, atol=tol)
    out_cpu.sum().backward()
    out_gpu.float().sum().backward()
    np.testing.assert_allclose(x_gpu.grad.cpu().float().numpy(), x_cpu.grad.numpy(), rtol=tol * 5, atol=tol * 5)
    for (name, p_cpu), (_, p_gpu) in zip(layer.named_parameters(), gpu_layer.named_parameters()):
        np.testing.assert_allclose(
            p_gpu.grad.cpu().float().numpy(), p_cpu.grad.numpy(), rtol=tol * 5, atol=tol * 5, err_msg=name
        )


NORMS = {
    "batch_norm": lambda x, w, b: F.batch_norm(x, None, None, w, b, True),
    "instance_norm": lambda x, w, b: F.instance_norm(x, weight=w, bias=b),
    "group_norm": lambda x, w, b: F.group_norm(x, 3, w, b),
    "rms_norm": lambda x, w, b: F.rms_norm(x, (x.shape[-1],), eps=1e-6),  # the default eps is the dtype's
}


@pytest.mark.parametrize("name", sorted(NORMS))
@pytest.mark.parametrize("dtype", [adcuda.float32, adcuda.float16], ids=str)
@pytest.mark.parametrize("shape", [(4, 6, 7), (1, 6, 3, 1), (0, 6, 5)])
def test_normalisation_matches_the_cpu(name, dtype, shape):
    if name == "instance_norm" and shape[0] == 0:
        shape = (2, 6, 0)
    if name in ("batch_norm", "instance_norm") and int(np.prod(shape[2:])) == 1:
        shape = (2, 6, 3, 1)
    fn = NORMS[name]
    x = draws(shape, 12, 3.0).astype(np.float32)
    w, b = draws(6, 13).astype(np.float32), draws(6, 14).astype(np.float32)
    args_cpu = [adcuda.tensor(a, requires_grad=True) for a in (x, w, b)]
    args_gpu = [adcuda.tensor(a, dtype=dtype, device="cuda", requires_grad=True) for a in (x, w, b)]
    y_cpu, y_gpu = fn(*args_cpu), fn(*args_gpu)
    tol = 1e-4 if dtype is adcuda.float32 else 3e-2
    np.testing.assert_allclose(y_gpu.detach().cpu().float().numpy(), y_cpu.detach().numpy(), rtol=tol, atol=tol)
    (y_cpu * y_cpu).sum().backward()
    (y_gpu.float() * y_gpu.float()).sum().backward()
    for a_cpu, a_gpu in zip(args_cpu, args_gpu):
        if a_cpu.grad is not None:
            np.testing.assert_allclose(
                a_gpu.grad.cpu().float().numpy(), a_cpu.grad.numpy(), rtol=tol * 10, atol=tol * 10
            )


def test_batch_norm_module_running_statistics_match_the_cpu():
    bn, gpu_bn = nn.BatchNorm2d(3), nn.BatchNorm2d(3).to("cuda")
    x = draws((4, 3, 5, 5), 15).astype(np.float32)
    for _ in range(2):
        bn(adcuda.tensor(x))
        gpu_bn(adcuda.tensor(x, device="cuda"))
    for key, value in bn.state_dict().items():
        np.testing.assert_allclose(gpu_bn.state_dict()[key].cpu().numpy(), value.numpy(), rtol=1e-5, atol=1e-6)
    gpu_bn.eval()
    bn.eval()
    np.testing.assert_allclose(
        gpu_bn(adcuda.tensor(x, device="cuda")).detach().cpu().numpy(),
        bn(adcuda.tensor(x)).detach().numpy(),
        rtol=1e-5,
        atol=1e-5,
    )


def test_channel_dropout_on_the_device():
    x = adcuda.ones(8, 16, 3, 3, device="cuda")
    y = F.dropout2d(x, 0.5).cpu().numpy().reshape(8, 16, -1)
    assert np.all(y.min(-1) == y.max(-1)) and set(np.unique(y)) <= {0.0, 2.0}
