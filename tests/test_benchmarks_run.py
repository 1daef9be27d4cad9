"""benchmarks/run.py: its JSON report has the structure README.md documents (the suites themselves
are benchmarks, run by hand or on a GPU machine, not in the test suite)."""
import importlib.util
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RUN = os.path.join(ROOT, "benchmarks", "run.py")


def load_runner():
    spec = importlib.util.spec_from_file_location("bench_run", RUN)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_report_structure_for_a_suite_that_does_not_fit_the_device(tmp_path):
    out = tmp_path / "bench.json"
    proc = subprocess.run([sys.executable, RUN, "--device", "cpu", "--suites", "gemm,cuda_runtime", "--json",
                           str(out)], capture_output=True, text=True, timeout=120)
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
    result = {"rows": [{"case": "add", "seconds": {"adcuda": 2e-6, "torch": 1e-6},
                        "ratio_adcuda_over": {"torch": 2.0}}]}
    assert runner._ratio_rows("dispatch", result) == [("dispatch: add", "torch", 2.0)]
    assert runner._ratio_rows("amp", {"timing": []}) == []


def test_unknown_suite_is_a_usage_error():
    proc = subprocess.run([sys.executable, RUN, "--suites", "nope"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "unknown suite" in proc.stderr
