"""``adcuda export``: checkpoints of ``adcuda train`` written as ONNX and as C, and the digits model's test
accuracy reproduced by onnxruntime and by the compiled C program."""

import os
import re
import subprocess
import sys

import numpy as np
import pytest

from adcuda import cli
from adcuda.train import DigitsTask
from adcuda.train.export_run import load_trained_model


@pytest.fixture(scope="module")
def digits_run(tmp_path_factory):
    """A quick ``adcuda train`` digits run (one epoch) and the test accuracy it printed."""
    run = tmp_path_factory.mktemp("digits") / "run"
    result = subprocess.run(
        [sys.executable, "-m", "adcuda", "train", "--task", "digits", "--epochs", "1", "--batch-size", "64"]
        + ["--quiet", "--out", str(run)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    accuracy = float(re.search(r"test accuracy: ([0-9.]+)", result.stdout).group(1))
    return run, accuracy


def held_out_digits():
    """The held-out test split of the run's seed (0, the default)."""
    images, labels = DigitsTask(seed=0).splits["test"]
    return images.numpy(), labels.numpy()


def check_accuracy(logits, printed_accuracy, reference_logits):
    images, labels = held_out_digits()
    np.testing.assert_allclose(logits, reference_logits, rtol=1e-4, atol=1e-5)
    predictions = logits.argmax(1)
    # the same predictions as adcuda's, save a near-tie flipped by rounding (none in practice)
    assert (predictions != reference_logits.argmax(1)).sum() <= 1
    assert abs((predictions == labels).mean() - printed_accuracy) <= 1.0 / len(labels) + 5e-5


def adcuda_logits(run):
    images, _ = held_out_digits()
    trained = load_trained_model(str(run))
    from adcuda import from_numpy, no_grad

    with no_grad():
        return trained.model(from_numpy(images)).numpy()


def test_digits_model_exported_to_c_reproduces_its_test_accuracy(digits_run, tmp_path, capsys, compile_c):
    run, accuracy = digits_run
    images, _ = held_out_digits()
    out = tmp_path / "c"
    command = ["export", str(run), "--format", "c", "--out", str(out), "--batch-size", str(len(images))]
    assert cli.main(command + ["--weights", "file", "--name", "digits", "--runner"]) == 0
    printed = capsys.readouterr().out
    assert "digits.c" in printed and "digits.weights" in printed and "bytes of scratch" in printed
    assert f"in0:  ({len(images)}, 64)" in (out / "digits.h").read_text()
    exe = compile_c([out / "digits.c", out / "digits_main.c"], out / "digits_run")
    images.astype(np.float32).tofile(out / "images.bin")
    result = subprocess.run(
        [exe, str(out / "digits.weights"), str(out / "images.bin"), str(out / "logits.bin")],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    logits = np.fromfile(out / "logits.bin", np.float32).reshape(len(images), 10)
    check_accuracy(logits, accuracy, adcuda_logits(run))


def test_digits_model_exported_to_onnx_reproduces_its_test_accuracy(digits_run, tmp_path, capsys):
    pytest.importorskip("onnx")
    onnxruntime = pytest.importorskip("onnxruntime")
    run, accuracy = digits_run
    assert cli.main(["export", str(run / "checkpoint.pt"), "--format", "onnx"]) == 0
    assert "model.onnx" in capsys.readouterr().out
    images, _ = held_out_digits()
    session = onnxruntime.InferenceSession(str(run / "model.onnx"), providers=["CPUExecutionProvider"])
    logits = session.run(None, {"input": images.astype(np.float32)})[0]  # traced at batch 1: a dynamic batch
    check_accuracy(logits, accuracy, adcuda_logits(run))


def test_missing_and_damaged_checkpoints(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["export", str(tmp_path / "nowhere"), "--format", "c"])
    assert exit_info.value.code == 2
    assert "there is no file" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["export", str(tmp_path), "--format", "c"])
    assert exit_info.value.code == 2
    assert "holds no checkpoint.pt" in capsys.readouterr().err

    (tmp_path / "checkpoint.pt").write_bytes(b"not a checkpoint at all")
    assert cli.main(["export", str(tmp_path), "--format", "c"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("adcuda export: error:") and "checkpoint.pt" in err


def test_checkpoint_whose_weights_do_not_fit_the_task_model(digits_run, tmp_path, capsys):
    import adcuda

    run, _ = digits_run
    state = adcuda.load(str(run / "checkpoint.pt"))
    del state["model"]["1.net.0.weight"]
    adcuda.save(state, str(tmp_path / "checkpoint.pt"))
    assert cli.main(["export", str(tmp_path), "--format", "c"]) == 1
    err = capsys.readouterr().err
    assert "do not fit the 'digits' model" in err and "1.net.0.weight" in err and len(err) < 400


def test_usage_errors_exit_2(digits_run, tmp_path, capsys, monkeypatch):
    run, _ = digits_run
    for args, message in (
        (["--format", "c", "--name", "my-model"], "must be a C identifier"),
        (["--format", "onnx", "--weights", "file"], "are options of --format c"),
        (["--format", "pdf"], "invalid choice"),
        (["--format", "c", "--batch-size", "0"], "must be a positive integer"),
    ):
        with pytest.raises(SystemExit) as exit_info:
            cli.main(["export", str(run), "--out", str(tmp_path / "x"), *args])
        assert exit_info.value.code == 2
        assert message in capsys.readouterr().err

    monkeypatch.setitem(sys.modules, "onnx", None)  # as if the onnx package were not installed
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["export", str(run), "--format", "onnx", "--out", str(tmp_path / "m.onnx")])
    assert exit_info.value.code == 2
    assert "onnx" in capsys.readouterr().err
    assert not os.path.exists(tmp_path / "m.onnx")


def test_chars_model_refused_by_c_naming_the_input(tmp_path, tiny_chars, capsys):
    from adcuda.train import TASKS, TrainConfig, train

    train(TrainConfig(task="chars", out=str(tmp_path), epochs=1, quiet=True), TASKS["chars"])
    capsys.readouterr()
    assert cli.main(["export", str(tmp_path), "--format", "c"]) == 1
    err = capsys.readouterr().err
    assert "adcuda export: error:" in err and "int64" in err
