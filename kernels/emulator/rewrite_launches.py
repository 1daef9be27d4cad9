"""Mirror kernels/ for the emulated build (ADCUDA_CUDA=EMULATE), which compiles CUDA C++ as host C++.

Two constructs of CUDA C++ are not C++: the launch `kernel<<<grid, block, bytes, stream>>>(args)` and
`extern __shared__ T name[];`. In every .cu and .cuh file the first becomes
`kernel | ::adcuda::emu::LaunchConfig(grid, block, bytes, stream) | ::adcuda::emu::kernel_arguments(args)`
(kernels/emulator/grid.h runs it), the second a pointer to the launch's dynamic shared memory. Nothing
else changes; `#line` directives keep compiler messages pointing at the original files. A .cu file is
written as <name>.cu.cpp, headers under their own names; files whose text is unchanged are not
rewritten, so incremental builds stay incremental; mirrors of files that no longer exist are deleted.

Usage: rewrite_launches.py KERNELS_DIR OUTPUT_DIR
"""

import os
import re
import sys

LAUNCH = re.compile(r"<<<(.*?)>>>", re.DOTALL)
DYNAMIC_SHARED = re.compile(
    r"extern\s+__shared__\s+(?:__align__\(\s*\d+\s*\)\s+)?([A-Za-z_][\w:\s]*?)\s+(\w+)\s*\[\s*\]\s*;"
)
SKIPPED_DIRS = {"emulator", "bindings"}


def rewrite(text):
    def launch(match):
        return f" | ::adcuda::emu::LaunchConfig({match.group(1)}) | ::adcuda::emu::kernel_arguments"

    def dynamic_shared(match):
        element, name = match.group(1).strip(), match.group(2)
        return f"{element}* const {name} = reinterpret_cast<{element}*>(::adcuda::emu::dynamic_shared_memory());"

    return DYNAMIC_SHARED.sub(dynamic_shared, LAUNCH.sub(launch, text))


def write_if_changed(path, text):
    try:
        with open(path, encoding="utf-8") as handle:
            if handle.read() == text:
                return
    except FileNotFoundError:
        pass
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text)


def main(argv):
    if len(argv) != 3:
        sys.exit(__doc__.strip().splitlines()[-1])
    source_dir, output_dir = os.path.abspath(argv[1]), os.path.abspath(argv[2])
    mirrored = set()
    for root, dirs, files in os.walk(source_dir):
        dirs[:] = [d for d in dirs if d not in SKIPPED_DIRS]
        for name in files:
            if not name.endswith((".cu", ".cuh", ".h")):
                continue
            source = os.path.join(root, name)
            relative = os.path.relpath(source, source_dir)
            with open(source, encoding="utf-8") as handle:
                text = handle.read()
            if name.endswith((".cu", ".cuh")):
                escaped = source.replace("\\", "\\\\").replace('"', '\\"')
                text = f'#line 1 "{escaped}"\n' + rewrite(text)
            target = os.path.join(output_dir, relative + (".cpp" if name.endswith(".cu") else ""))
            write_if_changed(target, text)
            mirrored.add(os.path.normpath(target))
    remove_stale_mirrors(output_dir, mirrored)


def remove_stale_mirrors(output_dir, mirrored):
    """Delete mirrors whose source is gone (a header renamed or a .cu split in two): the mirror
    directory comes first on the include path, so a stale copy would shadow nothing today but be
    found by a later #include of its old name instead of an error."""
    for root, _, files in os.walk(output_dir):
        for name in files:
            path = os.path.normpath(os.path.join(root, name))
            if name.endswith((".cu.cpp", ".cuh", ".h")) and path not in mirrored:
                os.remove(path)


if __name__ == "__main__":
    main(sys.argv)
