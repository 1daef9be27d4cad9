#!/usr/bin/env python3
"""Measures what each step of adcuda's native build costs in compiler CPU time, and estimates the wall
time of the build on N idle cores from it:

    python scripts/compile_times.py BUILD_DIR [--cores 2] [--jobs 2] [--only REGEX] [--json FILE]

BUILD_DIR is a configured CMake/Ninja build folder of adcuda (e.g. the one `pip install . -Cbuild-dir=X`
leaves behind, or `cmake -S . -B X -G Ninja ...`). Every compile command of the module
(`ninja -t commands`) is run again, ccache off (CCACHE_DISABLE=1), at most --jobs at a time, and the
user + system CPU time of it and all its children (nvcc's cicc, ptxas, fatbinary, the host compiler) is
read from the kernel (wait4). The link is measured the same way after the compiles.

CPU time, unlike wall time, hardly depends on what else the machine runs, which is why it is what this
measures: on a shared machine the wall time of a build says little. The estimate of the wall time on
--cores idle cores replays the build as ninja runs it: commands started in ninja's order (that of
`ninja -t commands`, which CMakeLists.txt makes slowest-first), at most `cores + 2` at once (ninja's
default -j), a command's precompiled header, if any, finished first, running commands sharing the
cores equally; then the link. CPU time grows with the machine's load (shared caches and cores), so
compare figures taken under the same load, or files measured side by side. pip's and CMake's own
work (configure, the wheel) comes on top and is not included: measure it with
`/usr/bin/time pip install ...`.
"""

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path


def ninja_commands(build_dir, target):
    """Ninja's commands for the target, in the order ninja would start them (dependencies first)."""
    text = subprocess.run(
        ["ninja", "-C", str(build_dir), "-t", "commands", target], check=True, capture_output=True, text=True
    ).stdout
    return [line for line in text.splitlines() if line.strip()]


def output_of(command):
    """The file a compile or link command writes (its -o argument)."""
    words = shlex.split(command)
    for i, word in enumerate(words):
        if word == "-o" and i + 1 < len(words):
            return words[i + 1]
    return None


def pch_dependency(command, pch_outputs):
    """The precompiled header a compile command includes, if any (ninja builds it first)."""
    for pch in pch_outputs:
        header = pch[: -len(".gch")]
        if header in command and "-o " + pch not in command:
            return pch
    return None


def run_measured(command, cwd, env):
    """Runs one shell command; returns (cpu seconds of it and its children, wall seconds, exit status)."""
    start = time.monotonic()
    process = subprocess.Popen(command, shell=True, cwd=cwd, env=env)
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    return usage.ru_utime + usage.ru_stime, time.monotonic() - start, process.returncode


def measure(build_dir, commands, jobs, env):
    """Runs the commands (dependencies first, at most `jobs` at once); returns per-command results."""
    results = {}
    pending = list(commands)
    running = {}
    while pending or running:
        while pending and len(running) < jobs:
            ready = next((c for c in pending if c["after"] is None or c["after"] in results), None)
            if ready is None:
                break
            pending.remove(ready)
            # a build folder that was configured but never built has no object folders yet
            (build_dir / ready["output"]).parent.mkdir(parents=True, exist_ok=True)
            start = time.monotonic()
            process = subprocess.Popen(ready["command"], shell=True, cwd=build_dir, env=env)
            running[process.pid] = (ready, process, start)
        pid, status, usage = os.wait4(-1, 0)
        if pid not in running:
            continue
        entry, process, start = running.pop(pid)
        code = process.returncode = os.waitstatus_to_exitcode(status)
        if code != 0:
            sys.exit(f"compile_times: failed ({code}): {entry['command']}")
        results[entry["output"]] = {"cpu": usage.ru_utime + usage.ru_stime, "wall": time.monotonic() - start}
        print(f"  {results[entry['output']]['cpu']:7.1f} s  {short_name(entry['output'])}", flush=True)
    return results


def short_name(output):
    """kernels/reduce.cu for CMakeFiles/_C.dir/kernels/reduce.cu.o."""
    name = re.sub(r"^CMakeFiles/[^/]+\.dir/", "", output)
    return re.sub(r"\.o$", "", name)


def simulate(commands, cpu, cores, jobs):
    """Wall time of running the commands as ninja would on `cores` idle cores with -j `jobs`: started in
    order when a slot is free and their dependency is done, the running ones sharing the cores equally."""
    pending = list(commands)
    remaining = {}
    done = set()
    clock = 0.0
    while pending or remaining:
        for c in list(pending):
            if len(remaining) >= jobs:
                break
            if c["after"] is None or c["after"] in done:
                pending.remove(c)
                remaining[c["output"]] = cpu[c["output"]]
        if not remaining:
            raise RuntimeError("dependency cycle")
        rate = min(1.0, cores / len(remaining))
        step = min(remaining.values()) / rate
        clock += step
        for output in list(remaining):
            remaining[output] -= step * rate
            if remaining[output] <= 1e-9:
                del remaining[output]
                done.add(output)
    return clock


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("build_dir", type=Path)
    parser.add_argument("--target", default="_C", help="the ninja target (default: _C, the module)")
    parser.add_argument("--cores", type=int, default=2, help="cores of the machine the estimate is for")
    parser.add_argument("--jobs", type=int, default=2, help="compiles measured at once (default 2)")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    args = parser.parse_args()

    lines = ninja_commands(args.build_dir, args.target)
    compiles, links = [], []
    for line in lines:
        output = output_of(line)
        if output is None:
            continue
        (links if not output.endswith((".o", ".gch")) else compiles).append({"command": line, "output": output})
    pch_outputs = [c["output"] for c in compiles if c["output"].endswith(".gch")]
    for c in compiles:
        c["after"] = pch_dependency(c["command"], pch_outputs)

    env = dict(os.environ, CCACHE_DISABLE="1")
    print(f"compile_times: {len(compiles)} compiles in {args.build_dir}, {args.jobs} at a time, ccache off")
    results = measure(args.build_dir, compiles, args.jobs, env)
    link_cpu = 0.0
    for link in links:
        link_cpu_one, _, code = run_measured(link["command"], args.build_dir, env)
        if code != 0:
            sys.exit(f"compile_times: link failed ({code}): {link['command']}")
        link_cpu += link_cpu_one

    cpu = {output: r["cpu"] for output, r in results.items()}
    total = sum(cpu.values())
    longest = max(cpu.values())
    ninja_jobs = args.cores + 2
    wall = simulate(compiles, cpu, args.cores, ninja_jobs)
    slowest_first = sorted(compiles, key=lambda c: -cpu[c["output"]])
    wall_slowest_first = simulate(slowest_first, cpu, args.cores, ninja_jobs)

    print(f"\n{'CPU s':>8}  object")
    for output in sorted(cpu, key=cpu.get, reverse=True):
        print(f"{cpu[output]:8.1f}  {short_name(output)}")
    print(f"{link_cpu:8.1f}  (link)")
    print(
        f"\ncompiles: {total:.1f} s of CPU in {len(cpu)} objects, the longest {longest:.1f} s; link {link_cpu:.1f} s\n"
        f"on {args.cores} idle cores (ninja -j{ninja_jobs}, its start order): {wall:.1f} s of compiling "
        f"+ {link_cpu:.1f} s link = {wall + link_cpu:.1f} s "
        f"(slowest first: {wall_slowest_first + link_cpu:.1f} s; lower bound max(sum/{args.cores}, longest) "
        f"+ link = {max(total / args.cores, longest) + link_cpu:.1f} s)"
    )
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "objects": {short_name(o): round(c, 2) for o, c in cpu.items()},
                    "link": round(link_cpu, 2),
                    "total": round(total, 2),
                    "estimated_wall": round(wall + link_cpu, 2),
                    "cores": args.cores,
                },
                indent=1,
            )
        )


if __name__ == "__main__":
    main()
