"""Builds and runs the standalone C++ check of the emulator's sm_80 PTX semantics (mma.m16n8k16,
ldmatrix.x4, cp.async groups, ex2.approx.ftz): tests/emulator/test_ptx_sm80.cpp. Needs g++ and the
CUDA headers (cuda_fp16.h / cuda_bf16.h, for their host-side conversions); no GPU."""

from pathlib import Path


def test_ptx_sm80_semantics(run_cpp_check):
    run_cpp_check(Path(__file__).with_name("test_ptx_sm80.cpp"))
