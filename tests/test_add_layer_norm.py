"""The residual add fused with layer norm (adcuda/ops/norm.py's add_layer_norm; the add_layer_norm
primitives of backends/cpu/norm.py and kernels/norm.cu): against the unfused composition ``h = x + r;
y = layer_norm(h)`` for values and gradients, gradcheck in float64, dtypes under autocast, errors,
graph capture and replay, and export. The CUDA kernel's parity with the CPU primitive is
tests/test_cuda_nn_kernels.py's."""

import io
import os
import subprocess

import numpy as np
import pytest

import adcuda
from adcuda import dtypes as dt
from adcuda import nn
from adcuda.errors import ShapeError
from adcuda.export import to_c
from adcuda.nn import functional as F
from adcuda.ops.norm import add_layer_norm


def _tensors(shape, dtype=dt.float64, seed=0, requires_grad=True):
    g = np.random.default_rng(seed)
    return [
        adcuda.tensor(g.standard_normal(s) * scale + shift, dtype=dtype, requires_grad=requires_grad)
        for s, scale, shift in ((shape, 2.0, 0.5), (shape, 1.0, -0.25), (shape[-1:], 1.0, 1.0), (shape[-1:], 0.5, 0.0))
    ]


def _unfused(x, r, w, b):
    h = x + r
    return F.layer_norm(h, (h.shape[-1],), w, b), h


@pytest.mark.parametrize("uses", ["both", "y", "h"])
@pytest.mark.parametrize("affine", [True, False])
def test_values_and_gradients_match_the_unfused_composition(uses, affine):
    shape = (3, 5, 8)
    got, want = _tensors(shape), _tensors(shape)
    if not affine:
        got[2:] = want[2:] = [None, None]
    c = adcuda.tensor(np.random.default_rng(1).standard_normal(shape))
    results = []
    for (x, r, w, b), fn in ((got, lambda *a: add_layer_norm(*a[:2], 8, *a[2:])), (want, _unfused)):
        y, h = fn(x, r, w, b)
        loss = {"both": (y * y).sum() + (h * c).sum(), "y": (y * y).sum(), "h": (h * c).sum()}[uses]
        loss.backward()
        results.append([y, h] + [t.grad for t in (x, r, w, b) if t is not None])
    for a, e in zip(*results):
        if e is None:  # y unused: the fused node gives the parameters zeros, the unfused graph nothing
            assert uses == "h" and not a.numpy().any()
        else:
            np.testing.assert_allclose(a.detach().numpy(), e.detach().numpy(), rtol=1e-12, atol=1e-12)


def test_the_node_has_two_outputs_and_grads_reach_both_inputs():
    x, r, w, b = _tensors((4, 6))
    y, h = add_layer_norm(x, r, 6, w, b)
    assert y.grad_fn is h.grad_fn and y.grad_fn.name() == "AddLayerNormBackward"
    (y.sum() + h.sum()).backward()
    np.testing.assert_allclose(x.grad.numpy(), r.grad.numpy())  # one gradient for both addends


def test_gradcheck_and_gradgradcheck():
    inputs = tuple(_tensors((2, 3, 5)))
    fn = lambda x, r, w, b: add_layer_norm(x, r, 5, w, b)  # noqa: E731
    assert adcuda.autograd.gradcheck(fn, inputs)
    assert adcuda.autograd.gradgradcheck(fn, inputs)


def test_two_normalized_dims():
    x, r, _, _ = _tensors((3, 4, 5))
    y, h = add_layer_norm(x, r, (4, 5))
    want = F.layer_norm(x + r, (4, 5))
    np.testing.assert_allclose(y.detach().numpy(), want.detach().numpy(), rtol=1e-12, atol=1e-12)


def test_dtypes_promote_and_autocast_writes_y_in_its_dtype():
    g = np.random.default_rng(2)
    branch = adcuda.tensor(g.standard_normal((4, 16)), dtype=dt.float16)
    residual = adcuda.tensor(g.standard_normal((4, 16)), dtype=dt.float32)
    y, h = add_layer_norm(branch, residual, 16)
    assert h.dtype is dt.float32 and y.dtype is dt.float32
    expected_h = branch.float() + residual
    np.testing.assert_array_equal(h.numpy(), expected_h.numpy())
    with adcuda.autocast("cpu", dtype=dt.float16):
        y16, h16 = add_layer_norm(branch, residual, 16)
    assert y16.dtype is dt.float16 and h16.dtype is dt.float32
    np.testing.assert_array_equal(y16.numpy(), F.layer_norm(expected_h, (16,)).to(dt.float16).numpy())


def test_errors_name_the_op():
    x, r, w, _ = _tensors((2, 4))
    with pytest.raises(ShapeError, match="add_layer_norm.*same shape"):
        add_layer_norm(x, r[:1], 4)
    with pytest.raises(ShapeError, match="add_layer_norm.*normalized_shape"):
        add_layer_norm(x, r, 3)
    with pytest.raises(ShapeError, match="add_layer_norm.*weight"):
        add_layer_norm(x, r, 4, w[:2])
    with pytest.raises(adcuda.errors.UnsupportedDTypeError, match="add_layer_norm"):
        add_layer_norm(x.long(), r, 4)


def test_transformer_encoder_layer_norm_first_uses_it_with_the_same_results():
    adcuda.manual_seed(0)
    layer = nn.TransformerEncoderLayer(16, 2, dim_feedforward=32, dropout=0.0, batch_first=True, norm_first=True)
    src = adcuda.tensor(np.random.default_rng(3).standard_normal((2, 5, 16)).astype(np.float32), requires_grad=True)
    out = layer(src)
    assert any(isinstance(n, adcuda.autograd.graph.Node) and n.name() == "AddLayerNormBackward" for n in _nodes(out))
    x = src + layer._sa_block(layer.norm1(src), None, None, False)
    want = x + layer._ff_block(layer.norm2(x))
    np.testing.assert_allclose(out.detach().numpy(), want.detach().numpy(), rtol=1e-6, atol=1e-6)


def _nodes(t):
    seen, stack = [], [t.grad_fn]
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.append(node)
        stack.extend(edge[0] for edge in node.next_edges if edge is not None)
    return seen


class _Block(nn.Module):
    """A pre-LayerNorm block's middle: the branch added to the residual, then normalised."""

    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(8, 8)
        self.norm = nn.LayerNorm(8)
        self.head = nn.Linear(8, 3)

    def forward(self, x):
        y, h = add_layer_norm(self.proj(x), x, 8, self.norm.weight, self.norm.bias, self.norm.eps)
        return self.head(y) + h[..., :3]


def test_capture_and_replay_is_bit_identical():
    def make():
        adcuda.manual_seed(0)
        model = _Block()
        opt = adcuda.optim.SGD(model.parameters(), lr=0.1)

        def step(x):
            opt.zero_grad()
            loss = (model(x) ** 2).mean()
            loss.backward()
            opt.step()
            return loss

        return model, step

    xs = [adcuda.tensor(np.random.default_rng(i).standard_normal((4, 8)).astype(np.float32)) for i in range(3)]
    (eager_model, eager_step), (model, step) = make(), make()
    compiled = adcuda.compile(step)
    for i in range(5):
        assert compiled(xs[i % 3]).detach().numpy().tobytes() == eager_step(xs[i % 3]).detach().numpy().tobytes()
    for p, q in zip(eager_model.parameters(), model.parameters()):
        assert p.detach().numpy().tobytes() == q.detach().numpy().tobytes()
    assert len(compiled.programs) == 1 and compiled.programs[0].replays >= 3


def test_onnx_export_decomposes_it():
    onnx = pytest.importorskip("onnx")
    onnxruntime = pytest.importorskip("onnxruntime")
    adcuda.manual_seed(0)
    model = _Block().eval()
    x = adcuda.tensor(np.random.default_rng(4).standard_normal((4, 8)).astype(np.float32))
    buffer = io.BytesIO()
    adcuda.onnx.export(model, (x,), buffer, input_names=["x"])
    proto = onnx.load_from_string(buffer.getvalue())
    onnx.checker.check_model(proto, full_check=True)
    assert {"Add", "LayerNormalization"} <= {n.op_type for n in proto.graph.node}
    session = onnxruntime.InferenceSession(buffer.getvalue(), providers=["CPUExecutionProvider"])
    (got,) = session.run(None, {"x": x.numpy()})
    np.testing.assert_allclose(got, model(x).detach().numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("reads_the_sum", [True, False])
def test_c_export_lowers_it_to_the_sum_and_the_norm(compile_c, tmp_path, reads_the_sum):
    adcuda.manual_seed(0)
    model = _Block().eval()
    if not reads_the_sum:  # the sum is not a value of the model: the lowering makes one
        model.forward = lambda x: model.head(
            add_layer_norm(model.proj(x), x, 8, model.norm.weight, model.norm.bias, model.norm.eps)[0]
        )
    x = adcuda.tensor(np.random.default_rng(5).standard_normal((4, 8)).astype(np.float32))
    export = to_c(model, (x,), tmp_path, name="net", runner=True)
    exe = compile_c([export.source, os.path.join(tmp_path, "net_main.c")], os.path.join(tmp_path, "run"))
    paths = [os.path.join(tmp_path, name) for name in ("x.bin", "out.bin")]
    x.numpy().tofile(paths[0])
    result = subprocess.run([exe, *paths], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    got = np.fromfile(paths[1], np.float32).reshape(4, 3)
    np.testing.assert_allclose(got, model(x).detach().numpy(), rtol=1e-5, atol=1e-5)
