"""scaled_dot_product_attention's plain case (ops/attention.py ``_plain``): CPU float32/float64 query,
key and value of one batch shape that take no part in a graph, no mask, dropout or grouped heads and no
hook attached call the fused primitive at once; the result is the general path's, bit for bit, and every
other call takes that path (checks, broadcasting, recording)."""

import numpy as np
import pytest
from helpers import general_path

import adcuda
import adcuda.nn.functional as F
from adcuda.errors import AdcudaError


@pytest.mark.parametrize("dtype", [adcuda.float32, adcuda.float64])
def test_the_plain_case_gives_what_the_general_path_gives(dtype):
    rng = np.random.default_rng(6)
    q, k = (adcuda.tensor(rng.standard_normal((2, 3, 4, 5)), dtype=dtype) for _ in range(2))
    k6 = adcuda.tensor(rng.standard_normal((2, 3, 6, 5)), dtype=dtype)
    v6 = adcuda.tensor(rng.standard_normal((2, 3, 6, 7)), dtype=dtype)
    for args, kwargs in (
        ((q, k, k), {}),
        ((q, k6, v6), {}),
        ((q, k6, v6), {"is_causal": True}),
        ((q, k, k), {"scale": 0.25}),
        ((q.mT.contiguous().mT, k, k), {}),
    ):
        fast = F.scaled_dot_product_attention(*args, **kwargs)
        general, seen = general_path(lambda args=args, kwargs=kwargs: F.scaled_dot_product_attention(*args, **kwargs))
        assert seen and fast.dtype == general.dtype == dtype and fast.shape == general.shape
        np.testing.assert_array_equal(fast.numpy(), general.numpy(), strict=True)


def test_other_calls_take_the_path():
    q = adcuda.ones(2, 4, 5)
    leaf = adcuda.ones(2, 4, 5, requires_grad=True)
    for args in ((leaf, q, q), (q, leaf, q), (q, q, leaf), (q, leaf[:], q)):
        out = F.scaled_dot_product_attention(*args)
        assert out.grad_fn is not None
    broadcast = F.scaled_dot_product_attention(adcuda.ones(3, 2, 4, 5), q, q)  # batch dims broadcast
    assert broadcast.shape == (3, 2, 4, 5)
    assert F.scaled_dot_product_attention(q, q[:, :0], q[:, :0]).shape == (2, 4, 5)  # no keys: zeros
    with pytest.raises(AdcudaError, match="scaled_dot_product_attention"):
        F.scaled_dot_product_attention(q, adcuda.ones(2, 4, 3), q)
    with pytest.raises(AdcudaError, match="scaled_dot_product_attention"):
        F.scaled_dot_product_attention(q, q.double(), q)
