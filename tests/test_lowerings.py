"""What export and capture know of the primitives, declared with the ops (``lowering(...)`` in
adcuda/ops/<family>.py, registry.py's ``Lowering``): every declaration names a primitive of the seam,
and an op written with declared primitives exports to ONNX and to C with nothing declared of its own
(adcuda.special.xlog1py, the op docs/adding-an-op.md was checked with)."""

import importlib
import io
import os
import subprocess

import numpy as np
import pytest

import adcuda
import adcuda.nn as nn
from adcuda.backends import seam
from adcuda.export import to_c
from adcuda.ops import registry


def test_every_lowering_names_a_primitive_of_the_seam():
    # the modules by path: adcuda.backends.cpu's own ``reduce`` is the primitive
    elementwise = importlib.import_module("adcuda.backends.cpu.elementwise")
    reduce = importlib.import_module("adcuda.backends.cpu.reduce")
    known = {"unary": elementwise.UNARY_OPS, "binary": elementwise.BINARY_OPS, "reduce": reduce.REDUCE_OPS}
    declared = registry._LOWERINGS.values()
    assert len(declared) > 90
    for lowering in declared:
        assert lowering.primitive in seam.PRIMITIVES, lowering
        if lowering.op is not None:
            assert lowering.op in known[lowering.primitive], lowering
    assert registry.lowering_of("unary", "gelu").c_fusable and registry.lowering_of("unary", "no_such_op") is None
    with pytest.raises(ValueError, match="declared twice"):
        registry.lowering("unary", "gelu", c="v")


class Xlog1py(nn.Module):
    def forward(self, x, y):
        return adcuda.special.xlog1py(x, y) + 1.0


def _inputs():
    x = adcuda.tensor([[0.0, 1.5, -2.0, 0.0], [3.0, 0.0, 0.25, -1.0]])
    y = adcuda.tensor([[2.0, 0.5, 3.0, -0.5], [0.0, 7.0, -0.75, 1.0]])
    return x, y


def test_an_op_of_declared_primitives_exports_to_onnx():
    onnx = pytest.importorskip("onnx")
    onnxruntime = pytest.importorskip("onnxruntime")
    x, y = _inputs()
    buffer = io.BytesIO()
    adcuda.onnx.export(Xlog1py(), (x, y), buffer, input_names=["x", "y"])
    onnx.checker.check_model(onnx.load_from_string(buffer.getvalue()), full_check=True)
    session = onnxruntime.InferenceSession(buffer.getvalue(), providers=["CPUExecutionProvider"])
    (got,) = session.run(None, {"x": x.numpy(), "y": y.numpy()})
    want = adcuda.special.xlog1py(x, y) + 1.0
    np.testing.assert_allclose(got, want.numpy(), rtol=1e-6, atol=1e-6)
    assert got[0, 0] == 1.0 and got[1, 1] == 1.0  # 0 where x is 0


def _c_result(module, compile_c, tmp_path):
    """``module`` of ``_inputs()`` through its C export, compiled and run."""
    x, y = _inputs()
    export = to_c(module, (x, y), tmp_path, name="net", runner=True)
    exe = compile_c([export.source, os.path.join(tmp_path, "net_main.c")], os.path.join(tmp_path, "run"))
    paths = [os.path.join(tmp_path, name) for name in ("x.bin", "y.bin", "out.bin")]
    x.numpy().tofile(paths[0])
    y.numpy().tofile(paths[1])
    result = subprocess.run([exe, *paths], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    return np.fromfile(paths[2], np.float32).reshape(2, 4)


def test_an_op_of_declared_primitives_exports_to_c(compile_c, tmp_path):
    x, y = _inputs()
    got = _c_result(Xlog1py(), compile_c, tmp_path)
    np.testing.assert_allclose(got, (adcuda.special.xlog1py(x, y) + 1.0).numpy(), rtol=1e-5, atol=1e-6)


class OneParameterActivations(nn.Module):
    """The ops whose forward is one primitive of their own (issue 31): each needs its lowerings."""

    def forward(self, x, y):
        F = adcuda.nn.functional
        shrunk = F.hardshrink(x, 0.4) + F.softshrink(y, 0.6) + F.celu(x, 0.7)
        stepped = adcuda.heaviside(x, y) + adcuda.frac(y) + adcuda.logit(x.sigmoid())
        return shrunk + stepped + F.prelu(x, adcuda.tensor([0.3])) + adcuda.nan_to_num(y / x)


def test_the_one_primitive_activations_export_to_onnx_and_c(compile_c, tmp_path):
    pytest.importorskip("onnx")
    onnxruntime = pytest.importorskip("onnxruntime")
    x, y = _inputs()
    want = OneParameterActivations()(x, y).numpy()
    buffer = io.BytesIO()
    adcuda.onnx.export(OneParameterActivations(), (x, y), buffer, input_names=["x", "y"])
    session = onnxruntime.InferenceSession(buffer.getvalue(), providers=["CPUExecutionProvider"])
    (got,) = session.run(None, {"x": x.numpy(), "y": y.numpy()})
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(_c_result(OneParameterActivations(), compile_c, tmp_path), want, rtol=1e-5, atol=1e-5)
