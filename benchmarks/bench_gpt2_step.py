"""A GPT-2-small bf16 training step in adcuda against the same model in PyTorch eager, on one GPU.

    python benchmarks/bench_gpt2_step.py [--quick] [--json out.json]

The model is GPT-2 small (124M parameters: 12 nanoGPT-style pre-LayerNorm blocks, 12 heads, width 768,
1024 positions, the 50257-token vocabulary, GELU(tanh), causal scaled_dot_product_attention, the LM
head tied to the token embedding), written once below against the names adcuda shares with PyTorch
and built with each framework's own public modules, so both run the same model; adcuda's blocks fuse
each residual add with the layer norm after it (``adcuda.ops.norm.add_layer_norm``: one pass each way,
the normalised output written in bf16 under autocast), where PyTorch runs the two ops. PyTorch's copy starts
from adcuda's initial weights. One step: zero_grad, forward under autocast(bf16) with float32 weights,
cross-entropy over the vocabulary (a float32 loss under autocast in both: adcuda reads the bf16 logits as
they are, PyTorch casts them to float32), backward, the gradient-norm clip at 1.0, AdamW (lr 6e-4, betas
(0.9, 0.95), weight decay 0.1 on the matrices only). adcuda's AdamW always steps a parameter group
with one fused multi-tensor kernel (its foreach/fused flags are accepted and change nothing), which
also applies the clip coefficient (``optimizer.clip_grad_norm_``: no separate pass over the gradients)
and writes the bf16 working copy of every weight that autocast reads from the second step on (no
per-step cast of the weights; docs/mixed-precision.md); PyTorch's runs with fused=True after
``clip_grad_norm_``. Batch 8 x 1024 tokens, in full and in --quick mode (which times fewer
steps).

Reported: ms per step (CUDA-event medians over bursts of steps, after warmup steps), tokens/s, the
adcuda/torch time ratio, each framework's peak allocated memory over the steps, and the SDPA backend
PyTorch ran (flash when it runs on this GPU, else the first of efficient / cuDNN / math that does; it
is pinned with sdpa_kernel for the whole step). Target on an H200: adcuda's throughput >= 1.0x
PyTorch eager's. Then the step's classifier alone (cross-entropy forward + backward over the (8192,
50257) bf16 logits under autocast), each with its peak memory above the logits: adcuda's fused
classifier (the logits read in bf16, the gradient written in bf16), adcuda's unfused path as it was (a
float32 copy of the logits, the loss and gradient in float32, the gradient cast back) and PyTorch's
autocast cross-entropy (float32 inside).

Before timing, a tiny configuration (2 layers, width 64, vocabulary 97, batch 2 x 16 tokens) trains 3
steps on the GPU under bf16 autocast and on the CPU backend in float32 from the same weights and batch;
the losses must be finite and agree within bf16 tolerance (and PyTorch's CPU copy of the same model,
where torch is installed, must agree with adcuda's CPU losses to float32 rounding). At full size the
first step's losses of adcuda and PyTorch, from the same weights and batch, must agree too. The
benchmark stops if a check is off. Needs a GPU; elsewhere it says so and exits 0. In the emulated build
only the tiny check runs (no timing).
"""

import contextlib
import json
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np  # noqa: E402
from _harness import cuda_event_seconds, emulated_reference_run, gpu_suite_args, is_emulated, print_table  # noqa: E402
from bench_attention import torch_sdpa_backend  # noqa: E402

import adcuda  # noqa: E402

GPT2_SMALL = {"vocab": 50257, "positions": 1024, "layers": 12, "heads": 12, "width": 768}
TINY = {"vocab": 97, "positions": 16, "layers": 2, "heads": 2, "width": 64}
BATCH, LENGTH = 8, 1024
TINY_BATCH, TINY_STEPS = 2, 3
# AdamW as nanoGPT trains GPT-2 small
LEARNING_RATE, BETAS, WEIGHT_DECAY = 6e-4, (0.9, 0.95), 0.1
GRAD_CLIP = 1.0  # nanoGPT's gradient-norm clip
# Relative difference allowed between a bf16-autocast loss and the float32 loss: bf16 keeps 8 bits of
# mantissa (a relative rounding of 2^-9 per value), and a few steps of AdamW compound it a little.
BF16_LOSS_RTOL = 2e-2


def optional_torch(device):
    """PyTorch when it is installed (and, for "cuda", sees a GPU); else None."""
    try:
        import torch
    except ImportError:
        return None
    return torch if device == "cpu" or torch.cuda.is_available() else None


# ---------------------------------------------------------------------------------------------
# the model, for either framework
def gpt2(lib, config):
    """GPT-2 built from ``lib.nn`` (``lib`` is adcuda or torch), on the CPU, in float32. Its own
    initialisation is GPT-2's (normal(0, 0.02), residual projections scaled by 1/sqrt(2 * layers)),
    drawn from ``lib``'s generator; ``copy_weights`` overwrites it where the same weights are wanted."""
    nn, F = lib.nn, lib.nn.functional
    width, heads = config["width"], config["heads"]
    # adcuda fuses each residual add with the layer norm after it (one pass each way, the normalised
    # output in bf16 under autocast); PyTorch has no such op and runs the two
    fused = adcuda.ops.norm.add_layer_norm if lib is adcuda else None

    def add_norm(branch, residual, norm):
        """(norm(residual + branch), residual + branch)."""
        if fused is not None:
            return fused(branch, residual, norm.normalized_shape, norm.weight, norm.bias, norm.eps)
        h = residual + branch
        return norm(h), h

    class CausalSelfAttention(nn.Module):
        def __init__(self):
            super().__init__()
            self.c_attn = nn.Linear(width, 3 * width)
            self.c_proj = nn.Linear(width, width)

        def forward(self, x):
            batch, length, _ = x.shape
            q, k, v = self.c_attn(x).split(width, dim=2)
            # (batch, heads, length, head_dim): each head attends over the sequence on its own
            q, k, v = (t.view(batch, length, heads, width // heads).transpose(1, 2) for t in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return self.c_proj(y.transpose(1, 2).reshape(batch, length, width))

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.c_fc = nn.Linear(width, 4 * width)
            self.gelu = nn.GELU(approximate="tanh")
            self.c_proj = nn.Linear(4 * width, width)

        def forward(self, x):
            return self.c_proj(self.gelu(self.c_fc(x)))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1 = nn.LayerNorm(width)
            self.attn = CausalSelfAttention()
            self.ln_2 = nn.LayerNorm(width)
            self.mlp = MLP()

        def forward(self, x, branch=None):
            """x: the residual stream; branch: the previous block's MLP output, not yet added to it (so
            that the add fuses with ln_1). -> (the stream, this block's MLP output)."""
            y, x = (self.ln_1(x), x) if branch is None else add_norm(branch, x, self.ln_1)
            y, x = add_norm(self.attn(y), x, self.ln_2)
            return x, self.mlp(y)

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(config["vocab"], width)
            self.wpe = nn.Embedding(config["positions"], width)
            self.h = nn.ModuleList([Block() for _ in range(config["layers"])])
            self.ln_f = nn.LayerNorm(width)
            self.lm_head = nn.Linear(width, config["vocab"], bias=False)
            self.lm_head.weight = self.wte.weight
            for name, parameter in self.named_parameters():
                if name.endswith("bias"):
                    nn.init.zeros_(parameter)
                elif parameter.dim() == 2:
                    std = 0.02 / math.sqrt(2 * config["layers"]) if name.endswith("c_proj.weight") else 0.02
                    nn.init.normal_(parameter, mean=0.0, std=std)

        def forward(self, ids):
            positions = lib.arange(ids.shape[1], device=ids.device)
            x, branch = self.wte(ids) + self.wpe(positions), None
            for block in self.h:
                x, branch = block(x, branch)
            y, _ = add_norm(branch, x, self.ln_f)
            return self.lm_head(y)

    return GPT()


def weights_of(model):
    """The model's state as float32 NumPy arrays, by name."""
    return {name: np.array(t.detach().cpu().float().numpy()) for name, t in model.state_dict().items()}


def copy_weights(lib, model, weights):
    model.load_state_dict({name: lib.tensor(array) for name, array in weights.items()})


def adamw(lib, model):
    """AdamW with weight decay on the matrices (embeddings and linear weights) only, as nanoGPT does."""
    parameters = list(model.parameters())
    groups = [
        {"params": [p for p in parameters if p.dim() >= 2], "weight_decay": WEIGHT_DECAY},
        {"params": [p for p in parameters if p.dim() < 2], "weight_decay": 0.0},
    ]
    # fused=True asks PyTorch for its fused kernel; adcuda's AdamW is one fused multi-tensor step per
    # group whatever the flag says
    return lib.optim.AdamW(groups, lr=LEARNING_RATE, betas=BETAS, fused=True)


def training_step(lib, model, optimizer, inputs, targets, autocast_dtype):
    """A callable running one training step and returning its loss (a device tensor, not synchronised);
    under autocast(``autocast_dtype``) on the GPU, in float32 when it is None."""
    F = lib.nn.functional
    vocab = model.lm_head.out_features

    def step():
        optimizer.zero_grad(set_to_none=True)
        with lib.amp.autocast("cuda", dtype=autocast_dtype) if autocast_dtype else contextlib.nullcontext():
            logits = model(inputs)
            loss = F.cross_entropy(logits.view(-1, vocab), targets.reshape(-1))
        loss.backward()
        if lib is adcuda:
            # the clip coefficient is applied inside AdamW's multi-tensor kernel (no separate pass)
            optimizer.clip_grad_norm_(GRAD_CLIP)
        else:
            lib.nn.utils.clip_grad_norm_(model.parameters(), GRAD_CLIP)
        optimizer.step()
        return loss

    return step


def token_batch(config, batch, length, seed=0):
    """(inputs, targets) as int64 NumPy arrays: random tokens, the targets shifted by one."""
    tokens = np.random.default_rng(seed).integers(0, config["vocab"], (batch, length + 1), dtype=np.int64)
    return tokens[:, :-1].copy(), tokens[:, 1:].copy()


def train_losses(lib, model, batch, device, autocast_dtype, steps):
    """The losses of ``steps`` training steps of ``model`` (moved to ``device``) on one batch."""
    model.to(device)
    inputs, targets = (lib.tensor(a).to(device) for a in batch)
    step = training_step(lib, model, adamw(lib, model), inputs, targets, autocast_dtype)
    return [float(step().item()) for _ in range(steps)]


def losses_agree(got, expected, rtol):
    return all(math.isfinite(g) and abs(g - e) <= rtol * max(1.0, abs(e)) for g, e in zip(got, expected))


# ---------------------------------------------------------------------------------------------
# reference check
def check_tiny_against_cpu():
    """The tiny configuration trains on the GPU under bf16 autocast and on the CPU in float32 from the
    same weights and batch: its losses must be finite and agree within bf16 tolerance; PyTorch's CPU
    copy of the model (where torch is installed) must give adcuda's CPU losses to float32 rounding."""
    adcuda.manual_seed(0)
    reference = gpt2(adcuda, TINY)
    weights = weights_of(reference)
    batch = token_batch(TINY, TINY_BATCH, TINY["positions"])
    expected = train_losses(adcuda, reference, batch, "cpu", None, TINY_STEPS)
    on_gpu = gpt2(adcuda, TINY)
    copy_weights(adcuda, on_gpu, weights)
    got = train_losses(adcuda, on_gpu, batch, "cuda", adcuda.bfloat16, TINY_STEPS)
    if not losses_agree(got, expected, BF16_LOSS_RTOL):
        raise SystemExit(
            f"reference check failed: the tiny GPT's losses on the GPU under bf16 autocast {got} "
            f"are not those on the CPU in float32 {expected}"
        )
    if not expected[-1] < expected[0]:
        raise SystemExit(
            f"reference check failed: {TINY_STEPS} AdamW steps on one batch did not lower the loss ({expected})"
        )
    torch = optional_torch("cpu")
    theirs = ""
    if torch is not None:
        twin = gpt2(torch, TINY)
        copy_weights(torch, twin, weights)
        torch_losses = train_losses(torch, twin, batch, "cpu", None, TINY_STEPS)
        if not losses_agree(torch_losses, expected, 1e-4):
            raise SystemExit(
                f"reference check failed: PyTorch's copy of the tiny GPT trains to {torch_losses}, "
                f"adcuda's to {expected} (the two models differ)"
            )
        theirs = "; PyTorch's copy on the CPU matches"
    print(
        f"reference check: the tiny GPT's {TINY_STEPS} bf16 steps on the GPU {[round(x, 4) for x in got]} match "
        f"the CPU's float32 steps {[round(x, 4) for x in expected]}{theirs}"
    )


# ---------------------------------------------------------------------------------------------
# timing
def event_timer(framework):
    """``cuda_event_seconds`` with ``framework``'s events (adcuda's and torch's have the same API)."""

    def record():
        event = framework.cuda.Event(enable_timing=True)
        event.record()
        return event

    def seconds(fn, bursts, per_burst):
        return cuda_event_seconds(
            record, framework.cuda.synchronize, lambda s, e: s.elapsed_time(e), fn, bursts, per_burst
        )

    return seconds


def measure(lib, weights, batch, bursts, per_burst, sdpa_context):
    """(seconds per step, first step's loss, peak bytes allocated over the steps) of the full model in
    ``lib`` from ``weights``."""
    model = gpt2(lib, GPT2_SMALL)
    copy_weights(lib, model, weights)
    model.to("cuda")
    inputs, targets = (lib.tensor(a).to("cuda") for a in batch)
    step = training_step(lib, model, adamw(lib, model), inputs, targets, lib.bfloat16)
    lib.cuda.synchronize()
    lib.cuda.reset_peak_memory_stats()
    with sdpa_context():
        first_loss = float(step().item())
        seconds = event_timer(lib)(step, bursts, per_burst)
    peak = lib.cuda.max_memory_allocated()
    del model, step, inputs, targets
    lib.cuda.empty_cache()
    return seconds, first_loss, peak


def classifier_step(lib, logits, targets, unfused):
    """One cross-entropy forward + backward over ``logits`` (bf16, a leaf) under bf16 autocast; ``unfused``
    casts the logits to float32 first (what autocast's float32 policy did before the fused classifier)."""
    F = lib.nn.functional

    def step():
        logits.grad = None
        with lib.amp.autocast("cuda", dtype=lib.bfloat16):
            loss = F.cross_entropy(logits.float() if unfused else logits, targets)
        loss.backward()
        return loss

    return step


def measure_classifier(lib, batch, vocab, bursts, per_burst, unfused=False):
    """(seconds per classifier step, peak bytes allocated above the logits and targets) on the LM head's
    (B*T, vocab) bf16 logits."""
    lib.manual_seed(1)
    logits = lib.randn((batch[0].size, vocab), device="cuda", dtype=lib.bfloat16).requires_grad_()
    targets = lib.tensor(batch[1].reshape(-1), device="cuda")
    step = classifier_step(lib, logits, targets, unfused)
    step()
    lib.cuda.synchronize()
    base = lib.cuda.memory_allocated()
    lib.cuda.reset_peak_memory_stats()
    seconds = event_timer(lib)(step, bursts, per_burst)
    peak = lib.cuda.max_memory_allocated() - base
    del logits, targets, step
    lib.cuda.empty_cache()
    return seconds, peak


def main():
    args = gpu_suite_args("gpt2_step", __doc__, "the same model and batch, fewer timed steps")
    if args is None:
        return 0
    if is_emulated():  # the rehearsal: the tiny check, no timing
        return emulated_reference_run("gpt2_step", args.json, [check_tiny_against_cpu])
    check_tiny_against_cpu()
    # warmup: the first step, then cuda_event_seconds' 3; then bursts x per_burst timed steps
    bursts, per_burst = (2, 1) if args.quick else (5, 2)
    adcuda.manual_seed(0)
    weights = weights_of(gpt2(adcuda, GPT2_SMALL))
    batch = token_batch(GPT2_SMALL, BATCH, LENGTH)
    results, peaks, first_losses = {}, {}, {}
    seconds, first_losses["adcuda"], peaks["adcuda"] = measure(
        adcuda, weights, batch, bursts, per_burst, contextlib.nullcontext
    )
    results["adcuda"] = {"gpt2-small bf16 step": seconds}
    torch = optional_torch("cuda")
    backend = None
    if torch is not None:
        head_dim = GPT2_SMALL["width"] // GPT2_SMALL["heads"]
        probe = torch.zeros((BATCH, GPT2_SMALL["heads"], LENGTH, head_dim), device="cuda", dtype=torch.bfloat16)
        backend, sdpa_context = torch_sdpa_backend(torch, probe)
        del probe
        seconds, first_losses["torch"], peaks["torch"] = measure(torch, weights, batch, bursts, per_burst, sdpa_context)
        results["torch"] = {"gpt2-small bf16 step": seconds}
        if not losses_agree([first_losses["adcuda"]], [first_losses["torch"]], BF16_LOSS_RTOL):
            raise SystemExit(
                f"the first step's losses differ: adcuda {first_losses['adcuda']:.4f}, "
                f"torch {first_losses['torch']:.4f} (same weights and batch)"
            )
    classifier_case = f"cross-entropy fwd+bwd {BATCH * LENGTH}x{GPT2_SMALL['vocab']} bf16"
    classifier, classifier_peaks = {}, {}
    for who, framework, unfused in (
        ("adcuda", adcuda, False),
        ("adcuda unfused", adcuda, True),
        ("torch", torch, False),
    ):
        if framework is not None:
            seconds, classifier_peaks[who] = measure_classifier(
                framework, batch, GPT2_SMALL["vocab"], bursts, per_burst, unfused
            )
            classifier[who] = {classifier_case: seconds}
    parameters = sum(w.size for name, w in weights.items() if name != "lm_head.weight")
    tokens = BATCH * LENGTH
    title = (
        f"GPT-2 small ({parameters / 1e6:.0f}M parameters) bf16 training step, B={BATCH} T={LENGTH}, on "
        f"{adcuda.cuda.get_device_name()} (time per step)"
    )
    rows = print_table(title, results, unit="ms", scale=1e3)
    print(
        "\nAdamW: adcuda's fused multi-tensor step (always)"
        + (f"; torch fused=True. PyTorch SDPA backend: {backend}" if backend else "; PyTorch not installed or no GPU")
    )
    for who, cases in results.items():
        seconds = cases["gpt2-small bf16 step"]
        print(
            f"  {who:<7} {seconds * 1e3:9.1f} ms/step  {tokens / seconds:12,.0f} tokens/s  "
            f"peak memory {peaks[who] / 2**30:6.2f} GiB  first loss {first_losses[who]:.4f}"
        )
    if "torch" in results:
        share = results["torch"]["gpt2-small bf16 step"] / results["adcuda"]["gpt2-small bf16 step"]
        print(f"  adcuda throughput / torch throughput: {share:.2f}x (target >= 1.0x)")
    classifier_rows = print_table(
        "The step's classifier alone: fused (bf16 logits read twice, gradient written once) vs the float32 "
        "copy it replaces vs PyTorch",
        classifier,
        unit="ms",
        scale=1e3,
    )
    for who, peak in classifier_peaks.items():
        print(f"  {who:<15} peak memory above the logits {peak / 2**30:6.2f} GiB")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(
                {
                    "suite": "gpt2_step",
                    "device": "cuda",
                    # the classifier's rows with the step's: gpu_check's summary tabulates every row
                    "rows": rows + classifier_rows,
                    "config": GPT2_SMALL,
                    "batch": BATCH,
                    "length": LENGTH,
                    "parameters": parameters,
                    "timed_steps": bursts * per_burst,
                    "tokens_per_second": {
                        who: tokens / cases["gpt2-small bf16 step"] for who, cases in results.items()
                    },
                    "peak_memory_bytes": peaks,
                    "classifier_peak_memory_bytes": classifier_peaks,
                    "first_step_loss": first_losses,
                    "torch_sdpa_backend": backend,
                    "optimizers": {"adcuda": "AdamW, fused multi-tensor (always)", "torch": "AdamW(fused=True)"},
                },
                f,
                indent=2,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
