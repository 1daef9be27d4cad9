"""The SASS checks (scripts/sass_check.py, kernels/sass_expectations.txt): on the installed module
wherever it was built with nvcc (CI builds it for sm_90), and on small hand-written listings here so
that each rule is seen to fail. Without a GPU: the machine code is only read, never run.

Where the module has CUDA kernels compiled by nvcc the check fails, rather than skips, when cuobjdump
is missing (it comes with the test extra's nvidia-cuda-cuobjdump) or the module holds no SASS; it skips
only for builds without nvcc-compiled kernels (CPU-only or emulated) or without machine code (PTX only).
"""

import importlib.util
from pathlib import Path

import pytest

from adcuda import _native

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "sass_check.py"


@pytest.fixture(scope="module")
def sass():
    spec = importlib.util.spec_from_file_location("sass_check", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_installed_kernels_meet_the_expectations(sass):
    build = _native.build_info()
    if not build["cuda_compiled"] or build.get("cuda_emulated"):
        pytest.skip("no nvcc-compiled kernels in this build: nothing to disassemble")
    if all(arch.endswith("-virtual") for arch in build["cuda_architectures"]):
        # the default of a build machine without a GPU (docs/building.md): the driver makes the machine code
        pytest.skip(f"a PTX-only build ({';'.join(build['cuda_architectures'])}): no machine code to disassemble")
    expectations = sass.load_table(sass.DEFAULT_TABLE)
    kernels = sass.disassemble(sass.installed_module(), expectations)
    failures = sass.check(kernels, expectations)
    assert not failures, "\n".join(failures) + "\n\n" + sass.report(kernels, expectations)


# A listing in cuobjdump -sass's format: a loop of 2 HMMA (0x0010-0x0050), a spill in the second kernel.
LISTING = """
Fatbin elf code:
================
arch = sm_90

\tcode for sm_90
\t\tFunction : _Z11tc_kernelv
\t.headerflags\t@"EF_CUDA_SM90 EF_CUDA_VIRTUAL_SM(EF_CUDA_SM90)"
        /*0000*/                   MOV R1, c[0x0][0x28] ;                  /* 0x0 */
        /*0010*/                   LDSM.16.M88.4 R4, [R2] ;                /* 0x0 */
        /*0020*/                   HMMA.16816.F32.BF16 R8, R4, R6, R8 ;    /* 0x0 */
        /*0030*/                   HMMA.16816.F32.BF16 R12, R4, R7, R12 ;  /* 0x0 */
        /*0040*/                   ISETP.NE.AND P0, PT, R3, RZ, PT ;       /* 0x0 */
        /*0050*/               @P0 BRA 0x10 ;                              /* 0x0 */
        /*0060*/                   EXIT ;                                  /* 0x0 */
\t\tFunction : _Z12simt_kernelv
        /*0000*/                   STL [R1], R2 ;                          /* 0x0 */
        /*0010*/                   FFMA R4, R5, R6, R4 ;                   /* 0x0 */
        /*0020*/                   BRA 0x10 ;                              /* 0x0 */
        /*0030*/                   LDL R2, [R1] ;                          /* 0x0 */
        /*0040*/                   EXIT ;                                  /* 0x0 */
"""

RESOURCES = """
Resource usage:
 Common:
  GLOBAL:0
 Function _Z11tc_kernelv:
  REG:168 STACK:0 SHARED:0 LOCAL:0 CONSTANT[0]:560 TEXTURE:0 SURFACE:0 SAMPLER:0
 Function _Z12simt_kernelv:
  REG:40 STACK:8 SHARED:0 LOCAL:8 CONSTANT[0]:560 TEXTURE:0 SURFACE:0 SAMPLER:0
"""


def kernels_of(sass):
    kernels = sass.parse_resource_usage(RESOURCES)  # a .cubin's: no architecture named
    sass.attach_sass(kernels, sass.parse_sass(LISTING))
    for kernel in kernels.values():
        kernel.demangled = kernel.name.replace("_Z11", "").replace("_Z12", "").rstrip("v") + "()"
    return kernels


def table(sass, tmp_path, *rows):
    path = tmp_path / "expectations.txt"
    path.write_text("# pattern | min | budget | why\n" + "\n".join(rows) + "\n")
    return sass.load_table(path)


def test_listing_is_parsed(sass):
    kernels = kernels_of(sass)
    tc = kernels[(None, "_Z11tc_kernelv")]
    assert tc.arch == "sm_90" and tc.registers == 168 and tc.stack == 0
    loop = tc.main_loop()
    assert (loop.start, loop.end, len(loop.instructions), loop.count(sass.TENSOR_CORE_OPCODES)) == (0x10, 0x50, 5, 2)
    simt = kernels[(None, "_Z12simt_kernelv")]
    assert simt.main_loop().count(sass.FMA_OPCODES) == 1 and simt.stack == 8


def test_every_rule_can_fail(sass, tmp_path):
    kernels = kernels_of(sass)
    assert sass.check(kernels, table(sass, tmp_path, "tc_kernel* | 2 | 5 | fits")) == []  # unlisted: not judged
    failures = sass.check(kernels, table(sass, tmp_path, "tc_kernel* | 2 | 5 | fits", "simt_kernel* | - | - | local"))
    assert len(failures) == 1
    assert "simt_kernel(): local memory (spills or a local array): 8 bytes of stack, 2 LDL/STL" in failures[0]
    del kernels[(None, "_Z12simt_kernelv")]
    assert sass.check(kernels, table(sass, tmp_path, "tc_kernel* | 2 | 5 | fits")) == []
    too_few = sass.check(kernels, table(sass, tmp_path, "tc_kernel* | 3 | - | more mma"))
    assert len(too_few) == 1 and "2 tensor-core instructions in the main loop, expected at least 3" in too_few[0]
    too_long = sass.check(kernels, table(sass, tmp_path, "_Z11tc_kernel* | - | 4 | shorter"))
    assert len(too_long) == 1 and "main loop of 5 instructions, budget 4" in too_long[0]
    stale = sass.check(kernels, table(sass, tmp_path, "renamed_kernel* | 1 | - | gone"))
    assert len(stale) == 1 and "'renamed_kernel*' matches no kernel" in stale[0]


def test_a_row_names_opcodes_its_main_loop_must_hold(sass, tmp_path):
    kernels = kernels_of(sass)
    del kernels[(None, "_Z12simt_kernelv")]
    assert sass.check(kernels, table(sass, tmp_path, "tc_kernel* | 2 | 5 | LDSM | staged")) == []
    failures = sass.check(kernels, table(sass, tmp_path, "tc_kernel* | 2 | 5 | LDSM LDGSTS | staged by cp.async"))
    assert len(failures) == 1 and "tc_kernel(): no LDGSTS in the main loop" in failures[0]
    # with modifiers: the loop's LDSM.16.M88.4 is an LDSM.M88 but no LDSM.M88.2 (a 16-byte load: LDG.128)
    assert sass.check(kernels, table(sass, tmp_path, "tc_kernel* | 2 | 5 | LDSM.M88.4 HMMA.BF16 | x4")) == []
    narrow = sass.check(kernels, table(sass, tmp_path, "tc_kernel* | 2 | 5 | LDSM.M88.2 | x2"))
    assert len(narrow) == 1 and "tc_kernel(): no LDSM.M88.2 in the main loop" in narrow[0]


def test_an_architecture_row_and_opcodes_in_any_loop(sass, tmp_path):
    """`sm_90a:` rows judge only that architecture's code, and only where the binary has some;
    `loop:OPCODE` may sit in any loop (a producer's), a bare opcode only in the main loop."""
    kernels = kernels_of(sass)
    del kernels[(None, "_Z12simt_kernelv")]
    assert sass.check(kernels, table(sass, tmp_path, "sm_90a:tc_kernel* | 9 | - | other code")) == []
    wrong = sass.check(kernels, table(sass, tmp_path, "sm_90:tc_kernel* | 3 | - | this code"))
    assert len(wrong) == 1 and "expected at least 3" in wrong[0]
    assert sass.check(kernels, table(sass, tmp_path, "tc_kernel* | 2 | 5 | loop:LDSM.M88 HMMA | any loop")) == []
    missing = sass.check(kernels, table(sass, tmp_path, "tc_kernel* | 2 | 5 | loop:UTMALDG | a TMA loop"))
    assert len(missing) == 1 and "no loop:UTMALDG" in missing[0]


def test_a_tensor_core_row_fails_without_hmma(sass, tmp_path):
    kernels = kernels_of(sass)
    del kernels[(None, "_Z11tc_kernelv")]
    simt = kernels[(None, "_Z12simt_kernelv")]
    simt.local = simt.stack = 0
    simt.instructions = [i for i in simt.instructions if i.opcode not in ("STL", "LDL")]
    failures = sass.check(kernels, table(sass, tmp_path, "simt_kernel* | 1 | - | needs tensor cores"))
    assert failures == ["sm_90 simt_kernel(): no tensor-core instruction (HMMA/HGMMA) at all"]


def test_the_repository_table_parses(sass):
    rows = sass.load_table(sass.DEFAULT_TABLE)
    assert any("tensor_core_gemm_kernel" in row.pattern and row.min_tensor_core >= 64 for row in rows)
    hopper = [row for row in rows if "sm90_gemm_kernel" in row.pattern]
    assert [row.arch for row in hopper] == ["sm_90a"]
    assert {"HGMMA.64x128x16", "loop:UTMALDG.2D"} <= set(hopper[0].must_hold)
