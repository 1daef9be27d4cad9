"""The choice of GEMM path without a GPU (adcuda/backends/cuda/gemm.py, kernels/gemm_cublaslt.cu):
ADCUDA_GEMM's modes, where cuBLASLt is looked for, what is chosen when it loads or does not, the
run-time loader itself (a missing library, one without cuBLASLt's functions, a stand-in with them),
and what adcuda.info() reports. The products themselves are tested in tests/test_cuda_gemm.py.
"""

import shutil
import subprocess
import sys
import textwrap

import pytest

import adcuda
from adcuda import _native
from adcuda.backends import cuda as cuda_backend
from adcuda.errors import DeviceError

# The GEMM path choice is the CUDA backend's: CI's nvcc build runs these tests without a GPU; a
# CPU-only build skips them (its adcuda.backends.cuda imports, but has no primitives).
if not cuda_backend.is_built():
    pytest.skip("a build without CUDA has no CUDA GEMM path to choose", allow_module_level=True)
from adcuda.backends.cuda import gemm as cuda_gemm  # noqa: E402 (after the build check)


def loader(status):
    calls = []

    def load(candidates):
        calls.append(candidates)
        return status

    return load, calls


LOADED = {"loaded": True, "path": "/wheel/nvidia/cu13/lib/libcublasLt.so.13", "version": "13.1.0", "error": ""}
MISSING = {"loaded": False, "path": "", "version": "", "error": "libcublasLt.so.13: cannot open shared object file"}


@pytest.mark.parametrize(
    "value, mode",
    [(None, "auto"), ("", "auto"), ("AUTO", "auto"), ("handwritten", "handwritten"), (" cuBLASLt ", "cublaslt")],
)
def test_gemm_mode(value, mode):
    assert cuda_gemm.gemm_mode({} if value is None else {"ADCUDA_GEMM": value}) == mode


def test_gemm_mode_rejects_unknown_values():
    with pytest.raises(ValueError, match="ADCUDA_GEMM must be one of auto, handwritten, cublaslt, got 'cublas'"):
        cuda_gemm.gemm_mode({"ADCUDA_GEMM": "cublas"})


def test_auto_takes_cublaslt_when_it_loads():
    load, calls = loader(LOADED)
    selection = cuda_gemm.select_gemm_path("auto", False, load, ["a", "b"])
    assert selection.path == "cublaslt"
    assert selection.reason == "cuBLASLt 13.1.0 from /wheel/nvidia/cu13/lib/libcublasLt.so.13"
    assert calls == [["a", "b"]]


def test_auto_falls_back_to_handwritten_and_says_why():
    load, _ = loader(MISSING)
    selection = cuda_gemm.select_gemm_path("auto", False, load, ["libcublasLt.so.13"])
    assert selection.path == "handwritten"
    assert selection.reason == "hand-written (cuBLASLt not found: libcublasLt.so.13: cannot open shared object file)"


def test_handwritten_never_loads_cublaslt():
    load, calls = loader(LOADED)
    selection = cuda_gemm.select_gemm_path("handwritten", False, load, ["a"])
    assert (selection.path, selection.reason) == ("handwritten", "hand-written (ADCUDA_GEMM=handwritten)")
    assert calls == []


def test_forced_cublaslt_without_the_library_is_an_error():
    load, _ = loader(MISSING)
    with pytest.raises(
        DeviceError, match=r"ADCUDA_GEMM=cublaslt, but cuBLASLt could not be loaded: .*adcuda\[cublas\]"
    ):
        cuda_gemm.select_gemm_path("cublaslt", False, load, ["a"])


def test_the_emulated_build_never_uses_cublaslt():
    load, calls = loader(LOADED)
    selection = cuda_gemm.select_gemm_path("auto", True, load, ["a"])
    assert selection.path == "handwritten" and "emulated" in selection.reason
    assert calls == []
    with pytest.raises(DeviceError, match="emulated build"):
        cuda_gemm.select_gemm_path("cublaslt", True, load, ["a"])


def test_candidates_wheel_first_then_toolkits_then_the_soname(tmp_path, monkeypatch):
    wheel = tmp_path / "site" / "nvidia" / "cu13" / "lib"
    wheel.mkdir(parents=True)
    (wheel / "libcublasLt.so.13").write_bytes(b"")
    toolkit = tmp_path / "cuda" / "lib64"
    toolkit.mkdir(parents=True)
    (toolkit / "libcublasLt.so.13").write_bytes(b"")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    candidates = cuda_gemm.cublaslt_candidates({"CUDA_HOME": str(tmp_path / "cuda")})
    assert candidates.index(str(wheel / "libcublasLt.so.13")) < candidates.index(str(toolkit / "libcublasLt.so.13"))
    assert candidates[-1] == "libcublasLt.so.13"
    assert all(c == "libcublasLt.so.13" or c.endswith("/libcublasLt.so.13") for c in candidates)


# A stand-in with every function the loader resolves; cublasLtGetVersion says 13.1.2.
FAKE_CUBLASLT = """
#include <stddef.h>
size_t cublasLtGetVersion(void) { return 130102; }
const char* cublasLtGetStatusString(int status) { (void)status; return "fake"; }
#define STUB(name) int name(void) { return 0; }
STUB(cublasLtCreate) STUB(cublasLtMatmulDescCreate) STUB(cublasLtMatmulDescDestroy)
STUB(cublasLtMatmulDescSetAttribute) STUB(cublasLtMatrixLayoutCreate) STUB(cublasLtMatrixLayoutDestroy)
STUB(cublasLtMatrixLayoutSetAttribute) STUB(cublasLtMatmulPreferenceCreate) STUB(cublasLtMatmulPreferenceDestroy)
STUB(cublasLtMatmulPreferenceSetAttribute) STUB(cublasLtMatmulAlgoGetHeuristic) STUB(cublasLtMatmul)
"""


def test_loader_reports_missing_incomplete_and_loaded_libraries(tmp_path):
    """Run in a child process: a library once loaded stays loaded, and a stand-in must not."""
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        pytest.skip("no C compiler to build the stand-in library")
    (tmp_path / "fake.c").write_text(FAKE_CUBLASLT)
    fake = tmp_path / "libcublasLt.so.13"
    subprocess.run([compiler, "-shared", "-fPIC", "-o", str(fake), str(tmp_path / "fake.c")], check=True)
    incomplete = tmp_path / "libincomplete.so"
    (tmp_path / "incomplete.c").write_text("int cublasLtCreate(void) { return 0; }\n")
    subprocess.run([compiler, "-shared", "-fPIC", "-o", str(incomplete), str(tmp_path / "incomplete.c")], check=True)
    script = textwrap.dedent(f"""
        from adcuda import _native
        C = _native._C
        missing = C.cublaslt_load(["{tmp_path}/nowhere/libcublasLt.so.13"])
        assert not missing["loaded"] and "{tmp_path}/nowhere/libcublasLt.so.13: " in missing["error"], missing
        lacking = C.cublaslt_load(["{incomplete}"])
        assert not lacking["loaded"] and "lacks cublasLtGetVersion" in lacking["error"], lacking
        assert "cublasLtCreate," not in lacking["error"], lacking
        loaded = C.cublaslt_load(["{tmp_path}/nowhere.so", "{fake}"])
        assert loaded == {{"loaded": True, "path": "{fake}", "version": "13.1.2", "error": ""}}, loaded
        assert C.cublaslt_status() == loaded
        assert C.cublaslt_load(["{incomplete}"]) == loaded  # the first success stays
        print("ok")
    """)
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=tmp_path
    )  # not the repository root, whose adcuda/ has no compiled _C
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stdout + proc.stderr


def test_info_reports_the_gemm_path(monkeypatch):
    monkeypatch.setenv("ADCUDA_GEMM", "handwritten")
    cuda_gemm.reset_gemm_selection()
    try:
        facts = adcuda.info(as_dict=True)
        assert facts["gemm"] == {"path": "handwritten", "reason": "hand-written (ADCUDA_GEMM=handwritten)"}
        assert "GEMM: hand-written (ADCUDA_GEMM=handwritten)" in adcuda.info()
        monkeypatch.setenv("ADCUDA_GEMM", "fastest")
        cuda_gemm.reset_gemm_selection()
        assert "ADCUDA_GEMM must be one of" in adcuda.info(as_dict=True)["gemm"]["reason"]
    finally:
        monkeypatch.undo()
        cuda_gemm.reset_gemm_selection()


@pytest.mark.parametrize(
    "m, n, k, batch, splits",
    [
        (2304, 768, 8192, 1, 2),  # GPT-2 qkv weight gradient: 18 x 3 = 54 tiles for 132 SMs, K long
        (3072, 768, 8192, 1, 3),  # GPT-2 fc weight gradient: 72 tiles (2 splits would make 2 waves anyway)
        (768, 768, 8192, 1, 7),  # attention projection's: 18 tiles, 7 x 18 = 126 blocks in one wave
        (8192, 2304, 768, 1, 1),  # forward: 576 tiles, more than two waves
        (4096, 4096, 4096, 1, 1),
        (256, 256, 256, 1, 1),  # K too short to split (8 K tiles)
        (256, 256, 65536, 200, 1),  # the batch fills the GPU
    ],
)
def test_split_k_choice(m, n, k, batch, splits):
    assert _native._C.gemm_split_k(m, n, k, batch, 132) == splits


# GPT-2's language-model head at B * T = 8192 tokens, C = 768, V = 50257, weight W (V, C) contiguous.
# The logits' rows (and their gradient's) are 50257 elements apart, never all 16-byte aligned: the
# forward's output and the backward's A. Before the realigned loader and epilogue, the two backward
# products read A element by element and the forward stored its rows element by element.
TOKENS, WIDTH, VOCAB = 8192, 768, 50257
LM_HEAD_PRODUCTS = {
    # logits = X @ W^T: A = X (8192, 768), B = W^T (768, 50257) with K contiguous
    "forward": ((TOKENS, VOCAB, WIDTH), (WIDTH, 1), (1, WIDTH)),
    # dX = dlogits @ W: A = dlogits (8192, 50257), rows 50257 apart, K contiguous
    "input_grad": ((TOKENS, WIDTH, VOCAB), (VOCAB, 1), (WIDTH, 1)),
    # dW = dlogits^T @ X: A = dlogits^T (50257, 8192), M contiguous, K rows 50257 apart
    "weight_grad": ((VOCAB, WIDTH, TOKENS), (1, VOCAB), (WIDTH, 1)),
}


@pytest.mark.parametrize(
    "product, a_load, a_k_contiguous, epilogue",
    [
        ("forward", "cp.async", True, "16-byte realigned"),
        ("input_grad", "realigned", True, "16-byte"),
        ("weight_grad", "realigned", False, "16-byte"),
    ],
)
def test_language_model_head_products_take_the_aligned_tensor_core_path(product, a_load, a_k_contiguous, epilogue):
    (m, n, k), (a_stride_m, a_stride_k), (b_stride_k, b_stride_n) = LM_HEAD_PRODUCTS[product]
    variant = _native._C.gemm_tensor_core_variant(m, n, k, a_stride_m, a_stride_k, b_stride_k, b_stride_n)
    assert variant == {
        "a_load": a_load,
        "b_load": "cp.async",
        "a_k_contiguous": a_k_contiguous,
        "b_k_contiguous": product == "forward",
        "b_staged": False,
        "epilogue": epilogue,
    }


@pytest.mark.parametrize(
    "shape, a_strides, b_strides, a_offset, b_offset, expected",
    [
        # a dense A starting 2 bytes past alignment: its rows are all misaligned alike
        ((19, 23, 40), (40, 1), (23, 1), 1, 0, {"a_load": "realigned", "a_k_contiguous": True}),
        # no unit stride at all (x[::2, ::2]): element loads
        ((19, 23, 40), (160, 2), (23, 1), 0, 0, {"a_load": "elements"}),
        # a B with rows 50257 apart is copied into aligned rows, then read by cp.async
        ((19, 23, 40), (40, 1), (VOCAB, 1), 0, 3, {"a_load": "cp.async", "b_load": "cp.async", "b_staged": True}),
        # N = 264: aligned rows, the plain 16-byte epilogue
        ((130, 264, 24), (24, 1), (264, 1), 0, 0, {"a_load": "cp.async", "epilogue": "16-byte"}),
    ],
)
def test_tensor_core_loader_choice(shape, a_strides, b_strides, a_offset, b_offset, expected):
    variant = _native._C.gemm_tensor_core_variant(*shape, *a_strides, *b_strides, a_offset, b_offset)
    assert {key: variant[key] for key in expected} == expected
