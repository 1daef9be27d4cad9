"""A character-level LSTM language model on Python's help() topics (the text that ships with CPython).

    python examples/lstm_chars.py                 # 1500 steps: ~1.9 bits per character, ~1 min on one core
    python examples/lstm_chars.py --quick         # 40 steps, a few seconds on one CPU core
    python examples/lstm_chars.py --device cpu

The code is what a PyTorch user writes: with ``import torch`` in place of ``import adcuda as torch`` it
runs unchanged; only the bundled text comes from ``adcuda.data``.
"""

import argparse
import math

import adcuda as torch
import adcuda.nn as nn
import adcuda.nn.functional as F
from adcuda.data import load_chars_corpus


class CharLSTM(nn.Module):
    def __init__(self, vocab_size, embed=64, hidden=128, layers=1):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, embed)
        self.lstm = nn.LSTM(embed, hidden, num_layers=layers, batch_first=True)
        self.head = nn.Linear(hidden, vocab_size)

    def forward(self, ids, state=None):
        out, state = self.lstm(self.embed(ids), state)
        return self.head(out), state


def random_batch(ids, batch_size, seq_len, device):
    starts = torch.randint(0, len(ids) - seq_len - 1, (batch_size,))
    x = torch.stack([ids[s : s + seq_len] for s in starts.tolist()])
    y = torch.stack([ids[s + 1 : s + seq_len + 1] for s in starts.tolist()])
    return x.to(device), y.to(device)


def bits_per_char(model, ids, seq_len, device, max_chars):
    """Mean cross-entropy in bits over consecutive windows of the first ``max_chars`` of ``ids``."""
    model.eval()
    total, count = 0.0, 0
    with torch.no_grad():
        starts = list(range(0, min(len(ids), max_chars) - seq_len - 1, seq_len))
        for i in range(0, len(starts), 64):
            x = torch.stack([ids[s : s + seq_len] for s in starts[i : i + 64]]).to(device)
            y = torch.stack([ids[s + 1 : s + seq_len + 1] for s in starts[i : i + 64]]).to(device)
            logits, _ = model(x)
            total += F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1), reduction="sum").item()
            count += y.numel()
    model.train()
    return total / count / math.log(2)


def generate(model, corpus, prompt, length, device, temperature=0.8):
    """Feed the prompt, then draw one character at a time, carrying the LSTM state along."""
    model.eval()
    ids = corpus.encode(prompt)
    with torch.no_grad():
        logits, state = model(torch.tensor([ids], device=device))
        for _ in range(length):
            probs = F.softmax(logits[0, -1] / temperature, dim=-1)
            next_id = torch.multinomial(probs, num_samples=1).item()
            ids.append(next_id)
            logits, state = model(torch.tensor([[next_id]], device=device), state)
    model.train()
    return corpus.decode(ids)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--steps", type=int, default=1500)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--seq-len", type=int, default=64)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="40 steps: a smoke run of a few seconds")
    args = parser.parse_args()
    if args.quick:
        args.steps, args.batch_size, args.seq_len = 40, 16, 32
    torch.manual_seed(args.seed)
    device = torch.device(args.device)

    corpus = load_chars_corpus()
    model = CharLSTM(corpus.vocab_size).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    eval_chars = 20_000 if args.quick else 200_000
    print(
        f"device {device}, vocabulary {corpus.vocab_size} (a uniform guess: "
        f"{math.log2(corpus.vocab_size):.2f} bits per character)"
    )
    print(
        f"validation bits per character before training: "
        f"{bits_per_char(model, corpus.val, args.seq_len, device, eval_chars):.3f}"
    )

    for step in range(1, args.steps + 1):
        x, y = random_batch(corpus.train, args.batch_size, args.seq_len, device)
        logits, _ = model(x)
        loss = F.cross_entropy(logits.reshape(-1, corpus.vocab_size), y.reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        if step % max(1, args.steps // 10) == 0:
            print(f"step {step:5d}  loss {loss.item():.4f}")

    print(f"validation bits per character: {bits_per_char(model, corpus.val, args.seq_len, device, eval_chars):.3f}")
    print("sample:", repr(generate(model, corpus, "The ", 120 if not args.quick else 40, device)))


if __name__ == "__main__":
    main()
