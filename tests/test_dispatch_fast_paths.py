"""The common-case fast paths of issue 31's per-call work give what the general paths give: dims
(wrap_dim), permutations, factory sizes, one index tensor as a key, the kept triangle coordinates, and
the CPU softmax; what those paths reject is still rejected."""

import importlib

import numpy as np
import pytest
import torch

import adcuda
from adcuda.errors import AdcudaError

cpu_softmax = importlib.import_module("adcuda.backends.cpu.softmax_loss")


def test_dims_in_range_negative_and_rejected():
    x = adcuda.ones(2, 3, 4)
    assert x.sum(-1).shape == (2, 3) and x.sum(2).shape == (2, 3) and x.sum(-3).shape == (3, 4)
    for bad in (3, -4, True, 1.0):
        with pytest.raises(AdcudaError):
            x.sum(bad)


def test_permutations_as_ints_and_not():
    x = adcuda.arange(24).reshape(2, 3, 4)
    t = torch.arange(24).reshape(2, 3, 4)
    for dims in ((2, 0, 1), (0, 1, 2), (-1, 0, 1)):
        assert x.permute(*dims).tolist() == t.permute(*dims).tolist()
        assert x.permute(list(dims)).tolist() == t.permute(list(dims)).tolist()
    assert x[0].t().tolist() == t[0].t().tolist()
    assert x.mT.tolist() == t.mT.tolist()
    for bad in ((True, False, 2), (0, 0, 1), (0, 1)):
        with pytest.raises(AdcudaError):
            x.permute(*bad)


def test_factory_sizes_as_ints_and_not():
    assert adcuda.zeros(2, 3).shape == (2, 3) and adcuda.zeros((2, 3)).shape == (2, 3)
    assert adcuda.zeros(np.int64(2), 3).shape == (2, 3)  # converted by the general path
    for bad in ((True, 2), (-1, 2), (2.0, 2)):
        with pytest.raises(AdcudaError):
            adcuda.zeros(*bad)


@pytest.mark.parametrize("key", [[1, 2, 0], [[0, 1], [2, 3]], 3])
def test_one_index_tensor_as_key(key):
    data = np.arange(20, dtype=np.float32).reshape(4, 5)
    got = adcuda.tensor(data)[adcuda.tensor(key)]
    expected = torch.tensor(data)[torch.tensor(key)]
    assert got.shape == expected.shape and got.tolist() == expected.tolist()


def test_one_mask_as_key_and_bad_key_dtype():
    data = np.arange(20, dtype=np.float32).reshape(4, 5)
    x = adcuda.tensor(data)
    assert x[x > 7].tolist() == torch.tensor(data)[torch.tensor(data) > 7].tolist()
    with pytest.raises(AdcudaError):
        x[adcuda.tensor([0.0, 1.0])]


def test_kept_triangle_coordinates_are_not_shared():
    for make in ("tril_indices", "triu_indices"):
        first = getattr(adcuda, make)(4, 5, 1)
        assert first.tolist() == getattr(torch, make)(4, 5, 1).tolist()
        first[0, 0] = 99  # a write into one result reaches neither the kept array nor the next result
        assert getattr(adcuda, make)(4, 5, 1).tolist() == getattr(torch, make)(4, 5, 1).tolist()


def _softmax_as_written(a, axis, log):
    x = a.astype(np.float32) if a.dtype == np.float16 else a
    m = np.amax(x, axis=axis, keepdims=True, initial=-np.inf)
    with np.errstate(divide="ignore", invalid="ignore"):
        shifted = x - m
        e = np.exp(shifted)
        s = np.sum(e, axis=axis, keepdims=True)
        r = shifted - np.log(s) if log else e / s
    return np.asarray(r).astype(a.dtype, copy=False)


@pytest.mark.parametrize("log", [False, True])
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_cpu_softmax_is_its_formula_bit_for_bit(monkeypatch, log, dtype):
    # the NumPy path's in-place passes (the host module's loop is compared with it in test_softmax_loss_host.py)
    monkeypatch.setattr(cpu_softmax, "_NATIVE", None)
    rng = np.random.default_rng(5)
    for shape in [(8, 8), (3, 5, 7), (1,), (0, 4), (5, 1)]:
        a = (rng.standard_normal(shape) * 30).astype(dtype)
        if a.size > 2:  # a row with +inf, -inf and NaN: NaN throughout, as PyTorch's
            a.flat[0], a.flat[1], a.flat[-1] = np.inf, -np.inf, np.nan
        for axis in range(len(shape)):
            got, expected = cpu_softmax.softmax(a, axis, log), _softmax_as_written(a, axis, log)
            assert got.dtype == expected.dtype and got.shape == expected.shape
            assert got.tobytes() == expected.tobytes(), (shape, axis)


def test_basic_tuple_keys_and_select():
    data = np.arange(60, dtype=np.float32).reshape(3, 4, 5)
    x, t = adcuda.tensor(data), torch.tensor(data)
    for key in [(slice(None), 1), (1, 2), (slice(0, 2), slice(None, None, 2)), (slice(None), -1, slice(1, None)), (2,)]:
        assert x[key].tolist() == t[key].tolist(), key
    for dim in (0, 1, 2, -1):
        assert x.select(dim, 1).tolist() == t.select(dim, 1).tolist()
        assert [u.tolist() for u in x.unbind(dim)] == [u.tolist() for u in t.unbind(dim)]
    with pytest.raises(AdcudaError):
        x[(slice(None), slice(None, None, -1))]  # PyTorch takes no negative step
    with pytest.raises(AdcudaError):
        x[(0, 7)]


def test_select_is_a_view_with_history():
    leaf = adcuda.ones(3, 4, requires_grad=True)
    row = leaf.select(1, 2)
    assert row._base is not None
    (row * 3).sum().backward()
    expected = np.zeros((3, 4), np.float32)
    expected[:, 2] = 3
    assert leaf.grad.tolist() == expected.tolist()


@pytest.mark.parametrize("shape", [(8, 8), (3, 4, 5), (5,), (0, 3), (2, 0, 4), (6, 1, 2)])
def test_nonzero_over_the_primitives(shape):
    rng = np.random.default_rng(2)
    data = np.where(rng.random(shape) < 0.5, rng.standard_normal(shape), 0).astype(np.float32)
    x, t = adcuda.tensor(data), torch.tensor(data)
    got, expected = adcuda.nonzero(x), torch.nonzero(t)
    assert got.dtype is adcuda.int64 and tuple(got.shape) == tuple(expected.shape)
    assert got.tolist() == expected.tolist()
    pieces = adcuda.nonzero(x, as_tuple=True)
    assert [p.tolist() for p in pieces] == [p.tolist() for p in torch.nonzero(t, as_tuple=True)]
    assert adcuda.argwhere(x).tolist() == torch.argwhere(t).tolist()


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_index_select_and_its_range_check(dim):
    data = np.arange(20, dtype=np.float32).reshape(4, 5)
    for idx in ([1, 2, 0], [3], []):
        got = adcuda.tensor(data).index_select(dim, adcuda.tensor(idx, dtype=adcuda.int64))
        expected = torch.tensor(data).index_select(dim, torch.tensor(idx, dtype=torch.int64))
        assert tuple(got.shape) == tuple(expected.shape) and got.tolist() == expected.tolist()
    for bad in ([4, 0], [-1]):  # out of range on the host check of a CPU index
        with pytest.raises(AdcudaError):
            adcuda.tensor(data).index_select(0, adcuda.tensor(bad))


@pytest.mark.parametrize(
    "data",
    [
        [[1.0, 2.0], [3.0, 4.0]],
        [1, 2, 3],
        [True, False],
        [True, 2],
        [1, 2.5],
        [[True], [3.0]],
        [np.int32(3), 4],
        [2**40, 1],
    ],
)
def test_tensor_from_nested_numbers(data):
    got, expected = adcuda.tensor(data), torch.tensor(data)
    assert str(got.dtype).rsplit(".", 1)[-1] == str(expected.dtype).rsplit(".", 1)[-1]
    assert got.tolist() == expected.tolist()


def test_tensor_from_nested_data_holding_tensors():
    got = adcuda.tensor([[1.0, adcuda.tensor(2.0)], [adcuda.tensor(3.0), 4.0]])
    assert got.dtype is adcuda.float32 and got.tolist() == [[1.0, 2.0], [3.0, 4.0]]
