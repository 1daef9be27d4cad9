"""Write kernels/elementwise_ops.def, the CUDA side's X-macro list of the unary elementwise ops, from the
declarative table adcuda/backends/elementwise_table.py (the one source of both backends' dispatch).

    python scripts/gen_elementwise_ops.py            # rewrite the file
    python scripts/gen_elementwise_ops.py --check    # exit 1 if the committed file differs

tests/test_elementwise_table.py fails while the committed file differs from what this writes. The table
module is loaded from its file alone (it imports nothing of adcuda), so no build is needed to run this.
"""

import argparse
import importlib.util
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
TABLE = ROOT / "adcuda" / "backends" / "elementwise_table.py"
OUTPUT = ROOT / "kernels" / "elementwise_ops.def"


def generated() -> str:
    spec = importlib.util.spec_from_file_location("elementwise_table", TABLE)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # (dataclasses look their module up while making the classes)
    spec.loader.exec_module(module)
    return module.elementwise_ops_def()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the committed file differs")
    args = parser.parse_args()
    text = generated()
    if args.check:
        current = OUTPUT.read_text() if OUTPUT.exists() else ""
        if current != text:
            print(f"{OUTPUT.relative_to(ROOT)} is stale: run python scripts/gen_elementwise_ops.py", file=sys.stderr)
            return 1
        return 0
    OUTPUT.write_text(text)
    print(f"wrote {OUTPUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
