"""adcuda.profiler.profile(): per-op table and Chrome trace of a training step; the profiler attaches
at the dispatch point only while it profiles and patches nothing, so the hot path is the same as
before."""

import json
import sys
import threading
import time

import pytest

import adcuda as torch
import adcuda.nn as nn
import adcuda.nn.functional as F
from adcuda.autograd import engine
from adcuda.backends import cpu
from adcuda.ops import dispatch
from adcuda.profiler import _state, emit_nvtx, instrument, profile, record_function
from adcuda.profiler.nvtx_ranges import enable_from_environment
from adcuda.utils.data import DataLoader, TensorDataset

BATCH, IN, HIDDEN, OUT = 8, 4, 16, 3


def make_step():
    torch.manual_seed(0)
    loader = DataLoader(
        TensorDataset(torch.randn(2 * BATCH, IN), torch.randint(0, OUT, (2 * BATCH,))), batch_size=BATCH
    )
    model = nn.Sequential(nn.Linear(IN, HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, OUT))
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

    def step():
        x, y = next(iter(loader))
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    step()  # warm up: first-use imports and allocations stay out of the measurement
    return step


def profiled_step(**options):
    step = make_step()
    start = time.perf_counter_ns()
    with profile(**options) as prof:
        step()
    wall_us = (time.perf_counter_ns() - start) / 1e3
    return prof, wall_us


def is_nested_or_disjoint(a, b):
    if a.end_ns <= b.start_ns or b.end_ns <= a.start_ns:
        return True
    return (a.start_ns <= b.start_ns and b.end_ns <= a.end_ns) or (b.start_ns <= a.start_ns and a.end_ns <= b.end_ns)


# ------------------------------------------------------------------------------------------------
# the training step's events
def test_every_op_of_the_step_is_recorded_with_its_backward():
    prof, _ = profiled_step(profile_memory=True)
    events = prof.events()
    ops = [e for e in events if e.kind == "op"]
    backward = [e for e in events if e.kind == "backward"]
    names = {e.name for e in events}
    assert {"linear", "relu", "cross_entropy", "getitem"} <= {e.name for e in ops}
    assert {
        "Optimizer.zero_grad#SGD.zero_grad",
        "Optimizer.step#SGD.step",
        "enumerate(DataLoader)#_SingleProcessIter.__next__",
    } <= names
    assert sum(e.name == "linear" for e in ops) == 2
    forward_by_seq = {e.sequence_nr: e.name for e in ops if e.sequence_nr >= 0}
    grads = [e for e in backward if e.name != "AccumulateGrad"]
    assert grads and all(e.sequence_nr in forward_by_seq for e in grads)
    assert {forward_by_seq[e.sequence_nr] for e in grads} == {"linear", "relu", "cross_entropy"}
    assert [e.name for e in grads if forward_by_seq[e.sequence_nr] == "relu"] == ["ReluBackward0"]
    assert sum(e.name == "AccumulateGrad" for e in backward) == 4
    # every op returned new memory and did its work through backend primitives
    relu = next(e for e in ops if e.name == "relu")
    assert relu.cpu_memory_usage == BATCH * HIDDEN * 4
    assert relu.launches == 1
    assert all(e.launches >= 1 for e in ops if e.name in ("linear", "cross_entropy"))


def test_times_are_non_negative_and_fit_in_the_step():
    prof, wall_us = profiled_step()
    events = prof.events()
    assert events
    for e in events:
        assert 0 <= e.self_cpu_time_total <= e.cpu_time_total + 1e-9
        assert e.cpu_time_total >= 0
    assert events.self_cpu_time_total <= wall_us
    # ranges on one thread nest or follow each other; they never overlap partly
    for i, a in enumerate(events):
        for b in events[i + 1 :]:
            if a.thread == b.thread:
                assert is_nested_or_disjoint(a, b), (a, b)
    outermost = [
        e for e in events if not any(o is not e and o.start_ns <= e.start_ns and e.end_ns <= o.end_ns for o in events)
    ]
    assert sum(e.cpu_time_total for e in outermost) <= wall_us


def test_user_range_self_time_excludes_what_runs_inside():
    x = torch.ones(64, 64)
    with profile() as prof:
        with record_function("outer"):
            with record_function("inner"):
                x @ x
            x + x
    by_name = {e.name: e for e in prof.events()}
    outer, inner, mm, add = by_name["outer"], by_name["inner"], by_name["matmul"], by_name["add"]
    assert inner.self_ns == inner.end_ns - inner.start_ns - (mm.end_ns - mm.start_ns)
    children = (inner.end_ns - inner.start_ns) + (add.end_ns - add.start_ns)
    assert outer.self_ns == outer.end_ns - outer.start_ns - children
    assert (outer.launches, outer.self_launches, inner.launches) == (2, 0, 1)


def test_nested_ops_are_counted_once():
    x = torch.randn(3, 4, requires_grad=True)
    with profile() as prof:
        torch.nn.functional.linear(x, torch.ones(5, 4), torch.ones(5))  # runs matmul and add inside
    assert [e.name for e in prof.events()] == ["ones", "ones", "linear"]


def test_sequence_numbers_only_where_a_node_is_recorded():
    x = torch.ones(3, requires_grad=True)
    with profile() as prof:
        y = x * 2
        with torch.no_grad():
            x * 3
    mul_grad, mul_no_grad = [e for e in prof.events() if e.name == "mul"]
    assert mul_grad.sequence_nr >= 0 and mul_no_grad.sequence_nr == -1
    with profile() as prof:
        y.sum().backward()
    backward = [e for e in prof.events() if e.name == "MulBackward0"]
    assert [e.sequence_nr for e in backward] == [mul_grad.sequence_nr]


def test_record_shapes_and_with_stack():
    prof, _ = profiled_step(record_shapes=True, with_stack=True)
    linear = [e for e in prof.events() if e.name == "linear"]
    assert [e.input_shapes for e in linear] == [
        [[BATCH, IN], [HIDDEN, IN], [HIDDEN]],
        [[BATCH, HIDDEN], [OUT, HIDDEN], [OUT]],
    ]
    assert all(e.stack and e.stack[0].startswith(__file__) for e in linear)
    grouped = prof.key_averages(group_by_input_shape=True)
    assert sum(a.key == "linear" for a in grouped) == 2
    assert "Input Shapes" in grouped.table()
    with pytest.raises(ValueError, match="record_shapes"):
        profiled_step()[0].key_averages(group_by_input_shape=True)


def test_launches_count_backend_primitive_calls():
    x, y = torch.ones(4), torch.ones(4)
    with profile() as prof:
        x + y
        x.reshape(2, 2)
        x.softmax(0)
    add, reshape, softmax = prof.events()
    assert (add.name, add.launches) == ("add", 1)  # one ``binary``
    assert (reshape.name, reshape.launches) == ("reshape", 1)  # one ``view``
    assert softmax.name == "softmax" and softmax.launches >= 1


# ------------------------------------------------------------------------------------------------
# table and trace
def test_table_lists_every_op_sorted():
    prof, _ = profiled_step(profile_memory=True)
    averages = prof.key_averages()
    table = averages.table(sort_by="cpu_time_total", row_limit=100)
    header = table.splitlines()[1]
    for column in ("Name", "Self CPU %", "Self CPU", "CPU total", "CPU time avg", "CPU Mem", "Launches", "# of Calls"):
        assert column in header
    for a in averages:
        assert a.key[:40] in table
    linear = next(a for a in averages if a.key == "linear")
    assert linear.count == 2
    totals = [a.cpu_time_total for a in sorted(averages, key=lambda a: a.cpu_time_total, reverse=True)]
    assert totals == sorted(totals, reverse=True)
    rows = table.splitlines()[3:-2]
    assert [r.split()[0] for r in rows] == [
        a.key.split()[0] for a in sorted(averages, key=lambda a: a.cpu_time_total, reverse=True)
    ]
    assert len(averages.table(row_limit=3).splitlines()) == 3 + 3 + 2
    with pytest.raises(ValueError, match="sort_by"):
        averages.table(sort_by="gpu_time")


def test_chrome_trace_loads_with_forward_and_backward_events(tmp_path):
    done = threading.Event()
    main_thread = threading.get_native_id()
    with profile(record_shapes=True) as prof:
        x, y = next(
            iter(DataLoader(TensorDataset(torch.randn(BATCH, IN), torch.randint(0, OUT, (BATCH,))), batch_size=BATCH))
        )
        loss = F.cross_entropy(nn.Linear(IN, OUT)(x), y)
        # backward on another thread: its events go on that thread's track
        worker = threading.Thread(target=lambda: (loss.backward(), done.set()), name="backward-thread")
        worker.start()
        worker.join()
    assert done.is_set()
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    trace = json.loads(path.read_text())
    complete = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert len(complete) == len(prof.events())
    for e in complete:
        assert {"name", "cat", "ts", "dur", "pid", "tid", "args"} <= set(e)
        assert e["dur"] >= 0 and e["ts"] >= 0
    forward = [e for e in complete if e["cat"] == "cpu_op"]
    backward = [e for e in complete if e["cat"] == "autograd"]
    assert {e["tid"] for e in forward if e["name"] in ("linear", "cross_entropy", "getitem")} == {main_thread}
    assert {e["tid"] for e in backward} == {worker.native_id}
    assert "linear" in {e["name"] for e in forward} and "CrossEntropyLossBackward0" in {e["name"] for e in backward}
    forward_seqs = {e["args"]["Sequence number"] for e in forward if "Sequence number" in e["args"]}
    assert all(e["args"]["Sequence number"] in forward_seqs for e in backward if e["name"] != "AccumulateGrad")
    linear = next(e for e in forward if e["name"] == "linear")
    assert linear["args"]["Input Dims"] == [[BATCH, IN], [OUT, IN], [OUT]]
    names = {e["args"]["name"] for e in trace["traceEvents"] if e["ph"] == "M" and e["name"] == "thread_name"}
    assert "backward-thread" in names
    with pytest.raises(TypeError):
        prof.key_averages().export_chrome_trace(str(path))


# ------------------------------------------------------------------------------------------------
# zero cost when off
def _snapshot():
    owners = [
        m
        for name, m in list(sys.modules.items())
        if m is not None and name.startswith("adcuda") and not name.startswith("adcuda.profiler")
    ]
    owners += [torch.Tensor, torch.optim.Optimizer, torch.optim.SGD, torch.optim.Adam]
    owners += [c for c in vars(sys.modules["adcuda.utils.data.dataloader"]).values() if isinstance(c, type)]
    return {id(o): (o, dict(vars(o))) for o in owners}


def _assert_unchanged(before):
    after = _snapshot()
    changed = [
        (o, k) for key, (o, attrs) in before.items() for k, v in attrs.items() if vars(after[key][0]).get(k) is not v
    ]
    assert not changed


def test_profiling_patches_nothing_and_detaches_when_it_ends():
    make_step()()
    with profile():
        pass  # loads what a session loads (nn.functional, the CPU backend)
    before = _snapshot()
    add, matmul, binary, linear = torch.Tensor.__add__, torch.Tensor.__matmul__, cpu.binary, F.linear
    assert torch.add is add and not dispatch._hooks
    with profile() as prof:
        # the ops and the backend's primitives stay the functions they are: the profiler is a hook
        assert torch.Tensor.__add__ is add and torch.add is add and F.linear is linear
        assert torch.Tensor.__matmul__ is matmul and cpu.binary is binary
        assert engine.backward_observer is not None and instrument.is_installed()
        make_step()()
    assert {"linear", "AddmmBackward0"} <= {e.name for e in prof.events()}
    _assert_unchanged(before)
    assert torch.Tensor.__add__ is add and cpu.binary is binary and not dispatch._hooks
    assert engine.backward_observer is None and not instrument.is_installed()


def test_restored_after_an_exception_and_ranges_stay_balanced():
    with profile():
        pass
    before = _snapshot()
    with pytest.raises(ValueError):
        with profile() as prof:
            with record_function("failing"):
                torch.ones(2) + torch.ones(3)
    _assert_unchanged(before)
    names = [e.name for e in prof.events()]
    assert names == ["failing", "ones", "ones", "add"]
    assert _state.thread.depth == 0 and _state.thread.open_ranges == []


def test_nested_sessions_detach_when_the_outermost_ends():
    with profile() as outer:
        with profile() as inner:
            torch.ones(2) * 2
        assert instrument.is_installed()
        torch.ones(2) - 1
    assert not instrument.is_installed() and not dispatch._hooks
    assert [e.name for e in inner.events()] == ["ones", "mul"]
    assert [e.name for e in outer.events()] == ["ones", "mul", "ones", "sub"]
    with pytest.raises(RuntimeError, match="already recorded"):
        with outer:
            pass


def test_ops_on_other_threads_are_recorded_on_their_thread():
    results = {}

    def work(tag):
        x = torch.ones(8)
        for _ in range(50):
            x = x + 1
        results[tag] = threading.get_native_id()

    with profile() as prof:
        threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    adds = [e for e in prof.events() if e.name == "add"]
    assert len(adds) == 100
    assert {e.thread for e in adds} == set(results.values())


def test_disabled_profile_records_nothing():
    with profile(enabled=False) as prof:
        assert not instrument.is_installed()
        torch.ones(2) + 1
    assert list(prof.events()) == []


# ------------------------------------------------------------------------------------------------
# NVTX without a tool or without the package (the ranges themselves are checked in test_nvtx.py)
def test_emit_nvtx_without_an_attached_tool_changes_nothing():
    pytest.importorskip("nvtx")
    with emit_nvtx():
        assert not instrument.is_installed()


def test_emit_nvtx_without_the_nvtx_package_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "nvtx", None)
    with pytest.raises(ImportError, match="pip install nvtx"):
        with emit_nvtx():
            pass
    assert not instrument.is_installed()
    with emit_nvtx(enabled=False):
        pass
    with profile() as prof:
        torch.ones(2)
    assert [e.name for e in prof.events()] == ["ones"]


def test_adcuda_nvtx_values():
    enable_from_environment({"ADCUDA_NVTX": "0"})
    with pytest.raises(ValueError, match="ADCUDA_NVTX"):
        enable_from_environment({"ADCUDA_NVTX": "maybe"})
