"""The programs in examples/, run as a user runs them (``python examples/X.py --quick --device cpu``, from
another folder, so that the installed adcuda is the one imported); the digits examples once more on the
GPU (or the CUDA emulator) for one epoch; and the CNN example's model code run under PyTorch from the
same weights."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import load_module

import adcuda

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def run_example(name, cwd, *args):
    # one BLAS thread: on a loaded 2-core machine, OpenBLAS's threads fighting for the cores made the
    # GPT example about 8x slower
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    command = [sys.executable, str(EXAMPLES / name), *(args or ("--quick", "--device", "cpu"))]
    result = subprocess.run(
        command, cwd=cwd, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL, env=env
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def figure(pattern, text):
    match = re.search(pattern + r" (-?\d+\.\d+)", text)
    assert match, f"no {pattern!r} in:\n{text}"
    return float(match.group(1))


def test_cnn_digits_learns(tmp_path):
    out = run_example("cnn_digits.py", tmp_path)
    before, after = figure("test accuracy before training:", out), figure(r"test accuracy:", out)
    assert before < 0.3 and after > 0.85, out  # two epochs already classify most test digits


@pytest.mark.parametrize("name", ["lstm_chars.py", "gpt.py"])
def test_character_models_learn_and_sample(tmp_path, name):
    out = run_example(name, tmp_path)
    uniform = figure(r"a uniform guess:", out)
    before = figure("validation bits per character before training:", out)
    after = figure(r"validation bits per character:", out)
    assert before > uniform - 0.5, out  # an untrained model guesses about uniformly
    assert after < before - 1.5, out  # a few dozen steps learn at least the characters' frequencies
    assert re.search(r"^sample: 'The .{20,}'$", out, re.MULTILINE), out


def test_reinforce_finds_the_goal(tmp_path):
    out = run_example("reinforce.py", tmp_path)
    before, after = figure("average return before training:", out), figure("average return:", out)
    assert before < -0.5, out  # a uniform policy mostly falls into a pit or wanders
    assert after > 0.5, out  # the learned one mostly walks to the goal
    assert figure("greedy return:", out) > 0.85, out  # and its most likely actions take a shortest path


def test_vae_learns_and_draws_digits(tmp_path):
    out = run_example("vae.py", tmp_path)
    before = figure(r"test loss \(negative ELBO, nats per image\) before training:", out)
    after = figure(r"test loss \(negative ELBO, nats per image\):", out)
    assert after < before - 8, out
    drawing = out.split("four digits drawn from the prior:\n")[1].splitlines()
    assert len(drawing) == 8 and all(len(line) == 4 * 16 + 3 * 3 for line in drawing), out


def test_gcn_learns(tmp_path):
    out = run_example("gcn.py", tmp_path)
    before, after = figure("test accuracy before training:", out), figure(r"test accuracy:", out)
    assert before < 0.3 and after > 0.8, out  # 140 labelled nodes and the graph classify most test nodes


class LargestArray:
    """A dispatch hook (adcuda/ops/dispatch.py) that notes the largest array any primitive returns."""

    def __init__(self):
        self.largest = 0

    def wrap_backend(self, backend):
        hook = self

        class Watched:
            def __getattr__(self, name):
                primitive = getattr(backend, name)
                if not callable(primitive):
                    return primitive

                def watched(*args, **kwargs):
                    result = primitive(*args, **kwargs)
                    for r in result if isinstance(result, tuple) else (result,):
                        hook.largest = max(hook.largest, getattr(r, "size", 0))
                    return result

                return watched

        return Watched()


def test_gcn_never_makes_the_dense_adjacency():
    from adcuda.ops import dispatch

    example = load_example("gcn")
    n = example.NODES
    watch = LargestArray()
    dispatch.add_hook(watch)
    try:
        before, after = example.train(3, adcuda.device("cpu"), log=lambda line: None)
        largest_in_training = watch.largest
        # the watch sees a dense adjacency where one is made
        adjacency = example.normalized_adjacency(adcuda.tensor([[0, 1], [1, 0]]), n, adcuda.device("cpu"))
        adjacency.to_dense()
    finally:
        dispatch.remove_hook(watch)
    assert 0 < largest_in_training < n * n, largest_in_training  # the features, 2708 x 1433, are the largest
    assert watch.largest >= n * n
    assert 0 <= before <= 1 and 0 <= after <= 1


@pytest.mark.cuda
@pytest.mark.skipif(not adcuda.cuda.is_available(), reason="needs a usable CUDA device")
@pytest.mark.parametrize(
    "name, figure_name, sign",
    [("cnn_digits.py", "test accuracy", 1), ("vae.py", r"test loss \(negative ELBO, nats per image\)", -1)],
)
def test_digits_examples_learn_on_the_gpu(tmp_path, name, figure_name, sign):
    # one epoch in large batches: a few seconds on the emulator, which runs every kernel on the CPU
    out = run_example(name, tmp_path, "--device", "cuda", "--epochs", "1", "--batch-size", "256")
    assert out.startswith("device cuda"), out
    before, after = figure(figure_name + " before training:", out), figure(figure_name + ":", out)
    assert sign * (after - before) > 0, out  # accuracy up, loss down


@pytest.mark.cuda
@pytest.mark.skipif(not adcuda.cuda.is_available(), reason="needs a usable CUDA device")
def test_gcn_learns_on_the_gpu(tmp_path):
    # five full-graph epochs: the sparse products' kernels (kernels/sparse.cu) forward and backward
    out = run_example("gcn.py", tmp_path, "--device", "cuda", "--epochs", "5")
    assert out.startswith("device cuda"), out
    before, after = figure("test accuracy before training:", out), figure(r"test accuracy:", out)
    assert after > before + 0.3, out


def load_example(name):
    return load_module(f"example_{name}", EXAMPLES / f"{name}.py")


def test_cnn_example_model_matches_pytorch():
    torch = pytest.importorskip("torch")
    import adcuda
    from adcuda.data import load_digits

    example = load_example("cnn_digits")
    adcuda.manual_seed(0)
    ours = example.build_model(adcuda.nn)
    theirs = example.build_model(torch.nn)
    theirs.load_state_dict({name: torch.from_numpy(value.numpy().copy()) for name, value in ours.state_dict().items()})

    images, labels = load_digits()
    images = images.view(-1, 1, 8, 8)
    our_opt = adcuda.optim.SGD(ours.parameters(), lr=0.05, momentum=0.9)
    their_opt = torch.optim.SGD(theirs.parameters(), lr=0.05, momentum=0.9)
    for step in range(2):
        x, y = images[64 * step : 64 * (step + 1)], labels[64 * step : 64 * (step + 1)]
        our_loss = example.train_step(ours, our_opt, adcuda.nn.CrossEntropyLoss(), x, y)
        their_loss = example.train_step(
            theirs,
            their_opt,
            torch.nn.CrossEntropyLoss(),
            torch.from_numpy(x.numpy().copy()),
            torch.from_numpy(y.numpy().copy()),
        )
        assert our_loss == pytest.approx(their_loss, rel=1e-5, abs=1e-6), step
    their_state = theirs.state_dict()
    for name, value in ours.state_dict().items():
        assert value.numpy() == pytest.approx(their_state[name].numpy(), rel=1e-4, abs=1e-5), name
