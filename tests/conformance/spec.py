"""What a sample is: tensor arguments, samples, error samples and entries, written once for both
libraries (adcuda and PyTorch) and made into either library's objects by ``resolve``.

A sample holds NumPy values, never tensors, so the database costs little to build and the same values
become an adcuda tensor and a torch tensor (and an adcuda CUDA tensor) on demand.
"""

import zlib

import numpy as np

FLOATS = ("float16", "bfloat16", "float32", "float64")
INTS = ("int32", "int64")
ALL_DTYPES = ("bool", *INTS, *FLOATS)

_NUMPY = {
    "bool": np.bool_,
    "int32": np.int32,
    "int64": np.int64,
    "float16": np.float16,
    "bfloat16": np.float32,  # NumPy has no bfloat16: made from float32 by the library's own .to()
    "float32": np.float32,
    "float64": np.float64,
}

# Views made of a larger (or smaller) base tensor: the base shape for a wanted shape, and the view.
_VIEWS = {
    "t": (lambda s: s[:-2] + (s[-1], s[-2]), lambda x: x.transpose(-2, -1)),
    "slice": (lambda s: s[:-1] + (2 * s[-1],), lambda x: x[..., ::2]),
    "offset": (lambda s: (s[0] + 1, *s[1:]), lambda x: x[1:]),
    "expand": (lambda s: (1, *s[1:]), None),  # the view needs the wanted shape: see T.view_of
}


class D:
    """A dtype argument, by name (``D("float64")`` becomes ``adcuda.float64`` or ``torch.float64``)."""

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return self.name


class T:
    """A tensor argument: values (a NumPy array of the base shape), a dtype name, an optional view
    (``t`` transposed, ``slice`` every other element of the last dim, ``offset`` all but the first row,
    ``expand`` a size-1 first dim expanded) and whether a gradient is wanted for it (float64 only)."""

    def __init__(self, *shape, dtype=None, values=None, low=None, high=None, view=None, grad=True):
        if len(shape) == 1 and isinstance(shape[0], tuple):
            shape = shape[0]
        if dtype is None:
            dtype = "float32" if values is None else _dtype_of(values)
        self.random = values is None  # chosen values (ties, sorted boundaries) keep their layout
        self.dtype = dtype
        self.view = view
        self.grad = grad and dtype in FLOATS
        if values is not None:
            values = np.asarray(values)
            shape = values.shape if view is None else shape or values.shape
        self.shape = tuple(shape)
        self.base_shape = _VIEWS[view][0](self.shape) if view else self.shape
        self.low, self.high = low, high
        self.base = None  # random values are drawn by ``realize``, from the entry's own seed
        if values is not None:
            values = np.resize(values, self.base_shape) if view else values
            self.base = values.astype(_NUMPY[dtype])

    def realize(self, rng):
        """Draws the random values (once) from ``rng``."""
        if self.base is None:
            self.base = _random(rng, self.base_shape, self.dtype, self.low, self.high).astype(_NUMPY[self.dtype])

    def variant(self, dtype=None, view=None):
        """The same values as another dtype, or laid out as a view (only of a tensor that is no view)."""
        out = T(*self.shape, dtype=dtype or self.dtype, values=self.base, view=view, grad=self.grad)
        out.random = self.random
        return out

    def make(self, lib, device=None, requires_grad=False):
        """(leaf, tensor): the leaf to differentiate for, and the argument (the leaf or a view of it)."""
        if self.base.size == 0:  # as users make them (PyTorch's from_numpy gives these strides (0, 0))
            leaf = lib.zeros(self.base.shape, dtype=getattr(lib, self.dtype))
        else:
            leaf = lib.from_numpy(self.base.copy())
        if device is not None:
            leaf = leaf.to(device)
        if self.dtype == "bfloat16" and self.base.size:  # after the move: adcuda's CPU has no bfloat16
            leaf = leaf.to(lib.bfloat16)
        if requires_grad:
            leaf.requires_grad_(True)
        if self.view == "expand":
            return leaf, leaf.expand(*self.shape)
        return leaf, (_VIEWS[self.view][1](leaf) if self.view else leaf)

    def __repr__(self):
        return f"T{self.shape}:{self.dtype}" + (f":{self.view}" if self.view else "")


def _dtype_of(values):
    """A NumPy array keeps its dtype; a Python list of floats is float32 (adcuda's default), of ints
    int64, of bools bool."""
    arr = np.asarray(values)
    if arr.dtype == np.bool_:
        return "bool"
    if arr.dtype.kind in "iu":
        return "int64" if not isinstance(values, np.ndarray) else str(arr.dtype)
    if not isinstance(values, np.ndarray):
        return "float32"
    return str(arr.dtype)


def _random(rng, shape, dtype, low, high):
    if dtype == "bool":
        return np.asarray(rng.random(shape) < 0.5)
    if dtype in INTS:
        return np.asarray(rng.integers(-5 if low is None else low, 6 if high is None else high, shape))
    low = -2.0 if low is None else low
    high = 2.0 if high is None else high
    return np.asarray(rng.uniform(low, high, shape))


def realize(samples, key):
    """Draws every random tensor value of ``samples`` (named) of entry ``key``, each sample from its
    own seed: a sample's values do not change when other samples or entries are added."""
    for sample in samples:
        rng = np.random.default_rng(zlib.crc32(f"{key}/{sample.name}".encode()))
        for t in sample.tensors():
            t.realize(rng)


class S:
    """One sample: positional and keyword arguments (``T``, ``D``, numbers, nested lists and tuples),
    a name unique within its entry, whether float64 gradients are compared (``grad``), and a tolerance
    override ``tol=(rtol, atol)``."""

    def __init__(self, *args, name="", grad=True, tol=None, **kwargs):
        self.args = args
        self.kwargs = kwargs
        self.name = name
        self.grad = grad
        self.tol = tol

    def tensors(self):
        return [t for t in _walk((self.args, self.kwargs)) if isinstance(t, T)]

    def dtypes(self):
        return {t.dtype for t in self.tensors()} | {d.name for d in _walk((self.args, self.kwargs)) if isinstance(d, D)}

    def __repr__(self):
        return f"S({self.name})"


class E(S):
    """An error sample: arguments PyTorch rejects; ``family`` is the exception family PyTorch raises
    (checked against PyTorch itself when it is installed)."""

    def __init__(self, *args, family, name="", **kwargs):
        super().__init__(*args, name=name, grad=False, **kwargs)
        self.family = family


def _walk(obj):
    if isinstance(obj, (list, tuple)):
        for o in obj:
            yield from _walk(o)
    elif isinstance(obj, dict):
        for o in obj.values():
            yield from _walk(o)
    else:
        yield obj


def resolve(obj, lib, device=None, leaves=None, grad=False):
    """``obj`` with every ``T`` made a tensor of ``lib`` (on ``device``) and every ``D`` a dtype; with
    ``grad``, float64 tensors that want a gradient require it and their leaves are appended to
    ``leaves``."""
    if isinstance(obj, T):
        wants = grad and obj.grad and obj.dtype == "float64"
        leaf, tensor = obj.make(lib, device, requires_grad=wants)
        if wants:
            leaves.append(leaf)
        return tensor
    if isinstance(obj, D):
        return getattr(lib, obj.name)
    if isinstance(obj, list):
        return [resolve(o, lib, device, leaves, grad) for o in obj]
    if isinstance(obj, tuple):
        return tuple(resolve(o, lib, device, leaves, grad) for o in obj)
    if isinstance(obj, dict):
        return {k: resolve(v, lib, device, leaves, grad) for k, v in obj.items()}
    return obj


class Entry:
    """One public op in the database.

    ``forms`` may name a kind (``"method"``) or one form (``"method:divide"``).
    ``name`` is the registry's op name (or, for a public name outside the registry, that name),
    optionally followed by ``[what]`` when one op has several entries (``"div[rounding_mode]"``: the
    whole string is the entry's key, in test ids and known failures);
    ``samples`` and ``errors`` are lists of ``S`` and ``E``; ``forms`` lists the forms to run (default:
    every form the registry declares: ``function``, ``method``, ``inplace``, ``operators``,
    ``functional``, ``property``), and ``call`` replaces them with one callable ``call(lib, *args,
    **kwargs)`` run on both libraries (for ops whose public form is syntax, like ``x[i]``).
    ``torch_names`` maps an adcuda form name to PyTorch's where they differ. ``values=False``
    compares only dtypes and shapes (random ops); ``grad=False`` skips the gradient checks;
    ``strides=True`` compares every output's strides (else only those of views).
    """

    def __init__(
        self,
        name,
        samples,
        *,
        errors=(),
        forms=None,
        call=None,
        torch_names=None,
        values=True,
        grad=True,
        strides=False,
        tol=None,
        category="",
    ):
        self.key = name
        self.name = name.partition("[")[0]
        self.samples = named(samples)
        self.errors = named(errors)
        realize(self.samples, self.key)
        realize(self.errors, self.key + "/errors")
        self.forms = forms
        self.call = call
        self.torch_names = torch_names or {}
        self.values = values
        self.grad = grad
        self.strides = strides
        self.tol = tol
        self.category = category

    def __repr__(self):
        return f"Entry({self.key})"


def named(samples):
    """Samples with unique names: an unnamed sample is named by its dtypes and shapes."""
    seen = {}
    out = []
    for s in samples:
        base = s.name or _auto_name(s)
        n = seen.get(base, 0)
        seen[base] = n + 1
        s.name = base if n == 0 else f"{base}#{n}"
        out.append(s)
    return out


def _auto_name(sample):
    parts = []
    for t in sample.tensors():
        shape = "x".join(map(str, t.shape)) or "0d"
        parts.append(f"{t.dtype}[{shape}]" + (f"{t.view}" if t.view else ""))
    return "-".join(parts) or "scalars"
