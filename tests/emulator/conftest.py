"""Shared by the emulator's standalone checks: where the CUDA headers are (they compile on the host)."""

import os
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
    import shutil

    include = find_cuda_include_dir()
    if include is None or shutil.which("g++") is None:
        pytest.skip("needs g++ and the CUDA headers")
    return include
