"""benchmarks/run.py: its JSON report has the structure README.md documents (the suites themselves
are benchmarks, run by hand or on a GPU machine, not in the test suite)."""

import json
import os
import subprocess
import sys

from helpers import load_module

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RUN = os.path.join(ROOT, "benchmarks", "run.py")


def load_runner():
    return load_module("bench_run", RUN)


def run_suites_on_the_cpu(tmp_path, suites, env=None):
    """(the finished ``benchmarks/run.py --device cpu --suites SUITES`` process, its JSON report's path)."""
    out = tmp_path / "bench.json"
    proc = subprocess.run(
        [sys.executable, RUN, "--device", "cpu", "--suites", suites, "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    return proc, out


def test_report_structure_for_a_suite_that_does_not_fit_the_device(tmp_path):
    proc, out = run_suites_on_the_cpu(tmp_path, "gemm,cuda_runtime")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(out.read_text())
    assert report["schema"] == 1 and report["device"] == "cpu" and report["quick"] is False
    assert {"date", "machine", "suites"} <= set(report)
    assert {"python", "platform", "cpus"} <= set(report["machine"])
    for name in ("gemm", "cuda_runtime"):
        suite = report["suites"][name]
        assert suite["status"] == "skipped" and "cuda" in suite["reason"]
        assert suite["script"].startswith("bench_") and suite["device"] == "cpu"


def test_ratio_rows_come_from_the_suites_rows():
    runner = load_runner()
    result = {
        "rows": [{"case": "add", "seconds": {"adcuda": 2e-6, "torch": 1e-6}, "ratio_adcuda_over": {"torch": 2.0}}]
    }
    assert runner._ratio_rows("dispatch", result) == [("dispatch: add", "torch", 2.0)]
    assert runner._ratio_rows("amp", {"timing": []}) == []


def test_ratio_rows_never_crash_on_a_suites_output():
    runner = load_runner()
    row = {"case": "add", "ratio_adcuda_over": {"torch": 2.0}}
    # rows grouped by table title (what bench_profiler_overhead.py used to write) are read too
    assert runner._ratio_rows("s", {"rows": {"table": [row]}}) == [("s: table: add", "torch", 2.0)]
    for odd in (
        {"rows": ["add", "sub"]},
        {"rows": {"title": "text"}},
        {"rows": "add"},
        {"rows": None},
        ["rows"],
        "text",
        None,
        {"rows": [{"case": "x", "ratio_adcuda_over": "fast"}]},
        {"rows": [{"case": "x", "ratio_adcuda_over": {"torch": "2x", "numpy": None}}]},
    ):
        assert runner._ratio_rows("s", odd) == []


def fake_suite(tmp_path, monkeypatch, runner, body, **fields):
    (tmp_path / "bench_fake.py").write_text(body)
    monkeypatch.setattr(runner, "HERE", str(tmp_path))
    monkeypatch.setitem(runner.SUITES, "fake", runner.Suite("bench_fake.py", ("cpu",), False, **fields))


def test_a_missing_optional_dependency_is_skipped_with_the_reason(tmp_path, monkeypatch):
    runner = load_runner()
    fake_suite(
        tmp_path,
        monkeypatch,
        runner,
        "raise SystemExit('must not run')\n",
        requires=("adcuda_no_such_module",),
        install="pip install it",
    )
    record = runner.run_suite("fake", "cpu", quick=True, timeout=60)
    assert record["status"] == "skipped"
    assert record["reason"] == "needs adcuda_no_such_module, which is not installed (pip install it)"


def test_a_suite_that_exits_77_is_skipped_with_its_last_stderr_line(tmp_path, monkeypatch):
    runner = load_runner()
    fake_suite(tmp_path, monkeypatch, runner, "import sys\nprint('no mpiexec found', file=sys.stderr)\nsys.exit(77)\n")
    record = runner.run_suite("fake", "cpu", quick=True, timeout=60)
    assert record["status"] == "skipped" and record["reason"] == "no mpiexec found"


def test_a_suite_that_fails_is_reported_failed_and_the_run_still_summarises(tmp_path, monkeypatch, capsys):
    runner = load_runner()
    fake_suite(tmp_path, monkeypatch, runner, "raise RuntimeError('broken')\n")
    assert runner.main(["--device", "cpu", "--suites", "fake", "--json", str(tmp_path / "r.json")]) == 1
    assert json.loads((tmp_path / "r.json").read_text())["suites"]["fake"]["status"] == "failed"
    assert "fake                 failed" in capsys.readouterr().out


def test_distributed_suite_without_mpi4py_is_skipped_not_failed(tmp_path):
    """The real suite, in a Python where importing mpi4py is impossible (a stand-in module path first)."""
    blocker = tmp_path / "blocker"
    blocker.mkdir()
    (blocker / "sitecustomize.py").write_text(
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'mpi4py':\n"
        "            raise ImportError('mpi4py is blocked for this test')\n"
        "sys.meta_path.insert(0, Block())\n"
    )
    env = {**os.environ, "PYTHONPATH": str(blocker) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc, out = run_suites_on_the_cpu(tmp_path, "distributed", env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    suite = json.loads(out.read_text())["suites"]["distributed"]
    assert suite["status"] == "skipped" and "mpi4py" in suite["reason"]
    assert "Traceback" not in proc.stdout + proc.stderr


def test_unknown_suite_is_a_usage_error():
    proc = subprocess.run([sys.executable, RUN, "--suites", "nope"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "unknown suite" in proc.stderr


def load_harness():
    return load_module("bench_harness", os.path.join(ROOT, "benchmarks", "_harness.py"))


def test_contenders_results_nested_in_dicts_keep_their_best_over_rounds(tmp_path):
    """bench_amp's contenders print ``{"times": {...}, "memory": {...}}``: one round or several, each figure
    keeps its least value (the run once failed comparing two dicts)."""
    harness = load_harness()
    script = tmp_path / "bench_nested.py"
    script.write_text(
        "import json, os\n"
        "path = os.path.join(os.path.dirname(__file__), 'round')\n"
        "n = int(open(path).read()) if os.path.exists(path) else 0\n"
        "open(path, 'w').write(str(n + 1))\n"
        "print(json.dumps({'times': {'step': [3.0, 1.0, 2.0][n]}, 'memory': {'bytes': 8}, 'flat': 5.0 - n}))\n"
    )
    assert harness.run_contenders(str(script), ["adcuda"], rounds=1) == {
        "adcuda": {"times": {"step": 3.0}, "memory": {"bytes": 8}, "flat": 5.0}
    }
    assert harness.run_contenders(str(script), ["adcuda"], rounds=2) == {
        "adcuda": {"times": {"step": 1.0}, "memory": {"bytes": 8}, "flat": 3.0}
    }


def test_smoke_runs_each_suite_quick_with_bench_smoke_set(tmp_path, monkeypatch):
    runner = load_runner()
    monkeypatch.setenv("BENCH_SMOKE", "0")  # main() sets it to "1"; monkeypatch puts it back afterwards
    fake_suite(
        tmp_path,
        monkeypatch,
        runner,
        "import json, os, sys\n"
        "out = sys.argv[sys.argv.index('--json') + 1]\n"
        "json.dump({'argv': sys.argv[1:], 'smoke': os.environ.get('BENCH_SMOKE')}, open(out, 'w'))\n",
    )
    assert runner.main(["--device", "cpu", "--suites", "fake", "--smoke", "--json", str(tmp_path / "r.json")]) == 0
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["quick"] is True and report["smoke"] is True
    result = report["suites"]["fake"]["result"]
    assert "--quick" in result["argv"] and result["smoke"] == "1"
    harness = load_harness()
    calls = []
    assert harness.median_time(lambda: calls.append(1), repeat=9) >= 0 and len(calls) == 3  # warm-up, sizing, one timed


def test_the_per_op_dispatch_table_covers_every_public_op_and_each_call_runs():
    """bench_dispatch.py's per-op table (benchmarks/dispatch_ops.py): a new public op needs a spec (or a
    signature its call can be made from), and every spec runs in adcuda as written."""
    sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
    try:
        import dispatch_ops
    finally:
        sys.path.pop(0)
    import adcuda
    from adcuda.ops import registry

    assert dispatch_ops.uncovered() == []
    public = {op.name for op in registry.all_ops() if dispatch_ops._public(op)}
    assert public <= set(dispatch_ops.specs())
    failed = {}
    for name, call in dispatch_ops.calls(adcuda).items():
        try:
            call()
        except Exception as error:  # noqa: BLE001 (each failing spec is listed)
            failed[name] = f"{type(error).__name__}: {error}"
    assert failed == {}
