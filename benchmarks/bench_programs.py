"""Real programs' eager CPU speed: one training step of small models written as users write them,
adcuda vs PyTorch CPU eager, each contender in its own process with one thread (BLAS and PyTorch's
intra-op pool pinned to ``BENCH_THREADS``, default 1). Times are each process's CPU time
(``time.process_time``), so that other work on a shared machine does not count; with one thread
that is the step's time on an idle machine.

- GPT: a nanoGPT-style decoder (token and position embeddings, 2 pre-norm blocks of causal
  self-attention and an exact-GELU MLP, 64 wide, 4 heads, block 32, batch 8, vocabulary 65),
  cross-entropy loss, backward, AdamW step.
- LSTM language model: embedding 64, one LSTM layer of 128, vocabulary 100, batch 16, 32 time steps
  (batch_first), cross-entropy over every step, backward, Adam step.
- LeNet-5: conv 5x5 (6) - ReLU - max-pool 2 - conv 5x5 (16) - ReLU - max-pool 2 - 120 - 84 - 10 on
  1x32x32 images, batch 64, cross-entropy, backward, SGD with momentum.
- CIFAR ResNet: conv 3x3 (16) - BN - ReLU, then basic blocks (conv3x3-BN-ReLU-conv3x3-BN + identity
  or a strided 1x1 conv-BN shortcut, ReLU): 16 -> 32 (stride 2) -> 32 channels, global average pool,
  linear 10, on 3x32x32 images, batch 32, cross-entropy, backward, SGD with momentum and weight decay.
- DCGAN: the pytorch/examples DCGAN at 32x32 (latent 32, 32 feature maps, 3 channels): a generator of
  ConvTranspose2d-BN-ReLU stages ending in Tanh, a discriminator of Conv2d-BN-LeakyReLU stages ending
  in a Sigmoid, batch 32, BCE loss; one step updates D on a real and a fake batch, then G, both Adam.
- Word LSTM LM: pytorch/examples word_language_model at a small size (vocabulary 1000, embedding and
  hidden 128 with tied weights, 2 LSTM layers, dropout 0.2, bptt 35, batch 20, sequence-first), the
  hidden state carried and detached between steps, cross-entropy, backward, gradient clipping, SGD.

``--before PYTHON`` adds the adcuda that another interpreter imports (the virtual environment of
another checkout) as a third contender: before/after ratios from one run; ``--rounds N`` runs the
contenders N times in turn and keeps each case's best.

    python benchmarks/bench_programs.py [--quick] [--threads N] [--rounds N] [--before PYTHON] [--cases NAME,...]
        [--json out.json]
"""

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _harness import (  # noqa: E402
    BEFORE,
    contender_main,
    parse_suite_args,
    print_before_after,
    print_ms_table,
    run_contenders_under_load,
    single_thread_env,
    suite_parser,
    write_report,
)
from _models import lenet5, training_step  # noqa: E402

GPT = dict(vocab=65, block=32, width=64, heads=4, layers=2, batch=8)
GPT_CASE = "GPT step (2x64, block 32, batch 8)"
LSTM = dict(vocab=100, embed=64, hidden=128, batch=16, steps=32)
LSTM_CASE = "LSTM LM step (64-128, T 32, b 16)"
LENET_BATCH = 64
LENET_CASE = "LeNet-5 step (1x32x32, batch 64)"
RESNET_BATCH = 32
RESNET_CASE = "CIFAR ResNet step (16/32 ch, batch 32)"
DCGAN = dict(latent=32, features=32, channels=3, batch=32)
DCGAN_CASE = "DCGAN step (32x32, batch 32)"
WORD_LM = dict(vocab=1000, width=128, layers=2, dropout=0.2, bptt=35, batch=20)
WORD_LM_CASE = "word LSTM LM step (2x128, T 35, b 20)"


def _gpt_step(lib):
    """The model is defined with ``lib``'s nn API exactly as a PyTorch user would write it."""
    nn, F = lib.nn, lib.nn.functional
    cfg = GPT

    class CausalSelfAttention(nn.Module):
        def __init__(self):
            super().__init__()
            self.c_attn = nn.Linear(cfg["width"], 3 * cfg["width"])
            self.c_proj = nn.Linear(cfg["width"], cfg["width"])

        def forward(self, x):
            B, T, C = x.shape
            q, k, v = self.c_attn(x).split(C, dim=2)
            q, k, v = (t.view(B, T, cfg["heads"], C // cfg["heads"]).transpose(1, 2) for t in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1 = nn.LayerNorm(cfg["width"])
            self.attn = CausalSelfAttention()
            self.ln_2 = nn.LayerNorm(cfg["width"])
            self.mlp = nn.Sequential(
                nn.Linear(cfg["width"], 4 * cfg["width"]), nn.GELU(), nn.Linear(4 * cfg["width"], cfg["width"])
            )

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            return x + self.mlp(self.ln_2(x))

    class GPTModel(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(cfg["vocab"], cfg["width"])
            self.wpe = nn.Embedding(cfg["block"], cfg["width"])
            self.blocks = nn.ModuleList([Block() for _ in range(cfg["layers"])])
            self.ln_f = nn.LayerNorm(cfg["width"])
            self.lm_head = nn.Linear(cfg["width"], cfg["vocab"], bias=False)

        def forward(self, idx, targets):
            B, T = idx.shape
            x = self.wte(idx) + self.wpe(lib.arange(T))
            for block in self.blocks:
                x = block(x)
            logits = self.lm_head(self.ln_f(x))
            return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1))

    import numpy as np

    lib.manual_seed(0)
    model = GPTModel()
    opt = lib.optim.AdamW(model.parameters(), lr=1e-3)
    rng = np.random.default_rng(0)
    tokens = rng.integers(0, cfg["vocab"], (cfg["batch"], cfg["block"] + 1))
    idx, targets = lib.tensor(tokens[:, :-1]), lib.tensor(tokens[:, 1:])

    return training_step(opt, lambda: model(idx, targets))


def _lstm_step(lib):
    nn, F = lib.nn, lib.nn.functional
    cfg = LSTM

    class CharLSTM(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(cfg["vocab"], cfg["embed"])
            self.lstm = nn.LSTM(cfg["embed"], cfg["hidden"], batch_first=True)
            self.head = nn.Linear(cfg["hidden"], cfg["vocab"])

        def forward(self, ids):
            out, _ = self.lstm(self.embed(ids))
            return self.head(out)

    import numpy as np

    lib.manual_seed(0)
    model = CharLSTM()
    opt = lib.optim.Adam(model.parameters(), lr=1e-3)
    rng = np.random.default_rng(0)
    tokens = rng.integers(0, cfg["vocab"], (cfg["batch"], cfg["steps"] + 1))
    idx, targets = lib.tensor(tokens[:, :-1]), lib.tensor(tokens[:, 1:])

    return training_step(opt, lambda: F.cross_entropy(model(idx).reshape(-1, cfg["vocab"]), targets.reshape(-1)))


def _image_classifier_step(lib, model, opt, images_shape):
    """A cross-entropy step of ``model`` on one fixed batch of random images and labels of 10 classes."""
    import numpy as np

    rng = np.random.default_rng(0)
    images = lib.tensor(rng.standard_normal(images_shape).astype(np.float32))
    labels = lib.tensor(rng.integers(0, 10, images_shape[0]))
    return training_step(opt, lambda: lib.nn.functional.cross_entropy(model(images), labels))


def _lenet_step(lib):
    lib.manual_seed(0)
    model = lenet5(lib.nn)
    opt = lib.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    return _image_classifier_step(lib, model, opt, (LENET_BATCH, 1, 32, 32))


def _resnet_step(lib):
    nn, F = lib.nn, lib.nn.functional

    class BasicBlock(nn.Module):
        def __init__(self, in_planes, planes, stride=1):
            super().__init__()
            self.conv1 = nn.Conv2d(in_planes, planes, 3, stride=stride, padding=1, bias=False)
            self.bn1 = nn.BatchNorm2d(planes)
            self.conv2 = nn.Conv2d(planes, planes, 3, stride=1, padding=1, bias=False)
            self.bn2 = nn.BatchNorm2d(planes)
            self.shortcut = nn.Sequential()
            if stride != 1 or in_planes != planes:
                self.shortcut = nn.Sequential(
                    nn.Conv2d(in_planes, planes, 1, stride=stride, bias=False), nn.BatchNorm2d(planes)
                )

        def forward(self, x):
            out = F.relu(self.bn1(self.conv1(x)))
            out = self.bn2(self.conv2(out))
            return F.relu(out + self.shortcut(x))

    class ResNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(3, 16, 3, padding=1, bias=False)
            self.bn1 = nn.BatchNorm2d(16)
            self.layer1 = BasicBlock(16, 16)
            self.layer2 = BasicBlock(16, 32, stride=2)
            self.layer3 = BasicBlock(32, 32)
            self.linear = nn.Linear(32, 10)

        def forward(self, x):
            out = F.relu(self.bn1(self.conv1(x)))
            out = self.layer3(self.layer2(self.layer1(out)))
            out = F.adaptive_avg_pool2d(out, 1).flatten(1)
            return self.linear(out)

    lib.manual_seed(0)
    model = ResNet()
    opt = lib.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-4)
    return _image_classifier_step(lib, model, opt, (RESNET_BATCH, 3, 32, 32))


def _dcgan_step(lib):
    nn = lib.nn
    import numpy as np

    nz, nf, nc, batch = DCGAN["latent"], DCGAN["features"], DCGAN["channels"], DCGAN["batch"]

    class Generator(nn.Module):
        def __init__(self):
            super().__init__()
            self.main = nn.Sequential(
                nn.ConvTranspose2d(nz, nf * 4, 4, 1, 0, bias=False),  # 1 -> 4
                nn.BatchNorm2d(nf * 4),
                nn.ReLU(True),
                nn.ConvTranspose2d(nf * 4, nf * 2, 4, 2, 1, bias=False),  # -> 8
                nn.BatchNorm2d(nf * 2),
                nn.ReLU(True),
                nn.ConvTranspose2d(nf * 2, nf, 4, 2, 1, bias=False),  # -> 16
                nn.BatchNorm2d(nf),
                nn.ReLU(True),
                nn.ConvTranspose2d(nf, nc, 4, 2, 1, bias=False),  # -> 32
                nn.Tanh(),
            )

        def forward(self, z):
            return self.main(z)

    class Discriminator(nn.Module):
        def __init__(self):
            super().__init__()
            self.main = nn.Sequential(
                nn.Conv2d(nc, nf, 4, 2, 1, bias=False),  # 32 -> 16
                nn.LeakyReLU(0.2, inplace=True),
                nn.Conv2d(nf, nf * 2, 4, 2, 1, bias=False),  # -> 8
                nn.BatchNorm2d(nf * 2),
                nn.LeakyReLU(0.2, inplace=True),
                nn.Conv2d(nf * 2, nf * 4, 4, 2, 1, bias=False),  # -> 4
                nn.BatchNorm2d(nf * 4),
                nn.LeakyReLU(0.2, inplace=True),
                nn.Conv2d(nf * 4, 1, 4, 1, 0, bias=False),  # -> 1
                nn.Sigmoid(),
            )

        def forward(self, x):
            return self.main(x).view(-1, 1).squeeze(1)

    lib.manual_seed(0)
    net_g, net_d = Generator(), Discriminator()
    criterion = nn.BCELoss()
    opt_d = lib.optim.Adam(net_d.parameters(), lr=2e-4, betas=(0.5, 0.999))
    opt_g = lib.optim.Adam(net_g.parameters(), lr=2e-4, betas=(0.5, 0.999))
    rng = np.random.default_rng(0)
    real = lib.tensor(rng.uniform(-1, 1, (batch, nc, 32, 32)).astype(np.float32))
    noise = lib.tensor(rng.standard_normal((batch, nz, 1, 1)).astype(np.float32))
    ones, zeros = lib.full((batch,), 1.0), lib.full((batch,), 0.0)

    def step():
        net_d.zero_grad()
        err_real = criterion(net_d(real), ones)
        err_real.backward()
        fake = net_g(noise)
        err_fake = criterion(net_d(fake.detach()), zeros)
        err_fake.backward()
        opt_d.step()
        net_g.zero_grad()
        err_g = criterion(net_d(fake), ones)
        err_g.backward()
        opt_g.step()
        return err_g

    return step


def _word_lm_step(lib):
    nn, F = lib.nn, lib.nn.functional
    import numpy as np

    cfg = WORD_LM

    class RNNModel(nn.Module):
        def __init__(self):
            super().__init__()
            self.drop = nn.Dropout(cfg["dropout"])
            self.encoder = nn.Embedding(cfg["vocab"], cfg["width"])
            self.rnn = nn.LSTM(cfg["width"], cfg["width"], cfg["layers"], dropout=cfg["dropout"])
            self.decoder = nn.Linear(cfg["width"], cfg["vocab"])
            self.decoder.weight = self.encoder.weight  # tied
            nn.init.uniform_(self.encoder.weight, -0.1, 0.1)
            nn.init.zeros_(self.decoder.bias)

        def forward(self, ids, hidden):
            emb = self.drop(self.encoder(ids))
            output, hidden = self.rnn(emb, hidden)
            output = self.drop(output)
            decoded = self.decoder(output).view(-1, cfg["vocab"])
            return F.log_softmax(decoded, dim=1), hidden

        def init_hidden(self, batch):
            weight = next(self.parameters())
            shape = (cfg["layers"], batch, cfg["width"])
            return weight.new_zeros(shape), weight.new_zeros(shape)

    lib.manual_seed(0)
    model = RNNModel()
    model.train()
    criterion = nn.NLLLoss()
    rng = np.random.default_rng(0)
    tokens = rng.integers(0, cfg["vocab"], (cfg["bptt"] + 1, cfg["batch"]))
    data, targets = lib.tensor(tokens[:-1]), lib.tensor(tokens[1:]).reshape(-1)
    state = {"hidden": model.init_hidden(cfg["batch"])}
    lr = 20.0

    def step():
        hidden = tuple(h.detach() for h in state["hidden"])
        model.zero_grad()
        output, state["hidden"] = model(data, hidden)
        loss = criterion(output, targets)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 0.25)
        with lib.no_grad():
            for p in model.parameters():
                p.add_(p.grad, alpha=-lr)
        return loss

    return step


def _cases(lib):
    """The selected cases' steps (``BENCH_CASES``: comma-separated words that the case names start
    with, case-blind; all when unset, ``--cases`` sets it for every contender's process)."""
    builders = {
        GPT_CASE: _gpt_step,
        LSTM_CASE: _lstm_step,
        LENET_CASE: _lenet_step,
        RESNET_CASE: _resnet_step,
        DCGAN_CASE: _dcgan_step,
        WORD_LM_CASE: _word_lm_step,
    }
    words = [w.strip().lower() for w in os.environ.get("BENCH_CASES", "").split(",") if w.strip()]
    return {
        name: build(lib)
        for name, build in builders.items()
        if not words or any(name.lower().startswith(w) for w in words)
    }


def cases_for(contender, quick=False):
    threads = single_thread_env()
    if contender == "torch":
        import torch

        torch.set_num_threads(threads)
        return _cases(torch)
    import adcuda

    return _cases(adcuda)


def main():
    parser = suite_parser(__doc__)
    parser.add_argument("--rounds", type=int, default=1, help="runs per contender, taking turns; the best counts")
    parser.add_argument("--before", metavar="PYTHON", help="also time the adcuda this interpreter imports")
    parser.add_argument("--cases", metavar="NAME,...", help="only the cases whose names start so (e.g. dcgan,cifar)")
    args = parse_suite_args(parser)
    if args.cases:
        os.environ["BENCH_CASES"] = args.cases
    results, load = run_contenders_under_load(
        os.path.abspath(__file__),
        ["adcuda", "torch"],
        ["--quick"] if args.quick else [],
        args.rounds,
        interpreters={BEFORE: (args.before, "adcuda")} if args.before else None,
    )
    rows = print_ms_table(
        "Training steps of small programs, eager CPU", {k: v for k, v in results.items() if k != BEFORE}
    )
    if BEFORE in results:
        print_before_after(results, unit="ms", scale=1e3)
    print(load)
    write_report(args.json, {"suite": "programs", "rows": rows})


if __name__ == "__main__":
    if "--contender" in sys.argv:
        contender_main(cases_for, clock=time.process_time)
    else:
        main()
