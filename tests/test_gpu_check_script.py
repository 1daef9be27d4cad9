"""scripts/gpu_check.sh on a machine without a GPU, with a stand-in interpreter and stand-in tools: the
preflight stops at what is missing, the steps run in their order, each benchmark's JSON is merged as
soon as it finishes, a step whose tests or benchmarks all skipped fails the run, and OUTDIR keeps to
8 files. (The real run, against the emulated build, is the rehearsal .ci/run makes:
ADCUDA_GPU_CHECK_EMULATED=1 bash scripts/gpu_check.sh OUTDIR.)"""

import json
import os
import pathlib
import re
import shutil
import signal
import subprocess
import sys
import textwrap

import pytest

REPO = pathlib.Path(__file__).resolve().parent.parent
SCRIPT = REPO / "scripts" / "gpu_check.sh"
sys.path.insert(0, str(REPO / "scripts"))
import gpu_check_report as report  # noqa: E402

pytestmark = pytest.mark.skipif(
    shutil.which("bash") is None or shutil.which("timeout") is None, reason="needs bash and coreutils' timeout"
)

# The stand-in interpreter: the report helper runs on the real Python; every other call is logged to
# $FAKE_LOG and answers as the FAKE_* variables say.
FAKE_PYTHON = textwrap.dedent(f"""\
    #!/usr/bin/env bash
    case "$1" in
      *gpu_check_report.py) exec {sys.executable} "$@" ;;
    esac
    echo "$*" >>"$FAKE_LOG"
    case "$*" in
      "-c "*"scikit_build_core"*)
        for name in $FAKE_MISSING; do echo "python package $name (ModuleNotFoundError: No module named '$name')"; done
        echo "xdist timeout" ;;
      "-m pip install"*) echo "Successfully installed adcuda" ;;
      "-m adcuda info") echo "running on: cuda:0 (NVIDIA H200 runs this build's kernels)" ;;
      "-c "*"gpu_check: cuda usable"*) echo "gpu_check: cuda usable: True | reason: None | emulated: False" ;;
      *bench_*.py*)
        json=${{@: -1}}
        suite=$(basename "$1" .py); suite=${{suite#bench_}}
        sleep "${{FAKE_BENCH_SLEEP:-0}}"
        case " $FAKE_BENCH_SKIP " in *" $suite "*) echo "bench_$suite needs a GPU: no device"; exit 0 ;; esac
        printf '{{"suite": "%s", "rows": [{{"case": "copy 256 MiB", "seconds": {{"adcuda": 0.001, "torch": 0.002}},
          "ratio_adcuda_over": {{"torch": 0.5}}}}], "bytes_moved": {{"copy 256 MiB": 536870912}},
          "copy_bandwidth_bytes_per_s": 600000000000}}' "$suite" >"$json"
        echo "bench_$suite: 1 case" ;;
      "-P -m pytest"*"-k out_of_memory"*)  # the tests that fill the device, run alone
        echo "${{FAKE_PYTEST_SERIAL:-2 passed, 4010 deselected in 3.00s}}" ;;
      "-P -m pytest"*)
        sleep "${{FAKE_PYTEST_SLEEP:-0}}"
        echo "${{FAKE_PYTEST:-4000 passed, 12 skipped in 100.00s}}"
        exit "${{FAKE_PYTEST_STATUS:-0}}" ;;
      *cuda_runtime_workload.py) echo "cuda runtime workload: all results right (41 checks)" ;;
      *) echo "fake python: unexpected call: $*" >&2; exit 99 ;;
    esac
    """)

TOOLS = {
    "nvidia-smi": 'echo "NVIDIA H200, 9.0, 570.86, 143771 MiB"',
    "nvcc": 'echo "Cuda compilation tools, release 13.0, V13.0.88"',
    "cmake": 'echo "cmake version 3.31.6"',
    "ninja": 'echo "1.12.1"',
    # runs the program it is given, then reports as compute-sanitizer does
    "compute-sanitizer": 'echo "sanitizer $2" >>"$FAKE_LOG"; shift 6; "$@"; echo "========= ERROR SUMMARY: 0 errors"',
}


def install_fakes(tmp_path, tools=TOOLS):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, body in {**tools, "python": None}.items():
        path = bin_dir / name
        path.write_text(FAKE_PYTHON if name == "python" else f"#!/usr/bin/env bash\n{body}\n")
        path.chmod(0o755)
    return bin_dir


def run_check(tmp_path, budget=120, timeout=120, tools=TOOLS, **fake):
    bin_dir = install_fakes(tmp_path, tools)
    out = tmp_path / "out"
    log = tmp_path / "calls.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GPU_CHECK", "ADCUDA_GPU_CHECK", "FAKE_"))}
    env.update(
        {
            "PATH": f"{bin_dir}:/usr/bin:/bin",
            "PYTHON": str(bin_dir / "python"),
            "FAKE_LOG": str(log),
            "GPU_CHECK_BUDGET": str(budget),
            "GPU_CHECK_WHEELS": str(tmp_path / "no-wheels"),
        }
    )
    env.update({f"FAKE_{k.upper()}": str(v) for k, v in fake.items()})
    # its own process group, so that a run cut short takes its children (sleeping stand-ins) along
    process = subprocess.Popen(
        ["bash", str(SCRIPT), str(out)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        output, _ = process.communicate(timeout=timeout)
        status = process.returncode
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        output, _ = process.communicate()
        status = None
    calls = log.read_text().splitlines() if log.exists() else []
    summary = (out / "summary.md").read_text() if (out / "summary.md").exists() else ""
    return status, output, calls, summary, out


def test_a_missing_package_stops_the_preflight_before_anything_is_built(tmp_path):
    status, output, calls, summary, out = run_check(tmp_path, missing="torch nvtx")
    assert status != 0
    assert "| preflight | FAILED |" in summary
    assert "python package torch (ModuleNotFoundError" in summary and "python package nvtx" in summary
    assert not any(c.startswith("-m pip install") for c in calls), "nothing may be built after a failed preflight"
    assert sorted(p.name for p in out.iterdir()) == ["build.log", "summary.md"]


def test_a_missing_tool_stops_the_preflight(tmp_path):
    tools = {k: v for k, v in TOOLS.items() if k != "nvidia-smi"}
    status, _, calls, summary, _ = run_check(tmp_path, tools=tools)
    assert status != 0 and "nvidia-smi or a visible GPU" in summary
    assert not any(c.startswith("-m pip install") for c in calls)


def test_steps_run_in_order_and_build_for_the_detected_architecture_only(tmp_path):
    status, output, calls, summary, out = run_check(tmp_path)
    assert status == 0, output + summary
    kinds = []
    for call in calls:
        for marker, kind in (
            ("-m pip install", "build"),
            ("-m adcuda info", "info"),
            ("bench_cuda_runtime", "bench"),
            ("bench_amp", "bench"),
            ("-P -m pytest", "tests"),
            ("sanitizer memcheck", "memcheck"),
            ("sanitizer racecheck", "racecheck"),
            ("sanitizer synccheck", "synccheck"),
        ):
            if marker in call and (not kinds or kinds[-1] != kind):
                kinds.append(kind)
    assert kinds == ["build", "info", "bench", "tests", "memcheck", "racecheck", "synccheck"], calls
    build = next(c for c in calls if c.startswith("-m pip install"))
    assert "--no-build-isolation" in build and "--no-deps" in build and "gpu-check-sm90" in build
    assert "ADCUDA_CUDA_ARCHS=90a-real" in (out / "build.log").read_text()
    parallel_call, serial_call = [c for c in calls if c.startswith("-P -m pytest")]
    assert "-m cuda" in parallel_call and "-rfEs" in parallel_call and "--timeout" in parallel_call
    assert " -n " in parallel_call and "-k not (out_of_memory)" in parallel_call
    assert " -n " not in serial_call and "-k out_of_memory" in serial_call
    for step in (
        "preflight",
        "build",
        "info",
        "bench:cuda_runtime",
        "bench:kernels",
        "bench:nn_kernels",
        "bench:gemm",
        "bench:amp",
        "tests",
        "memcheck",
        "racecheck",
        "synccheck",
    ):
        assert f"| {step} | OK |" in summary
    assert "| tests | OK |" in summary and "4000 passed, 12 skipped in 100.00s + 2 passed, 4010 deselected" in summary
    assert "| copy 256 MiB | 1000.00 | 2000.00 | 0.50x | 536.9 | 89.5% |" in summary  # ratios and % of copy
    assert len(list(out.iterdir())) <= 8


def test_each_benchmark_is_in_the_json_as_soon_as_it_finishes(tmp_path):
    # the run is killed in the middle of the tests: every suite's results are on disk already
    status, _, calls, summary, out = run_check(tmp_path, timeout=10, pytest_sleep=60)
    assert status is None, "the run should have been cut short"
    bench = json.loads((out / "bench.json").read_text())
    assert sorted(bench["suites"]) == [
        "amp",
        "attention",
        "conv",
        "cuda_graphs",
        "cuda_runtime",
        "gemm",
        "gpt2_step",
        "kernels",
        "nn_kernels",
        "rnn",
    ]
    assert all(record["status"] == "ok" for record in bench["suites"].values())
    assert "| bench:gemm | OK |" in summary and "| tests |" not in summary


def test_a_step_whose_tests_all_skipped_fails_the_run(tmp_path):
    status, _, _, summary, _ = run_check(
        tmp_path, pytest="4940 skipped in 12.00s", pytest_serial="2 skipped, 4940 deselected in 1.00s"
    )
    assert status != 0
    assert "| tests | FAILED |" in summary and "no test passed (4940 skipped in 12.00s + 2 skipped" in summary


def test_a_benchmark_that_measured_nothing_fails_its_step(tmp_path):
    status, _, _, summary, out = run_check(tmp_path, bench_skip="gemm")
    assert status == 1
    assert "| bench:gemm | FAILED |" in summary and "wrote no results, so nothing was measured" in summary
    assert "bench_gemm needs a GPU" in summary
    assert json.loads((out / "bench.json").read_text())["suites"]["gemm"]["status"] == "skipped"


def test_failing_tests_are_listed_and_counted(tmp_path):
    status, _, _, summary, _ = run_check(tmp_path, pytest="2 failed, 3998 passed in 99.0s", pytest_status=1)
    assert status == 1 and "| tests | FAILED |" in summary and "2 failed, 3998 passed" in summary


def test_the_budget_limits_each_step(tmp_path):
    # 8 s in all: the first suite is stopped when only the later steps' shares are left; they then find
    # the budget spent and fail, saying so
    status, _, _, summary, _ = run_check(tmp_path, budget=8, timeout=60, bench_sleep=30)
    assert status is not None and status != 0
    assert "| bench:cuda_runtime | FAILED |" in summary and "killed at its time limit" in summary
    assert "| synccheck | FAILED |" in summary


def test_outdir_holds_at_most_8_files(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    for i in range(3):
        (out / f"left-over-{i}.txt").write_text("from an earlier run")
    status, _, _, summary, _ = run_check(tmp_path)
    assert status != 0 and "| output | FAILED |" in summary and "at most 8 files" in summary


# the report helper's verdicts, directly
def test_pytest_counts_read_the_summary_line():
    counts, line = report.pytest_counts("...\n= 1 failed, 10 passed, 2 skipped, 1 error in 3.20s =\n")
    assert counts == {"failed": 1, "passed": 10, "skipped": 2, "error": 1}
    assert line == "1 failed, 10 passed, 2 skipped, 1 error in 3.20s"
    assert report.pytest_counts("collected 0 items\n") == (None, None)


def test_a_benchmark_in_emulated_mode_needs_a_reference_check():
    assert report.bench_verdict(0, {"emulated": True, "checks": 2}, "")[0].startswith("OK emulated: no timing")
    assert report.bench_verdict(0, {"emulated": True, "checks": 0}, "")[0].startswith("FAILED")
    assert report.bench_verdict(124, None, "")[0].startswith("FAILED killed")


def test_a_sanitizer_run_needs_the_workload_right_and_no_errors(tmp_path):
    log = tmp_path / "sanitizer.log"
    log.write_text(
        "== 10:00:00 (limit 20 s): x\ncuda runtime workload: all results right (5 checks)\n"
        "========= ERROR SUMMARY: 0 errors\n"
        "== 10:00:30 (limit 20 s): y\ncuda runtime workload: all results right (5 checks)\n"
        "========= ERROR SUMMARY: 3 errors\n"
    )
    assert report.last_section(str(log)).startswith("== 10:00:30")
    with_errors = subprocess.run(
        [
            sys.executable,
            str(REPO / "scripts" / "gpu_check_report.py"),
            "sanitizer-verdict",
            "--log",
            str(log),
            "--status",
            "3",
        ],
        capture_output=True,
        text=True,
    ).stdout
    assert with_errors.startswith("FAILED ERROR SUMMARY: 3 errors")
    log.write_text("== 10:00:00 (limit 20 s): x\ncuda runtime workload: needs a GPU: no device\n")
    skipped = subprocess.run(
        [
            sys.executable,
            str(REPO / "scripts" / "gpu_check_report.py"),
            "sanitizer-verdict",
            "--log",
            str(log),
            "--status",
            "1",
        ],
        capture_output=True,
        text=True,
    ).stdout
    assert skipped.startswith("FAILED the workload did not finish with all results right")


def test_the_gpu_shares_fit_the_default_budget():
    """On a GPU every step's share, one per default benchmark suite, fits in the 540 s budget, so the
    last steps (the sanitizers) are not squeezed out by shares that overbook it."""
    text = (REPO / "scripts" / "gpu_check.sh").read_text()
    suites = re.search(r"suites=\$\{GPU_CHECK_BENCH_SUITES:-([\w,]+)\}", text).group(1).split(",")
    gpu = re.search(r"share_base=540\n\s*share=\(([^)]*)\)", text).group(1)
    share = {key: int(value) for key, value in re.findall(r"\[(\w+)\]=(\d+)", gpu)}
    total = sum(value for key, value in share.items() if key != "bench") + share["bench"] * len(suites)
    assert total <= 540, (total, share, suites)
