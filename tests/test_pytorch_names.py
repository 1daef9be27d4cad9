"""Names PyTorch scripts touch on their way: legacy constructors, format() of 0-d tensors,
inference_mode, accelerator, backends flags, cuda.amp aliases, cuda.manual_seed."""
import numpy as np
import pytest

import adcuda
from adcuda.errors import DTypeError


def test_tensor_legacy_constructor_from_data_and_sizes():
    t = adcuda.Tensor([1, 2, 3])
    assert t.dtype is adcuda.float32 and t.tolist() == [1.0, 2.0, 3.0]
    assert adcuda.Tensor(np.arange(4).reshape(2, 2)).dtype is adcuda.float32
    assert adcuda.Tensor(2, 3).shape == (2, 3)
    assert adcuda.Tensor(adcuda.Size([4, 1])).shape == (4, 1)
    assert adcuda.Tensor().shape == (0,)
    x = adcuda.ones(3)
    assert adcuda.Tensor(x) is x
    assert isinstance(adcuda.Tensor([1.0]), adcuda.Tensor)


@pytest.mark.parametrize("cls, dtype", [
    ("FloatTensor", "float32"), ("DoubleTensor", "float64"), ("LongTensor", "int64"), ("IntTensor", "int32"),
    ("BoolTensor", "bool"), ("HalfTensor", "float16"),
])
def test_typed_legacy_constructors(cls, dtype):
    made = getattr(adcuda, cls)([1, 0, 1])
    assert made.dtype is getattr(adcuda, dtype)
    assert made.tolist() == [1, 0, 1]
    assert getattr(adcuda, cls)(2, 5).shape == (2, 5)
    assert isinstance(made, getattr(adcuda, cls))
    other = adcuda.float64 if dtype != "float64" else adcuda.float32
    assert not isinstance(adcuda.zeros(1, dtype=other), getattr(adcuda, cls))


def test_legacy_constructor_errors_name_the_constructor():
    with pytest.raises(DTypeError, match="LongTensor: expected a tensor of dtype adcuda.int64, got one of"):
        adcuda.LongTensor(adcuda.ones(2))
    with pytest.raises(DTypeError, match=r"Tensor: expected sizes .* got \(float\)"):
        adcuda.Tensor(2.5)


def test_matches_pytorch_legacy_constructors():
    torch = pytest.importorskip("torch")
    for args in (([[1, 2], [3, 4]],), ((1.5, 2),), (2, 0)):
        assert adcuda.Tensor(*args).shape == tuple(torch.Tensor(*args).shape)
        if not isinstance(args[0], int):  # sizes leave the values unset
            np.testing.assert_array_equal(adcuda.Tensor(*args).numpy(), torch.Tensor(*args).numpy())
            np.testing.assert_array_equal(adcuda.LongTensor(*args).numpy(), torch.LongTensor(*args).numpy())


def test_format_of_0d_tensors():
    loss = adcuda.tensor(0.123456)
    assert f"{loss:.4f}" == "0.1235"
    assert f"{adcuda.tensor(7):>4d}" == "   7"
    assert format(adcuda.tensor([1.0, 2.0])) == str(adcuda.tensor([1.0, 2.0]))
    with pytest.raises(TypeError):
        format(adcuda.tensor([1.0, 2.0]), ".2f")


def test_inference_mode_as_context_and_decorator():
    x = adcuda.ones(2, requires_grad=True)
    with adcuda.inference_mode():
        assert not adcuda.is_grad_enabled() and adcuda.is_inference_mode_enabled()
        assert not (x * 2).requires_grad
    assert adcuda.is_grad_enabled() and not adcuda.is_inference_mode_enabled()
    with adcuda.inference_mode(False):
        assert (x * 2).requires_grad

    @adcuda.inference_mode()
    def called(t):
        return t * 2

    @adcuda.inference_mode
    def bare(t):
        return t * 2

    assert not called(x).requires_grad and not bare(x).requires_grad
    assert (x * 2).requires_grad
