"""CUDA graphs (adcuda/cuda/graphs.py over kernels/runtime/graph.h): capture and replay of forward and
backward passes against eager runs, make_graphed_callables training steps, random ops drawing anew on
every replay, the private memory pool, and the errors of illegal calls during a capture. Marked
``cuda``: they run on a GPU or on the emulator (scripts/emulated_cuda_tests.sh), whose stream capture
(kernels/emulator/cudart.cpp) refuses what a driver refuses."""

import numpy as np
import pytest

import adcuda
import adcuda.nn.functional as F
from adcuda import _native, nn
from adcuda.cuda import CUDAGraph, GraphCaptureError, graph, graph_pool_handle, make_graphed_callables

AVAILABLE = adcuda.cuda.is_available()


def needs_cuda(test):
    marked = pytest.mark.skipif(not AVAILABLE, reason=f"CUDA is not usable: {adcuda.cuda.unavailable_reason()}")
    return pytest.mark.cuda(marked(test))


def cuda_tensor(array, requires_grad=False):
    return adcuda.tensor(np.asarray(array, dtype=np.float32), device="cuda", requires_grad=requires_grad)


def host(t):
    return t.detach().cpu().numpy()


def data(shape, seed):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


@needs_cuda
def test_forward_capture_replays_on_new_inputs():
    w = cuda_tensor(data((7, 5), 0))
    static_x = cuda_tensor(data((3, 7), 1))
    g = CUDAGraph()
    with graph(g):
        static_y = (static_x @ w).relu() * 2.0 + 1.0
    assert g.num_nodes > 0
    for seed in (2, 3, 4):
        x = data((3, 7), seed)
        static_x.copy_(cuda_tensor(x))
        pointer = static_y.data_ptr()
        g.replay()
        np.testing.assert_allclose(host(static_y), np.maximum(x @ host(w), 0) * 2 + 1, rtol=1e-5, atol=1e-5)
        assert static_y.data_ptr() == pointer  # the output lives in the graph's pool, rewritten in place


@needs_cuda
def test_backward_capture_matches_eager_gradients():
    w = cuda_tensor(data((6, 4), 0), requires_grad=True)
    static_x = cuda_tensor(data((5, 6), 1))
    g = CUDAGraph()
    with graph(g):
        loss = ((static_x @ w).tanh() ** 2).sum()
        (static_grad,) = adcuda.autograd.grad([loss], [w])
    for seed in (2, 3):
        x = data((5, 6), seed)
        static_x.copy_(cuda_tensor(x))
        g.replay()
        eager_w = cuda_tensor(host(w), requires_grad=True)
        ((cuda_tensor(x) @ eager_w).tanh() ** 2).sum().backward()
        np.testing.assert_allclose(host(static_grad), host(eager_w.grad), rtol=1e-4, atol=1e-5)


def _mlp(seed):
    adcuda.manual_seed(seed)
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3)).to("cuda")


@needs_cuda
@pytest.mark.parametrize("optimizer", ["SGD", "AdamW"])
def test_make_graphed_callables_training_matches_eager(optimizer):
    eager, graphed = _mlp(0), _mlp(0)
    make_optimizer = {
        "SGD": lambda p: adcuda.optim.SGD(p, lr=0.1, momentum=0.9),
        "AdamW": lambda p: adcuda.optim.AdamW(p, lr=0.01),
    }[optimizer]
    eager_opt, graphed_opt = make_optimizer(eager.parameters()), make_optimizer(graphed.parameters())
    sample = cuda_tensor(data((4, 8), 9), requires_grad=False)
    graphed = make_graphed_callables(graphed, (sample,), num_warmup_iters=2)
    graphed.zero_grad()  # the warmup's gradients
    for step in range(4):
        x, target = data((4, 8), 10 + step), np.random.default_rng(step).integers(0, 3, 4)
        losses = []
        for model, opt in ((eager, eager_opt), (graphed, graphed_opt)):
            opt.zero_grad()
            loss = F.cross_entropy(model(cuda_tensor(x)), adcuda.tensor(target, device="cuda"))
            loss.backward()
            opt.step()
            losses.append(float(loss.item()))
        assert losses[0] == pytest.approx(losses[1], rel=1e-5, abs=1e-6)
    for a, b in zip(eager.parameters(), graphed.parameters()):
        np.testing.assert_allclose(host(a), host(b), rtol=1e-4, atol=1e-5)


@needs_cuda
def test_graphed_module_falls_back_to_eager_in_the_other_mode():
    model = _mlp(1)
    graphed = make_graphed_callables(model, (cuda_tensor(data((2, 8), 0)),), num_warmup_iters=1)
    graphed.eval()
    x = data((5, 8), 1)  # another batch size: only the eager forward can take it
    assert graphed(cuda_tensor(x)).shape == (5, 3)


@needs_cuda
def test_dropout_draws_new_numbers_per_replay_matching_eager():
    x = cuda_tensor(np.ones((64,), np.float32))
    adcuda.manual_seed(123)
    eager = [host(F.dropout(x, 0.5, training=True)) for _ in range(3)]
    adcuda.manual_seed(123)
    g = CUDAGraph()
    with graph(g):
        static_out = F.dropout(x, 0.5, training=True)
    replays = []
    for _ in range(3):
        g.replay()
        replays.append(host(static_out))
    assert not np.array_equal(replays[0], replays[1])
    for e, r in zip(eager, replays):
        np.testing.assert_array_equal(e, r)
    # the generator moved on as the eager draws did
    after_eager = adcuda.random.get_rng_state()
    adcuda.manual_seed(123)
    for _ in range(3):
        F.dropout(x, 0.5, training=True)
    assert adcuda.random.get_rng_state() == after_eager


@needs_cuda
def test_private_pool_is_shared_reused_and_released():
    x = cuda_tensor(data((256, 256), 0))
    pool = graph_pool_handle()
    first, second = CUDAGraph(), CUDAGraph()
    with graph(first, pool=pool):
        out_first = (x * 2.0).exp().sum(dim=0)
    reserved = _native._C.private_pool_reserved_bytes(0, pool.id)
    assert reserved > 0
    with graph(second, pool=first.pool()):
        out_second = (x * 3.0).exp().sum(dim=0)
    # the second capture reused the temporaries the first freed in the pool
    assert _native._C.private_pool_reserved_bytes(0, pool.id) == reserved
    adcuda.cuda.empty_cache()  # the graphs' free blocks are still their memory: kept
    assert _native._C.private_pool_reserved_bytes(0, pool.id) == reserved
    first.replay()
    second.replay()
    np.testing.assert_allclose(host(out_first), np.exp(host(x) * 2).sum(0), rtol=1e-4)
    np.testing.assert_allclose(host(out_second), np.exp(host(x) * 3).sum(0), rtol=1e-4)
    first.reset()
    assert _native._C.private_pool_reserved_bytes(0, pool.id) == reserved  # the second graph still uses it
    second.reset()
    assert _native._C.private_pool_reserved_bytes(0, pool.id) == 0  # back in the ordinary cache


@needs_cuda
def test_update_from_swaps_kernel_arguments_when_the_topology_matches():
    a, b = cuda_tensor(data((9,), 0)), cuda_tensor(data((9,), 1))
    g1, g2, g3 = CUDAGraph(), CUDAGraph(), CUDAGraph()
    with graph(g1):
        out1 = a * 2.0 + 1.0
    with graph(g2):
        out2 = b * 2.0 + 1.0
    with graph(g3):
        out3 = (b * 2.0 + 1.0).sum()
    assert g1.update_from(g2)
    g1.replay()
    np.testing.assert_allclose(host(out2), host(b) * 2 + 1, rtol=1e-6)
    assert not g1.update_from(g3)
    del out1, out3


@needs_cuda
def test_host_read_during_capture_raises_and_discards_the_capture():
    x = cuda_tensor(data((4,), 0))
    g = CUDAGraph()
    with pytest.raises(GraphCaptureError, match=r"\.item\(\)"):
        with graph(g):
            (x * 2.0).sum().item()
    assert not _native._C.stream_is_capturing(adcuda.cuda.current_stream().cuda_stream)
    np.testing.assert_allclose(host(x * 2.0), host(x) * 2)  # eager work goes on
    with pytest.raises(GraphCaptureError, match="never captured"):
        g.replay()


@needs_cuda
@pytest.mark.parametrize(
    "illegal, match",
    [
        (lambda: adcuda.cuda.synchronize(), r"synchronize\(\)"),
        (lambda: adcuda.cuda.current_stream().synchronize(), r"Stream\.synchronize\(\)"),
        (lambda: cuda_tensor([1.0, 2.0]), "host memory to the device"),
        (lambda: adcuda.cuda.empty_cache(), "empty_cache"),
    ],
    ids=["device-synchronize", "stream-synchronize", "host-upload", "empty-cache"],
)
def test_illegal_calls_during_capture_raise_naming_the_call(illegal, match):
    g = CUDAGraph()
    with pytest.raises(GraphCaptureError, match=match):
        with graph(g):
            illegal()


@needs_cuda
def test_a_call_cuda_refuses_invalidates_the_capture():
    # The runtime does not check stream queries itself: CUDA (the emulator as a driver) refuses the
    # query and invalidates the capture, and capture_end says so.
    x = cuda_tensor(data((4,), 0))
    g = CUDAGraph()
    g.capture_begin()
    y = x * 2.0
    with pytest.raises(adcuda._native._C.CudaError, match="cudaErrorStreamCaptureUnsupported"):
        adcuda.cuda.current_stream().query()
    with pytest.raises(GraphCaptureError, match="capture failed"):
        g.capture_end()
    del y


@needs_cuda
def test_replay_after_reset_raises():
    x = cuda_tensor(data((4,), 0))
    g = CUDAGraph()
    with graph(g):
        y = x + 1.0
    g.replay()
    g.reset()
    with pytest.raises(GraphCaptureError, match=r"reset\(\)"):
        g.replay()
    del y


@needs_cuda
def test_random_draw_from_another_generator_is_refused():
    gen = adcuda.Generator("cuda").manual_seed(0) if hasattr(adcuda, "Generator") else None
    if gen is None:
        pytest.skip("no public Generator")
    g = CUDAGraph()
    with pytest.raises(GraphCaptureError, match="default one"):
        with graph(g):
            adcuda.rand(4, device="cuda", generator=gen)


@pytest.mark.skipif(AVAILABLE, reason="checks the behaviour without a usable GPU")
def test_without_cuda_the_api_exists_and_says_cuda_is_needed():
    from adcuda.errors import DeviceError

    for make in (CUDAGraph, graph_pool_handle, lambda: make_graphed_callables(lambda x: x, (None,))):
        with pytest.raises(DeviceError, match="CUDA"):
            make()


def _train_step(model, optimizer, x, y):
    optimizer.zero_grad()
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
    return loss


def _losses_and_parameters(step_fn, steps=5):
    adcuda.manual_seed(7)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Dropout(0.25), nn.Linear(16, 3)).to("cuda")
    optimizer = adcuda.optim.AdamW(model.parameters(), lr=0.01)
    losses = []
    for i in range(steps):
        x = cuda_tensor(data((6, 8), 20 + i))
        y = adcuda.tensor(np.random.default_rng(i).integers(0, 3, 6), device="cuda")
        losses.append(float(step_fn(model, optimizer, x, y).item()))
    return losses, [host(p) for p in model.parameters()]


@needs_cuda
def test_compile_replays_a_training_step_through_cuda_graphs_matching_eager():
    from adcuda.capture.cuda_graph import CudaGraphProgram

    eager_losses, eager_params = _losses_and_parameters(_train_step)
    compiled = adcuda.compile(_train_step, fullgraph=True)
    losses, params = _losses_and_parameters(compiled)
    np.testing.assert_allclose(losses, eager_losses, rtol=1e-5, atol=1e-6)  # dropout included
    for a, b in zip(params, eager_params):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    [program] = compiled.programs
    assert isinstance(program, CudaGraphProgram) and program.graphs and program.replays == 4
    assert "host step" in str(program) and "graph of" in str(program)
