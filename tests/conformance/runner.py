"""Runs one sample on adcuda and on a reference (PyTorch, or adcuda's CPU backend for the CUDA run) and
lists every difference: values (tolerance per dtype), dtype, shape, strides of views, whether both
raise (and then the exception family, adcuda's error class and the op's name in the message), first-
and second-order gradients in float64.

Each check returns a list of differences (strings); an empty list is agreement. The tests turn a
non-empty list into a failure whose message is the list.
"""

import math

import numpy as np

import adcuda
import adcuda.nn.functional as adcuda_F
from adcuda.errors import AdcudaError
from adcuda.ops import registry

from .spec import INTS, resolve

# (rtol, atol) per output dtype. float16 on adcuda's CPU computes in float32 and rounds per op
# (docs/differences.md), so one float16 ulp either way is allowed.
TOLERANCES = {
    "float64": (1e-7, 1e-9),
    "float32": (1e-5, 1e-6),
    "float16": (2e-3, 1e-4),
    "bfloat16": (1.6e-2, 1e-3),
}


def family(exc):
    """The exception family a user's ``except`` sees. PyTorch raises RuntimeError where adcuda's
    ShapeError is a ValueError (docs/differences.md, "errors"), so those two are one family."""
    if isinstance(exc, IndexError):
        return "IndexError"
    if isinstance(exc, TypeError):
        return "TypeError"
    if isinstance(exc, (RuntimeError, ValueError, NotImplementedError)):
        return "RuntimeError/ValueError"
    return type(exc).__name__


class Library:
    """How one library is called: its module, nn.functional, Tensor class and device."""

    def __init__(self, module, functional, device=None):
        self.module = module
        self.F = functional
        self.device = device

    def __getattr__(self, name):  # spec.resolve reads dtypes and from_numpy off the library
        return getattr(self.module, name)


def adcuda_lib(device=None):
    return Library(adcuda, adcuda_F, device)


def torch_lib():
    import torch
    import torch.nn.functional as torch_F

    return Library(torch, torch_F)


def torch_lib_or_none():
    try:
        return torch_lib()
    except ImportError:
        return None


def forms(entry):
    """[(form kind, adcuda name)] for ``entry``: its declared forms in the registry, or ``call``."""
    if entry.call is not None:
        return [("call", entry.name)]
    try:
        op = registry.get(entry.name)
    except (KeyError, LookupError):
        op = None
    if op is None:  # a name outside the registry: the forms either library has (a missing one is a defect)
        ref = torch_lib_or_none()
        pairs = (("function", adcuda, ref and ref.module), ("method", adcuda.Tensor, ref and ref.module.Tensor))
        found = []
        for kind, a, t in (*pairs, ("functional", adcuda_F, ref and ref.F)):
            if hasattr(a, entry.name) or hasattr(t, entry.name):
                found.append((kind, entry.name))
        return [f for f in found if entry.forms is None or f[0] in entry.forms]
    out = []
    for kind in ("function", "method", "inplace", "operators", "functional", "property"):
        out.extend((kind, n) for n in op.forms[kind])
        if kind == "functional" and op.functional_inplace and op.forms["functional"]:
            out.append(("functional", op.name + "_"))
    if entry.forms is None:
        return out
    return [(k, n) for k, n in out if k in entry.forms or f"{k}:{n}" in entry.forms]


def _callable(lib, kind, name):
    """The callable of form ``kind`` ``name`` in ``lib`` (None where the library has no such name)."""
    if kind == "function":
        return getattr(lib.module, name, None)
    if kind in ("method", "inplace", "operators"):
        fn = getattr(lib.module.Tensor, name, None)
        return fn
    if kind == "functional":
        return getattr(lib.F, name, None)
    if kind == "property":
        prop = getattr(lib.module.Tensor, name, None)
        return None if prop is None else (lambda x: getattr(x, name))
    raise ValueError(kind)


def call(entry, lib, kind, name, args, kwargs):
    if kind == "call":
        return entry.call(lib, *args, **kwargs)
    fn = _callable(lib, kind, name)
    if fn is None:
        raise AttributeError(f"{lib.module.__name__} has no {kind} {name}")
    return fn(*args, **kwargs)


def torch_name(entry, name):
    return entry.torch_names.get(name, name)


def runnable(entry, sample, kind, name, torch):
    """Why form ``kind`` ``name`` cannot run ``sample`` (None when it can)."""
    if kind in ("method", "inplace", "operators", "property") and not (sample.args and _is_tensor_spec(sample.args[0])):
        return "the first argument is not a tensor"
    if torch is not None and kind != "call" and _callable(torch, kind, torch_name(entry, name)) is None:
        return f"PyTorch has no {kind} {name}"
    return None


def _is_tensor_spec(obj):
    from .spec import T

    return isinstance(obj, T)


def outcome(fn):
    try:
        return fn(), None
    except Exception as exc:  # noqa: BLE001 - an exception is an outcome to compare, whatever its class
        return None, exc


def run_form(entry, lib, kind, name, sample, device=None):
    """(result, exception, first argument) of one form on fresh tensors; in-place forms return
    the mutated first argument as the result (and whether the call returned it)."""
    args = resolve(sample.args, lib, device)
    kwargs = resolve(sample.kwargs, lib, device)
    result, exc = outcome(lambda: call(entry, lib, kind, name, args, kwargs))
    if exc is None and kind == "inplace":
        return (result is args[0], args[0]), None
    return result, exc


def dtype_name(dtype):
    return str(dtype).rpartition(".")[2]


def is_tensor(x):
    return hasattr(x, "shape") and hasattr(x, "dtype") and hasattr(x, "stride")


def to_numpy(t):
    t = t.detach().cpu()
    if getattr(t, "_is_zerotensor", lambda: False)():  # PyTorch's gradient of an unused input
        return np.zeros(tuple(t.shape), dtype=np.float64)
    if dtype_name(t.dtype) == "bfloat16":
        t = t.float()
    return np.asarray(t.numpy())


def compare(ref, got, tol=None, strides=False, path="result"):
    """Differences between the reference output ``ref`` and adcuda's ``got``."""
    if is_tensor(ref):
        if not is_tensor(got):
            return [f"{path}: expected a tensor, got {type(got).__name__}"]
        diffs = []
        if dtype_name(ref.dtype) != dtype_name(got.dtype):
            diffs.append(f"{path}: dtype {dtype_name(got.dtype)}, expected {dtype_name(ref.dtype)}")
        if tuple(ref.shape) != tuple(got.shape):
            return [*diffs, f"{path}: shape {tuple(got.shape)}, expected {tuple(ref.shape)}"]
        if strides and tuple(ref.stride()) != tuple(got.stride()):
            diffs.append(f"{path}: strides {tuple(got.stride())}, expected {tuple(ref.stride())}")
        diffs.extend(compare_arrays(to_numpy(ref), to_numpy(got), dtype_name(ref.dtype), tol, path))
        return diffs
    if isinstance(ref, (tuple, list)):
        if not isinstance(got, (tuple, list)):
            return [f"{path}: expected a sequence, got {type(got).__name__}"]
        if len(ref) != len(got):
            return [f"{path}: {len(got)} items, expected {len(ref)}"]
        diffs = []
        for i, (r, g) in enumerate(zip(ref, got)):
            diffs.extend(compare(r, g, tol, strides, f"{path}[{i}]"))
        return diffs
    if isinstance(ref, (bool, int, float)):
        if is_tensor(got) or not isinstance(got, (bool, int, float)):
            return [f"{path}: expected a Python {type(ref).__name__}, got {type(got).__name__}"]
        if isinstance(ref, bool) != isinstance(got, bool) or not _same_number(ref, got, tol):
            return [f"{path}: {got!r}, expected {ref!r}"]
        return []
    if ref is None:
        return [] if got is None else [f"{path}: expected None, got {type(got).__name__}"]
    if type(ref).__name__ in ("Size",):
        return [] if tuple(ref) == tuple(got) else [f"{path}: {tuple(got)}, expected {tuple(ref)}"]
    if type(ref).__name__ == "dtype":
        return [] if dtype_name(ref) == dtype_name(got) else [f"{path}: {got}, expected {ref}"]
    return [] if ref == got else [f"{path}: {got!r}, expected {ref!r}"]


def _same_number(a, b, tol):
    if isinstance(a, float) or isinstance(b, float):
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        rtol, atol = tol or TOLERANCES["float64"]
        return math.isclose(a, b, rel_tol=rtol, abs_tol=atol) or a == b
    return a == b


def compare_arrays(ref, got, dtype, tol, path):
    if ref.shape != got.shape:
        return [f"{path}: shape {got.shape}, expected {ref.shape}"]
    if ref.size == 0:
        return []
    if dtype == "bool" or dtype in INTS:
        bad = ref != got
    else:
        rtol, atol = tol or TOLERANCES.get(dtype, TOLERANCES["float32"])
        ref64, got64 = ref.astype(np.float64), got.astype(np.float64)
        with np.errstate(invalid="ignore", over="ignore"):
            close = np.isclose(got64, ref64, rtol=rtol, atol=atol, equal_nan=True) | (got64 == ref64)
        bad = ~close
    if not bad.any():
        return []
    idx = tuple(int(i) for i in np.argwhere(bad)[0])
    return [f"{path}: {int(bad.sum())} of {bad.size} values differ; at {idx} got {got[idx]!r}, expected {ref[idx]!r}"]


def is_view_of_input(torch_out):
    return is_tensor(torch_out) and torch_out._is_view()


def view_diffs(ref, got, path="result"):
    """A view in PyTorch must be a view in adcuda too, with PyTorch's strides."""
    if isinstance(ref, (tuple, list)) and isinstance(got, (tuple, list)):
        out = []
        for i, (r, g) in enumerate(zip(ref, got)):
            out.extend(view_diffs(r, g, f"{path}[{i}]"))
        return out
    if not (is_tensor(ref) and is_tensor(got) and ref._is_view()):
        return []
    diffs = []
    if got._base is None:
        diffs.append(f"{path}: a copy, PyTorch returns a view")
    elif ref.numel() > 0 and tuple(ref.stride()) != tuple(got.stride()):
        diffs.append(f"{path}: view strides {tuple(got.stride())}, expected {tuple(ref.stride())}")
    return diffs


def error_diffs(op_names, ref_exc, got_exc, expected_family=None):
    """Differences between PyTorch's exception ``ref_exc`` (or the expected family) and adcuda's."""
    want = expected_family or family(ref_exc)
    if got_exc is None:
        return [f"PyTorch raises {want} ({_short(ref_exc)}); adcuda returns a result"]
    diffs = []
    if family(got_exc) != want:
        diffs.append(f"raises {type(got_exc).__name__} ({_short(got_exc)}), PyTorch's family is {want}")
    if not isinstance(got_exc, AdcudaError):
        diffs.append(f"raises a raw {type(got_exc).__name__} ({_short(got_exc)}), not an adcuda error")
    elif not any(n.strip("_") in str(got_exc) for n in op_names):
        diffs.append(f"message does not name the op ({'/'.join(op_names)}): {_short(got_exc)}")
    return diffs


def _short(exc):
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {text[:100]}"


def weights_like(t):
    """Fixed, non-symmetric weights for reducing an output to a scalar (so that no gradient cancels)."""
    n = max(t.numel(), 1)
    return np.linspace(0.5, 1.5, n).reshape(tuple(t.shape)) if t.numel() else np.zeros(tuple(t.shape))


def differentiable_outputs(out):
    if is_tensor(out):
        return [out] if dtype_name(out.dtype).startswith("float") else []
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in differentiable_outputs(o)]
    return []


def gradients(lib, fn, leaves, second_order):
    """First- (and second-) order gradients of a weighted sum of ``fn()``'s float outputs w.r.t.
    ``leaves``, materialised as zeros where unused; ``(first, second, note)``."""
    out = differentiable_outputs(fn())
    out = [o for o in out if o.requires_grad]
    if not out:
        return None, None, "no output requires grad"
    loss = sum((o * lib.from_numpy(weights_like(o)).to(o.dtype)).sum() for o in out)
    first = lib.autograd.grad(loss, leaves, create_graph=second_order, allow_unused=True)
    first = [g if g is not None else lib.zeros_like(x) for g, x in zip(first, leaves)]
    if not second_order:
        return first, None, None
    live = [g for g in first if g.requires_grad]
    if not live:
        return first, [lib.zeros_like(x) for x in leaves], None
    loss2 = sum((g * lib.from_numpy(weights_like(g)).to(g.dtype)).sum() for g in live)
    second = lib.autograd.grad(loss2, leaves, allow_unused=True)
    second = [g if g is not None else lib.zeros_like(x) for g, x in zip(second, leaves)]
    return first, second, None


def compare_meta(ref, got, path="result"):
    """Dtypes and shapes only (random ops, whose values cannot agree)."""
    if is_tensor(ref):
        if not is_tensor(got):
            return [f"{path}: expected a tensor, got {type(got).__name__}"]
        diffs = []
        if dtype_name(ref.dtype) != dtype_name(got.dtype):
            diffs.append(f"{path}: dtype {dtype_name(got.dtype)}, expected {dtype_name(ref.dtype)}")
        if tuple(ref.shape) != tuple(got.shape):
            diffs.append(f"{path}: shape {tuple(got.shape)}, expected {tuple(ref.shape)}")
        return diffs
    if isinstance(ref, (tuple, list)) and isinstance(got, (tuple, list)) and len(ref) == len(got):
        return [d for i, (r, g) in enumerate(zip(ref, got)) for d in compare_meta(r, g, f"{path}[{i}]")]
    return compare(ref, got, path=path)
