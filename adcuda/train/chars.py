"""``--task chars``: a small GPT that predicts the next character of Python's help() topics."""

import math

from .. import data as bundled
from .. import random as adcuda_random
from ..dtypes import int64
from ..factories import rand, tensor, zeros
from ..nn import functional as F
from ..ops.layout import stack
from ..utils.data import DataLoader, Dataset, RandomSampler
from .checkpoint import CheckpointMismatch
from .models import GPT
from .parallel import RankShare

BLOCK_SIZE = 64
MODEL = {"d_model": 96, "n_layers": 3, "n_heads": 4, "dropout": 0.0}
# an "epoch" here is a fixed number of steps on random windows (a pass over all windows would be hours)
STEPS_PER_EPOCH = 100
# validation and the final evaluation use non-overlapping windows of the held-out text
VAL_WINDOWS_PER_EPOCH = 128
EVAL_BATCH = 64
SAMPLE_PROMPT = "The "
SAMPLE_LENGTH = 240
SAMPLE_TEMPERATURE = 0.8


class CharWindows(Dataset):
    """Window ``i``: ``ids[i:i+block]`` as input and the same window shifted by one as target."""

    def __init__(self, ids, block_size):
        if len(ids) <= block_size:
            raise ValueError(f"CharWindows: text of {len(ids)} characters is too short for block size {block_size}")
        self.ids = ids
        self.block_size = block_size

    def __len__(self):
        return len(self.ids) - self.block_size

    def __getitem__(self, i):
        return self.ids[i : i + self.block_size], self.ids[i + 1 : i + self.block_size + 1]


def sample(model, corpus, prompt, length, temperature, generator, device):
    """Continue ``prompt`` by ``length`` characters, each drawn from the model's distribution sharpened
    by ``temperature``, with uniforms from ``generator``."""
    ids = corpus.encode(prompt)
    for _ in range(length):
        context = tensor([ids[-model.block_size :]], device=device)
        logits = model(context)[0, -1] / temperature
        cumulative = F.softmax(logits, dim=-1).cumsum(0)
        u = rand(1, generator=generator).to(device)
        # the first index whose cumulative probability passes u (clamped against rounding at the top)
        ids.append(min(int((cumulative < u).sum().item()), corpus.vocab_size - 1))
    return corpus.decode(ids)


class CharsTask:
    name = "chars"
    # 7 epochs (700 steps, the cosine decaying over all of them) reach about 2.06 bits per character on
    # the whole held-out text with ~105 s of CPU time; 3 epochs stopped at 2.70, and a peak rate of 1e-2
    # learned more slowly than 5e-3
    defaults = {"epochs": 7, "batch_size": 32, "lr": 5e-3}

    def __init__(self, seed):
        self.seed = seed
        self.corpus = bundled.load_chars_corpus()
        self.train_windows = CharWindows(self.corpus.train, BLOCK_SIZE)
        starts = range(0, len(self.corpus.val) - BLOCK_SIZE - 1, BLOCK_SIZE)
        self.val_starts = list(starts)

    def describe(self):
        return (
            f"next character of Python's help() topics ({len(self.corpus.train):,} train / "
            f"{len(self.corpus.val):,} held-out characters, vocabulary {self.corpus.vocab_size}), GPT with "
            f"{MODEL['n_layers']} layers of width {MODEL['d_model']}, block {BLOCK_SIZE}"
        )

    def build_model(self):
        return GPT(self.corpus.vocab_size, BLOCK_SIZE, **MODEL)

    def example_input(self, batch_size):
        """What the model takes, for tracing it (``adcuda export``): ``batch_size`` windows of character ids."""
        return zeros(batch_size, BLOCK_SIZE, dtype=int64)

    def train_loader(self, batch_size, generator, num_workers, world=None):
        """``STEPS_PER_EPOCH`` batches of ``batch_size`` random windows; with ``world`` (a distributed run)
        every rank draws the windows of all ranks alike and trains on its own share of them."""
        ranks = 1 if world is None else world.size
        sampler = RandomSampler(
            self.train_windows, replacement=True, num_samples=STEPS_PER_EPOCH * batch_size * ranks, generator=generator
        )
        if world is not None:
            sampler = RankShare(sampler, world)
        return DataLoader(
            self.train_windows,
            batch_size=batch_size,
            sampler=sampler,
            drop_last=True,
            generator=generator,
            num_workers=num_workers,
            persistent_workers=num_workers > 0,
        )

    def training_loss(self, model, batch):
        x, y = batch
        logits = model(x)
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), y.view(-1))

    def _held_out_loss(self, model, starts, device):
        total, count = 0.0, 0
        val = self.corpus.val
        for first in range(0, len(starts), EVAL_BATCH):
            chunk = starts[first : first + EVAL_BATCH]
            x = stack([val[s : s + BLOCK_SIZE] for s in chunk]).to(device)
            y = stack([val[s + 1 : s + BLOCK_SIZE + 1] for s in chunk]).to(device)
            logits = model(x)
            loss = F.cross_entropy(logits.view(-1, logits.shape[-1]), y.view(-1), reduction="sum")
            total += loss.item()
            count += y.numel()
        return total / count

    def _epoch_starts(self):
        """Every epoch's validation: an evenly spread subset of the held-out windows, the same each time."""
        stride = max(1, len(self.val_starts) // VAL_WINDOWS_PER_EPOCH)
        return self.val_starts[::stride]

    def validation_note(self):
        epoch, every = len(self._epoch_starts()), len(self.val_starts)
        return (
            f"per-epoch val: {epoch} of the {every} held-out windows ({epoch * BLOCK_SIZE:,} characters); "
            f"the final evaluation: all {every} ({every * BLOCK_SIZE:,} characters)"
        )

    def evaluate(self, model, split, device):
        loss = self._held_out_loss(model, self._epoch_starts(), device)
        return {"loss": loss, "bits_per_char": loss / math.log(2)}

    def checkpoint_extra(self):
        return {"vocab": "".join(self.corpus.vocab)}

    def check_checkpoint(self, extra):
        if extra.get("vocab") != "".join(self.corpus.vocab):
            raise CheckpointMismatch(
                "--resume: the checkpoint was trained on another character vocabulary (a "
                "different Python's help() topics); start a new run with another --out"
            )

    def final_report(self, model, config, reporter):
        loss = self._held_out_loss(model, self.val_starts, config.device)
        generator = adcuda_random.Generator().manual_seed(config.seed)
        text = sample(model, self.corpus, SAMPLE_PROMPT, SAMPLE_LENGTH, SAMPLE_TEMPERATURE, generator, config.device)
        characters = len(self.val_starts) * BLOCK_SIZE
        reporter.result(f"sample (temperature {SAMPLE_TEMPERATURE}, seed {config.seed}):")
        reporter.result(text)
        reporter.result(f"held-out bits per char: {loss / math.log(2):.3f} (all {characters:,} held-out characters)")
        reporter.result(f"held-out loss: {loss:.4f} (nats per character, the same set)")
        return {"val_loss": loss, "val_bits_per_char": loss / math.log(2), "sample": text}
