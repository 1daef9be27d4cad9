#!/usr/bin/env python3
"""Reads the machine code (SASS) of adcuda's compiled kernels, without a GPU, and checks it against
kernels/sass_expectations.txt:

    python scripts/sass_check.py [BINARY] [--table FILE] [--report]

BINARY is the built module (default: the installed ``adcuda._C``) or a .cubin. It is disassembled with
``cuobjdump -sass`` (which runs nvdisasm) and ``cuobjdump -res-usage``: the two tools come from the
``nvidia-cuda-cuobjdump`` and ``nvidia-cuda-nvdisasm`` wheels, which the ``test`` extra installs, or a
CUDA toolkit (``ADCUDA_CUOBJDUMP`` / ``ADCUDA_NVDISASM`` name others). For every kernel and every
architecture in the binary:

- a kernel matched by a row of the table must not touch local memory (no STL/LDL: neither spilled
  registers nor a local array), must have at least the row's tensor-core instructions (HMMA, or
  Hopper's HGMMA) in its main loop, and at most the row's instructions in that loop. A row whose
  pattern starts with an architecture (``sm_90a:*name*``) applies to that architecture's code only, and
  only where the binary has some; a must-hold opcode written ``loop:OPCODE`` may sit in any loop of the
  kernel (a warp-specialised kernel's producer loop, beside the consumers' main loop).

Machine code cannot tell a spilled register from a local array (both are STL/LDL to the stack frame,
and some kernels index small arrays at run time by design), so spills in the other kernels are caught
where they are known exactly: ptxas reports every spilling kernel (-warn-spills) and CI's build makes
that an error (ADCUDA_SPILLS_ARE_ERRORS=ON).

The main loop is the innermost loop (a backward branch and the code it jumps over) holding the most
tensor-core instructions, or, in a kernel without any, the most floating-point multiply-adds (then the
most floating-point arithmetic of any kind). Each row
must match some kernel of the binary, so a renamed kernel cannot silently drop out of the check.
Only the listed kernels are disassembled (seconds, where the whole module takes minutes); every
kernel's resource usage is read. ``--report`` prints, per listed kernel and architecture: registers,
static shared memory, stack, tensor-core instructions in the main loop and in the whole kernel, and
the main loop's length; then the kernels that have a stack frame at all.
Exit status: 0 when every check passes, 1 otherwise, 2 when the binary cannot be read.
"""

import argparse
import fnmatch
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT_TABLE = REPO / "kernels" / "sass_expectations.txt"

_INSTRUCTION = re.compile(r"^\s*/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;")
_PREDICATE = re.compile(r"^@!?U?P[0-9T]+\s+")
_BRANCH_TARGET = re.compile(r"(0x[0-9a-f]+)\s*$")
TENSOR_CORE_OPCODES = ("HMMA", "HGMMA")
FMA_OPCODES = ("FFMA", "DFMA", "HFMA2")
FLOAT_OPCODES = FMA_OPCODES + ("FADD", "FMUL", "MUFU", "DADD", "DMUL", "HADD2", "HMUL2")
SPILL_OPCODES = ("LDL", "STL")


class SassError(RuntimeError):
    """The binary could not be disassembled (no cuobjdump, no SASS in it)."""


@dataclass
class Instruction:
    address: int
    opcode: str  # with its modifiers, e.g. HMMA.16816.F32.BF16
    text: str


@dataclass
class Loop:
    start: int  # address of the first instruction (the branch target)
    end: int  # address of the backward branch
    instructions: list

    def count(self, prefixes):
        return sum(1 for i in self.instructions if i.opcode.split(".")[0] in prefixes)

    def holds(self, wanted):
        """Whether an instruction is ``wanted``: an opcode (LDGSTS) or an opcode with modifiers it must
        carry among its own (LDG.128 or LDG.E.128 for a 16-byte load, STG.128 for STG.E.EF.128)."""
        name, *modifiers = wanted.split(".")
        for i in self.instructions:
            opcode, *own = i.opcode.split(".")
            if opcode == name and set(modifiers) <= set(own):
                return True
        return False


@dataclass
class Kernel:
    name: str  # mangled
    arch: str  # e.g. sm_90
    instructions: list = field(default_factory=list)
    registers: int = None
    shared: int = None
    local: int = None
    stack: int = None
    demangled: str = None

    def count(self, prefixes):
        return sum(1 for i in self.instructions if i.opcode.split(".")[0] in prefixes)

    def loops(self):
        by_address = {i.address: n for n, i in enumerate(self.instructions)}
        loops = []
        for n, ins in enumerate(self.instructions):
            if ins.opcode.split(".")[0] != "BRA":
                continue
            target = _BRANCH_TARGET.search(ins.text)
            if not target:
                continue
            address = int(target.group(1), 16)
            if address <= ins.address and address in by_address:
                body = [i for i in self.instructions[by_address[address] : n + 1] if i.opcode != "NOP"]
                loops.append(Loop(address, ins.address, body))
        return loops

    def main_loop(self):
        """The innermost loop with the most tensor-core instructions (or, without any, FMAs; then other
        floating-point arithmetic, for a kernel whose loops hold no FMA, e.g. exp2 and adds)."""
        # the branch to itself after EXIT that ends every kernel is no loop of its work
        loops = [loop for loop in self.loops() if len(loop.instructions) > 1]
        if not loops:
            return None
        if self.count(TENSOR_CORE_OPCODES):
            # the shortest of the loops with the most mma: the k-loop, not a loop around it
            return max(loops, key=lambda loop: (loop.count(TENSOR_CORE_OPCODES), -len(loop.instructions)))
        # innermost: an outer loop (a kernel's loop over rows) holds all of its inner loops' work
        loops = [
            loop
            for loop in loops
            if not any(o is not loop and loop.start <= o.start and o.end <= loop.end for o in loops)
        ]
        return max(
            loops, key=lambda loop: (loop.count(FMA_OPCODES), loop.count(FLOAT_OPCODES), -len(loop.instructions))
        )

    def spill_instructions(self):
        return [i for i in self.instructions if i.opcode.split(".")[0] in SPILL_OPCODES]


@dataclass
class Expectation:
    pattern: str
    min_tensor_core: int  # in the main loop; 0: no requirement
    max_main_loop: int  # None: no budget
    why: str
    line: int
    must_hold: tuple = ()  # opcodes (LDGSTS, LDSM; with modifiers: LDG.128) the main loop must contain
    arch: str = None  # e.g. sm_90a: the row applies to that architecture's code only


def find_tool(tool):
    """`tool` (cuobjdump, or nvdisasm, which cuobjdump -sass runs): $ADCUDA_<TOOL>, PATH, the
    nvidia-cuda-<tool> wheel, or a CUDA toolkit."""
    named = os.environ.get(f"ADCUDA_{tool.upper()}")
    if named:
        return named
    found = shutil.which(tool)
    if found:
        return found
    try:
        import nvidia  # the namespace package the NVIDIA wheels install into

        wheel_dirs = list(nvidia.__path__)
    except ImportError:
        wheel_dirs = []
    for directory in wheel_dirs:
        for relative in (f"cu13/bin/{tool}", f"cuda_{tool}/bin/{tool}"):
            candidate = Path(directory) / relative
            if candidate.is_file():
                return str(candidate)
    for home in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if home and (Path(home) / "bin" / tool).is_file():
            return str(Path(home) / "bin" / tool)
    raise SassError(
        f"{tool} not found: install the nvidia-cuda-{tool} wheel (pip install 'adcuda[test]'), put a "
        f"CUDA toolkit's bin/ on PATH, or name it in ADCUDA_{tool.upper()}"
    )


def find_cuobjdump():
    return find_tool("cuobjdump")


def _run(cuobjdump, arguments, binary):
    # cuobjdump -sass runs nvdisasm, looked up on PATH only (not beside cuobjdump, where the wheels put it)
    env = dict(os.environ)
    if "-sass" in arguments:
        env["PATH"] = os.pathsep.join([str(Path(find_tool("nvdisasm")).parent), env.get("PATH", "")])
    # stdin: an empty one, never the caller's. Run with standard input closed (as CI runs .ci/run), cuobjdump's
    # temporary cubin is opened as file descriptor 0, which it then hands nvdisasm as stdin, and nvdisasm
    # finds the file gone: "Could not open input file /tmp/tmpxft_..." and every kernel "not found".
    proc = subprocess.run(
        [cuobjdump, *arguments, str(binary)], stdin=subprocess.DEVNULL, capture_output=True, text=True, env=env
    )
    if proc.returncode != 0:
        raise SassError(
            f"{cuobjdump} {' '.join(arguments)} {binary} failed: {proc.stderr.strip() or proc.stdout.strip()}"
        )
    return proc.stdout


def parse_sass(text):
    """cuobjdump -sass output -> {(arch, mangled name): Kernel}."""
    kernels = {}
    arch = None
    current = None
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("code for sm_"):
            arch = stripped.split()[-1]
            current = None
        elif stripped.startswith("Function :"):
            name = stripped.split(":", 1)[1].strip()
            current = kernels.setdefault((arch, name), Kernel(name, arch))
        elif current is not None:
            match = _INSTRUCTION.match(line)
            if match:
                text_ = _PREDICATE.sub("", match.group(2).strip())
                opcode = text_.split()[0] if text_ else ""
                current.instructions.append(Instruction(int(match.group(1), 16), opcode, text_))
    return kernels


def parse_resource_usage(text):
    """cuobjdump -res-usage output -> {(arch, mangled name): Kernel} with REG / SHARED / LOCAL / STACK
    (arch None for a .cubin, whose listing names no architecture)."""
    kernels = {}
    arch = None
    name = None
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("arch = "):
            arch = stripped.split("=", 1)[1].strip()
        elif stripped.startswith("Function ") and stripped.endswith(":"):
            name = stripped[len("Function ") : -1].strip()
        elif name is not None and stripped.startswith("REG:"):
            values = dict(item.split(":", 1) for item in stripped.split() if ":" in item)
            kernels[(arch, name)] = Kernel(
                name,
                arch,
                registers=int(values["REG"]),
                shared=int(values["SHARED"]),
                local=int(values["LOCAL"]),
                stack=int(values["STACK"]),
            )
            name = None
    return kernels


def attach_sass(kernels, sass):
    """Give the kernels of a resource-usage listing their instructions from a -sass listing."""
    for (arch, name), listed in sass.items():
        kernel = kernels.get((arch, name)) or kernels.get((None, name))
        if kernel is not None:
            kernel.arch = arch
            kernel.instructions = listed.instructions


def demangle(kernels):
    names = sorted({k.name for k in kernels.values()})
    tool = shutil.which("c++filt")
    demangled = names
    if tool and names:
        proc = subprocess.run([tool], input="\n".join(names), capture_output=True, text=True)
        if proc.returncode == 0 and len(proc.stdout.splitlines()) == len(names):
            demangled = proc.stdout.splitlines()
    table = dict(zip(names, demangled))
    for kernel in kernels.values():
        kernel.demangled = table[kernel.name]


def disassemble(binary, expectations, cuobjdump=None):
    """Every kernel of `binary` with its resource usage; the ones a row of `expectations` matches also
    with their instructions (disassembling only those keeps the check to seconds)."""
    cuobjdump = cuobjdump or find_cuobjdump()
    kernels = parse_resource_usage(_run(cuobjdump, ["-res-usage"], binary))
    if not kernels:
        raise SassError(f"{binary} holds no SASS (a build with PTX only, or no CUDA kernels): nothing to check")
    demangle(kernels)
    wanted = sorted({k.name for k in kernels.values() if any(matches(row, k, by_arch=False) for row in expectations)})
    if wanted:
        attach_sass(kernels, parse_sass(_run(cuobjdump, ["-sass", "-fun", ",".join(wanted)], binary)))
    return kernels


def load_table(path):
    """The expectations: one row per line, `pattern | min tensor-core | max main loop | why`, or with a
    fifth cell before the why, `pattern | min tensor-core | max main loop | must hold | why`."""
    rows = []
    for number, raw in enumerate(Path(path).read_text().splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        cells = [cell.strip() for cell in line.split("|")]
        if len(cells) not in (4, 5):
            raise ValueError(f"{path}:{number}: expected 4 or 5 '|'-separated cells, got {len(cells)}: {raw!r}")
        pattern, tensor_core, budget, *must_hold, why = cells
        must_hold = tuple(must_hold[0].split()) if must_hold and must_hold[0] != "-" else ()
        arch = re.match(r"(sm_\d+[af]?):(.+)$", pattern)
        if arch:
            arch, pattern = arch[1], arch[2]
        rows.append(
            Expectation(
                pattern,
                0 if tensor_core in ("", "-") else int(tensor_core),
                None if budget in ("", "-") else int(budget),
                why,
                number,
                must_hold,
                arch,
            )
        )
    return rows


def matches(expectation, kernel, by_arch=True):
    """Whether the row names the kernel (and its architecture, which only the disassembly tells)."""
    if by_arch and expectation.arch is not None and kernel.arch != expectation.arch:
        return False
    return any(fnmatch.fnmatchcase(name, expectation.pattern) for name in (kernel.name, kernel.demangled or ""))


def holds(kernel, loop, wanted):
    """Whether the main loop holds ``wanted``, or, written ``loop:OPCODE``, any loop of the kernel does."""
    if wanted.startswith("loop:"):
        return any(other.holds(wanted[len("loop:") :]) for other in kernel.loops())
    return bool(loop and loop.holds(wanted))


def check(kernels, expectations):
    """Every failed check as a line of text (empty: all passed)."""
    failures = []
    for row in expectations:
        matched = [k for k in kernels.values() if matches(row, k)]
        if row.arch is not None and not any(k.arch == row.arch for k in kernels.values()):
            continue  # the binary has no code for the row's architecture
        if not matched:
            failures.append(f"sass_expectations.txt:{row.line}: '{row.pattern}' matches no kernel of the binary")
        for kernel in matched:
            local = kernel.spill_instructions()
            if local or kernel.local or kernel.stack:
                failures.append(
                    f"{kernel.arch} {kernel.demangled}: local memory (spills or a local array): "
                    f"{kernel.stack} bytes of stack, {len(local)} LDL/STL instructions, e.g. "
                    f"{local[0].text if local else '-'}"
                )
            loop = kernel.main_loop()
            in_loop = loop.count(TENSOR_CORE_OPCODES) if loop else 0
            if row.min_tensor_core and kernel.count(TENSOR_CORE_OPCODES) == 0:
                failures.append(f"{kernel.arch} {kernel.demangled}: no tensor-core instruction (HMMA/HGMMA) at all")
            elif row.min_tensor_core and in_loop < row.min_tensor_core:
                failures.append(
                    f"{kernel.arch} {kernel.demangled}: {in_loop} tensor-core instructions in the main "
                    f"loop, expected at least {row.min_tensor_core} (row {row.line})"
                )
            missing = [opcode for opcode in row.must_hold if not holds(kernel, loop, opcode)]
            if missing:
                failures.append(
                    f"{kernel.arch} {kernel.demangled}: no {' '.join(missing)} in the main loop "
                    f"(row {row.line}: {row.why})"
                )
            if row.max_main_loop is not None:
                length = len(loop.instructions) if loop else 0
                if loop is None:
                    failures.append(f"{kernel.arch} {kernel.demangled}: no loop found for the main-loop budget")
                elif length > row.max_main_loop:
                    failures.append(
                        f"{kernel.arch} {kernel.demangled}: main loop of {length} instructions, budget "
                        f"{row.max_main_loop} (row {row.line}: {row.why})"
                    )
    return failures


def report(kernels, expectations):
    lines = [f"{'arch':6} {'regs':>4} {'shared':>6} {'stack':>5} {'mma/loop':>8} {'mma':>5} {'loop':>5}  kernel"]
    for kernel in sorted(kernels.values(), key=lambda k: (k.demangled or k.name, k.arch or "")):
        if not any(matches(row, kernel) for row in expectations):
            continue
        loop = kernel.main_loop()
        lines.append(
            f"{kernel.arch or '?':6} {kernel.registers:>4} {kernel.shared:>6} {kernel.stack:>5} "
            f"{loop.count(TENSOR_CORE_OPCODES) if loop else 0:>8} {kernel.count(TENSOR_CORE_OPCODES):>5} "
            f"{len(loop.instructions) if loop else 0:>5}  {kernel.demangled}"
        )
    with_local = sorted({k.demangled or k.name for k in kernels.values() if k.stack or k.local})
    lines.append(
        f"{len(kernels)} kernels; {len(with_local)} have a stack frame (a local array, or spills, which "
        "ptxas -warn-spills reports at build time):"
    )
    lines += [f"  {name[:160]}" for name in with_local]
    return "\n".join(lines)


def installed_module():
    import adcuda._native as native

    module = native._C
    if not getattr(module, "__file__", None):
        raise SassError("adcuda._C is not loaded (a build without the native module)")
    return module.__file__


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("binary", nargs="?", help="the module or .cubin to read (default: the installed adcuda._C)")
    parser.add_argument("--table", default=str(DEFAULT_TABLE), help="the expectations table")
    parser.add_argument("--report", action="store_true", help="print the figures of every listed kernel")
    args = parser.parse_args(argv)
    expectations = load_table(args.table)
    try:
        kernels = disassemble(args.binary or installed_module(), expectations)
    except SassError as error:
        print(f"sass_check: {error}", file=sys.stderr)
        return 2
    if args.report:
        print(report(kernels, expectations))
    failures = check(kernels, expectations)
    for failure in failures:
        print(f"FAIL {failure}")
    print(f"sass_check: {len(kernels)} kernels, {len(expectations)} expectations, {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
