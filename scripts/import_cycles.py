"""The import circles a type checker sees in adcuda: the strongly connected components of the graph of
module-level imports, those under ``if TYPE_CHECKING:`` included (a type checker follows them as it does
the others; a stub, .pyi, stands for its module). ``--deferred`` adds the imports inside functions, which
run only when called. Prints each component of more than one module; with ``--only``, just those holding
one of the modules named, and the exit status is 1 when there is one.

    python scripts/import_cycles.py [--deferred] [--only adcuda.types adcuda.tensor ...]
"""

import argparse
import ast
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent


def _modules():
    """Module name -> (file, is a package); a stub (.pyi) stands for its module, as to a type checker."""
    modules = {}
    for path in sorted((ROOT / "adcuda").rglob("*.py")) + sorted((ROOT / "adcuda").rglob("*.pyi")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts = parts[:-1]
        modules[".".join(parts)] = (path, is_package)
    return modules


def _import_statements(tree, deferred):
    """The import statements at module level, those under ``if``/``try`` included (``if TYPE_CHECKING:``);
    with ``deferred``, those inside functions too (run on first call, but a type checker reads them)."""
    if deferred:
        yield from (n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom)))
        return
    pending = list(tree.body)
    while pending:
        node = pending.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        elif isinstance(node, (ast.If, ast.Try, ast.With)):
            pending.extend(ast.iter_child_nodes(node))
        elif isinstance(node, ast.ExceptHandler):
            pending.extend(node.body)


def _imports(name, path, is_package, modules, deferred):
    """The adcuda modules ``name`` imports anywhere in its body (a ``from X import y`` counts as importing
    X.y where that is a module, X otherwise)."""
    package = name if is_package else name.rpartition(".")[0]
    found = set()
    for node in _import_statements(ast.parse(path.read_text(encoding="utf-8")), deferred):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            targets = [
                f"{module}.{alias.name}" if f"{module}.{alias.name}" in modules else module for alias in node.names
            ]
        else:
            continue
        for target in targets:
            # an import of a.b.c imports a and a.b too, but those edges are the packages' own: keep the module
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def graph(deferred=False):
    modules = _modules()
    return {name: _imports(name, path, is_package, modules, deferred) for name, (path, is_package) in modules.items()}


def components(edges):
    """Tarjan's strongly connected components (iterative), those with more than one module."""
    index, low, on_stack, stack, result, counter = {}, {}, set(), [], [], [0]
    for root in edges:
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter[0]
                    counter[0] += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    result.append(sorted(component))
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", default=None, help="report only the circles through these modules")
    parser.add_argument("--deferred", action="store_true", help="count imports inside functions too")
    args = parser.parse_args()
    found = components(graph(args.deferred))
    print(f"{len(found)} import circles (strongly connected components), {sum(map(len, found))} modules on them")
    bad = 0
    for component in sorted(found, key=len, reverse=True):
        involved = [m for m in (args.only or []) if m in component]
        if args.only is not None and not involved:
            continue
        bad += 1
        shown = ", ".join(component[:12]) + (" ..." if len(component) > 12 else "")
        print(f"- {len(component)} modules{' incl. ' + ', '.join(involved) if involved else ''}: {shown}")
    return 1 if args.only is not None and bad else 0


if __name__ == "__main__":
    sys.exit(main())
