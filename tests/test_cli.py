"""The ``adcuda`` command: ``python -m adcuda train`` and ``info``, as a person runs them."""

import os
import re
import signal
import subprocess
import sys
import textwrap

import pytest
from helpers import run_adcuda

import adcuda
from adcuda import cli


def run_cli(*args, cwd, timeout=120):
    return run_adcuda(*args, cwd=cwd, timeout=timeout)


def test_train_digits_one_epoch_prints_accuracy(tmp_path):
    result = run_cli("train", "--task", "digits", "--epochs", "1", "--quiet", "--out", "tmp", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.strip().splitlines()
    match = re.fullmatch(r"test accuracy: (\d\.\d+)", lines[-1])
    assert match, result.stdout
    assert float(match.group(1)) > 0.5  # one epoch already learns most digits
    assert not any(line.startswith("epoch") for line in lines), "--quiet prints only the results"
    assert (tmp_path / "tmp" / "checkpoint.pt").is_file()
    assert result.stderr == "", "no progress bar when the output is not a terminal"


# `python -m adcuda` whose second epoch, after its first step, waits for the test's Ctrl-C: the signal then
# always lands inside epoch 2, after a step the checkpoint does not hold, however loaded the machine (sent
# to a plain run on reading "epoch   1/2", it could arrive after epoch 2 had finished: exit 0). It also
# takes Ctrl-C as a terminal's process does, even where the tests run in a background job (`cmd &` in a
# script), whose processes inherit SIGINT ignored.
ADCUDA_WAITING_IN_EPOCH_2 = textwrap.dedent("""
    import signal, sys, time
    signal.signal(signal.SIGINT, signal.default_int_handler)
    from adcuda import cli
    from adcuda.train import loop

    train_one_epoch = loop._train_one_epoch

    def train_one_epoch_waiting_in_the_second(step, loader, reporter, description):
        def step_then_wait(batch, what):
            result = step(batch, what)
            time.sleep(600)  # the test's SIGINT ends the wait with a KeyboardInterrupt
            return result
        return train_one_epoch(step_then_wait if description.startswith("epoch 2/") else step, loader, reporter,
                               description)

    loop._train_one_epoch = train_one_epoch_waiting_in_the_second
    sys.exit(cli.main())
""")


def test_interrupted_run_resumes_exactly(tmp_path):
    common = ["train", "--task", "digits", "--epochs", "2", "--batch-size", "128"]
    straight = run_cli(*common, "--out", "straight", cwd=tmp_path)
    assert straight.returncode == 0, straight.stderr
    assert "epoch   2/2" in straight.stdout

    # Ctrl-C as soon as the first epoch (and so its checkpoint) is done
    process = subprocess.Popen(
        [sys.executable, "-c", ADCUDA_WAITING_IN_EPOCH_2, *common, "--out", "cut"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        stdin=subprocess.DEVNULL,
    )
    try:
        for line in process.stdout:
            if line.startswith("epoch   1/2"):
                process.send_signal(signal.SIGINT)
                break
        _, stderr = process.communicate(timeout=60)
    finally:
        process.kill()
    assert process.returncode == 130, stderr
    assert "--resume" in stderr
    assert adcuda.load(str(tmp_path / "cut" / "checkpoint.pt"))["epoch"] == 1

    resumed = run_cli("train", "--task", "digits", "--out", "cut", "--resume", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert "resuming after epoch 1 of 2" in resumed.stdout
    assert resumed.stdout.strip().splitlines()[-2] == straight.stdout.strip().splitlines()[-2]  # test accuracy

    final = [adcuda.load(str(tmp_path / name / "checkpoint.pt"))["model"] for name in ("straight", "cut")]
    assert {k: v.tolist() for k, v in final[0].items()} == {k: v.tolist() for k, v in final[1].items()}


def test_help_describes_every_option(tmp_path):
    result = run_cli("train", "--help", cwd=tmp_path)
    assert result.returncode == 0
    for option in (
        "--task",
        "--device",
        "--epochs",
        "--batch-size",
        "--lr",
        "--seed",
        "--out",
        "--resume",
        "--num-workers",
        "--quiet",
        "digits",
        "chars",
    ):
        assert option in result.stdout
    top = run_cli("--help", cwd=tmp_path)
    assert top.returncode == 0 and "train" in top.stdout and "info" in top.stdout


@pytest.mark.parametrize(
    "args, message",
    [
        (["train", "--task", "imagenet"], "invalid choice: 'imagenet'"),
        (["train", "--epochs", "0"], "--epochs: must be a positive integer"),
        (["train", "--lr", "-1"], "--lr: must be a positive number"),
        (["train", "--batch-size", "many"], "not an integer: 'many'"),
        (["train", "--resume", "--out", "nowhere"], "no checkpoint to resume from"),
        (["train", "--bogus"], "unrecognized arguments: --bogus"),
        ([], "required"),
    ],
)
def test_bad_arguments_exit_nonzero_with_a_message(tmp_path, monkeypatch, capsys, args, message):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exited:
        cli.main(args)
    assert exited.value.code == 2
    assert message in capsys.readouterr().err


def test_bad_arguments_from_the_shell(tmp_path):
    result = run_cli("train", "--epochs", "-3", cwd=tmp_path)
    assert result.returncode == 2
    assert "--epochs: must be a positive integer, got -3" in result.stderr
    assert "Traceback" not in result.stderr


def test_resume_refuses_other_settings(tmp_path):
    first = run_cli("train", "--epochs", "1", "--batch-size", "256", "--quiet", "--out", "run", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    clash = run_cli("train", "--resume", "--out", "run", "--lr", "0.5", cwd=tmp_path)
    assert clash.returncode == 2 and "--lr 0.5 differs from the checkpoint's" in clash.stderr
    other_task = run_cli("train", "--task", "chars", "--resume", "--out", "run", cwd=tmp_path)
    assert other_task.returncode == 2 and "is a 'digits' run" in other_task.stderr


@pytest.mark.parametrize("out", ["a_file/run", "/proc/adcuda-run"])
def test_out_that_cannot_be_written_is_a_usage_error_before_any_training(tmp_path, out):
    (tmp_path / "a_file").write_text("not a folder")
    result = run_cli("train", "--epochs", "1", "--out", out, cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert f"adcuda train: error: --out {out}: cannot write there" in result.stderr
    assert "epoch" not in result.stdout and "Traceback" not in result.stderr


def test_trace_that_cannot_be_written_is_a_usage_error(tmp_path):
    (tmp_path / "a_file").write_text("not a folder")
    result = run_cli("train", "--profile", "--trace", "a_file/trace.json", "--out", "run", cwd=tmp_path)
    assert result.returncode == 2 and "--trace a_file/trace.json: cannot write there" in result.stderr


def test_resume_takes_the_task_from_the_checkpoint(tmp_path, tiny_chars):
    """A chars run resumed without --task continues as chars (the checkpoint knows its task)."""
    from adcuda.train import TASKS, TrainConfig, train

    train(TrainConfig(task="chars", out=str(tmp_path / "c"), epochs=1, quiet=True), TASKS["chars"])
    with pytest.raises(SystemExit) as exited:
        cli.main(["train", "--task", "digits", "--resume", "--out", str(tmp_path / "c")])
    assert exited.value.code == 2
    assert cli.main(["train", "--resume", "--out", str(tmp_path / "c"), "--epochs", "2", "--quiet"]) == 0
    assert adcuda.load(str(tmp_path / "c" / "checkpoint.pt"))["epoch"] == 2


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # the overflow of the diverging run
def test_exit_status_2_for_usage_errors_and_1_for_failures_while_training(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert cli.main(["train", "--epochs", "1", "--batch-size", "512", "--quiet", "--out", "run"]) == 0
    capsys.readouterr()
    # usage: the command cannot run as given
    for args in (
        ["--resume", "--out", "run", "--seed", "3"],
        ["--resume", "--out", "elsewhere"],
        ["--task", "chars", "--resume", "--out", "run"],
    ):
        with pytest.raises(SystemExit) as exited:
            cli.main(["train", *args])
        assert exited.value.code == 2, args
        assert capsys.readouterr().err.startswith("adcuda train: error: --resume: ")
    # failure while running: a damaged checkpoint, a loss that diverges
    checkpoint = tmp_path / "run" / "checkpoint.pt"
    checkpoint.write_bytes(checkpoint.read_bytes()[:-10])
    assert cli.main(["train", "--resume", "--out", "run", "--epochs", "2"]) == 1
    assert capsys.readouterr().err.startswith("adcuda train: error: ")
    assert cli.main(["train", "--epochs", "1", "--lr", "1e30", "--quiet", "--out", "diverged"]) == 1
    assert "training diverged" in capsys.readouterr().err


@pytest.mark.skipif(adcuda.cuda.is_available(), reason="CUDA is available here")
def test_device_line_is_short_and_points_to_adcuda_info(tmp_path):
    result = run_cli("train", "--epochs", "1", "--batch-size", "512", "--out", "run", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    device_line = result.stdout.splitlines()[0]
    assert device_line.startswith("device: cpu (") and "adcuda info" in device_line
    assert len(device_line) <= 80, device_line


@pytest.mark.skipif(adcuda.cuda.is_available(), reason="CUDA is available here")
def test_device_cuda_without_cuda_says_why(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exited:
        cli.main(["train", "--device", "cuda"])
    assert exited.value.code == 2
    assert "CUDA is not available: " + adcuda.cuda.unavailable_reason() in capsys.readouterr().err
    assert not (tmp_path / "adcuda-runs").exists()


def test_info_command(tmp_path):
    result = run_cli("info", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "running on:" in result.stdout


def test_info_prints_once_in_a_script_and_at_the_prompt(tmp_path):
    def python(*args, stdin=None):
        return subprocess.run(
            [sys.executable, *args], cwd=tmp_path, input=stdin, capture_output=True, text=True, timeout=120
        )

    script = python("-c", "import adcuda\nreport = adcuda.info()\nassert 'running on:' in report")
    assert script.returncode == 0, script.stderr
    assert script.stdout.count("running on:") == 1, script.stdout
    prompt = python("-i", "-q", stdin="import adcuda\nadcuda.info()\n")
    assert prompt.stdout.count("running on:") == 1, prompt.stdout
    quiet = python("-c", "import adcuda\nfacts = adcuda.info(as_dict=True)\nassert 'running_on' in facts")
    assert quiet.returncode == 0 and quiet.stdout == "", quiet.stdout + quiet.stderr


def test_console_script_when_installed(tmp_path):
    script = os.path.join(os.path.dirname(sys.executable), "adcuda")
    if not os.path.exists(script):
        pytest.skip("adcuda is not installed in this environment (running from a source checkout)")
    result = subprocess.run([script, "train", "--help"], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert result.returncode == 0 and "--resume" in result.stdout
