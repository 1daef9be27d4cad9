"""A small program that calls every kernel family and the CUDA runtime on small odd shapes, for
compute-sanitizer (memcheck, racecheck, synccheck; scripts/gpu_check.sh runs it under each):

- every kernel family (kernels/*.cu: elementwise, reduce, index, layout, sort, random, embedding, norm,
  softmax_loss, gemm, attention, optim) through the public API, forward and backward, in float32 and
  float16, each result checked against the same computation on the CPU;
- the runtime from several threads at once: allocation, fills, casts, strided copies, host<->device
  copies (pageable and pinned, blocking and not), arrays handed to another stream and back, DLPack.

Shapes are odd (1, 7, 33, 1023 elements along a dim) so that tails, partial warps and unaligned
vector loads are exercised. Prints "cuda runtime workload: all results right (N checks)" and exits 0,
or lists what was wrong and exits 1.
"""

import sys
import threading

import numpy as np

import adcuda
import adcuda.nn.functional as F
from adcuda import _native
from adcuda.backends import cuda as bk

C = _native._C


class Checks:
    def __init__(self):
        self.count = 0
        self.failures = []
        self._lock = threading.Lock()

    def close(self, what, got, expected, tolerance):
        got = np.asarray(got, dtype=np.float64)
        expected = np.asarray(expected, dtype=np.float64)
        ok = got.shape == expected.shape and np.allclose(got, expected, rtol=tolerance, atol=tolerance, equal_nan=True)
        with self._lock:
            self.count += 1
            if not ok:
                error = np.abs(got - expected).max() if got.shape == expected.shape else "shape"
                self.failures.append(
                    f"{what}: differs from the CPU (max error {error}, shapes {got.shape} and {expected.shape})"
                )

    def true(self, what, condition):
        with self._lock:
            self.count += 1
            if not condition:
                self.failures.append(what)


def on_both(fn, *host_arrays, dtype=adcuda.float32, grad=False):
    """``fn`` applied to the arrays as tensors on the CPU and on the GPU: {device: (out, grads)}."""
    results = {}
    for device in ("cpu", "cuda"):
        tensors = [
            adcuda.tensor(
                a,
                device=device,
                dtype=dtype if a.dtype.kind == "f" else None,
                requires_grad=grad and a.dtype.kind == "f",
            )
            for a in host_arrays
        ]
        out = fn(*tensors)
        grads = []
        if grad:
            out.float().sum().backward()
            grads = [t.grad.float().cpu().numpy() for t in tensors if t.requires_grad]
        results[device] = (out.detach().float().cpu().numpy(), grads)
    return results


def compare(checks, what, fn, *host_arrays, dtype=adcuda.float32, grad=False, tolerance=None):
    tolerance = tolerance or (2e-2 if dtype == adcuda.float16 else 1e-4)
    results = on_both(fn, *host_arrays, dtype=dtype, grad=grad)
    (cpu_out, cpu_grads), (gpu_out, gpu_grads) = results["cpu"], results["cuda"]
    checks.close(f"{what} [{dtype}]", gpu_out, cpu_out, tolerance)
    for i, (g, c) in enumerate(zip(gpu_grads, cpu_grads)):
        checks.close(f"{what} [{dtype}] grad {i}", g, c, tolerance)


def kernel_families(checks):
    rng = np.random.default_rng(0)
    normal = lambda *shape: rng.standard_normal(shape).astype(np.float32)  # noqa: E731
    for dtype in (adcuda.float32, adcuda.float16):
        # elementwise (broadcast, strided, transcendental, comparison)
        compare(
            checks,
            "elementwise",
            lambda a, b: (a * b + a.exp().tanh()) / (b.abs() + 1) - (a > b).to(a.dtype),
            normal(7, 33),
            normal(1, 33),
            dtype=dtype,
            grad=True,
        )
        compare(checks, "elementwise strided", lambda a: a.t() * 3 + a.flip(0).t(), normal(33, 7), dtype=dtype)
        # reduce
        compare(
            checks,
            "reduce",
            lambda a: a.sum(1) + a.mean(0).sum() + a.amax(1) - a.var(1),
            normal(7, 1023),
            dtype=dtype,
            grad=True,
            tolerance=5e-2 if dtype == adcuda.float16 else 1e-3,
        )
        compare(checks, "argmax", lambda a: a.argmax(1), normal(7, 1023), dtype=dtype)
        # softmax_loss
        targets = rng.integers(0, 33, 7)
        compare(
            checks, "softmax", lambda a: F.softmax(a, -1) + F.log_softmax(a, -1), normal(7, 33), dtype=dtype, grad=True
        )
        compare(
            checks,
            "cross_entropy",
            lambda a, t: F.cross_entropy(a.float(), t),
            normal(7, 33),
            targets,
            dtype=dtype,
            grad=True,
        )
        # norm
        compare(
            checks,
            "layer_norm",
            lambda a, w, b: F.layer_norm(a, (33,), w, b),
            normal(7, 33),
            normal(33),
            normal(33),
            dtype=dtype,
            grad=True,
            tolerance=5e-2 if dtype == adcuda.float16 else 1e-3,
        )
        # gemm
        compare(
            checks,
            "linear",
            lambda x, w, b: F.linear(x, w, b),
            normal(7, 33),
            normal(17, 33),
            normal(17),
            dtype=dtype,
            grad=True,
            tolerance=5e-2 if dtype == adcuda.float16 else 1e-3,
        )
        compare(checks, "matmul transposed", lambda a, b: a.t() @ b, normal(33, 7), normal(33, 5), dtype=dtype)
        # attention
        compare(
            checks,
            "attention",
            lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
            normal(1, 2, 7, 16),
            normal(1, 2, 7, 16),
            normal(1, 2, 7, 16),
            dtype=dtype,
            grad=True,
            tolerance=5e-2 if dtype == adcuda.float16 else 1e-3,
        )
    # index
    idx = rng.integers(-7, 7, 5)
    compare(checks, "index", lambda a, i: a[i] * 2, normal(7, 3), idx, grad=True)
    compare(
        checks,
        "index_put",
        lambda a, i: a.clone().index_put_((i,), adcuda.ones((), device=a.device), True),
        normal(7, 3),
        idx,
    )
    compare(checks, "mask", lambda a: a[a > 0], normal(33))
    compare(
        checks,
        "gather scatter_add",
        lambda a, i: a.gather(1, i) + a.scatter_add(1, i, a)[:, :2],
        normal(7, 5),
        rng.integers(0, 5, (7, 2)),
    )
    # layout
    compare(checks, "cat tril", lambda a, b: adcuda.cat([a.tril(), b.triu(1)], 0), normal(7, 7), normal(3, 7))
    # sort
    compare(checks, "sort", lambda a: a.sort(1).values + a.topk(3, 1).values.sum(), normal(7, 1023))
    compare(checks, "cumsum", lambda a: a.cumsum(1), normal(7, 33), tolerance=1e-3)
    # embedding
    compare(checks, "embedding", lambda w, i: F.embedding(i, w), normal(33, 7), rng.integers(0, 33, (3, 5)), grad=True)
    # random (no CPU oracle: the draws differ by device; their statistics and the dropout mask do not)
    adcuda.manual_seed(3)
    draws = adcuda.randn(1023, 33, device="cuda").cpu().numpy()
    checks.true("randn: mean and std of 33759 draws", abs(draws.mean()) < 0.05 and abs(draws.std() - 1) < 0.05)
    x = adcuda.ones(7, 1023, device="cuda", requires_grad=True)
    y = F.dropout(x, 0.25, training=True)
    y.sum().backward()
    kept = y.detach().cpu().numpy() != 0
    checks.true(
        "dropout: kept elements scaled, grad follows the mask",
        np.allclose(y.detach().cpu().numpy()[kept], 1 / 0.75)
        and np.array_equal(x.grad.cpu().numpy() != 0, kept)
        and 0.6 < kept.mean() < 0.9,
    )
    # optim (multi-tensor Adam/SGD, global norm)
    final = {}
    data_host, target_host = normal(5, 33), rng.integers(0, 3, 5)
    for device in ("cpu", "cuda"):
        adcuda.manual_seed(5)
        model = adcuda.nn.Sequential(adcuda.nn.Linear(33, 7), adcuda.nn.GELU(), adcuda.nn.Linear(7, 3)).to(device)
        # eps well above the smallest gradients: Adam would otherwise turn a last-bit difference in a
        # near-zero gradient into a full step of either sign
        opt = adcuda.optim.AdamW(model.parameters(), lr=1e-3, eps=1e-3)
        sgd = adcuda.optim.SGD(model.parameters(), lr=1e-2, momentum=0.9)
        data = adcuda.tensor(data_host, device=device)
        target = adcuda.tensor(target_host, device=device)
        for _ in range(2):
            for optimizer in (opt, sgd):
                optimizer.zero_grad()
                F.cross_entropy(model(data), target).backward()
                adcuda.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
                optimizer.step()
        final[device] = [p.detach().cpu().numpy() for p in model.parameters()]
    for i, (g, c) in enumerate(zip(final["cuda"], final["cpu"])):
        checks.close(f"AdamW+SGD+clip_grad_norm_ parameter {i}", g, c, 1e-4)


def runtime_thread(seed, checks):
    try:
        runtime_steps(seed, checks)
    except Exception as e:  # a thread's exception must fail the run, not just print
        checks.true(f"thread {seed}: {type(e).__name__}: {e}", False)


def runtime_steps(seed, checks):
    rng = np.random.default_rng(seed)
    side = adcuda.cuda.Stream()
    for step in range(6):
        host = rng.standard_normal((17, 33)).astype(np.float32)
        x = bk.from_numpy(host, adcuda.float32)
        y = bk.astype(bk.flip(bk.permute(x, (1, 0)), (0,)), adcuda.float16)
        with adcuda.cuda.stream(side):
            z = bk.full((33, 17), float(step), adcuda.float64)
            bk.copy_(bk.slice(z, (slice(None, None, 2),)), bk.slice(y, (slice(None, None, 2),)))
        expected = np.full((33, 17), float(step))
        expected[::2] = np.flip(host.T, 0).astype(np.float16)[::2]
        checks.true(f"thread {seed} step {step}: strided copy across streams", np.array_equal(bk.to_numpy(z), expected))
        pinned = adcuda.from_numpy(host).pin_memory()
        moved = pinned.to("cuda", non_blocking=True)
        shared = adcuda.from_dlpack(moved)
        checks.true(
            f"thread {seed} step {step}: pinned non-blocking copy / DLPack", shared.cpu().tolist() == pinned.tolist()
        )
        ints = bk.arange(0, 1000, 3, adcuda.int64)
        checks.true(
            f"thread {seed} step {step}: arange/astype",
            np.array_equal(bk.to_numpy(bk.astype(ints, adcuda.int32)), np.arange(0, 1000, 3)),
        )


def main():
    if not adcuda.cuda.is_available():
        print(f"cuda runtime workload: needs a GPU: {adcuda.cuda.unavailable_reason()}")
        return 1
    adcuda.init_cuda_context()
    checks = Checks()
    kernel_families(checks)
    threads = [threading.Thread(target=runtime_thread, args=(seed, checks)) for seed in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    adcuda.cuda.synchronize()
    adcuda.cuda.empty_cache()
    adcuda.cuda.empty_pinned_cache()
    if checks.failures:
        print("\n".join(checks.failures))
        print(f"cuda runtime workload: {len(checks.failures)} of {checks.count} checks wrong")
        return 1
    print(f"cuda runtime workload: all results right ({checks.count} checks)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
