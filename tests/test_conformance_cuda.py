"""The conformance database on the CUDA device: a fixed, seeded sample of its value samples, each
form run on the device and compared with the CPU backend (bfloat16 samples, which the CPU backend
cannot hold, with PyTorch on the CPU where it is installed). Runs on a GPU or on the CUDA emulator
(scripts/emulated_cuda_tests.sh); skipped without a usable device.
"""

import zlib

import pytest
from conformance import runner
from conformance.database import ENTRIES
from conformance.known_failures import expected_failure

import adcuda

CUDA = adcuda.cuda.is_available()
TORCH = runner.torch_lib_or_none()
ADCUDA = runner.adcuda_lib()
# About 0.1 s a sample on the emulator (2 loaded cores): one sample in twelve keeps the variant near a
# minute there. Chosen by a hash of the sample's id, so that the choice of a sample does not change as
# the database grows.
PER_MILLE = 85


# what says where a tensor lives differs between devices by design
DEVICE_ATTRIBUTES = {"is_cpu", "is_cuda", "get_device", "is_pinned"}


def _chosen(entry, sample):
    if entry.name in DEVICE_ATTRIBUTES:
        return False
    return zlib.crc32(f"{entry.key}:{sample.name}".encode()) % 1000 < PER_MILLE


def _params():
    chosen = [(e, s) for e in ENTRIES if e.values for s in e.samples if _chosen(e, s)]
    return [
        pytest.param(e, s, id=f"{e.key}:{s.name}", marks=expected_failure("cuda", e.key, s.name)) for e, s in chosen
    ]


@pytest.mark.cuda
@pytest.mark.skipif(not CUDA, reason="needs a usable CUDA device")
@pytest.mark.parametrize(("entry", "sample"), _params())
def test_cuda_against_cpu(entry, sample):
    if not runner.forms(entry):
        pytest.skip(f"adcuda has no {entry.name}")
    if "bfloat16" in sample.dtypes():
        if TORCH is None:
            pytest.skip("bfloat16 has no CPU reference without PyTorch")
        diffs = runner.value_diffs(entry, sample, TORCH, ADCUDA, TORCH, got_device="cuda")
    else:
        diffs = runner.value_diffs(entry, sample, ADCUDA, ADCUDA, TORCH, got_device="cuda")
    assert not diffs, "\n".join(diffs)
