"""Training end to end: a PyTorch-style script on the bundled digits, checkpoints that resume exactly,
memory that stays flat, and the ``adcuda.train`` loop behind ``adcuda train``."""

import gc
import math
import os
import sys

import pytest
from training_helpers import StopAfterEpoch

import adcuda as torch
import adcuda.data
import adcuda.nn as nn
import adcuda.nn.functional as F
from adcuda.train import TASKS, TrainConfig, train
from adcuda.train import chars as chars_task
from adcuda.utils.data import DataLoader, TensorDataset, random_split


def digits_splits(seed=0):
    images, labels = adcuda.data.load_digits()
    return random_split(TensorDataset(images, labels), [0.8, 0.2], generator=torch.Generator().manual_seed(seed))


def stack_subset(subset):
    xs, ys = zip(*(subset[i] for i in range(len(subset))))
    return torch.stack(xs), torch.stack(ys)


def make_model():
    return nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Dropout(0.1), nn.Linear(128, 10))


def train_epochs(model, optimizer, scheduler, loader, epochs):
    for _ in range(epochs):
        model.train()
        for x, y in loader:
            loss = F.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
            optimizer.step()
            scheduler.step()


def test_load_digits_shapes_and_ranges():
    images, labels = adcuda.data.load_digits()
    assert images.shape == (1797, 64) and images.dtype is torch.float32
    assert labels.shape == (1797,) and labels.dtype is torch.int64
    assert images.min().item() == 0.0 and images.max().item() == 1.0
    assert sorted(set(labels.tolist())) == list(range(10))
    assert labels[:10].tolist() == list(range(10))


def test_pytorch_style_script_learns_digits_and_reloads(tmp_path):
    torch.manual_seed(0)
    train_set, test_set = digits_splits()
    loader = DataLoader(train_set, batch_size=32, shuffle=True)
    model = make_model()
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=1e-2)
    epochs = 10
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=epochs * len(loader))
    train_epochs(model, optimizer, scheduler, loader, epochs)

    model.eval()
    x_test, y_test = stack_subset(test_set)
    with torch.no_grad():
        predictions = model(x_test).argmax(dim=1)
    accuracy = (predictions == y_test).float().mean().item()
    assert accuracy >= 0.95, f"held-out accuracy {accuracy:.3f}"

    path = tmp_path / "model.pt"
    torch.save(model.state_dict(), path)
    reloaded = make_model()
    reloaded.load_state_dict(torch.load(path))
    reloaded.eval()
    with torch.no_grad():
        assert reloaded(x_test).tolist() == model(x_test).tolist()


def run_with_checkpoint(tmp_path, epochs_before_save, total_epochs):
    """Train ``total_epochs``; if ``epochs_before_save`` is smaller, stop there, save everything, rebuild
    every object from scratch (with other random weights) and continue from the file."""
    train_set, _ = digits_splits()
    small = torch.utils.data.Subset(train_set, list(range(256)))

    def build(init_seed):
        torch.manual_seed(init_seed)
        model = make_model()
        optimizer = torch.optim.AdamW(model.parameters(), lr=2e-3)
        scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=total_epochs * 8)
        generator = torch.Generator().manual_seed(1)
        loader = DataLoader(small, batch_size=32, shuffle=True, generator=generator)
        return model, optimizer, scheduler, generator, loader

    model, optimizer, scheduler, generator, loader = build(init_seed=0)
    torch.manual_seed(5)
    train_epochs(model, optimizer, scheduler, loader, epochs_before_save)
    if epochs_before_save < total_epochs:
        path = tmp_path / "checkpoint.pt"
        torch.save(
            {
                "model": model.state_dict(),
                "optimizer": optimizer.state_dict(),
                "scheduler": scheduler.state_dict(),
                "rng": list(torch.get_rng_state()),
                "loader_rng": list(generator.get_state()),
            },
            path,
        )
        model, optimizer, scheduler, generator, loader = build(init_seed=99)
        state = torch.load(path)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        scheduler.load_state_dict(state["scheduler"])
        torch.set_rng_state(tuple(state["rng"]))
        generator.set_state(tuple(state["loader_rng"]))
        train_epochs(model, optimizer, scheduler, loader, total_epochs - epochs_before_save)
    return {name: p.tolist() for name, p in model.named_parameters()}


def test_resumed_script_continues_exactly(tmp_path):
    straight = run_with_checkpoint(tmp_path, 2, 2)
    resumed = run_with_checkpoint(tmp_path, 1, 2)
    assert resumed == straight
    once = run_with_checkpoint(tmp_path, 1, 1)
    assert once != straight  # the second epoch did change the weights


def test_memory_stays_flat_over_many_steps():
    torch.manual_seed(0)
    x = torch.randn(64, 16)
    y = torch.randint(0, 4, (64,))
    loader = DataLoader(TensorDataset(x, y), batch_size=16, shuffle=True)
    model = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 4))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=100, gamma=0.99)

    def live_blocks_after(epochs):
        train_epochs(model, optimizer, scheduler, loader, epochs)
        gc.collect()
        return sys.getallocatedblocks(), resident_bytes()

    live_blocks_after(50)  # 200 steps: optimizer state and caches settle
    blocks_before, rss_before = live_blocks_after(1)
    blocks_after, rss_after = live_blocks_after(500)  # 2,000 more steps
    # a graph node, tensor or array kept per step would add thousands of live objects
    assert blocks_after - blocks_before < 500, f"{blocks_after - blocks_before} more live objects after 2,000 steps"
    assert rss_after - rss_before < 16 * 2**20, f"resident memory grew by {(rss_after - rss_before) / 2**20:.1f} MiB"


def resident_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def saved_parameters(out):
    state = torch.load(f"{out}/checkpoint.pt")
    return state["epoch"], {k: v.tolist() for k, v in state["model"].items()}


def test_train_loop_resume_after_interrupt_is_exact(tmp_path):
    straight, interrupted = tmp_path / "straight", tmp_path / "interrupted"
    config = dict(task="digits", epochs=2, batch_size=64, quiet=True)
    result = train(TrainConfig(out=str(straight), **config), TASKS["digits"])
    assert 0.0 <= result["test_accuracy"] <= 1.0
    with pytest.raises(KeyboardInterrupt):
        train(TrainConfig(out=str(interrupted), **config), TASKS["digits"], StopAfterEpoch(1))
    assert saved_parameters(interrupted)[0] == 1
    train(TrainConfig(out=str(interrupted), resume=True, task="digits", quiet=True), TASKS["digits"])
    assert saved_parameters(interrupted) == saved_parameters(straight)


def test_train_loop_with_workers_matches_single_process(tmp_path):
    results = [
        train(
            TrainConfig(task="digits", out=str(tmp_path / str(n)), epochs=1, batch_size=128, quiet=True, num_workers=n),
            TASKS["digits"],
        )
        for n in (0, 2)
    ]
    assert results[0] == results[1]


def test_chars_task_trains_reports_and_samples(tmp_path, tiny_chars, capsys):
    result = train(TrainConfig(task="chars", out=str(tmp_path), epochs=1, quiet=True), TASKS["chars"])
    uniform = math.log(adcuda.data.load_chars_corpus().vocab_size)
    assert result["val_loss"] < uniform - 0.3, "a few steps should beat guessing uniformly by a clear margin"
    assert result["val_bits_per_char"] == pytest.approx(result["val_loss"] / math.log(2))
    assert result["sample"].startswith(chars_task.SAMPLE_PROMPT) and len(result["sample"]) == 34
    lines = capsys.readouterr().out.splitlines()
    assert lines[-2].startswith("held-out bits per char: ") and lines[-2].endswith(" held-out characters)")
    assert lines[-1].startswith("held-out loss: ")
    again = train(TrainConfig(task="chars", out=str(tmp_path / "again"), epochs=1, quiet=True), TASKS["chars"])
    assert again == result, "the same seed must give the same run, sample included"


def test_progress_is_a_line_every_few_seconds_when_not_on_a_terminal():
    import io

    from adcuda.train.progress import LineProgress, progress

    now = [0.0]

    def clock():
        now[0] += 1.5  # each step takes 1.5 s
        return now[0]

    out = io.StringIO()
    bar = LineProgress(range(10), 10, "epoch 2/5", file=out, interval=5.0, clock=clock)
    for _ in bar:
        bar.set_postfix(loss="1.2345")
    lines = out.getvalue().splitlines()
    assert lines == [
        "epoch 2/5: step 4/10 (40%), loss 1.2345, 0.7 steps/s, about 9 s left",
        "epoch 2/5: step 8/10 (80%), loss 1.2345, 0.7 steps/s, about 3 s left",
    ]
    assert isinstance(progress(range(3), 3, "x", quiet=False, file=io.StringIO()), LineProgress)
    assert list(progress(range(3), 3, "x", quiet=True, file=io.StringIO())) == [0, 1, 2]


def test_chars_corpus_round_trips():
    corpus = adcuda.data.load_chars_corpus()
    assert corpus.vocab_size > 60 and len(corpus.train) > 8 * len(corpus.val) > 0
    text = corpus.text[1000:1100]
    assert corpus.decode(corpus.encode(text)) == text
    assert corpus.decode(corpus.train[:50].tolist()) == corpus.text[:50]
    with pytest.raises(ValueError, match="not in the vocabulary"):
        corpus.encode("\x00")


def test_sampling_follows_the_distribution():
    class Fixed(nn.Module):
        """Puts almost all probability on character id 2, whatever the input."""

        block_size = 8

        def forward(self, ids):
            logits = torch.zeros(ids.shape[0], ids.shape[1], 4)
            logits[..., 2] = 50.0
            return logits

    corpus = adcuda.data.CharCorpus(text="abcd", vocab=("a", "b", "c", "d"), train=None, val=None)
    text = chars_task.sample(Fixed(), corpus, "ab", 10, 1.0, torch.Generator().manual_seed(0), "cpu")
    assert text == "ab" + "c" * 10


@pytest.mark.slow
def test_default_digits_run_reaches_target_accuracy(tmp_path):
    """What ``adcuda train`` does with no arguments (fast variant: the one-epoch CLI test)."""
    result = train(TrainConfig(task="digits", out=str(tmp_path), quiet=True), TASKS["digits"])
    assert result["test_accuracy"] >= 0.97
