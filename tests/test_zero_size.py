"""Zero-size and 0-d tensors against PyTorch: the value (shape, dtype, elements) where PyTorch gives one,
else an adcuda error of PyTorch's exception class; empty tensors laid out with PyTorch's strides."""

import numpy as np
import pytest

import adcuda

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.filterwarnings("ignore:Tensor.m?T is deprecated on 0-D tensors")

# s: a 0-d float tensor, e: a (0, 5) one, i0/i1: 0-d and (1,) int64 indices, b0: a 0-d bool
EXPRESSIONS = """s.chunk(1, 0)
s.chunk(2)
s.unbind()
s.unbind(0)
s.roll(1)
s.roll(1, 0)
s.roll(1, -1)
s.roll(1, 1)
s.split(1)
s.split([1])
s.flip(0)
s.flip(-1)
s.flip(1)
s.squeeze(0)
s.squeeze(1)
s.squeeze()
s.unsqueeze(0)
s.unsqueeze(-1)
s.unsqueeze(2)
s.transpose(0, -1)
s.transpose(0, 1)
s.movedim(0, 0)
s.movedim(0, 1)
s.movedim(-1, 0)
s.permute()
s.flatten()
s.narrow(0, 0, 1)
s.select(0, 0)
s.repeat(2)
s.tile(2)
s.expand(3)
s.reshape(1, 1)
s.diagonal()
s.diag_embed()
s.tril()
s.t()
s.T
s.mT
s.sum(0)
s.sum(1)
s.gather(0, i0)
s.index_select(0, i1)
s.masked_fill(b0, 2.0)
s.scatter(0, i0, s)
s.scatter(0, i1, 3.0)
s.scatter(1, i0, s)
s.scatter_reduce(0, i0, s, "sum")
s.take(i1)
s[None]
s[...]
s[()]
s[True]
s[False]
s[0]
s[i0]
s[b0]
s.size(0)
s.stride(0)
len(s)
lib.stack([s, s])
lib.cat([s, s])
lib.broadcast_to(s, (2,))
e.sum()
e.prod()
e.mean()
e.cumsum(0)
e.chunk(2)
e.split(2)
e.unbind(0)
e.roll(1, 0)
e.flip(0)
e.t()
e.reshape(-1)
e.reshape(0, -1)
e.view(5, 0)
e.repeat(2, 2)
e.diagonal()
e.diag_embed()
e.tril()
e[[]]
e[:, [0, 1]]
e.add_(1)
e.mul_(2)
e.index_select(0, lib.tensor([], dtype=lib.int64))
lib.cat([e, e])
lib.stack([e, e])
lib.zeros(0, 5).stride()
lib.empty(3, 0).stride()
lib.zeros(3, 0, 2).stride()
lib.zeros(0, dtype=lib.int64).sum()
lib.zeros(0, 3) @ lib.zeros(3, 2)
lib.zeros(2, 0) @ lib.zeros(0, 2)""".splitlines()


def _run(lib, expression):
    env = {
        "lib": lib,
        "s": lib.tensor(1.5),
        "e": lib.zeros(0, 5),
        "i0": lib.tensor(0),
        "i1": lib.tensor([0]),
        "b0": lib.tensor(True),
    }
    try:
        return eval(expression, env), None
    except Exception as error:  # noqa: BLE001 (compared below)
        return None, error


def _plain(value):
    if isinstance(value, (tuple, list)) and not isinstance(value, torch.Size):
        return [_plain(v) for v in value]
    if hasattr(value, "shape") and hasattr(value, "tolist"):
        return (tuple(value.shape), str(value.dtype).split(".")[-1], np.asarray(value.tolist()).tolist())
    return tuple(value) if isinstance(value, (torch.Size, adcuda.Size)) else value


@pytest.mark.parametrize("expression", EXPRESSIONS)
def test_matches_torch(expression):
    expected, torch_error = _run(torch, expression)
    got, error = _run(adcuda, expression)
    if torch_error is not None:
        assert error is not None, f"PyTorch raised {torch_error!r}; adcuda gave {_plain(got)}"
        assert isinstance(error, adcuda.errors.AdcudaError), repr(error)
        assert isinstance(error, type(torch_error)), f"{error!r} is not a {type(torch_error).__name__}"
        return
    assert error is None, f"adcuda raised {error!r}; PyTorch gave {_plain(expected)}"
    assert str(_plain(got)) == str(_plain(expected))  # as text: NaN equals NaN


def test_empty_tensor_written_in_place():
    e = adcuda.zeros(0, 5)
    e.add_(1)
    e[:] = 3.0
    assert e.shape == (0, 5) and e.stride() == (5, 1)


def test_view_of_a_nonempty_tensor_keeps_its_strides():
    assert adcuda.zeros(3, 5)[:0].stride() == torch.zeros(3, 5)[:0].stride()
    assert adcuda.zeros(2, 3)[:, 3:].stride() == torch.zeros(2, 3)[:, 3:].stride()
