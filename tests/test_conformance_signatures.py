"""Signature parity with PyTorch: every public adcuda function, Tensor method, nn.functional function
and nn module constructor that PyTorch also has accepts PyTorch's parameter names as keywords, its
positional order, its keyword aliases (``keepdims``/``axis`` for ``keepdim``/``dim`` where PyTorch's
argument parser takes them) and its varargs dims (``x.flip(0, 2)``, where PyTorch's only positional
argument is a list of ints).

PyTorch's signatures come from its operator schemas (``torch._C._jit_get_schemas_for_operator``) for
built-ins, which ``inspect`` cannot read, and from ``inspect`` for Python functions and modules.
Deliberate differences are the table of docs/differences.md, section "Signatures", which this test
reads; defects are strict expected failures in tests/conformance/known_failures.py (check
``signature``).
"""

import inspect
import keyword
import os
import re

import pytest
from conformance.known_failures import expected_failure
from conformance.runner import torch_lib_or_none

import adcuda
import adcuda.nn.functional as F
from adcuda.ops import registry

torch = pytest.importorskip("torch")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EMPTY = inspect.Parameter.empty
POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
# PyTorch's argument parser takes NumPy's names too (python_arg_parser.cpp)
NUMPY_ALIASES = {"dim": "axis", "keepdim": "keepdims"}
INT_LISTS = ("int[]", "SymInt[]", "List[int]", "int[1]", "int[2]", "int[3]", "SymInt[1]")


def deliberate_differences():
    """{(qualified name or "*", parameter)} from docs/differences.md's "Signatures" table."""
    with open(os.path.join(ROOT, "docs", "differences.md")) as f:
        text = f.read()
    section = text.split("\n## Signatures", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `([^`]+)` \| `([^`]+)` \|", section, flags=re.M)
    assert rows, "docs/differences.md has no Signatures table"
    return set(rows)


DELIBERATE = deliberate_differences()


class Signature:
    """What a callable accepts: positional names in order, keyword names, varargs, **kwargs."""

    def __init__(self, positional, keywords, varargs, var_keywords):
        self.positional = list(positional)
        self.keywords = set(keywords)
        self.varargs = varargs
        self.var_keywords = var_keywords

    @classmethod
    def of(cls, fn, drop_first=False):
        params = list(inspect.signature(fn).parameters.values())
        if drop_first:
            params = params[1:]
        positional = [p.name for p in params if p.kind in POSITIONAL]
        keywords = {p.name for p in params if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD, p.POSITIONAL_ONLY)}
        varargs = any(p.kind == p.VAR_POSITIONAL for p in params)
        var_keywords = any(p.kind == p.VAR_KEYWORD for p in params)
        return cls(positional, keywords, varargs, var_keywords)


def torch_builtin_signature(name, method):
    """PyTorch's signature of a built-in from its operator schemas (all overloads but those of
    named dims and ``out=``), or None where it has none."""
    schemas = [s for s in torch._C._jit_get_schemas_for_operator(f"aten::{name}") if _python_overload(s)]
    on_self = [s for s in schemas if s.arguments and s.arguments[0].name == "self"]
    schemas = on_self or schemas
    if not schemas:
        return None
    keywords, varargs, orders = set(), False, []
    for s in schemas:
        args = list(s.arguments)
        if method:  # the tensor a method is called on, wherever the schema has it (polygamma(n, self))
            args = [a for a in args if a.name != "self"]
        # ``self`` is ``input`` in Python; a Python keyword (``from``) takes a trailing underscore
        names = ["input" if a.name == "self" else a.name + "_" * keyword.iskeyword(a.name) for a in args]
        keywords |= set(names)
        positional = [n for n, a in zip(names, args) if not a.kwarg_only]
        orders.append(positional)
        if len(positional) == 1 and str(args[0].type) in INT_LISTS:
            varargs = True
    for name_, alias in NUMPY_ALIASES.items():
        if name_ in keywords:
            keywords.add(alias)
    sig = Signature(max(orders, key=len), keywords, False, False)
    sig.orders = orders
    sig.varargs_dims = varargs
    return sig


def _python_overload(schema):
    """An overload Python reaches: on tensors (not TorchScript's int/float/list ones), without named
    dims, without ``out=`` tensors written to."""
    types = [str(a.type) for a in schema.arguments]
    if not any(t.startswith("Tensor") or t == "List[Tensor]" for t in types) or any("Dimname" in t for t in types):
        return False
    if any(a.name == "self" and t.startswith("List[") for a, t in zip(schema.arguments, types)):
        return False  # TorchScript's methods of lists (``sort.Tensor(Tensor[] self, bool reverse)``)
    return not any(a.kwarg_only and a.alias_info is not None and a.alias_info.is_write for a in schema.arguments)


def torch_signature(fn, name, method):
    try:
        sig = Signature.of(fn, drop_first=method)
    except (TypeError, ValueError):
        return torch_builtin_signature(name, method)
    sig.orders = [sig.positional]
    sig.varargs_dims = False  # a Python function's *args are not PyTorch's varargs dims
    return sig


def mismatches(qualified, ours, theirs):
    """The differences of ``ours`` from PyTorch's ``theirs`` that docs/differences.md does not list."""
    out = []

    def deliberate(p):
        return (qualified, p) in DELIBERATE or ("*", p) in DELIBERATE

    if not ours.var_keywords:
        for p in sorted(theirs.keywords - ours.keywords):
            if not deliberate(p):
                out.append(f"no keyword {p}")
    if theirs.varargs_dims and not ours.varargs and (qualified, "*varargs") not in DELIBERATE:
        out.append("no varargs dims")
    orders = [[p for p in order if not deliberate(p)] for order in theirs.orders]
    if not ours.varargs and not any(_prefix_compatible(ours.positional, order) for order in orders):
        if (qualified, "*positional") not in DELIBERATE:
            out.append(f"positional order {ours.positional}, PyTorch {orders[0]}")
    return out


def _prefix_compatible(ours, theirs):
    """PyTorch's positional parameters, in its order, as the first of ours (ours may have more)."""
    return ours[: len(theirs)] == theirs


def _targets():
    """(qualified name, adcuda callable, PyTorch callable, name, whether a method) in scope."""
    out = []
    ops = [o for o in registry.all_ops() if not o.name.startswith("_")]
    functions = sorted({n for o in ops for n in o.forms["function"] if not n.startswith("_")})
    methods = sorted({n for o in ops for k in ("method", "inplace") for n in o.forms[k] if not n.startswith("_")})
    functional = sorted(n for n in dir(F) if not n.startswith("_") and inspect.isfunction(getattr(F, n)))
    for n in functions:
        if hasattr(torch, n):
            out.append((f"adcuda.{n}", getattr(adcuda, n), getattr(torch, n), n, False))
    for n in methods:
        if hasattr(torch.Tensor, n):
            out.append((f"Tensor.{n}", getattr(adcuda.Tensor, n), getattr(torch.Tensor, n), n, True))
    for n in functional:
        if hasattr(torch.nn.functional, n):
            out.append((f"F.{n}", getattr(F, n), getattr(torch.nn.functional, n), n, False))
    for n in sorted(dir(adcuda.nn)):
        cls = getattr(adcuda.nn, n)
        if inspect.isclass(cls) and issubclass(cls, adcuda.nn.Module) and hasattr(torch.nn, n):
            out.append((f"nn.{n}", cls.__init__, getattr(torch.nn, n).__init__, n, True))
    return out


TARGETS = _targets() if torch_lib_or_none() else []


@pytest.mark.parametrize(
    ("qualified", "ours", "theirs", "name", "method"),
    [pytest.param(*t, id=t[0], marks=expected_failure("signature", t[0], "params")) for t in TARGETS],
)
def test_signature_matches_pytorch(qualified, ours, theirs, name, method):
    reference = torch_signature(theirs, name, method)
    if reference is None:
        pytest.skip(f"PyTorch's {qualified} has no readable signature")
    diffs = mismatches(qualified, Signature.of(ours, drop_first=method), reference)
    assert not diffs, f"{qualified}: " + "; ".join(diffs)


def test_deliberate_differences_name_real_parameters():
    """Each row of the table names an in-scope callable (or ``*``): a stale row is removed."""
    qualified = {t[0] for t in TARGETS}
    stale = sorted(n for n, _ in DELIBERATE if n != "*" and n not in qualified)
    assert not stale, f"docs/differences.md lists signatures of names not in scope: {stale}"


def test_known_failures_name_targets():
    from conformance.known_failures import KNOWN

    qualified = {t[0] for t in TARGETS}
    stale = sorted(k for c, k, _ in KNOWN if c == "signature" and k not in qualified)
    assert not stale, f"known signature failures of names not in scope: {stale}"
