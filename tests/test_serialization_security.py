"""``adcuda.load`` of hostile and damaged files: crafted pickles run nothing under weights_only=True,
and truncated or bit-flipped files of every format raise an adcuda error or load exactly the original."""

import collections
import io
import os
import pickle
import random
import struct
import zipfile

import numpy as np
import pytest

import adcuda
from adcuda.errors import AdcudaError
from adcuda.serialization import CheckpointError, WeightsOnlyError, native

MARKER = "pwned_by_adcuda_load"


def _archive(data_pkl, records=None):
    """A zip laid out as torch.save lays it out, holding ``data_pkl`` and storage ``records``."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as zf:
        zf.writestr("archive/data.pkl", data_pkl)
        zf.writestr("archive/byteorder", "little")
        for key, raw in (records or {}).items():
            zf.writestr(f"archive/data/{key}", raw)
        zf.writestr("archive/version", "3\n")
    return buffer.getvalue()


def _refuses(tmp_path, data_pkl, pattern=None, records=None, error=WeightsOnlyError):
    path = tmp_path / "evil.pt"
    path.write_bytes(_archive(data_pkl, records))
    with pytest.raises(error, match=pattern):
        adcuda.load(path)
    assert not (tmp_path / MARKER).exists()


class _SystemCall:
    def __reduce__(self):
        return (os.system, (f"touch {MARKER}",))


def _global(module, name):
    return pickle.GLOBAL + f"{module}\n{name}\n".encode()


def _text(s):
    raw = s.encode()
    return pickle.BINUNICODE + struct.pack("<I", len(raw)) + raw


def _call(module, name, arg):
    return _global(module, name) + _text(arg) + pickle.TUPLE1 + pickle.REDUCE


CODE = f"open('{MARKER}', 'w').close()"


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    yield
    assert not (tmp_path / MARKER).exists()


@pytest.mark.parametrize("protocol", [2, 4, 5])
def test_reduce_calling_os_system_is_refused(tmp_path, protocol):
    payload = pickle.dumps({"weights": [1, {"deep": _SystemCall()}]}, protocol=protocol)
    _refuses(tmp_path, payload, r"Unsupported global: GLOBAL (posix|nt)\.system.*add_safe_globals")


@pytest.mark.parametrize(
    ("module", "name"),
    [("builtins", "eval"), ("builtins", "exec"), ("__builtin__", "eval"), ("os", "system"), ("subprocess", "call")],
)
def test_globals_of_code_execution_are_refused(tmp_path, module, name):
    _refuses(tmp_path, b"\x80\x02" + _call(module, name, CODE) + pickle.STOP, f"GLOBAL {name}|GLOBAL {module}")


def test_getattr_chains_and_stack_global_tricks_are_refused(tmp_path):
    getattr_chain = (
        b"\x80\x02"
        + _global("builtins", "getattr")
        + _global("collections", "OrderedDict")
        + _text("__init__")
        + pickle.TUPLE2
        + pickle.REDUCE
        + pickle.STOP
    )
    _refuses(tmp_path, getattr_chain, "GLOBAL getattr")
    stack_global = b"\x80\x04" + _text("builtins") + _text("eval") + pickle.STACK_GLOBAL + _text(CODE)
    _refuses(tmp_path, stack_global + pickle.TUPLE1 + pickle.REDUCE + pickle.STOP, "GLOBAL eval")
    not_strings = b"\x80\x04" + pickle.EMPTY_DICT + _text("eval") + pickle.STACK_GLOBAL + pickle.STOP
    _refuses(tmp_path, not_strings, "STACK_GLOBAL")
    # an allowed global's attributes are not reachable: the allowlist is by exact name
    _refuses(tmp_path, b"\x80\x02" + _global("collections", "OrderedDict.__init__") + pickle.STOP, "Unsupported")
    _refuses(tmp_path, b"\x80\x02" + _global("torch.nn.modules.linear", "Linear") + pickle.STOP, "GLOBAL torch.nn")


def test_opcodes_outside_the_data_subset_are_refused(tmp_path):
    for payload in (
        b"\x80\x02" + pickle.EXT1 + b"\x01" + pickle.STOP,  # copyreg extension registry
        b"(" + b"ios\nsystem\n" + _text(CODE) + pickle.STOP,  # INST: find_class + call in one
        b"(" + _global("os", "system") + _text(CODE) + pickle.OBJ + pickle.STOP,
        b"\x80\x02" + pickle.PERSID + b"x\n" + pickle.STOP,
    ):
        _refuses(tmp_path, payload)


def test_objects_of_unlisted_classes_are_never_built(tmp_path):
    newobj = b"\x80\x02" + _global("collections", "OrderedDict") + pickle.EMPTY_TUPLE + pickle.NEWOBJ
    ok = newobj + pickle.STOP
    assert adcuda.load(_write(tmp_path, _archive(ok))) == collections.OrderedDict()
    setitems_on_tuple = b"\x80\x02" + pickle.EMPTY_TUPLE + pickle.MARK + _text("a") + _text("b") + pickle.SETITEMS
    _refuses(tmp_path, setitems_on_tuple + pickle.STOP, "SETITEMS")
    build_on_int = b"\x80\x02" + pickle.BININT1 + b"\x01" + pickle.EMPTY_DICT + pickle.BUILD + pickle.STOP
    _refuses(tmp_path, build_on_int, "Can only build")
    call_a_string = b"\x80\x02" + _text("os.system") + _text(CODE) + pickle.TUPLE1 + pickle.REDUCE + pickle.STOP
    _refuses(tmp_path, call_a_string, "unrecognized function")


def test_numpy_objects_are_numbers_and_bools_only(tmp_path):
    ok = pickle.dumps({"best": np.float64(0.25), "hist": np.arange(4, dtype=np.int32)}, protocol=2)
    got = adcuda.load(_write(tmp_path, _archive(ok)))
    assert got["best"] == 0.25 and got["hist"].tolist() == [0, 1, 2, 3]
    object_dtype = b"\x80\x02" + _global("numpy", "dtype") + _text("O") + pickle.TUPLE1 + pickle.REDUCE + pickle.STOP
    _refuses(tmp_path, object_dtype, "dtype other than numbers")
    object_array = pickle.dumps(np.array([_SystemCall()], dtype=object), protocol=2)
    _refuses(tmp_path, object_array, "Unsupported global|dtype other than numbers")
    short_scalar = (
        b"\x80\x02"
        + _global("numpy._core.multiarray", "scalar")
        + _global("numpy", "dtype")
        + _text("f8")
        + pickle.TUPLE1
        + pickle.REDUCE
        + pickle.SHORT_BINBYTES
        + b"\x02ab"
        + pickle.TUPLE2
        + pickle.REDUCE
        + pickle.STOP
    )
    _refuses(tmp_path, short_scalar, "do not fit its dtype")


def _write(tmp_path, raw, name="x.pt"):
    path = tmp_path / name
    path.write_bytes(raw)
    return path


def _storage_pid(key, numel=1, type_name="FloatStorage"):
    return (
        pickle.MARK
        + _text("storage")
        + _global("torch", type_name)
        + _text(key)
        + _text("cpu")
        + pickle.BININT
        + struct.pack("<i", numel)
        + pickle.TUPLE
        + pickle.BINPERSID
    )


def _tensor(pid, size=(1,), stride=(1,), offset=0):
    dims = b"".join(pickle.BININT + struct.pack("<i", n) for n in size)
    steps = b"".join(pickle.BININT + struct.pack("<i", n) for n in stride)
    return (
        _global("torch._utils", "_rebuild_tensor_v2")
        + pickle.MARK
        + pid
        + pickle.BININT
        + struct.pack("<i", offset)
        + pickle.MARK
        + dims
        + pickle.TUPLE
        + pickle.MARK
        + steps
        + pickle.TUPLE
        + pickle.NEWFALSE
        + _global("collections", "OrderedDict")
        + pickle.EMPTY_TUPLE
        + pickle.REDUCE
        + pickle.TUPLE
        + pickle.REDUCE
    )


def test_persistent_ids_and_sizes_that_lie_are_refused(tmp_path):
    one = {"0": np.float32(3.5).tobytes()}
    good = b"\x80\x02" + _tensor(_storage_pid("0")) + pickle.STOP
    assert adcuda.load(_write(tmp_path, _archive(good, one))).item() == 3.5
    for pid, pattern in [
        (_storage_pid("../../etc/passwd"), "does not name a record"),
        (_storage_pid("0/../../x"), "does not name a record"),
        (_storage_pid("7"), "missing"),
        (_storage_pid("0", numel=2), "holds 4 bytes"),
        (_storage_pid("0", numel=-1), "implausible"),
        (_storage_pid("0", type_name="ComplexFloatStorage"), "Unsupported global"),
    ]:
        with pytest.raises(AdcudaError, match=pattern):
            adcuda.load(_write(tmp_path, _archive(b"\x80\x02" + _tensor(pid) + pickle.STOP, one)))
    for size, stride, offset in [((2,), (1,), 0), ((1,), (1,), 1), ((10**6, 10**6), (1, 1), 0), ((3,), (0,), 2)]:
        bad = b"\x80\x02" + _tensor(_storage_pid("0"), size, stride, offset) + pickle.STOP
        with pytest.raises(CheckpointError, match="past its storage"):
            adcuda.load(_write(tmp_path, _archive(bad, one)))
    non_storage = b"\x80\x02" + pickle.MARK + _text("module") + pickle.TUPLE + pickle.BINPERSID + pickle.STOP
    _refuses(tmp_path, non_storage, "Only persistent_load of storage")
    huge_string = b"\x80\x02" + pickle.BINUNICODE + struct.pack("<I", 2**31) + b"abc" + pickle.STOP
    _refuses(tmp_path, huge_string, "truncated")
    huge_bytes = b"\x80\x04" + pickle.BINBYTES8 + struct.pack("<Q", 2**62) + pickle.STOP
    _refuses(tmp_path, huge_bytes, "truncated")


def test_compressed_records_are_refused(tmp_path):
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("archive/data.pkl", pickle.dumps({"a": 1}, protocol=2) + b"\0" * 10**6)
    with pytest.raises(CheckpointError, match="compressed"):
        adcuda.load(_write(tmp_path, buffer.getvalue()))


def test_truncated_payloads_raise_at_every_length(tmp_path):
    payload = pickle.dumps({"weights": [1, 2.5, "x", (None, True)], "evil": _SystemCall()}, protocol=2)
    for cut in range(len(payload)):
        _refuses(tmp_path, payload[:cut], error=(WeightsOnlyError, CheckpointError))


def test_a_bare_pickle_is_never_unpickled(tmp_path):
    path = _write(tmp_path, pickle.dumps(_SystemCall()), "bare.pt")
    for weights_only in (True, False):
        with pytest.raises(CheckpointError, match="bare pickle"):
            adcuda.load(path, weights_only=weights_only)


def test_weights_only_false_is_the_documented_escape_hatch(tmp_path):
    """What weights_only=False does with an unlisted global: it calls it (here a harmless one)."""
    path = _write(tmp_path, _archive(b"\x80\x02" + _call("builtins", "len", "abcd") + pickle.STOP))
    with pytest.raises(WeightsOnlyError):
        adcuda.load(path)
    assert adcuda.load(path, weights_only=False) == 4
    with adcuda.serialization.safe_globals([len]):
        assert adcuda.load(path) == 4
    assert adcuda.serialization.get_safe_globals() == []
    adcuda.serialization.add_safe_globals([(len, "builtins.len")])
    try:
        assert adcuda.load(path) == 4
    finally:
        adcuda.serialization.clear_safe_globals()


# ------------------------------------------------------------------------------------------ fuzzing
def _same(a, b):
    if isinstance(a, adcuda.Tensor):
        return (
            isinstance(b, adcuda.Tensor)
            and a.dtype is b.dtype
            and tuple(a.shape) == tuple(b.shape)
            and np.array_equal(a.detach().numpy(), b.detach().numpy())
        )
    if isinstance(a, dict):
        return type(a) is type(b) and list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


def _fuzz(tmp_path, raw, cases, seed):
    rng = random.Random(seed)
    original = adcuda.load(io.BytesIO(raw))
    path = tmp_path / "fuzz.bin"
    outcomes = collections.Counter()
    for i in range(cases):
        damaged = bytearray(raw)
        if i % 3 == 0:
            damaged = damaged[: rng.randrange(len(raw))]
        else:
            for _ in range(rng.choice((1, 1, 2, 8))):
                damaged[rng.randrange(len(raw))] ^= 1 << rng.randrange(8)
        path.write_bytes(bytes(damaged))
        try:
            got = adcuda.load(path)
        except AdcudaError:
            outcomes["error"] += 1
            continue
        assert _same(original, got), f"case {i} loaded something else"
        outcomes["same"] += 1
    assert outcomes["error"] > cases // 3
    return outcomes


def _state():
    gen = adcuda.Generator().manual_seed(0)
    return {
        "w": adcuda.randn(6, 5, generator=gen),
        "b": adcuda.arange(5, dtype=adcuda.int32),
        "h": adcuda.randn(3, generator=gen).half(),
        "step": 7,
        "name": "run",
        "flags": [True, None, 2.5],
    }


def test_fuzzed_pytorch_format_files_never_load_wrong(tmp_path):
    buffer = io.BytesIO()
    adcuda.save(_state(), buffer)
    _fuzz(tmp_path, buffer.getvalue(), 300, seed=28)


def test_fuzzed_native_format_files_never_load_wrong(tmp_path):
    buffer = io.BytesIO()
    native.save(_state(), buffer)
    _fuzz(tmp_path, buffer.getvalue(), 300, seed=27)


def test_fuzzed_safetensors_files_never_load_wrong(tmp_path):
    adcuda.serialization.save_safetensors({"w": adcuda.randn(4, 3), "i": adcuda.arange(3)}, tmp_path / "s.st")
    _fuzz(tmp_path, (tmp_path / "s.st").read_bytes(), 150, seed=26)
