"""tests/conftest.py's summary: how many tests skipped for want of a GPU and of PyTorch, and how to run
them, on a run of a few stand-in tests."""

import os

pytest_plugins = ["pytester"]

CONFTEST = os.path.join(os.path.dirname(os.path.abspath(__file__)), "conftest.py")

STAND_INS = """
import sys
import pytest

@pytest.mark.cuda
@pytest.mark.skipif(True, reason="needs a usable CUDA device")
@pytest.mark.parametrize("n", [1, 7, 1023])
def test_kernel(n):
    pass

@pytest.mark.cuda
def test_kernel_case_that_does_not_apply():
    pytest.skip("values do not fit int32")

def test_against_pytorch(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # as if PyTorch were not installed
    pytest.importorskip("torch")

def test_something_else():
    pytest.skip("a usable GPU is present")

def test_runs():
    pass
"""


def test_summary_says_why_tests_skipped_and_how_to_run_them(pytester):
    with open(CONFTEST) as f:
        pytester.makeconftest(f.read())
    pytester.makeini("[pytest]\nmarkers =\n    cuda: needs a usable CUDA device\n")
    pytester.makepyfile(test_stand_ins=STAND_INS)
    result = pytester.runpytest_subprocess("-q", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, skipped=6)
    result.stdout.fnmatch_lines(
        [
            "*why tests skipped*",
            "3 skipped for want of a usable GPU (the `cuda` marker); run them on a GPU machine: "
            "bash scripts/gpu_check.sh OUTDIR; without a GPU, on the CUDA emulator: "
            "bash scripts/emulated_cuda_tests.sh",
            "1 skipped for want of PyTorch, their oracle; pip install torch*",
            "2 skipped for other reasons; pytest -rs lists them",
        ]
    )


def test_no_summary_when_nothing_skipped(pytester):
    with open(CONFTEST) as f:
        pytester.makeconftest(f.read())
    pytester.makepyfile(test_one="def test_runs():\n    pass\n")
    result = pytester.runpytest_subprocess("-q", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    assert "why tests skipped" not in result.stdout.str()
