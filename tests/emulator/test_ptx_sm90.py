"""Builds and runs the standalone C++ check of the emulator's sm_90a PTX semantics (swizzles, mbarrier
phases, TMA boxes with their zero fill, wgmma descriptors and accumulator fragments):
tests/emulator/test_ptx_sm90.cpp. Needs g++ and the CUDA headers (cuda_fp16.h / cuda_bf16.h, for
their host-side conversions); no GPU."""

from pathlib import Path


def test_ptx_sm90_semantics(run_cpp_check):
    run_cpp_check(Path(__file__).with_name("test_ptx_sm90.cpp"))
