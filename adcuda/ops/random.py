"""Random ops: ``rand randn randint randperm rand_like randn_like`` and dropout.

Forwards call the backend's random family (counter-based Philox: ``kernels/random.cu``) with a
``(seed, offset)`` taken from the generator (``adcuda/random.py``), so a draw depends only on the
seed and the sequence of draws, never on the device or its launch configuration."""
from __future__ import annotations

from typing import TYPE_CHECKING

from .. import dtypes as dt
from ..errors import DTypeError, ShapeError
from ..random import default_generator
from ..tensor import primitives
from .common import check_float, dense, wrap
from .factories import new_tensor, shape_arg
from .mutation import apply_inplace
from .registry import op

if TYPE_CHECKING:
    from ..types import Device, DType, Generator, Sequence, Tensor


def _draw(name, prim, shape, dtype, device, requires_grad, generator, *args):
    gen = generator or default_generator
    n = 1
    for s in shape:
        n *= s

    def draw(bk, d):
        seed, offset = gen.next_offset(n)
        return getattr(bk, prim)(*args, shape, d, seed, offset)
    return new_tensor(name, draw, shape, dtype, device, requires_grad)


@op("rand", doc="Uniform samples from [0, 1).", method=False)
def rand(*size: int | Sequence[int], generator: Generator | None = None, dtype: DType | None = None,
         device: Device | str | None = None, requires_grad: bool = False) -> Tensor:
    shape = shape_arg("rand", size)
    if dtype is not None and not dt.as_dtype(dtype).is_floating_point:
        raise DTypeError(f"rand: expected a floating point dtype, got {dtype}")
    return _draw("rand", "rand", shape, dtype, device, requires_grad, generator)


@op("randn", doc="Standard normal samples.", method=False)
def randn(*size: int | Sequence[int], generator: Generator | None = None, dtype: DType | None = None,
          device: Device | str | None = None, requires_grad: bool = False) -> Tensor:
    shape = shape_arg("randn", size)
    if dtype is not None and not dt.as_dtype(dtype).is_floating_point:
        raise DTypeError(f"randn: expected a floating point dtype, got {dtype}")
    return _draw("randn", "randn", shape, dtype, device, requires_grad, generator)


@op("randint", doc="Uniform integers from [low, high) (int64 by default).", method=False)
def randint(low: int, high: int | None = None, size: Sequence[int] | None = None, generator: Generator | None = None,
            dtype: DType | None = None, device: Device | str | None = None, requires_grad: bool = False) -> Tensor:
    if size is None and isinstance(high, (tuple, list)):  # randint(high, size)
        low, high, size = 0, low, high
    elif high is None:
        low, high = 0, low
    if size is None:
        raise DTypeError("randint: missing required argument 'size'")
    if high <= low:
        raise ShapeError(f"randint: expected low < high, got low={low}, high={high}")
    shape = shape_arg("randint", (size,))
    return _draw("randint", "randint", shape, dtype or dt.int64, device, requires_grad, generator, low, high)


@op("rand_like", doc="rand of input's shape, dtype and device.", method=False)
def rand_like(input: Tensor, dtype: DType | None = None, device: Device | str | None = None,
              requires_grad: bool = False) -> Tensor:
    return rand(tuple(input.shape), dtype=dtype or input.dtype, device=device or input.device,
                requires_grad=requires_grad)


@op("randn_like", doc="randn of input's shape, dtype and device.", method=False)
def randn_like(input: Tensor, dtype: DType | None = None, device: Device | str | None = None,
               requires_grad: bool = False) -> Tensor:
    return randn(tuple(input.shape), dtype=dtype or input.dtype, device=device or input.device,
                 requires_grad=requires_grad)


@op("randperm", doc="A random permutation of 0..n-1.", method=False)
def randperm(n: int, generator: Generator | None = None, dtype: DType | None = None,
             device: Device | str | None = None) -> Tensor:
    # the order of n uniform keys from the generator's stream, drawn and sorted on the CPU, so the
    # permutation depends only on (seed, offset), whatever the device
    keys = rand(n, generator=generator, dtype=dt.float64)
    return keys.argsort().to(device=device or "cpu", dtype=dtype or dt.int64)


@op("bernoulli_mask", doc="1 with probability p, else 0, in dtype (the draw dropout's mask makes).",
    function=False, method=False)
def bernoulli_mask(shape: Sequence[int], p: float, dtype: DType, device: Device | str | None,
                   generator: Generator | None = None) -> Tensor:
    shape = tuple(shape)
    gen = generator or default_generator
    n = 1
    for s in shape:
        n *= s

    def draw(bk, d):
        seed, offset = gen.next_offset(n)
        return bk.bernoulli(shape, p, d, seed, offset)
    return new_tensor("bernoulli", draw, shape, dtype, device, False)


# ------------------------------------------------------------------------------------------------
# dropout
def _dropout_grad(grad, p, mask):
    return grad * (mask.to(dtype=grad.dtype) * (1.0 / (1.0 - p)))


def _dropout_fused_grad(grad, p, mask):
    return wrap(primitives(grad).dropout_backward(dense(grad), mask._data, 1.0 / (1.0 - p)), grad._device)


@op("dropout_mask_apply", doc="input with each element zeroed with probability p, the rest scaled by 1/(1-p); "
    "the mask is kept for backward.", function=False, method=False, node="NativeDropoutBackward0",
    extra_outputs=("mask",), grads={"input": _dropout_grad}, fused={"input": _dropout_fused_grad})
def dropout_mask_apply(input: Tensor, p: float) -> tuple[Tensor, Tensor]:
    # one primitive draws the mask (the generator's next bernoulli draw, as a two-step form would take
    # it) and applies it; the backward multiplies by the saved mask, never drawing again
    seed, offset = default_generator.next_offset(input.numel())
    out_data, mask_data = primitives(input).dropout(dense(input), p, seed, offset)
    return wrap(out_data, input._device), wrap(mask_data, input._device)


@op("dropout", doc="Zero elements with probability p while training, scaling the rest by 1/(1-p).",
    composite=True, function=False, method=False, functional=True)
def dropout(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    check_float("dropout", "input", input)
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout: dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0.0 or input.numel() == 0:
        return input
    if inplace:
        return apply_inplace(input, lambda x: dropout(x, p, True, False), "dropout_")
    if p == 1.0:
        return input * 0.0
    return dropout_mask_apply(input, p)
