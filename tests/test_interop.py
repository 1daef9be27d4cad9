"""Sharing memory with other libraries: DLPack both ways and __cuda_array_interface__. The CPU half
(NumPy and PyTorch CPU tensors) runs anywhere; the CUDA half (CuPy, PyTorch CUDA) needs a GPU."""

import numpy as np
import pytest

import adcuda

AVAILABLE = adcuda.cuda.is_available()
needs_cuda = [
    pytest.mark.cuda,
    pytest.mark.skipif(not AVAILABLE, reason=f"CUDA is not usable: {adcuda.cuda.unavailable_reason()}"),
]

HOST_DTYPES = [np.bool_, np.int32, np.int64, np.float16, np.float32, np.float64]


# ------------------------------------------------------------------------------------------------
# CPU: NumPy and PyTorch
@pytest.mark.parametrize("np_dtype", HOST_DTYPES, ids=lambda d: np.dtype(d).name)
def test_numpy_round_trip_shares_memory(np_dtype):
    array = (np.arange(12).reshape(3, 4) % 3).astype(np_dtype)
    t = adcuda.from_dlpack(array)
    assert t.shape == (3, 4) and t.dtype.numpy == np.dtype(np_dtype)
    assert t.data_ptr() == array.__array_interface__["data"][0]
    back = np.from_dlpack(t)
    assert back.__array_interface__["data"][0] == array.__array_interface__["data"][0]
    array[0, 0] = 1
    assert bool(t[0, 0].item()) and bool(back[0, 0])


def test_strided_numpy_views_keep_their_strides():
    array = np.arange(24, dtype=np.float32).reshape(4, 6)[::2, 1::2]
    t = adcuda.from_dlpack(array)
    assert t.tolist() == array.tolist() and t.stride() == (12, 2)
    array[1, 1] = -5.0
    assert t[1, 1].item() == -5.0


def test_dlpack_device_and_protocol_arguments():
    t = adcuda.arange(6.0)
    assert t.__dlpack_device__() == (1, 0)
    assert type(t.__dlpack__()).__name__ == "PyCapsule"
    assert type(t.__dlpack__(max_version=(1, 0))).__name__ == "PyCapsule"
    with pytest.raises(BufferError, match="stream must be None"):
        t.__dlpack__(stream=1)
    with pytest.raises(BufferError, match="DLPack device"):
        t.__dlpack__(dl_device=(2, 0))
    with pytest.raises(adcuda.AutogradError, match="requires grad"):
        adcuda.ones(2, requires_grad=True).__dlpack__()
    with pytest.raises(TypeError, match="__dlpack__"):
        adcuda.from_dlpack([1, 2, 3])


def test_a_copy_when_asked():
    t = adcuda.arange(4.0)
    copy = np.from_dlpack(t, copy=True)
    copy[0] = 9.0
    assert t[0].item() == 0.0


def test_cpu_tensors_have_no_cuda_array_interface():
    t = adcuda.arange(3.0)
    assert not hasattr(t, "__cuda_array_interface__")
    with pytest.raises(AttributeError, match="only CUDA tensors"):
        _ = t.__cuda_array_interface__


def test_torch_cpu_round_trip_shares_memory():
    torch = pytest.importorskip("torch")
    source = torch.arange(10, dtype=torch.float32).reshape(2, 5)
    t = adcuda.from_dlpack(source)
    assert t.data_ptr() == source.data_ptr() and t.tolist() == source.tolist()
    source[1, 4] = 100.0
    assert t[1, 4].item() == 100.0
    back = torch.from_dlpack(t)
    assert back.data_ptr() == source.data_ptr()
    t[0, 0] = -1.0
    assert back[0, 0].item() == -1.0
    view = torch.from_dlpack(adcuda.arange(12).reshape(3, 4).t())
    assert view.tolist() == np.arange(12).reshape(3, 4).T.tolist()


def test_torch_types_adcuda_cannot_hold_are_refused_clearly():
    torch = pytest.importorskip("torch")
    with pytest.raises((adcuda.DTypeError, BufferError, TypeError)):
        adcuda.from_dlpack(torch.ones(3, dtype=torch.uint8))


# ------------------------------------------------------------------------------------------------
# CUDA: CuPy and PyTorch
def _cupy():
    return pytest.importorskip("cupy")


class TestCuda:
    pytestmark = needs_cuda

    def test_dlpack_device_of_a_cuda_tensor(self):
        assert adcuda.zeros(2, device="cuda").__dlpack_device__() == (2, 0)

    @pytest.mark.parametrize("np_dtype", HOST_DTYPES, ids=lambda d: np.dtype(d).name)
    def test_cupy_round_trips_share_memory(self, np_dtype):
        cp = _cupy()
        source = cp.asarray((np.arange(12).reshape(3, 4) % 3).astype(np_dtype))
        t = adcuda.from_dlpack(source)
        assert t.is_cuda and t.data_ptr() == source.data.ptr and t.dtype.numpy == np.dtype(np_dtype)
        back = cp.from_dlpack(t)
        assert back.data.ptr == source.data.ptr
        source[2, 3] = 1  # on CuPy's stream, which adcuda's stream knows nothing about: wait for it
        cp.cuda.get_current_stream().synchronize()
        assert bool(t[2, 3].item())
        wrapped = adcuda.as_tensor(source)  # __cuda_array_interface__
        assert wrapped.data_ptr() == source.data.ptr
        exported = cp.asarray(t)
        assert exported.data.ptr == t.data_ptr()
        assert np.array_equal(cp.asnumpy(exported), t.cpu().numpy())

    def test_strided_views_both_ways(self):
        cp = _cupy()
        t = adcuda.arange(24.0, device="cuda").reshape(4, 6).t()
        interface = t.__cuda_array_interface__
        assert interface["version"] == 3 and interface["strides"] == (4, 24) and interface["typestr"] == "<f4"
        assert np.array_equal(cp.asnumpy(cp.asarray(t)), np.arange(24.0).reshape(4, 6).T)
        assert np.array_equal(cp.asnumpy(cp.from_dlpack(t)), np.arange(24.0).reshape(4, 6).T)
        source = cp.arange(30, dtype=cp.float64).reshape(5, 6)[1::2, ::3]
        assert adcuda.from_dlpack(source).tolist() == cp.asnumpy(source).tolist()
        assert adcuda.as_tensor(source).tolist() == cp.asnumpy(source).tolist()
        from adcuda.backends import cuda as bk

        flipped = adcuda.Tensor._make(bk.flip(adcuda.arange(3.0, device="cuda")._data, (0,)), t.device)
        with pytest.raises(BufferError, match="negative strides"):
            flipped.__dlpack__()

    def test_consumers_wait_for_the_producing_stream(self):
        cp = _cupy()
        from adcuda import _native

        producer = adcuda.cuda.Stream()
        t = adcuda.zeros(1 << 20, device="cuda")
        with adcuda.cuda.stream(producer):
            _native._C.cuda_spin(200_000_000)
            _native._C.fill_(t._data, 3.0)
        assert t.__cuda_array_interface__["stream"] == producer.cuda_stream
        with cp.cuda.Stream(non_blocking=True):
            through_dlpack = cp.from_dlpack(t).copy()
            assert float(through_dlpack.min()) == 3.0
        producer.synchronize()

    def test_a_pytorch_consumer_stream_is_waited_for_by_later_reads_and_by_reuse(self):
        torch = pytest.importorskip("torch")
        if not torch.cuda.is_available():
            pytest.skip("PyTorch here has no CUDA")
        x = adcuda.zeros(1 << 20, device="cuda")
        pointer, nbytes = x.data_ptr(), 4 << 20
        side = torch.cuda.Stream()
        with torch.cuda.stream(side):
            theirs = torch.from_dlpack(x)  # passes its current stream, recorded as a user of x's memory
            torch.cuda._sleep(200_000_000)
            theirs.fill_(5.0)  # queued behind the sleep on PyTorch's stream
        assert float(x.min().item()) == 5.0, "adcuda's read waits for the consumer's write"
        with torch.cuda.stream(side):
            torch.cuda._sleep(200_000_000)
        del x, theirs
        again = adcuda.empty(1 << 20, device="cuda")
        assert not side.query()
        assert not again.data_ptr() - nbytes < pointer < again.data_ptr() + nbytes, (
            "reused while PyTorch's stream may still use it"
        )
        side.synchronize()

    def test_a_cupy_consumer_stream_is_waited_for_by_later_reads(self):
        cp = _cupy()
        spin = cp.RawKernel(
            r"""
        extern "C" __global__ void spin(long long cycles) {
            long long start = clock64();
            while (clock64() - start < cycles) {}
        }""",
            "spin",
        )
        x = adcuda.zeros(1 << 20, device="cuda")
        with cp.cuda.Stream(non_blocking=True) as side:
            theirs = cp.from_dlpack(x)  # passes side's handle: recorded as a user of x's memory
            spin((1,), (1,), (np.int64(200_000_000),))
            theirs.fill(7.0)
        assert float(x.min().item()) == 7.0, "adcuda's read waits for the consumer's write"
        side.synchronize()

    def test_pytorch_cuda_round_trip(self):
        torch = pytest.importorskip("torch")
        if not torch.cuda.is_available():
            pytest.skip("PyTorch here has no CUDA")
        source = torch.arange(8, device="cuda", dtype=torch.float16)
        t = adcuda.from_dlpack(source)
        assert t.data_ptr() == source.data_ptr() and t.dtype is adcuda.float16
        back = torch.from_dlpack(t)
        assert back.data_ptr() == source.data_ptr()
        wrapped = adcuda.as_tensor(source)
        assert wrapped.data_ptr() == source.data_ptr()
        bf16 = adcuda.from_dlpack(torch.ones(3, device="cuda", dtype=torch.bfloat16))
        assert bf16.dtype is adcuda.bfloat16 and bf16.float().cpu().tolist() == [1.0] * 3

    def test_imported_memory_stays_alive_while_adcuda_uses_it(self):
        cp = _cupy()
        t = adcuda.from_dlpack(cp.full((1000,), 2.0, dtype=cp.float32))
        import gc

        gc.collect()
        assert t.cpu().tolist() == [2.0] * 1000
        assert t._data.base is not None, "memory owned by another library is never taken over"
