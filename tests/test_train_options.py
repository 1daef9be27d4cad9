"""``adcuda train`` options: ``--amp`` (float16 weights, float32 masters, loss scaling, in the
checkpoint), ``--distributed`` / ``--nproc-per-node`` (2 MPI processes), ``--nvtx`` and ``--profile``.

Runs are small (batch 128: 10 steps an epoch on the digits) and shared through module fixtures where
several tests read the same run.
"""

import json
import os
import shutil
import sys

import pytest
from helpers import load_module, run_adcuda
from training_helpers import StopAfterEpoch

import adcuda
from adcuda import cli
from adcuda.train import TASKS, TrainConfig, train
from adcuda.train.checkpoint import CheckpointMismatch

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
BATCH = 128
STEPS_PER_EPOCH = 10  # ceil(1258 training images / 128)
RUN_LIMIT_S = 180  # only keeps a broken MPI from hanging the suite


def train_digits(out, epochs=None, amp=None, resume=False, reporter=None):
    config = TrainConfig(
        task="digits",
        out=str(out),
        epochs=epochs,
        batch_size=None if resume else BATCH,
        amp=amp,
        resume=resume,
        quiet=True,
    )
    return train(config, TASKS["digits"], reporter)


def load(out):
    return adcuda.load(os.path.join(str(out), "checkpoint.pt"))


def weights(state):
    return {name: t.tolist() for name, t in state["model"].items()}


def child_env(**extra):
    path = os.environ.get("PYTHONPATH")
    return {
        **os.environ,
        "PYTHONPATH": REPO + (os.pathsep + path if path else ""),
        "OMP_NUM_THREADS": "1",
        "OPENBLAS_NUM_THREADS": "1",
        **extra,
    }


def run_cli(*args, cwd, env=None):
    return run_adcuda(*args, cwd=cwd, timeout=RUN_LIMIT_S, env=env or child_env())


# ---------------------------------------------------------------------------------------------- --amp
@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Two-epoch digits runs in float32 and with --amp."""
    root = tmp_path_factory.mktemp("runs")
    return {
        "root": root,
        "fp32": (root / "fp32", train_digits(root / "fp32", 2, amp=False)),
        "amp": (root / "amp", train_digits(root / "amp", 2, amp=True)),
    }


def test_amp_digits_reaches_the_float32_test_loss(runs):
    (_, fp32), (amp_out, amp) = runs["fp32"], runs["amp"]
    # tolerance: 2% of the float32 run's held-out loss (the two differ by about 0.1%)
    assert abs(amp["test_loss"] - fp32["test_loss"]) <= 0.02 * fp32["test_loss"], (amp, fp32)
    assert amp["test_accuracy"] >= fp32["test_accuracy"] - 0.02
    assert amp["test_loss"] != fp32["test_loss"], "--amp must change the arithmetic"
    state = load(amp_out)
    assert state["config"]["amp"] is True
    assert state["scaler"]["scale"] == 2.0**16  # no overflow in 20 steps; growth comes after 2,000
    assert state["scaler"]["_growth_tracker"] == 2 * STEPS_PER_EPOCH
    assert all(t.dtype is adcuda.float16 for name, t in state["model"].items() if "net" in name)
    masters = [s["master_param"] for s in state["optimizer"]["state"].values()]
    assert len(masters) == 6 and all(m.dtype is adcuda.float32 for m in masters)
    assert load(runs["fp32"][0])["scaler"] == {}  # a disabled scaler saves nothing


def test_amp_resumes_exactly_with_its_masters_and_scaler(runs):
    amp_out, straight = runs["amp"]
    out = runs["root"] / "amp-interrupted"
    with pytest.raises(KeyboardInterrupt):
        train_digits(out, 2, amp=True, reporter=StopAfterEpoch(1))
    assert load(out)["epoch"] == 1
    # --amp left unset: the checkpoint's setting
    assert train_digits(out, resume=True) == straight
    assert weights(load(out)) == weights(load(amp_out))
    assert (
        load(out)["optimizer"]["state"][0]["master_param"].tolist()
        == load(amp_out)["optimizer"]["state"][0]["master_param"].tolist()
    )


def test_resumed_amp_run_restores_its_scaler_and_old_checkpoints_start_a_fresh_one(runs):
    amp_out, _ = runs["amp"]
    restored, old = runs["root"] / "scaler-restored", runs["root"] / "scaler-missing"
    for out, change in (
        (restored, lambda s: s["scaler"].update(scale=1024.0, _growth_tracker=7)),
        (old, lambda s: s.pop("scaler")),
    ):
        out.mkdir()
        state = load(amp_out)
        change(state)
        adcuda.save(state, str(out / "checkpoint.pt"))
        train_digits(out, 3, resume=True)
    assert load(restored)["scaler"]["scale"] == 1024.0
    assert load(restored)["scaler"]["_growth_tracker"] == 7 + STEPS_PER_EPOCH
    assert load(old)["scaler"]["scale"] == 2.0**16
    assert load(old)["scaler"]["_growth_tracker"] == STEPS_PER_EPOCH


def test_checkpoint_from_before_amp_resumes_in_float32(runs):
    fp32_out, _ = runs["fp32"]
    out = runs["root"] / "before-amp"
    out.mkdir()
    state = load(fp32_out)
    del state["scaler"], state["config"]["amp"]
    adcuda.save(state, str(out / "checkpoint.pt"))
    train_digits(out, 3, resume=True)
    resumed = load(out)
    assert resumed["epoch"] == 3 and resumed["config"]["amp"] is False
    assert all(t.dtype is adcuda.float32 for t in resumed["model"].values())


def test_resume_refuses_to_switch_amp(runs, tmp_path):
    with pytest.raises(CheckpointMismatch, match="the checkpoint's run trained without --amp"):
        train_digits(runs["fp32"][0], amp=True, resume=True)
    with pytest.raises(CheckpointMismatch, match="the checkpoint's run trained with --amp"):
        train_digits(runs["amp"][0], amp=False, resume=True)


# ---------------------------------------------------------------------------------------------- --profile, --nvtx
def test_profile_prints_the_table_writes_the_trace_and_no_checkpoint(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert (
        cli.main(
            [
                "train",
                "--device",
                "cpu",
                "--batch-size",
                "64",
                "--profile-steps",
                "2",
                "--out",
                "run",
                "--trace",
                "traces/step.json",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    rows = {line.split()[0]: line.split() for line in out.splitlines() if line and not line.startswith("-")}
    assert rows["train_step"][-1] == "2", "two steps, each in its own train_step range"
    for op in ("linear", "AddmmBackward0", "cross_entropy", "Optimizer.step#AdamW.step"):
        assert op in rows, op
    assert "trace of 2 training steps: traces/step.json" in out
    trace = json.loads((tmp_path / "traces" / "step.json").read_text())
    names = [e["name"] for e in trace["traceEvents"] if e.get("ph") == "X"]
    assert names.count("train_step") == 2 and names.count("linear") == 2 * 3
    assert all(e["dur"] >= 0 for e in trace["traceEvents"] if e.get("ph") == "X")
    assert not (tmp_path / "run" / "checkpoint.pt").exists(), "a profiling run writes no checkpoint"


def test_profile_defaults_to_five_steps_and_a_trace_in_out(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert cli.main(["train", "--device", "cpu", "--batch-size", "512", "--profile", "--out", "run"]) == 0
    trace = json.loads((tmp_path / "run" / "trace.json").read_text())
    # 5 steps of a 3-step epoch: the profile runs on into the next epoch
    assert [e["name"] for e in trace["traceEvents"] if e.get("ph") == "X"].count("train_step") == 5
    assert "trace of 5 training steps" in capsys.readouterr().out


def test_nvtx_without_a_tool_says_so_and_trains(tmp_path, monkeypatch, capsys):
    pytest.importorskip("nvtx")
    monkeypatch.delenv("NVTX_INJECTION64_PATH", raising=False)
    monkeypatch.chdir(tmp_path)
    assert cli.main(["train", "--device", "cpu", "--nvtx", "--profile-steps", "1", "--out", "run"]) == 0
    assert "no NVTX tool is attached" in capsys.readouterr().out


def test_nvtx_ranges_reach_an_nvtx_tool(tmp_path):
    pytest.importorskip("nvtx")
    build = _load_recorder_builder()
    if build.compiler() is None:
        pytest.skip("no C compiler to build the NVTX recorder")
    recorder = build.build_recorder(str(tmp_path))
    log = tmp_path / "nvtx.log"
    env = child_env(NVTX_INJECTION64_PATH=recorder, NVTX_RECORDER_OUTPUT=str(log))
    env.pop("ADCUDA_NVTX", None)
    result = run_cli(
        "train",
        "--device",
        "cpu",
        "--nvtx",
        "--epochs",
        "1",
        "--batch-size",
        "512",
        "--out",
        "run",
        cwd=tmp_path,
        env=env,
    )
    assert result.returncode == 0, result.stderr
    assert "no NVTX tool" not in result.stdout
    stack, steps, inside_steps = [], 0, set()
    for line in log.read_text().splitlines():
        event, _thread, domain, *message = line.split("\t")
        assert domain == "adcuda"
        if event == "push":
            name = message[-1].split(",")[0]
            if stack and stack[0] == "train_step":
                inside_steps.add(name)
            steps += name == "train_step"
            stack.append(name)
        elif event == "pop":
            assert stack, "a pop without its push"
            stack.pop()
    assert not stack, f"ranges left open: {stack}"
    assert steps == 3  # ceil(1258 / 512) steps in the epoch
    assert {"linear", "AddmmBackward0", "Optimizer.step#AdamW.step", "cross_entropy"} <= inside_steps


def _load_recorder_builder():

    return load_module("nvtx_injection_build", os.path.join(HERE, "nvtx_injection", "build.py"))


# ---------------------------------------------------------------------------------------------- --distributed
def _unavailable(reason):
    if os.environ.get("ADCUDA_REQUIRE_MPI"):
        pytest.fail(f"ADCUDA_REQUIRE_MPI is set but MPI is not usable: {reason}")
    pytest.skip(reason)


@pytest.fixture
def mpi():
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        _unavailable("mpi4py is not installed (pip install 'adcuda[distributed]')")
    beside_python = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    if not (os.access(beside_python, os.X_OK) or shutil.which("mpiexec")):
        _unavailable("no mpiexec beside this Python or on PATH")


def test_distributed_two_processes_train_digits_and_write_one_checkpoint(mpi, tmp_path):
    result = run_cli(
        "train",
        "--device",
        "cpu",
        "--distributed",
        "--nproc-per-node",
        "2",
        "--epochs",
        "2",
        "--batch-size",
        str(BATCH),
        "--out",
        "run",
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert "2 processes of 64 samples per step; 10 steps per epoch" in lines[0]  # ceil(629 / 64)
    assert sum(line.startswith("epoch ") for line in lines) == 2, "only rank 0 prints"
    accuracy = [float(line.split()[-1]) for line in lines if line.startswith("test accuracy:")]
    assert len(accuracy) == 1 and accuracy[0] > 0.5, result.stdout
    assert os.listdir(tmp_path / "run") == ["checkpoint.pt"]
    state = load(tmp_path / "run")
    assert state["epoch"] == 2 and state["config"]["world_size"] == 2 and state["config"]["distributed"]
    assert not any(name.startswith("module.") for name in state["model"]), "the checkpoint holds the bare model"


def test_distributed_outside_a_job_asks_for_nproc_per_node(tmp_path):
    env = child_env()
    for name in ("RANK", "WORLD_SIZE", "PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "SLURM_NTASKS"):
        env.pop(name, None)
    result = run_cli("train", "--distributed", "--out", "run", cwd=tmp_path, env=env)
    assert result.returncode == 2
    assert "add --nproc-per-node N to start N processes, or start them with mpirun -n N" in result.stderr
    assert not (tmp_path / "run").exists()


def test_nproc_per_node_must_match_the_job_it_runs_in(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(SystemExit) as exited:
        cli.main(["train", "--nproc-per-node", "3"])
    assert exited.value.code == 2
    assert "--nproc-per-node 3: this process already runs in a job of 2 processes" in capsys.readouterr().err


# ---------------------------------------------------------------------------------------------- --help and errors
def test_help_describes_the_new_options(capsys):
    with pytest.raises(SystemExit) as exited:
        cli.main(["train", "--help"])
    assert exited.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    for phrase in (
        "--amp",
        "float32 master weights",
        "--distributed",
        "--nproc-per-node N",
        "implies --distributed",
        "--nvtx",
        "nsys profile -t cuda,nvtx",
        "--profile ",
        "no checkpoint is written",
        "--profile-steps N",
        "(default: 5; implies --profile)",
        "--trace PATH",
        "<out>/trace.json",
    ):
        assert phrase in text, phrase


@pytest.mark.parametrize(
    "args, message",
    [
        (["--nproc-per-node", "0"], "--nproc-per-node: must be a positive integer"),
        (["--profile-steps", "0"], "--profile-steps: must be a positive integer"),
    ],
)
def test_bad_option_values(tmp_path, monkeypatch, capsys, args, message):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exited:
        cli.main(["train", *args])
    assert exited.value.code == 2
    assert message in capsys.readouterr().err
