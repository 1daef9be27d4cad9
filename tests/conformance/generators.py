"""Sample generators by op category: one function gives every op of a kind its ordinary shapes,
broadcasting, views (transposed, sliced, offset, expanded), zero-size and 0-d tensors, every dtype,
extreme values (+-1e38, +-inf, nan, subnormals) and values at kinks and ties, so that an op of a known
kind needs one line in the database. Each returns a list of ``S``; error generators a list of ``E``.
"""

import numpy as np

from .spec import FLOATS, D, E, S, T

F32_EXTREMES = [1e38, -1e38, 3.4e38, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 1e-40, 0.0, -0.0, 1.0]
F64_EXTREMES = [1e308, -1e308, np.inf, -np.inf, np.nan, 5e-324, -5e-324, 1e-310, 0.0, -0.0, 1.0]
F16_EXTREMES = [65504.0, -65504.0, np.inf, -np.inf, np.nan, 6e-8, -6e-8, 1e-5, 0.0, -0.0, 1.0]
INT_EXTREMES = {"int32": [2**31 - 1, -(2**31), 0, 1, -1], "int64": [2**63 - 1, -(2**63), 0, 1, -1]}

# where an op's inputs live: (low, high) for random values
DOMAINS = {
    "real": (-2.0, 2.0),
    "positive": (0.1, 3.0),
    "unit": (0.05, 0.95),  # (0, 1): logit, binary_cross_entropy's input
    "small": (-1.0, 1.0),
    "above_one": (1.1, 3.0),  # acosh
}


def unary(domain="real", kinks=(), ints=True, extremes=True, grad=True, dtypes=FLOATS):
    """Samples of a one-tensor elementwise op (activations included): every dtype, views, 0-d,
    zero-size, extreme values and its kinks (float64, with gradients)."""
    lo, hi = DOMAINS[domain]
    out = [
        S(T(3, 4, low=lo, high=hi), name="f32"),
        S(T(2, 3, dtype="float64", low=lo, high=hi), name="f64", grad=grad),
        S(T(3, 4, low=lo, high=hi, view="t"), name="f32-transposed"),
        S(T(2, 3, low=lo, high=hi, view="slice"), name="f32-sliced"),
        S(T(3, 4, low=lo, high=hi, view="expand"), name="f32-expanded"),
        S(T(dtype="float64", low=lo, high=hi), name="0d-f64", grad=grad),
        S(T(0, 3), name="zero-size"),
    ]
    out += [S(T(5, dtype=d, low=lo, high=hi), name=d) for d in ("float16", "bfloat16") if d in dtypes]
    if ints:
        out += [
            S(T(5, dtype="int64", low=1, high=4), name="int64"),
            S(T(4, dtype="int32", low=1, high=4), name="int32"),
        ]
        out.append(S(T(values=np.array([True, False, True])), name="bool"))
    if extremes:
        out += [
            S(T(values=np.array(F32_EXTREMES, np.float32)), name="extreme-f32"),
            S(T(values=np.array(F64_EXTREMES)), name="extreme-f64", grad=False),
            S(T(values=np.array(F16_EXTREMES, np.float16)), name="extreme-f16"),
        ]
    if kinks:
        out.append(S(T(values=np.array(kinks, np.float64)), name="kinks-f64", grad=grad))
    return out


def unary_errors():
    return [E("abc", name="string-input", family="TypeError"), E([1.0, 2.0], name="list-input", family="TypeError")]


def binary(
    domain="real",
    other_domain=None,
    ints=True,
    scalars=True,
    grad=True,
    ties=False,
    extremes=True,
    alpha=False,
):
    """Samples of a two-tensor broadcasting elementwise op: same shapes, broadcasting both ways,
    Python and 0-d tensor operands, promotion across dtypes, views, zero-size, extremes and ties."""
    lo, hi = DOMAINS[domain]
    olo, ohi = DOMAINS[other_domain or domain]

    def a(*shape, **kw):
        return T(*shape, low=lo, high=hi, **kw)

    def b(*shape, **kw):
        return T(*shape, low=olo, high=ohi, **kw)

    out = [
        S(a(3, 4), b(3, 4), name="f32"),
        S(a(2, 3, dtype="float64"), b(2, 3, dtype="float64"), name="f64", grad=grad),
        S(a(3, 1, dtype="float64"), b(1, 4, dtype="float64"), name="broadcast-f64", grad=grad),
        S(a(2, 3, 4), b(4), name="broadcast-rank"),
        S(a(4), b(2, 3, 4), name="broadcast-rank-first"),
        S(a(3, 4, view="t"), b(3, 4, view="slice"), name="views"),
        S(a(3, 4, view="expand"), b(3, 4, view="offset"), name="views2"),
        S(a(0, 3), b(3), name="zero-size"),
        S(a(0, 3), b(1, 3), name="zero-size-broadcast"),
        S(a(dtype="float64"), b(dtype="float64"), name="0d-both", grad=grad),
        S(a(3, dtype="float64"), b(dtype="float64"), name="0d-other", grad=grad),
        S(a(5, dtype="float16"), b(5, dtype="float16"), name="f16"),
        S(a(5, dtype="bfloat16"), b(5, dtype="bfloat16"), name="bf16"),
        S(a(4, dtype="float16"), b(4, dtype="float32"), name="promote-f16-f32"),
        # float16 arithmetic: gradients through it are no float64 check
        S(a(4, dtype="float16"), b(dtype="float64"), name="promote-f16-0d-f64", grad=False),
    ]
    if scalars:
        out += [
            S(a(3, 4), 2.5 if other_domain != "positive" else 1.5, name="python-float"),
            S(a(3, 4), 2, name="python-int"),
            S(a(3, dtype="float16"), 3.0, name="f16-python-float"),
            S(a(3, dtype="float64"), 0.5, name="f64-python-float", grad=grad),
        ]
        if ints:
            out += [
                S(T(4, dtype="int64", low=1, high=5), 2.5, name="int64-python-float"),
                S(T(4, dtype="int32", low=1, high=5), 3, name="int32-python-int"),
                S(T(4, dtype="int32", low=1, high=5), True, name="int32-python-bool"),
            ]
    if ints:
        out += [
            S(T(4, dtype="int64", low=1, high=5), T(4, dtype="int64", low=1, high=5), name="int64"),
            S(T(4, dtype="int32", low=1, high=5), T(4, dtype="int64", low=1, high=5), name="promote-int32-int64"),
            S(T(4, dtype="int32", low=1, high=5), b(4), name="promote-int32-f32"),
            S(T(4, dtype="int64", low=1, high=5), b(dtype="float64"), name="promote-int64-0d-f64"),
            S(T(values=np.array([True, False, True])), T(values=np.array([True, True, False])), name="bool-bool"),
            S(T(values=np.array([True, False, True])), T(3, dtype="int32", low=1, high=5), name="promote-bool-int32"),
            S(T(values=np.array([True, False, True])), b(3), name="promote-bool-f32"),
        ]
    if extremes:
        x = np.array(F32_EXTREMES, np.float32)
        out += [
            S(T(values=x), T(values=x[::-1].copy()), name="extreme-f32"),
            S(
                T(values=np.array(F16_EXTREMES, np.float16)),
                T(values=np.array(F16_EXTREMES[::-1], np.float16)),
                name="extreme-f16",
            ),
        ]
    if ties:
        v = np.array([1.0, -2.0, 0.0, 3.0])
        out.append(S(T(values=v.astype(np.float32)), T(values=v.astype(np.float32)), name="ties-f32"))
        out.append(S(T(values=v.astype(np.float64)), T(values=v.astype(np.float64)), name="ties-f64"))
    if alpha:
        out += [
            S(a(3, 4), b(3, 4), alpha=2, name="alpha-int"),
            S(a(2, 3, dtype="float64"), b(2, 3, dtype="float64"), alpha=0.5, name="alpha-float-f64", grad=grad),
            S(T(3, dtype="int64"), T(3, dtype="int64"), alpha=2, name="int64-alpha-int"),
            S(T(3, dtype="int64"), T(3, dtype="int64"), alpha=0.5, name="int64-alpha-float"),
            S(T(values=np.array([True, False])), T(values=np.array([True, True])), alpha=True, name="bool-alpha-bool"),
        ]
    return out


def binary_errors():
    return [
        E(T(2, 3), T(4), name="shape-mismatch", family="RuntimeError/ValueError"),
        E(T(2, 3), T(3, 2, 3, 1, 5), name="shape-mismatch-rank", family="RuntimeError/ValueError"),
    ]


def comparison():
    """A comparison: binary samples with no gradient, plus nan and inf operands."""
    samples = binary(grad=False, ties=True)
    samples.append(
        S(
            T(values=np.array([np.nan, np.inf, -np.inf, 0.0, -0.0])),
            T(values=np.array([np.nan, np.inf, 1.0, -0.0, 0.0])),
            name="nan-inf",
        )
    )
    return samples


def logical():
    return [
        S(T(values=np.array([True, False, True, False])), T(values=np.array([True, True, False, False])), name="bool"),
        S(T(4, dtype="int64", low=-1, high=2), T(4, dtype="int64", low=-1, high=2), name="int64"),
        S(T(3, 4), T(4), name="f32-broadcast"),
        S(T(values=np.array([0.0, np.nan, -0.0, 1e-45])), T(values=np.array([1.0, 1.0, 1.0, 1.0])), name="f32-edge"),
        S(T(0, 2, dtype="bool"), T(2, dtype="bool"), name="zero-size"),
        S(T(dtype="bool"), T(3, dtype="bool"), name="0d"),
        S(T(3, 4, dtype="bool", view="t"), T(3, 4, dtype="bool"), name="views"),
    ]


def bitwise():
    return [
        S(T(values=np.array([True, False, True, False])), T(values=np.array([True, True, False, False])), name="bool"),
        S(T(5, dtype="int64", low=-20, high=20), T(5, dtype="int64", low=-20, high=20), name="int64"),
        S(T(5, dtype="int32", low=-20, high=20), T(5, dtype="int64", low=-20, high=20), name="int32-int64"),
        S(T(5, dtype="int32", low=-20, high=20), 7, name="int32-python-int"),
        S(T(3, 4, dtype="int64", view="t"), T(4, dtype="int64"), name="views-broadcast"),
        S(T(0, 3, dtype="int64"), T(3, dtype="int64"), name="zero-size"),
    ]


def bitwise_errors():
    return [E(T(3), T(3), name="float-operands", family="RuntimeError/ValueError")]


def reduction(
    dims=True,
    tuple_dims=True,
    keepdim=True,
    dtype_kw=False,
    dim_required=False,
    grad=True,
    ints=True,
    zero_size_full=True,
    ties=False,
    positive=False,
):
    """Samples of a reduction: whole-tensor, one dim (negative too), a tuple of dims, keepdim,
    0-d, zero-size (reduced over and kept), ints and bool, float16 and extreme values, ties."""
    lo, hi = (0.5, 2.0) if positive else (-2.0, 2.0)

    def t(*shape, **kw):
        return T(*shape, low=lo, high=hi, **kw)

    out = []
    if not dim_required:
        out += [
            S(t(3, 4), name="all"),
            S(t(2, 3, dtype="float64"), name="all-f64", grad=grad),
            S(t(dtype="float64"), name="0d", grad=grad),
            S(t(5, dtype="float16"), name="f16"),
            S(t(5, dtype="bfloat16"), name="bf16"),
            S(t(3, 4, view="t"), name="all-transposed"),
        ]
        if zero_size_full:
            out.append(S(t(0, 3), name="zero-size-all"))
        if ints:
            out += [
                S(T(6, dtype="int64"), name="int64"),
                S(T(6, dtype="int32"), name="int32"),
                S(T(5, dtype="bool"), name="bool"),
            ]
        out.append(S(T(values=np.array([1.0, np.nan, 3.0], np.float32)), name="nan"))
        out.append(S(T(values=np.array([np.inf, 1.0, -np.inf, 1e38, 1e38], np.float32)), name="extreme-f32"))
        out.append(S(T(values=np.array([300.0, 300.0, 300.0, 300.0], np.float16)), name="f16-wide-accumulation"))
    if dims or dim_required:
        out += [
            S(t(3, 4), 1, name="dim1"),
            S(t(3, 4), -2, name="dim-neg"),
            S(t(2, 3, 4, dtype="float64"), 1, name="dim1-f64", grad=grad),
            S(t(3, 4, view="slice"), 0, name="dim0-sliced"),
            S(t(4, 3, view="expand"), 0, name="dim0-expanded"),
            S(t(dtype="float64"), 0, name="0d-dim0", grad=grad),
            S(t(0, 3), 1, name="zero-size-dim1"),
            S(T(3, 4, dtype="int64"), 1, name="int64-dim1") if ints else None,
            S(t(3, 4, dtype="float16"), 1, name="f16-dim1"),
        ]
        if zero_size_full:
            out.append(S(t(0, 3), 0, name="zero-size-dim0"))
        if keepdim:
            out.append(S(t(3, 4, dtype="float64"), 1, True, name="keepdim-f64", grad=grad))
            out.append(S(t(3, 4), 0, keepdim=True, name="keepdim-kw"))
        if tuple_dims:
            out.append(S(t(2, 3, 4, dtype="float64"), (0, 2), name="dims-tuple-f64", grad=grad))
            out.append(S(t(2, 3, 4), (-1, 0), name="dims-tuple-neg"))
            out.append(S(t(2, 3), (), name="dims-empty-tuple"))
    if dtype_kw:
        out += [
            S(t(3, 4), dtype=D("float64"), name="dtype-f64"),
            S(T(4, dtype="int32"), dtype=D("int64"), name="dtype-int64-from-int32"),
            S(t(3, dtype="float64"), dtype=D("int32"), name="dtype-int32-from-f64"),
            S(t(3, 4, dtype="float16"), dtype=D("float32"), name="dtype-f32-from-f16"),
        ]
    if ties:
        v = np.array([[1.0, 3.0, 3.0, -1.0], [2.0, 2.0, 2.0, 2.0]])
        out.append(S(T(values=v), 1, name="ties-dim1-f64", grad=grad))
        if not dim_required:
            out.append(S(T(values=v), name="ties-all-f64", grad=grad))
    return [s for s in out if s is not None]


def reduction_errors(dim_required=False):
    return [
        E(T(3, 4), 2, name="dim-out-of-range", family="IndexError"),
        E(T(3, 4), -3, name="dim-out-of-range-neg", family="IndexError"),
        E(T(), 1, name="0d-dim1", family="IndexError"),
    ]


def cumulative():
    return [
        S(T(3, 4), 1, name="dim1"),
        S(T(3, 4, dtype="float64"), 0, name="dim0-f64"),
        S(T(3, 4, dtype="float64", view="t"), -1, name="dim-neg-transposed-f64"),
        S(T(dtype="float64"), 0, name="0d", grad=True),
        S(T(0, 3), 0, name="zero-size"),
        S(T(5, dtype="int32"), 0, name="int32"),
        S(T(5, dtype="bool"), 0, name="bool"),
        S(T(5, dtype="float16"), 0, name="f16"),
        S(T(values=np.array([1.0, 0.0, 3.0, 0.0, 2.0])), 0, name="zeros-f64"),
        S(T(values=np.array([np.inf, 1.0, np.nan, 2.0], np.float32)), 0, name="extreme-f32"),
        S(T(3, 4), 1, dtype=D("float64"), name="dtype-f64"),
    ]


def loss(target="same", domain="real", reductions=("mean", "sum", "none"), grad=True, target_domain=None):
    """Samples of a loss of (input, target): each reduction, float64 gradients, zero-size batches,
    broadcasting-free shapes, extreme inputs."""
    lo, hi = DOMAINS[domain]
    tlo, thi = DOMAINS[target_domain or domain]
    out = []
    for r in reductions:
        out.append(S(T(4, 3, low=lo, high=hi), T(4, 3, low=tlo, high=thi), reduction=r, name=f"f32-{r}"))
        out.append(
            S(
                T(3, 2, dtype="float64", low=lo, high=hi),
                T(3, 2, dtype="float64", low=tlo, high=thi, grad=False),
                reduction=r,
                name=f"f64-{r}",
                grad=grad,
            )
        )
    out += [
        S(T(5, low=lo, high=hi), T(5, low=tlo, high=thi), name="1d-default"),
        S(T(dtype="float64", low=lo, high=hi), T(dtype="float64", low=tlo, high=thi), name="0d", grad=grad),
        S(T(0, 3, low=lo, high=hi), T(0, 3, low=tlo, high=thi), reduction="sum", name="zero-size-sum"),
        S(T(0, 3, low=lo, high=hi), T(0, 3, low=tlo, high=thi), reduction="mean", name="zero-size-mean"),
        S(T(4, 3, low=lo, high=hi, view="t"), T(4, 3, low=tlo, high=thi), name="transposed"),
        S(T(4, dtype="float16", low=lo, high=hi), T(4, dtype="float16", low=tlo, high=thi), name="f16"),
    ]
    return out


def loss_errors():
    return [
        E(T(4, 3), T(4, 3), reduction="bogus", name="bad-reduction", family="RuntimeError/ValueError"),
    ]


def with_dtypes(make, dtypes):
    """``make(dtype)`` for each dtype name: one sample a dtype."""
    return [make(d) for d in dtypes]


def _map_tensors(obj, fn):
    if isinstance(obj, T):
        return fn(obj)
    if isinstance(obj, list):
        return [_map_tensors(o, fn) for o in obj]
    if isinstance(obj, tuple):
        return tuple(_map_tensors(o, fn) for o in obj)
    if isinstance(obj, dict):
        return {k: _map_tensors(v, fn) for k, v in obj.items()}
    return obj


def _derive(sample, suffix, fn, grad):
    args, kwargs = _map_tensors(sample.args, fn), _map_tensors(sample.kwargs, fn)
    return S(*args, name=f"{sample.name}-{suffix}", grad=grad, tol=sample.tol, **kwargs)


def _can_view(t):
    """Random float values, which a view may lay out anew (chosen ones, like ties, keep theirs)."""
    return t.dtype in ("float32", "float64") and t.view is None and t.shape and t.random


def variants(samples):
    """More samples from hand-written ones: each float64 sample again in float32 (PyTorch's default
    dtype, where adcuda's CPU fast paths run), and each sample with its float tensors laid out as
    non-contiguous views (transposed, or every other element of a 1-d tensor)."""
    out = []
    for s in samples:
        tensors = s.tensors()
        if any(t.dtype == "float64" for t in tensors):
            out.append(_derive(s, "f32", lambda t: t.variant(dtype="float32") if t.dtype == "float64" else t, False))
        if any(_can_view(t) for t in tensors):

            def noncontig(t):
                if not _can_view(t):
                    return t
                return t.variant(view="t" if len(t.shape) >= 2 else "slice")

            out.append(_derive(s, "noncontig", noncontig, s.grad))
    return out
