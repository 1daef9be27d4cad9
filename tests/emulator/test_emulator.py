"""The CUDA emulator's execution model (kernels/emulator): tests/emulator/emulator_checks.cu, an
ordinary CUDA program, rewritten and compiled with g++ against the emulator the way an
ADCUDA_CUDA=EMULATE build compiles kernels/*.cu, then run under each thread schedule. Needs g++ and
the CUDA headers; no GPU."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
KERNELS = REPO / "kernels"
EMULATOR_SOURCES = ["grid.cpp", "fiber.cpp", "cudart.cpp"]
CHECKS = ["block_barrier", "early_exit", "shuffles", "deadlock", "launch_limits", "memory", "streams"]


def compile_with_emulator(cu_source, work, emulator_objects, compile_cpp):
    """The binary of one .cu program: rewritten as the emulated build does, compiled with g++, linked
    with the emulator."""
    source_dir = work / f"{cu_source.stem}-src"
    source_dir.mkdir()
    shutil.copy(cu_source, source_dir / cu_source.name)
    rewritten = work / f"{cu_source.stem}-rewritten"
    subprocess.run(
        [sys.executable, str(KERNELS / "emulator" / "rewrite_launches.py"), str(source_dir), str(rewritten)],
        check=True,
        timeout=60,
    )
    binary = work / cu_source.stem
    compile_cpp(
        "-include",
        "emulator/device_runtime.h",
        "-x",
        "c++",
        rewritten / f"{cu_source.name}.cpp",
        "-x",
        "none",
        *emulator_objects,
        "-o",
        binary,
        flags=("-pthread",),
    )
    return binary


@pytest.fixture(scope="module")
def emulator_objects(tmp_path_factory, compile_cpp):
    """kernels/emulator's sources compiled once for every program here."""
    work = tmp_path_factory.mktemp("emulator-objects")
    objects = [work / f"{name}.o" for name in EMULATOR_SOURCES]
    for name, target in zip(EMULATOR_SOURCES, objects):
        compile_cpp("-c", KERNELS / "emulator" / name, "-o", target, flags=("-pthread",))
    return objects


@pytest.fixture(scope="module")
def checks_binary(tmp_path_factory, emulator_objects, compile_cpp):
    return compile_with_emulator(
        Path(__file__).with_name("emulator_checks.cu"),
        tmp_path_factory.mktemp("checks"),
        emulator_objects,
        compile_cpp,
    )


@pytest.mark.parametrize("schedule", ["forward", "reverse", "random:7"])
@pytest.mark.parametrize("check", CHECKS)
def test_emulator_execution_model(checks_binary, check, schedule):
    env = dict(os.environ, ADCUDA_EMULATOR_SCHEDULE=schedule)
    run = subprocess.run([str(checks_binary), check], capture_output=True, text=True, timeout=60, env=env)
    assert run.returncode == 0 and f"ok {check}" in run.stdout, run.stdout + run.stderr


MISSING_BARRIER = r"""
#include <cuda_runtime.h>
#include <cstdio>
// Reads a neighbour's shared-memory slot without a __syncthreads in between: right or wrong
// depending on the order the threads run in.
__global__ void racy(int* out) {
  __shared__ int slot[64];
  slot[threadIdx.x] = threadIdx.x + 1;
  out[threadIdx.x] = slot[(threadIdx.x + 1) % 64];
}
int main() {
  int* out = nullptr;
  cudaMalloc(&out, 64 * sizeof(int));
  racy<<<1, 64>>>(out);
  cudaDeviceSynchronize();
  int host[64];
  cudaMemcpy(host, out, sizeof host, cudaMemcpyDeviceToHost);
  int wrong = 0;
  for (int i = 0; i < 64; ++i) wrong += host[i] != (i + 1) % 64 + 1;
  std::printf("%d\n", wrong);
}
"""


def test_a_missing_barrier_shows_under_another_schedule(tmp_path, emulator_objects, compile_cpp):
    """The point of ADCUDA_EMULATOR_SCHEDULE: the forward order hides this race, reverse exposes it."""
    (tmp_path / "racy.cu").write_text(MISSING_BARRIER)
    binary = compile_with_emulator(tmp_path / "racy.cu", tmp_path, emulator_objects, compile_cpp)

    def wrong(schedule):
        env = dict(os.environ, ADCUDA_EMULATOR_SCHEDULE=schedule)
        return int(
            subprocess.run([str(binary)], capture_output=True, text=True, timeout=60, env=env, check=True).stdout
        )

    # Forward: thread i reads slot i+1 before thread i+1 wrote it (threads run to completion in order).
    assert wrong("forward") == 63
    # Reverse: every slot is written before its reader runs, except the wrap-around read of thread 63.
    assert wrong("reverse") == 1


def test_the_mirror_follows_the_sources(tmp_path):
    """A rewrite mirrors each .cu/.cuh/.h once, rewrites only what changed, and deletes the mirror of a
    source that is gone (a stale header first on the include path would shadow a moved one)."""
    source_dir, mirror = tmp_path / "kernels", tmp_path / "mirror"
    (source_dir / "runtime").mkdir(parents=True)
    (source_dir / "a.cu").write_text("__global__ void k() {}\nvoid go() { k<<<1, 32>>>(); }\n")
    (source_dir / "b.cuh").write_text("#pragma once\n")
    (source_dir / "runtime" / "c.h").write_text("#pragma once\n")

    def rewrite():
        subprocess.run(
            [sys.executable, str(KERNELS / "emulator" / "rewrite_launches.py"), str(source_dir), str(mirror)],
            check=True,
            timeout=60,
        )
        return sorted(str(p.relative_to(mirror)) for p in mirror.rglob("*") if p.is_file())

    assert rewrite() == ["a.cu.cpp", "b.cuh", "runtime/c.h"]
    assert "::adcuda::emu::LaunchConfig(1, 32)" in (mirror / "a.cu.cpp").read_text()
    written = (mirror / "a.cu.cpp").stat().st_mtime_ns
    (source_dir / "b.cuh").unlink()
    (source_dir / "runtime" / "c.h").rename(source_dir / "d.h")
    assert rewrite() == ["a.cu.cpp", "d.h"]
    assert (mirror / "a.cu.cpp").stat().st_mtime_ns == written  # unchanged text: not rewritten
