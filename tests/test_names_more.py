"""More of the PyTorch names scripts use (issue 15, the names from API.md's scope and the idioms
around them): elementwise functions and activations, in-place forms, shape, indexing and linear
algebra helpers, reductions, random draws, losses, and their nn modules, initialisers, schedulers,
samplers and utilities.

They are composed of existing ops (no new primitive), so both backends run them. Every
differentiable one has a float64 gradcheck; values and gradients are compared with PyTorch where it
is installed; bad input raises an adcuda error naming the op and the shapes; on a GPU (or the CUDA
emulator) each runs with the CPU's results.
"""

import collections
import math

import numpy as np
import pytest
from name_cases import case_tests, gpu, rnd

import adcuda
import adcuda.nn.functional as F
from adcuda.errors import (
    DeviceError,
    DTypeError,
    IndexOutOfRangeError,
    InvalidArgumentError,
    ShapeError,
    UnsupportedDTypeError,
)

f64 = adcuda.float64


def positive(*shape, seed=0):
    return np.abs(rnd(*shape, seed=seed)) + 0.5


def probabilities(*shape, seed=0):
    return np.random.default_rng(seed).uniform(0.05, 0.95, shape)


def signs(*shape, seed=0):
    return np.where(rnd(*shape, seed=seed) > 0, 1.0, -1.0)


# away from the kinks (0, +-1, +-3, 6) so that finite differences see one side
SPREAD = rnd(3, 4) * 3
SPREAD[np.abs(SPREAD) < 0.05] += 0.2
SPREAD[np.abs(np.abs(SPREAD) - 3) < 0.05] += 0.2
SPREAD[np.abs(np.abs(SPREAD) - 1) < 0.05] += 0.2
IDX = np.array([2, 0, 2])

# name -> (call taking (module, F, *tensors), [float arrays (differentiated)], [other arrays])
CASES = {
    # elementwise
    "expm1": (lambda m, F, a: m.expm1(a), [rnd(3, 4)], []),
    "expm1_tiny": (lambda m, F, a: a.expm1(), [rnd(5, scale=1e-9)], []),
    "tan": (lambda m, F, a: m.tan(a), [rnd(3, 4)], []),
    "sinh": (lambda m, F, a: m.sinh(a), [rnd(3, 4)], []),
    "cosh": (lambda m, F, a: a.cosh(), [rnd(3, 4)], []),
    "logit": (lambda m, F, a: m.logit(a), [probabilities(3, 4)], []),
    "logit_eps": (lambda m, F, a: m.logit(a, eps=0.2), [probabilities(3, 4)], []),
    "frac": (lambda m, F, a: m.frac(a), [SPREAD], []),
    "addcmul": (
        lambda m, F, a, b, c: m.addcmul(a, b, c, value=-0.5),
        [rnd(3, 4), rnd(4, seed=1), rnd(3, 1, seed=2)],
        [],
    ),
    "addcdiv": (lambda m, F, a, b, c: a.addcdiv(b, c, value=2.0), [rnd(3, 4), rnd(3, 4, seed=1), positive(4)], []),
    # activations
    "elu": (lambda m, F, a: F.elu(a, 0.7), [SPREAD], []),
    "selu": (lambda m, F, a: F.selu(a), [SPREAD], []),
    "celu": (lambda m, F, a: F.celu(a, 2.0), [SPREAD], []),
    "hardtanh": (lambda m, F, a: F.hardtanh(a, -2.0, 1.0), [SPREAD], []),
    "relu6": (lambda m, F, a: F.relu6(a * 2), [SPREAD], []),
    "hardsigmoid": (lambda m, F, a: F.hardsigmoid(a), [SPREAD], []),
    "hardswish": (lambda m, F, a: F.hardswish(a), [SPREAD], []),
    "softsign": (lambda m, F, a: F.softsign(a), [SPREAD], []),
    "tanhshrink": (lambda m, F, a: F.tanhshrink(a), [SPREAD], []),
    "threshold": (lambda m, F, a: F.threshold(a, 0.5, -3.0), [SPREAD + 0.3], []),
    "mish": (lambda m, F, a: F.mish(a), [SPREAD], []),
    "softmin": (lambda m, F, a: F.softmin(a, dim=1), [rnd(3, 4)], []),
    "glu": (lambda m, F, a: F.glu(a, 0), [rnd(4, 3)], []),
    "prelu_shared": (lambda m, F, a, w: F.prelu(a, w), [SPREAD, np.array([0.3])], []),
    "prelu_channels": (lambda m, F, a, w: F.prelu(a, w), [rnd(2, 3, 4) + 0.1, np.array([0.1, -0.4, 2.0])], []),
    "gumbel_free_softmin_of_rows": (lambda m, F, a: F.softmin(a, 0, dtype=m.float64), [rnd(2, 5)], []),
    # losses
    "margin_ranking_loss": (
        lambda m, F, a, b, t: F.margin_ranking_loss(a, b, t, margin=0.3),
        [rnd(6), rnd(6, seed=1)],
        [signs(6, seed=2)],
    ),
    "hinge_embedding_loss": (
        lambda m, F, a, t: F.hinge_embedding_loss(a, t, margin=2.0, reduction="sum"),
        [SPREAD],
        [signs(3, 4, seed=3)],
    ),
    "soft_margin_loss": (lambda m, F, a, t: F.soft_margin_loss(a, t), [rnd(3, 4)], [signs(3, 4, seed=3)]),
    "multilabel_soft_margin_loss": (
        lambda m, F, a, t, w: F.multilabel_soft_margin_loss(a, t, weight=w),
        [rnd(3, 4)],
        [(rnd(3, 4, seed=4) > 0) * 1.0, positive(4, seed=5)],
    ),
    "poisson_nll_loss": (lambda m, F, a, t: F.poisson_nll_loss(a, t), [rnd(3, 4)], [positive(3, 4, seed=1) * 2]),
    "poisson_nll_loss_full_rate": (
        lambda m, F, a, t: F.poisson_nll_loss(a, t, log_input=False, full=True, reduction="none"),
        [positive(3, 4)],
        [positive(3, 4, seed=1) * 2],
    ),
    "gaussian_nll_loss": (
        lambda m, F, a, t, v: F.gaussian_nll_loss(a, t, v, full=True),
        [rnd(3, 4), rnd(3, 4, seed=1), positive(3, 4, seed=2)],
        [],
    ),
    "gaussian_nll_loss_per_sample_var": (
        lambda m, F, a, t, v: F.gaussian_nll_loss(a, t, v, reduction="sum"),
        [rnd(3, 4), rnd(3, 4, seed=1), positive(3, seed=2)],
        [],
    ),
    "cosine_embedding_loss": (
        lambda m, F, a, b, t: F.cosine_embedding_loss(a, b, t, margin=-0.2),
        [rnd(5, 3), rnd(5, 3, seed=1)],
        [signs(5, seed=2)],
    ),
    "triplet_margin_loss": (
        lambda m, F, a, p, n: F.triplet_margin_loss(a, p, n, margin=2.0, swap=True),
        [rnd(4, 3), rnd(4, 3, seed=1), rnd(4, 3, seed=2)],
        [],
    ),
    # shape
    "tile": (lambda m, F, a: m.tile(a, (2, 1, 3)), [rnd(3, 2)], []),
    "hstack": (lambda m, F, a, b: m.hstack([a, b]), [rnd(3, 2), rnd(3, 1, seed=1)], []),
    "vstack": (lambda m, F, a, b: m.vstack((a, b)), [rnd(3), rnd(2, 3, seed=1)], []),
    "dstack": (lambda m, F, a, b: m.dstack([a, b]), [rnd(3, 2), rnd(3, 2, seed=1)], []),
    "column_stack": (lambda m, F, a, b: m.column_stack([a, b]), [rnd(3), rnd(3, 2, seed=1)], []),
    "atleast_3d": (lambda m, F, a: m.atleast_3d(a) * 1, [rnd(3)], []),
    "tensor_split_sections": (lambda m, F, a: m.cat(m.tensor_split(a, 3, dim=1)[::2], 1), [rnd(2, 7)], []),
    "tensor_split_indices": (lambda m, F, a: a.tensor_split([1, 4], 1)[1], [rnd(2, 7)], []),
    "fliplr": (lambda m, F, a: m.fliplr(a), [rnd(3, 4)], []),
    "flipud": (lambda m, F, a: m.flipud(a), [rnd(3, 4)], []),
    "rot90": (lambda m, F, a: m.rot90(a, 1, (1, 2)) + m.rot90(a, 3, (1, 2)), [rnd(2, 3, 3)], []),
    "rot90_twice": (lambda m, F, a: a.rot90(-2), [rnd(2, 3)], []),
    "pixel_shuffle": (lambda m, F, a: F.pixel_shuffle(a, 2), [rnd(2, 8, 3, 2)], []),
    "pixel_unshuffle": (lambda m, F, a: F.pixel_unshuffle(a, 2), [rnd(1, 2, 4, 6)], []),
    "moveaxis": (lambda m, F, a: a.moveaxis(0, -1), [rnd(2, 3, 4)], []),
    # indexing
    "diagonal": (lambda m, F, a: m.diagonal(a, 1, 0, 2), [rnd(3, 2, 4)], []),
    "diagonal_below": (lambda m, F, a: a.diagonal(-1), [rnd(4, 3)], []),
    "diag_of_vector": (lambda m, F, a: m.diag(a, -1), [rnd(3)], []),
    "diag_of_matrix": (lambda m, F, a: m.diag(a, 1), [rnd(3, 4)], []),
    "trace": (lambda m, F, a: m.trace(a), [rnd(3, 4)], []),
    "unfold": (lambda m, F, a: a.unfold(1, 3, 2), [rnd(2, 7, 2)], []),
    "index_add": (
        lambda m, F, a, s, i: m.index_add(a, 1, i, s, alpha=2.0),
        [rnd(2, 4), rnd(2, 3, seed=1)],
        [IDX],
    ),
    "index_copy": (lambda m, F, a, s, i: a.index_copy(0, i, s), [rnd(4, 2), rnd(2, 2, seed=1)], [np.array([3, 1])]),
    "index_fill": (lambda m, F, a, i: a.index_fill(1, i, -2.0), [rnd(2, 4)], [IDX]),
    "take_along_dim": (
        lambda m, F, a, i: m.take_along_dim(a, i, 1),
        [rnd(3, 4)],
        [np.array([[0, 3], [1, 1], [2, 0]])],
    ),
    "take_along_dim_broadcast": (lambda m, F, a, i: m.take_along_dim(a, i, 0), [rnd(3, 4)], [np.array([[2], [0]])]),
    "take_along_dim_flat": (lambda m, F, a, i: m.take_along_dim(a, i), [rnd(3, 4)], [np.array([11, 0, 5])]),
    # reductions
    "nansum": (lambda m, F, a: m.nansum(a, 1), [rnd(3, 4)], []),
    "nanmean": (lambda m, F, a: a.nanmean(dim=0, keepdim=True), [rnd(3, 4)], []),
    "aminmax": (lambda m, F, a: m.stack(tuple(m.aminmax(a, dim=1))), [rnd(3, 4)], []),
    # linear algebra
    "mv": (lambda m, F, a, v: m.mv(a, v), [rnd(3, 4), rnd(4, seed=1)], []),
    "addmv": (
        lambda m, F, c, a, v: m.addmv(c, a, v, beta=0.5, alpha=-2.0),
        [rnd(3), rnd(3, 4, seed=1), rnd(4, seed=2)],
        [],
    ),
    "addbmm": (
        lambda m, F, c, a, b: m.addbmm(c, a, b, alpha=0.5),
        [rnd(3, 2), rnd(4, 3, 5, seed=1), rnd(4, 5, 2, seed=2)],
        [],
    ),
    "inner": (lambda m, F, a, b: m.inner(a, b), [rnd(2, 3), rnd(4, 3, seed=1)], []),
    "tensordot_int": (lambda m, F, a, b: m.tensordot(a, b, 2), [rnd(2, 3, 4), rnd(3, 4, 5, seed=1)], []),
    "tensordot_lists": (
        lambda m, F, a, b: m.tensordot(a, b, dims=([0, 2], [2, 0])),
        [rnd(2, 3, 4), rnd(4, 5, 2, seed=1)],
        [],
    ),
    "kron": (lambda m, F, a, b: m.kron(a, b), [rnd(2, 3), rnd(3, seed=1)], []),
    "cross": (lambda m, F, a, b: m.cross(a, b, dim=1), [rnd(2, 3), rnd(1, 3, seed=1)], []),
    "dist": (lambda m, F, a, b: m.dist(a, b, 3), [rnd(3, 4), rnd(4, seed=1)], []),
    "bilinear": (
        lambda m, F, a, b, w, c: F.bilinear(a, b, w, c),
        [rnd(2, 3), rnd(2, 4, seed=1), rnd(5, 3, 4, seed=2), rnd(5, seed=3)],
        [],
    ),
    "adaptive_max_pool1d": (lambda m, F, a: F.adaptive_max_pool1d(a, 3), [rnd(2, 3, 7)], []),
}
CASES.update(
    {
        "fmod": (lambda m, F, a, b: m.fmod(a, b), [SPREAD, np.array([1.5, -2.0, 0.7, -0.9])], []),
        "fmod_scalar": (lambda m, F, a: a.fmod(-1.3), [SPREAD], []),
        "xlogy": (lambda m, F, a, b: m.xlogy(a, b), [rnd(3, 4), positive(3, 4, seed=1)], []),
        "float_power": (lambda m, F, a: m.float_power(a, 3), [rnd(3, 4)], []),
        "diff": (lambda m, F, a: m.diff(a, 2, 1), [rnd(3, 5)], []),
        "diff_prepend_append": (
            lambda m, F, a, b: m.diff(a, dim=0, prepend=b, append=b),
            [rnd(3, 4), rnd(1, 4, seed=1)],
            [],
        ),
        "block_diag": (lambda m, F, a, b, c: m.block_diag(a, b, c), [rnd(2, 3), rnd(3, seed=1), rnd(1, 1, seed=2)], []),
        "cartesian_prod": (lambda m, F, a, b: m.cartesian_prod(a, b), [rnd(3), rnd(2, seed=1)], []),
        "diag_embed": (lambda m, F, a: m.diag_embed(a, 1, 0, 2), [rnd(2, 3)], []),
        "kthvalue": (lambda m, F, a: m.kthvalue(a, 2, 1).values, [rnd(3, 5)], []),
        "quantile": (lambda m, F, a: m.quantile(a, 0.3, dim=1, keepdim=True), [rnd(3, 5)], []),
        "quantile_many": (
            lambda m, F, a, q: m.quantile(a, q, dim=0, interpolation="midpoint"),
            [rnd(4, 3)],
            [np.array([0.1, 0.5, 0.9])],
        ),
        "cov": (lambda m, F, a: m.cov(a), [rnd(3, 6)], []),
        "cov_weighted": (
            lambda m, F, a, f, w: m.cov(a, correction=0, fweights=f, aweights=w),
            [rnd(2, 5)],
            [np.array([1, 2, 1, 3, 1]), probabilities(5, seed=3)],
        ),
        "corrcoef": (lambda m, F, a: m.corrcoef(a), [rnd(3, 6)], []),
        "linalg_vector_norm": (lambda m, F, a: m.linalg.vector_norm(a, 3, dim=(0, 2)), [rnd(2, 3, 4)], []),
        "linalg_vector_norm_all": (lambda m, F, a: m.linalg.vector_norm(a, keepdim=True), [rnd(2, 3, 4)], []),
        "linalg_matrix_norm_fro": (lambda m, F, a: m.linalg.matrix_norm(a), [rnd(2, 3, 4)], []),
        "linalg_matrix_norm_1": (lambda m, F, a: m.linalg.matrix_norm(a, 1, (0, 2)), [rnd(2, 3, 4)], []),
        "linalg_matrix_norm_inf": (
            lambda m, F, a: m.linalg.matrix_norm(a, -math.inf, keepdim=True),
            [rnd(2, 3, 4)],
            [],
        ),
        "linalg_norm": (lambda m, F, a: m.linalg.norm(a, 1), [rnd(3, 4)], []),
        "linalg_vecdot": (lambda m, F, a, b: m.linalg.vecdot(a, b, dim=0), [rnd(3, 4), rnd(3, 1, seed=1)], []),
        "linalg_cross": (lambda m, F, a, b: m.linalg.cross(a, b), [rnd(2, 3), rnd(2, 3, seed=1)], []),
        "linalg_diagonal": (lambda m, F, a: m.linalg.diagonal(a, offset=-1), [rnd(2, 3, 4)], []),
    }
)


BAG_INDICES, BAG_OFFSETS = np.array([1, 2, 4, 5, 4, 3, 2, 9, 0, 0]), np.array([0, 4, 4, 7])
CASES.update(
    {
        "unfold_images": (
            lambda m, F, a: F.unfold(a, (3, 2), dilation=(1, 2), padding=1, stride=(2, 1)),
            [rnd(2, 3, 6, 5)],
            [],
        ),
        "fold_images": (lambda m, F, a: F.fold(a, (5, 4), 2, padding=1), [rnd(2, 12, 30)], []),
        "local_response_norm": (lambda m, F, a: F.local_response_norm(a, 3, 0.1, 0.6, 2.0), [rnd(2, 5, 3, 2)], []),
        "local_response_norm_1d": (lambda m, F, a: F.local_response_norm(a, 2), [rnd(2, 4, 3)], []),
        "channel_shuffle": (lambda m, F, a: F.channel_shuffle(a, 3), [rnd(2, 6, 2, 2)], []),
        "embedding_bag_mean": (
            lambda m, F, w, i, o: F.embedding_bag(i, w, o, mode="mean", padding_idx=2),
            [rnd(10, 3)],
            [BAG_INDICES, BAG_OFFSETS],
        ),
        "embedding_bag_sum_weighted": (
            lambda m, F, w, s, i, o: F.embedding_bag(i, w, o, mode="sum", per_sample_weights=s),
            [rnd(10, 3), rnd(10, seed=1)],
            [BAG_INDICES, BAG_OFFSETS],
        ),
        "embedding_bag_max_rows": (
            lambda m, F, w, i: F.embedding_bag(i, w, mode="max"),
            [rnd(10, 3)],
            [BAG_INDICES.reshape(2, 5)],
        ),
    }
)


POOLED = np.abs(rnd(2, 3, 6, 4)) + 0.1
CASES.update(
    {
        "conv_transpose1d": (
            lambda m, F, a, w, b: F.conv_transpose1d(a, w, b, stride=2, padding=1, output_padding=1, groups=2),
            [rnd(2, 4, 5), rnd(4, 3, 3, seed=1), rnd(6, seed=2)],
            [],
        ),
        "take": (lambda m, F, a, i: m.take(a, i), [rnd(3, 4)], [np.array([[0, 11], [-1, 5]])]),
        "put": (
            lambda m, F, a, s, i: a.put(i, s, accumulate=True),
            [rnd(3, 4), rnd(3, seed=1)],
            [np.array([1, -2, 1])],
        ),
        "masked_scatter": (
            lambda m, F, a, s, k: a.masked_scatter(k, s),
            [rnd(3, 4), rnd(20, seed=1)],
            [np.array([True, False, True, True])],
        ),
        "hardshrink": (lambda m, F, a: F.hardshrink(a, 0.7), [SPREAD], []),
        "softshrink": (lambda m, F, a: F.softshrink(a, 0.3), [SPREAD], []),
        "rrelu_eval": (lambda m, F, a: F.rrelu(a, 0.1, 0.3), [SPREAD], []),
        "lp_pool2d": (lambda m, F, a: F.lp_pool2d(a, 3.0, (2, 2)), [POOLED], []),
        "lp_pool1d": (lambda m, F, a: F.lp_pool1d(a, 2.0, 3, 1), [POOLED[:, :, 0]], []),
        "pdist": (lambda m, F, a: F.pdist(a, 3.0), [rnd(5, 3)], []),
        "multi_margin_loss": (
            lambda m, F, a, t, w: F.multi_margin_loss(a, t, p=2, margin=0.8, weight=w),
            [rnd(4, 5)],
            [np.array([0, 3, 1, 4]), positive(5, seed=2)],
        ),
        "triplet_margin_with_distance_loss": (
            lambda m, F, a, p, n: F.triplet_margin_with_distance_loss(
                a, p, n, distance_function=lambda u, v: 1 - F.cosine_similarity(u, v), swap=True
            ),
            [rnd(4, 3), rnd(4, 3, seed=1), rnd(4, 3, seed=2)],
            [],
        ),
        "affine_grid": (lambda m, F, t: F.affine_grid(t, (2, 3, 4, 5), align_corners=False), [rnd(2, 2, 3)], []),
        "affine_grid_corners": (lambda m, F, t: F.affine_grid(t, [1, 1, 3, 2], align_corners=True), [rnd(1, 2, 3)], []),
    }
)


# the in-place forms of elementwise ops, on a non-leaf so that the gradient flows through them
INPLACE = {
    "abs_": SPREAD,
    "log_": positive(3, 4),
    "log1p_": positive(3, 4),
    "rsqrt_": positive(3, 4),
    "sin_": rnd(3, 4),
    "cos_": rnd(3, 4),
    "tan_": rnd(3, 4) * 0.5,
    "expm1_": rnd(3, 4),
    "sinh_": rnd(3, 4),
    "cosh_": rnd(3, 4),
    "erf_": rnd(3, 4),
    "exp2_": rnd(3, 4),
    "log2_": positive(3, 4),
    "log10_": positive(3, 4),
    "square_": rnd(3, 4),
    "reciprocal_": positive(3, 4),
    "tril_": rnd(3, 4),
    "triu_": rnd(3, 4),
    "frac_": SPREAD,
}
for _name, _data in INPLACE.items():
    CASES[f"inplace_{_name}"] = (lambda m, F, a, n=_name: getattr(a * 1.0, n)(), [_data], [])
CASES["inplace_addcmul_"] = (lambda m, F, a, b: (a * 1.0).addcmul_(b, b, value=0.5), [rnd(3, 4), rnd(4, seed=1)], [])
CASES["inplace_addmm_"] = (
    lambda m, F, c, a, b: (c * 1.0).addmm_(a, b, beta=2.0),
    [rnd(3, 2), rnd(3, 4, seed=1), rnd(4, 2, seed=2)],
    [],
)
CASES["inplace_clamp_min_"] = (lambda m, F, a: (a * 1.0).clamp_min_(0.1), [SPREAD], [])
CASES["inplace_hypot_"] = (lambda m, F, a, b: (a * 1.0).hypot_(b), [rnd(3, 4), rnd(3, 4, seed=1)], [])
CASES["inplace_functional_elu_"] = (lambda m, F, a: F.elu(a * 1.0, inplace=True), [SPREAD], [])
CASES["inplace_fmod_"] = (lambda m, F, a: (a * 1.0).fmod_(0.8), [SPREAD], [])
CASES["inplace_sgn_"] = (lambda m, F, a: (a * 1.0).sgn_() * a, [SPREAD], [])

# not smooth where the finite difference crosses a kink: compared with PyTorch only
NOT_SMOOTH = {"aminmax"}
# PyTorch's float64 hardsigmoid/hardswish backward multiplies by the float32 constant 1.0f / 6.0f, so
# its gradients are off by about 3e-8 relative; ours divide by 6 in float64
GRAD_RTOL = {"hardsigmoid": 1e-7, "hardswish": 1e-7}


test_gradcheck, test_matches_pytorch, test_ops_on_cuda_match_the_cpu = case_tests(CASES, NOT_SMOOTH, GRAD_RTOL)


# ------------------------------------------------------------------------------------------------
# the names without gradients
def test_expm1_is_accurate_near_zero_and_saturates():
    x = adcuda.tensor([1e-12, -3e-8, 0.0, 80.0, -math.inf, math.inf], dtype=f64)
    expected = [math.expm1(v) for v in x.tolist()]
    np.testing.assert_allclose(x.expm1().numpy(), expected, rtol=1e-15)
    assert adcuda.expm1(adcuda.tensor([1e-7])).item() == pytest.approx(1e-7, rel=1e-6)  # float32 too


def test_where_of_a_condition_alone_is_nonzero_as_tuple():
    torch = pytest.importorskip("torch")
    data = np.array([[0.0, 1.5, 0.0], [2.0, 0.0, -1.0]])
    for u, v in zip(adcuda.where(adcuda.tensor(data) != 0), torch.where(torch.tensor(data) != 0)):
        np.testing.assert_array_equal(u.numpy(), v.numpy())
    with pytest.raises(DTypeError, match="where: expected both input and other"):
        adcuda.where(adcuda.tensor([True]), adcuda.ones(1))


def test_nan_to_num_matches_pytorch():
    torch = pytest.importorskip("torch")
    data = np.array([np.nan, np.inf, -np.inf, 1.5, -0.0])
    for kwargs in ({}, {"nan": 2.0, "posinf": 9.0}, {"neginf": -7.0}):
        for dtype in (np.float64, np.float32):
            np.testing.assert_array_equal(
                adcuda.nan_to_num(adcuda.tensor(data.astype(dtype)), **kwargs).numpy(),
                torch.nan_to_num(torch.tensor(data.astype(dtype)), **kwargs).numpy(),
            )
    x = adcuda.tensor(data, requires_grad=True)
    x.nan_to_num().sum().backward()
    assert x.grad.tolist() == [0.0, 0.0, 0.0, 1.0, 1.0]  # PyTorch's: grad where finite
    assert adcuda.tensor([1, 2]).nan_to_num().tolist() == [1, 2]


def test_index_factories_and_logspace_match_pytorch():
    torch = pytest.importorskip("torch")
    for name in ("tril_indices", "triu_indices"):
        for args in ((3, 3), (4, 3, 1), (3, 5, -1), (0, 0), (2, 4, 7)):
            ours, theirs = getattr(adcuda, name)(*args), getattr(torch, name)(*args)
            assert ours.dtype is adcuda.int64 and tuple(ours.shape) == tuple(theirs.shape)
            np.testing.assert_array_equal(ours.numpy(), theirs.numpy())
    np.testing.assert_allclose(adcuda.logspace(-1, 2, 7, base=2.0).numpy(), torch.logspace(-1, 2, 7, base=2.0).numpy())
    data = np.array([[0.0, 2.0], [3.0, 0.0]])
    np.testing.assert_array_equal(adcuda.argwhere(adcuda.tensor(data)).numpy(), torch.argwhere(torch.tensor(data)))


def test_random_draws_follow_their_distributions():
    adcuda.manual_seed(0)
    n = 20000
    x = adcuda.normal(2.0, 3.0, size=(n,))
    assert abs(float(x.mean()) - 2.0) < 0.1 and abs(float(x.std()) - 3.0) < 0.1
    mean, std = adcuda.zeros(3, requires_grad=True), adcuda.full((3,), 2.0, requires_grad=True)
    draw = adcuda.normal(mean, std)
    draw.sum().backward()  # d/dmean = 1, d/dstd = the standard normal noise
    assert mean.grad.tolist() == [1.0] * 3
    np.testing.assert_allclose(std.grad.numpy(), draw.detach().numpy() / 2.0, rtol=1e-6)
    assert adcuda.normal(adcuda.zeros(2, 3)).shape == (2, 3)
    assert adcuda.normal(1.0, adcuda.ones(4)).shape == (4,)
    b = adcuda.bernoulli(adcuda.full((n,), 0.3, dtype=f64))
    assert b.dtype is f64 and set(np.unique(b.numpy())) <= {0.0, 1.0} and abs(float(b.mean()) - 0.3) < 0.02
    assert abs(float(adcuda.bernoulli(adcuda.zeros(n), 0.8).mean()) - 0.8) < 0.02
    assert abs(float(adcuda.empty(n).bernoulli_(0.7).mean()) - 0.7) < 0.02
    e = adcuda.empty(n).exponential_(2.0)
    assert float(e.min()) >= 0 and abs(float(e.mean()) - 0.5) < 0.02
    ints = adcuda.randint_like(adcuda.zeros(n, dtype=adcuda.int64), 3, 6)
    assert ints.dtype is adcuda.int64 and set(np.unique(ints.numpy())) == {3, 4, 5}
    seeded = [adcuda.normal(0.0, 1.0, (4,), generator=adcuda.Generator().manual_seed(5)).tolist() for _ in range(2)]
    assert seeded[0] == seeded[1]


def test_other_inplace_draws_follow_their_distributions():
    adcuda.manual_seed(3)
    n = 20000
    assert sorted(set(adcuda.empty(n).random_(3, 7).tolist())) == [3.0, 4.0, 5.0, 6.0]
    assert sorted(set(adcuda.zeros(n, dtype=adcuda.int64).random_(4).tolist())) == [0, 1, 2, 3]
    unbounded = adcuda.empty(n).random_()
    assert float(unbounded.min()) >= 0 and float(unbounded.max()) <= 2**24 and float(unbounded.max()) > 2**23
    logs = adcuda.empty(n, dtype=f64).log_normal_(0.5, 0.5).log()
    assert abs(float(logs.mean()) - 0.5) < 0.02 and abs(float(logs.std()) - 0.5) < 0.02
    trials = adcuda.empty(n).geometric_(0.25)
    assert float(trials.min()) >= 1 and abs(float(trials.mean()) - 4.0) < 0.15
    assert (trials.numpy() == np.round(trials.numpy())).all()
    cauchy = adcuda.empty(n + 1).cauchy_(1.0, 2.0).numpy()
    assert abs(np.median(cauchy) - 1.0) < 0.1 and abs(np.quantile(cauchy, 0.75) - 3.0) < 0.2  # median + sigma
    with pytest.raises(ValueError, match="random_: expects 'from' to be less than 'to'"):
        adcuda.empty(2).random_(5, 5)
    with pytest.raises(ValueError, match="random_: give `to` for a adcuda.int64 tensor"):
        adcuda.zeros(2, dtype=adcuda.int64).random_()
    with pytest.raises(ValueError, match="geometric_: expects p to be in"):
        adcuda.empty(2).geometric_(1.5)
    with pytest.raises(ValueError, match="cauchy_: expects sigma > 0.0"):
        adcuda.empty(2).cauchy_(0.0, 0.0)
    with pytest.raises(adcuda.AutogradError, match="random_"):
        adcuda.ones(2, requires_grad=True).random_(3)


def test_random_errors_name_the_op():
    with pytest.raises(ValueError, match="normal: expects std >= 0.0"):
        adcuda.normal(0.0, -1.0, size=(2,))
    with pytest.raises(DTypeError, match="normal: with a number mean and std, give size"):
        adcuda.normal(0.0, 1.0)
    with pytest.raises(ValueError, match="bernoulli: expected probabilities in"):
        adcuda.bernoulli(adcuda.tensor([0.5, 1.5]))
    with pytest.raises(ValueError, match="exponential_: expects lambda > 0.0"):
        adcuda.empty(2).exponential_(0.0)
    with pytest.raises(DTypeError, match="bernoulli_: expected a floating point tensor"):
        adcuda.zeros(2, dtype=adcuda.int64).bernoulli_()


def test_gumbel_softmax_soft_and_hard():
    adcuda.manual_seed(1)
    logits = adcuda.tensor(rnd(4, 5), dtype=f64, requires_grad=True)
    soft = F.gumbel_softmax(logits, tau=0.5)
    np.testing.assert_allclose(soft.sum(-1).detach().numpy(), np.ones(4), rtol=1e-12)
    hard = F.gumbel_softmax(logits, hard=True, dim=-1)
    values = hard.detach().numpy()
    assert set(np.unique(values)) == {0.0, 1.0} and (values.sum(-1) == 1).all()
    (hard * adcuda.arange(5, dtype=f64)).sum().backward()  # the straight-through gradient is the soft one's
    assert logits.grad is not None and np.isfinite(logits.grad.numpy()).all() and logits.grad.abs().sum() > 0


def test_bad_input_names_the_op_and_shapes():
    x = adcuda.ones(3, 4)
    cases = [
        (ShapeError, r"addcmul: shapes \(3, 4\), \(5,\), \(3, 4\)", lambda: adcuda.addcmul(x, adcuda.ones(5), x)),
        (
            UnsupportedDTypeError,
            "addcdiv: integer division",
            lambda: adcuda.addcdiv(x, adcuda.ones(4, dtype=adcuda.int64), adcuda.ones(4, dtype=adcuda.int64)),
        ),
        (ShapeError, r"glu: halving dimension must be even.*\(3, 4\)", lambda: F.glu(x, 0)),
        (ShapeError, r"prelu: weight of shape \(3,\).*\(3, 4\)", lambda: F.prelu(x, adcuda.ones(3))),
        (ValueError, "hardtanh: min_val", lambda: F.hardtanh(x, 1.0, -1.0)),
        (
            ShapeError,
            r"margin_ranking_loss: expected inputs of one shape",
            lambda: F.margin_ranking_loss(adcuda.ones(3), adcuda.ones(4), adcuda.ones(3)),
        ),
        (
            ShapeError,
            r"hinge_embedding_loss: shapes \(3, 4\) and \(5,\) cannot be broadcast",
            lambda: F.hinge_embedding_loss(x, adcuda.ones(5)),
        ),
        (ShapeError, r"gaussian_nll_loss: var of shape \(2,\)", lambda: F.gaussian_nll_loss(x, x, adcuda.ones(2))),
        (ValueError, "gaussian_nll_loss: var has negative", lambda: F.gaussian_nll_loss(x, x, -x)),
        (ShapeError, r"cosine_embedding_loss: .*target \(4,\)", lambda: F.cosine_embedding_loss(x, x, adcuda.ones(4))),
        (ValueError, "triplet_margin_loss: margin must be", lambda: F.triplet_margin_loss(x, x, x, margin=0.0)),
        (ShapeError, r"pixel_shuffle: input \(1, 3, 2, 2\)", lambda: F.pixel_shuffle(adcuda.ones(1, 3, 2, 2), 2)),
        (ShapeError, r"pixel_unshuffle: input \(1, 1, 3, 2\)", lambda: F.pixel_unshuffle(adcuda.ones(1, 1, 3, 2), 2)),
        (ShapeError, r"rot90: the two dims must differ", lambda: adcuda.rot90(x, 1, (1, 1))),
        (ShapeError, r"fliplr: input must be at least 2-d", lambda: adcuda.fliplr(adcuda.ones(3))),
        (  # dim1=0, dim2=1 of a 1-d tensor: PyTorch's IndexError for the dim
            IndexError,
            r"diagonal: dimension out of range \(expected to be in range of \[-1, 0\], but got 1\)",
            lambda: adcuda.diagonal(adcuda.ones(3)),
        ),
        (
            ShapeError,
            r"diag: input must be 1-d or 2-d, got shape \(1, 3, 4\)",
            lambda: adcuda.diag(adcuda.ones(1, 3, 4)),
        ),
        (ShapeError, r"trace: expected a matrix, got shape \(3,\)", lambda: adcuda.trace(adcuda.ones(3))),
        (ShapeError, r"unfold: size 5 must be in \[0, 4\]", lambda: x.unfold(1, 5, 1)),
        (
            ShapeError,
            r"index_add: source \(3, 2\) must have input \(3, 4\)'s shape",
            lambda: x.index_add(1, adcuda.tensor([0, 1, 2]), adcuda.ones(3, 2)),
        ),
        (
            DTypeError,
            "index_copy: index must be a 1-D integer tensor",
            lambda: x.index_copy(0, adcuda.tensor([0.0]), adcuda.ones(1, 4)),
        ),
        (
            IndexOutOfRangeError,
            r"index_fill: index out of range for dim 1 of size 4",
            lambda: x.index_fill(1, adcuda.tensor([4]), 0.0),
        ),
        (
            ShapeError,
            r"take_along_dim: input \(3, 4\) and indices \(2,\)",
            lambda: adcuda.take_along_dim(x, adcuda.tensor([0, 1]), 1),
        ),
        (ShapeError, r"mv: input \(3, 4\) and vec \(3,\) cannot be multiplied", lambda: adcuda.mv(x, adcuda.ones(3))),
        (ShapeError, r"mv: vec must be 1-d, got shape \(4, 1\)", lambda: adcuda.mv(x, adcuda.ones(4, 1))),
        (
            ShapeError,
            r"addmv: input of shape \(4,\) does not broadcast",
            lambda: adcuda.addmv(adcuda.ones(4), x, adcuda.ones(4)),
        ),
        (
            ShapeError,
            r"tensordot: contracted dims \[1\] of a \(3, 4\) and \[0\] of b \(3, 4\)",
            lambda: adcuda.tensordot(x, x, 1),
        ),
        (ShapeError, r"inner: last dims of input \(3, 4\) and other \(3,\)", lambda: adcuda.inner(x, adcuda.ones(3))),
        (ShapeError, r"cross: dimension 1 of input \(3, 4\)", lambda: adcuda.cross(x, x, dim=1)),
        (ShapeError, r"dist: shapes \(3, 4\) and \(3,\)", lambda: adcuda.dist(x, adcuda.ones(3))),
        (
            ShapeError,
            r"bilinear: expected input1 .* got \(3, 4\), \(3, 2\)",
            lambda: F.bilinear(x, adcuda.ones(3, 2), adcuda.ones(5, 4, 3)),
        ),
        (
            ShapeError,
            r"adaptive_max_pool1d: expected a 2-d \(C, L\) or 3-d",
            lambda: F.adaptive_max_pool1d(adcuda.ones(4), 2),
        ),
        (
            UnsupportedDTypeError,
            "nanmean: expected a floating point tensor",
            lambda: adcuda.nanmean(adcuda.ones(2, dtype=adcuda.int64)),
        ),
        (DTypeError, "hstack: expected a non-empty sequence of Tensors", lambda: adcuda.hstack([])),
        (ValueError, "tensor_split: number of sections must be larger than 0", lambda: adcuda.tensor_split(x, 0)),
        (InvalidArgumentError, r"kthvalue: k \(5\) out of range for dimension 1 of size 4", lambda: x.kthvalue(5, 1)),
        (ValueError, r"quantile: q values must be in the range \[0, 1\]", lambda: adcuda.quantile(x, 1.5)),
        (
            UnsupportedDTypeError,
            "quantile: expected a floating point input",
            lambda: adcuda.quantile(adcuda.ones(2, dtype=adcuda.int64), 0.5),
        ),
        (
            ShapeError,
            r"searchsorted: sorted_sequence \(2, 3\) and input \(3, 1\)",
            lambda: adcuda.searchsorted(adcuda.ones(2, 3), adcuda.ones(3, 1)),
        ),
        (ShapeError, r"bucketize: boundaries must be 1-d, got shape \(3, 4\)", lambda: adcuda.bucketize(x, x)),
        (
            UnsupportedDTypeError,
            "bincount: expected a 1-d tensor of non-negative integers, got adcuda.float32",
            lambda: adcuda.bincount(adcuda.ones(3)),
        ),
        (ValueError, "bincount: expected non-negative values", lambda: adcuda.bincount(adcuda.tensor([1, -1]))),
        (
            ShapeError,
            r"bincount: weights \(2,\) must have input \(3,\)'s shape",
            lambda: adcuda.bincount(adcuda.tensor([1, 2, 3]), adcuda.ones(2)),
        ),
        (ValueError, "histc: bins must be > 0", lambda: adcuda.histc(x, bins=0)),
        (
            ShapeError,
            r"cov: expected a 1-d or 2-d input, got shape \(1, 3, 4\)",
            lambda: adcuda.cov(adcuda.ones(1, 3, 4)),
        ),
        (
            ShapeError,
            r"cov: fweights of shape \(3,\) must be 1-d with one weight per observation \(4\)",
            lambda: adcuda.cov(x, fweights=adcuda.tensor([1, 1, 1])),
        ),
        (ShapeError, "diff: expected an input with at least one dim", lambda: adcuda.diff(adcuda.tensor(1.0))),
        (
            ShapeError,
            r"block_diag: expected 0-, 1- or 2-d tensors, got \(1, 3, 4\)",
            lambda: adcuda.block_diag(adcuda.ones(1, 3, 4)),
        ),
        (ShapeError, "cartesian_prod: expected one or more 1-d tensors", lambda: adcuda.cartesian_prod(x)),
        (ShapeError, r"diag_embed: dim1 and dim2 cannot be the same dim", lambda: adcuda.diag_embed(x, 0, 1, 1)),
        (ShapeError, r"unfold: expected a 3-d \(C, H, W\) or 4-d", lambda: F.unfold(x, 2)),
        (
            ShapeError,
            r"unfold: a block of 5 positions does not fit a padded size of 3",
            lambda: F.unfold(adcuda.ones(1, 1, 3, 3), 5),
        ),
        (
            ShapeError,
            r"fold: input \(1, 8, 4\) needs a dim 1 divisible by kh \* kw = 4 and 9 blocks",
            lambda: F.fold(adcuda.ones(1, 8, 4), (4, 4), 2),
        ),
        (ShapeError, "local_response_norm: expected a 3-d or higher input", lambda: F.local_response_norm(x, 2)),
        (
            ShapeError,
            r"conv_transpose1d: expected input \(N, C, L\) or \(C, L\)",
            lambda: F.conv_transpose1d(x, adcuda.ones(3, 2)),
        ),
        (
            IndexOutOfRangeError,
            r"take: index out of range for input \(3, 4\) of 12 elements",
            lambda: adcuda.take(x, adcuda.tensor([12])),
        ),
        (
            ShapeError,
            r"put: source must have as many elements as index \(2\)",
            lambda: x.put(adcuda.tensor([0, 1]), adcuda.ones(3)),
        ),
        (
            ShapeError,
            r"masked_scatter: mask selects 12 elements but source \(3,\) has 3",
            lambda: x.masked_scatter(x > 0, adcuda.ones(3)),
        ),
        (
            ShapeError,
            r"fill_diagonal_: expected a 2-d tensor, or all dims of equal length, got \(2, 3, 4\)",
            lambda: adcuda.ones(2, 3, 4).fill_diagonal_(1.0),
        ),
        (ValueError, "softshrink: lambda must be greater or equal to 0", lambda: F.softshrink(x, -1.0)),
        (ValueError, "rrelu: expected 0 <= lower <= upper", lambda: F.rrelu(x, 0.5, 0.1)),
        (ValueError, "lp_pool2d: norm_type must be positive", lambda: F.lp_pool2d(adcuda.ones(1, 1, 2, 2), 0, 2)),
        (
            ShapeError,
            r"max_unpool2d: indices \(1, 1, 2, 2\) must have input \(1, 1, 1, 1\)'s shape",
            lambda: F.max_unpool2d(adcuda.ones(1, 1, 1, 1), adcuda.zeros(1, 1, 2, 2, dtype=adcuda.int64), 2),
        ),
        (
            IndexOutOfRangeError,
            "max_unpool2d: an index is out of the output's 4 positions",
            lambda: F.max_unpool2d(adcuda.ones(1, 1, 1, 1), adcuda.full((1, 1, 1, 1), 9, dtype=adcuda.int64), 2),
        ),
        (
            ShapeError,
            r"affine_grid: expected theta \(N, 2, 3\)",
            lambda: F.affine_grid(adcuda.ones(1, 3, 3), (1, 1, 2, 2)),
        ),
        (ShapeError, r"pdist: expected a 2-d input \(N, M\)", lambda: F.pdist(adcuda.ones(3))),
        (
            ValueError,
            "multi_margin_loss: only p == 1 and p == 2",
            lambda: F.multi_margin_loss(x, adcuda.tensor([0, 1, 2]), p=3),
        ),
        (
            IndexOutOfRangeError,
            "multi_margin_loss: target 7 is out of bounds for 4 classes",
            lambda: F.multi_margin_loss(x, adcuda.tensor([0, 1, 7])),
        ),
        (
            ShapeError,
            r"channel_shuffle: .*C divisible by groups \(3\), got \(1, 4, 2\)",
            lambda: F.channel_shuffle(adcuda.ones(1, 4, 2), 3),
        ),
    ]
    for error, message, call in cases:
        with pytest.raises(error, match=message):
            call()


def test_order_statistics_and_counts_match_pytorch():
    torch = pytest.importorskip("torch")
    data = rnd(3, 5, 4)
    for k in (1, 3, 5):
        ours, theirs = adcuda.tensor(data).kthvalue(k, 1, keepdim=True), torch.tensor(data).kthvalue(k, 1, keepdim=True)
        np.testing.assert_array_equal(ours.values.numpy(), theirs.values.numpy())
        np.testing.assert_array_equal(ours.indices.numpy(), theirs.indices.numpy())
    with_nan = data.copy()
    with_nan[0, 1, 2] = np.nan
    for q in (0.0, 0.25, 1.0, [0.2, 0.8]):
        for dim, keepdim in ((None, False), (None, True), (1, False), (-1, True)):
            for interpolation in ("linear", "lower", "higher", "midpoint", "nearest"):
                qa = adcuda.tensor(q, dtype=f64) if isinstance(q, list) else q
                qt = torch.tensor(q, dtype=torch.float64) if isinstance(q, list) else q
                for x in (data, with_nan):
                    ours = adcuda.quantile(adcuda.tensor(x), qa, dim, keepdim, interpolation=interpolation)
                    theirs = torch.quantile(torch.tensor(x), qt, dim, keepdim, interpolation=interpolation)
                    assert tuple(ours.shape) == tuple(theirs.shape)
                    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-12)
    sequence = np.array([[1.0, 3.0, 3.0, 7.0], [0.0, 2.0, 4.0, 6.0]])
    values = np.array([[3.0, 0.5, 9.0], [2.0, 2.5, -1.0]])
    for right in (False, True):
        for seq, val in ((sequence, values), (sequence[0], values)):
            ours = adcuda.searchsorted(adcuda.tensor(seq), adcuda.tensor(val), right=right)
            theirs = torch.searchsorted(torch.tensor(seq), torch.tensor(val), right=right)
            np.testing.assert_array_equal(ours.numpy(), theirs.numpy())
        np.testing.assert_array_equal(
            adcuda.bucketize(adcuda.tensor(values), adcuda.tensor(sequence[0]), right=right, out_int32=True).numpy(),
            torch.bucketize(torch.tensor(values), torch.tensor(sequence[0]), right=right, out_int32=True).numpy(),
        )
    assert adcuda.searchsorted(adcuda.tensor([1.0, 2.0]), 1.5).item() == 1
    order = adcuda.tensor([1, 2, 0])  # the argsort of [5, 1, 3]
    assert adcuda.searchsorted(adcuda.tensor([5.0, 1.0, 3.0]), adcuda.tensor([2.0]), sorter=order).tolist() == [1]
    counts = np.array([1, 1, 3, 0, 5])
    weights = rnd(5)
    np.testing.assert_array_equal(adcuda.bincount(adcuda.tensor(counts)).numpy(), torch.bincount(torch.tensor(counts)))
    ours = adcuda.bincount(adcuda.tensor(counts), adcuda.tensor(weights), minlength=8)
    np.testing.assert_allclose(ours.numpy(), torch.bincount(torch.tensor(counts), torch.tensor(weights), minlength=8))
    assert adcuda.bincount(adcuda.tensor(counts), adcuda.tensor([1, 2, 3, 4, 5])).dtype is f64
    samples = rnd(1000)
    for kwargs in ({"bins": 7}, {"bins": 5, "min": -1, "max": 1}):
        np.testing.assert_array_equal(
            adcuda.histc(adcuda.tensor(samples), **kwargs).numpy(), torch.histc(torch.tensor(samples), **kwargs).numpy()
        )


def test_elementwise_extras_match_pytorch_where_there_is_no_gradient():
    torch = pytest.importorskip("torch")
    a = np.array([5.5, -5.5, 5.5, -5.5, 3.0, -0.0, 2.0])
    b = np.array([2.0, 2.0, -2.0, -2.0, 1.5, 3.0, 0.7])
    np.testing.assert_allclose(
        adcuda.fmod(adcuda.tensor(a), adcuda.tensor(b)).numpy(), torch.fmod(torch.tensor(a), torch.tensor(b))
    )
    assert adcuda.fmod(adcuda.tensor([5, -5]), 3).tolist() == [2, -2]
    x, y = np.array([0.0, 0.0, 1.0, 2.0]), np.array([0.0, np.nan, 3.0, 0.0])
    np.testing.assert_array_equal(
        adcuda.xlogy(adcuda.tensor(x), adcuda.tensor(y)).numpy(), torch.xlogy(torch.tensor(x), torch.tensor(y))
    )
    np.testing.assert_array_equal(
        adcuda.heaviside(adcuda.tensor([-1.0, 0.0, 2.0]), adcuda.tensor([0.5])).numpy(),
        torch.heaviside(torch.tensor([-1.0, 0.0, 2.0]), torch.tensor([0.5])).numpy(),
    )
    signed = np.array([-0.0, 0.0, -1.0, 2.0, -np.inf])
    np.testing.assert_array_equal(adcuda.signbit(adcuda.tensor(signed)).numpy(), torch.signbit(torch.tensor(signed)))
    assert adcuda.signbit(adcuda.tensor([-2, 3])).tolist() == [True, False]
    assert adcuda.sgn(adcuda.tensor([-2.0, 0.0, 4.0])).tolist() == [-1.0, 0.0, 1.0]
    assert adcuda.float_power(adcuda.tensor([2]), 0.5).dtype is f64
    assert adcuda.diff(adcuda.tensor([True, False, False])).tolist() == [True, False]


def test_tensor_facts_and_top_level_flags():
    x = adcuda.ones(2, 3, dtype=f64)
    assert x.ndimension() == 2 and x.nbytes == 48 and x.itemsize == 8
    assert x.get_device() == -1 and not x.is_complex() and not adcuda.is_complex(x)
    assert adcuda.get_float32_matmul_precision() == "highest"
    adcuda.set_float32_matmul_precision("high")
    try:
        assert adcuda.get_float32_matmul_precision() == "high" and adcuda.backends.cuda.matmul.allow_tf32
    finally:
        adcuda.set_float32_matmul_precision("highest")
    assert adcuda.backends.cuda.matmul.allow_tf32 is False
    with pytest.raises(ValueError, match="set_float32_matmul_precision: expected"):
        adcuda.set_float32_matmul_precision("low")


def test_linalg_norms_match_pytorch_and_refuse_what_needs_an_svd():
    torch = pytest.importorskip("torch")
    data = rnd(2, 3, 4)
    for ord_ in (2, 1, math.inf, -math.inf, 0, 3.5):
        for dim in (None, 1, (1, 2)):
            for keepdim in (False, True):
                np.testing.assert_allclose(
                    adcuda.linalg.vector_norm(adcuda.tensor(data), ord_, dim, keepdim).numpy(),
                    torch.linalg.vector_norm(torch.tensor(data), ord_, dim, keepdim).numpy(),
                    rtol=1e-12,
                )
    for ord_ in ("fro", 1, -1, math.inf, -math.inf):
        for dim in ((-2, -1), (0, 2), (2, 1)):
            np.testing.assert_allclose(
                adcuda.linalg.matrix_norm(adcuda.tensor(data), ord_, dim).numpy(),
                torch.linalg.matrix_norm(torch.tensor(data), ord_, dim).numpy(),
                rtol=1e-12,
            )
    for args in ((), (None, (0, 1)), ("fro", (0, 1)), (3, 2)):
        np.testing.assert_allclose(
            adcuda.linalg.norm(adcuda.tensor(data), *args).numpy(), torch.linalg.norm(torch.tensor(data), *args).numpy()
        )
    with pytest.raises(ValueError, match="linalg.matrix_norm: ord='nuc' needs the singular values"):
        adcuda.linalg.matrix_norm(adcuda.ones(2, 2), "nuc")
    with pytest.raises(ShapeError, match=r"linalg.matrix_norm: expected at least a 2-d input, got shape \(3,\)"):
        adcuda.linalg.matrix_norm(adcuda.ones(3))
    with pytest.raises(DTypeError, match="linalg.vector_norm: expected a floating point tensor"):
        adcuda.linalg.vector_norm(adcuda.ones(3, dtype=adcuda.int64))


def test_assert_close():
    adcuda.testing.assert_close(adcuda.ones(2), adcuda.ones(2) + 1e-7)
    adcuda.testing.assert_close({"a": [adcuda.ones(2), 1.0]}, {"a": [adcuda.ones(2), 1.0]})
    adcuda.testing.assert_close(adcuda.tensor([1.0, math.nan]), adcuda.tensor([1.0, math.nan]), equal_nan=True)
    with pytest.raises(AssertionError, match=r"Mismatched elements: 1 / 3 .*\n.*at index \(1,\)"):
        adcuda.testing.assert_close(adcuda.ones(3), adcuda.tensor([1.0, 1.1, 1.0]))
    with pytest.raises(AssertionError, match="different dtypes: adcuda.float32 and adcuda.float64"):
        adcuda.testing.assert_close(adcuda.ones(3), adcuda.ones(3, dtype=f64))
    with pytest.raises(AssertionError, match=r"shapes \(3,\) and \(2,\) differ"):
        adcuda.testing.assert_close(adcuda.ones(3), adcuda.ones(2))
    with pytest.raises(AssertionError, match="custom"):
        adcuda.testing.assert_close(adcuda.ones(1), adcuda.zeros(1), msg="custom")
    adcuda.testing.assert_close(adcuda.ones(1), adcuda.tensor([1.05]), rtol=0.1, atol=0.0)


# ------------------------------------------------------------------------------------------------
# nn modules
def _torch_module_pairs(torch):
    an, tn = adcuda.nn, torch.nn
    return [
        (an.ELU(0.5), tn.ELU(0.5), 1),
        (an.SELU(), tn.SELU(), 1),
        (an.CELU(1.5), tn.CELU(1.5), 1),
        (an.GLU(1), tn.GLU(1), 1),
        (an.Hardtanh(-0.5, 2.0), tn.Hardtanh(-0.5, 2.0), 1),
        (an.ReLU6(), tn.ReLU6(), 1),
        (an.Hardsigmoid(), tn.Hardsigmoid(), 1),
        (an.Hardswish(), tn.Hardswish(), 1),
        (an.Mish(), tn.Mish(), 1),
        (an.Softplus(2.0, 5.0), tn.Softplus(2.0, 5.0), 1),
        (an.LogSigmoid(), tn.LogSigmoid(), 1),
        (an.Softsign(), tn.Softsign(), 1),
        (an.Tanhshrink(), tn.Tanhshrink(), 1),
        (an.Threshold(0.2, -1.0), tn.Threshold(0.2, -1.0), 1),
        (an.Softmin(dim=1), tn.Softmin(dim=1), 1),
        (an.PReLU(4, init=0.1), tn.PReLU(4, init=0.1), 1),
        (an.CosineSimilarity(dim=1), tn.CosineSimilarity(dim=1), 2),
        (an.PairwiseDistance(p=1.0, keepdim=True), tn.PairwiseDistance(p=1.0, keepdim=True), 2),
        (an.ZeroPad2d((1, 0, 2, 1)), tn.ZeroPad2d((1, 0, 2, 1)), 1),
        (an.ConstantPad1d(2, 3.5), tn.ConstantPad1d(2, 3.5), 1),
        (an.ConstantPad2d(1, -1.0), tn.ConstantPad2d(1, -1.0), 1),
        (an.ReflectionPad1d((2, 1)), tn.ReflectionPad1d((2, 1)), 1),
        (an.ReflectionPad2d(1), tn.ReflectionPad2d(1), 1),
        (an.ReplicationPad1d(3), tn.ReplicationPad1d(3), 1),
        (an.ReplicationPad2d((0, 1, 2, 0)), tn.ReplicationPad2d((0, 1, 2, 0)), 1),
        (an.CircularPad2d(1), tn.CircularPad2d(1), 1),
        (an.ZeroPad1d(1), tn.ZeroPad1d(1), 1),
        (an.CircularPad1d(2), tn.CircularPad1d(2), 1),
        (an.PixelShuffle(2), tn.PixelShuffle(2), 1),
        (an.PixelUnshuffle(2), tn.PixelUnshuffle(2), 1),
        (an.AdaptiveMaxPool1d(3), tn.AdaptiveMaxPool1d(3), 1),
        (an.UpsamplingNearest2d(scale_factor=2), tn.UpsamplingNearest2d(scale_factor=2), 1),
        (an.UpsamplingBilinear2d(size=(5, 7)), tn.UpsamplingBilinear2d(size=(5, 7)), 1),
    ]


def test_modules_match_pytorch():
    torch = pytest.importorskip("torch")
    x = rnd(2, 4, 4, 6)
    for ours, theirs, inputs in _torch_module_pairs(torch):
        data = [x] if inputs == 1 else [x, rnd(*x.shape, seed=1)]
        if isinstance(
            ours,
            (
                adcuda.nn.ReflectionPad1d,
                adcuda.nn.ReplicationPad1d,
                adcuda.nn.ConstantPad1d,
                adcuda.nn.ZeroPad1d,
                adcuda.nn.CircularPad1d,
                adcuda.nn.AdaptiveMaxPool1d,
            ),
        ):
            data = [d[0] for d in data]
        if isinstance(ours, adcuda.nn.PixelShuffle):
            data = [rnd(2, 8, 3, 2)]
        a = [adcuda.tensor(d, requires_grad=True) for d in data]
        t = [torch.tensor(d, requires_grad=True) for d in data]
        out, expected = ours.double()(*a), theirs.double()(*t)
        np.testing.assert_allclose(out.detach().numpy(), expected.detach().numpy(), rtol=1e-10, atol=1e-12)
        out.sum().backward()
        expected.sum().backward()
        for u, v in zip(a, t):  # 1e-7: PyTorch's hardsigmoid/hardswish gradients (see GRAD_RTOL)
            np.testing.assert_allclose(u.grad.numpy(), v.grad.numpy(), rtol=1e-7, atol=1e-12)
        assert repr(ours).split("(")[0] == repr(theirs).split("(")[0]


def test_loss_modules_match_pytorch():
    torch = pytest.importorskip("torch")
    a, b, c = rnd(4, 3), rnd(4, 3, seed=1), rnd(4, 3, seed=2)
    s, y = signs(4, seed=3), signs(4, 3, seed=4)
    pairs = [
        ("MarginRankingLoss", {"margin": 0.5}, (a[:, 0], b[:, 0], s)),
        ("CosineEmbeddingLoss", {"margin": 0.1, "reduction": "sum"}, (a, b, s)),
        ("HingeEmbeddingLoss", {"margin": 0.5}, (a, y)),
        ("SoftMarginLoss", {"reduction": "none"}, (a, y)),
        ("MultiLabelSoftMarginLoss", {}, (a, (y > 0) * 1.0)),
        ("PoissonNLLLoss", {"full": True}, (a, np.abs(b) * 3)),
        ("GaussianNLLLoss", {"full": True}, (a, b, np.abs(c) + 0.1)),
        ("TripletMarginLoss", {"margin": 0.7, "p": 1.0}, (a, b, c)),
    ]
    for name, kwargs, data in pairs:
        ours = getattr(adcuda.nn, name)(**kwargs)(*(adcuda.tensor(d) for d in data))
        theirs = getattr(torch.nn, name)(**kwargs)(*(torch.tensor(d) for d in data))
        np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-10, atol=1e-12, err_msg=name)


def test_prelu_and_bilinear_load_pytorch_state_dicts():
    torch = pytest.importorskip("torch")
    for ours, theirs, data in (
        (adcuda.nn.PReLU(3), torch.nn.PReLU(3), [rnd(2, 3, 4)]),
        (adcuda.nn.Bilinear(3, 4, 5), torch.nn.Bilinear(3, 4, 5), [rnd(2, 3), rnd(2, 4, seed=1)]),
        (adcuda.nn.Bilinear(3, 4, 5, bias=False), torch.nn.Bilinear(3, 4, 5, bias=False), [rnd(2, 3), rnd(2, 4)]),
    ):
        state = {k: v.detach().numpy().astype(np.float64) + 0.1 for k, v in theirs.state_dict().items()}
        assert set(state) == set(ours.state_dict())
        ours.load_state_dict({k: adcuda.tensor(v, dtype=adcuda.float32) for k, v in state.items()})
        theirs.load_state_dict({k: torch.tensor(v, dtype=torch.float32) for k, v in state.items()})
        out = ours(*(adcuda.tensor(d, dtype=adcuda.float32) for d in data))
        expected = theirs(*(torch.tensor(d, dtype=torch.float32) for d in data))
        np.testing.assert_allclose(out.detach().numpy(), expected.detach().numpy(), rtol=1e-5, atol=1e-6)
    bound = 1 / math.sqrt(3)
    weights = adcuda.nn.Bilinear(3, 4, 50).weight.detach().numpy()
    assert weights.min() >= -bound and weights.max() <= bound and weights.std() > bound / 3


def test_parameter_list_and_dict_register_their_entries():
    plist = adcuda.nn.ParameterList([adcuda.nn.Parameter(adcuda.ones(2)) for _ in range(2)])
    plist.append(adcuda.zeros(3))  # a plain tensor becomes a Parameter, as in PyTorch
    assert len(plist) == 3 and isinstance(plist[2], adcuda.nn.Parameter) and plist[-1].shape == (3,)
    assert list(plist.state_dict()) == ["0", "1", "2"]
    assert len(list(plist.parameters())) == 3 and len(list(plist)) == 3 and len(plist[1:]) == 2
    plist[0] = adcuda.nn.Parameter(adcuda.full((2,), 5.0))
    assert plist[0].tolist() == [5.0, 5.0]
    with pytest.raises(IndexError, match="out of range for a ParameterList of length 3"):
        plist[3]  # noqa: B018
    pdict = adcuda.nn.ParameterDict({"w": adcuda.nn.Parameter(adcuda.ones(2)), "b": adcuda.zeros(1)})
    assert list(pdict.keys()) == ["w", "b"] and "w" in pdict and len(pdict) == 2
    assert isinstance(pdict["b"], adcuda.nn.Parameter)
    pdict.update({"c": adcuda.nn.Parameter(adcuda.ones(1))})
    del pdict["w"]
    assert list(pdict) == ["b", "c"] and sorted(pdict.state_dict()) == ["b", "c"]

    class Model(adcuda.nn.Module):
        def __init__(self):
            super().__init__()
            self.scales = adcuda.nn.ParameterList([adcuda.nn.Parameter(adcuda.ones(1)) for _ in range(2)])
            self.extra = adcuda.nn.ParameterDict({"shift": adcuda.nn.Parameter(adcuda.zeros(1))})

    model = Model()
    assert sorted(model.state_dict()) == ["extra.shift", "scales.0", "scales.1"]
    torch = pytest.importorskip("torch")

    class TorchModel(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.scales = torch.nn.ParameterList([torch.nn.Parameter(torch.ones(1)) for _ in range(2)])
            self.extra = torch.nn.ParameterDict({"shift": torch.nn.Parameter(torch.zeros(1))})

    assert sorted(model.state_dict()) == sorted(TorchModel().state_dict())


def test_more_modules_match_pytorch():
    torch = pytest.importorskip("torch")
    an, tn = adcuda.nn, torch.nn
    pairs = [
        (an.Unfold(2, stride=2), tn.Unfold(2, stride=2), rnd(2, 3, 4, 6)),
        (an.Fold((4, 6), 2, stride=2), tn.Fold((4, 6), 2, stride=2), rnd(2, 12, 6)),
        (an.ChannelShuffle(2), tn.ChannelShuffle(2), rnd(2, 4, 3, 3)),
        (an.LocalResponseNorm(3), tn.LocalResponseNorm(3), rnd(2, 5, 3, 3)),
        (an.Dropout3d(0.4).eval(), tn.Dropout3d(0.4).eval(), rnd(2, 3, 2, 2, 2)),
        (an.AlphaDropout(0.4).eval(), tn.AlphaDropout(0.4).eval(), rnd(2, 3)),
        (an.FeatureAlphaDropout(0.4).eval(), tn.FeatureAlphaDropout(0.4).eval(), rnd(2, 3, 4)),
    ]
    for ours, theirs, data in pairs:
        np.testing.assert_allclose(
            ours(adcuda.tensor(data)).numpy(), theirs(torch.tensor(data)).numpy(), rtol=1e-12, atol=1e-12
        )
        assert repr(ours) == repr(theirs)
    ours, theirs = an.EmbeddingBag(10, 3, mode="sum"), tn.EmbeddingBag(10, 3, mode="sum")
    assert repr(ours) == repr(theirs) and set(ours.state_dict()) == set(theirs.state_dict())
    ours.load_state_dict({"weight": adcuda.tensor(theirs.weight.detach().numpy())})
    np.testing.assert_allclose(
        ours(adcuda.tensor(BAG_INDICES), adcuda.tensor(BAG_OFFSETS)).detach().numpy(),
        theirs(torch.tensor(BAG_INDICES), torch.tensor(BAG_OFFSETS)).detach().numpy(),
        rtol=1e-6,
    )
    pretrained = an.EmbeddingBag.from_pretrained(adcuda.ones(4, 2), mode="max")
    assert not pretrained.weight.requires_grad
    assert pretrained(adcuda.tensor([[0, 1], [2, 3]])).tolist() == [[1.0, 1.0], [1.0, 1.0]]


def test_embedding_bag_modes_match_pytorch():
    torch = pytest.importorskip("torch")
    weight = rnd(10, 3)
    for mode in ("sum", "mean", "max"):
        for padding_idx in (None, 2, 0):
            for last in (False, True):
                offsets = np.array([0, 4, 4, 7, 10]) if last else BAG_OFFSETS
                kwargs = {"mode": mode, "padding_idx": padding_idx, "include_last_offset": last}
                ours = F.embedding_bag(
                    adcuda.tensor(BAG_INDICES), adcuda.tensor(weight), adcuda.tensor(offsets), **kwargs
                )
                theirs = torch.nn.functional.embedding_bag(
                    torch.tensor(BAG_INDICES), torch.tensor(weight), torch.tensor(offsets), **kwargs
                )
                np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-12, err_msg=str(kwargs))
    with pytest.raises(ValueError, match="embedding_bag: per_sample_weights are only supported for mode='sum'"):
        F.embedding_bag(adcuda.tensor([0]), adcuda.ones(2, 2), adcuda.tensor([0]), per_sample_weights=adcuda.ones(1))
    with pytest.raises(ShapeError, match=r"embedding_bag: offsets must be None for a 2-d input"):
        F.embedding_bag(adcuda.tensor([[0]]), adcuda.ones(2, 2), adcuda.tensor([0]))
    with pytest.raises(IndexOutOfRangeError, match="embedding_bag: offsets must start at 0"):
        F.embedding_bag(adcuda.tensor([0, 1]), adcuda.ones(2, 2), adcuda.tensor([1]))


def test_channel_and_alpha_dropout_keep_their_statistics():
    adcuda.manual_seed(0)
    x = adcuda.randn(200000)
    y = F.alpha_dropout(x, 0.3, training=True)
    assert abs(float(y.mean())) < 0.02 and abs(float(y.std()) - 1.0) < 0.02
    z = F.feature_alpha_dropout(adcuda.randn(64, 32, 10), 0.2, training=True)
    assert abs(float(z.mean())) < 0.05 and abs(float(z.std()) - 1.0) < 0.05
    assert F.alpha_dropout(x, 0.3) is x  # PyTorch's default: training=False
    masked = F.dropout3d(adcuda.ones(8, 16, 2, 2, 2), 0.5)
    per_channel = masked.numpy().reshape(8, 16, -1)
    assert (per_channel.min(-1) == per_channel.max(-1)).all() and set(np.unique(per_channel)) <= {0.0, 2.0}
    with pytest.warns(UserWarning, match="Received a 2-D input to dropout3d"):  # PyTorch warns, then drops
        assert F.dropout3d(adcuda.ones(2, 3)).shape == (2, 3)


def test_cyclic_lr_matches_pytorch_bit_for_bit():
    torch = pytest.importorskip("torch")

    def run(module, make, adam):
        p, q = module.nn.Parameter(module.ones(1)), module.nn.Parameter(module.ones(1))
        groups = [{"params": [p]}, {"params": [q], "lr": 0.5}]
        optimizer = module.optim.Adam(groups, lr=0.1) if adam else module.optim.SGD(groups, lr=0.1, momentum=0.9)
        key = "betas" if adam else "momentum"
        scheduler = make(module.optim.lr_scheduler, optimizer)
        seen = [(scheduler.get_last_lr(), [g[key] for g in optimizer.param_groups])]
        for _ in range(30):
            optimizer.step()
            scheduler.step()
            seen.append((scheduler.get_last_lr(), [g[key] for g in optimizer.param_groups]))
        return seen

    for make in (
        lambda s, o: s.CyclicLR(o, 0.01, 0.1, step_size_up=4),
        lambda s, o: s.CyclicLR(o, [0.01, 0.02], 0.1, step_size_up=3, step_size_down=5, mode="triangular2"),
        lambda s, o: s.CyclicLR(o, 0.01, 0.1, step_size_up=4, mode="exp_range", gamma=0.97),
        lambda s, o: s.CyclicLR(
            o, 0.01, 0.1, 4, scale_fn=lambda x: 0.5**x, scale_mode="iterations", cycle_momentum=False
        ),
    ):
        for adam in (False, True):
            assert run(adcuda, make, adam) == run(torch, make, adam)
    with pytest.raises(ValueError, match="CyclicLR: optimizer must support momentum"):
        adcuda.optim.lr_scheduler.CyclicLR(adcuda.optim.Adagrad([adcuda.nn.Parameter(adcuda.ones(1))]), 0.1, 1.0)


def test_norm_layers_take_pytorchs_bias_keyword():
    torch = pytest.importorskip("torch")
    data = rnd(4, 6, 5)
    for ours, theirs in (
        (adcuda.nn.BatchNorm1d(6, bias=False), torch.nn.BatchNorm1d(6, bias=False)),
        (adcuda.nn.GroupNorm(3, 6, bias=False), torch.nn.GroupNorm(3, 6, bias=False)),
        (adcuda.nn.InstanceNorm1d(6, affine=True, bias=False), torch.nn.InstanceNorm1d(6, affine=True, bias=False)),
    ):
        assert ours.bias is None and sorted(ours.state_dict()) == sorted(theirs.state_dict())
        np.testing.assert_allclose(
            ours.double()(adcuda.tensor(data)).detach().numpy(),
            theirs.double()(torch.tensor(data)).detach().numpy(),
            rtol=1e-10,
        )
    assert adcuda.nn.InstanceNorm1d(6).weight is None and adcuda.nn.GroupNorm(1, 2, affine=False).bias is None


def test_forward_hooks_with_kwargs_and_always_call():
    model = adcuda.nn.Linear(2, 2)
    seen = []
    model.register_forward_pre_hook(lambda module, args, kwargs: ((args[0] * 0,), kwargs), with_kwargs=True)
    model.register_forward_hook(lambda module, args, kwargs, output: seen.append(kwargs), with_kwargs=True)
    plain = model.register_forward_hook(lambda module, args, output: output * 2)
    out = model(adcuda.ones(1, 2))
    np.testing.assert_allclose(out.detach().numpy(), 2 * model.bias.detach().numpy()[None], rtol=1e-6)
    assert seen == [{}]
    plain.remove()
    bad = adcuda.nn.Linear(2, 2)
    bad.register_forward_pre_hook(lambda module, args, kwargs: args, with_kwargs=True)
    with pytest.raises(TypeError, match=r"must return None or a tuple of \(new_args, new_kwargs\)"):
        bad(adcuda.ones(1, 2))

    class Failing(adcuda.nn.Module):
        def forward(self, x):
            raise ValueError("forward failed")

    failing = Failing()
    failing.register_forward_hook(lambda module, args, output: seen.append(("always", output)), always_call=True)
    failing.register_forward_hook(lambda module, args, output: seen.append("not called"))
    with pytest.raises(ValueError, match="forward failed"):
        failing(1)
    assert seen[-1] == ("always", None)
    shared = adcuda.nn.Linear(1, 1)
    twice = adcuda.nn.Sequential(shared, shared)
    assert len(list(twice.modules())) == 2 and len(list(twice.modules(remove_duplicate=False))) == 3


def test_last_names_match_pytorch():
    torch = pytest.importorskip("torch")
    for shape, wrap in (((7, 3), True), ((7, 3), False), ((3, 5), False), ((3, 3, 3), False)):
        np.testing.assert_array_equal(
            adcuda.zeros(*shape).fill_diagonal_(2.0, wrap=wrap).numpy(),
            torch.zeros(*shape).fill_diagonal_(2.0, wrap=wrap).numpy(),
        )
    x = adcuda.ones(2, dtype=f64)
    assert x.new(3).shape == (3,) and x.new(2, 3).dtype is f64 and x.new([1, 2]).tolist() == [1.0, 2.0]
    with pytest.raises(DTypeError, match="new: expected a tensor of dtype adcuda.float64"):
        x.new(adcuda.tensor([1, 2]))
    variable = adcuda.autograd.Variable(adcuda.ones(2), requires_grad=True)
    assert variable.requires_grad and isinstance(variable, adcuda.Tensor)
    values, indices = torch.nn.functional.max_pool2d(torch.tensor(rnd(2, 3, 6, 4)), 2, return_indices=True)
    for size in (None, (7, 5)):
        np.testing.assert_array_equal(
            F.max_unpool2d(adcuda.tensor(values.numpy()), adcuda.tensor(indices.numpy()), 2, output_size=size).numpy(),
            torch.nn.functional.max_unpool2d(values, indices, 2, output_size=size).numpy(),
        )
    values, indices = torch.nn.functional.max_pool1d(torch.tensor(rnd(2, 3, 6)), 2, return_indices=True)
    unpool = adcuda.nn.MaxUnpool1d(2)
    np.testing.assert_array_equal(
        unpool(adcuda.tensor(values.numpy()), adcuda.tensor(indices.numpy())).numpy(),
        torch.nn.MaxUnpool1d(2)(values, indices).numpy(),
    )
    adcuda.manual_seed(0)
    data = rnd(1000)
    slopes = F.rrelu(adcuda.tensor(data), 0.1, 0.3, training=True).numpy()[data < 0] / data[data < 0]
    assert 0.1 <= slopes.min() and slopes.max() <= 0.3 and slopes.std() > 0.03
    an, tn = adcuda.nn, torch.nn
    for ours, theirs, shape in (
        (an.Softmax2d(), tn.Softmax2d(), (2, 3, 4, 4)),
        (an.Hardshrink(0.3), tn.Hardshrink(0.3), (2, 3)),
        (an.Softshrink(), tn.Softshrink(), (2, 3)),
        (an.RReLU(0.1, 0.3).eval(), tn.RReLU(0.1, 0.3).eval(), (2, 3)),
        (an.LPPool2d(2, 2), tn.LPPool2d(2, 2), (2, 3, 4, 4)),
        (an.LPPool1d(2, 3, 1), tn.LPPool1d(2, 3, 1), (2, 3, 5)),
        (an.ConvTranspose1d(4, 6, 3, stride=2, groups=2), tn.ConvTranspose1d(4, 6, 3, stride=2, groups=2), (2, 4, 5)),
        (an.BatchNorm3d(3), tn.BatchNorm3d(3), (2, 3, 2, 3, 2)),
    ):
        if sorted(theirs.state_dict()):
            assert sorted(ours.state_dict()) == sorted(theirs.state_dict())
            ours.load_state_dict({k: adcuda.tensor(v.numpy()) for k, v in theirs.state_dict().items()})
        data = np.abs(rnd(*shape)) if isinstance(ours, (an.LPPool1d, an.LPPool2d)) else rnd(*shape)
        np.testing.assert_allclose(
            ours(adcuda.tensor(data, dtype=adcuda.float32)).detach().numpy(),
            theirs(torch.tensor(data, dtype=torch.float32)).detach().numpy(),
            rtol=1e-5,
            atol=1e-6,
        )
        assert repr(ours) == repr(theirs)
    for ours, theirs in (
        (an.MultiMarginLoss(margin=0.5), tn.MultiMarginLoss(margin=0.5)),
        (an.TripletMarginWithDistanceLoss(swap=True), tn.TripletMarginWithDistanceLoss(swap=True)),
    ):
        assert repr(ours) == repr(theirs)
    a, b, c = rnd(4, 3), rnd(4, 3, seed=1), rnd(4, 3, seed=2)
    np.testing.assert_allclose(
        an.TripletMarginWithDistanceLoss()(adcuda.tensor(a), adcuda.tensor(b), adcuda.tensor(c)).numpy(),
        tn.TripletMarginWithDistanceLoss()(torch.tensor(a), torch.tensor(b), torch.tensor(c)).numpy(),
    )


def test_chained_scheduler_matches_pytorch():
    torch = pytest.importorskip("torch")

    def run(module):
        optimizer = module.optim.SGD([module.nn.Parameter(module.ones(1))], lr=0.05)
        schedule = module.optim.lr_scheduler
        first = schedule.ConstantLR(optimizer, factor=0.1, total_iters=5)
        chained = schedule.ChainedScheduler([first, schedule.ExponentialLR(optimizer, gamma=0.9)], optimizer)
        seen = [chained.get_last_lr()]
        for _ in range(12):
            optimizer.step()
            chained.step()
            seen.append(chained.get_last_lr())
        return seen, chained

    ours, chained = run(adcuda)
    assert ours == run(torch)[0]
    state = chained.state_dict()
    assert len(state["_schedulers"]) == 2
    with pytest.raises(ValueError, match="ChainedScheduler does not support ReduceLROnPlateau"):
        optimizer = adcuda.optim.SGD([adcuda.nn.Parameter(adcuda.ones(1))], lr=0.05)
        adcuda.optim.lr_scheduler.ChainedScheduler([adcuda.optim.lr_scheduler.ReduceLROnPlateau(optimizer)])


def test_module_type_converts_every_tensor():
    model = adcuda.nn.Sequential(adcuda.nn.Linear(2, 2), adcuda.nn.BatchNorm1d(2))
    model.type(adcuda.float64)
    assert all(p.dtype is f64 for p in model.parameters())
    assert model[1].num_batches_tracked.dtype is f64  # integer buffers too, as PyTorch's type() does


# ------------------------------------------------------------------------------------------------
# initialisers, schedulers, samplers, utilities
def test_initialisers():
    torch = pytest.importorskip("torch")
    w = adcuda.empty(40, 3, 5)
    adcuda.nn.init.orthogonal_(w, gain=2.0)
    flat = w.numpy().reshape(40, 15).astype(np.float64)
    np.testing.assert_allclose(flat.T @ flat, 4 * np.eye(15), atol=1e-5)
    wide = adcuda.nn.init.orthogonal_(adcuda.empty(3, 10)).numpy().astype(np.float64)
    np.testing.assert_allclose(wide @ wide.T, np.eye(3), atol=1e-6)
    t = adcuda.nn.init.trunc_normal_(adcuda.empty(20000), mean=0.5, std=1.0, a=-0.5, b=1.0)
    assert -0.5 <= float(t.min()) and float(t.max()) <= 1.0
    reference = torch.nn.init.trunc_normal_(torch.empty(20000), mean=0.5, std=1.0, a=-0.5, b=1.0)
    assert abs(float(t.mean()) - float(reference.mean())) < 0.02 and abs(float(t.std()) - float(reference.std())) < 0.02
    with pytest.raises(ValueError, match="trunc_normal_: .* too little to draw from"):
        adcuda.nn.init.trunc_normal_(adcuda.empty(2), a=10.0, b=11.0)
    np.testing.assert_array_equal(adcuda.nn.init.eye_(adcuda.empty(3, 4)).numpy(), np.eye(3, 4))
    for shape, groups in (((4, 2, 3, 3), 2), ((6, 3, 3), 1), ((2, 4, 1, 3, 3), 1)):
        ours = adcuda.nn.init.dirac_(adcuda.empty(*shape), groups)
        np.testing.assert_array_equal(ours.numpy(), torch.nn.init.dirac_(torch.empty(*shape), groups).numpy())
    with pytest.raises(ValueError, match="eye_: only 2-d tensors"):
        adcuda.nn.init.eye_(adcuda.empty(2, 2, 2))


def _lr_sequence(module, make, epochs=None, steps=24):
    p, q = module.nn.Parameter(module.ones(1)), module.nn.Parameter(module.ones(1))
    optimizer = module.optim.SGD([{"params": [p]}, {"params": [q], "lr": 0.5}], lr=0.1)
    scheduler = make(module.optim.lr_scheduler, optimizer)
    lrs = [scheduler.get_last_lr()]
    for i in range(steps):
        optimizer.step()
        scheduler.step() if epochs is None else scheduler.step(epochs[i])
        lrs.append(scheduler.get_last_lr())
    return lrs


SCHEDULERS = {
    "MultiStepLR": lambda s, o: s.MultiStepLR(o, [3, 7, 7, 12], 0.5),
    "ConstantLR": lambda s, o: s.ConstantLR(o, 0.25, 4),
    "MultiplicativeLR": lambda s, o: s.MultiplicativeLR(o, lambda epoch: 0.9),
    "PolynomialLR": lambda s, o: s.PolynomialLR(o, 10, 2.0),
    "CosineAnnealingWarmRestarts": lambda s, o: s.CosineAnnealingWarmRestarts(o, 3, 2, 0.01),
    "CosineAnnealingWarmRestarts_period": lambda s, o: s.CosineAnnealingWarmRestarts(o, 4),
}


@pytest.mark.parametrize("name", sorted(SCHEDULERS))
def test_schedulers_match_pytorch_bit_for_bit(name):
    torch = pytest.importorskip("torch")
    assert _lr_sequence(adcuda, SCHEDULERS[name]) == _lr_sequence(torch, SCHEDULERS[name])


def test_warm_restarts_stepped_by_fractional_epochs_match_pytorch():
    torch = pytest.importorskip("torch")
    epochs = [0.5 * i for i in range(1, 25)]
    make = SCHEDULERS["CosineAnnealingWarmRestarts"]
    assert _lr_sequence(adcuda, make, epochs) == _lr_sequence(torch, make, epochs)


def test_scheduler_arguments_are_checked():
    optimizer = adcuda.optim.SGD([adcuda.nn.Parameter(adcuda.ones(1))], lr=0.1)
    with pytest.raises(ValueError, match="ConstantLR: constant factor"):
        adcuda.optim.lr_scheduler.ConstantLR(optimizer, factor=2.0)
    with pytest.raises(ValueError, match="CosineAnnealingWarmRestarts: expected a positive integer T_0"):
        adcuda.optim.lr_scheduler.CosineAnnealingWarmRestarts(optimizer, 0)


def _optimizer_run(module, make, dtype, steps=30):
    rng = np.random.default_rng(0)
    w = module.nn.Parameter(module.tensor(rng.standard_normal((4, 3)), dtype=getattr(module, dtype)))
    b = module.nn.Parameter(module.tensor(rng.standard_normal(3), dtype=getattr(module, dtype)))
    optimizer = make(module.optim, [w, b])
    for _ in range(steps):
        x = module.tensor(rng.standard_normal((5, 4)), dtype=getattr(module, dtype))
        loss = ((x @ w + b) ** 2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return [w.detach().numpy(), b.detach().numpy()], optimizer


OPTIMIZERS = {
    "Adamax": lambda o, p: o.Adamax(p, lr=0.01, weight_decay=0.1),
    "Adamax_maximize": lambda o, p: o.Adamax(p, maximize=True),
    "NAdam": lambda o, p: o.NAdam(p, lr=0.01, weight_decay=0.05),
    "NAdamW": lambda o, p: o.NAdam(p, lr=0.01, weight_decay=0.05, decoupled_weight_decay=True),
    "RAdam": lambda o, p: o.RAdam(p, lr=0.01, betas=(0.8, 0.99)),
    "RAdamW": lambda o, p: o.RAdam(p, lr=0.01, weight_decay=0.1, decoupled_weight_decay=True),
}


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_optimizers_match_pytorch(name):
    torch = pytest.importorskip("torch")
    for dtype, rtol in (("float64", 1e-12), ("float32", 1e-5)):
        ours, optimizer = _optimizer_run(adcuda, OPTIMIZERS[name], dtype)
        theirs, reference = _optimizer_run(torch, OPTIMIZERS[name], dtype)
        for a, b in zip(ours, theirs):
            np.testing.assert_allclose(a, b, rtol=rtol, atol=rtol)
        state, expected = optimizer.state_dict()["state"][0], reference.state_dict()["state"][0]
        assert sorted(state) == sorted(expected)  # PyTorch's state names, so its checkpoints map over
        restored = OPTIMIZERS[name](
            adcuda.optim, [adcuda.nn.Parameter(adcuda.ones(4, 3)), adcuda.nn.Parameter(adcuda.ones(3))]
        )
        restored.load_state_dict(optimizer.state_dict())
        assert restored.state_dict()["state"][0]["step"].item() == 30


def test_optimizer_step_hooks():
    param = adcuda.nn.Parameter(adcuda.ones(2))
    param.grad = adcuda.ones(2)
    optimizer = adcuda.optim.SGD([param], lr=0.1)
    seen = []
    pre = optimizer.register_step_pre_hook(lambda opt, args, kwargs: seen.append(("pre", opt is optimizer)))
    optimizer.register_step_post_hook(lambda opt, args, kwargs: seen.append(("post", args, kwargs)))
    optimizer.step()
    pre.remove()
    optimizer.step()
    assert seen == [("pre", True), ("post", (), {}), ("post", (), {})]
    np.testing.assert_allclose(param.detach().numpy(), [0.8, 0.8], rtol=1e-6)
    closure_calls = []
    adam = adcuda.optim.Adam([param])
    adam.register_step_pre_hook(lambda opt, args, kwargs: ((), {"closure": lambda: closure_calls.append(1)}))
    adam.step()
    assert closure_calls == [1]  # the pre-hook's (args, kwargs) reach step
    bad = adcuda.optim.SGD([param], lr=0.1)
    bad.register_step_pre_hook(lambda opt, args, kwargs: "wrong")
    with pytest.raises(TypeError, match="a step pre-hook must return None or"):
        bad.step()


def test_optimizer_arguments_are_checked():
    p = [adcuda.nn.Parameter(adcuda.ones(1))]
    with pytest.raises(adcuda.optim.OptimizerError, match="Adamax: Invalid beta parameter at index 1"):
        adcuda.optim.Adamax(p, betas=(0.9, 1.0))
    with pytest.raises(adcuda.optim.OptimizerError, match="NAdam: Invalid momentum_decay"):
        adcuda.optim.NAdam(p, momentum_decay=-1.0)
    with pytest.raises(adcuda.optim.OptimizerError, match=r"RAdam: Invalid learning rate: -1.0 \(lr must be >= 0\)"):
        adcuda.optim.RAdam(p, lr=-1.0)


def test_weighted_random_sampler():
    sampler = adcuda.utils.data.WeightedRandomSampler(
        [0.1, 0.0, 0.9], 20000, generator=adcuda.Generator().manual_seed(0)
    )
    counts = collections.Counter(sampler)
    assert len(sampler) == 20000 and counts[1] == 0 and abs(counts[2] / 20000 - 0.9) < 0.015
    assert sorted(adcuda.utils.data.WeightedRandomSampler([1, 2, 3, 4], 4, replacement=False)) == [0, 1, 2, 3]
    with pytest.raises(ValueError, match="WeightedRandomSampler: num_samples"):
        adcuda.utils.data.WeightedRandomSampler([1.0], 0)
    loader = adcuda.utils.data.DataLoader(
        adcuda.utils.data.TensorDataset(adcuda.arange(6)),
        batch_size=3,
        sampler=adcuda.utils.data.WeightedRandomSampler([0, 0, 1, 0, 0, 1], 6),
    )
    assert set(np.concatenate([batch[0].numpy() for batch in loader])) <= {2, 5}


def test_parameter_vector_round_trip_and_pad_sequence():
    torch = pytest.importorskip("torch")
    model = adcuda.nn.Linear(3, 2)
    vector = adcuda.nn.utils.parameters_to_vector(model.parameters())
    assert vector.shape == (8,)
    adcuda.nn.utils.vector_to_parameters(adcuda.arange(8, dtype=adcuda.float32), model.parameters())
    assert model.weight.tolist() == [[0, 1, 2], [3, 4, 5]] and model.bias.tolist() == [6, 7]
    with pytest.raises(ShapeError, match="vector_to_parameters: the parameters hold 8 values, vec has 3"):
        adcuda.nn.utils.vector_to_parameters(adcuda.ones(3), model.parameters())
    sequences = [rnd(2, 3), rnd(4, 3, seed=1), rnd(1, 3, seed=2)]
    for batch_first in (True, False):
        for side in ("left", "right"):
            ours = adcuda.nn.utils.rnn.pad_sequence([adcuda.tensor(s) for s in sequences], batch_first, -1.0, side)
            theirs = torch.nn.utils.rnn.pad_sequence([torch.tensor(s) for s in sequences], batch_first, -1.0, side)
            np.testing.assert_array_equal(ours.numpy(), theirs.numpy())
    with pytest.raises(ShapeError, match=r"pad_sequence: every sequence must be \(L, 3\)"):
        adcuda.nn.utils.rnn.pad_sequence([adcuda.ones(2, 3), adcuda.ones(2, 4)])


# ------------------------------------------------------------------------------------------------
# on CUDA (a GPU, or the emulator): the same results as on the CPU
@gpu
def test_draws_and_modules_on_cuda():
    adcuda.manual_seed(0)
    x = adcuda.normal(adcuda.zeros(4000, device="cuda"), 2.0)
    assert x.device.type == "cuda" and abs(float(x.std()) - 2.0) < 0.15
    assert abs(float(adcuda.empty(4000, device="cuda").bernoulli_(0.25).mean()) - 0.25) < 0.03
    assert float(adcuda.empty(100, device="cuda").exponential_().min()) >= 0
    assert set(adcuda.empty(100, device="cuda").random_(0, 3).cpu().tolist()) <= {0.0, 1.0, 2.0}
    assert float(adcuda.empty(100, device="cuda").geometric_(0.5).min()) >= 1
    model = adcuda.nn.Sequential(adcuda.nn.PReLU(3), adcuda.nn.ReflectionPad2d(1), adcuda.nn.PixelShuffle(1)).to("cuda")
    data = rnd(2, 3, 4, 4)
    on_cpu = model.to("cpu")(adcuda.tensor(data, dtype=adcuda.float32)).detach().numpy()
    on_cuda = model.to("cuda")(adcuda.tensor(data, dtype=adcuda.float32, device="cuda")).detach().cpu().numpy()
    np.testing.assert_allclose(on_cuda, on_cpu, rtol=1e-5, atol=1e-6)
    with pytest.raises(DeviceError):
        adcuda.addcmul(adcuda.ones(2, device="cuda"), adcuda.ones(2), adcuda.ones(2))
