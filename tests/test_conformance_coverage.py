"""Every public op has an entry in the conformance database (tests/conformance/database.py): the ops of
the registry with a public form, every callable of adcuda.nn.functional and every public Tensor
method or attribute. What is not an op is excluded below, each with its reason.

A new op that fails here needs one line in the database (docs/testing.md, "The conformance
database").
"""

import inspect

from conformance.database import ENTRIES

import adcuda
import adcuda.nn.functional as F
from adcuda.ops import registry

# Public names that are not ops, each with why it has no entry.
NOT_OPS = {
    "backward": "runs the autograd engine (tests/test_autograd.py)",
    "register_hook": "autograd hook registration (tests/test_autograd.py)",
    "retain_grad": "autograd bookkeeping (tests/test_autograd.py)",
    "retains_grad": "autograd bookkeeping (tests/test_autograd.py)",
    "requires_grad_": "autograd flag (tests/test_autograd.py)",
    "grad": "autograd attribute (tests/test_autograd.py)",
    "grad_fn": "autograd attribute (tests/test_autograd.py)",
    "data": "autograd-free alias of the tensor (tests/test_autograd.py)",
    "data_ptr": "a memory address, different in every process",
    "numpy": "a view of the CPU memory (tests/test_interop.py)",
    "device": "a device object (tests/test_tensor.py)",
}

COVERED = {e.name for e in ENTRIES}


def _public(names):
    return {n for n in names if not n.startswith("_")}


def _registry_forms(op):
    forms = {k: set(v) for k, v in op.forms.items()}
    if op.functional_inplace and op.forms["functional"]:
        forms["functional"].add(op.name + "_")
    return forms


def public_registry_ops():
    """Ops with a public form: a function, method, operator, nn.functional or property name."""
    out = {}
    for op in registry.all_ops():
        forms = _registry_forms(op)
        names = set().union(*forms.values())
        if any(not n.startswith("_") or n.startswith("__") for n in names) and not op.name.startswith("_"):
            out[op.name] = names
    return out


def test_every_registry_op_has_an_entry():
    missing = sorted(set(public_registry_ops()) - COVERED)
    assert not missing, f"public ops without a conformance entry (tests/conformance/database.py): {missing}"


def _covered_names():
    names = set(COVERED)
    for op_name, forms in public_registry_ops().items():
        if op_name in COVERED:
            names |= forms
    return names


def test_every_functional_has_an_entry():
    functional = _public(n for n in dir(F) if callable(getattr(F, n)) and not inspect.isclass(getattr(F, n)))
    functional -= {n for n in functional if inspect.ismodule(getattr(F, n))}
    missing = sorted(functional - _covered_names())
    assert not missing, f"nn.functional names without a conformance entry: {missing}"


def test_every_tensor_method_has_an_entry():
    methods = _public(dir(adcuda.Tensor))
    missing = sorted(methods - _covered_names() - set(NOT_OPS))
    assert not missing, f"Tensor methods and attributes without a conformance entry or a NOT_OPS reason: {missing}"


def test_exclusions_are_public_names():
    """An exclusion whose name is gone (or has become an op with an entry) is removed."""
    stale = sorted(n for n in NOT_OPS if not hasattr(adcuda.Tensor, n) or n in _covered_names())
    assert not stale, f"NOT_OPS lists names that need no exclusion: {stale}"


def test_entries_name_public_ops():
    """Each entry names an op of the registry, a public adcuda name, or a PyTorch op adcuda lacks
    (a known failure until it exists)."""
    import pytest

    torch = pytest.importorskip("torch")
    unknown = []
    for entry in ENTRIES:
        known = entry.name in public_registry_ops() or entry.call is not None
        known = known or any(hasattr(m, entry.name) for m in (adcuda, adcuda.Tensor, F, torch, torch.Tensor))
        if not known:
            unknown.append(entry.key)
    assert not unknown, f"entries that name no op: {unknown}"


def test_entry_keys_are_unique():
    keys = [e.key for e in ENTRIES]
    assert len(keys) == len(set(keys)), sorted(k for k in keys if keys.count(k) > 1)


def test_known_failures_name_existing_samples():
    """Every line of known_failures.py of the database's checks names an entry and one of its
    samples (a renamed sample leaves no stale line behind)."""
    from conformance.known_failures import KNOWN

    samples = {e.key: {s.name for s in e.samples} for e in ENTRIES}
    errors = {e.key: {s.name for s in e.errors} for e in ENTRIES}
    stale = []
    for check, key, sample in KNOWN:
        if check in ("value", "grad", "cuda") and sample not in samples.get(key, ()):
            stale.append((check, key, sample))
        elif check == "error" and sample not in errors.get(key, ()):
            stale.append((check, key, sample))
    assert not stale, f"known failures of samples that do not exist: {stale}"
