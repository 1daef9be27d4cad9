"""The declarative elementwise table (adcuda/backends/elementwise_table.py) and what is made from it:
the CUDA X-macro list kernels/elementwise_ops.def is current, the CPU dispatch holds exactly the
table's ops with the formulas it names, and every CUDA functor it names exists in kernels/functors.cuh;
the binary functions of floating operands (FLOAT_BINARY) likewise, and the host module's binary loops
are the rows marked ``host``.
Also the seam's ``@primitive`` declarations: each one's signature is the backends' (any machine)."""

import inspect
import pathlib
import re
import subprocess
import sys

import numpy as np
import pytest

from adcuda.backends import cpu, seam
from adcuda.backends.cpu import elementwise as cpu_elementwise
from adcuda.backends.elementwise_table import (
    FLOAT,
    FLOAT_BINARY,
    FLOAT_ONLY,
    NOT_FOR_BOOL,
    UNARY,
    elementwise_ops_def,
)

ROOT = pathlib.Path(__file__).resolve().parent.parent


def test_the_x_macro_list_is_generated_from_the_table():
    assert (ROOT / "kernels" / "elementwise_ops.def").read_text() == elementwise_ops_def(), (
        "kernels/elementwise_ops.def is stale: run python scripts/gen_elementwise_ops.py"
    )


def test_the_generator_checks_the_committed_file():
    script = ROOT / "scripts" / "gen_elementwise_ops.py"
    done = subprocess.run([sys.executable, str(script), "--check"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_the_cpu_dispatch_is_the_tables():
    assert list(cpu.UNARY_OPS) == [op.name for op in UNARY]
    assert set(cpu.UNARY_BACKWARD_OPS) == {op.name for op in UNARY if op.backward is not None}
    for op in UNARY:
        assert cpu.UNARY_OPS[op.name] is cpu_elementwise._formula(op.cpu)
        if op.backward is not None:
            assert cpu.UNARY_BACKWARD_OPS[op.name] is cpu_elementwise._formula(op.backward.cpu)


def test_the_binary_functions_are_the_tables():
    """Each FLOAT_BINARY row's CPU formula is the dispatch's, its host loop is there exactly when the row
    says so (the host module's names, in the generated list's order), and the CUDA binary table includes
    the generated list instead of naming the rows again."""
    names = [op.name for op in FLOAT_BINARY]
    assert len(names) == len(set(names))
    for op in FLOAT_BINARY:
        assert cpu.BINARY_OPS[op.name] is cpu_elementwise._formula(op.cpu)
    if cpu_elementwise._C is not None:
        assert list(cpu_elementwise._C.host_binary_names()) == [op.name for op in FLOAT_BINARY if op.host]
    kernel = (ROOT / "kernels" / "elementwise_binary.cu").read_text()
    assert '#include "elementwise_ops.def"' in kernel
    for op in FLOAT_BINARY:
        if op.float_only:  # (remainder's CUDA kernels are the division kind's, listed there)
            assert f'"{op.name}"' not in kernel, f"{op.name} is named in elementwise_binary.cu besides the table"


def test_names_are_unique_and_kinds_known():
    names = [op.name for op in UNARY]
    assert len(names) == len(set(names))
    assert FLOAT_ONLY == {op.name for op in UNARY if op.kind == FLOAT}
    assert NOT_FOR_BOOL == {"neg", "sign"}


@pytest.mark.parametrize(
    "functor",
    sorted(
        {op.cuda for op in UNARY} | {op.backward.cuda for op in UNARY if op.backward} | {op.cuda for op in FLOAT_BINARY}
    ),
)
def test_every_cuda_functor_exists(functor):
    source = (ROOT / "kernels" / "functors.cuh").read_text()
    assert re.search(rf"\bstruct {functor}\b", source), f"math::{functor} is not in kernels/functors.cuh"


@pytest.mark.parametrize("op", [op for op in UNARY if op.kind == FLOAT], ids=lambda op: op.name)
def test_float_only_ops_widen_integers_on_the_cpu(op):
    """The table's float-only kind is what the CPU dispatch reads: an integer array is computed in
    float64 and cast back (a formula NumPy has no integer loop for would raise otherwise)."""
    a = np.array([1, 2], np.int32)
    with np.errstate(all="ignore"):  # (atanh(1), erfinv(2)...: values are not the point)
        assert cpu.unary(op.name, a).dtype == np.int32


def test_the_gemm_epilogue_is_the_elementwise_gelu_tanh():
    """The CPU GEMM's epilogue calls the elementwise primitive's formula: the same bits."""
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((5, 7), np.float32), rng.standard_normal((7, 3), np.float32)
    out = cpu.matmul(a, b, activation="gelu_tanh")
    np.testing.assert_array_equal(out, cpu.unary("gelu_tanh", cpu.matmul(a, b)))


@pytest.mark.parametrize("name", sorted(seam.DECLARED))
def test_a_declarations_signature_is_the_backends(name):
    """The parameters, annotations and defaults included (a declaration returns None: the result's
    annotation is the implementations', which tests/test_backend_seam.py compares)."""
    declaration = inspect.signature(seam.DECLARED[name]).replace(return_annotation=inspect.Signature.empty)
    implementation = seam.seam_signature(name, getattr(cpu, name))
    assert implementation.replace(return_annotation=inspect.Signature.empty) == declaration


def test_primitive_accepts_only_the_seams_names():
    def not_a_primitive(x):
        pass

    with pytest.raises(ValueError, match="not one of the seam's PRIMITIVES"):
        seam.primitive(not_a_primitive)
