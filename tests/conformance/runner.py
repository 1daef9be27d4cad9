"""Runs one sample on adcuda and on a reference (PyTorch, or adcuda's CPU backend for the CUDA run) and
lists every difference: values (tolerance per dtype), dtype, shape, strides of views, whether both
raise (and then the exception family, adcuda's error class and the op's name in the message), first-
and second-order gradients in float64.

Each check returns a list of differences (strings); an empty list is agreement. The tests turn a
non-empty list into a failure whose message is the list.
"""

import math
import re
import warnings

import numpy as np

import adcuda
import adcuda.nn.functional as adcuda_F
from adcuda.errors import AdcudaError
from adcuda.ops import registry

from .spec import INTS, _walk, resolve

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
    # another built-in class (OverflowError, ZeroDivisionError, KeyError): the first one adcuda's class derives from
    return next(c.__name__ for c in type(exc).__mro__ if c.__module__ == "builtins")


class Library:
    """How one library is called: its module, nn.functional, Tensor class and device."""

    def __init__(self, module, functional):
        self.module = module
        self.F = functional
        self.numpy_warnings = []  # of the last call (run_form)

    def __getattr__(self, name):  # spec.resolve reads dtypes and from_numpy off the library
        return getattr(self.module, name)


def adcuda_lib():
    return Library(adcuda, adcuda_F)


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


# PyTorch's messages for arguments a form does not take (its argument parser and Python's)
_ARGUMENT_FORM = re.compile(
    r"takes \d+ positional argument|unexpected keyword argument|missing \d+ required positional"
    r"|argument '\w+' \(position \d+\) must be|received an invalid combination of arguments"
)


def argument_form_error(exc):
    """Whether PyTorch rejected the way the arguments were passed, not their values."""
    return isinstance(exc, TypeError) and bool(_ARGUMENT_FORM.search(str(exc)))


def runnable(entry, sample, kind, name, torch):
    """Why form ``kind`` ``name`` cannot run ``sample`` (None when it can)."""
    if kind in ("method", "inplace", "operators", "property") and not (sample.args and _is_tensor_spec(sample.args[0])):
        return "the first argument is not a tensor"
    if kind == "operators" and sample.kwargs:
        return "an operator takes no keywords"
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
    """(result, exception, input tensors) of one form on fresh tensors; in-place forms return the
    mutated first argument as the result (and whether the call returned it). The NumPy warnings
    the call emitted ("overflow encountered in exp") are left in ``lib.numpy_warnings``."""
    args = resolve(sample.args, lib, device)
    kwargs = resolve(sample.kwargs, lib, device)
    inputs = [t for t in _walk((args, kwargs)) if is_tensor(t)]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result, exc = outcome(lambda: call(entry, lib, kind, name, args, kwargs))
    lib.numpy_warnings = [str(w.message) for w in caught if " encountered in " in str(w.message)]
    if exc is None and kind == "inplace":
        return (result is args[0], args[0]), None, inputs
    return result, exc, inputs


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


def _tensor_meta_diffs(ref, got, path):
    """Differences of kind, dtype and shape between the reference tensor ``ref`` and ``got``, and whether
    their values can be compared (a tensor of the same shape)."""
    if not is_tensor(got):
        return [f"{path}: expected a tensor, got {type(got).__name__}"], False
    diffs = []
    if dtype_name(ref.dtype) != dtype_name(got.dtype):
        diffs.append(f"{path}: dtype {dtype_name(got.dtype)}, expected {dtype_name(ref.dtype)}")
    if tuple(ref.shape) != tuple(got.shape):
        return [*diffs, f"{path}: shape {tuple(got.shape)}, expected {tuple(ref.shape)}"], False
    return diffs, True


def compare(ref, got, tol=None, strides=False, path="result"):
    """Differences between the reference output ``ref`` and adcuda's ``got``."""
    if is_tensor(ref):
        diffs, comparable = _tensor_meta_diffs(ref, got, path)
        if not comparable:
            return diffs
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


def _root(t):
    return t if t._base is None else t._base


def _aliases(out, inputs):
    """Whether ``out`` shares memory with one of ``inputs`` (a view of one, or one itself)."""
    return any(out is i or _root(out) is _root(i) for i in inputs)


def view_diffs(ref, got, ref_inputs, got_inputs, path="result"):
    """Where PyTorch returns a view of an input, adcuda returns a view of it too, with PyTorch's
    strides (those of size-1 dims, which address nothing, aside)."""
    if isinstance(ref, (tuple, list)) and isinstance(got, (tuple, list)):
        out = []
        for i, (r, g) in enumerate(zip(ref, got)):
            out.extend(view_diffs(r, g, ref_inputs, got_inputs, f"{path}[{i}]"))
        return out
    if not (is_tensor(ref) and is_tensor(got) and ref._base is not None and _aliases(ref, ref_inputs)):
        return []
    if not _aliases(got, got_inputs):
        return [f"{path}: a copy, PyTorch returns a view of the input"]
    shape = tuple(ref.shape)
    ref_strides = [s for s, n in zip(ref.stride(), shape) if n != 1]
    got_strides = [s for s, n in zip(got.stride(), shape) if n != 1]
    if ref.numel() > 0 and tuple(got.shape) == shape and ref_strides != got_strides:
        return [f"{path}: view strides {tuple(got.stride())}, expected {tuple(ref.stride())}"]
    return []


def error_diffs(op_names, ref_exc, got_exc, expected_family=None, reference="PyTorch"):
    """Differences between the reference's exception ``ref_exc`` (or the expected family) and
    adcuda's ``got_exc``. Against PyTorch, adcuda's must also be an adcuda error naming the op;
    against adcuda's CPU backend (the CUDA variant), the same family is enough."""
    want = expected_family or family(ref_exc)
    if got_exc is None:
        return [f"accepts what {reference} rejects ({_short(ref_exc)})"]
    diffs = []
    if family(got_exc) != want:
        diffs.append(f"{family(got_exc)} where {reference} raises {want}: {_short(got_exc)}")
    if reference != "PyTorch":
        return diffs
    if not isinstance(got_exc, AdcudaError):
        diffs.append(f"raw error, not an adcuda one: {_short(got_exc)}")
    elif not any(n.strip("_") in str(got_exc) for n in op_names):
        diffs.append(f"message does not name {'/'.join(sorted(op_names))}: {_short(got_exc)}")
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


def gradients(lib, fn, leaves, second_order, through=None):
    """First- (and second-) order gradients of a weighted sum of ``fn()``'s float outputs w.r.t.
    ``leaves``, materialised as zeros where unused; ``(first, second, note, through)``.

    The second order is that of a weighted sum of the first-order gradients that are differentiable
    (that require grad); ``through`` (one bool per leaf, the reference's answer) restricts it to
    those the reference could differentiate: where PyTorch has no second order through a gradient
    (a sparse product's gradient w.r.t. the values is no function of the graph), both libraries
    leave that one out, and the rest are still compared. The returned ``through`` says which went in."""
    out = differentiable_outputs(fn())
    out = [o for o in out if o.requires_grad]
    if not out:
        return None, None, "no output requires grad", None
    loss = sum((o * lib.from_numpy(weights_like(o)).to(o.dtype)).sum() for o in out)
    first = lib.autograd.grad(loss, leaves, create_graph=second_order, allow_unused=True)
    first = [g if g is not None else lib.zeros_like(x) for g, x in zip(first, leaves)]
    if not second_order:
        return first, None, None, None
    wanted = [True] * len(first) if through is None else through
    used = [bool(w and g.requires_grad) for g, w in zip(first, wanted)]
    live = [g for g, u in zip(first, used) if u]
    if not live:
        return first, [lib.zeros_like(x) for x in leaves], None, used
    loss2 = sum((g * lib.from_numpy(weights_like(g)).to(g.dtype)).sum() for g in live)
    second = lib.autograd.grad(loss2, leaves, allow_unused=True)
    second = [g if g is not None else lib.zeros_like(x) for g, x in zip(second, leaves)]
    return first, second, None, used


def compare_meta(ref, got, path="result"):
    """Dtypes and shapes only (random ops, whose values cannot agree)."""
    if is_tensor(ref):
        return _tensor_meta_diffs(ref, got, path)[0]
    if isinstance(ref, (tuple, list)) and isinstance(got, (tuple, list)) and len(ref) == len(got):
        return [d for i, (r, g) in enumerate(zip(ref, got)) for d in compare_meta(r, g, f"{path}[{i}]")]
    return compare(ref, got, path=path)


def op_names(entry, name):
    """The names an error message may give for the op: the entry's op or the form called (of a dotted
    name like ``distributions.Normal.log_prob``, its class or method too)."""
    return {entry.name, name, *entry.name.split(".")[1:]}


def value_diffs(entry, sample, ref_lib, got_lib, torch, ref_device=None, got_device=None):
    """Every difference between ``ref_lib`` (on ``ref_device``) and ``got_lib`` (on
    ``got_device``) over every form of ``entry`` that runs ``sample``; ``torch`` (or None) says
    which forms PyTorch has, and, when it is the reference, views are compared too."""
    diffs, leaks = [], []
    all_forms = forms(entry)
    ran = 0
    for kind, name in all_forms:
        if runnable(entry, sample, kind, name, torch):
            continue
        ran += 1
        ref_name = torch_name(entry, name) if ref_lib is torch else name
        ref, ref_exc, ref_inputs = run_form(entry, ref_lib, kind, ref_name, sample, ref_device)
        got, got_exc, got_inputs = run_form(entry, got_lib, kind, name, sample, got_device)
        where = f"{kind} {name}"
        if ref_lib is torch and argument_form_error(ref_exc):
            ran -= 1  # PyTorch's form does not take these arguments: the signature test's part
            continue
        if got_lib.numpy_warnings:  # PyTorch warns of no overflow: NumPy's warning is a leak
            leaks.append(f"{where}: NumPy warning escapes: {got_lib.numpy_warnings[0]}")
        reference = "PyTorch" if ref_lib is torch else "the CPU backend"
        if ref_exc is not None:
            names = op_names(entry, name)
            diffs += [f"{where}: {d}" for d in error_diffs(names, ref_exc, got_exc, reference=reference)]
            continue
        if got_exc is not None:
            diffs.append(f"{where}: rejects what {reference} accepts: {_short(got_exc)}")
            continue
        if kind == "inplace":
            (ref_self, ref), (got_self, got) = ref, got
            if ref_self != got_self:
                diffs.append(f"{where}: returns {'self' if got_self else 'a new tensor'}")
        if entry.values:
            diffs += [f"{where}: {d}" for d in compare(ref, got, sample.tol or entry.tol, entry.strides)]
        else:
            diffs += [f"{where}: {d}" for d in compare_meta(ref, got)]
        if ref_lib is torch:
            diffs += [f"{where}: {d}" for d in view_diffs(ref, got, ref_inputs, got_inputs)]
    if not ran:
        diffs.append(f"the database is wrong: no form of {entry.name} takes this sample (forms: {all_forms})")
    return diffs + leaks
