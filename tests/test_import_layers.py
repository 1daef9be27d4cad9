"""The layers of adcuda, checked on the imports of every module under adcuda/ (read with ``ast``, so
nothing is imported to check it; imports inside functions count as much as those at the top).

The layer order is kept here alone (``LAYERS``, ``LIBRARY_USES``); docs/architecture.md shows it as
generated from these tables (``python tests/test_import_layers.py`` rewrites that part of the page, and
``test_the_docs_show_this_layer_order`` fails while the page differs).

Three rules, one test each; a failure names the importing module, the line and the rule:

(a) no import runs up the layer order below (a lower layer never imports a higher one), and the
    library modules import one another only where ``LIBRARY_USES`` says so;
(b) no import cycle between adcuda's modules;
(c) no import of adcuda's own modules inside a function, except the few in ``OPTIONAL_IMPORTS``
    (an in-function import hides a dependency, and usually a cycle, from the reader and from (b)).

Imports under ``if TYPE_CHECKING:`` never run and are not counted. ``from package import name``
counts as an import of ``package.name`` when that is a module, else of ``package``. Dynamic imports
(``importlib.import_module`` with a computed name, as adcuda/__init__.py's lazy ``__getattr__``) are
not seen. Importing ``a.b.c`` also runs ``a/__init__.py`` and ``a/b/__init__.py``; those implicit
edges are not added (every module would then depend on the package it lives in).
"""

import ast
import functools
import importlib.util
import pathlib
from collections import defaultdict

PACKAGE_ROOT = pathlib.Path(__file__).resolve().parent.parent / "adcuda"

# The layer order, lowest first: a module may import its own layer and those listed before it.
# Each entry is (layer, module prefixes, why it sits there); a module belongs to the entry with its
# longest matching prefix.
LAYERS = (
    (
        "ground",
        ("adcuda.errors", "adcuda.dtypes", "adcuda.device", "adcuda.random", "adcuda.layouts", "adcuda.hooks"),
        "exception classes, dtypes and device names: what every other layer speaks; the random "
        "generator's state (a seed and an offset, which the ops draw from and gradgradcheck too); and the "
        "handle every hook registration returns (tensors', nodes', modules', optimizers')",
    ),
    (
        "backends",
        ("adcuda.backends", "adcuda._native"),
        "the primitive seam over raw arrays (NumPy, or the native module _C and its CUDA kernels)",
    ),
    ("tensor", ("adcuda.tensor",), "Tensor: a backend array plus autograd metadata; no op of its own"),
    ("autograd", ("adcuda.autograd",), "graph nodes, the engine, grad modes, gradcheck and anomaly mode"),
    (
        "ops",
        ("adcuda.ops", "adcuda.factories", "adcuda._interop"),
        "every op and tensor factory (and DLPack sharing): the public ops the layers above use, "
        "multi-tensor ones in ops/optim.py included",
    ),
    (
        "library",
        (
            "adcuda.nn",
            "adcuda.optim",
            "adcuda.amp",
            "adcuda.profiler",
            "adcuda.cuda",
            "adcuda.distributed",
            "adcuda.utils",
            "adcuda.serialization",
            "adcuda.data",
            "adcuda._info",
            "adcuda.accelerator",
            "adcuda.linalg",
            "adcuda.sparse",
            "adcuda.testing",
            "adcuda.distributions",
            "adcuda.special",
        ),
        "built from public ops only, side by side: they import one another only as LIBRARY_USES allows",
    ),
    (
        "compile",
        ("adcuda.capture",),
        "adcuda.compile's capture and replay (the backend graph: a frozen program of primitive calls). It "
        "records at the ops' dispatch point, but its imports put it above the library, not below: each "
        "replay is one profiler (NVTX) range and CUDA tensors replay through cuda's CUDA graphs; no "
        "library module uses it, only the exporters (export/trace.py traces through its recorder), "
        "adcuda/__init__.py (adcuda.compile) and the main job",
    ),
    (
        "export",
        ("adcuda.export", "adcuda.onnx"),
        "the exporters: a model's eval forward traced through capture (export/trace.py) and written as "
        "ONNX (onnx/) or C; consumers of the library, used by the main job's ``adcuda export``",
    ),
    (
        "package",
        ("adcuda", "adcuda.cuda.amp"),
        "adcuda/__init__.py: the names users import; only the main job above it may import it; and "
        "adcuda.cuda.amp, PyTorch's older spelling of adcuda.amp, which itself uses adcuda.cuda",
    ),
    (
        "app",
        ("adcuda.train", "adcuda.cli", "adcuda.__main__"),
        "the main job (adcuda train, adcuda info): may use everything",
    ),
)

# Which library module may import which other one, and why. Anything else between two library modules
# fails rule (a). optim does not use nn (optimizers take any tensors, nn.Parameter is one), and amp does
# not use optim (GradScaler reads optimizers through param_groups, as PyTorch's does).
LIBRARY_USES = {
    ("adcuda.nn", "adcuda.distributed"): "DistributedDataParallel is a Module that all-reduces through the "
    "process group",
    ("adcuda.nn", "adcuda.profiler"): "DistributedDataParallel marks its bucket all-reduces as profiler ranges",
    ("adcuda.nn", "adcuda.amp"): "the layers' functions follow the autocast state",
    ("adcuda.utils", "adcuda.cuda"): "the DataLoader pins batches, readies CUDA in workers and hands them their "
    "seed; DevicePrefetcher copies on a side stream",
    ("adcuda.utils", "adcuda.distributed"): "DistributedSampler takes rank and world size from the process group",
    ("adcuda.distributed", "adcuda.cuda"): "NCCL runs on CUDA devices; the launcher gives each rank a GPU",
    ("adcuda.serialization", "adcuda.nn"): "a checkpoint stores nn.Parameters as such and restores them",
    ("adcuda._info", "adcuda.cuda"): "adcuda.info() reports what CUDA sees at run time",
    ("adcuda.amp", "adcuda.cuda"): "autocast asks whether CUDA is there",
    ("adcuda.accelerator", "adcuda.cuda"): "CUDA is adcuda's one accelerator",
    ("adcuda.profiler", "adcuda.optim"): "the profiler's ranges around optimizer steps (library_ranges)",
    ("adcuda.profiler", "adcuda.amp"): "the profiler's ranges around GradScaler's unscale_ and update",
    ("adcuda.profiler", "adcuda.utils"): "the profiler's ranges around the DataLoader's batch fetches",
}

# In-function imports that rule (c) allows: (importing module, imported module) -> the optional
# dependency the import keeps optional. An entry belongs here only when importing at the top would fail,
# or pull in something a user may not have, on some installs. (The third-party optional dependencies,
# mpi4py, cupy and torch, are imported inside functions of adcuda's modules, which rule (c) does not count.)
OPTIONAL_IMPORTS = {
    ("adcuda._info", "adcuda.backends.cuda.gemm"): "the GEMM path adcuda.info() reports: the CUDA backend imports "
    "only in builds with CUDA (asked only there)",
}

# Violations that live in files other work is changing right now, as (rule, importing module, imported
# module); rule is "up", "in-function" or "cycle" (an import that closes a cycle: it is left out of the
# cycle search, as are the imports listed under the other two rules). An entry that no longer happens
# fails the test, so the lists shrink as that work lands.
EXPECTED_FAILURES = {}


# ---------------------------------------------------------------------------------------------
# the developer page that shows the layer order
DOCS_PAGE = PACKAGE_ROOT.parent / "docs" / "architecture.md"

BEGIN = (
    "<!-- generated from LAYERS and LIBRARY_USES in tests/test_import_layers.py: "
    "run python tests/test_import_layers.py -->"
)
END = "<!-- end of the generated layer table -->"


def layers_markdown():
    """The layer table as docs/architecture.md shows it: highest layer first, as data flows down."""
    lines = ["| layer | modules | why it sits there |", "|---|---|---|"]
    for layer, prefixes, why in reversed(LAYERS):
        lines.append(f"| {layer} | {', '.join(f'`{p}`' for p in prefixes)} | {why.replace('|', '/')} |")
    lines += ["", "Library modules that use another library module (no other pair may):", ""]
    lines += [f"- `{user}` uses `{used}`: {why}" for (user, used), why in LIBRARY_USES.items()]
    return "\n".join(lines)


def _docs_with_table(text):
    if BEGIN not in text or END not in text:
        raise AssertionError(f"{DOCS_PAGE.name} has lost the markers around its generated layer table")
    head, rest = text.split(BEGIN, 1)
    return head + BEGIN + "\n" + layers_markdown() + "\n" + END + rest.split(END, 1)[1]


# ---------------------------------------------------------------------------------------------
# reading the imports
def module_name(path):
    parts = list(path.relative_to(PACKAGE_ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


@functools.cache
def all_modules():
    return {module_name(p): p for p in sorted(PACKAGE_ROOT.rglob("*.py"))}


class _ImportVisitor(ast.NodeVisitor):
    """(line, imported module name, inside a function) for each import statement that runs."""

    def __init__(self, module, is_package, known):
        self.package = module if is_package else module.rpartition(".")[0]
        self.known = known
        self.depth = 0
        self.found = []

    def _function(self, node):
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1

    visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = _function

    def visit_If(self, node):
        test = node.test
        name = test.id if isinstance(test, ast.Name) else test.attr if isinstance(test, ast.Attribute) else None
        if name == "TYPE_CHECKING":
            for child in node.orelse:
                self.visit(child)
            return
        self.generic_visit(node)

    def visit_Import(self, node):
        for alias in node.names:
            if alias.name == "adcuda" or alias.name.startswith("adcuda."):
                self.found.append((node.lineno, alias.name, self.depth > 0))

    def visit_ImportFrom(self, node):
        if node.level:
            base = self.package.split(".")
            base = base[: len(base) - (node.level - 1)]
            target = ".".join(base + ([node.module] if node.module else []))
        else:
            target = node.module or ""
        if not (target == "adcuda" or target.startswith("adcuda.")):
            return
        for alias in node.names:
            candidate = f"{target}.{alias.name}"
            self.found.append((node.lineno, candidate if candidate in self.known else target, self.depth > 0))


@functools.cache
def import_edges():
    """((importer, line, imported, in_function), ...) over every module of adcuda/."""
    modules = all_modules()
    edges = []
    for name, path in modules.items():
        visitor = _ImportVisitor(name, path.name == "__init__.py", modules)
        visitor.visit(ast.parse(path.read_text(), filename=str(path)))
        edges.extend((name, line, imported, inside) for line, imported, inside in visitor.found if imported != name)
    return tuple(edges)


def entry_of(module):
    """(layer index, layer name, the prefix that placed it) of ``module``, or None."""
    best = None
    for index, (layer, prefixes, _) in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and (best is None or len(prefix) > len(best[2])):
                best = (index, layer, prefix)
    return best


def where(module, line):
    path = all_modules()[module].relative_to(PACKAGE_ROOT.parent)
    return f"{path}:{line}: {module}"


def check(rule, violations):
    """Fail on ``violations`` [(key, message)] not expected, and on expected ones that no longer occur."""
    expected = {key for keys in EXPECTED_FAILURES.values() for key in keys if key[0] == rule}
    found = {key for key, _ in violations}
    unexpected = [message for key, message in violations if key not in expected]
    stale = sorted(expected - found)
    problems = unexpected + [
        f"{importer} no longer imports {imported} ({rule}): delete it from EXPECTED_FAILURES"
        for _, importer, imported in stale
    ]
    assert not problems, f"{len(problems)} import-layer problem(s):\n" + "\n".join(problems)


# ---------------------------------------------------------------------------------------------
# the tests
def test_every_module_has_a_layer():
    missing = [m for m in all_modules() if entry_of(m) is None]
    assert not missing, f"modules in no layer of LAYERS (add them to the table): {missing}"


def test_the_docs_show_this_layer_order():
    text = DOCS_PAGE.read_text(encoding="utf-8")
    assert text == _docs_with_table(text), (
        f"docs/{DOCS_PAGE.name}'s layer table differs from LAYERS: run python tests/test_import_layers.py"
    )


def test_no_import_runs_up_the_layers():
    violations = []
    for importer, line, imported, _ in import_edges():
        low, low_layer, low_prefix = entry_of(importer)
        high, high_layer, high_prefix = entry_of(imported)
        if high > low:
            violations.append(
                (
                    ("up", importer, imported),
                    f"{where(importer, line)} imports {imported}: rule (a), the {low_layer} layer must "
                    f"not import the {high_layer} layer above it",
                )
            )
        elif (
            high == low
            and low_layer == "library"
            and low_prefix != high_prefix
            and (low_prefix, high_prefix) not in LIBRARY_USES
        ):
            violations.append(
                (
                    ("up", importer, imported),
                    f"{where(importer, line)} imports {imported}: rule (a), library module {low_prefix} "
                    f"may not use {high_prefix} (not in LIBRARY_USES)",
                )
            )
    check("up", violations)


def test_no_in_function_imports_of_adcuda_modules():
    violations = [
        (
            ("in-function", importer, imported),
            f"{where(importer, line)} imports {imported} inside a function: rule (c), import it at the top "
            "(or list it in OPTIONAL_IMPORTS with the optional dependency it keeps optional)",
        )
        for importer, line, imported, inside in import_edges()
        if inside and (importer, imported) not in OPTIONAL_IMPORTS
    ]
    check("in-function", violations)


def _import_cycles_script():
    """scripts/import_cycles.py, whose strongly connected components (Tarjan's) rule (b) reads too."""
    spec = importlib.util.spec_from_file_location("import_cycles", PACKAGE_ROOT.parent / "scripts" / "import_cycles.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_no_import_cycles():
    """No cycle among the imports that are not expected failures (a cycle through one of those goes
    when it is fixed)."""
    expected = {(importer, imported) for keys in EXPECTED_FAILURES.values() for _, importer, imported in keys}
    edges = {(importer, imported) for importer, _, imported, _ in import_edges()}
    stale = sorted(
        f"{importer} no longer imports {imported} (cycle): delete it from EXPECTED_FAILURES"
        for keys in EXPECTED_FAILURES.values()
        for rule, importer, imported in keys
        if rule == "cycle" and (importer, imported) not in edges
    )
    assert not stale, "\n".join(stale)
    graph = defaultdict(dict)  # importer -> imported -> first line
    for importer, line, imported, _ in import_edges():
        if (importer, imported) not in expected:
            graph[importer].setdefault(imported, line)
    cycles = _import_cycles_script().components(graph)
    messages = []
    for component in cycles:
        members = set(component)
        links = [
            f"{where(a, line)} imports {b}"
            for a in sorted(members)
            for b, line in sorted(graph[a].items())
            if b in members
        ]
        messages.append(
            "rule (b), an import cycle among " + ", ".join(sorted(members)) + ":\n    " + "\n    ".join(links)
        )
    assert not messages, "\n".join(messages)


if __name__ == "__main__":
    # rewrite the generated layer table of docs/architecture.md
    DOCS_PAGE.write_text(_docs_with_table(DOCS_PAGE.read_text(encoding="utf-8")), encoding="utf-8")
