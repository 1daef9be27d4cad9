"""NVTX ranges, checked without a GPU or Nsight: an NVTX tool built here (tests/nvtx_injection)
is loaded through NVTX_INJECTION64_PATH, as Nsight Systems loads its own, and logs every range
push and pop that reaches it while a training step runs."""

import collections
import importlib.util
import os
import re
import subprocess
import sys

import pytest
from helpers import load_module

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
SCRIPT = os.path.join(HERE, "nvtx_injection", "train_step.py")

build = load_module("nvtx_injection_build", os.path.join(HERE, "nvtx_injection", "build.py"))

pytestmark = pytest.mark.skipif(importlib.util.find_spec("nvtx") is None, reason="the nvtx package is not installed")


@pytest.fixture(scope="module")
def recorder(tmp_path_factory):
    if build.compiler() is None:
        pytest.skip("no C compiler to build the NVTX recorder")
    return build.build_recorder(str(tmp_path_factory.mktemp("nvtx")))


Call = collections.namedtuple("Call", "event thread domain message")


def run_step(recorder, tmp_path, mode, **env):
    log = tmp_path / f"nvtx-{mode}.log"
    if log.exists():
        log.unlink()  # the recorder creates it only when an NVTX call reaches it
    environ = dict(
        os.environ,
        NVTX_INJECTION64_PATH=recorder,
        NVTX_RECORDER_OUTPUT=str(log),
        PYTHONPATH=os.pathsep.join(filter(None, [REPO, os.environ.get("PYTHONPATH")])),
    )
    environ.pop("ADCUDA_NVTX", None)
    environ.update(env)
    proc = subprocess.run([sys.executable, SCRIPT, mode], env=environ, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "the failing op raised" in proc.stdout
    calls = []
    if log.exists():
        for line in log.read_text().splitlines():
            event, thread, domain, *rest = line.split("\t")
            calls.append(Call(event, int(thread), domain, rest[-1] if rest else None))
    return calls


def ranges(calls):
    """Match pushes with pops per thread; every pop must close an open range and none may stay open.
    Returns (name, depth, names of the enclosing ranges) per range, in push order."""
    stacks = collections.defaultdict(list)
    out = []
    for c in calls:
        stack = stacks[(c.thread, c.domain)]
        if c.event == "push":
            out.append((c.message, len(stack), [m for m in stack]))
            stack.append(c.message)
        elif c.event == "pop":
            assert stack, f"pop without a matching push on thread {c.thread}"
            stack.pop()
    assert all(not s for s in stacks.values()), f"ranges left open: {dict(stacks)}"
    return out


SEQ = re.compile(r"^(?P<name>[^,]+)(?:, seq = (?P<seq>\d+))?(?:, sizes = (?P<sizes>.*))?$")


def parse(message):
    m = SEQ.match(message)
    return m["name"], (int(m["seq"]) if m["seq"] else None), m["sizes"]


def test_training_step_emits_balanced_named_ranges(recorder, tmp_path):
    calls = run_step(recorder, tmp_path, "nvtx")
    assert {c.domain for c in calls} == {"adcuda"}
    assert {c.event for c in calls} == {"push", "pop"}
    found = ranges(calls)
    names = [parse(m)[0] for m, _, _ in found]
    for op in ("linear", "relu", "cross_entropy", "getitem", "add"):
        assert op in names, op
    for library_range in (
        "train_step",
        "Optimizer.step#SGD.step",
        "Optimizer.zero_grad#SGD.zero_grad",
        "enumerate(DataLoader)#_SingleProcessIter.__next__",
    ):
        assert library_range in names, library_range
    # the samples are fetched (TensorDataset's getitem) inside the DataLoader's range, the step inside
    # train_step
    fetch_ranges = [enclosing for m, _, enclosing in found if parse(m)[0] == "getitem"]
    assert fetch_ranges and all(e[-1] == "enumerate(DataLoader)#_SingleProcessIter.__next__" for e in fetch_ranges)
    linear_ranges = [(depth, enclosing) for m, depth, enclosing in found if parse(m)[0] == "linear"]
    assert all(enclosing == ["train_step"] for _, enclosing in linear_ranges)
    # only the outermost op gets a range: nothing nests inside an op's range
    op_names = {"linear", "relu", "cross_entropy"}
    assert not any(enclosing and parse(enclosing[-1])[0] in op_names for _, _, enclosing in found)


def test_forward_and_backward_ranges_share_sequence_numbers(recorder, tmp_path):
    found = [parse(m) for m, _, _ in ranges(run_step(recorder, tmp_path, "nvtx"))]
    forward = {seq: name for name, seq, _ in found if seq is not None and not name.endswith("Backward0")}
    backward = [(name, seq) for name, seq, _ in found if name.endswith("Backward0")]
    assert {forward[s] for s in {seq for _, seq in backward}} == {"linear", "relu", "cross_entropy"}
    assert all(seq in forward for _, seq in backward), (forward, backward)
    by_op = collections.defaultdict(set)
    for name, seq in backward:
        by_op[forward[seq]].add(name)
    assert by_op["relu"] == {"ReluBackward0"}
    assert "CrossEntropyLossBackward0" in by_op["cross_entropy"]
    assert len({seq for seq, op in forward.items() if op == "linear"}) == 2  # two layers, two numbers
    # four parameters, four gradient accumulations (no sequence number, like PyTorch's)
    assert sum(name == "AccumulateGrad" for name, _, _ in found) == 4
    # the backward of each op runs after its forward, in reverse order
    order = [seq for name, seq, _ in found if name.endswith("Backward0")]
    assert order == sorted(order, reverse=True)


def test_record_shapes_puts_sizes_in_the_names(recorder, tmp_path):
    found = [parse(m) for m, _, _ in ranges(run_step(recorder, tmp_path, "shapes"))]
    linear_sizes = [sizes for name, _, sizes in found if name == "linear"]
    assert linear_sizes == ["[[8, 4], [16, 4], [16]]", "[[8, 16], [3, 16], [3]]"]


def test_ranges_named_after_the_op_alone(recorder, tmp_path):
    named = [m for m, _, _ in ranges(run_step(recorder, tmp_path, "names"))]
    with_seq = [m for m, _, _ in ranges(run_step(recorder, tmp_path, "nvtx"))]
    assert named == [parse(m)[0] for m in with_seq]
    assert named.count("linear") == 2 and "ReluBackward0" in named


def test_no_ranges_when_nvtx_is_off(recorder, tmp_path):
    assert run_step(recorder, tmp_path, "off") == []


def test_adcuda_nvtx_environment_variable_turns_ranges_on(recorder, tmp_path):
    calls = run_step(recorder, tmp_path, "env", ADCUDA_NVTX="1")
    names = [parse(m)[0] for m, _, _ in ranges(calls)]
    assert {"linear", "relu", "cross_entropy", "Optimizer.step#SGD.step", "ReluBackward0"} <= set(names)
    assert run_step(recorder, tmp_path, "env", ADCUDA_NVTX="0") == []
