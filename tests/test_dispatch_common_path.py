"""The common per-call path of every op (adcuda/ops/dispatch.py), made cheaper for issue 31, gives what
it gave: the dtype rule kept per array dtype still refuses what it refuses, NumPy's error state is
switched once for nested ops and put back, recording with a node class per plan builds the same graph
as PyTorch, and in-place forms check shapes and dtypes as before."""

import math
import threading
import warnings

import numpy as np
import pytest
import torch

import adcuda as A
from adcuda.errors import ResultTypeError, ShapeError, UnsupportedDTypeError


def test_a_dtype_rule_refuses_after_accepting_another_dtype():
    assert A.relu(A.ones(2)).tolist() == [1.0, 1.0]  # float32 noted accepted by the rule...
    with pytest.raises(UnsupportedDTypeError, match="relu"):
        A.relu(A.tensor([True, False]))  # ...bool still refused, by the entry and by the in-place form
    with pytest.raises(UnsupportedDTypeError, match="relu_"):
        A.tensor([True]).relu_()
    A.nn.functional.gelu(A.ones(2))
    with pytest.raises(UnsupportedDTypeError, match="gelu"):
        A.nn.functional.gelu(A.tensor([1, 2]))


def test_an_empty_tensor_a_rule_lets_through_does_not_make_its_dtype_accepted():
    empty = A.zeros(0, 2, dtype=A.bool)
    assert A.mm(empty, A.zeros(2, 3, dtype=A.bool)).shape == (0, 3)  # as PyTorch: no kernel runs
    with pytest.raises(UnsupportedDTypeError, match="mm"):
        A.mm(A.ones(1, 2, dtype=A.bool), A.ones(2, 3, dtype=A.bool))


def test_nested_ops_stay_quiet_and_the_callers_state_comes_back():
    x = A.tensor([0.0, 1.0, 1e4], dtype=A.float64)
    with np.errstate(all="raise"):
        # a composite: several ops inside one entry, each finding NumPy quiet already
        loss = A.nn.functional.binary_cross_entropy(x.sigmoid(), A.tensor([0.0, 1.0, 0.0], dtype=A.float64))
        assert math.isfinite(loss.item())
        assert (x * 1e300).exp().sum().item() == math.inf  # overflow inside, silently
        x.reshape(3, 1)  # a view op switches nothing
        with pytest.raises(FloatingPointError):
            np.log(np.zeros(1))  # the caller's "raise" holds between and after ops
        with pytest.raises(ShapeError):
            A.ones(2) + A.ones(3)  # a failing op puts the state back too
        with pytest.raises(FloatingPointError):
            np.log(np.zeros(1))


def test_another_threads_numpy_state_is_its_own():
    seen = []

    def other():
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            seen.append(A.tensor([0.0]).log().item())  # quiet in this thread's context too

    with np.errstate(all="raise"):
        thread = threading.Thread(target=other)
        thread.start()
        thread.join()
        with pytest.raises(FloatingPointError):
            np.log(np.zeros(1))
    assert seen == [-math.inf]


def test_recorded_nodes_are_pytorchs_classes_and_graphs():
    a, t = A.ones(3, requires_grad=True), torch.ones(3, requires_grad=True)
    for leaf in (a, t):
        y = leaf * 2.0 + leaf * 3.0  # one leaf twice: its AccumulateGrad found again
        z = (y.reshape(3, 1) * leaf.reshape(3, 1)).sum()  # views of it as inputs
        z.backward()
        assert type(y.grad_fn).__name__ == "AddBackward0"
        assert type((leaf * 2.0).grad_fn).__name__ == "MulBackward0"
    assert a.grad.tolist() == t.grad.tolist() == [10.0, 10.0, 10.0]
    assert type((a * 2.0).grad_fn) is type((a * 3.0).grad_fn)  # one class per plan


def test_a_leaf_no_longer_requiring_grad_records_nothing():
    leaf = A.ones(2, requires_grad=True)
    (leaf * 2.0).sum().backward()  # its AccumulateGrad made
    leaf.requires_grad_(False)
    assert (leaf * 2.0).grad_fn is None


def test_saved_values_are_checked_against_in_place_writes():
    leaf = A.ones(2, requires_grad=True)
    other = A.ones(2)
    y = leaf * other  # other saved with its version
    other.add_(1.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()


def test_in_place_forms_check_shapes_and_result_dtypes():
    with pytest.raises(ShapeError, match="add_"):
        A.ones(3).add_(A.ones(2, 3))
    with pytest.raises(ResultTypeError, match="add_"):
        A.ones(2, dtype=A.int64).add_(0.5)
    x = A.ones(2, dtype=A.float64)
    assert x.add_(A.ones(2)).dtype is A.float64  # a float32 operand written into float64
