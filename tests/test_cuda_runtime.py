"""The CUDA runtime (kernels/runtime/, adcuda.cuda, adcuda/backends/cuda/storage.py). Tests marked ``cuda`` need
a GPU and skip themselves without one (scripts/gpu_check.sh runs them); the rest check, on any machine,
what happens where CUDA is not usable.

GPU tests use the runtime's own kernels only (copies, casts, fills, ranges) plus ``_C.cuda_spin``,
which keeps a stream busy for a known time: work that is ordered by timing instead of events would
read stale data while the spinning stream holds the writer back."""

import gc
import os
import threading
import time

import numpy as np
import pytest

import adcuda
from adcuda import _native
from adcuda.cuda import fork

C = _native._C
AVAILABLE = adcuda.cuda.is_available()
requires_gpu = pytest.mark.skipif(not AVAILABLE, reason=f"CUDA is not usable: {adcuda.cuda.unavailable_reason()}")
needs_cuda = [pytest.mark.cuda, requires_gpu]
no_cuda = pytest.mark.skipif(AVAILABLE, reason="checks the behaviour without a usable GPU")
has_runtime = pytest.mark.skipif(not hasattr(C, "allocation_size_class"), reason="needs a CUDA build of adcuda._C")

DTYPES = [adcuda.bool, adcuda.int32, adcuda.int64, adcuda.float16, adcuda.float32, adcuda.float64]
# ~0.1 s of spinning on any recent GPU (clock rates are 1-2 GHz)
SPIN_CYCLES = 200_000_000


def cuda_backend():
    from adcuda.backends import cuda

    return cuda


def sample(shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    values = rng.standard_normal(shape) * 10
    if dtype is adcuda.bool:
        return values > 0
    return values.astype(dtype.numpy)


# ------------------------------------------------------------------------------------------------
# without a usable GPU
@no_cuda
@pytest.mark.parametrize(
    "request_cuda, op",
    [
        (lambda: adcuda.zeros(2, device="cuda"), "zeros"),
        (lambda: adcuda.empty(2, 3, device="cuda:0"), "empty"),
        (lambda: adcuda.tensor([1.0], device="cuda"), "tensor"),
        (lambda: adcuda.arange(3).cuda(), "cuda"),
        (lambda: adcuda.arange(3).to("cuda"), "to"),
        (lambda: adcuda.arange(3).to("cuda", non_blocking=True), "to"),
        (lambda: adcuda.cuda.Stream(), "Stream"),
        (lambda: adcuda.cuda.current_stream(), "current_stream"),
        (lambda: adcuda.cuda.Event().record(), "current_stream"),
        (lambda: adcuda.cuda.mem_get_info(), "mem_get_info"),
    ],
)
def test_cuda_requests_fail_with_a_device_error_naming_the_op(request_cuda, op):
    with pytest.raises(adcuda.DeviceError) as caught:
        request_cuda()
    message = str(caught.value)
    assert message.startswith(f"{op}: device 'cuda' requested but CUDA is not available: ")
    assert adcuda.cuda.unavailable_reason() in message


@no_cuda
def test_pinning_without_cuda_says_why_and_nothing_is_pinned():
    t = adcuda.arange(4.0)
    assert t.is_pinned() is False
    for pin in (t.pin_memory, lambda: adcuda.empty(3, pin_memory=True), lambda: adcuda.tensor([1], pin_memory=True)):
        with pytest.raises(
            adcuda.DeviceError, match="pinned .page-locked. host memory needs CUDA, which is not available: "
        ):
            pin()


@no_cuda
def test_memory_queries_answer_zero_and_empty_cache_is_a_no_op():
    assert adcuda.cuda.memory_allocated() == adcuda.cuda.max_memory_allocated() == 0
    assert adcuda.cuda.memory_reserved() == 0 and adcuda.cuda.memory_stats()["num_ooms"] == 0
    adcuda.cuda.empty_cache()
    adcuda.cuda.reset_peak_memory_stats()
    assert adcuda.cuda.pinned_memory_stats()["reserved_bytes"] == 0
    assert not adcuda.cuda.is_initialized()


def test_out_of_memory_error_is_a_runtime_error():
    assert issubclass(adcuda.cuda.OutOfMemoryError, RuntimeError)


@has_runtime
def test_device_blocks_round_to_512_bytes():
    assert [C.device_block_size(n) for n in (1, 512, 513, 4096, (1 << 20) + 1, 10**9 + 7)] == [
        512,
        512,
        1024,
        4096,
        (1 << 20) + 512,
        (10**9 + 7 + 511) // 512 * 512,
    ]


@has_runtime
def test_pinned_pool_size_classes():
    size_class = C.allocation_size_class
    assert [size_class(n) for n in (1, 512, 513, 4096, 1 << 20)] == [512, 512, 1024, 4096, 1 << 20]
    # above 1 MiB: four classes per power of two
    assert size_class((1 << 20) + 1) == 5 << 18
    assert size_class(3 << 20) == 3 << 20
    assert size_class((8 << 20) + 1) == 10 << 20
    for n in (12345, 1 << 21, 10**9 + 7):
        assert n <= size_class(n) <= n * 1.25 + 512


@has_runtime
@no_cuda
def test_native_runtime_calls_raise_cuda_errors_without_a_driver():
    with pytest.raises(C.CudaError) as caught:
        C.DeviceArray.empty((2, 3), C.ScalarType.float32)
    assert caught.value.error_name.startswith("cudaError") and caught.value.call
    with pytest.raises(C.CudaError):
        C.PinnedMemory(64)
    # failed attempts create no CUDA state: forking stays safe (and the DataLoader keeps 'fork')
    assert not C.cuda_was_used() and not adcuda.cuda.is_initialized()


# ------------------------------------------------------------------------------------------------
# storage, views and copies (the backend's own primitives), against NumPy
@pytest.mark.cuda
@requires_gpu
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", [(), (1,), (7,), (1023,), (3, 5, 4), (0, 3)])
def test_round_trip_through_the_device(dtype, shape):
    bk = cuda_backend()
    host = sample(shape, dtype)
    device = bk.from_numpy(host, dtype)
    assert device.shape == shape and bk.dtype_of(device) is dtype and device.base is None
    back = bk.to_numpy(device)
    assert back.dtype == host.dtype and np.array_equal(back, host)


class TestStorageAndViews:
    pytestmark = needs_cuda

    def test_bfloat16_round_trip_keeps_representable_values(self):
        bk = cuda_backend()
        host = np.array([0.0, 1.0, -2.5, 1.5 * 2.0**34, 0.15625], dtype=np.float32)  # 8 significant bits
        device = bk.from_numpy(host, adcuda.bfloat16)
        assert bk.dtype_of(device) is adcuda.bfloat16
        assert np.array_equal(bk.to_numpy(device), host)

    def test_full_arange_and_empty(self):
        bk = cuda_backend()
        for dtype in DTYPES:
            assert np.array_equal(bk.to_numpy(bk.full((3, 2), 1, dtype)), np.full((3, 2), 1, dtype.numpy))
        assert np.array_equal(bk.to_numpy(bk.arange(2, 11, 3, adcuda.int64)), np.arange(2, 11, 3))
        assert np.allclose(bk.to_numpy(bk.arange(0.5, 2.0, 0.25, adcuda.float32)), np.arange(0.5, 2.0, 0.25))
        assert bk.empty((4, 0), adcuda.float32).shape == (4, 0)
        with pytest.raises(OverflowError):
            bk.full((2,), 2**40, adcuda.int32)

    @pytest.mark.parametrize("src_dtype", DTYPES, ids=str)
    @pytest.mark.parametrize("dst_dtype", DTYPES + [adcuda.bfloat16], ids=str)
    def test_astype_matches_numpy(self, src_dtype, dst_dtype):
        bk = cuda_backend()
        host = sample((5, 7), src_dtype, seed=1)
        converted = bk.to_numpy(bk.astype(bk.from_numpy(host, src_dtype), dst_dtype))
        if dst_dtype is adcuda.bfloat16:
            expected = host.astype(np.float32)
            assert np.allclose(converted, expected, rtol=2**-7, atol=0)
        else:
            with np.errstate(invalid="ignore"):
                expected = host.astype(dst_dtype.numpy)
            assert np.array_equal(converted, expected)

    def test_astype_from_bfloat16_is_exact_for_every_value(self):
        # Every bfloat16 bit pattern: the top half of a float32, so the float32 value is the bfloat16 value
        # exactly. Casting it must give what the CPU backend gives for that float32 value (NumPy's astype),
        # bit for bit (signed zeros, float16 subnormals and overflow to inf included; NaN stays NaN).
        bk = cuda_backend()
        every = (np.arange(2**16, dtype=np.uint32) << 16).view(np.float32)
        source = bk.from_numpy(every, adcuda.bfloat16)
        nan = np.isnan(every)
        back = bk.to_numpy(source)
        assert np.array_equal(np.isnan(back), nan) and np.array_equal(
            back.view(np.uint32)[~nan], every.view(np.uint32)[~nan]
        )
        for dst in (adcuda.float16, adcuda.float32, adcuda.float64):
            with np.errstate(over="ignore", invalid="ignore"):  # overflow to inf; the NaN patterns
                expected = every.astype(dst.numpy)
            got = bk.to_numpy(bk.astype(source, dst))
            assert got.dtype == expected.dtype
            bits = np.dtype(f"u{got.itemsize}")
            assert np.array_equal(np.isnan(got), nan), dst
            assert np.array_equal(got.view(bits)[~nan], expected.view(bits)[~nan]), dst
        with np.errstate(invalid="ignore"):
            assert np.array_equal(bk.to_numpy(bk.astype(source, adcuda.bool)), every.astype(bool))
        # integers: every value whose truncation fits the type (beyond it a cast is undefined, in C++ as in
        # PyTorch): the 40,449 of magnitude below 2**31 (and -2**31) for int32, 48,641 for int64
        with np.errstate(invalid="ignore"):  # the NaN patterns
            wide = every.astype(np.float64)
        for dst in (adcuda.int32, adcuda.int64):
            limits = np.iinfo(dst.numpy)
            finite = np.where(np.isfinite(wide), np.trunc(wide), np.inf)
            fits = (finite >= limits.min) & (finite < -float(limits.min))
            got = bk.to_numpy(bk.astype(source, dst))
            assert got.dtype == dst.numpy
            assert np.array_equal(got[fits], every[fits].astype(dst.numpy)), dst
            assert fits.sum() == {adcuda.int32: 40_449, adcuda.int64: 48_641}[dst]

    def test_views_are_metadata_and_match_numpy(self):
        bk = cuda_backend()
        host = np.arange(4 * 6 * 5, dtype=np.float32).reshape(4, 6, 5)
        device = bk.from_numpy(host, adcuda.float32)
        cases = [
            (bk.slice(device, (slice(1, 3), Ellipsis, slice(None, None, 2))), host[1:3, ..., ::2]),
            (bk.permute(device, (2, 0, 1)), host.transpose(2, 0, 1)),
            (bk.flip(device, (0, 2)), np.flip(host, (0, 2))),
            (
                bk.expand(bk.slice(device, (slice(None), slice(0, 1))), (4, 6, 5)),
                np.broadcast_to(host[:, :1], (4, 6, 5)),
            ),
            (bk.view(device, (24, 5)), host.reshape(24, 5)),
            (bk.slice(device, (None, 2, -1)), host[None, 2, -1]),
        ]
        for view, expected in cases:
            assert view.storage.data_ptr == device.storage.data_ptr
            assert view.base is not None
            assert bk.shares_memory(view, device)
            assert np.array_equal(bk.to_numpy(view), expected)
            assert bk.contiguous(view).is_contiguous()
        assert bk.view(bk.permute(device, (2, 0, 1)), (120,)) is None
        del cases, view
        gc.collect()
        assert device.base is None, "a fresh array is unshared again once its views are gone"

    def test_copy_into_strided_views_with_broadcast_and_cast(self):
        bk = cuda_backend()
        dst_host = np.zeros((4, 6), dtype=np.float16)
        dst = bk.from_numpy(dst_host, adcuda.float16)
        row = bk.from_numpy(np.arange(3, dtype=np.int64), adcuda.int64)
        bk.copy_(bk.slice(dst, (slice(None, None, 2), slice(1, None, 2))), row)
        dst_host[::2, 1::2] = np.arange(3)
        bk.copy_(bk.slice(dst, (3,)), 2.5)
        dst_host[3] = 2.5
        assert np.array_equal(bk.to_numpy(dst), dst_host)

    def test_overlapping_copy_reads_the_values_before_the_copy(self):
        bk = cuda_backend()
        host = np.arange(10, dtype=np.int32)
        device = bk.from_numpy(host, adcuda.int32)
        bk.copy_(bk.slice(device, (slice(1, None),)), bk.slice(device, (slice(None, -1),)))
        host[1:] = host[:-1].copy()
        assert np.array_equal(bk.to_numpy(device), host)

    def test_more_dims_than_a_kernel_indexes(self):
        bk = cuda_backend()
        host = np.arange(2**10, dtype=np.float32).reshape((2,) * 10)
        axes = (9, 7, 5, 3, 1, 8, 6, 4, 2, 0)  # no two dims merge: the copy is split along the outer dims
        device = bk.permute(bk.from_numpy(host, adcuda.float32), axes)
        assert np.array_equal(bk.to_numpy(device), host.transpose(axes))
        target = bk.permute(bk.full((2,) * 10, 0, adcuda.float64), axes)
        bk.copy_(target, 1.5)
        assert np.all(bk.to_numpy(target) == 1.5)

    def test_tensor_level_storage_ops(self):
        x = adcuda.arange(12.0).reshape(3, 4)
        y = x.cuda()
        assert y.device == adcuda.device("cuda", 0) and y.is_cuda
        assert y.cpu().tolist() == x.tolist() and y[1, 2].item() == 6.0
        assert y.t().contiguous().cpu().tolist() == x.t().tolist()
        assert y.flip(0).cpu().tolist() == x.flip(0).tolist()
        assert y.to(adcuda.float16).cpu().dtype is adcuda.float16
        assert y.to(adcuda.bfloat16).to(adcuda.float32).cpu().tolist() == x.tolist()
        assert y.stride() == (4, 1) and y.t().stride() == (1, 4) and not y.t().is_contiguous()
        z = adcuda.zeros(2, 3, device="cuda")
        z[0] = 5.0
        assert z.cpu().tolist() == [[5.0] * 3, [0.0] * 3]
        assert "device='cuda:0'" in repr(y) or "device='cuda'" in repr(y)
        with pytest.raises(adcuda.DTypeError, match="use .cpu"):
            y.numpy()

    def test_cuda_errors_name_the_call(self):
        stream = C.current_stream(-1)
        start, end = C.Event(0, False, False), C.Event(0, False, False)
        start.record(stream)
        end.record(stream)
        with pytest.raises(C.CudaError) as caught:
            start.elapsed_time(end)
        assert caught.value.call.startswith("cudaEventElapsedTime(")
        assert caught.value.error_name in str(caught.value)


# ------------------------------------------------------------------------------------------------
# the caching allocator
class TestAllocator:
    pytestmark = needs_cuda

    def test_freed_blocks_are_reused_and_counted(self):
        bk = cuda_backend()
        adcuda.cuda.synchronize()
        before = adcuda.cuda.memory_stats()
        a = bk.empty((1000,), adcuda.float32)
        assert adcuda.cuda.memory_allocated() == before["allocated_bytes.all.current"] + C.device_block_size(4000)
        del a
        assert adcuda.cuda.memory_allocated() == before["allocated_bytes.all.current"]
        reserved, device_allocs = adcuda.cuda.memory_reserved(), adcuda.cuda.memory_stats()["num_device_alloc"]
        b = bk.empty((1000,), adcuda.float32)
        after = adcuda.cuda.memory_stats()
        assert after["num_device_alloc"] == device_allocs and after["reserved_bytes.all.current"] == reserved
        assert after["cache_hits"] >= before["cache_hits"] + 1
        assert after["allocation.all.allocated"] == before["allocation.all.allocated"] + 2
        assert after["reserved_bytes.all.current"] >= after["allocated_bytes.all.current"]
        del b

    def test_peaks_reset_and_empty_cache(self):
        bk = cuda_backend()
        adcuda.cuda.reset_peak_memory_stats()
        base = adcuda.cuda.memory_allocated()
        big = bk.empty((8 << 20,), adcuda.float32)
        assert adcuda.cuda.max_memory_allocated() >= base + (32 << 20)
        del big
        assert adcuda.cuda.max_memory_allocated() >= base + (32 << 20)
        adcuda.cuda.reset_peak_memory_stats()
        assert adcuda.cuda.max_memory_allocated() == adcuda.cuda.memory_allocated() == base
        adcuda.cuda.empty_cache()
        stats = adcuda.cuda.memory_stats()
        # what stays reserved is in use, or free but sharing a segment with a block in use
        assert stats["pending_blocks"] == 0
        assert stats["reserved_bytes.all.current"] == (
            stats["allocated_bytes.all.current"] + stats["inactive_split_bytes.all.current"]
        )
        assert stats["cached_blocks"] == stats["inactive_split.all.current"]

    def test_a_block_last_used_on_another_stream_waits_for_it(self):
        bk = cuda_backend()
        side = adcuda.cuda.Stream()
        a = bk.empty((1 << 18,), adcuda.float32)
        pointer = a.data_ptr()
        with adcuda.cuda.stream(side):
            C.cuda_spin(SPIN_CYCLES)
            C.fill_(a, 1.0)  # the last use of a: queued on the side stream behind the spin
        del a
        pending = adcuda.cuda.memory_stats()["pending_blocks"]
        assert pending >= 1
        b = bk.empty((1 << 18,), adcuda.float32)
        assert not side.query(), "the spin should still run"
        assert not b.data_ptr() - (1 << 20) < pointer < b.data_ptr() + (1 << 20), (
            "reused while the side stream may still write it"
        )
        side.synchronize()
        c = bk.empty((1 << 18,), adcuda.float32)  # the allocator looks at pending blocks first
        assert adcuda.cuda.memory_stats()["pending_blocks"] == pending - 1
        del b, c

    def test_an_idle_streams_free_block_serves_another_stream(self):
        bk = cuda_backend()
        one, two = adcuda.cuda.Stream(), adcuda.cuda.Stream()
        adcuda.cuda.empty_cache()  # no other free large segment that would fit better
        with adcuda.cuda.stream(one):
            a = bk.empty((12345 << 10,), adcuda.int64)  # ~96 MiB: a segment of its own
            pointer = a.data_ptr()
            del a
        one.synchronize()
        before = adcuda.cuda.memory_stats()["cross_stream_reuses"]
        with adcuda.cuda.stream(two):
            b = bk.empty((12345 << 10,), adcuda.int64)
        assert b.data_ptr() == pointer
        assert adcuda.cuda.memory_stats()["cross_stream_reuses"] == before + 1

    def test_out_of_memory_raises_and_leaves_the_allocator_consistent(self):
        free, total = adcuda.cuda.mem_get_info()
        before = adcuda.cuda.memory_stats()
        with pytest.raises(adcuda.cuda.OutOfMemoryError) as caught:
            adcuda.empty(2 * total, dtype=adcuda.bool, device="cuda")
        message = str(caught.value)
        assert message.startswith("CUDA out of memory: tried to allocate ")
        assert f"({2 * total} bytes" in message and "reserved" in message and "allocated" in message
        after = adcuda.cuda.memory_stats()
        assert after["num_ooms"] == before["num_ooms"] + 1
        assert after["allocated_bytes.all.current"] == before["allocated_bytes.all.current"]
        assert adcuda.ones(10, device="cuda").cpu().tolist() == [1.0] * 10

    def test_out_of_memory_releases_the_cache_and_retries_once(self):
        bk = cuda_backend()
        adcuda.cuda.empty_cache()
        free, _ = adcuda.cuda.mem_get_info()
        chunk = 1 << 30
        hold = [bk.empty((chunk,), adcuda.bool) for _ in range(int(free * 0.8) // chunk)]
        del hold  # cached, not given back
        before = adcuda.cuda.memory_stats()
        assert before["reserved_bytes.all.current"] >= int(free * 0.8) - chunk
        big = bk.empty((int(free * 0.5) + 12345,), adcuda.bool)  # larger than any cached block: needs them released
        after = adcuda.cuda.memory_stats()
        assert after["num_alloc_retries"] == before["num_alloc_retries"] + 1
        assert after["segment.large_pool.current"] < before["segment.large_pool.current"]
        del big
        adcuda.cuda.empty_cache()


# ------------------------------------------------------------------------------------------------
# streams and events
class TestStreams:
    pytestmark = needs_cuda

    def test_each_thread_has_its_own_current_stream(self):
        handles = {}
        all_alive = threading.Barrier(5)  # a thread that exits gives its stream back for the next one

        def record(name):
            handles[name] = (adcuda.cuda.current_stream().cuda_stream, adcuda.cuda.default_stream().cuda_stream)
            all_alive.wait(timeout=60)

        threads = [threading.Thread(target=record, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        record("main")
        for t in threads:
            t.join()
        assert all(current == own for current, own in handles.values())
        assert len({current for current, _ in handles.values()}) == 5

    def test_stream_context_selects_and_restores(self):
        own = adcuda.cuda.current_stream()
        side = adcuda.cuda.Stream()
        with adcuda.cuda.stream(side) as selected:
            assert selected is side and adcuda.cuda.current_stream() == side
            with adcuda.cuda.stream(None):
                assert adcuda.cuda.current_stream() == side
        assert adcuda.cuda.current_stream() == own

    def test_a_consumer_on_another_stream_waits_for_the_producer(self):
        bk = cuda_backend()
        producer, consumer = adcuda.cuda.Stream(), adcuda.cuda.Stream()
        x = bk.full((1 << 20,), 0.0, adcuda.float32)
        with adcuda.cuda.stream(producer):
            C.cuda_spin(SPIN_CYCLES)
            C.fill_(x, 7.0)
        with adcuda.cuda.stream(consumer):
            y = bk.astype(x, adcuda.float64)  # must wait for the fill, which waits for the spin
        assert x.last_stream == consumer.cuda_stream
        assert np.all(bk.to_numpy(y) == 7.0)

    def test_events_time_and_order_work(self):
        start, end = adcuda.cuda.Event(enable_timing=True), adcuda.cuda.Event(enable_timing=True)
        start.record()
        C.cuda_spin(SPIN_CYCLES // 4)
        end.record()
        end.synchronize()
        assert end.query() and start.elapsed_time(end) > 1.0
        side = adcuda.cuda.Stream()
        C.cuda_spin(SPIN_CYCLES)
        marker = adcuda.cuda.current_stream().record_event()
        side.wait_event(marker)
        waiting = adcuda.cuda.Event()
        waiting.record(side)
        assert not waiting.query(), "the side stream waits for the spin on this thread's stream"
        waiting.synchronize()
        assert marker.query()
        with pytest.raises(ValueError, match="enable_timing"):
            marker.elapsed_time(waiting)

    def test_a_wait_holds_for_the_record_it_saw_even_when_the_event_is_recorded_again(self):
        # the runtime recycles its events at once after a stream waits on one (stream_wait_stream)
        busy, idle, waiter = adcuda.cuda.Stream(), adcuda.cuda.Stream(), adcuda.cuda.Stream()
        event = adcuda.cuda.Event()
        with adcuda.cuda.stream(busy):
            C.cuda_spin(SPIN_CYCLES)
        spun = busy.record_event()
        event.record(busy)
        waiter.wait_event(event)
        event.record(idle)  # completes at once; the waiter still waits for the spin
        marker = waiter.record_event()
        assert not marker.query() and not spun.query()
        marker.synchronize()
        assert spun.query(), "the waiter went on before the spin was done"

    def test_threads_running_side_by_side_match_a_sequential_run(self):
        bk = cuda_backend()

        def work(seed):
            host = np.random.default_rng(seed).standard_normal((64, 33)).astype(np.float32)
            out = []
            for step in range(20):
                x = bk.from_numpy(host, adcuda.float32)
                y = bk.astype(bk.flip(bk.permute(x, (1, 0)), (0,)), adcuda.float16)
                z = bk.full((33, 64), float(step), adcuda.float64)
                bk.copy_(bk.slice(z, (slice(None, None, 2),)), bk.slice(y, (slice(None, None, 2),)))
                out.append(bk.to_numpy(z))
            return out

        sequential = [work(seed) for seed in range(6)]
        results = [None] * 6

        def run(seed):
            results[seed] = work(seed)

        threads = [threading.Thread(target=run, args=(seed,)) for seed in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for got, expected in zip(results, sequential):
            assert all(np.array_equal(a, b) for a, b in zip(got, expected))

    def test_a_thread_that_exits_returns_its_stream_to_the_pool(self):
        gc.collect()  # streams of Stream objects from earlier tests go back to the pool now, not in between
        device = adcuda.cuda.current_device()
        seen = []

        def use():
            seen.append(adcuda.cuda.current_stream().cuda_stream)
            adcuda.zeros(3, device="cuda").cpu()

        for _ in range(3):
            pooled = _native._C.pooled_stream_count(device)
            t = threading.Thread(target=use)
            t.start()
            t.join()
            # the stream goes back in a C++ thread-exit handler, which may run after join() returned
            deadline = time.monotonic() + 10
            while _native._C.pooled_stream_count(device) < max(pooled, 1) and time.monotonic() < deadline:
                time.sleep(0.001)
        assert len(set(seen)) == 1, "each new thread reuses the stream the previous one gave back"


# ------------------------------------------------------------------------------------------------
# pinned memory and asynchronous copies
class TestPinnedMemory:
    pytestmark = needs_cuda

    def test_pin_memory_and_pool_reuse(self):
        t = adcuda.arange(1000.0)
        assert not t.is_pinned()
        pinned = t.pin_memory()
        assert pinned.is_pinned() and pinned.pin_memory() is pinned and pinned.tolist() == t.tolist()
        pointer = pinned.data_ptr()
        stats = adcuda.cuda.pinned_memory_stats()
        del pinned
        again = adcuda.arange(1000.0).pin_memory()
        assert again.data_ptr() == pointer
        assert adcuda.cuda.pinned_memory_stats()["cache_hits"] == stats["cache_hits"] + 1

    def test_device_to_host_lands_in_pinned_memory_without_a_second_copy(self):
        y = adcuda.arange(10.0, device="cuda")
        host = y.cpu()
        assert host.is_pinned() and host.tolist() == list(map(float, range(10)))

    def test_non_blocking_copy_returns_before_it_is_done_and_keeps_its_block(self):
        host = adcuda.arange(float(1 << 20)).pin_memory()
        pointer = host.data_ptr()
        C.cuda_spin(SPIN_CYCLES)  # the copy queues behind this on the thread's stream
        device = host.to("cuda", non_blocking=True)
        done = adcuda.cuda.Event()
        done.record()
        # the spin still runs: the copy call returned without waiting for the stream (a wall-clock bound
        # would say the same less reliably on a loaded machine)
        assert not done.query(), "a non-blocking copy from pinned memory must not wait for the stream"
        del host
        other = adcuda.arange(float(1 << 20)).pin_memory()
        assert other.data_ptr() != pointer, "the block was reused while a copy from it was still queued"
        assert adcuda.cuda.pinned_memory_stats()["pending_blocks"] >= 1
        assert device.cpu().tolist()[-3:] == [float((1 << 20) - k) for k in (3, 2, 1)]

    def test_blocking_copy_from_pinned_memory_waits(self):
        host = adcuda.arange(1000.0).pin_memory()
        C.cuda_spin(SPIN_CYCLES // 4)
        host.to("cuda")
        assert adcuda.cuda.current_stream().query()

    def test_copies_overlap_compute_on_another_stream(self):
        compute, copy = adcuda.cuda.Stream(), adcuda.cuda.Stream()
        host = adcuda.ones(16 << 20).pin_memory()
        with adcuda.cuda.stream(compute):
            C.cuda_spin(4 * SPIN_CYCLES)
            spun = compute.record_event()
        with adcuda.cuda.stream(copy):
            device = host.to("cuda", non_blocking=True)
            copied = copy.record_event()
        copied.synchronize()
        assert not spun.query(), "the copy waited for the compute stream instead of running beside it"
        compute.synchronize()
        assert np.all(device.cpu().numpy() == 1.0)

    def test_dataloader_pins_in_a_thread_and_prefetches_to_the_device(self):
        from adcuda.utils.data import DataLoader, DevicePrefetcher, TensorDataset

        data = TensorDataset(adcuda.arange(40.0).reshape(20, 2), adcuda.arange(20))
        for workers in (0, 2):
            loader = DataLoader(data, batch_size=4, num_workers=workers, pin_memory=True)
            batches = list(loader)
            assert all(x.is_pinned() and y.is_pinned() for x, y in batches)
            moved = list(DevicePrefetcher(loader, "cuda"))
            assert len(moved) == 5 and all(x.is_cuda and y.is_cuda for x, y in moved)
            assert [y.cpu().tolist() for _, y in moved] == [list(range(i, i + 4)) for i in range(0, 20, 4)]


# ------------------------------------------------------------------------------------------------
# contexts, workers and fork safety on a GPU
class ContextReport:
    def __len__(self):
        return 4

    def __getitem__(self, index):
        context = adcuda.init_cuda_context()
        value = adcuda.full((2,), float(index), device="cuda").cpu()
        return {"device": str(context.device), "pid": os.getpid(), "value": value}


class TestContexts:
    pytestmark = needs_cuda

    def test_init_cuda_context_on_a_gpu(self):
        context = adcuda.init_cuda_context()
        assert context.is_cuda and context.device == adcuda.device("cuda", 0) and context.reason is None
        assert context.stream == adcuda.cuda.current_stream()
        assert adcuda.cuda.is_initialized() and adcuda.init_cuda_context() is context
        facts = adcuda.info(as_dict=True)
        assert facts["allocator"]["cuda:0"]["reserved_bytes.all.current"] >= 0 and facts["pinned_pool"] is not None
        assert "allocator cuda:0:" in adcuda.info()

    def test_dataloader_workers_initialise_cuda_under_spawn(self):
        from adcuda.utils.data import DataLoader

        adcuda.init_cuda_context()
        loader = DataLoader(ContextReport(), batch_size=2, num_workers=2, worker_init_fn=adcuda.init_cuda_context)
        assert loader.multiprocessing_context.get_start_method() == "spawn"
        batches = list(loader)
        assert {d for b in batches for d in b["device"]} == {"cuda:0"}
        assert os.getpid() not in {int(p) for b in batches for p in b["pid"]}
        assert [b["value"].tolist() for b in batches] == [[[0.0, 0.0], [1.0, 1.0]], [[2.0, 2.0], [3.0, 3.0]]]

    def test_a_real_bad_fork_is_refused_without_hanging(self):
        adcuda.init_cuda_context()
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:
            answers = []
            for attempt in (
                lambda: adcuda.zeros(2, device="cuda"),
                lambda: C.DeviceArray.empty((2,), C.ScalarType.float32),
            ):
                try:
                    attempt()
                    answers.append("no error")
                except adcuda.cuda.BadForkError as e:
                    answers.append("BadForkError " + str(e)[:40])
                except BaseException as e:
                    answers.append(f"{type(e).__name__} {e}")
            os.write(write_end, "\n".join(answers).encode())
            os._exit(0)
        os.close(write_end)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            done, _ = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            time.sleep(0.05)
        else:
            os.kill(pid, 9)
            pytest.fail("the forked child hung")
        answers = os.read(read_end, 65536).decode().splitlines()
        os.close(read_end)
        assert len(answers) == 2 and all(a.startswith("BadForkError") for a in answers), answers
        assert not fork.in_bad_fork()


# ------------------------------------------------------------------------------------------------
# the caching allocator's segments: splitting, coalescing, PyTorch's statistics
class TestSegments:
    pytestmark = needs_cuda
    MiB = 1 << 20

    def blocks(self, sizes):
        return [C.DeviceArray.empty((n,), C.ScalarType.bool) for n in sizes]

    def test_memory_stats_uses_pytorchs_names(self):
        stats = adcuda.cuda.memory_stats()
        for stat in (
            "allocated_bytes",
            "requested_bytes",
            "reserved_bytes",
            "active",
            "active_bytes",
            "segment",
            "allocation",
        ):
            for pool in ("all", "small_pool", "large_pool"):
                for field in ("current", "peak", "allocated", "freed"):
                    assert f"{stat}.{pool}.{field}" in stats
        for key in (
            "inactive_split.all.current",
            "inactive_split_bytes.large_pool.current",
            "num_alloc_retries",
            "num_ooms",
            "num_device_alloc",
            "num_device_free",
        ):
            assert key in stats
        assert set(stats) == set(adcuda.cuda.memory._STAT_KEYS)
        assert stats["allocated_bytes.all.current"] == (
            stats["allocated_bytes.small_pool.current"] + stats["allocated_bytes.large_pool.current"]
        )

    def test_small_requests_share_a_2_mib_segment_and_merge_back(self):
        adcuda.cuda.empty_cache()
        before = adcuda.cuda.memory_stats()
        held = self.blocks([1000, 70000, 333, 4096])  # 4 small blocks: carved from at most one new 2 MiB segment
        stats = adcuda.cuda.memory_stats()
        carved = stats["segment.small_pool.current"] - before["segment.small_pool.current"]
        assert carved in (0, 1)  # 0: an earlier test's live block left room in a segment already held
        assert stats["reserved_bytes.small_pool.current"] - before[
            "reserved_bytes.small_pool.current"
        ] == 2 * self.MiB * (stats["segment.small_pool.current"] - before["segment.small_pool.current"])
        pointers = sorted(a.data_ptr() for a in held)
        assert pointers[-1] - pointers[0] < 2 * self.MiB, "carved from one segment"
        del held[1]  # a hole between two blocks in use: free, but not releasable
        stats = adcuda.cuda.memory_stats()
        assert stats["inactive_split_bytes.small_pool.current"] >= C.device_block_size(70000)
        del held
        adcuda.cuda.empty_cache()  # the blocks merged back into one free segment: it goes back to CUDA
        stats = adcuda.cuda.memory_stats()
        assert stats["segment.small_pool.current"] == before["segment.small_pool.current"]
        assert stats["num_device_free"] >= before["num_device_free"] + carved

    def test_freed_neighbours_coalesce_so_larger_requests_fit(self):
        adcuda.cuda.empty_cache()
        # 3 MiB requests share 20 MiB segments (six each); freed, they merge into whole segments that then
        # serve 5 MiB requests (four each) without a single new cudaMalloc.
        first = self.blocks([3 * self.MiB] * 12)
        reserved = adcuda.cuda.memory_reserved()
        device_allocs = adcuda.cuda.memory_stats()["num_device_alloc"]
        del first
        second = self.blocks([5 * self.MiB] * 8)
        stats = adcuda.cuda.memory_stats()
        assert stats["num_device_alloc"] == device_allocs and stats["reserved_bytes.all.current"] == reserved
        del second

    def test_varying_shapes_keep_reserved_memory_bounded(self):
        """A training loop whose activation sizes change every step (varying sequence lengths): the
        cached memory is reused across sizes instead of growing with every new size."""
        adcuda.cuda.empty_cache()
        adcuda.cuda.reset_peak_memory_stats()
        rng = np.random.default_rng(0)
        base = adcuda.cuda.memory_reserved()
        reserved_after = []
        for _ in range(60):
            length = int(rng.integers(1, 512))
            live = self.blocks([length * 4096 * 4, length * 1024 * 2, length * 33, int(rng.integers(1, 10000))])
            live += self.blocks([length * 4096 * 2])
            del live[int(rng.integers(0, len(live)))]  # freed out of order
            del live
            reserved_after.append(adcuda.cuda.memory_reserved() - base)
        peak_allocated = adcuda.cuda.max_memory_allocated()
        # never more than twice the most ever live (plus one large segment), and no growth once warm
        assert max(reserved_after) <= 2 * peak_allocated + 20 * self.MiB
        assert reserved_after[-1] <= max(reserved_after[:30])

    def test_empty_cache_waits_for_streams_without_blocking_other_threads(self):
        bk = cuda_backend()
        side = adcuda.cuda.Stream()
        with adcuda.cuda.stream(side):
            a = bk.empty((20 << 20,), adcuda.bool)  # a segment of its own, on the side stream
            C.cuda_spin(SPIN_CYCLES)
            C.fill_(a, True)
        del a  # free (on its own stream), but the fill is still queued behind the spin
        emptied = threading.Event()

        def empty():
            adcuda.cuda.empty_cache()  # must wait for the side stream before giving the segment back
            emptied.set()

        thread = threading.Thread(target=empty)
        thread.start()
        time.sleep(0.05)
        b = bk.full((1000,), 1.0, adcuda.float32)  # the allocator stays usable meanwhile
        assert not side.query(), "the allocation waited for the side stream's spin"
        thread.join(timeout=120)
        assert emptied.is_set() and side.query()
        assert bk.to_numpy(b).sum() == 1000.0


# ------------------------------------------------------------------------------------------------
# indices out of range found by kernels: raised at the next synchronising call, no host wait
class TestDeviceSideErrors:
    pytestmark = needs_cuda

    def test_an_out_of_range_embedding_index_is_raised_at_the_next_sync_not_before(self):
        bk = cuda_backend()
        weight = bk.from_numpy(np.ones((7, 4), np.float32), adcuda.float32)
        bad = bk.from_numpy(np.array([[0, 9], [3, 1]]), adcuda.int64)
        C.cuda_spin(SPIN_CYCLES)
        out = bk.embedding(weight, bad)  # no host wait: returns while the spin still runs
        assert not adcuda.cuda.current_stream().query()
        with pytest.raises(
            adcuda.cuda.DeviceIndexError, match="embedding: index 9 is out of range for num_embeddings=7"
        ) as caught:
            bk.to_numpy(out)
        assert isinstance(caught.value, adcuda.IndexOutOfRangeError)
        C.raise_device_errors()  # raised once: nothing pending now
        good = bk.embedding(weight, bk.from_numpy(np.array([6, 0]), adcuda.int64))
        assert bk.to_numpy(good).tolist() == [[1.0] * 4] * 2

    @pytest.mark.parametrize("sync", ["synchronize", "stream", "event", "item"])
    def test_an_out_of_range_index_is_raised_by_every_synchronising_call(self, sync):
        x = adcuda.arange(12.0, device="cuda").reshape(4, 3)
        C.cuda_spin(SPIN_CYCLES // 4)
        picked = x[adcuda.tensor([1, -5, 2], device="cuda")]  # -5 is outside [-4, 4)
        assert not adcuda.cuda.current_stream().query(), "indexing waited for the device"
        waits = {
            "synchronize": adcuda.cuda.synchronize,
            "stream": lambda: adcuda.cuda.current_stream().synchronize(),
            "event": lambda: adcuda.cuda.current_stream().record_event().synchronize(),
            "item": lambda: picked.sum().item(),
        }
        with pytest.raises(
            adcuda.cuda.DeviceIndexError, match="indexing: index -5 is out of bounds for dimension with size 4"
        ):
            waits[sync]()
        assert x[adcuda.tensor([3], device="cuda")].tolist() == [[9.0, 10.0, 11.0]]

    def test_scatters_skip_indices_out_of_range_and_raise_at_the_sync(self):
        x = adcuda.zeros(4, 3, device="cuda")
        bad = adcuda.tensor([1, 7, 2], device="cuda")
        for scatter in (
            lambda: x.index_put_((bad,), adcuda.ones((), device="cuda"), accumulate=True),
            lambda: x.index_put_((bad,), adcuda.ones((), device="cuda")),
        ):
            scatter()
            with pytest.raises(
                adcuda.cuda.DeviceIndexError, match="index 7 is out of bounds for dimension with size 4"
            ):
                adcuda.cuda.synchronize()
            # rows 1 and 2 got their values, nothing else was written (no row 7, no stand-in row 0)
            assert x.cpu().numpy().tolist() == [[0.0] * 3, [1.0] * 3, [1.0] * 3, [0.0] * 3]
            x.zero_()
        with pytest.raises(IndexError):
            adcuda.zeros(0, 3, device="cuda")[adcuda.tensor([0], device="cuda")]  # no element to stand in: at once


# ------------------------------------------------------------------------------------------------
# stream uses: a launch is visible to other streams once its work is queued; other libraries' streams
class TestStreamUses:
    pytestmark = needs_cuda

    def test_a_launch_is_recorded_as_the_last_use_only_after_its_work_is_queued(self):
        bk = cuda_backend()
        side = adcuda.cuda.Stream()
        x = bk.full((7,), 1.0, adcuda.float32)
        first = x.last_stream
        with adcuda.cuda.stream(side):
            during, after = C.last_stream_during_and_after_launch(x, 1000)
        assert during == first, "another thread would have waited on the side stream before the kernel was queued"
        assert after == side.cuda_stream

    def test_a_dlpack_consumer_stream_is_waited_for_before_reuse_and_before_reads(self):
        bk = cuda_backend()
        consumer = adcuda.cuda.Stream()  # stands for another library's stream
        x = adcuda.full((1 << 16,), 2.0, device="cuda")
        capsule = x.__dlpack__(stream=consumer.cuda_stream)
        pointer, nbytes = x.data_ptr(), x.numel() * 4
        with adcuda.cuda.stream(consumer):
            C.cuda_spin(SPIN_CYCLES)
        # the consumer writes on its stream, behind the spin, without telling adcuda
        C.fill_bytes_untracked(pointer, nbytes, 0x3F, consumer.cuda_stream)
        assert np.all(x.cpu().numpy() == np.float32(np.frombuffer(b"\x3f" * 4, np.float32)[0])), (
            "adcuda's read waits for the consumer's earlier work"
        )
        with adcuda.cuda.stream(consumer):
            C.cuda_spin(SPIN_CYCLES)
        pending = adcuda.cuda.memory_stats()["pending_blocks"]
        del x, capsule
        assert adcuda.cuda.memory_stats()["pending_blocks"] == pending + 1
        y = bk.empty((1 << 16,), adcuda.float32)
        assert not consumer.query()
        assert not y.data_ptr() - nbytes < pointer < y.data_ptr() + nbytes, "reused while the consumer may use it"
        consumer.synchronize()

    def test_record_stream_and_the_array_interface_record_their_streams(self):
        consumer = adcuda.cuda.Stream()
        x = adcuda.ones(1000, device="cuda")
        adcuda.cuda.record_stream(x, consumer)
        _ = x.__cuda_array_interface__  # records the legacy default stream, the protocol's consumer default
        assert {handle for handle, _ in C.external_users(x._data)} == {consumer.cuda_stream, 1}
        with adcuda.cuda.stream(consumer):
            C.cuda_spin(SPIN_CYCLES)
        pending = adcuda.cuda.memory_stats()["pending_blocks"]
        del x
        assert adcuda.cuda.memory_stats()["pending_blocks"] == pending + 1
        consumer.synchronize()
        with pytest.raises(TypeError, match="record_stream: expected a stream"):
            adcuda.cuda.record_stream(adcuda.ones(2, device="cuda"), "stream")
        with pytest.raises(ValueError, match="only CUDA tensors"):
            adcuda.cuda.record_stream(adcuda.ones(2), consumer)
