"""adcuda's own checkpoint format (serialization/native.py, written by ``native.save``; ``adcuda.load``
still reads it): round trips, damaged and foreign files, no code execution; and atomic writes."""

import collections
import io
import json
import os
import pickle
import struct
import zlib

import numpy as np
import pytest

import adcuda
import adcuda.nn as nn
from adcuda.serialization import CheckpointError
from adcuda.serialization import native as serialization


def _np(t):
    return t.detach().numpy()


def _same_tensor(a, b):
    assert type(a) is type(b) and a.dtype is b.dtype and tuple(a.shape) == tuple(b.shape)
    assert a.device == b.device and a.requires_grad == b.requires_grad
    np.testing.assert_array_equal(_np(a), _np(b))


# ------------------------------------------------------------------------------------------ round trips
def test_round_trip_of_nested_values(tmp_path):
    shared = adcuda.randn(2, 2)
    obj = {
        "f32": adcuda.randn(3, 4),
        "f16": adcuda.randn(5).half(),
        "f64": adcuda.randn(2, dtype=adcuda.float64),
        "i32": adcuda.arange(4, dtype=adcuda.int32),
        "i64": adcuda.tensor([-(2**40), 7]),
        "bool": adcuda.tensor([True, False]),
        "scalar": adcuda.tensor(2.5),
        "empty": adcuda.zeros(0, 3),
        "strided": adcuda.arange(10.0)[::3],
        "transposed": adcuda.randn(3, 2).t(),
        "grad": adcuda.randn(2, requires_grad=True),
        "param": nn.Parameter(adcuda.ones(2)),
        "nested": [1, 2.5, "text", None, True, (3, [shared, shared]), {"deep": {"x": float("inf")}}],
        7: "int key",
        (1, 2): "tuple key",
        "nan": float("nan"),
        "big": 2**70,
        "dtype": adcuda.float16,
        "device": adcuda.device("cpu"),
        "ordered": collections.OrderedDict([("b", 1), ("a", 2)]),
    }
    path = tmp_path / "ckpt.adc"
    serialization.save(obj, path)
    got = adcuda.load(path)
    assert list(got) == list(obj)
    for key in ("f32", "f16", "f64", "i32", "i64", "bool", "scalar", "empty", "strided", "transposed", "grad"):
        _same_tensor(got[key], obj[key] if key != "strided" else obj[key].contiguous())
    assert isinstance(got["param"], nn.Parameter) and got["param"].requires_grad
    assert got["scalar"].shape == () and got["empty"].shape == (0, 3)
    nested = got["nested"]
    assert nested[:5] == [1, 2.5, "text", None, True] and isinstance(nested[5], tuple)
    assert type(nested[0]) is int and type(nested[1]) is float and nested[4] is True
    a, b = nested[5][1]
    assert a is b  # one tensor object saved twice comes back as one object
    np.testing.assert_array_equal(_np(a), _np(shared))
    assert nested[6]["deep"]["x"] == float("inf") and np.isnan(got["nan"])
    assert got[7] == "int key" and got[(1, 2)] == "tuple key" and got["big"] == 2**70
    assert got["dtype"] is adcuda.float16 and got["device"] == adcuda.device("cpu")
    assert isinstance(got["ordered"], collections.OrderedDict) and list(got["ordered"]) == ["b", "a"]
    assert type(got["f32"]) is adcuda.Tensor and got["f32"]._data.flags.writeable


def test_model_and_optimizer_checkpoint_resumes_training():
    adcuda.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.GELU(), nn.LayerNorm(4), nn.Linear(4, 1))
    opt = adcuda.optim.AdamW(model.parameters(), lr=0.01)
    x, y = adcuda.randn(8, 3), adcuda.randn(8, 1)

    def train_step(m, o):
        o.zero_grad()
        loss = ((m(x) - y) ** 2).mean()
        loss.backward()
        o.step()
        return float(loss)

    train_step(model, opt)
    buf = io.BytesIO()
    serialization.save({"model": model.state_dict(), "optim": opt.state_dict(), "epoch": 1}, buf)
    buf.seek(0)
    ckpt = adcuda.load(buf)
    model2 = nn.Sequential(nn.Linear(3, 4), nn.GELU(), nn.LayerNorm(4), nn.Linear(4, 1))
    model2.load_state_dict(ckpt["model"])
    opt2 = adcuda.optim.AdamW(model2.parameters(), lr=0.5)
    opt2.load_state_dict(ckpt["optim"])
    assert ckpt["epoch"] == 1 and opt2.param_groups[0]["lr"] == 0.01
    assert isinstance(ckpt["model"], collections.OrderedDict)
    for _ in range(3):
        assert train_step(model, opt) == train_step(model2, opt2)


def test_map_location_forms(tmp_path):
    path = tmp_path / "t.adc"
    serialization.save({"w": adcuda.ones(2)}, path)
    assert adcuda.load(path, map_location="cpu")["w"].device == adcuda.device("cpu")
    assert adcuda.load(path, map_location=adcuda.device("cpu"))["w"].device == adcuda.device("cpu")
    assert adcuda.load(path, map_location={"cuda:0": "cpu"})["w"].device == adcuda.device("cpu")
    seen = []
    got = adcuda.load(path, map_location=lambda t, where: seen.append(where) or t * 2)
    assert seen == ["cpu"] and _np(got["w"]).tolist() == [2.0, 2.0]


def _rewrite_header(path, change):
    """Edit a checkpoint's JSON header with ``change(header)`` and fix its length, checksum and padding."""
    raw = open(path, "rb").read()
    _, length, _ = serialization._PREAMBLE.unpack(raw[: serialization._PREAMBLE.size])
    header = json.loads(raw[serialization._PREAMBLE.size : serialization._PREAMBLE.size + length])
    old_data_start = serialization._align(serialization._PREAMBLE.size + length)
    change(header)
    new = json.dumps(header).encode()
    head = serialization._PREAMBLE.pack(serialization.MAGIC, len(new), zlib.crc32(new)) + new
    head += b"\0" * (serialization._align(len(head)) - len(head))
    open(path, "wb").write(head + raw[old_data_start:])


def test_cuda_checkpoint_without_a_gpu_asks_for_map_location(tmp_path):
    if adcuda.cuda.is_available():
        pytest.skip("a usable GPU is present")
    path = tmp_path / "gpu.adc"
    serialization.save({"w": adcuda.ones(2)}, path)

    def on_gpu(header):
        header["tensors"][0]["device"] = "cuda:0"

    _rewrite_header(path, on_gpu)
    with pytest.raises(RuntimeError, match="map_location='cpu'"):
        adcuda.load(path)
    assert _np(adcuda.load(path, map_location="cpu")["w"]).tolist() == [1.0, 1.0]
    assert adcuda.load(path, map_location={"cuda:0": "cpu"})["w"].device == adcuda.device("cpu")


def test_unsupported_objects_are_refused_with_their_location(tmp_path):
    with pytest.raises(CheckpointError, match=r"type object at obj\['a'\]\[1\]"):
        serialization.save({"a": [1, object()]}, tmp_path / "x")
    with pytest.raises(CheckpointError, match="dict key of type frozenset"):
        serialization.save({frozenset(): 1}, tmp_path / "x")
    assert not os.listdir(tmp_path)


# ------------------------------------------------------------------------------------------ bad files
@pytest.fixture
def checkpoint(tmp_path):
    path = tmp_path / "model.adc"
    serialization.save({"weight": adcuda.randn(40, 30), "step": 3}, path)
    return path


def _expect_corrupt(path, pattern):
    with pytest.raises(CheckpointError, match=pattern) as err:
        adcuda.load(path)
    assert str(path) in str(err.value)
    assert isinstance(err.value, RuntimeError)


def test_truncated_files_are_reported(checkpoint):
    raw = checkpoint.read_bytes()
    for cut in (0, 5, 20, 100, len(raw) // 2, len(raw) - 1):
        checkpoint.write_bytes(raw[:cut])
        _expect_corrupt(checkpoint, "empty" if cut == 0 else "truncated")


def test_damaged_bytes_are_caught_by_the_checksums(checkpoint):
    raw = bytearray(checkpoint.read_bytes())
    for position in (40, len(raw) - 7):  # one in the header, one in the tensor data
        damaged = bytearray(raw)
        damaged[position] ^= 0x10
        checkpoint.write_bytes(bytes(damaged))
        _expect_corrupt(checkpoint, "checksum")
    checkpoint.write_bytes(bytes(raw) + b"junk")
    _expect_corrupt(checkpoint, "after the last tensor")


def test_headers_that_lie_are_rejected(checkpoint):
    for change, pattern in [
        (lambda h: h["tensors"][0].update(shape=[40, 31]), "tensor 0 is described wrongly"),
        (lambda h: h["tensors"][0].update(dtype="complex64"), "unknown dtype"),
        (lambda h: h["tensors"][0].update(offset=64), "tensor 0 is described wrongly"),
        (lambda h: h.update(tree={"t": "tensor", "i": 5}), "refers to tensor 5"),
        (lambda h: h.update(tree={"t": "pickle", "data": "..."}), "unknown node"),
        (lambda h: h.update(version=99), "version 99"),
        (lambda h: h.update(format="other"), "does not describe an adcuda checkpoint"),
    ]:
        original = checkpoint.read_bytes()
        _rewrite_header(checkpoint, change)
        _expect_corrupt(checkpoint, pattern)
        checkpoint.write_bytes(original)
    assert adcuda.load(checkpoint)["step"] == 3


class _Exploit:
    def __reduce__(self):
        return (os.system, ("touch pwned_by_adcuda_load",))


def test_a_malicious_pickle_is_not_executed(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "evil.pt"
    path.write_bytes(pickle.dumps({"weights": _Exploit()}))
    for weights_only in (True, False):
        with pytest.raises(CheckpointError, match="bare pickle"):
            adcuda.load(path, weights_only=weights_only)
    assert not (tmp_path / "pwned_by_adcuda_load").exists()


def test_foreign_formats_are_named(tmp_path):
    npy = tmp_path / "a.npy"
    np.save(npy, np.ones(3))
    _expect_corrupt(npy, "NumPy .npy")
    npz = tmp_path / "a.npz"
    np.savez(npz, a=np.ones(3))
    _expect_corrupt(npz, "not a valid PyTorch checkpoint")
    junk = tmp_path / "junk.bin"
    junk.write_bytes(os.urandom(256))
    _expect_corrupt(junk, "not a checkpoint adcuda reads")
    huge = tmp_path / "huge.adc"
    huge.write_bytes(struct.pack("<8sQI4x", serialization.MAGIC, 2**40, 0))
    _expect_corrupt(huge, "implausible")
    with pytest.raises(FileNotFoundError, match="no such checkpoint"):
        adcuda.load(tmp_path / "missing.adc")


def test_a_torch_checkpoint_is_read_by_the_same_load(tmp_path):
    torch = pytest.importorskip("torch")
    path = tmp_path / "torch.pt"
    torch.save({"w": torch.ones(2)}, path)
    assert _np(adcuda.load(path)["w"]).tolist() == [1.0, 1.0]


# ------------------------------------------------------------------------------------------ atomic writes
def test_a_crash_while_writing_leaves_the_previous_checkpoint_intact(tmp_path, monkeypatch):
    path = tmp_path / "ckpt.adc"
    adcuda.save({"version": 1, "w": adcuda.ones(1000)}, path)
    original = path.read_bytes()

    real_write = adcuda.serialization.torch_format.write

    def crash_midway(obj, f, archive, protocol):
        real_write({"partial": adcuda.ones(10)}, f, archive, protocol)
        raise KeyboardInterrupt("power cut")

    monkeypatch.setattr(adcuda.serialization.torch_format, "write", crash_midway)
    with pytest.raises(KeyboardInterrupt):
        adcuda.save({"version": 2, "w": adcuda.zeros(1000)}, path)
    assert path.read_bytes() == original
    assert os.listdir(tmp_path) == ["ckpt.adc"]  # no temporary file left behind
    monkeypatch.undo()
    adcuda.save({"version": 2}, str(path))
    assert adcuda.load(str(path)) == {"version": 2}
