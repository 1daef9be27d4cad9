"""adcuda.onnx.export: each model passes onnx.checker and onnxruntime matches adcuda, at the traced batch
size and at another one through dynamic_axes; what ONNX cannot express is refused by name.

onnx and onnxruntime are optional (``pip install adcuda[onnx] onnxruntime``): these tests skip without
them, unless ADCUDA_REQUIRE_ONNX is set (CI sets it once it has installed them), when they fail."""

import importlib
import importlib.util
import io
import os
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers import load_module
from training_helpers import CausalBlock, MatrixVector

import adcuda
import adcuda.nn as nn
import adcuda.nn.functional as F
import adcuda.onnx
from adcuda.export import ExportError


def _missing(name):
    try:
        importlib.import_module(name)
    except ImportError:
        return True
    return False


MISSING = [name for name in ("onnx", "onnxruntime") if _missing(name)]
if MISSING and os.environ.get("ADCUDA_REQUIRE_ONNX"):
    raise ImportError(f"ADCUDA_REQUIRE_ONNX is set but {MISSING} cannot be imported")
needs_onnx = pytest.mark.skipif(
    bool(MISSING), reason=f"{' and '.join(MISSING)} not installed: pip install adcuda[onnx] onnxruntime"
)


def export_and_compare(model, args, *, dynamic_axes=None, other_args=(), opset_version=None, output_names=None):
    """Export ``model`` on ``args``, check the file with onnx.checker, and compare onnxruntime with adcuda's
    eval forward on ``args`` and on each tuple of ``other_args``. -> the ModelProto."""
    import onnx
    import onnxruntime

    args = args if isinstance(args, tuple) else (args,)
    names = [f"x{i}" for i in range(len(args))]
    training = model.training
    buffer = io.BytesIO()
    proto = adcuda.onnx.export(
        model,
        args,
        buffer,
        input_names=names,
        output_names=output_names,
        dynamic_axes=dynamic_axes,
        opset_version=opset_version,
    )
    assert model.training == training  # traced in eval mode, the flags put back
    loaded = onnx.load_from_string(buffer.getvalue())
    onnx.checker.check_model(loaded, full_check=True)
    session = onnxruntime.InferenceSession(buffer.getvalue(), providers=["CPUExecutionProvider"])
    model.eval()
    for inputs in (args, *other_args):
        with adcuda.no_grad():
            expected = model(*inputs)
        expected = list(flatten(expected))
        got = session.run(None, {n: t.numpy() for n, t in zip(names, inputs)})
        assert len(got) == len(expected)
        for g, e in zip(got, expected):
            assert g.shape == tuple(e.shape)
            np.testing.assert_allclose(g, e.numpy(), rtol=1e-4, atol=1e-5)
    model.train(training)
    return proto


def flatten(result):
    """A model's (nested) tuple of tensors in order, as the exported graph's outputs."""
    if isinstance(result, (tuple, list)):
        for r in result:
            yield from flatten(r)
    else:
        yield result


def op_types(proto):
    return [node.op_type for node in proto.graph.node]


@needs_onnx
def test_mlp_is_gemms_with_named_weights(tmp_path):
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4), nn.LogSoftmax(-1))
    model.train()
    proto = export_and_compare(
        model, adcuda.randn(3, 8), dynamic_axes={"x0": {0: "batch"}}, other_args=[(adcuda.randn(7, 8),)]
    )
    assert op_types(proto) == ["Gemm", "Relu", "Gemm", "LogSoftmax"]
    initializers = {t.name for t in proto.graph.initializer}
    assert {"0.weight", "0.bias", "2.weight", "2.bias"} <= initializers
    batch = proto.graph.input[0].type.tensor_type.shape.dim[0]
    assert batch.dim_param == "batch"
    path = tmp_path / "mlp.onnx"
    adcuda.onnx.export(model, adcuda.randn(3, 8), str(path))
    assert path.stat().st_size > 0


@needs_onnx
def test_transformer_block_with_causal_mask_and_dynamic_batch_and_sequence():
    proto = export_and_compare(
        CausalBlock(),
        adcuda.randn(2, 5, 16),
        dynamic_axes={"x0": {0: "batch", 1: "seq"}, "output_0": {0: "batch", 1: "seq"}},
        other_args=[(adcuda.randn(3, 7, 16),), (adcuda.randn(1, 1, 16),)],
    )
    ops = op_types(proto)
    assert {"LayerNormalization", "Softmax", "Trilu", "MatMul", "Gemm"} <= set(ops)
    out_dims = proto.graph.output[0].type.tensor_type.shape.dim
    assert [d.dim_param for d in out_dims[:2]] == ["batch", "seq"]


class MaskedAttention(nn.Module):
    def forward(self, q, k, v, mask):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


@needs_onnx
@pytest.mark.parametrize("boolean", [True, False])
def test_attention_with_a_given_mask(boolean):
    def mask():
        return adcuda.rand(5, 6) > 0.3 if boolean else adcuda.randn(5, 6)

    args = (adcuda.randn(2, 3, 5, 4), adcuda.randn(2, 3, 6, 4), adcuda.randn(2, 3, 6, 4), mask())
    other = (adcuda.randn(4, 3, 5, 4), adcuda.randn(4, 3, 6, 4), adcuda.randn(4, 3, 6, 4), mask())
    batch = {0: "batch"}
    export_and_compare(
        MaskedAttention(), args, dynamic_axes={"x0": batch, "x1": batch, "x2": batch}, other_args=[other]
    )


def small_cnn():
    model = nn.Sequential(
        nn.Conv2d(1, 4, 3, padding=1),
        nn.BatchNorm2d(4),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(4, 6, 3),
        nn.BatchNorm2d(6),
        nn.AvgPool2d(2),
        nn.Flatten(),
        nn.Linear(6, 3),
    )
    for bn in (model[1], model[5]):  # running statistics other than the initial ones
        bn.running_mean.copy_(adcuda.randn(bn.num_features))
        bn.running_var.copy_(adcuda.rand(bn.num_features) + 0.5)
    return model


@needs_onnx
def test_matrix_vector_products_are_one_matmul_each():
    proto = export_and_compare(
        MatrixVector(4),
        (adcuda.randn(3, 4), adcuda.randn(4)),
        dynamic_axes={"x0": {0: "rows"}},
        other_args=[(adcuda.randn(6, 4), adcuda.randn(4))],
    )
    assert op_types(proto).count("MatMul") == 2 and "Reshape" not in op_types(proto)


@needs_onnx
def test_cnn_with_batch_norm_and_pooling():
    proto = export_and_compare(
        small_cnn(),
        adcuda.randn(2, 1, 8, 8),
        dynamic_axes={"x0": [0]},
        other_args=[(adcuda.randn(5, 1, 8, 8),)],
    )
    assert op_types(proto) == [
        "Conv",
        "BatchNormalization",
        "Relu",
        "MaxPool",
        "Conv",
        "BatchNormalization",
        "AveragePool",
        "Reshape",
        "Gemm",
    ]
    conv = proto.graph.node[0]
    assert len(conv.input) == 3  # the conv's bias add became Conv's own bias
    assert {"1.running_mean", "1.running_var", "1.weight", "1.bias"} <= {t.name for t in proto.graph.initializer}


@needs_onnx
@pytest.mark.parametrize(
    "pool, operator",
    [
        (nn.AvgPool2d((2, 3), stride=(1, 2)), "AveragePool"),
        (nn.AvgPool2d(2, divisor_override=3), "Div"),  # AveragePool, then scaled to the overridden divisor
        (nn.AdaptiveAvgPool2d(1), "ReduceMean"),
    ],
)
def test_average_pools(pool, operator):
    proto = export_and_compare(
        pool, adcuda.randn(2, 3, 7, 6), dynamic_axes={"x0": [0]}, other_args=[(adcuda.randn(4, 3, 7, 6),)]
    )
    assert operator in op_types(proto)


@needs_onnx
@pytest.mark.parametrize(
    "layer, shape",
    [
        (nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1, groups=2), (2, 4, 5, 6)),
        (nn.Conv1d(4, 3, 3, padding=1), (2, 4, 9)),
        (nn.Upsample(scale_factor=2, mode="bilinear"), (2, 4, 5, 6)),
        (nn.GroupNorm(2, 4), (2, 4, 5, 6)),
        (nn.InstanceNorm2d(4), (2, 4, 5, 6)),
        (nn.RMSNorm(6), (2, 4, 5, 6)),
        (nn.AdaptiveAvgPool2d((3, 4)), (2, 4, 5, 6)),  # windows of unequal size: the averaging matrices
    ],
)
def test_more_layers(layer, shape):
    export_and_compare(
        layer, adcuda.randn(*shape), dynamic_axes={"x0": [0]}, other_args=[(adcuda.randn(3, *shape[1:]),)]
    )


class TextClassifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.embedding = nn.Embedding(20, 8)
        self.norm = nn.LayerNorm(8)
        self.head = nn.Linear(8, 3)

    def forward(self, ids):
        return self.head(F.gelu(self.norm(self.embedding(ids))).mean(1))


@needs_onnx
def test_embedding_model_with_dynamic_batch_and_length():
    proto = export_and_compare(
        TextClassifier(),
        adcuda.randint(0, 20, (2, 5)),
        dynamic_axes={"x0": {0: "batch", 1: "length"}},
        other_args=[(adcuda.randint(0, 20, (4, 9)),)],
    )
    assert "Gather" in op_types(proto) and "Gelu" not in op_types(proto)  # opset 18 spells GELU out


@needs_onnx
def test_gelu_is_one_operator_from_opset_20():
    model = nn.Sequential(nn.Linear(4, 4), nn.GELU(), nn.GELU(approximate="tanh"))
    proto = export_and_compare(model, adcuda.randn(3, 4), opset_version=20)
    assert op_types(proto).count("Gelu") == 2


def load_example(name):
    path = Path(__file__).resolve().parent.parent / "examples" / f"{name}.py"
    return load_module(f"example_{name}", path)


@needs_onnx
def test_gpt_example_with_dynamic_batch_and_sequence():
    """examples/gpt.py's model: positions (arange) and the causal mask are made for the sequence length,
    so they are computed in the graph from the input's size, not baked in."""
    model = load_example("gpt").GPT(20, block_size=8, width=16, heads=2, layers=2)
    export_and_compare(
        model,
        adcuda.randint(0, 20, (2, 8)),
        dynamic_axes={"x0": {0: "batch", 1: "seq"}},
        other_args=[(adcuda.randint(0, 20, (3, 5)),), (adcuda.randint(0, 20, (1, 1)),)],
    )


@needs_onnx
@pytest.mark.parametrize(
    "pool",
    [
        nn.AvgPool2d(3, stride=2, padding=1),
        nn.AvgPool2d(3, 2, 1, count_include_pad=False),
        nn.AvgPool2d(2, ceil_mode=True),
    ],
)
def test_average_pools_with_padding(pool):
    export_and_compare(
        pool, adcuda.randn(2, 3, 7, 8), dynamic_axes={"x0": [0]}, other_args=[(adcuda.randn(3, 3, 7, 8),)]
    )


@needs_onnx
@pytest.mark.parametrize(
    "layer",
    [
        nn.LSTM(4, 3, num_layers=2, batch_first=True),
        nn.LSTM(4, 3, bidirectional=True, batch_first=True),
        nn.GRU(4, 3, batch_first=True),
    ],
)
def test_recurrent_layers_unrolled_with_dynamic_batch(layer):
    proto = export_and_compare(
        layer, adcuda.randn(2, 5, 4), dynamic_axes={"x0": {0: "batch"}}, other_args=[(adcuda.randn(3, 5, 4),)]
    )
    assert "Split" in op_types(proto)


class ManyOps(nn.Module):
    """Slicing, reductions, comparisons and layout primitives in one forward."""

    def forward(self, x):
        y = x[:, -1] * 2 + x.flip(1)[:, 0, :].argmax(-1, keepdim=True).float()
        y = y + x.var(1) + adcuda.cat([x, x], 1).logsumexp(1).cumsum(-1)
        y = y + x.clamp(-0.5, 0.5)[..., None, 1].sum(1) + x.tril().abs().sqrt().sum(1) + F.silu(x).amin(1)
        y = y + (x * 0.5).all(1).float() + (x > 1).any(1).float() - (x.abs() > 2).int().sum(1)
        return adcuda.where(y > 0, y, x.mean(1)) + x.permute(0, 2, 1).reshape(x.shape[0], 5, 4).amax(-1)


class MoreOps(nn.Module):
    """Indexing by tensors, gathers and scatters, integer arithmetic and the rarer unary and binary ops."""

    def forward(self, x, idx):
        picked = x[:, idx].sum(1, keepdim=True) + x.gather(2, idx.view(1, 1, -1).expand(x.shape[0], 4, 2))[..., :1]
        scattered = adcuda.zeros(x.shape[0], 4, 5).scatter_add(
            2, idx.view(1, 1, -1).expand(x.shape[0], 4, 2), x[..., :2]
        )
        n = (x * 10).int()
        integers = (n // 3 + n % 3 - (-n) % 4).float() + n.cumsum(1).float()
        y = x.abs().rsqrt().log1p() + x.sign() * x.trunc() + x.exp2() - x.abs().log2() + (x.abs() + 1).log10()
        y = y + adcuda.logaddexp(x, -x) + adcuda.hypot(x, x) + x.pow(2) + (x / 0.7).floor() + adcuda.remainder(x, 0.3)
        y = y + x.clamp(min=0.1) + x.clamp(max=-0.1) + x.triu(1) - x.tril(-1) + adcuda.where(x > 0, x, 0.5)
        return y + scattered + integers + picked + x.softmax(1).log() - x.log_softmax(-1)


@needs_onnx
def test_more_primitives():
    idx = adcuda.tensor([0, 3])
    export_and_compare(
        MoreOps(),
        (adcuda.randn(3, 4, 5), idx),
        dynamic_axes={"x0": {0: "b"}},
        other_args=[(adcuda.randn(6, 4, 5), adcuda.tensor([3, 1]))],
    )


@needs_onnx
@pytest.mark.parametrize("opset", [17, 18, 21])  # reductions take their axes as an attribute before 18
def test_many_primitives_with_dynamic_batch(opset):
    export_and_compare(
        ManyOps(),
        adcuda.randn(3, 4, 5),
        dynamic_axes={"x0": {0: "b"}},
        other_args=[(adcuda.randn(6, 4, 5),)],
        opset_version=opset,
    )


class Sorts(nn.Module):
    def forward(self, x):
        return x.sort(-1).values


class PoolIndices(nn.Module):
    def forward(self, x):
        return F.max_pool2d(x, 2, return_indices=True)[1].float()


class HostSize(nn.Module):
    def forward(self, x):
        return x * adcuda.tensor(1.0 / x.shape[1])  # a host number computed from a size: baked in


class AlwaysDropout(nn.Module):
    def forward(self, x):
        return F.dropout(x, 0.5, training=True)


@needs_onnx
def test_refusals_name_the_primitive():
    with pytest.raises(ExportError, match=r"primitive sort has no ONNX translation \(at .*test_onnx_export.py:"):
        adcuda.onnx.export(Sorts(), adcuda.randn(2, 3), io.BytesIO())
    with pytest.raises(ExportError, match="max_pool2d's indices"):
        adcuda.onnx.export(PoolIndices(), adcuda.randn(1, 1, 4, 4), io.BytesIO())
    with pytest.raises(ExportError, match="changes with the dynamic sizes"):
        adcuda.onnx.export(HostSize(), adcuda.randn(2, 3), io.BytesIO(), dynamic_axes={"input_0": {1: "n"}})
    with pytest.raises(ExportError, match="runs different primitives when dynamic size 'input_0_dynamic_axes_1'"):
        adcuda.onnx.export(nn.GRU(2, 3), adcuda.randn(4, 1, 2), io.BytesIO(), dynamic_axes={"input_0": [0]})
    with pytest.raises(ExportError, match="opset_version must be"):
        adcuda.onnx.export(HostSize(), adcuda.randn(2, 3), io.BytesIO(), opset_version=9)
    with pytest.raises(ExportError, match="neither inputs"):
        adcuda.onnx.export(HostSize(), adcuda.randn(2, 3), io.BytesIO(), dynamic_axes={"nope": [0]})
    with pytest.raises(ExportError, match="random draw"):
        adcuda.onnx.export(AlwaysDropout(), adcuda.randn(2, 3), io.BytesIO())


def test_without_onnx_the_error_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "onnx", None)  # import onnx now raises ImportError
    with pytest.raises(adcuda.onnx.OnnxNotInstalledError, match=r"pip install adcuda\[onnx\]"):
        adcuda.onnx.export(nn.Linear(2, 2), adcuda.randn(1, 2), io.BytesIO())


class _Resampled(nn.Module):
    """F.interpolate and F.pad (the resample primitives) with the given keywords."""

    def __init__(self, interpolate=None, pad=None):
        super().__init__()
        self.interpolate, self.pad = interpolate, pad

    def forward(self, x):
        if self.interpolate is not None:
            x = F.interpolate(x, **self.interpolate)
        return x if self.pad is None else F.pad(x, **self.pad)


@needs_onnx
@pytest.mark.parametrize(
    "interpolate, pad, opset",
    [
        (dict(scale_factor=1.7, mode="nearest"), None, None),
        (dict(size=(9, 4), mode="nearest-exact"), None, None),
        (dict(scale_factor=(1.5, 0.7), mode="bilinear"), None, None),
        (dict(size=(11, 3), mode="bilinear", align_corners=True), None, None),
        (None, dict(pad=(2, 1, 1, 3), mode="reflect"), None),
        (None, dict(pad=(1, 2), mode="replicate"), None),
        (None, dict(pad=(-1, 2, 3, 0), value=0.5), None),
        (None, dict(pad=(2, 2, 1, 0), mode="circular"), 19),
    ],
)
def test_interpolate_and_pad(interpolate, pad, opset):
    model = _Resampled(interpolate, pad)
    shape = (2, 3, 5, 6)
    export_and_compare(
        model,
        adcuda.randn(*shape),
        dynamic_axes={"x0": [0]},
        other_args=[(adcuda.randn(3, *shape[1:]),)],
        opset_version=opset,
    )


@needs_onnx
def test_refused_padding_says_why():
    with pytest.raises(ExportError, match="reflect padding with negative"):
        adcuda.onnx.export(_Resampled(pad=dict(pad=(-1, 2), mode="reflect")), (adcuda.randn(1, 2, 5),), io.BytesIO())
    with pytest.raises(ExportError, match="circular padding below opset 19"):
        adcuda.onnx.export(_Resampled(pad=dict(pad=(1, 1), mode="circular")), (adcuda.randn(1, 2, 5),), io.BytesIO())


class ClassLoss(nn.Module):
    """A classifier head ending in a class loss (its class weights a buffer, a constant of the graph)."""

    def __init__(self, loss, weighted, **options):
        super().__init__()
        self.head = nn.Linear(4, 5)
        self.loss, self.options = loss, options
        self.register_buffer("weight", adcuda.tensor([0.5, 2.0, 1.0, 0.25, 3.0]) if weighted else None)

    def forward(self, x, y):
        logits = self.head(x)
        if self.loss == "nll_loss":
            return F.nll_loss(F.log_softmax(logits, 1), y, self.weight, **self.options)
        return getattr(F, self.loss)(logits, y, weight=self.weight, **self.options)


CLASS_LOSSES = [
    ("cross_entropy", False, {}, "NegativeLogLikelihoodLoss"),
    ("cross_entropy", True, {"ignore_index": 1, "reduction": "sum"}, "NegativeLogLikelihoodLoss"),
    ("cross_entropy", True, {"label_smoothing": 0.2, "ignore_index": 3, "reduction": "none"}, "ReduceSum"),
    ("cross_entropy", False, {"label_smoothing": 0.1, "ignore_index": 1}, "ReduceSum"),
    ("nll_loss", False, {"ignore_index": 3}, "NegativeLogLikelihoodLoss"),
    ("nll_loss", True, {"reduction": "none"}, "NegativeLogLikelihoodLoss"),
    ("nll_loss", True, {"ignore_index": 1, "reduction": "mean"}, "NegativeLogLikelihoodLoss"),
    ("multi_margin_loss", False, {}, "GatherElements"),
    ("multi_margin_loss", True, {"p": 2, "margin": 0.5, "reduction": "sum"}, "GatherElements"),
    ("multi_margin_loss", True, {"reduction": "none"}, "GatherElements"),
]


@needs_onnx
@pytest.mark.parametrize("loss, weighted, options, operator", CLASS_LOSSES)
def test_class_losses_with_weights_ignored_targets_and_reductions(loss, weighted, options, operator):
    # the fused primitives (classifier_loss, nll_loss, multi_margin_loss) as standard operators: onnxruntime's
    # values are adcuda's, at another batch size too, and with every target ignored (the mean's 0 / 0)
    adcuda.manual_seed(0)
    model = ClassLoss(loss, weighted, **options)
    proto = export_and_compare(
        model,
        (adcuda.randn(6, 4), adcuda.tensor([0, 1, 2, 3, 4, 1])),
        dynamic_axes={"x0": {0: "batch"}, "x1": {0: "batch"}},
        other_args=[
            (adcuda.randn(3, 4), adcuda.tensor([4, 3, 3])),
            (adcuda.randn(2, 4) * 30, adcuda.tensor([options.get("ignore_index", 0)] * 2)),
        ],
    )
    assert operator in op_types(proto)


@needs_onnx
def test_class_loss_of_float64_logits_and_its_module():
    model = nn.Sequential(nn.Linear(3, 4).double())
    criterion = nn.CrossEntropyLoss(weight=adcuda.tensor([1.0, 2.0, 0.5, 1.5]))

    class Head(nn.Module):
        def forward(self, x, y):
            return criterion(model(x), y), F.nll_loss(F.log_softmax(model(x), 1), y, reduction="sum")

    export_and_compare(Head(), (adcuda.randn(5, 3, dtype=adcuda.float64), adcuda.tensor([0, 3, 2, 1, 1])))
