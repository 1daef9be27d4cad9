"""Every dtype against PyTorch for the ops that declare which dtypes they take (``@op(dtypes=...)``,
adcuda/ops/dtype_support.py) and the ops around them: each entry's first float sample made again
with its float tensors in bool, int32, int64, float16, float32 and float64. adcuda must accept what
PyTorch accepts (with its result dtype and shape) and refuse what PyTorch refuses, with an adcuda
error of PyTorch's family naming the op; values are the database's part (tests/test_conformance.py).

The sweep is the differential probe that found the dtype rules; it stays as a test so that a new op's
declaration (or a missing one) is checked against PyTorch for every dtype.
"""

import numpy as np
import pytest
from conformance import runner, spec
from conformance.database import ENTRIES
from conformance.spec import S, T

from adcuda.ops import registry

torch = pytest.importorskip("torch")
TORCH = runner.torch_lib()
ADCUDA = runner.adcuda_lib()

DTYPES = ("bool", "int32", "int64", "float16", "float32", "float64")

# ops without a declared rule whose dtype handling the sweep guards too: forms PyTorch takes for any
# dtype (a reduction to nothing, a lookup, a composite of float ops), or refuses by a rule of its own
ALSO = {
    "sinh", "cosh", "all", "any", "logsumexp", "threshold", "clamp_min", "clamp_max", "embedding",
    "dropout", "masked_fill", "isin", "where", "heaviside", "sub", "neg", "positive", "frac", "bincount",
    "fold", "mvlgamma", "lerp", "addcdiv", "einsum", "clone", "zeros_like", "ones_like", "full_like",
    "pad", "l1_loss",
}  # fmt: skip

# (entry, dtype): differences that are another defect class than the dtype rule this test checks,
# each listed in known_failures.py's groups or docs/differences.md
KNOWN = {
    ("cdist", "float16"): "PyTorch's CPU build has no float16 cdist (its CUDA one has): docs/differences.md",
    ("pdist", "float16"): "PyTorch's CPU build has no float16 pdist (its CUDA one has): docs/differences.md",
}


def _declared(entry):
    try:
        return registry.get(entry.name).dtypes is not None
    except KeyError:
        return False


def _recast(obj, dtype):
    """``obj`` with every float tensor's values made ``dtype`` ones (bools by sign, integers rounded
    after scaling, so that they are not all 0), its layout (views) kept."""
    if isinstance(obj, T):
        if obj.dtype not in spec.FLOATS:
            return obj
        values = np.nan_to_num(obj.base, posinf=1e3, neginf=-1e3)  # nan and inf have no integer
        if dtype == "bool":
            values = values > 0
        elif dtype in spec.INTS:
            values = np.round(values * 3)
        out = T(*obj.shape, dtype=dtype, values=values, view=None, grad=False)
        out.base, out.view, out.base_shape = values.astype(spec._NUMPY[dtype]), obj.view, obj.base_shape
        return out
    if isinstance(obj, list):
        return [_recast(o, dtype) for o in obj]
    if isinstance(obj, tuple):
        return tuple(_recast(o, dtype) for o in obj)
    if isinstance(obj, dict):
        return {k: _recast(v, dtype) for k, v in obj.items()}
    return obj


def _params():
    out = []
    for entry in ENTRIES:
        if entry.call is not None or not (_declared(entry) or entry.key in ALSO):
            continue  # (a call entry is another form of the op: sparse operands, syntax)
        first = next(
            (
                s
                for s in entry.samples
                if "bfloat16" not in s.dtypes() and any(t.dtype in spec.FLOATS for t in s.tensors())
            ),
            None,
        )
        if first is None:
            continue
        for dtype in DTYPES:
            marks = ()
            if (entry.key, dtype) in KNOWN:
                marks = pytest.mark.xfail(reason=KNOWN[entry.key, dtype], strict=True)
            out.append(pytest.param(entry, first, dtype, id=f"{entry.key}:{first.name}@{dtype}", marks=marks))
    return out


# the differences this test is about: whether a call is accepted, and the result's dtype and shape
_ITS_CLASS = ("accepts what", "rejects what", "where PyTorch raises", ": dtype ", ": shape (", "raw error")


@pytest.mark.parametrize(("entry", "sample", "dtype"), _params())
def test_dtype_support_matches_pytorch(entry, sample, dtype):
    swept = S(
        *_recast(sample.args, dtype),
        name=f"{sample.name}@{dtype}",
        grad=False,
        tol=sample.tol,
        **_recast(sample.kwargs, dtype),
    )
    diffs = runner.value_diffs(entry, swept, TORCH, ADCUDA, TORCH)
    ours = [d for d in diffs if any(marker in d for marker in _ITS_CLASS)]
    assert not ours, "\n".join(ours)
