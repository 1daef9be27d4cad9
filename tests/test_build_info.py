"""How adcuda was built, as adcuda.info() and adcuda._C.build_info() report it."""

import json
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

import adcuda
from adcuda import _info, _native
from adcuda.cuda import kernel_image_for

BUILD_KEYS = {"cuda_compiled", "cuda_version", "cuda_architectures", "compiler", "build_type"}
# the portable set docker/Dockerfile.cuda builds, and the default of a build machine without a GPU (CMakeLists.txt)
PORTABLE_ARCHITECTURES = ["80-real", "90a-real", "90-virtual"]
NO_GPU_ARCHITECTURES = ["80-virtual"]


def _package_parent():
    """The folder from which these tests imported adcuda, for subprocesses to import the same one."""
    return str(pathlib.Path(next(iter(adcuda.__path__))).parent)


def test_build_info_has_every_key_even_without_the_native_module():
    info = _native.build_info()
    assert BUILD_KEYS | {"native_module_loaded", "native_import_error"} <= info.keys()
    assert isinstance(info["cuda_architectures"], list)
    if not info["native_module_loaded"]:
        assert info["native_import_error"]
        assert info["cuda_compiled"] is False


def test_native_build_info_types():
    if _native._C is None:
        pytest.skip(f"adcuda._C is not built here: {_native.IMPORT_ERROR}")
    info = _native._C.build_info()
    assert set(info) >= BUILD_KEYS
    assert isinstance(info["cuda_compiled"], bool)
    assert info["compiler"] and info["build_type"]
    if info["cuda_compiled"]:
        assert info["cuda_version"].count(".") >= 1
        assert info["cuda_architectures"]
    else:
        assert info["cuda_version"] is None and info["cuda_architectures"] == []


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="no nvcc on PATH, so a host-only build is expected")
@pytest.mark.skipif(
    os.environ.get("ADCUDA_CUDA", "").upper() == "OFF", reason="ADCUDA_CUDA=OFF asks for a host-only build"
)
def test_build_compiled_cuda_when_nvcc_is_on_path():
    info = _native.build_info()
    assert info["native_module_loaded"], (
        f"adcuda._C did not import ({info['native_import_error']}); these tests imported adcuda from "
        f"{list(adcuda.__path__)}: a source tree without the built module may be shadowing the installed package"
    )
    assert info["cuda_compiled"], "nvcc is on PATH but the build reports no CUDA: check the build log"
    assert info["cuda_version"]
    assert info["cuda_architectures"]


def test_info_dict_reports_build_and_runtime():
    facts = _info.info(as_dict=True)
    assert BUILD_KEYS <= facts.keys()
    assert facts["python"] and facts["adcuda_version"]
    assert isinstance(facts["cuda_available"], bool)
    assert facts["device_count"] == len(facts["devices"])
    if facts["cuda_available"]:
        assert facts["running_on"].startswith("cuda:")
        assert facts["unavailable_reason"] is None
    else:
        assert facts["running_on"] == "cpu"
        assert facts["unavailable_reason"] in facts["running_on_reason"]
    json.dumps(facts)


def test_info_text_is_readable_at_the_prompt():
    text = _info.info()
    assert text.startswith("adcuda ")
    assert "CUDA compiled:" in text
    assert "running on: " in text
    assert repr(text) == str(text)
    if not adcuda.cuda.is_available():
        assert "running on: cpu (fp32 fallback) because " in text


def test_adcuda_info_is_the_public_name():
    if not hasattr(adcuda, "info"):
        pytest.skip("adcuda/__init__.py does not export info yet")
    assert adcuda.info is _info.info


def test_main_info_json(capsys):
    assert _info.main_info(["--json"]) == 0
    facts = json.loads(capsys.readouterr().out)
    assert BUILD_KEYS <= facts.keys()
    assert _info.main_info(["--bogus"]) == 2


def test_python_m_adcuda_info_runs(tmp_path):
    package_dir = pathlib.Path(next(iter(adcuda.__path__)))
    if not (package_dir / "cli.py").exists() or not (package_dir / "__main__.py").exists():
        pytest.skip("adcuda/cli.py and adcuda/__main__.py are not written yet")
    env = dict(os.environ, PYTHONPATH=_package_parent())
    result = subprocess.run(
        [sys.executable, "-m", "adcuda", "info"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert "running on: " in result.stdout


@pytest.mark.parametrize(
    "capability, architectures, runs, how",
    [
        ((9, 0), PORTABLE_ARCHITECTURES, True, "sm_90a machine code"),
        ((8, 0), PORTABLE_ARCHITECTURES, True, "sm_80 machine code"),
        ((8, 6), PORTABLE_ARCHITECTURES, True, "sm_80 machine code"),
        ((8, 9), PORTABLE_ARCHITECTURES, True, "sm_80 machine code"),
        ((10, 0), PORTABLE_ARCHITECTURES, True, "compute_90 PTX"),
        ((12, 0), PORTABLE_ARCHITECTURES, True, "compute_90 PTX"),
        ((7, 5), PORTABLE_ARCHITECTURES, False, "ADCUDA_CUDA_ARCHS=75"),
        ((8, 0), NO_GPU_ARCHITECTURES, True, "compute_80 PTX, JIT-compiled"),
        ((8, 9), NO_GPU_ARCHITECTURES, True, "compute_80 PTX, JIT-compiled"),
        ((9, 0), NO_GPU_ARCHITECTURES, True, "compute_80 PTX, JIT-compiled"),
        ((12, 0), NO_GPU_ARCHITECTURES, True, "compute_80 PTX, JIT-compiled"),
        ((7, 5), NO_GPU_ARCHITECTURES, False, "ADCUDA_CUDA_ARCHS=75"),
        ((9, 0), ["90"], True, "sm_90 machine code"),
        ((10, 0), ["90"], True, "compute_90 PTX"),
        ((9, 0), ["90a-real"], True, "sm_90a machine code"),
        ((10, 0), ["90a"], False, "no code for sm_100"),
        ((8, 6), ["90-virtual"], False, "no code for sm_86"),
        ((9, 0), ["native"], None, "unknown"),
    ],
)
def test_kernel_image_for(capability, architectures, runs, how):
    got_runs, got_how = kernel_image_for(*capability, architectures)
    assert got_runs is runs
    assert how in got_how


def test_documented_default_architectures_are_the_build_files():
    """The lists above, which README.md and docs/building.md describe, are the ones CMakeLists.txt builds."""
    repo = pathlib.Path(__file__).resolve().parents[1]
    cmake = (repo / "CMakeLists.txt").read_text()
    for variable, architectures in (
        ("ADCUDA_NO_GPU_CUDA_ARCHITECTURES", NO_GPU_ARCHITECTURES),
        ("ADCUDA_PORTABLE_CUDA_ARCHITECTURES", PORTABLE_ARCHITECTURES),
    ):
        assert f'set({variable} "{";".join(architectures)}")' in cmake, variable
    building = (repo / "docs" / "building.md").read_text()
    assert f"`{';'.join(NO_GPU_ARCHITECTURES)}`" in building
    assert f"`{';'.join(PORTABLE_ARCHITECTURES)}`" in building
