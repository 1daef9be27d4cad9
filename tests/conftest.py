"""Shared by the whole test suite: the summary line that says why tests were skipped, and fixtures used
by more than one test file."""

import pytest

GPU_HOW_TO = (
    "on a GPU machine: bash scripts/gpu_check.sh OUTDIR; without a GPU, on the CUDA emulator: "
    "bash scripts/emulated_cuda_tests.sh"
)
TORCH_HOW_TO = "pip install torch (the CPU wheel is enough), then run pytest again"


def skip_cause(report):
    """``"gpu"``, ``"torch"`` or ``"other"``: why a skipped test did not run. PyTorch is an optional
    oracle, taken with ``pytest.importorskip("torch")``; GPU tests carry the ``cuda`` marker and skip
    with a reason that names CUDA or the GPU (a GPU test can also skip a case for another reason, on a
    GPU or on the emulator: that is "other")."""
    reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
    if "could not import 'torch" in reason:
        return "torch"
    # a module skipped while collected gives a CollectReport, which has no keywords
    if "cuda" in getattr(report, "keywords", ()) and ("cuda" in reason.lower() or "gpu" in reason.lower()):
        return "gpu"
    return "other"


def skip_summary(reports):
    """The lines that say how many tests skipped for want of a GPU or of PyTorch, and how to run them;
    none when nothing skipped."""
    counts = {"gpu": 0, "torch": 0, "other": 0}
    for report in reports:
        counts[skip_cause(report)] += 1
    lines = []
    if counts["gpu"]:
        lines.append(f"{counts['gpu']} skipped for want of a usable GPU (the `cuda` marker); run them {GPU_HOW_TO}")
    if counts["torch"]:
        lines.append(f"{counts['torch']} skipped for want of PyTorch, their oracle; {TORCH_HOW_TO}")
    if counts["other"]:
        lines.append(f"{counts['other']} skipped for other reasons; pytest -rs lists them")
    return lines


def pytest_terminal_summary(terminalreporter):
    lines = skip_summary(terminalreporter.stats.get("skipped", []))
    if lines:
        terminalreporter.section("why tests skipped", sep="-")
        for line in lines:
            terminalreporter.write_line(line)


@pytest.fixture
def tiny_chars(monkeypatch):
    """The chars task with a tiny model and short epochs: seconds instead of minutes."""
    from adcuda.train import chars as chars_task

    monkeypatch.setattr(chars_task, "MODEL", {"d_model": 32, "n_layers": 1, "n_heads": 2, "dropout": 0.0})
    monkeypatch.setattr(chars_task, "STEPS_PER_EPOCH", 10)
    monkeypatch.setattr(chars_task, "VAL_WINDOWS_PER_EPOCH", 16)
    monkeypatch.setattr(chars_task, "SAMPLE_LENGTH", 30)


# the flags every generated C file must compile under (adcuda.export.to_c's promise)
C_FLAGS = ("-std=c99", "-O2", "-Wall", "-Werror")


@pytest.fixture
def compile_c():
    """``compile_c(sources, exe)``: build C ``sources`` (linked with libm) under ``C_FLAGS`` into ``exe``,
    failing the test with the compiler's messages; skips the test where no C compiler is found."""
    import os
    import shutil
    import subprocess

    compiler = next(
        (shutil.which(c) for c in (os.environ.get("CC"), "cc", "gcc", "clang") if c and shutil.which(c)), None
    )
    if compiler is None:
        pytest.skip("no C compiler (cc, gcc or clang) on PATH to build the generated C")

    def build(sources, exe):
        result = subprocess.run(
            [compiler, *C_FLAGS, "-o", str(exe), *map(str, sources), "-lm"], capture_output=True, text=True
        )
        assert result.returncode == 0, result.stderr
        return str(exe)

    return build


@pytest.fixture(scope="session")
def cb():
    """The CUDA backend (adcuda.backends.cuda): what the CUDA parity tests run against the CPU backend."""
    from adcuda.backends import cuda

    return cuda


@pytest.fixture(scope="session")
def native():
    """The native module, ``adcuda._C``."""
    from adcuda import _native

    return _native._C
