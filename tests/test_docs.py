"""The user documentation: docs/api.md is what scripts/gen_api_reference.py writes from the package
(so the reference cannot drift from the code), and README.md and docs/ link only to files in the
repository."""

import difflib
import os
import re

from helpers import load_module

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GENERATOR = os.path.join(ROOT, "scripts", "gen_api_reference.py")


def load_generator():
    return load_module("gen_api_reference", GENERATOR)


def test_api_reference_is_what_the_generator_writes():
    with open(os.path.join(ROOT, "docs", "api.md"), encoding="utf-8") as f:
        committed = f.read()
    generated = load_generator().render()
    difference = "\n".join(
        difflib.unified_diff(
            committed.splitlines(), generated.splitlines(), "docs/api.md", "generated", lineterm="", n=1
        )
    )
    assert committed == generated, (
        "docs/api.md differs from the package: run python scripts/gen_api_reference.py "
        "and commit docs/api.md\n" + difference[:3000]
    )


def test_api_reference_lists_ops_with_their_forms_and_every_namespace():
    text = load_generator().render()
    assert "| `matmul` |" in text and "`Tensor.add_`" in text and "`F.gelu`" in text
    for name, _ in load_generator().NAMESPACES:
        assert f"## `{name}`" in text


def markdown_files():
    yield os.path.join(ROOT, "README.md")
    for name in sorted(os.listdir(os.path.join(ROOT, "docs"))):
        if name.endswith(".md"):
            yield os.path.join(ROOT, "docs", name)


def test_links_point_to_files_in_the_repository():
    broken = []
    for path in markdown_files():
        with open(path, encoding="utf-8") as f:
            text = f.read()
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text):
            if re.match(r"[a-z]+://", target):
                continue
            resolved = os.path.normpath(os.path.join(os.path.dirname(path), target))
            if not resolved.startswith(ROOT + os.sep) or not os.path.exists(resolved):
                broken.append(f"{os.path.relpath(path, ROOT)} -> {target}")
    assert not broken, broken
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        assert "shared/" not in f.read(), "the README names a file that a clone does not have"


def test_the_reference_lists_what_adcuda_loads_on_first_use():
    # the generator reads adcuda's own table of lazily loaded names (no copy of its own to drift)
    import adcuda

    generator = load_generator()
    names = generator.public_names(adcuda)
    for name, (_, attribute) in adcuda._LOADED_ON_FIRST_USE.items():
        assert getattr(adcuda, name) is not None
        assert (name in names) == (attribute is not None), name
