"""The functions and tensor methods PyTorch scripts use that issue 15 added: multinomial, einsum, roll,
allclose, isclose, equal, unique, meshgrid, cosine_similarity, pairwise_distance, cdist,
repeat_interleave, cumprod, lerp, addmm, baddbmm, scatter, scatter_reduce, masked_select, nonzero,
new_*, uniform_/normal_, clamp with tensor bounds (topk, argsort, flip, fill_ and zero_ were there).

Every differentiable one has a float64 gradcheck; values and gradients are compared with PyTorch where
it is installed; bad input raises an adcuda error naming the op and the shapes. The new CUDA
primitives (cumprod, scatter_reduce) are checked against the CPU backend on a GPU or the emulator,
and every op here runs on CUDA with the CPU's results.
"""

import numpy as np
import pytest
from cuda_arrays import assert_matches, held
from name_cases import case_tests, gpu, rnd

import adcuda
import adcuda.nn.functional as F
from adcuda import dtypes as dt
from adcuda.backends import cpu
from adcuda.errors import DTypeError, IndexOutOfRangeError, ShapeError, UnsupportedDTypeError

f64 = adcuda.float64
IDX = np.array([[0, 1, 2, 0], [2, 0, 1, 1]])
WITH_ZERO = np.array([[1.5, -2.0, 0.0, 3.0], [0.5, 0.0, 0.0, -1.0]])

# name -> (call taking (module, F, *tensors), [float arrays (differentiated)], [other arrays])
CASES = {
    "einsum_matmul": (lambda m, F, a, b: m.einsum("ij,jk->ik", a, b), [rnd(3, 4), rnd(4, 2, seed=1)], []),
    "einsum_batched_attention": (
        lambda m, F, a, b: m.einsum("bhqd,bhkd->bhqk", a, b),
        [rnd(2, 2, 3, 4), rnd(2, 2, 5, 4, seed=1)],
        [],
    ),
    "einsum_trace_diagonal": (lambda m, F, a: m.einsum("ii->i", a) + m.einsum("ii", a), [rnd(3, 3)], []),
    "einsum_ellipsis_broadcast": (
        lambda m, F, a, b: m.einsum("...ij,...jk", a, b),
        [rnd(2, 1, 3, 4), rnd(5, 4, 2, seed=1)],
        [],
    ),
    "einsum_three_operands": (
        lambda m, F, a, b, c: m.einsum("ij,jk,kl->il", a, b, c),
        [rnd(2, 3), rnd(3, 4, seed=1), rnd(4, 2, seed=2)],
        [],
    ),
    "roll": (lambda m, F, a: m.roll(a, (1, -5), (0, 1)), [rnd(3, 4)], []),
    "roll_flat": (lambda m, F, a: a.roll(7), [rnd(3, 4)], []),
    "flip": (lambda m, F, a: m.flip(a, (0, 1)), [rnd(3, 4)], []),
    "repeat_interleave_int": (lambda m, F, a: a.repeat_interleave(2, dim=1), [rnd(2, 3)], []),
    "repeat_interleave_tensor": (
        lambda m, F, a, r: m.repeat_interleave(a, r, dim=0),
        [rnd(3, 2)],
        [np.array([1, 0, 3])],
    ),
    "cumprod": (lambda m, F, a: m.cumprod(a, 1), [rnd(3, 4)], []),
    "cumprod_with_zeros": (lambda m, F, a: m.cumprod(a, -1), [WITH_ZERO], []),
    "lerp_scalar": (lambda m, F, a, b: m.lerp(a, b, 0.3), [rnd(3, 4), rnd(3, 4, seed=1)], []),
    "lerp_tensor_weight": (lambda m, F, a, b, w: m.lerp(a, b, w), [rnd(3, 4), rnd(4, seed=1), rnd(3, 1, seed=2)], []),
    "addmm": (
        lambda m, F, c, a, b: m.addmm(c, a, b, beta=0.5, alpha=2.0),
        [rnd(4), rnd(3, 2, seed=1), rnd(2, 4, seed=2)],
        [],
    ),
    "baddbmm": (
        lambda m, F, c, a, b: m.baddbmm(c, a, b, alpha=-1.0),
        [rnd(2, 3, 4), rnd(2, 3, 5, seed=1), rnd(2, 5, 4, seed=2)],
        [],
    ),
    "cdist": (lambda m, F, a, b: m.cdist(a, b), [rnd(2, 5, 3), rnd(2, 4, 3, seed=1)], []),
    "cdist_p1": (lambda m, F, a, b: m.cdist(a, b, p=1.0), [rnd(5, 3), rnd(4, 3, seed=1)], []),
    "pairwise_distance": (lambda m, F, a, b: F.pairwise_distance(a, b), [rnd(4, 3), rnd(4, 3, seed=1)], []),
    "cosine_similarity": (lambda m, F, a, b: F.cosine_similarity(a, b, dim=-1), [rnd(4, 3), rnd(1, 3, seed=1)], []),
    "scatter": (lambda m, F, a, s, i: m.scatter(a, 0, i, s), [rnd(3, 4), rnd(2, 4, seed=1)], [IDX]),
    "scatter_value": (lambda m, F, a, i: a.scatter(1, i, 2.5), [rnd(3, 4)], [np.array([[1], [3], [0]])]),
    "masked_select": (lambda m, F, a, k: m.masked_select(a, k), [rnd(3, 4)], [np.array([True, False, True, True])]),
    "clamp_tensor_bounds": (
        lambda m, F, a, lo, hi: m.clamp(a, lo, hi),
        [rnd(3, 4), rnd(4, seed=1) - 0.5, rnd(3, 1, seed=2) + 0.5],
        [],
    ),
}
for _reduce in ("sum", "prod", "mean", "amax", "amin"):
    for _self in (True, False):
        CASES[f"scatter_reduce_{_reduce}_{'self' if _self else 'noself'}"] = (
            lambda m, F, a, s, i, r=_reduce, inc=_self: m.scatter_reduce(a, 0, i, s, r, include_self=inc),
            [
                np.vstack([WITH_ZERO, rnd(1, 4, seed=5)]),
                rnd(2, 4, seed=3) * (np.array([[1, 0, 1, 1], [1, 1, 1, 1]]) if _reduce == "prod" else 1),
            ],
            [IDX],
        )
# ties: the gradient shared as PyTorch shares it (an input value equal to the maximum counts even where
# include_self=False leaves it out)
for _reduce in ("amax", "amin"):
    CASES[f"scatter_reduce_{_reduce}_ties"] = (
        lambda m, F, a, s, i, r=_reduce: m.scatter_reduce(a, 0, i, s, r, include_self=False),
        [np.vstack([WITH_ZERO, rnd(1, 4, seed=5)]), np.array([[1.0, 0.0, 2.0, 3.0], [1.0, 0.5, 2.0, -1.0]])],
        [np.array([[0, 1, 2, 0], [0, 2, 2, 1]])],
    )

# ties (of amax/amin, of |x| in the 1-norm) are not differentiable: gradcheck only the smooth cases
NOT_SMOOTH = {"cdist_p1", "scatter_reduce_amax_ties", "scatter_reduce_amin_ties"}


test_gradcheck, test_matches_pytorch, test_ops_on_cuda_match_the_cpu = case_tests(CASES, NOT_SMOOTH)


# ------------------------------------------------------------------------------------------------
# the ops without gradients
def test_comparisons_match_pytorch():
    torch = pytest.importorskip("torch")
    a = np.array([1.0, np.nan, np.inf, 1e-9, 2.0, -np.inf])
    b = np.array([1.0 + 1e-6, np.nan, np.inf, 0.0, 2.1, np.inf])
    for kwargs in ({}, {"equal_nan": True}, {"rtol": 0.1, "atol": 0.0}):
        np.testing.assert_array_equal(
            adcuda.isclose(adcuda.tensor(a), adcuda.tensor(b), **kwargs).numpy(),
            torch.isclose(torch.tensor(a), torch.tensor(b), **kwargs).numpy(),
        )
    assert adcuda.allclose(adcuda.tensor(a[3:5]), adcuda.tensor(a[3:5]) + 1e-9)
    assert not adcuda.allclose(adcuda.tensor(a), adcuda.tensor(a))  # NaN is not close to itself
    assert adcuda.allclose(adcuda.tensor(a), adcuda.tensor(a), equal_nan=True)
    assert adcuda.isclose(adcuda.tensor([1, 5]), adcuda.tensor([1, 6]), atol=1).all()
    assert adcuda.equal(adcuda.tensor([1, 2]), adcuda.tensor([1, 2]))
    assert not adcuda.equal(adcuda.tensor([1, 2]), adcuda.tensor([[1, 2]]))
    assert adcuda.tensor([1.0, 2.0]).equal(adcuda.tensor([1.0, 2.0]))


def test_unique_matches_pytorch():
    torch = pytest.importorskip("torch")
    for data in ([3, 1, 2, 3, 1, 1], [[2.0, np.nan], [2.0, -1.0]], [5], np.zeros((0, 2))):
        ours = adcuda.unique(adcuda.tensor(np.asarray(data)), return_inverse=True, return_counts=True)
        theirs = torch.unique(torch.tensor(np.asarray(data)), return_inverse=True, return_counts=True)
        for u, v in zip(ours, theirs):
            assert tuple(u.shape) == tuple(v.shape)
            np.testing.assert_array_equal(u.numpy(), v.numpy())
    assert adcuda.tensor([2, 1, 2]).unique().tolist() == [1, 2]
    values, counts = adcuda.tensor([2, 1, 2]).unique(sorted=False, return_counts=True)
    assert values.tolist() == [1, 2] and counts.tolist() == [1, 2]


UNIQUE_SLICES = [
    np.random.default_rng(1).integers(0, 3, (9, 3)),  # repeated rows, each column unsorted
    np.random.default_rng(2).integers(0, 2, (4, 5, 3)),
    np.array([[2.0, -1.0], [np.nan, 1.0], [2.0, -1.0], [-0.0, 0.0], [0.0, -0.0]]),
    np.random.default_rng(3).integers(0, 2, (6, 70)),  # 70 columns: several packed sort keys
    np.array([[True, False], [True, True], [True, False]]),
    np.zeros((0, 3)),
]


@pytest.mark.parametrize("data", UNIQUE_SLICES, ids=lambda a: f"{a.dtype}{a.shape}")
def test_unique_slices_match_pytorch(data):
    torch = pytest.importorskip("torch")
    for dim in range(-data.ndim, data.ndim):
        if 0 in data.shape and data.shape[dim] != 0:
            continue  # PyTorch and adcuda both refuse: see test_bad_input_raises
        ours = adcuda.unique(adcuda.tensor(data), sorted=False, return_inverse=True, return_counts=True, dim=dim)
        theirs = torch.unique(torch.tensor(data), return_inverse=True, return_counts=True, dim=dim)
        for u, v in zip(ours, theirs):
            assert tuple(u.shape) == tuple(v.shape) and u.dtype.name == str(v.dtype).split(".")[1]
            np.testing.assert_array_equal(u.numpy(), v.numpy())
        np.testing.assert_array_equal(adcuda.tensor(data).unique(dim=dim).numpy(), ours[0].numpy())


def test_meshgrid_matches_pytorch():
    torch = pytest.importorskip("torch")
    for indexing in ("ij", "xy"):
        ours = adcuda.meshgrid(adcuda.arange(3), adcuda.arange(2), adcuda.arange(4), indexing=indexing)
        theirs = torch.meshgrid(torch.arange(3), torch.arange(2), torch.arange(4), indexing=indexing)
        for u, v in zip(ours, theirs):
            np.testing.assert_array_equal(u.numpy(), v.numpy())
    x, y = adcuda.meshgrid([adcuda.arange(2), adcuda.arange(3)], indexing="ij")
    assert x.shape == y.shape == (2, 3)


def test_nonzero_and_repeat_interleave_of_indices_match_pytorch():
    torch = pytest.importorskip("torch")
    for data in ([[0, 1, 2], [3, 0, 0]], [[[True, False]], [[False, True]]], 5.0, 0.0, np.zeros((2, 0))):
        ours, theirs = adcuda.tensor(np.asarray(data)), torch.tensor(np.asarray(data))
        np.testing.assert_array_equal(ours.nonzero().numpy(), theirs.nonzero().numpy())
        assert ours.nonzero().shape == tuple(theirs.nonzero().shape)
        for u, v in zip(adcuda.nonzero(ours, as_tuple=True), torch.nonzero(theirs, as_tuple=True)):
            np.testing.assert_array_equal(u.numpy(), v.numpy())
    assert adcuda.repeat_interleave(adcuda.tensor([1, 0, 3])).tolist() == [0, 2, 2, 2]


def test_new_factories_take_self_dtype_and_device():
    x = adcuda.ones(2, dtype=f64)
    assert x.new_zeros(2, 3).dtype is f64 and x.new_zeros(2, 3).tolist() == [[0.0] * 3] * 2
    assert x.new_ones((2,)).tolist() == [1.0, 1.0]
    assert x.new_full((2,), 3).tolist() == [3.0, 3.0] and x.new_full((2,), 3).dtype is f64
    assert x.new_empty(3).shape == (3,)
    assert x.new_tensor([1, 2]).dtype is f64
    assert x.new_zeros(2, dtype=adcuda.int64).dtype is adcuda.int64
    assert x.new_ones(2, requires_grad=True).requires_grad


def test_inplace_draws_follow_the_generator():
    x = adcuda.empty(1000)
    assert x.uniform_(2.0, 3.0) is x
    values = x.numpy()
    assert values.min() >= 2.0 and values.max() < 3.0 and abs(values.mean() - 2.5) < 0.05
    y = adcuda.empty(2000, dtype=f64).normal_(1.0, 2.0)
    assert y.dtype is f64 and abs(float(y.mean()) - 1.0) < 0.2 and abs(float(y.std()) - 2.0) < 0.2
    first = adcuda.empty(5).uniform_(generator=adcuda.Generator().manual_seed(7))
    again = adcuda.empty(5).uniform_(generator=adcuda.Generator().manual_seed(7))
    np.testing.assert_array_equal(first.numpy(), again.numpy())
    assert x.zero_().tolist()[0] == 0.0 and x.fill_(1.5).tolist()[-1] == 1.5
    leaf = adcuda.ones(2, requires_grad=True)
    with pytest.raises(adcuda.AutogradError, match="uniform_"):
        leaf.uniform_()
    with adcuda.no_grad():
        leaf.normal_()
    with pytest.raises(DTypeError, match="normal_: expected a floating point tensor"):
        adcuda.zeros(2, dtype=adcuda.int64).normal_()


def test_multinomial_draws_follow_the_probabilities():
    adcuda.manual_seed(0)
    p = adcuda.tensor([0.1, 0.0, 0.6, 0.3])
    counts = np.bincount(adcuda.multinomial(p, 20000, replacement=True).numpy(), minlength=4) / 20000
    np.testing.assert_allclose(counts, [0.1, 0.0, 0.6, 0.3], atol=0.015)
    firsts = np.bincount([adcuda.multinomial(p, 1).item() for _ in range(2000)], minlength=4) / 2000
    np.testing.assert_allclose(firsts, [0.1, 0.0, 0.6, 0.3], atol=0.04)
    rows = adcuda.multinomial(adcuda.tensor([[1.0, 0, 2, 1], [0, 0, 1, 1]]), 2)
    assert rows.shape == (2, 2) and rows.dtype is adcuda.int64
    for row, allowed in zip(rows.tolist(), ({0, 2, 3}, {2, 3})):
        assert len(set(row)) == 2 and set(row) <= allowed  # without replacement: distinct, never p = 0
    seeded = [adcuda.multinomial(p, 3, generator=adcuda.Generator().manual_seed(3)).tolist() for _ in range(2)]
    assert seeded[0] == seeded[1]


# ------------------------------------------------------------------------------------------------
# bad input
def test_bad_input_names_the_op_and_shapes():
    x = adcuda.ones(3, 4)
    with pytest.raises(ShapeError, match=r"einsum: operand 1 of shape \(4,\) has 1 dims"):
        adcuda.einsum("ij,jk->ik", x, adcuda.ones(4))
    with pytest.raises(ShapeError, match="einsum: the equation 'ij,jk' names 2 operands, but 1"):
        adcuda.einsum("ij,jk", x)
    with pytest.raises(ShapeError, match=r"roll: shifts and dimensions must align.*\(3, 4\)"):
        adcuda.roll(x, (1, 2), 0)
    with pytest.raises(ShapeError, match=r"repeat_interleave: repeats must have the same size.*\(3, 4\)"):
        adcuda.repeat_interleave(x, adcuda.tensor([1, 2]), dim=0)
    with pytest.raises(UnsupportedDTypeError, match=r"isclose: expected both inputs of one dtype.*\(3, 4\)"):
        adcuda.isclose(x, adcuda.ones(3, 4, dtype=f64))
    with pytest.raises(ShapeError, match=r"addmm: input of shape \(5,\) does not broadcast.*\(3, 2\)"):
        adcuda.addmm(adcuda.ones(5), adcuda.ones(3, 4), adcuda.ones(4, 2))
    with pytest.raises(ShapeError, match=r"cdist: x1 \(3, 4\) and x2 \(2, 3\)"):
        adcuda.cdist(x, adcuda.ones(2, 3))
    with pytest.raises(ShapeError, match=r"cosine_similarity: x1 \(3, 4\) and x2 \(2, 4\)"):
        F.cosine_similarity(x, adcuda.ones(2, 4))
    with pytest.raises(adcuda.errors.IndexValueError, match=r"scatter: index 3 is out of bounds.*\(3, 4\)"):
        adcuda.scatter(x, 0, adcuda.tensor([[3, 0, 0, 0]]), x)
    with pytest.raises(ShapeError, match=r"scatter_reduce: index \(1, 4\) is larger than src \(1, 2\)"):
        adcuda.scatter_reduce(x, 0, adcuda.tensor([[0, 0, 0, 0]]), adcuda.ones(1, 2), "amax")
    with pytest.raises(ValueError, match="scatter_reduce: reduce must be one of"):
        adcuda.scatter_reduce(x, 0, adcuda.tensor([[0, 0, 0, 0]]), x, "max")
    with pytest.raises(ShapeError, match=r"masked_select: shapes \(3, 4\) and \(2,\) cannot be broadcast"):
        adcuda.masked_select(x, adcuda.tensor([True, False]))
    with pytest.raises(ValueError, match=r"multinomial: probability tensor \(shape \(2,\)\)"):
        adcuda.multinomial(adcuda.tensor([0.5, -0.1]), 1)
    with pytest.raises(ValueError, match="multinomial: cannot sample n_sample > prob_dist.size"):
        adcuda.multinomial(adcuda.tensor([0.5, 0.5]), 3)
    with pytest.raises(ValueError, match="multinomial: invalid multinomial distribution .with replacement=False"):
        adcuda.multinomial(adcuda.tensor([0.5, 0.0, 0.0]), 2)
    with pytest.raises(ShapeError, match=r"unique: input of shape \(3, 0\) has 0-sized dims other than dim=0"):
        adcuda.unique(adcuda.zeros(3, 0), dim=0)
    with pytest.raises(IndexOutOfRangeError, match="unique: dim=0 given, but the input is 0-d"):
        adcuda.unique(adcuda.tensor(3.0), dim=0)
    with pytest.raises(IndexOutOfRangeError, match="unique: dimension out of range"):
        adcuda.unique(x, dim=2)
    with pytest.raises(ShapeError, match="meshgrid: expected 0-D or 1-D tensors, got tensor 0 of shape"):
        adcuda.meshgrid(x, adcuda.ones(2))
    with pytest.raises(UnsupportedDTypeError, match="lerp: expected input and end of one dtype"):
        adcuda.lerp(x, adcuda.ones(3, 4, dtype=f64), 0.5)


# ------------------------------------------------------------------------------------------------
# on a GPU (or the CUDA emulator): the new primitives against the CPU backend, and every op above
FLOATS = (dt.float32, dt.float16, dt.bfloat16)
TOLERANCE = {
    dt.float32: (2e-5, 1e-6),
    dt.float16: (4e-3, 2e-3),
    dt.bfloat16: (2e-2, 1e-2),
    dt.int64: (0, 0),
    dt.int32: (0, 0),
}


def _check(cb, got, expected, dtype):
    assert_matches(cb, got, expected, TOLERANCE[dtype])


@gpu
@pytest.mark.parametrize("dtype", FLOATS + (dt.int64,), ids=lambda d: d.name)
@pytest.mark.parametrize(
    "shape, axis", [((1,), 0), ((7,), 0), ((1023,), -1), ((3, 7), 0), ((5, 0), 1), ((), 0)], ids=str
)
def test_cumprod_primitive_matches_the_cpu_backend(cb, dtype, shape, axis):
    # factors near 1 keep a 1023-long product finite in every dtype; a zero stops it
    values = (
        1.0 + rnd(*shape, seed=4) * 0.01 if dtype.is_floating_point else np.random.default_rng(4).integers(-2, 3, shape)
    )
    a, host = held(cb, values, dtype)
    _check(cb, cb.cumprod(a, axis), cpu.cumprod(host, axis), dtype)
    if len(shape) == 2 and shape[1]:
        t = cb.permute(a, (1, 0))  # a transposed view
        _check(cb, cb.cumprod(t, 1), cpu.cumprod(host.T, 1), dtype)
        _check(cb, cb.cumprod(a, None), cpu.cumprod(host, None), dtype)


@gpu
@pytest.mark.parametrize("dtype", FLOATS + (dt.float64, dt.int64, dt.int32, dt.bool_), ids=lambda d: d.name)
@pytest.mark.parametrize("reduce", ["prod", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("n", [1, 7, 1023])
def test_scatter_reduce_primitive_matches_the_cpu_backend(cb, dtype, reduce, include_self, n):
    gen = np.random.default_rng(n)
    if dtype.is_floating_point:
        base_values, src_values = 1.0 + gen.standard_normal((3, n)) * 0.1, 1.0 + gen.standard_normal((4, n)) * 0.1
    else:
        base_values, src_values = gen.integers(-3, 4, (3, n)), gen.integers(-3, 4, (4, n))
        if dtype is dt.bool_:
            base_values, src_values = base_values > 0, src_values > 0
    a, a_host = held(cb, base_values, dtype)
    s, s_host = held(cb, src_values, dtype)
    idx = gen.integers(0, 3, (4, n))  # duplicates along dim 0 for every column
    i, i_host = held(cb, idx, dt.int64)
    got = cb.scatter_reduce(a, 0, i, s, reduce, include_self)
    _check(
        cb,
        got,
        cpu.scatter_reduce(a_host, 0, i_host, s_host, reduce, include_self),
        dtype if dtype in TOLERANCE else dt.float32,
    )
    assert cb.dtype_of(got) is dtype
    # a transposed (non-contiguous) input, index and src along dim 1
    got = cb.scatter_reduce(
        cb.permute(a, (1, 0)), 1, cb.permute(i, (1, 0)), cb.permute(s, (1, 0)), reduce, include_self
    )
    _check(
        cb,
        got,
        cpu.scatter_reduce(a_host.T, 1, i_host.T, s_host.T, reduce, include_self),
        dtype if dtype in TOLERANCE else dt.float32,
    )


@gpu
def test_scatter_reduce_primitive_on_empty_and_nan(cb):
    a, a_host = held(cb, np.ones((2, 3)), dt.float32)
    s, s_host = held(cb, np.array([[np.nan, 2.0, 0.5]]), dt.float32)
    i, i_host = held(cb, np.array([[1, 0, 0]]), dt.int64)
    for reduce in ("prod", "amax", "amin"):
        _check(
            cb,
            cb.scatter_reduce(a, 0, i, s, reduce, True),
            cpu.scatter_reduce(a_host, 0, i_host, s_host, reduce, True),
            dt.float32,
        )
    e, e_host = held(cb, np.zeros((1, 0), np.int64), dt.int64)
    _check(cb, cb.scatter_reduce(a, 1, e, s, "amax", False), a_host, dt.float32)


@gpu
def test_index_and_sampling_ops_on_cuda():
    x = adcuda.tensor([[0, 1, 2], [3, 0, 0]], device="cuda")
    assert x.nonzero().cpu().tolist() == [[0, 1], [0, 2], [1, 0]]
    values, inverse, counts = adcuda.unique(x, return_inverse=True, return_counts=True)
    assert values.cpu().tolist() == [0, 1, 2, 3] and counts.cpu().tolist() == [3, 1, 1, 1]
    assert inverse.cpu().tolist() == [[0, 1, 2], [3, 0, 0]]
    for data in UNIQUE_SLICES[:4]:
        for dim in range(data.ndim):
            on_cpu = adcuda.unique(adcuda.tensor(data), return_inverse=True, return_counts=True, dim=dim)
            on_cuda = adcuda.unique(
                adcuda.tensor(data, device="cuda"), return_inverse=True, return_counts=True, dim=dim
            )
            for u, v in zip(on_cuda, on_cpu):
                np.testing.assert_array_equal(u.cpu().numpy(), v.numpy())
    adcuda.manual_seed(0)
    p = adcuda.tensor([0.1, 0.0, 0.6, 0.3], device="cuda")
    draws = adcuda.multinomial(p, 4000, replacement=True).cpu().numpy()
    np.testing.assert_allclose(np.bincount(draws, minlength=4) / 4000, [0.1, 0.0, 0.6, 0.3], atol=0.03)
    assert sorted(adcuda.multinomial(p, 3).cpu().tolist()) == [0, 2, 3]
    assert adcuda.allclose(p, p.clone()) and adcuda.equal(p, p.clone())
    y = adcuda.empty(100, device="cuda").uniform_(-1.0, 1.0)
    assert -1.0 <= float(y.min()) and float(y.max()) < 1.0
    assert x.new_zeros(2).device == x.device
