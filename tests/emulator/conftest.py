"""Shared by the emulator's standalone checks: where the CUDA headers are (they compile on the host), and
how a standalone C++ check is built and run."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest


def find_cuda_include_dir():
    roots = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"]
    for root in filter(None, roots):
        include = Path(root) / "include"
        if (include / "cuda_runtime.h").is_file() and (include / "cuda_fp16.h").is_file():
            return include
    return None


@pytest.fixture(scope="session")
def cuda_include_dir():
    """The CUDA toolkit's include folder; the test skips without one (or without g++)."""
    include = find_cuda_include_dir()
    if include is None or shutil.which("g++") is None:
        pytest.skip("needs g++ and the CUDA headers")
    return include


REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def compile_cpp(cuda_include_dir):
    """``compile_cpp(*arguments, flags=(), timeout=300)``: ``g++ -std=c++17 -O1 FLAGS`` against the CUDA
    headers and kernels/, then ``arguments`` (sources, objects, ``-o`` ...); fails with the compiler's errors."""

    def compile_(*arguments, flags=(), timeout=300):
        build = subprocess.run(
            [
                shutil.which("g++"),
                "-std=c++17",
                "-O1",
                *flags,
                f"-I{cuda_include_dir}",
                f"-I{REPO / 'kernels'}",
                *map(str, arguments),
            ],
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        assert build.returncode == 0, build.stderr

    return compile_


@pytest.fixture
def run_cpp_check(tmp_path, compile_cpp):
    """``run_cpp_check(source)``: compiles the standalone check ``source`` (warnings are errors) against
    the CUDA headers and kernels/, runs it and fails unless it exits 0 saying "all checks passed"."""

    def run(source: Path) -> None:
        binary = tmp_path / source.stem
        compile_cpp(source, "-o", binary, flags=("-Wall", "-Wextra", "-Werror"), timeout=120)
        result = subprocess.run([str(binary)], capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, result.stdout + result.stderr
        assert "all checks passed" in result.stdout

    return run
