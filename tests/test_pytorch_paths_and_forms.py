"""PyTorch's long tail that save/load programs meet: ``torch.nn.modules.*`` import paths, tensor kind
flags, channel dropout on inputs of other ranks (warned, as PyTorch does), and save/load call forms."""

import importlib
import io
import pickle
import warnings

import numpy as np
import pytest

import adcuda
import adcuda.nn as nn

# torch.nn.modules.<path> -> classes programs import from there (and pickles name)
MODULE_PATHS = {
    "activation": ["ReLU", "GELU", "Softmax", "MultiheadAttention"],
    "linear": ["Linear", "Identity", "Bilinear", "NonDynamicallyQuantizableLinear"],
    "conv": ["Conv1d", "Conv2d", "ConvTranspose2d"],
    "batchnorm": ["BatchNorm1d", "BatchNorm2d", "BatchNorm3d"],
    "instancenorm": ["InstanceNorm1d", "InstanceNorm2d"],
    "normalization": ["LayerNorm", "GroupNorm"],
    "loss": ["CrossEntropyLoss", "MSELoss", "NLLLoss"],
    "dropout": ["Dropout", "Dropout2d", "Dropout3d"],
    "pooling": ["MaxPool2d", "AdaptiveAvgPool2d"],
    "upsampling": ["Upsample", "UpsamplingNearest2d", "UpsamplingBilinear2d"],
    "channelshuffle": ["ChannelShuffle"],
    "container": ["Sequential", "ModuleList", "ModuleDict"],
    "sparse": ["Embedding"],
    "rnn": ["LSTM", "GRU"],
    "transformer": ["TransformerEncoderLayer"],
    "module": ["Module"],
}


@pytest.mark.parametrize("path", sorted(MODULE_PATHS))
def test_torch_nn_modules_paths_hold_the_same_classes(path):
    module = importlib.import_module(f"adcuda.nn.modules.{path}")
    for name in MODULE_PATHS[path]:
        cls = getattr(module, name)
        assert cls is getattr(nn, name, cls), f"nn.modules.{path}.{name} is another class than nn.{name}"
    pytest.importorskip("torch")
    ours = importlib.import_module(f"torch.nn.modules.{path}")
    assert all(hasattr(ours, name) for name in MODULE_PATHS[path])  # the same names exist there


def test_multihead_attention_out_proj_is_pytorchs_linear_subclass():
    mha = nn.MultiheadAttention(4, 2)
    assert type(mha.out_proj).__name__ == "NonDynamicallyQuantizableLinear"
    assert isinstance(mha.out_proj, nn.Linear)


def test_tensor_kind_flags():
    t = adcuda.ones(2)
    assert t.is_cpu and not t.is_cuda
    assert not (t.is_xpu or t.is_mps or t.is_meta or t.is_quantized or t.is_mkldnn or t.is_nested)


# ------------------------------------------------------------------------------------------ dropout
@pytest.mark.parametrize(
    ("fn", "shape", "warned", "channels"),
    [
        ("dropout2d", (6, 40), "Received a 2-D input to dropout2d", (6, 40)),
        ("dropout2d", (4, 6, 10), "Received a 3D input to dropout2d", (4, 6, 1)),
        ("dropout2d", (4, 6, 2, 2, 2), "Received a 5-D input to dropout2d", (4, 6, 1, 1, 1)),
        ("dropout3d", (24, 40), "Received a 2-D input to dropout3d", (24, 1)),
        ("dropout3d", (24, 4, 5), "Received a 3-D input to dropout3d", (24, 1, 1)),
        ("dropout3d", (24, 4, 5, 6), None, (24, 1, 1, 1)),
        ("dropout2d", (4, 6, 4, 5), None, (4, 6, 1, 1)),
    ],
)
def test_channel_dropout_on_any_rank_follows_pytorch(fn, shape, warned, channels):
    torch = pytest.importorskip("torch")
    adcuda.manual_seed(0)
    x = adcuda.ones(*shape)
    with warnings.catch_warnings(record=True) as ours:
        warnings.simplefilter("always")
        y = getattr(nn.functional, fn)(x, 0.5, True).numpy()
    with warnings.catch_warnings(record=True) as theirs:
        warnings.simplefilter("always")
        getattr(torch.nn.functional, fn)(torch.ones(*shape), 0.5, True)
    assert [str(w.message) for w in ours] == [str(w.message) for w in theirs]
    if warned:
        assert warned in str(ours[0].message)
    # whole groups dropped together: constant over the dims the mask broadcasts along
    axes = tuple(i for i, n in enumerate(channels) if n == 1)
    assert set(np.unique(y)) <= {0.0, 2.0}
    assert np.all(y == y.max(axis=axes, keepdims=True)) and 0 < (y == 0).sum() < y.size


def test_channel_dropout_rejects_what_pytorch_rejects():
    with pytest.raises(adcuda.errors.ShapeError, match="at least 2 dimensions"), pytest.warns(UserWarning, match="1-D"):
        nn.functional.dropout2d(adcuda.ones(4), 0.5, True)
    with pytest.raises(adcuda.errors.ShapeError, match="2D or 3D"):
        nn.functional.dropout1d(adcuda.ones(2, 3, 4, 5), 0.5, True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert nn.Dropout2d()(adcuda.ones(1, 2, 3, 4)).shape == (1, 2, 3, 4)  # 4-D: no warning
    layer = nn.Dropout2d().eval()
    with pytest.warns(UserWarning, match="2-D input"):
        np.testing.assert_array_equal(layer(adcuda.ones(3, 4)).numpy(), np.ones((3, 4)))


# ------------------------------------------------------------------------------------------ save forms
def test_save_and_load_call_forms():
    model = nn.Linear(3, 2)
    buffer = io.BytesIO()
    adcuda.save(model.state_dict(), buffer, pickle_module=pickle, pickle_protocol=4)
    buffer.seek(0)
    state = adcuda.load(buffer, map_location="cpu", pickle_module=pickle, weights_only=True)
    result = model.load_state_dict(state, strict=False)
    assert (
        result.missing_keys == [] and result.unexpected_keys == [] and repr(result) == "<All keys matched successfully>"
    )
    buffer = io.BytesIO()
    adcuda.save({"sd": model.state_dict(prefix="net.", keep_vars=True)}, buffer, _use_new_zipfile_serialization=False)
    assert buffer.getvalue()[:4] == b"PK\x03\x04"  # always the zip format, which every PyTorch >= 1.6 reads
    buffer.seek(0)
    got = adcuda.load(buffer)["sd"]
    assert list(got) == ["net.weight", "net.bias"] and type(got["net.weight"]) is nn.Parameter
    with pytest.raises(adcuda.serialization.CheckpointError, match="pickle_module"):
        adcuda.save({}, io.BytesIO(), pickle_module=json_like_module())
    assert adcuda.serialization.DEFAULT_PROTOCOL == 2


def json_like_module():
    import json

    return json
