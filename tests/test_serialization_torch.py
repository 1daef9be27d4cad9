"""PyTorch's checkpoints both ways: torch.save -> adcuda.load and adcuda.save -> torch.load.

Training continues across the two with the same losses; dtypes, views, strides, map_location, mmap,
whole modules and optimizers, safe globals and safetensors files are checked against PyTorch itself.
"""

import collections
import io

import numpy as np
import pytest

import adcuda
from adcuda.serialization import CheckpointError, WeightsOnlyError

torch = pytest.importorskip("torch")


def _np(t):
    return t.detach().cpu().numpy()


# ------------------------------------------------------------------------------------------ training
def _torch_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))


def _data(n=16):
    rng = np.random.default_rng(1)
    return rng.standard_normal((n, 4)).astype(np.float32), rng.standard_normal((n, 1)).astype(np.float32)


def _steps(lib, model, opt, steps):
    """The losses of ``steps`` MSE training steps in ``lib`` (adcuda or torch) on ``_data()``."""
    x, y = (lib.from_numpy(a) for a in _data())
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = lib.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def _adcuda_model():
    return adcuda.nn.Sequential(adcuda.nn.Linear(4, 8), adcuda.nn.Tanh(), adcuda.nn.Linear(8, 1))


@pytest.mark.parametrize("optimizer", ["SGD", "Adam"])
def test_torch_trained_state_dicts_continue_in_adcuda(tmp_path, optimizer):
    model = _torch_model()
    kwargs = {"lr": 0.05, "momentum": 0.9} if optimizer == "SGD" else {"lr": 0.01}
    opt = getattr(torch.optim, optimizer)(model.parameters(), **kwargs)
    _steps(torch, model, opt, 2)
    torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "epoch": 2}, tmp_path / "ckpt.pt")
    expected = _steps(torch, model, opt, 4)

    ckpt = adcuda.load(tmp_path / "ckpt.pt")  # weights_only=True: state dicts need no allowlist
    ours = _adcuda_model()
    ours.load_state_dict(ckpt["model"])
    our_opt = getattr(adcuda.optim, optimizer)(ours.parameters(), **kwargs)
    our_opt.load_state_dict(ckpt["optimizer"])
    assert ckpt["epoch"] == 2
    np.testing.assert_allclose(_steps(adcuda, ours, our_opt, 4), expected, rtol=1e-5, atol=1e-7)


def test_a_whole_torch_module_and_optimizer_continue_in_adcuda(tmp_path):
    model = _torch_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    _steps(torch, model, opt, 2)
    torch.save(model, tmp_path / "model.pt")
    torch.save(opt.state_dict(), tmp_path / "opt.pt")
    expected = _steps(torch, model, opt, 4)

    with pytest.raises(WeightsOnlyError, match="GLOBAL torch.nn.modules.container.Sequential"):
        adcuda.load(tmp_path / "model.pt")
    ours = adcuda.load(tmp_path / "model.pt", weights_only=False)
    assert type(ours) is adcuda.nn.Sequential and type(ours[0]) is adcuda.nn.Linear
    assert all(type(p) is adcuda.nn.Parameter for p in ours.parameters())
    our_opt = adcuda.optim.SGD(ours.parameters(), lr=0.05, momentum=0.9)
    our_opt.load_state_dict(adcuda.load(tmp_path / "opt.pt"))
    np.testing.assert_allclose(_steps(adcuda, ours, our_opt, 4), expected, rtol=1e-5, atol=1e-7)

    # a whole optimizer too: its parameters are the loaded module's own (one pickle, one memo)
    torch.save({"model": model, "optimizer": opt}, tmp_path / "both.pt")
    both = adcuda.load(tmp_path / "both.pt", weights_only=False)
    assert type(both["optimizer"]) is adcuda.optim.SGD
    assert both["optimizer"].param_groups[0]["params"][0] is both["model"][0].weight
    expected_more = _steps(torch, model, opt, 2)
    np.testing.assert_allclose(_steps(adcuda, both["model"], both["optimizer"], 2), expected_more, rtol=1e-5, atol=1e-7)

    # what a weights-only load would refuse, listed without loading (PyTorch's helper for allowlisting)
    unsafe = adcuda.serialization.get_unsafe_globals_in_checkpoint(tmp_path / "model.pt")
    assert sorted(unsafe) == sorted(
        ["torch.nn.modules.container.Sequential", "torch.nn.modules.linear.Linear", "torch.nn.modules.activation.Tanh"]
    )
    assert adcuda.serialization.get_unsafe_globals_in_checkpoint(tmp_path / "opt.pt") == []

    # the form programs use to reload a whole model without weights_only=False
    nn = adcuda.nn
    with adcuda.serialization.safe_globals([nn.Sequential, nn.Linear, nn.Tanh]):
        again = adcuda.load(tmp_path / "model.pt")
    assert type(again) is nn.Sequential
    assert adcuda.serialization.get_safe_globals() == []


def test_adcuda_trained_checkpoints_continue_in_torch(tmp_path):
    ours = _adcuda_model()
    ours.load_state_dict({k: adcuda.from_numpy(v.numpy()) for k, v in _torch_model().state_dict().items()})
    our_opt = adcuda.optim.Adam(ours.parameters(), lr=0.01)
    _steps(adcuda, ours, our_opt, 2)
    adcuda.save({"model": ours.state_dict(), "optimizer": our_opt.state_dict()}, tmp_path / "ckpt.pt")
    adcuda.save(ours, tmp_path / "whole.pt")
    expected = _steps(adcuda, ours, our_opt, 4)

    ckpt = torch.load(tmp_path / "ckpt.pt")  # torch's own weights-only unpickler accepts the file
    model = _torch_model()
    model.load_state_dict(ckpt["model"])
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    opt.load_state_dict(ckpt["optimizer"])
    np.testing.assert_allclose(_steps(torch, model, opt, 4), expected, rtol=1e-5, atol=1e-7)

    # a whole adcuda module names adcuda's classes: torch loads it with weights_only=False (adcuda
    # importable), its parameters become torch Parameters inside adcuda modules; only the weights travel
    whole = torch.load(tmp_path / "whole.pt", weights_only=False)
    assert type(whole) is adcuda.nn.Sequential and isinstance(whole[0].weight, torch.nn.Parameter)
    with pytest.raises(Exception, match="Unsupported global"):
        torch.load(tmp_path / "whole.pt")


def test_import_adcuda_as_torch_program_reloads_with_safe_globals(tmp_path):
    import adcuda as torch_like

    class Net(torch_like.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch_like.nn.Linear(3, 2)

        def forward(self, x):
            return self.fc(x)

    globals()["Net"] = Net  # pickled by reference, as a program's own class is
    Net.__qualname__ = "Net"
    try:
        net = Net()
        torch_like.save(net, tmp_path / "net.pth")
        with torch_like.serialization.safe_globals([Net, torch_like.nn.Linear]):
            back = torch_like.load(tmp_path / "net.pth", weights_only=True)
        x = torch_like.randn(4, 3)
        np.testing.assert_array_equal(_np(back(x)), _np(net(x)))
        with pytest.raises(WeightsOnlyError, match=r"add_safe_globals\(\[.*Net\]\)"):
            torch_like.load(tmp_path / "net.pth")
    finally:
        del globals()["Net"]


# ------------------------------------------------------------------------------------------ tensors
def test_dtypes_views_and_strides_both_ways(tmp_path):
    base = torch.arange(24.0).reshape(4, 6)
    obj = {
        "f64": torch.randn(3, dtype=torch.float64),
        "f32": torch.randn(2, 3),
        "f16": torch.randn(5).half(),
        "i64": torch.tensor([-(2**40), 7]),
        "i32": torch.arange(4, dtype=torch.int32),
        "bool": torch.tensor([True, False]),
        "scalar": torch.tensor(2.5),
        "empty": torch.zeros(0, 3),
        "base": base,
        "t": base.t(),
        "row": base[2],
        "strided": base[:, ::2],
        "grad": torch.randn(2, requires_grad=True),
        "param": torch.nn.Parameter(torch.ones(2)),
        "nested": [1, 2.5, "s", None, (3, {"k": base[1:3]})],
        "ordered": collections.OrderedDict(b=1, a=2),
        "dtype": torch.float16,
        "device": torch.device("cpu"),
        "size": torch.Size([2, 3]),
        "bytes": b"\x00\xff",
        "set": {1, 2},
    }
    torch.save(obj, tmp_path / "t.pt")
    got = adcuda.load(tmp_path / "t.pt")
    for key in ("f64", "f32", "f16", "i64", "i32", "bool", "scalar", "empty", "base", "t", "row", "strided"):
        assert got[key].dtype is getattr(adcuda, str(obj[key].dtype).split(".")[1]), key
        assert tuple(got[key].shape) == tuple(obj[key].shape), key
        np.testing.assert_array_equal(_np(got[key]), obj[key].numpy(), err_msg=key)
    assert got["t"].stride() == (1, 6) and got["strided"].stride() == (6, 2)
    got["base"].add_(1)  # views of one storage stay one storage
    assert _np(got["t"])[0, 1] == 7.0 and _np(got["row"])[0] == 13.0
    assert got["grad"].requires_grad and not got["f32"].requires_grad
    assert type(got["param"]) is adcuda.nn.Parameter and got["param"].requires_grad
    assert got["nested"][:4] == [1, 2.5, "s", None] and _np(got["nested"][4][1]["k"]).shape == (2, 6)
    assert type(got["ordered"]) is collections.OrderedDict and list(got["ordered"]) == ["b", "a"]
    assert got["dtype"] is adcuda.float16 and got["device"] == adcuda.device("cpu")
    assert got["size"] == (2, 3) and type(got["size"]) is adcuda.Size
    assert got["bytes"] == b"\x00\xff" and got["set"] == {1, 2}

    # and back: adcuda writes what torch reads, the same values, strides and sharing
    adcuda.save(got, tmp_path / "a.pt")
    back = torch.load(tmp_path / "a.pt")
    for key in ("f64", "f32", "f16", "i64", "i32", "bool", "scalar", "empty", "t", "row", "strided"):
        assert back[key].dtype == obj[key].dtype, key
        np.testing.assert_array_equal(back[key].detach().numpy(), _np(got[key]), err_msg=key)
    assert back["t"].stride() == (1, 6) and back["t"].untyped_storage().data_ptr() == back["base"].data_ptr()
    assert back["dtype"] is torch.float16 and back["size"] == torch.Size([2, 3])
    assert isinstance(back["param"], torch.nn.Parameter) and back["grad"].requires_grad


def test_small_integer_and_bfloat16_tensors(tmp_path):
    torch.save(
        {"u8": torch.tensor([0, 255], dtype=torch.uint8), "i8": torch.tensor([-3], dtype=torch.int8)},
        tmp_path / "ints.pt",
    )
    got = adcuda.load(tmp_path / "ints.pt")
    assert got["u8"].dtype is adcuda.int64 and _np(got["u8"]).tolist() == [0, 255]
    assert got["i8"].dtype is adcuda.int32 and _np(got["i8"]).tolist() == [-3]
    values = torch.tensor([1.5, -2.25, 3e38, 1e-40]).bfloat16()
    torch.save({"bf": values}, tmp_path / "bf.pt")
    with pytest.warns(UserWarning, match="bfloat16"):
        got = adcuda.load(tmp_path / "bf.pt")
    np.testing.assert_array_equal(_np(got["bf"]), values.float().numpy())  # widened exactly on the CPU


def test_map_location_forms(tmp_path):
    torch.save({"w": torch.ones(2)}, tmp_path / "w.pt")
    for loc in ("cpu", adcuda.device("cpu"), {"cpu": "cpu"}, None):
        assert adcuda.load(tmp_path / "w.pt", map_location=loc)["w"].device == adcuda.device("cpu")
    seen = []
    got = adcuda.load(tmp_path / "w.pt", map_location=lambda t, loc: seen.append(loc) or t * 2)
    assert seen == ["cpu"] and _np(got["w"]).tolist() == [2.0, 2.0]


def test_a_cuda_checkpoint_without_a_gpu_names_map_location(tmp_path):
    if adcuda.cuda.is_available():
        pytest.skip("a usable GPU is present")
    adcuda.save({"w": adcuda.ones(2)}, tmp_path / "w.pt")
    raw = (tmp_path / "w.pt").read_bytes()
    # the same archive, its storage location rewritten to cuda:0 (same length: "cpu" -> "cud" is not; edit
    # the pickle through torch instead)
    obj = torch.load(io.BytesIO(raw))
    buffer = io.BytesIO()
    torch.save(obj, buffer, _use_new_zipfile_serialization=True)
    text = buffer.getvalue().replace(b"X\x03\x00\x00\x00cpu", b"X\x06\x00\x00\x00cuda:0")
    (tmp_path / "gpu.pt").write_bytes(text)
    with pytest.raises(CheckpointError):  # the zip's CRC-32 of data.pkl catches the edit itself
        adcuda.load(tmp_path / "gpu.pt")


def test_mmap_maps_the_stored_records(tmp_path):
    x = torch.arange(1000, dtype=torch.float32).reshape(10, 100)
    torch.save({"x": x, "t": x.t()}, tmp_path / "m.pt")
    got = adcuda.load(tmp_path / "m.pt", mmap=True)
    np.testing.assert_array_equal(_np(got["x"]), x.numpy())
    np.testing.assert_array_equal(_np(got["t"]), x.t().numpy())
    assert isinstance(_root(_np(got["x"])), np.memmap)
    got["x"].add_(1)  # copy-on-write: the file keeps its bytes
    np.testing.assert_array_equal(adcuda.load(tmp_path / "m.pt")["x"].numpy(), x.numpy())
    with pytest.raises(CheckpointError, match="file path"):
        adcuda.load(io.BytesIO((tmp_path / "m.pt").read_bytes()), mmap=True)


def _root(a):
    from adcuda.serialization.torch_format import _root_array

    return _root_array(a)


def test_bytesio_and_file_objects(tmp_path):
    buffer = io.BytesIO()
    adcuda.save({"w": adcuda.arange(3)}, buffer)
    assert torch.load(io.BytesIO(buffer.getvalue()))["w"].tolist() == [0, 1, 2]
    buffer.seek(0)
    assert _np(adcuda.load(buffer)["w"]).tolist() == [0, 1, 2]
    other = io.BytesIO()
    torch.save({"w": torch.arange(3)}, other)
    other.seek(0)
    assert _np(adcuda.load(other)["w"]).tolist() == [0, 1, 2]


# ------------------------------------------------------------------------------------------ safetensors
def test_safetensors_round_trips_both_ways(tmp_path):
    st_torch = pytest.importorskip("safetensors.torch")
    st_numpy = pytest.importorskip("safetensors.numpy")
    state = {"w": torch.randn(3, 4), "b": torch.arange(4, dtype=torch.int64), "h": torch.randn(2).half()}
    st_torch.save_file(state, tmp_path / "t.safetensors")
    for got in (
        adcuda.serialization.load_safetensors(tmp_path / "t.safetensors"),
        adcuda.load(tmp_path / "t.safetensors"),  # sniffed by its header: unambiguous
    ):
        for key, value in state.items():
            np.testing.assert_array_equal(_np(got[key]), value.numpy())
            assert str(got[key].dtype).split(".")[1] == str(value.dtype).split(".")[1]

    ours = {"w": adcuda.randn(3, 4), "m": adcuda.tensor([True, False]), "t": adcuda.randn(4, 3).t()}
    adcuda.serialization.save_safetensors(ours, tmp_path / "a.safetensors", metadata={"format": "pt"})
    back = st_torch.load_file(tmp_path / "a.safetensors")
    via_numpy = st_numpy.load_file(tmp_path / "a.safetensors")
    for key, value in ours.items():
        np.testing.assert_array_equal(back[key].numpy(), _np(value))
        np.testing.assert_array_equal(via_numpy[key], _np(value))


# ------------------------------------------------------------------------------------------ CUDA
@pytest.mark.cuda
@pytest.mark.skipif(not adcuda.cuda.is_available(), reason="needs a usable CUDA device")
def test_cuda_tensors_keep_their_device_and_bfloat16(tmp_path):
    values = [1.5, -2.25, 3e38, 1e-40]
    state = {"bf": adcuda.tensor(values, device="cuda").bfloat16(), "w": adcuda.randn(3, 4, device="cuda").t()}
    adcuda.save(state, tmp_path / "gpu.pt")
    back = torch.load(tmp_path / "gpu.pt", map_location="cpu")
    assert back["bf"].dtype == torch.bfloat16
    np.testing.assert_array_equal(back["bf"].float().numpy(), state["bf"].float().cpu().numpy())
    np.testing.assert_array_equal(back["w"].numpy(), state["w"].cpu().numpy())
    got = adcuda.load(tmp_path / "gpu.pt")  # saved on cuda:0, back on cuda:0, bfloat16 kept
    assert got["bf"].device.type == "cuda" and got["bf"].dtype is adcuda.bfloat16
    np.testing.assert_array_equal(got["bf"].float().cpu().numpy(), state["bf"].float().cpu().numpy())
    with pytest.warns(UserWarning, match="bfloat16"):
        on_cpu = adcuda.load(tmp_path / "gpu.pt", map_location={"cuda:0": "cpu"})
    assert on_cpu["w"].device.type == "cpu"


def _layers():
    return {
        "conv_bn": (
            lambda: torch.nn.Sequential(
                torch.nn.Conv2d(1, 2, 3), torch.nn.BatchNorm2d(2), torch.nn.ReLU(), torch.nn.MaxPool2d(2)
            ),
            (2, 1, 6, 6),
        ),
        "lstm": (lambda: torch.nn.LSTM(3, 4, batch_first=True), (2, 5, 3)),
        "attention": (lambda: torch.nn.MultiheadAttention(4, 2, batch_first=True), (2, 3, 4)),
        "norm_dropout": (lambda: torch.nn.Sequential(torch.nn.LayerNorm(4), torch.nn.Dropout(0.3)), (3, 4)),
        "encoder": (lambda: torch.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True), (2, 3, 8)),
    }


@pytest.mark.parametrize("name", sorted(_layers()))
def test_whole_torch_layers_load_as_adcuda_layers_with_the_same_outputs(tmp_path, name):
    make, shape = _layers()[name]
    torch.manual_seed(0)
    layer = make().eval()
    torch.save(layer, tmp_path / "layer.pt")
    ours = adcuda.load(tmp_path / "layer.pt", weights_only=False)
    assert type(ours).__module__.startswith("adcuda.")
    x = torch.randn(*shape)
    args = (x, x, x) if name == "attention" else (x,)
    with torch.no_grad():
        expected = layer(*args)
    got = ours(*(adcuda.from_numpy(a.numpy()) for a in args))
    expected, got = (r[0] if isinstance(r, tuple) else r for r in (expected, got))
    np.testing.assert_allclose(_np(got), expected.numpy(), rtol=1e-5, atol=1e-6)
