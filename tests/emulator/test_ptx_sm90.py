"""Builds and runs the standalone C++ check of the emulator's sm_90a PTX semantics (swizzles, mbarrier
phases, TMA boxes with their zero fill, wgmma descriptors and accumulator fragments):
tests/emulator/test_ptx_sm90.cpp. Needs g++ and the CUDA headers (cuda_fp16.h / cuda_bf16.h, for
their host-side conversions); no GPU."""

import shutil
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SOURCE = Path(__file__).with_name("test_ptx_sm90.cpp")


def test_ptx_sm90_semantics(tmp_path, cuda_include_dir):
    compiler = shutil.which("g++")
    include = cuda_include_dir
    binary = tmp_path / "test_ptx_sm90"
    build = subprocess.run(
        [
            compiler,
            "-std=c++17",
            "-O1",
            "-Wall",
            "-Wextra",
            "-Werror",
            f"-I{include}",
            f"-I{REPO / 'kernels'}",
            str(SOURCE),
            "-o",
            str(binary),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert build.returncode == 0, build.stderr
    run = subprocess.run([str(binary)], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "all checks passed" in run.stdout
