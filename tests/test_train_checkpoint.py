"""Training checkpoints under damage: ``--resume`` names a bad field (exit 1, one line, no traceback),
and a save killed midway leaves a temporary file that the next save into the folder removes."""

import os
import signal
import subprocess
import sys
import time

import pytest

import adcuda
from adcuda.serialization import TEMP_PREFIX, remove_stale_temporaries
from adcuda.train import TASKS, TrainConfig, train
from adcuda.train.checkpoint import CheckpointInvalid, checkpoint_path, load_checkpoint

BATCH = 128  # 10 steps an epoch on the digits


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("run")
    train(TrainConfig(task="digits", out=str(out), epochs=1, batch_size=BATCH, quiet=True), TASKS["digits"])
    return out, adcuda.load(checkpoint_path(out))


def _tampered(run, tmp_path, change):
    _, state = run
    state = {**state, "config": dict(state["config"]), "optimizer": dict(state["optimizer"])}
    change(state)
    out = tmp_path / "bad"
    out.mkdir(exist_ok=True)
    adcuda.save(state, checkpoint_path(out))
    return out


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda s: s.update(epoch=-5), "'epoch' must be an int in 1..1"),
        (lambda s: s.update(epoch=7), "'epoch' must be an int in 1..1"),
        (lambda s: s.update(epoch="3"), "'epoch' must be an int"),
        (lambda s: s.update(epoch=True), "'epoch' must be an int"),
        (lambda s: s.pop("optimizer"), "'optimizer' must be a dict, got 'missing'"),
        (lambda s: s["optimizer"].pop("param_groups"), "'optimizer.param_groups'"),
        (lambda s: s["optimizer"].update(param_groups=[{"params": "x"}]), "'optimizer.param_groups'"),
        (lambda s: s["config"].update(lr=-1.0), "'config.lr' must be a finite number > 0"),
        (lambda s: s["config"].update(batch_size="big"), "'config.batch_size'"),
        (lambda s: s.update(model={"w": 3}), r"'model\['w'\]' must be a tensor"),
        (lambda s: s.update(rng={"default": [1]}), "'rng'"),
        (lambda s: s.update(history=None), "'history'"),
    ],
)
def test_resume_names_the_bad_field(run, tmp_path, change, field):
    out = _tampered(run, tmp_path, change)
    with pytest.raises(CheckpointInvalid, match=field):
        load_checkpoint(str(out), "cpu")


def test_a_checkpoint_in_adcudas_earlier_format_still_resumes(run, tmp_path):
    from adcuda.serialization import native

    _, state = run
    native.save(state, checkpoint_path(tmp_path))
    assert load_checkpoint(str(tmp_path), "cpu")["epoch"] == 1
    config = TrainConfig(task="digits", out=str(tmp_path), epochs=2, resume=True, quiet=True)
    assert "test_accuracy" in train(config, TASKS["digits"])


def test_model_and_optimizer_that_do_not_fit_are_named(run, tmp_path):
    def wrong_shape(state):
        state["model"] = dict(state["model"])
        key = next(iter(state["model"]))
        state["model"][key] = adcuda.zeros(3)

    out = _tampered(run, tmp_path, wrong_shape)
    config = TrainConfig(task="digits", out=str(out), resume=True, quiet=True)
    with pytest.raises(CheckpointInvalid, match="'model' does not fit"):
        train(config, TASKS["digits"])

    out = _tampered(run, tmp_path, lambda s: s["optimizer"].update(param_groups=s["optimizer"]["param_groups"][:1]))
    with pytest.raises(CheckpointInvalid, match="'optimizer' does not fit"):
        train(config, TASKS["digits"])


def test_cli_reports_a_bad_checkpoint_in_one_line(run, tmp_path):
    out = _tampered(run, tmp_path, lambda s: s.update(epoch="three"))
    result = subprocess.run(
        [sys.executable, "-m", "adcuda", "train", "--resume", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert "'epoch' must be an int" in result.stderr and len(result.stderr.strip().splitlines()) == 1


# ------------------------------------------------------------------------------------------ temporaries
_SLOW_SAVER = """
import sys, time
import adcuda
from adcuda.serialization import torch_format
real = torch_format._write_record
def slow(zf, fp, name, data):
    real(zf, fp, name, data)
    if name.endswith("data/0"):
        open(sys.argv[2], "w").close()
        time.sleep(60)
torch_format._write_record = slow
adcuda.save({"w": adcuda.zeros(100000)}, sys.argv[1])
"""


def _temporaries(folder):
    return sorted(name for name in os.listdir(folder) if name.startswith(TEMP_PREFIX))


def test_a_killed_save_leaves_a_temporary_that_the_next_save_removes(tmp_path):
    target = tmp_path / "model.pt"
    adcuda.save({"w": adcuda.ones(3)}, target)
    ready = tmp_path / "ready"
    child = subprocess.Popen([sys.executable, "-c", _SLOW_SAVER, str(target), str(ready)])
    try:
        deadline = time.monotonic() + 60
        while not ready.exists():
            assert child.poll() is None and time.monotonic() < deadline, "the saver never got midway"
            time.sleep(0.05)
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.wait()
    left = _temporaries(tmp_path)
    assert len(left) == 1 and left[0].startswith(f"{TEMP_PREFIX}{child.pid}-")
    assert adcuda.load(target)["w"].tolist() == [1.0, 1.0, 1.0]  # the old checkpoint is intact

    adcuda.save({"w": adcuda.ones(2)}, tmp_path / "other.pt")  # any save into the folder cleans up
    assert _temporaries(tmp_path) == []


def test_a_live_savers_temporary_is_left_alone(tmp_path):
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        live = tmp_path / f"{TEMP_PREFIX}{sleeper.pid}-0000abcd-model.pt"
        live.write_bytes(b"in progress")
        adcuda.save({"w": adcuda.ones(1)}, tmp_path / "model.pt")
        assert live.exists()  # another process is still writing it: a concurrent save, not debris
        assert remove_stale_temporaries(str(tmp_path), "model.pt") == []
    finally:
        sleeper.kill()
        sleeper.wait()
    assert remove_stale_temporaries(str(tmp_path), "model.pt") == [live.name]


def test_concurrent_savers_into_one_folder_never_remove_each_others_files(tmp_path):
    import threading

    errors = []

    def saver(i):
        try:
            for step in range(5):
                adcuda.save({"i": i, "step": step, "w": adcuda.ones(2000)}, tmp_path / f"m{i % 2}.pt")
        except Exception as error:  # any failure is the test's finding
            errors.append(error)

    threads = [threading.Thread(target=saver, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert _temporaries(tmp_path) == []
    assert adcuda.load(tmp_path / "m0.pt")["step"] == 4 and adcuda.load(tmp_path / "m1.pt")["step"] == 4
