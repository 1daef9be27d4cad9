"""The bookkeeping of scripts/gpu_check.sh: verdicts of its steps from their logs and results, the
merged benchmark JSON, and OUTDIR/summary.md. Standard library only (it runs before and after the
build, with whatever interpreter the check was given).

    gpu_check_report.py merge-bench --bench-json OUT/bench.json --suite NAME --script FILE --status N
                                    --seconds S --result SUITE.json --log bench.log
    gpu_check_report.py pytest-verdict --log pytest.log --status N [--status N ...]
    gpu_check_report.py sanitizer-verdict --log sanitizer.log --status N
    gpu_check_report.py summary --steps steps.tsv --out OUTDIR --mode TEXT --budget S --elapsed S

Each verdict is one line on stdout, "OK <what>" or "FAILED <why>"; a step whose tests or benchmarks
all skipped is FAILED (a check that cannot fail is worth nothing). The benchmark JSON keeps the schema
of benchmarks/run.py (one record per suite under "suites").
"""

import argparse
import datetime
import json
import os
import platform
import re
import statistics
import sys

KILLED = 124  # timeout's exit status
SECTION = re.compile(r"^== \d\d:\d\d:\d\d \(limit \d+ s\): ", re.M)  # gpu_check.sh's `timed` header


def last_sections(path, count):
    """The outputs of the latest ``count`` commands `timed` appended to the log at ``path``, oldest first."""
    try:
        with open(path, errors="replace") as f:
            text = f.read()
    except FileNotFoundError:
        return [""] * count
    starts = [m.start() for m in SECTION.finditer(text)] or [0]
    starts = starts[-count:]
    sections = [text[a:b] for a, b in zip(starts, starts[1:] + [len(text)])]
    return [""] * (count - len(sections)) + sections


def last_section(path):
    """The output of the latest command `timed` appended to the log at ``path``."""
    return last_sections(path, 1)[0]


def last_lines(text, count=1):
    lines = [line.strip() for line in text.strip().splitlines() if line.strip() and not line.startswith("== ")]
    return " | ".join(lines[-count:]) if lines else "no output"


# ---- benchmarks ------------------------------------------------------------------------------------
def bench_verdict(status, result, output):
    """(verdict line, record status) of one suite's run."""
    if status == KILLED:
        return f"FAILED killed at its time limit (bench.log: {last_lines(output)})", "failed"
    if status != 0:
        return f"FAILED exit status {status}: {last_lines(output, 2)}", "failed"
    if result is None:
        return f"FAILED wrote no results, so nothing was measured: {last_lines(output)}", "skipped"
    if result.get("emulated"):
        checks = int(result.get("checks", 0))
        if checks <= 0:
            return "FAILED emulated run with no reference check", "failed"
        return f"OK emulated: no timing ({checks} reference check(s) passed)", "emulated"
    rows = [row for row in result.get("rows", []) if any(v for v in (row.get("seconds") or {}).values())]
    if not rows:
        return "FAILED no benchmark case produced a time (all skipped)", "skipped"
    ratios = [r for row in rows for r in (row.get("ratio_adcuda_over") or {}).values() if r]
    text = f"{len(rows)} cases timed"
    if ratios:
        text += f", median adcuda/contender time {statistics.median(ratios):.2f}x over {len(ratios)} ratios"
    return "OK " + text, "ok"


def merge_bench(args):
    output = last_section(args.log)
    result = None
    if os.path.exists(args.result):
        try:
            with open(args.result) as f:
                result = json.load(f)
        except (OSError, ValueError) as e:
            print(f"FAILED its JSON is unreadable: {e}")
            return 0
    verdict, status = bench_verdict(args.status, result, output)
    try:
        with open(args.bench_json) as f:
            merged = json.load(f)
    except (OSError, ValueError):
        merged = {
            "schema": 1,
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(),
            "device": "cuda",
            "quick": True,
            "machine": {"python": platform.python_version(), "platform": platform.platform(), "cpus": os.cpu_count()},
            "suites": {},
        }
    record = {"script": args.script, "device": "cuda", "status": status, "wall_seconds": args.seconds}
    if status not in ("ok", "emulated"):
        record["reason"] = verdict.split(" ", 1)[1]
    if result is not None:
        record["result"] = result
    merged["suites"][args.suite] = record
    temporary = args.bench_json + ".tmp"
    with open(temporary, "w") as f:
        json.dump(merged, f, indent=2)
    os.replace(temporary, args.bench_json)  # whole or not at all, even if the run is killed now
    print(verdict)
    return 0


# ---- tests -----------------------------------------------------------------------------------------
COUNT = re.compile(r"(\d+) (passed|failed|skipped|errors?|xfailed|xpassed|deselected)")


def pytest_counts(text):
    """{"passed": n, ...} from pytest's last summary line ("12 passed, 3 skipped in 4.5s")."""
    for line in reversed(text.splitlines()):
        if re.search(r"\b(passed|failed|skipped|errors?|deselected|no tests ran)\b.* in [\d.]+s", line):
            counts = {}
            for number, word in COUNT.findall(line):
                counts["error" if word.startswith("error") else word] = int(number)
            return counts, line.strip("= ").strip()
    return None, None


NO_TESTS_RAN = 5  # pytest's exit status when the selection is empty


def pytest_verdict(args):
    """The verdict of one or more pytest runs (the last len(args.status) sections of the log, one exit
    status each), counted together."""
    sections = last_sections(args.log, len(args.status))
    text = "\n".join(sections)
    counts, lines = {}, []
    for section in sections:
        section_counts, line = pytest_counts(section)
        if section_counts is not None:
            lines.append(line)
            for key, value in section_counts.items():
                counts[key] = counts.get(key, 0) + value
    line = " + ".join(lines)
    failures = re.findall(r"^(?:FAILED|ERROR) (\S+)", text, re.M)
    bad_status = [s for s in args.status if s not in (0, NO_TESTS_RAN)]
    if KILLED in args.status:
        print(f"FAILED killed at its time limit{': ' + line if line else ''} (pytest.log)")
    elif not lines:
        print(f"FAILED pytest reported no result (exit status {args.status}): {last_lines(text, 2)}")
    elif counts.get("passed", 0) == 0:
        reason = re.search(r"^SKIPPED \[\d+\] [^:]+:\d+: (.*)$", text, re.M)
        print(
            f"FAILED no test passed ({line}), so nothing was checked"
            + (f"; first skip reason: {reason.group(1)}" if reason else "")
        )
    elif counts.get("failed", 0) or counts.get("error", 0) or bad_status:
        shown = ", ".join(failures[:5]) + (f" and {len(failures) - 5} more" if len(failures) > 5 else "")
        print(f"FAILED {line}{': ' + shown if shown else ''} (exit status {', '.join(map(str, args.status))})")
    else:
        print(f"OK {line}")
    return 0


# ---- sanitizers ------------------------------------------------------------------------------------
def sanitizer_verdict(args):
    text = last_section(args.log)
    summaries = re.findall(r"^=+ ((?:ERROR|RACECHECK) SUMMARY: .*)$", text, re.M)
    errors = sum(int(n) for s in summaries for n in re.findall(r"(\d+) errors?", s))
    workload = re.search(r"^cuda runtime workload: .*$", text, re.M)
    right = workload is not None and "all results right" in workload.group(0)
    said = "; ".join(summaries) or "no sanitizer summary"
    if args.status == KILLED:
        print(f"FAILED killed at its time limit ({last_lines(text)})")
    elif not right:
        print(
            f"FAILED the workload did not finish with all results right: "
            f"{workload.group(0) if workload else last_lines(text, 2)}"
        )
    elif errors or args.status != 0:
        print(f"FAILED {said} (exit status {args.status})")
    else:
        print(f"OK {workload.group(0).split(': ', 1)[1]}; {said}")
    return 0


# ---- summary ---------------------------------------------------------------------------------------
def _cell(value, scale):
    return "-" if value is None else f"{value * scale:.2f}"


def bench_section(bench):
    lines = []
    for suite, record in (bench.get("suites") or {}).items():
        result = record.get("result") or {}
        lines.append(f"\n### {suite}: {record.get('status')} ({record.get('wall_seconds', 0)} s)")
        if record.get("reason"):
            lines.append(f"\n{record['reason']}")
        if result.get("emulated"):
            lines.append(f"\n{result.get('status')} ({result.get('checks')} reference checks passed)")
            continue
        rows = result.get("rows") or []
        if not rows:
            continue
        contenders = sorted({n for row in rows for n in (row.get("seconds") or {})}, key=lambda n: n != "adcuda")
        others = [n for n in contenders if n != "adcuda"]
        moved = result.get("bytes_moved") or {}
        copy_rate = result.get("copy_bandwidth_bytes_per_s")
        head = ["case"] + [f"{n} (us)" for n in contenders] + [f"adcuda/{n}" for n in others]
        if moved and copy_rate:
            head += ["adcuda GB/s", "% of copy"]
        lines += ["", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for row in rows:
            seconds = row.get("seconds") or {}
            ratios = row.get("ratio_adcuda_over") or {}
            cells = [str(row.get("case"))] + [_cell(seconds.get(n), 1e6) for n in contenders]
            cells += [f"{ratios[n]:.2f}x" if ratios.get(n) else "-" for n in others]
            if moved and copy_rate:
                nbytes, mine = moved.get(row.get("case")), seconds.get("adcuda")
                if nbytes and mine:
                    cells += [f"{nbytes / mine / 1e9:.1f}", f"{100 * nbytes / mine / copy_rate:.1f}%"]
                else:
                    cells += ["-", "-"]
            lines.append("| " + " | ".join(cells) + " |")
        if copy_rate:
            lines.append(f"\ncopy bandwidth (the yardstick): {copy_rate / 1e9:.1f} GB/s")
    return lines


def summary(args):
    steps = []
    with open(args.steps) as f:
        for line in f:
            name, status, seconds, detail = (line.rstrip("\n").split("\t") + ["", "", ""])[:4]
            steps.append((name, status, seconds, detail))
    failed = [s for s in steps if s[1] != "OK"]
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%SZ")
    lines = [
        f"# adcuda gpu_check: {args.mode}",
        "",
        f"{now}; budget {args.budget} s, {args.elapsed} s used; {len(steps) - len(failed)} of {len(steps)} "
        f"step(s) passed, {len(failed)} failed.",
        "",
        "| step | status | seconds | result |",
        "|---|---|---|---|",
    ]
    lines += [
        f"| {name} | {status} | {seconds} | {detail.replace('|', '/')} |" for name, status, seconds, detail in steps
    ]
    if failed:
        lines += ["", "## Failed", ""] + [f"- **{name}**: {detail}" for name, _, _, detail in failed]
    bench_path = os.path.join(args.out, "bench.json")
    if os.path.exists(bench_path):
        try:
            with open(bench_path) as f:
                bench = json.load(f)
            lines += ["", "## Benchmarks (times in us; adcuda/X below 1: adcuda faster)"] + bench_section(bench)
        except (OSError, ValueError) as e:
            lines += ["", f"bench.json is unreadable: {e}"]
    pytest_log = os.path.join(args.out, "pytest.log")
    if os.path.exists(pytest_log):
        with open(pytest_log, errors="replace") as f:
            text = f.read()
        runs = [pytest_counts(section)[1] for section in re.split(SECTION, text)[1:]]
        bad = re.findall(r"^(?:FAILED|ERROR) .*$", text, re.M)
        lines += ["", "## Tests", ""] + [f"- {line or 'no pytest summary line'}" for line in runs]
        if bad:
            lines += [""] + [f"- {b[:300]}" for b in bad[:40]]
            lines += [f"- ... {len(bad) - 40} more"] if len(bad) > 40 else []
    sanitizer_log = os.path.join(args.out, "sanitizer.log")
    if os.path.exists(sanitizer_log):
        with open(sanitizer_log, errors="replace") as f:
            said = re.findall(r"^(?:=+ (?:ERROR|RACECHECK) SUMMARY: .*|cuda runtime workload: .*)$", f.read(), re.M)
        lines += ["", "## Sanitizers", ""] + [f"- {s.lstrip('= ')}" for s in said]
    print("\n".join(lines))
    return 0


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    merge = commands.add_parser("merge-bench")
    for name in ("--bench-json", "--suite", "--script", "--result", "--log"):
        merge.add_argument(name, required=True)
    merge.add_argument("--status", type=int, required=True)
    merge.add_argument("--seconds", type=int, required=True)
    tests = commands.add_parser("pytest-verdict")
    tests.add_argument("--log", required=True)
    tests.add_argument("--status", type=int, action="append", required=True, help="once per run, in order")
    sanitizer = commands.add_parser("sanitizer-verdict")
    sanitizer.add_argument("--log", required=True)
    sanitizer.add_argument("--status", type=int, required=True)
    report = commands.add_parser("summary")
    for name in ("--steps", "--out", "--mode", "--budget", "--elapsed"):
        report.add_argument(name, required=True)
    args = parser.parse_args(argv)
    handler = {
        "merge-bench": merge_bench,
        "pytest-verdict": pytest_verdict,
        "sanitizer-verdict": sanitizer_verdict,
        "summary": summary,
    }[args.command]
    return handler(args)


if __name__ == "__main__":
    sys.exit(main())
