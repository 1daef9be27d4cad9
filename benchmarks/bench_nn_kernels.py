"""adcuda's fused NN kernels, optimizer steps and whole training steps against PyTorch on one GPU.

    python benchmarks/bench_nn_kernels.py [--quick] [--json out.json]

Every kernel is first checked against the CPU backend on small odd shapes (the benchmark stops if
one is off). Then:
- memory-bound kernels (softmax, log-softmax, cross-entropy, layer norm, RMS norm, group norm, batch norm
  of (N, C) rows, average and global average pooling, 2x nearest and bilinear interpolation, reflect
  padding; forward and backward), every
  big operand of at least 256 MiB (four times an H200's L2): GB/s of the bytes each must move (inputs
  read once, outputs written once) as a share of the device-to-device copy bandwidth measured in the
  same run (benchmarks/_harness.py), next to PyTorch's kernels on the same data. Target on an H200:
  >= 80% of the copy bandwidth.
- embedding forward and (deterministic) backward, the global gradient norm and the multi-tensor
  AdamW / SGD steps of GPT-2's parameter list (124M parameters; fp32, and fp16 with fp32 master
  weights), and fused dropout: GB/s and % of copy, against PyTorch's embedding /
  embedding_dense_backward / _foreach_norm / fused AdamW / foreach SGD / native_dropout;
- attention forward and forward+backward against torch's scaled_dot_product_attention (TFLOP/s);
- a full training step (forward, cross-entropy, backward, AdamW) of the MLP and of the small GPT that
  ``adcuda train`` trains (adcuda/train/models.py), against the same models in PyTorch eager.

Times are CUDA-event medians over bursts of calls; adcuda's kernels are called through the backend
primitives (no autograd bookkeeping), the training steps through the public API. ``--quick`` takes
fewer bursts and smaller attention and training-step shapes; the bandwidth arrays stay at 256 MiB.
In the emulated build (ADCUDA_CUDA=EMULATE) it runs the reference check and reports "emulated: no
timing"; without a GPU it says so and exits 0.
"""

import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np  # noqa: E402
from _harness import (  # noqa: E402
    BANDWIDTH_BYTES,
    adcuda_event_seconds,
    copy_bandwidth,
    emulated_reference_run,
    format_bandwidth,
    framework_event_seconds,
    gpu_suite_args,
    is_emulated,
    optional_cuda_torch,
    percent_of_copy,
    print_table,
    write_bandwidth_json,
)

import adcuda  # noqa: E402


# ---------------------------------------------------------------------------------------------
# reference check
def check_against_cpu(cb, cpu):
    rng = np.random.default_rng(0)

    def close(got, expected, what, tolerance=2e-4):
        got = np.asarray(cb.to_numpy(got), np.float64)
        expected = np.asarray(expected, np.float64)
        scale = max(np.abs(expected[np.isfinite(expected)]).max(initial=0.0), 1.0)
        if got.shape != expected.shape or not np.allclose(
            got, expected, rtol=tolerance, atol=tolerance * scale, equal_nan=True
        ):
            raise SystemExit(f"reference check failed: {what}")

    def device(x, dtype=adcuda.float32):
        return cb.from_numpy(np.asarray(x), dtype)

    x = rng.standard_normal((37, 1031)).astype(np.float32)
    g = rng.standard_normal((37, 1031)).astype(np.float32)
    for log in (False, True):
        y = cpu.softmax(x, 1, log)
        close(cb.softmax(device(x), 1, log), y, f"softmax(log={log})")
        close(
            cb.softmax_backward(device(y), device(g), 1, log),
            cpu.softmax_backward(y, g, 1, log),
            f"softmax_backward(log={log})",
        )
    target = rng.integers(0, 1031, 37)
    target[::5] = -100
    weight = rng.uniform(0.5, 2.0, 1031).astype(np.float32)
    losses, stats = cpu.classifier_loss(x, target, weight, -100, 0.1)
    got_losses, got_stats = cb.classifier_loss(device(x), device(target, adcuda.int64), device(weight), -100, 0.1)
    close(got_losses, losses, "classifier_loss losses")
    close(got_stats, stats, "classifier_loss row statistics")
    g_rows = rng.standard_normal(37).astype(np.float32)
    close(
        cb.classifier_loss_backward(
            device(x), got_stats, device(target, adcuda.int64), device(weight), device(g_rows), -100, 0.1
        ),
        cpu.classifier_loss_backward(x, stats, target, weight, g_rows, -100, 0.1),
        "classifier_loss_backward",
    )
    w, b = rng.standard_normal(1031).astype(np.float32), rng.standard_normal(1031).astype(np.float32)
    y, mean, rstd = cpu.layer_norm(x, w, b, 1, 1e-5)
    got = cb.layer_norm(device(x), device(w), device(b), 1, 1e-5)
    close(got[0], y, "layer_norm")
    for got_part, ref_part, name in zip(
        cb.layer_norm_backward(device(g), device(x), device(w), got[1], got[2], 1),
        cpu.layer_norm_backward(g, x, w, mean, rstd, 1),
        ("dx", "dweight", "dbias"),
    ):
        close(got_part, ref_part, f"layer_norm_backward {name}")
    logits = rng.standard_normal((3, 50257)).astype(np.float32)
    target = np.array([0, 50256, -100])
    losses, stats = cpu.classifier_loss(logits, target, None, -100, 0.0)
    got_losses, got_stats = cb.classifier_loss(device(logits), device(target, adcuda.int64), None, -100, 0.0)
    close(got_losses, losses, "classifier_loss over 50257 classes (chunked rows)")
    ones = np.ones(3, np.float32)
    close(
        cb.classifier_loss_backward(
            device(logits), got_stats, device(target, adcuda.int64), None, device(ones), -100, 0.0
        ),
        cpu.classifier_loss_backward(logits, stats, target, None, ones, -100, 0.0),
        "classifier_loss_backward over 50257 classes",
    )
    x768, g768 = (rng.standard_normal((65, 768)).astype(np.float32) for _ in range(2))
    w768 = rng.standard_normal(768).astype(np.float32)
    _, mean, rstd = cpu.layer_norm(x768, w768, None, 1, 1e-5)
    got = cb.layer_norm(device(x768), device(w768), None, 1, 1e-5)
    for got_part, ref_part, name in zip(
        cb.layer_norm_backward(device(g768), device(x768), device(w768), got[1], got[2], 1),
        cpu.layer_norm_backward(g768, x768, w768, mean, rstd, 1),
        ("dx", "dweight", "dbias"),
    ):
        close(got_part, ref_part, f"layer_norm_backward (fused) {name}")
    for rows in (x768, x):  # the fused backward (768 wide) and the row / column-partial kernels (1031)
        grad = rng.standard_normal(rows.shape).astype(np.float32)
        width = rows.shape[1]
        scale = rng.standard_normal(width).astype(np.float32)
        y, rstd = cpu.rms_norm(rows, scale, 1, 1e-6)
        got = cb.rms_norm(device(rows), device(scale), 1, 1e-6)
        close(got[0], y, f"rms_norm {width} wide")
        for got_part, ref_part, name in zip(
            cb.rms_norm_backward(device(grad), device(rows), device(scale), got[1], 1),
            cpu.rms_norm_backward(grad, rows, scale, rstd, 1),
            ("dx", "dweight"),
        ):
            close(got_part, ref_part, f"rms_norm_backward {width} wide {name}")
    xg, gg = (rng.standard_normal((3, 12, 5, 7)).astype(np.float32) for _ in range(2))
    y, mean, rstd = cpu.group_norm(xg, w[:12], b[:12], 4, 1e-5)
    got = cb.group_norm(device(xg), device(w[:12]), device(b[:12]), 4, 1e-5)
    for got_part, ref_part, name in zip(got, (y, mean, rstd), ("y", "mean", "rstd")):
        close(got_part, ref_part, f"group_norm {name}")
    for got_part, ref_part, name in zip(
        cb.group_norm_backward(device(gg), device(xg), device(w[:12]), got[1], got[2], 4),
        cpu.group_norm_backward(gg, xg, w[:12], mean, rstd, 4),
        ("dx", "dweight", "dbias"),
    ):
        close(got_part, ref_part, f"group_norm_backward {name}")
    planes = rng.standard_normal((2, 3, 13, 11)).astype(np.float32)
    args = ((3, 2), (2, 2), (1, 1), (7, 6), False, None)
    close(cb.avg_pool2d(device(planes), *args), cpu.avg_pool2d(planes, *args), "avg_pool2d")
    pooled_g = rng.standard_normal((2, 3, 7, 6)).astype(np.float32)
    close(
        cb.avg_pool2d_backward(device(pooled_g), planes.shape, *args[:3], *args[4:]),
        cpu.avg_pool2d_backward(pooled_g, planes.shape, *args[:3], *args[4:]),
        "avg_pool2d_backward",
    )
    close(
        cb.adaptive_avg_pool2d(device(planes), (7, 6)), cpu.adaptive_avg_pool2d(planes, (7, 6)), "adaptive_avg_pool2d"
    )
    close(
        cb.adaptive_avg_pool2d_backward(device(pooled_g), planes.shape),
        cpu.adaptive_avg_pool2d_backward(pooled_g, planes.shape),
        "adaptive_avg_pool2d_backward",
    )
    # resampling (kernels/resample.cu): interpolate and pad, forward and gather-form backward
    for align_corners in (False, True):
        resize = ((29, 5), (12 / 29, 10 / 5) if not align_corners else (11 / 28, 9 / 4), align_corners)
        close(cb.interpolate_bilinear(device(planes), *resize), cpu.interpolate_bilinear(planes, *resize), "bilinear")
        g_up = rng.standard_normal((2, 3, 29, 5)).astype(np.float32)
        close(
            cb.interpolate_bilinear_backward(device(g_up), planes.shape, *resize[1:]),
            cpu.interpolate_bilinear_backward(g_up, planes.shape, *resize[1:]),
            "bilinear backward",
        )
    nearest = ((29, 5), (13 / 29, 11 / 5), True)
    close(cb.interpolate_nearest(device(planes), *nearest), cpu.interpolate_nearest(planes, *nearest), "nearest")
    close(
        cb.interpolate_nearest_backward(device(g_up), planes.shape, *nearest[1:]),
        cpu.interpolate_nearest_backward(g_up, planes.shape, *nearest[1:]),
        "nearest backward",
    )
    for mode in ("reflect", "replicate", "circular", "constant"):
        padded = cpu.pad(planes, (3, -1, 2, 5), mode, 0.5)
        close(cb.pad(device(planes), (3, -1, 2, 5), mode, 0.5), padded, f"pad {mode}")
        g_pad = rng.standard_normal(padded.shape).astype(np.float32)
        close(
            cb.pad_backward(device(g_pad), planes.shape, (3, -1, 2, 5), mode),
            cpu.pad_backward(g_pad, planes.shape, (3, -1, 2, 5), mode),
            f"pad backward {mode}",
        )
    # batch norm of (N, C) rows: the short-plane (column) kernels
    y, mean, rstd = cpu.batch_norm(x, w, b, 1e-5)
    got = cb.batch_norm(device(x), device(w), device(b), 1e-5)
    for got_part, ref_part, name in zip(got, (y, mean, rstd), ("y", "mean", "rstd")):
        close(got_part, ref_part, f"batch_norm (N, C) {name}")
    for got_part, ref_part, name in zip(
        cb.batch_norm_backward(device(g), device(x), device(w), got[1], got[2]),
        cpu.batch_norm_backward(g, x, w, mean, rstd),
        ("dx", "dweight", "dbias"),
    ):
        close(got_part, ref_part, f"batch_norm_backward (N, C) {name}")
    check_optimizers(cb, cpu, rng, close, device)
    q, k, v = (rng.standard_normal((2, 3, 45, 24)).astype(np.float32) for _ in range(3))
    out, lse = cpu.attention(q, k, v, None, True, 0.2)
    got_out, got_lse = cb.attention(device(q), device(k), device(v), None, True, 0.2)
    close(got_out, out, "attention")
    go = rng.standard_normal(out.shape).astype(np.float32)
    refs = cpu.attention_backward(go, q, k, v, out, lse, None, True, 0.2)
    grads = cb.attention_backward(device(go), device(q), device(k), device(v), got_out, got_lse, None, True, 0.2)
    for got_part, ref_part, name in zip(grads, refs, ("dq", "dk", "dv")):
        close(got_part, ref_part, f"attention_backward {name}")
    weight = rng.standard_normal((1031, 37)).astype(np.float32)
    idx = rng.integers(0, 1031, (17, 45))
    idx[0, :9] = 5
    close(cb.embedding(device(weight), device(idx, adcuda.int64)), cpu.embedding(weight, idx), "embedding")
    g_rows = rng.standard_normal((17, 45, 37)).astype(np.float32)
    close(
        cb.embedding_backward(device(g_rows), device(idx, adcuda.int64), 1031, 5, True),
        cpu.embedding_backward(g_rows, idx, 1031, 5, True),
        "embedding_backward",
    )
    arrays = [rng.standard_normal(n).astype(np.float32) for n in (1, 70001, 513)]
    for p in (2.0, math.inf, 3.0):
        close(cb.global_norm([device(a) for a in arrays], p), cpu.global_norm(arrays, p), f"global_norm(p={p})")
    out, mask = cb.dropout(device(x), 0.3, 5, 0)
    close(mask, cb.to_numpy(cb.bernoulli(x.shape, 0.7, adcuda.bool, 5, 0)), "dropout mask")
    close(out, cpu.dropout_backward(x, np.asarray(cb.to_numpy(mask)), 1 / 0.7), "dropout")
    print(
        "reference check: softmax, cross-entropy, layer, RMS, group and batch norm, average pooling, interpolate, "
        "pad, attention, embedding, global norm, AdamW, SGD and dropout match the CPU backend"
    )


def check_optimizers(cb, cpu, rng, close, device):
    """AdamW (fp32, and fp16 with fp32 masters) and SGD with momentum, two steps, against the CPU."""
    sizes = (1, 70001, 513)
    for half in (False, True):
        params = [rng.standard_normal(n).astype(np.float16 if half else np.float32) for n in sizes]
        grads = [rng.standard_normal(n).astype(p.dtype) for n, p in zip(sizes, params)]
        masters = [p.astype(np.float32) for p in params] if half else None
        moments = [[np.zeros(n, np.float32) for n in sizes] for _ in range(2)]
        dtype = adcuda.float16 if half else adcuda.float32
        ours = (
            [device(p, dtype) for p in params],
            [device(g, dtype) for g in grads],
            [[device(m) for m in ms] for ms in moments],
            [device(m) for m in masters] if half else None,
        )
        for step in (1, 2):
            args = (step, 1e-3, 0.9, 0.999, 1e-8, 0.01, True)
            cb.adam_step_(ours[0], ours[1], ours[2][0], ours[2][1], *args, ours[3])
            cpu.adam_step_(params, grads, moments[0], moments[1], *args, masters)
        for got, expected in zip(ours[0], params):
            close(got, expected, f"adam_step_ ({'fp16 + fp32 masters' if half else 'fp32'})", tolerance=2e-3)
    params = [rng.standard_normal(n).astype(np.float32) for n in sizes]
    grads = [rng.standard_normal(n).astype(np.float32) for n in sizes]
    bufs = [np.zeros(n, np.float32) for n in sizes]
    ours = [device(p) for p in params], [device(g) for g in grads], [device(b) for b in bufs]
    for step in range(2):
        cb.sgd_step_(*ours, 0.05, 0.9, 0.0, False, 0.0, step == 0)
        cpu.sgd_step_(params, grads, bufs, 0.05, 0.9, 0.0, False, 0.0, step == 0)
    for got, expected in zip(ours[0], params):
        close(got, expected, "sgd_step_ with momentum")


# ---------------------------------------------------------------------------------------------
# memory-bound kernels
def bandwidth_cases(cb, torch, bursts):
    """{contender: {case: seconds}} and {case: bytes moved}; every big operand >= BANDWIDTH_BYTES."""
    rng = np.random.default_rng(1)
    results = {"adcuda": {}}
    if torch is not None:
        results["torch"] = {}
    moved = {}

    def measure_dtype(dtype):
        """One dtype's cases (a function, so that each case's lambda binds this dtype's operands)."""
        adt = getattr(adcuda, dtype)
        size = 2 if dtype == "float16" else 4
        classes = 32768
        rows = BANDWIDTH_BYTES // (classes * size)
        ln_width = 768  # GPT-2's
        ln_rows = -(-BANDWIDTH_BYTES // (ln_width * size))
        x = cb.randn((rows, classes), adt, 1, 0)
        g = cb.randn((rows, classes), adt, 2, 0)
        target_host = rng.integers(0, classes, rows)
        target = cb.from_numpy(target_host, adcuda.int64)
        g_rows = cb.full((rows,), 1.0, adcuda.float32)  # the classifier's float32 row gradients
        y = cb.softmax(x, 1, False)
        _, stats = cb.classifier_loss(x, target, None, -100, 0.0)
        n = rows * classes
        cases = {
            f"softmax {dtype} {rows}x{classes}": (lambda: cb.softmax(x, 1, False), 2 * n * size),
            f"log_softmax {dtype}": (lambda: cb.softmax(x, 1, True), 2 * n * size),
            f"softmax backward {dtype}": (lambda: cb.softmax_backward(y, g, 1, False), 3 * n * size),
            # the fused classifier's forward reads the logits once (two float32 values per row is all it keeps)
            f"cross_entropy {dtype}": (lambda: cb.classifier_loss(x, target, None, -100, 0.0), n * size),
            f"cross_entropy backward {dtype}": (
                lambda: cb.classifier_loss_backward(x, stats, target, None, g_rows, -100, 0.0),
                2 * n * size,
            ),
        }
        ln_x = cb.randn((ln_rows, ln_width), adt, 3, 0)
        ln_g = cb.randn((ln_rows, ln_width), adt, 4, 0)
        ln_w = cb.randn((ln_width,), adt, 5, 0)
        ln_b = cb.randn((ln_width,), adt, 6, 0)
        _, ln_mean, ln_rstd = cb.layer_norm(ln_x, ln_w, ln_b, 1, 1e-5)
        m = ln_rows * ln_width
        cases[f"layer_norm {dtype} {ln_rows}x{ln_width}"] = (
            lambda: cb.layer_norm(ln_x, ln_w, ln_b, 1, 1e-5),
            2 * m * size,
        )
        cases[f"layer_norm backward {dtype}"] = (
            lambda: cb.layer_norm_backward(ln_g, ln_x, ln_w, ln_mean, ln_rstd, 1),
            3 * m * size,
        )
        _, rms_rstd = cb.rms_norm(ln_x, ln_w, 1, 1e-6)
        cases[f"rms_norm {dtype} {ln_rows}x{ln_width}"] = (lambda: cb.rms_norm(ln_x, ln_w, 1, 1e-6), 2 * m * size)
        cases[f"rms_norm backward {dtype}"] = (
            lambda: cb.rms_norm_backward(ln_g, ln_x, ln_w, rms_rstd, 1),
            3 * m * size,
        )
        # BatchNorm1d on (N, C) rows: x read by the statistics and again by the normalising pass, y written;
        # the backward reads g and x twice (sums, then dx) and writes dx
        _, bn_mean, bn_rstd = cb.batch_norm(ln_x, ln_w, ln_b, 1e-5)
        cases[f"batch_norm (N, C) {dtype} {ln_rows}x{ln_width}"] = (
            lambda: cb.batch_norm(ln_x, ln_w, ln_b, 1e-5),
            3 * m * size,
        )
        cases[f"batch_norm backward (N, C) {dtype}"] = (
            lambda: cb.batch_norm_backward(ln_g, ln_x, ln_w, bn_mean, bn_rstd),
            5 * m * size,
        )
        # GroupNorm(32, 256) over 32x32 feature maps: each (sample, group) row of 8 x 1024 read from DRAM
        # once (its second read hits L1/L2), y written; the backward reads g and x, writes dx
        gn_shape = (-(-BANDWIDTH_BYTES // (256 * 1024 * size)), 256, 32, 32)
        gn_x = cb.randn(gn_shape, adt, 7, 0)
        gn_g = cb.randn(gn_shape, adt, 8, 0)
        gn_w, gn_b = cb.randn((256,), adt, 9, 0), cb.randn((256,), adt, 10, 0)
        _, gn_mean, gn_rstd = cb.group_norm(gn_x, gn_w, gn_b, 32, 1e-5)
        gn_n = math.prod(gn_shape)
        cases[f"group_norm {dtype} {gn_shape}, 32 groups"] = (
            lambda: cb.group_norm(gn_x, gn_w, gn_b, 32, 1e-5),
            2 * gn_n * size,
        )
        cases[f"group_norm backward {dtype}"] = (
            lambda: cb.group_norm_backward(gn_g, gn_x, gn_w, gn_mean, gn_rstd, 32),
            3 * gn_n * size,
        )
        # average pooling of 64 x 64 planes: 2x2 windows read x once and write a quarter of it (the gather
        # backward the reverse); global (adaptive 1x1) pooling reads x once, its backward writes it once
        pool_shape = (-(-BANDWIDTH_BYTES // (64 * 64 * 64 * size)), 64, 64, 64)
        pool_x = cb.randn(pool_shape, adt, 11, 0)
        pool_g = cb.randn(pool_shape[:2] + (32, 32), adt, 12, 0)
        pool_g1 = cb.randn(pool_shape[:2] + (1, 1), adt, 13, 0)
        pool_n = math.prod(pool_shape)
        window = ((2, 2), (2, 2), (0, 0))
        cases[f"avg_pool2d 2x2 {dtype} {pool_shape}"] = (
            lambda: cb.avg_pool2d(pool_x, *window, (32, 32), True, None),
            pool_n * size * 5 // 4,
        )
        cases[f"avg_pool2d 2x2 backward {dtype}"] = (
            lambda: cb.avg_pool2d_backward(pool_g, pool_shape, *window, True, None),
            pool_n * size * 5 // 4,
        )
        cases[f"adaptive_avg_pool2d 1x1 {dtype}"] = (lambda: cb.adaptive_avg_pool2d(pool_x, (1, 1)), pool_n * size)
        cases[f"adaptive_avg_pool2d 1x1 backward {dtype}"] = (
            lambda: cb.adaptive_avg_pool2d_backward(pool_g1, pool_shape),
            pool_n * size,
        )
        # resampling the same 64 x 64 planes: 2x nearest and bilinear upsampling read x once and write four
        # times it (the gather backwards the reverse); reflect padding by 2 reads x and writes 68 x 68 planes
        up_g = cb.randn(pool_shape[:2] + (128, 128), adt, 14, 0)
        pad_g = cb.randn(pool_shape[:2] + (68, 68), adt, 15, 0)
        pad_n = pool_n // (64 * 64) * 68 * 68
        cases[f"interpolate nearest 2x {dtype} {pool_shape}"] = (
            lambda: cb.interpolate_nearest(pool_x, (128, 128), (0.5, 0.5), False),
            pool_n * size * 5,
        )
        cases[f"interpolate nearest 2x backward {dtype}"] = (
            lambda: cb.interpolate_nearest_backward(up_g, pool_shape, (0.5, 0.5), False),
            pool_n * size * 5,
        )
        cases[f"interpolate bilinear 2x {dtype}"] = (
            lambda: cb.interpolate_bilinear(pool_x, (128, 128), (0.5, 0.5), False),
            pool_n * size * 5,
        )
        cases[f"interpolate bilinear 2x backward {dtype}"] = (
            lambda: cb.interpolate_bilinear_backward(up_g, pool_shape, (0.5, 0.5), False),
            pool_n * size * 5,
        )
        cases[f"pad reflect 2 {dtype}"] = (lambda: cb.pad(pool_x, (2, 2, 2, 2), "reflect", 0), (pool_n + pad_n) * size)
        cases[f"pad reflect 2 backward {dtype}"] = (
            lambda: cb.pad_backward(pad_g, pool_shape, (2, 2, 2, 2), "reflect"),
            (pool_n + pad_n) * size,
        )
        for case, (fn, nbytes) in cases.items():
            moved[case] = nbytes
            results["adcuda"][case] = adcuda_event_seconds(fn, bursts, 10)
        if torch is not None:
            tdt = getattr(torch, dtype)
            tx = torch.randn(rows, classes, device="cuda", dtype=tdt)
            tg = torch.randn_like(tx)
            tt = torch.from_numpy(target_host).cuda()
            ty = torch.softmax(tx, 1)
            t_logp = torch.log_softmax(tx, 1)
            t_g_rows = torch.ones(rows, device="cuda", dtype=tdt)
            lx = torch.randn(ln_rows, ln_width, device="cuda", dtype=tdt)
            lg, lw, lb = (
                torch.randn_like(lx),
                torch.randn(ln_width, device="cuda", dtype=tdt),
                torch.randn(ln_width, device="cuda", dtype=tdt),
            )
            _, l_mean, l_rstd = torch.ops.aten.native_layer_norm(lx, [ln_width], lw, lb, 1e-5)
            aten = torch.ops.aten
            _, b_mean, b_invstd = aten.native_batch_norm(lx, lw, lb, None, None, True, 0.1, 1e-5)
            gx = torch.randn(gn_shape, device="cuda", dtype=tdt)
            gg = torch.randn_like(gx)
            gw, gb = torch.randn(256, device="cuda", dtype=tdt), torch.randn(256, device="cuda", dtype=tdt)
            _, g_mean, g_rstd = aten.native_group_norm(gx, gw, gb, gn_shape[0], 256, 1024, 32, 1e-5)
            px = torch.randn(pool_shape, device="cuda", dtype=tdt)
            pg = torch.randn(pool_shape[:2] + (32, 32), device="cuda", dtype=tdt)
            pg1 = torch.randn(pool_shape[:2] + (1, 1), device="cuda", dtype=tdt)
            torch_cases = {
                f"softmax {dtype} {rows}x{classes}": lambda: torch.softmax(tx, 1),
                f"log_softmax {dtype}": lambda: torch.log_softmax(tx, 1),
                f"softmax backward {dtype}": lambda: aten._softmax_backward_data(tg, ty, 1, tdt),
                f"cross_entropy {dtype}": lambda: torch.nn.functional.cross_entropy(tx, tt, reduction="none"),
                f"cross_entropy backward {dtype}": lambda: aten._log_softmax_backward_data(
                    aten.nll_loss_backward(t_g_rows, t_logp, tt, None, 0, -100, torch.tensor(1.0, device="cuda")),
                    t_logp,
                    1,
                    tdt,
                ),
                f"layer_norm {dtype} {ln_rows}x{ln_width}": lambda: torch.nn.functional.layer_norm(
                    lx, [ln_width], lw, lb
                ),
                f"layer_norm backward {dtype}": lambda: aten.native_layer_norm_backward(
                    lg, lx, [ln_width], l_mean, l_rstd, lw, lb, [True, True, True]
                ),
                f"rms_norm {dtype} {ln_rows}x{ln_width}": lambda: torch.nn.functional.rms_norm(
                    lx, [ln_width], lw, 1e-6
                ),
                f"batch_norm (N, C) {dtype} {ln_rows}x{ln_width}": lambda: aten.native_batch_norm(
                    lx, lw, lb, None, None, True, 0.1, 1e-5
                ),
                f"batch_norm backward (N, C) {dtype}": lambda: aten.native_batch_norm_backward(
                    lg, lx, lw, None, None, b_mean, b_invstd, True, 1e-5, [True, True, True]
                ),
                f"group_norm {dtype} {gn_shape}, 32 groups": lambda: aten.native_group_norm(
                    gx, gw, gb, gn_shape[0], 256, 1024, 32, 1e-5
                ),
                f"group_norm backward {dtype}": lambda: aten.native_group_norm_backward(
                    gg, gx, g_mean, g_rstd, gw, gn_shape[0], 256, 1024, 32, [True, True, True]
                ),
                f"avg_pool2d 2x2 {dtype} {pool_shape}": lambda: torch.nn.functional.avg_pool2d(px, 2),
                f"avg_pool2d 2x2 backward {dtype}": lambda: aten.avg_pool2d_backward(
                    pg, px, [2, 2], [2, 2], [0, 0], False, True, None
                ),
                f"adaptive_avg_pool2d 1x1 {dtype}": lambda: torch.nn.functional.adaptive_avg_pool2d(px, 1),
                f"adaptive_avg_pool2d 1x1 backward {dtype}": lambda: aten._adaptive_avg_pool2d_backward(pg1, px),
            }
            ug = torch.randn(pool_shape[:2] + (128, 128), device="cuda", dtype=tdt)
            padg = torch.randn(pool_shape[:2] + (68, 68), device="cuda", dtype=tdt)
            up, pad = torch.nn.functional.interpolate, torch.nn.functional.pad
            torch_cases.update(
                {
                    f"interpolate nearest 2x {dtype} {pool_shape}": lambda: up(px, scale_factor=2, mode="nearest"),
                    f"interpolate nearest 2x backward {dtype}": lambda: aten.upsample_nearest2d_backward(
                        ug, [128, 128], list(pool_shape), 2.0, 2.0
                    ),
                    f"interpolate bilinear 2x {dtype}": lambda: up(px, scale_factor=2, mode="bilinear"),
                    f"interpolate bilinear 2x backward {dtype}": lambda: aten.upsample_bilinear2d_backward(
                        ug, [128, 128], list(pool_shape), False, 2.0, 2.0
                    ),
                    f"pad reflect 2 {dtype}": lambda: pad(px, (2, 2, 2, 2), mode="reflect"),
                    f"pad reflect 2 backward {dtype}": lambda: aten.reflection_pad2d_backward(padg, px, [2, 2, 2, 2]),
                }
            )
            for case, fn in torch_cases.items():
                results["torch"][case] = framework_event_seconds(torch, fn, bursts, 10)

    for dtype in ("float16", "float32"):
        measure_dtype(dtype)
    return results, moved


# ---------------------------------------------------------------------------------------------
# embedding, global norm, optimizer steps, dropout
def gpt2_parameter_shapes(layers=12, vocab=50257, width=768, context=1024):
    """The parameter shapes of GPT-2 small (124M parameters with 12 layers): what clip_grad_norm_ and the
    optimizer see."""
    per_layer = [
        (width,),
        (width,),
        (width, 3 * width),
        (3 * width,),
        (width, width),
        (width,),
        (width,),
        (width,),
        (width, 4 * width),
        (4 * width,),
        (4 * width, width),
        (width,),
    ]
    return [(vocab, width), (context, width)] + per_layer * layers + [(width,), (width,)]


def optimizer_cases(cb, torch, shapes, bursts):
    """AdamW and SGD (momentum) steps over GPT-2's parameters: fp32, and fp16 with fp32 masters (AdamW).
    A step reads the parameter (or master), gradient and state and writes them back: 28 bytes per
    parameter for AdamW in both layouts (fp16: master 4 + grad 2 + m 4 + v 4 read, master 4 + m 4 + v 4 +
    param 2 written), 20 for SGD with momentum."""
    results, moved = {"adcuda": {}}, {}
    if torch is not None:
        results["torch"] = {}
    count = sum(int(np.prod(s)) for s in shapes)
    label = f"GPT-2 {count / 1e6:.0f}M params, {len(shapes)} tensors"
    f32 = adcuda.float32

    def arrays(dtype, seed, scale=1.0):
        out = [cb.randn(s, dtype, seed, i) for i, s in enumerate(shapes)]
        return [cb.binary("mul", a, scale, dtype) for a in out] if scale != 1.0 else out

    params, grads = arrays(f32, 11), arrays(f32, 12)
    m, v = arrays(f32, 13, 0.01), [cb.unary("abs", a) for a in arrays(f32, 14, 0.01)]
    half_params = [cb.astype(p, adcuda.float16) for p in params]
    half_grads = [cb.astype(g, adcuda.float16) for g in grads]
    masters = [cb.astype(p, f32) for p in half_params]
    half_m, half_v = [cb.astype(a, f32) for a in m], [cb.astype(a, f32) for a in v]
    bufs = [cb.astype(a, f32) for a in m]
    adam_args = (2, 1e-4, 0.9, 0.999, 1e-8, 0.01, True)
    cases = {
        f"adamw float32 {label}": (lambda: cb.adam_step_(params, grads, m, v, *adam_args, None), 28 * count),
        f"adamw float16 + fp32 masters {label}": (
            lambda: cb.adam_step_(half_params, half_grads, half_m, half_v, *adam_args, masters),
            28 * count,
        ),
        f"sgd momentum float32 {label}": (
            lambda: cb.sgd_step_(params, grads, bufs, 1e-4, 0.9, 0.0, False, 0.0, False),
            20 * count,
        ),
    }
    for case, (fn, nbytes) in cases.items():
        moved[case] = nbytes
        results["adcuda"][case] = adcuda_event_seconds(fn, bursts, 3)
    if torch is not None:
        t_params = [torch.nn.Parameter(torch.randn(s, device="cuda")) for s in shapes]
        for p in t_params:
            p.grad = torch.randn_like(p)
        adamw = torch.optim.AdamW(t_params, lr=1e-4, weight_decay=0.01, fused=True)
        sgd = torch.optim.SGD(t_params, lr=1e-4, momentum=0.9, foreach=True)
        adamw.step()
        sgd.step()  # the states exist before the timing
        results["torch"][f"adamw float32 {label}"] = framework_event_seconds(torch, adamw.step, bursts, 3)
        results["torch"][f"sgd momentum float32 {label}"] = framework_event_seconds(torch, sgd.step, bursts, 3)
    return results, moved


def embedding_norm_dropout_cases(cb, torch, bursts):
    """{contender: {case: seconds}} and {case: bytes moved}."""
    vocab, width = 50257, 768
    rng = np.random.default_rng(4)
    results = {"adcuda": {}}
    if torch is not None:
        results["torch"] = {}
    moved = {}
    shapes = gpt2_parameter_shapes()

    def measure_dtype(dtype):
        """One dtype's cases (a function, so that each case's lambda binds this dtype's operands)."""
        adt = getattr(adcuda, dtype)
        size = 2 if dtype == "float16" else 4
        tokens = BANDWIDTH_BYTES // (width * size)  # the gathered rows fill 256 MiB
        dropout_n = BANDWIDTH_BYTES // size
        idx_host = rng.integers(0, vocab, tokens)
        idx = cb.from_numpy(idx_host, adcuda.int64)
        weight = cb.randn((vocab, width), adt, 1, 0)
        grad_rows = cb.randn((tokens, width), adt, 2, 0)
        grads = [cb.randn(s, adt, 3, i) for i, s in enumerate(shapes)]
        elements = sum(int(np.prod(s)) for s in shapes)
        x = cb.randn((dropout_n,), adt, 4, 0)
        mask = cb.dropout(x, 0.1, 0, 0)[1]
        label = f"{vocab}x{width}, {tokens} tokens"
        cases = {
            f"embedding {dtype} {label}": (lambda: cb.embedding(weight, idx), 2 * tokens * width * size + 8 * tokens),
            # the dense gradient is written whole; the gradient rows and the indices are read
            f"embedding backward {dtype} {label}": (
                lambda: cb.embedding_backward(grad_rows, idx, vocab, None, False),
                (vocab + tokens) * width * size + 8 * tokens,
            ),
            f"global_norm {dtype} GPT-2, {len(shapes)} tensors": (lambda: cb.global_norm(grads, 2.0), elements * size),
            f"dropout {dtype} {dropout_n} elements": (lambda: cb.dropout(x, 0.1, 0, 0), dropout_n * (2 * size + 1)),
            f"dropout backward {dtype}": (lambda: cb.dropout_backward(x, mask, 1 / 0.9), dropout_n * (2 * size + 1)),
        }
        for case, (fn, nbytes) in cases.items():
            moved[case] = nbytes
            results["adcuda"][case] = adcuda_event_seconds(fn, bursts, 10)
        if torch is not None:
            tdt = getattr(torch, dtype)
            t_idx = torch.from_numpy(idx_host).cuda()
            t_weight = torch.randn(vocab, width, device="cuda", dtype=tdt)
            t_grad_rows = torch.randn(tokens, width, device="cuda", dtype=tdt)
            t_grads = [torch.randn(s, device="cuda", dtype=tdt) for s in shapes]
            t_x = torch.randn(dropout_n, device="cuda", dtype=tdt)
            _, t_mask = torch.ops.aten.native_dropout(t_x, 0.1, True)
            aten = torch.ops.aten
            torch_cases = {
                f"embedding {dtype} {label}": lambda: torch.nn.functional.embedding(t_idx, t_weight),
                f"embedding backward {dtype} {label}": lambda: aten.embedding_dense_backward(
                    t_grad_rows, t_idx, vocab, -1, False
                ),
                # what torch.nn.utils.clip_grad_norm_ computes: per-tensor norms, then the norm of those
                f"global_norm {dtype} GPT-2, {len(shapes)} tensors": lambda: torch.linalg.vector_norm(
                    torch.stack(torch._foreach_norm(t_grads, 2.0)), 2.0
                ),
                f"dropout {dtype} {dropout_n} elements": lambda: aten.native_dropout(t_x, 0.1, True),
                f"dropout backward {dtype}": lambda: aten.native_dropout_backward(t_x, t_mask, 1 / 0.9),
            }
            for case, fn in torch_cases.items():
                results["torch"][case] = framework_event_seconds(torch, fn, bursts, 10)

    for dtype in ("float16", "float32"):
        measure_dtype(dtype)
    steps, steps_moved = optimizer_cases(cb, torch, shapes, bursts)
    for name, times in steps.items():
        results.setdefault(name, {}).update(times)
    moved.update(steps_moved)
    return results, moved


def print_bandwidth(results, moved, copy_rate):
    """GB/s of each case: adcuda's, as a share of the copy bandwidth, and torch's; -> {case: record}."""
    print("\nGB/s (adcuda as % of the copy bandwidth; torch alongside):")
    records = {}
    for case, seconds in results["adcuda"].items():
        records[case] = {
            "bytes": moved[case],
            "seconds": seconds,
            "percent_of_copy": percent_of_copy(moved[case], seconds, copy_rate),
        }
        line = f"  {case:<62} adcuda {format_bandwidth(moved[case], seconds, copy_rate)}"
        theirs = results.get("torch", {}).get(case)
        if theirs:
            line += f"   torch {moved[case] / theirs / 1e9:8.1f} GB/s (adcuda/torch time {seconds / theirs:4.2f}x)"
        print(line)
    return records


# ---------------------------------------------------------------------------------------------
# attention
def attention_cases(cb, torch, quick, bursts):
    batch, heads, length, dim = (2, 8, 512, 64) if quick else (4, 12, 1024, 64)
    rng = np.random.default_rng(2)
    host = [rng.standard_normal((batch, heads, length, dim)).astype(np.float32) for _ in range(4)]
    results = {"adcuda": {}}
    flops = {}
    scale = 1.0 / math.sqrt(dim)
    q, k, v, g = (cb.from_numpy(h, adcuda.float16) for h in host)

    def measure_causal(causal):
        """One mask setting's cases (a function, so that each lambda binds its own ``causal``)."""
        label = f"B{batch} H{heads} L{length} D{dim} fp16{' causal' if causal else ''}"
        forward_flops = 4.0 * batch * heads * length * length * dim * (0.5 if causal else 1.0)
        flops[f"attention {label}"] = forward_flops
        flops[f"attention fwd+bwd {label}"] = 3.5 * forward_flops  # backward: 2.5x the forward's products
        out, lse = cb.attention(q, k, v, None, causal, scale)
        results["adcuda"][f"attention {label}"] = adcuda_event_seconds(
            lambda: cb.attention(q, k, v, None, causal, scale), bursts, 3
        )
        results["adcuda"][f"attention fwd+bwd {label}"] = adcuda_event_seconds(
            lambda: (
                cb.attention(q, k, v, None, causal, scale),
                cb.attention_backward(g, q, k, v, out, lse, None, causal, scale),
            ),
            bursts,
            3,
        )
        if torch is not None:
            results.setdefault("torch", {})
            tq, tk, tv, tg = (torch.from_numpy(h).cuda().half().requires_grad_() for h in host)
            sdpa = torch.nn.functional.scaled_dot_product_attention
            with torch.no_grad():
                results["torch"][f"attention {label}"] = framework_event_seconds(
                    torch, lambda: sdpa(tq, tk, tv, is_causal=causal), bursts, 3
                )

            def forward_backward():
                sdpa(tq, tk, tv, is_causal=causal).backward(tg)

            results["torch"][f"attention fwd+bwd {label}"] = framework_event_seconds(torch, forward_backward, bursts, 3)

    for causal in (False, True):
        measure_causal(causal)
    return results, flops


# ---------------------------------------------------------------------------------------------
# training steps
def torch_models(torch):
    nn, F = torch.nn, torch.nn.functional

    class Block(nn.Module):
        def __init__(self, d_model, n_heads):
            super().__init__()
            self.n_heads = n_heads
            self.ln1, self.ln2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
            self.qkv, self.proj = nn.Linear(d_model, 3 * d_model), nn.Linear(d_model, d_model)
            self.mlp = nn.Sequential(
                nn.Linear(d_model, 4 * d_model), nn.GELU(approximate="tanh"), nn.Linear(4 * d_model, d_model)
            )

        def forward(self, x):
            batch, length, width = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(width, dim=2)
            q, k, v = (t.view(batch, length, self.n_heads, width // self.n_heads).transpose(1, 2) for t in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(y.transpose(1, 2).reshape(batch, length, width))
            return x + self.mlp(self.ln2(x))

    class GPT(nn.Module):
        def __init__(self, vocab_size, block_size, d_model, n_layers, n_heads):
            super().__init__()
            self.tok_emb, self.pos_emb = nn.Embedding(vocab_size, d_model), nn.Embedding(block_size, d_model)
            self.blocks = nn.ModuleList([Block(d_model, n_heads) for _ in range(n_layers)])
            self.ln_f = nn.LayerNorm(d_model)
            self.head = nn.Linear(d_model, vocab_size, bias=False)
            self.head.weight = self.tok_emb.weight

        def forward(self, ids):
            x = self.tok_emb(ids) + self.pos_emb(torch.arange(ids.shape[1], device=ids.device))
            for block in self.blocks:
                x = block(x)
            return self.head(self.ln_f(x))

    def mlp(sizes):
        layers = []
        for a, b in zip(sizes[:-2], sizes[1:-1]):
            layers += [nn.Linear(a, b), nn.GELU()]
        return nn.Sequential(*layers, nn.Linear(sizes[-2], sizes[-1]))

    return mlp, GPT


def training_cases(torch, quick, bursts):
    from adcuda import nn as anf
    from adcuda.train.chars import BLOCK_SIZE, MODEL
    from adcuda.train.digits import HIDDEN
    from adcuda.train.models import GPT, MLP

    vocab = 96
    rng = np.random.default_rng(3)
    mlp_batch, gpt_batch = 256, 32
    x_host = rng.standard_normal((mlp_batch, 64)).astype(np.float32)
    y_host = rng.integers(0, 10, mlp_batch)
    ids_host = rng.integers(0, vocab, (gpt_batch, BLOCK_SIZE + 1))
    gpt_config = {k: v for k, v in MODEL.items() if k != "dropout"}
    steps = 5 if quick else 10
    results = {"adcuda": {}}
    labels = {
        "mlp": f"MLP 64-{'-'.join(map(str, HIDDEN))}-10 step, batch {mlp_batch}",
        "gpt": f"GPT {gpt_config} step, batch {gpt_batch}x{BLOCK_SIZE}",
    }

    adcuda.manual_seed(0)
    mlp = MLP(64, HIDDEN, 10).to("cuda")
    gpt = GPT(vocab, BLOCK_SIZE, **MODEL).to("cuda")
    x, y = adcuda.tensor(x_host, device="cuda"), adcuda.tensor(y_host, device="cuda")
    ids = adcuda.tensor(ids_host, device="cuda")
    for key, model, batch in (("mlp", mlp, (x, y)), ("gpt", gpt, (ids[:, :-1], ids[:, 1:]))):
        optimizer = adcuda.optim.AdamW(model.parameters(), lr=1e-3)

        def step(model=model, batch=batch, optimizer=optimizer):
            logits = model(batch[0])
            loss = anf.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), batch[1].reshape(-1))
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()

        results["adcuda"][labels[key]] = adcuda_event_seconds(step, bursts, steps)

    if torch is not None:
        results["torch"] = {}
        make_mlp, TorchGPT = torch_models(torch)
        torch.manual_seed(0)
        t_mlp = make_mlp((64,) + tuple(HIDDEN) + (10,)).cuda()
        t_gpt = TorchGPT(vocab, BLOCK_SIZE, **gpt_config).cuda()
        tx, ty = torch.from_numpy(x_host).cuda(), torch.from_numpy(y_host).cuda()
        t_ids = torch.from_numpy(ids_host).cuda()
        for key, model, batch in (("mlp", t_mlp, (tx, ty)), ("gpt", t_gpt, (t_ids[:, :-1], t_ids[:, 1:]))):
            optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)

            def step(model=model, batch=batch, optimizer=optimizer):
                logits = model(batch[0])
                loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), batch[1].reshape(-1))
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                optimizer.step()

            results["torch"][labels[key]] = framework_event_seconds(torch, step, bursts, steps)
    return results


def main():
    args = gpu_suite_args("nn_kernels", __doc__, "fewer bursts (the bandwidth arrays stay 256 MiB)")
    if args is None:
        return 0
    from adcuda.backends import cpu
    from adcuda.backends import cuda as cb

    if is_emulated():
        return emulated_reference_run("nn_kernels", args.json, [lambda: check_against_cpu(cb, cpu)])
    torch = optional_cuda_torch()
    check_against_cpu(cb, cpu)
    bursts = 3 if args.quick else 7
    copy_rate = copy_bandwidth(bursts=bursts)
    print(f"device-to-device copy of {BANDWIDTH_BYTES >> 20} MiB float32: {copy_rate / 1e9:.1f} GB/s (the yardstick)")

    results, moved = bandwidth_cases(cb, torch, bursts)
    rows = print_table(
        f"memory-bound kernels on {adcuda.cuda.get_device_name()} (time per call)", results, unit="us", scale=1e6
    )
    bandwidth = print_bandwidth(results, moved, copy_rate)
    # each section kept as soon as it is done
    write_bandwidth_json(args.json, "nn_kernels", rows, moved, copy_rate, bandwidth)

    fused, fused_moved = embedding_norm_dropout_cases(cb, torch, bursts)
    rows += print_table("embedding, global norm, optimizer steps, dropout (time per call)", fused, unit="us", scale=1e6)
    bandwidth.update(print_bandwidth(fused, fused_moved, copy_rate))
    moved.update(fused_moved)
    write_bandwidth_json(args.json, "nn_kernels", rows, moved, copy_rate, bandwidth)

    attention, attention_flops = attention_cases(cb, torch, args.quick, bursts)
    rows += print_table("attention (time per call)", attention, unit="ms", scale=1e3)
    print("\nattention TFLOP/s:")
    for case, seconds in attention["adcuda"].items():
        line = f"  {case:<52} adcuda {attention_flops[case] / seconds / 1e12:7.2f}"
        theirs = attention.get("torch", {}).get(case)
        if theirs:
            line += f"   torch {attention_flops[case] / theirs / 1e12:7.2f}"
        print(line)
    write_bandwidth_json(args.json, "nn_kernels", rows, moved, copy_rate, bandwidth)

    steps = training_cases(torch, args.quick, bursts)
    rows += print_table(
        "training step: forward + cross-entropy + backward + AdamW (time per step)", steps, unit="ms", scale=1e3
    )
    write_bandwidth_json(args.json, "nn_kernels", rows, moved, copy_rate, bandwidth)
    return 0


if __name__ == "__main__":
    sys.exit(main())
