"""A small GPT (a decoder-only transformer) that writes like Python's help() topics, character by character.

    python examples/gpt.py                        # 1500 steps: ~1.8 bits per character, ~2.5 min on one core
    python examples/gpt.py --quick                # 30 steps, a few seconds on one CPU core
    python examples/gpt.py --device cpu

Built from PyTorch's own modules: ``nn.TransformerEncoder`` layers under a causal mask are a GPT's
blocks (pre-norm, GELU). The code is what a PyTorch user writes: with ``import torch`` in place of
``import adcuda as torch`` it runs unchanged; only the bundled text comes from ``adcuda.data``.
"""

import argparse
import math

import adcuda as torch
import adcuda.nn as nn
import adcuda.nn.functional as F
from adcuda.data import load_chars_corpus


class GPT(nn.Module):
    def __init__(self, vocab_size, block_size=64, width=96, heads=4, layers=3, dropout=0.0):
        super().__init__()
        self.block_size = block_size
        self.tok_emb = nn.Embedding(vocab_size, width)
        self.pos_emb = nn.Embedding(block_size, width)
        layer = nn.TransformerEncoderLayer(
            width,
            heads,
            dim_feedforward=4 * width,
            dropout=dropout,
            activation="gelu",
            batch_first=True,
            norm_first=True,
        )
        self.blocks = nn.TransformerEncoder(layer, num_layers=layers)
        self.ln_f = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab_size, bias=False)

    def forward(self, ids):
        T = ids.shape[1]
        x = self.tok_emb(ids) + self.pos_emb(torch.arange(T, device=ids.device))
        mask = nn.Transformer.generate_square_subsequent_mask(T, device=ids.device)
        x = self.blocks(x, mask=mask, is_causal=True)
        return self.head(self.ln_f(x))


def random_batch(ids, batch_size, block_size, device):
    starts = torch.randint(0, len(ids) - block_size - 1, (batch_size,)).tolist()
    x = torch.stack([ids[s : s + block_size] for s in starts])
    y = torch.stack([ids[s + 1 : s + block_size + 1] for s in starts])
    return x.to(device), y.to(device)


@torch.no_grad()
def bits_per_char(model, ids, block_size, device, max_chars):
    """Mean cross-entropy in bits over consecutive windows of the first ``max_chars`` of ``ids``."""
    model.eval()
    total, count = 0.0, 0
    starts = list(range(0, min(len(ids), max_chars) - block_size - 1, block_size))
    for i in range(0, len(starts), 64):
        x = torch.stack([ids[s : s + block_size] for s in starts[i : i + 64]]).to(device)
        y = torch.stack([ids[s + 1 : s + block_size + 1] for s in starts[i : i + 64]]).to(device)
        logits = model(x)
        total += F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1), reduction="sum").item()
        count += y.numel()
    model.train()
    return total / count / math.log(2)


@torch.no_grad()
def generate(model, corpus, prompt, length, device, temperature=0.8):
    model.eval()
    ids = torch.tensor([corpus.encode(prompt)], device=device)
    for _ in range(length):
        logits = model(ids[:, -model.block_size :])[:, -1] / temperature
        next_id = torch.multinomial(F.softmax(logits, dim=-1), num_samples=1)
        ids = torch.cat([ids, next_id], dim=1)
    model.train()
    return corpus.decode(ids[0].tolist())


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--steps", type=int, default=1500)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="a 2-layer model for 30 steps: a smoke run")
    args = parser.parse_args()
    torch.manual_seed(args.seed)
    device = torch.device(args.device)

    corpus = load_chars_corpus()
    if args.quick:
        args.steps, args.batch_size = 30, 16
        model = GPT(corpus.vocab_size, block_size=32, width=64, layers=2)
    else:
        model = GPT(corpus.vocab_size)
    model.to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=args.steps)
    eval_chars = 20_000 if args.quick else 200_000
    print(
        f"device {device}, vocabulary {corpus.vocab_size} (a uniform guess: "
        f"{math.log2(corpus.vocab_size):.2f} bits per character), "
        f"{sum(p.numel() for p in model.parameters()):,} parameters"
    )
    print(
        f"validation bits per character before training: "
        f"{bits_per_char(model, corpus.val, model.block_size, device, eval_chars):.3f}"
    )

    for step in range(1, args.steps + 1):
        x, y = random_batch(corpus.train, args.batch_size, model.block_size, device)
        logits = model(x)
        loss = F.cross_entropy(logits.view(-1, logits.shape[-1]), y.view(-1))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        if step % max(1, args.steps // 10) == 0:
            print(f"step {step:5d}  loss {loss.item():.4f}")

    print(
        f"validation bits per character: {bits_per_char(model, corpus.val, model.block_size, device, eval_chars):.3f}"
    )
    print("sample:", repr(generate(model, corpus, "The ", 120 if not args.quick else 40, device)))


if __name__ == "__main__":
    main()
