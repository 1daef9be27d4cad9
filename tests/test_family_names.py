"""One family name per layer, end to end (issue 30): a family's ops, primitives and kernels carry one
name, so that ``adcuda/ops/norm.py`` leads to ``backends/cpu/norm.py``, ``backends/cuda/norm.py``,
``kernels/norm.cu`` and ``kernels/bindings/norm.cpp`` without a search.

Read with ``ast`` (nothing is imported but the seam's list of primitives). A backend family is a
public module of ``adcuda/backends/cpu/``; a primitive belongs to the family whose module lists it in
``__all__``. The rules, one test each:

(a) the CPU and CUDA backends have the same family modules, and each primitive is in the same family
    on both;
(b) every kernel source, header and binding (``kernels/<f>.cu``, ``kernels/<f>.h``,
    ``kernels/bindings/<f>.cpp``, ``kernels/host/<f>.cpp``) is named after a family, as ``<f>`` or
    ``<f>_<part>`` (``elementwise_unary.cu``, ``gemm_tensor_core.cu``), or is listed in
    ``NOT_A_FAMILY_KERNEL`` with the reason; and every family has its ``.cu``, its header and its
    binding;
(c) every ``adcuda/ops/<m>.py`` that calls a family's primitives (a call on ``primitives(t)`` or on a
    name bound to it) is named after that family, as ``<f>`` or ``<f>_<part>``; it may also call the
    building blocks every family uses (``SHARED_FAMILIES``) and the borrowings ``BORROWS`` lists with
    their reasons. An ops module named after no family is listed in ``NOT_A_FAMILY_OPS``, an ops
    module named after a family calls that family's primitives, and every family's ops are in
    ``ops/<family>.py`` but those listed in ``OPS_NAMED_OTHERWISE``.

Calls through ``getattr(bk, name)`` with a computed name are not seen.
"""

import ast
import pathlib

from adcuda.backends.seam import PRIMITIVES

ROOT = pathlib.Path(__file__).resolve().parent.parent
BACKENDS = ROOT / "adcuda" / "backends"
KERNELS = ROOT / "kernels"
OPS = ROOT / "adcuda" / "ops"

# CPU backend modules with no CUDA counterpart (not families: they hold no primitive of the seam)
CPU_ONLY = {"threads": "the CPU backend's BLAS thread pool and PyTorch's set_num_threads"}

# kernel files named after no family
NOT_A_FAMILY_KERNEL = {
    "bindings/graph.cpp": "CUDA graph capture and replay (adcuda.cuda.graphs), not a primitive family",
    "bindings/interop.cpp": "DLPack and __cuda_array_interface__ sharing",
    "bindings/registry.cpp": "the table every binding registers its functions in",
    "bindings/runtime.cpp": "the runtime (kernels/runtime/): memory, streams, events and the storage family's copies",
}

# families without their own kernel files
NO_KERNEL_FILES = {
    "storage": "the runtime's copies and views: kernels/runtime/ and kernels/bindings/runtime.cpp",
}

# primitive families whose primitives any ops module may call
SHARED_FAMILIES = {
    "storage": "allocation, casts, copies and views: every family's ops make and shape arrays with them",
    "elementwise": "arithmetic on arrays inside other families' forwards and backwards",
}

# (ops module, family) pairs where an ops module calls another family's primitive
BORROWS = {
    ("elementwise", "reduce"): "equal reduces its elementwise comparison with all",
    ("index", "layout"): "nonzero stacks its coordinate columns with cat",
    ("index", "reduce"): "trace sums its diagonal view",
    ("layout", "resample"): "pad is a layout op to the user; its constant/reflect/replicate kernels are resample's",
    ("gemm", "reduce"): "linear's bias gradient is a sum over rows",
    ("gemm", "layout"): "vander joins its columns with cat",
    ("gemm", "sort"): "vander's powers are a running product of its columns",
    ("pooling", "index"): "max_pool2d_select gathers the values at the pooled indices; max_unpool writes them back",
    ("random", "reduce"): "multinomial checks and counts its rows' weights; bernoulli checks its probabilities' range",
    ("random", "sort"): "randperm orders random keys; multinomial draws by its weights' running sum or top keys",
    ("resample", "layout"): "affine_grid builds its constant base grid with view, expand and cat",
    ("resample", "gemm"): "affine_grid's grid is the base grid's product with theta",
    ("recurrent", "gemm"): "the GRU layer's hidden-state products and weight gradient",
    ("recurrent", "reduce"): "the GRU layer's bias gradient is a sum over time and batch",
    ("reduce", "gemm"): "cov (and corrcoef) without a gradient multiply the centred observations directly",
    ("reduce", "index"): "histc picks its in-range samples",
    ("reduce", "sort"): "cumsum and cumprod are the sort family's scans; bincount and histc count with its bincount",
    ("softmax_loss", "reduce"): "the losses' sums and means; cross_entropy's mean counts the targets",
    ("sort", "index"): "mode and nanmedian gather from the sort; unique and unique_consecutive pick the run starts",
    ("sort", "layout"): "mode and unique_consecutive start the first run with cat",
    ("sort", "reduce"): "nanmedian counts each slice's numbers; unique_consecutive marks the slices that differ",
}

# ops modules that declare ops of no single family, or no ops at all
NOT_A_FAMILY_OPS = {
    "__init__": "the package: imports every family module",
    "autocast": "the autocast regions' dtype policy",
    "common": "helpers shared by the family modules",
    "conversion": "to(), type() and the dtype conversions: storage's casts",
    "dispatch": "the dispatch point every op call passes",
    "dtype_support": "the dtype sets ops declare",
    "factories": "tensor factories: storage's allocation",
    "inplace": "the in-place forms of the registry's ops",
    "mutation": "the version counter checks of in-place writes",
    "registry": "the @op registry",
    "special": "composites of other families' ops (torch.special), no primitive of their own",
}

# families whose ops live in a module of another name (None: in no one module), and why
OPS_NAMED_OTHERWISE = {
    "storage": (None, "every ops module calls its primitives; factories.py, conversion.py and mutation.py own its ops"),
}


def _public_modules(folder: pathlib.Path) -> set[str]:
    return {p.stem for p in folder.glob("*.py") if not p.stem.startswith("_")}


def _all_names(path: pathlib.Path) -> set[str]:
    names: set[str] = set()  # from ``__all__ = [...]`` and any ``__all__ += [...]`` after it
    for node in ast.parse(path.read_text()).body:
        targets = (
            node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AugAssign) else []
        )
        if any(getattr(t, "id", None) == "__all__" for t in targets):
            names |= {ast.literal_eval(e) for e in node.value.elts}  # type: ignore[attr-defined]
    return names


def families() -> set[str]:
    return _public_modules(BACKENDS / "cpu") - set(CPU_ONLY)


def primitive_families(backend: str) -> dict[str, str]:
    """primitive name -> the family module of ``backend`` that lists it in ``__all__``."""
    found: dict[str, str] = {}
    for family in sorted(families()):
        for name in _all_names(BACKENDS / backend / f"{family}.py") & set(PRIMITIVES):
            found[name] = family
    return found


def primitive_calls(source: str) -> set[str]:
    """The attribute names called or read on ``primitives(...)``/``primitives_on(...)`` or a name bound to
    one of them."""

    def is_backend_call(node: ast.AST) -> bool:
        return (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("primitives", "primitives_on")
        )

    tree = ast.parse(source)
    bound = {
        target.id
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign) and is_backend_call(node.value)
        for target in node.targets
        if isinstance(target, ast.Name)
    }
    return {
        node.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and (is_backend_call(node.value) or (isinstance(node.value, ast.Name) and node.value.id in bound))
    }


def _named_after(name: str, family_names: set[str]) -> str | None:
    """The family ``name`` is named after (``<f>`` or ``<f>_<part>``), if any; the longest one wins."""
    matches = [f for f in family_names if name == f or name.startswith(f + "_")]
    return max(matches, key=len) if matches else None


def _own_family(module: str, family_names: set[str]) -> str | None:
    """The family whose ops ``ops/<module>.py`` declares, by its name."""
    otherwise = {name: family for family, (name, _) in OPS_NAMED_OTHERWISE.items() if name is not None}
    return otherwise.get(module) or _named_after(module, family_names)


def ops_problems(uses: dict[str, set[str]], family_names: set[str], borrows: dict[tuple[str, str], str]) -> list[str]:
    """Rule (c) for ``uses`` (ops module -> the families whose primitives it calls) and ``borrows``."""
    problems = []
    for module, used in sorted(uses.items()):
        own = _own_family(module, family_names)
        if own is None and module not in NOT_A_FAMILY_OPS:
            problems.append(f"ops/{module}.py is named after no backend family and not in NOT_A_FAMILY_OPS")
        # a part module (elementwise_more.py) may hold composites only
        if own is not None and module in (own, OPS_NAMED_OTHERWISE.get(own, (None,))[0]) and own not in used:
            problems.append(f"ops/{module}.py is named after the {own} family but calls none of its primitives")
        for family in sorted(used - set(SHARED_FAMILIES) - {own}):
            if (module, family) not in borrows:
                problems.append(
                    f"ops/{module}.py calls the {family} family's primitives: its ops belong in ops/{family}.py "
                    "(or list the borrowing in BORROWS with the reason)"
                )
    for module, family in sorted(set(borrows) - {(m, f) for m, used in uses.items() for f in used}):
        problems.append(f"BORROWS lists ({module!r}, {family!r}) but ops/{module}.py no longer calls the family")
    named = {_own_family(m, family_names) for m in uses}
    for family in sorted(family_names - named - set(OPS_NAMED_OTHERWISE)):
        problems.append(f"the {family} family has no ops/{family}.py")
    return problems


def test_cpu_and_cuda_backends_have_the_same_families():
    cpu = _public_modules(BACKENDS / "cpu") - set(CPU_ONLY)
    cuda = _public_modules(BACKENDS / "cuda")
    assert cpu == cuda, f"only on CPU: {sorted(cpu - cuda)}; only on CUDA: {sorted(cuda - cpu)}"
    on_cpu, on_cuda = primitive_families("cpu"), primitive_families("cuda")
    assert set(on_cpu) == set(PRIMITIVES), f"primitives in no CPU family: {sorted(set(PRIMITIVES) - set(on_cpu))}"
    moved = {p: (on_cpu[p], on_cuda.get(p)) for p in PRIMITIVES if on_cpu[p] != on_cuda.get(p)}
    assert not moved, f"primitives in another family on CUDA (cpu, cuda): {moved}"


def test_kernel_files_are_named_after_their_family():
    family_names = families()
    files = [
        *KERNELS.glob("*.cu"),
        *KERNELS.glob("*.h"),
        *(KERNELS / "bindings").glob("*.cpp"),
        *(KERNELS / "host").glob("*.cpp"),
    ]
    unnamed = sorted(
        str(f.relative_to(KERNELS))
        for f in files
        if _named_after(f.stem, family_names) is None and str(f.relative_to(KERNELS)) not in NOT_A_FAMILY_KERNEL
    )
    assert not unnamed, f"kernel files named after no backend family (adcuda/backends/cpu/<f>.py): {unnamed}"
    missing = [
        f"{family}: {kind}"
        for family in sorted(family_names - set(NO_KERNEL_FILES))
        for kind, pattern in (("kernels/*.cu", "*.cu"), ("kernels/*.h", "*.h"), ("kernels/bindings/*.cpp", None))
        if not (
            (KERNELS / "bindings" / f"{family}.cpp").exists()
            if pattern is None
            else any(_named_after(f.stem, {family}) for f in KERNELS.glob(pattern))
        )
    ]
    assert not missing, f"families without their kernel files: {missing}"


def test_ops_modules_are_named_after_the_families_they_call():
    family_of = primitive_families("cpu")
    uses = {
        p.stem: {family_of[name] for name in primitive_calls(p.read_text()) if name in family_of}
        for p in OPS.glob("*.py")
    }
    problems = ops_problems(uses, families(), BORROWS)
    assert not problems, "\n".join(problems)


def test_the_rule_catches_a_misnamed_module():
    family_names = {"index", "layout", "storage"}
    borrows = {("index", "layout"): "nonzero's cat"}
    assert ops_problems({"index": {"index", "storage", "layout"}, "layout": {"layout"}}, family_names, borrows) == []
    assert ops_problems({"indexing": {"index"}, "layout": {"layout"}}, family_names, {}) == [
        "ops/indexing.py is named after no backend family and not in NOT_A_FAMILY_OPS",
        "ops/indexing.py calls the index family's primitives: its ops belong in ops/index.py "
        "(or list the borrowing in BORROWS with the reason)",
        "the index family has no ops/index.py",
    ]
    assert ops_problems({"index": {"storage"}, "layout": {"layout", "index"}}, family_names, borrows) == [
        "ops/index.py is named after the index family but calls none of its primitives",
        "ops/layout.py calls the index family's primitives: its ops belong in ops/index.py "
        "(or list the borrowing in BORROWS with the reason)",
        "BORROWS lists ('index', 'layout') but ops/index.py no longer calls the family",
    ]


def test_primitive_calls_sees_bound_and_direct_calls():
    source = "def f(t):\n    bk = primitives(t)\n    bk.cat([], 0)\n    return primitives_on(d).full((1,), 0, x)\n"
    assert primitive_calls(source) == {"cat", "full"}
    assert primitive_calls("def f(t):\n    return t.cat(1)\n") == set()
