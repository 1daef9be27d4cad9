"""Compile nvtx_recorder.c (an NVTX tool that logs every range) into a shared library."""

import os
import shutil
import subprocess

SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "nvtx_recorder.c")


def compiler():
    """The system C compiler, or None."""
    return shutil.which(os.environ.get("CC", "cc"))


def build_recorder(out_dir):
    """Build the library into ``out_dir`` and return its path (raises if the compiler fails)."""
    path = os.path.join(out_dir, "libnvtx_recorder.so")
    subprocess.run(
        [compiler(), "-shared", "-fPIC", "-O2", "-Wall", "-Werror", "-o", path, SOURCE, "-lpthread"],
        check=True,
        capture_output=True,
        text=True,
    )
    return path
