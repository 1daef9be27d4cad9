"""Rewrites known_failures.py from a run of the conformance tests: every failing (check, entry,
sample) becomes a strict expected failure with the first difference as its reason, grouped by defect
class; lines of known_failures.py that still fail keep their (possibly hand-edited) reason, lines whose
test now passes (XPASS(strict)) are dropped.

    python tests/conformance/record_known_failures.py            # runs the tests itself (CPU)
    python tests/conformance/record_known_failures.py run.xml    # from a pytest --junitxml file

Read the diff before committing it: a new line is a defect to fix (or a wrong sample to correct),
not something to hide.
"""

import json
import os
import re
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.dirname(HERE))

from conformance import known_failures  # noqa: E402

CHECKS = {"test_values": "value", "test_gradients": "grad", "test_errors": "error", "test_cuda_against_cpu": "cuda"}

# (defect class, pattern of the first difference), the first match wins
CLASSES = [
    ("missing op or form", r"has no (function|method|functional)"),
    ("views: a copy or other strides", r"PyTorch returns a view|view strides"),
    ("strides of new tensors", r"strides \("),
    ("dtype and type promotion", r"dtype \w+, expected"),
    ("shape", r"shape \(|items, expected"),
    ("in-place: result type cast error family", r"_: result type .* can't be cast"),
    ("invalid input accepted (PyTorch raises)", r"PyTorch raises .*adcuda returns a result"),
    ("raw Python/NumPy error leaks", r"raises a raw"),
    ("exception family differs from PyTorch's", r"PyTorch's family is"),
    ("error message does not name the op", r"does not name the op"),
    ("valid input rejected (PyTorch returns a result)", r"the reference returns a result"),
    ("gradient: output does not require grad", r"no output requires grad"),
    ("gradient: raises", r"^gradient: raises|second-order: raises"),
    ("second-order gradients", r"^gradgrad"),
    ("first-order gradients", r"^grad\["),
    ("extreme values (inf, nan, overflow, huge logits)", r"(nan|inf)\)|e\+?[123]\d\)|extreme|huge"),
    ("values", r"values differ|expected"),
]


def classify(reason, sample):
    text = f"{reason} {sample}"
    for name, pattern in CLASSES:
        if re.search(pattern, text):
            return name
    return "other"


def first_difference(message):
    line = message.split("\n")[0]
    line = re.sub(r"^AssertionError: ", "", line)
    return line[:200]


def failures(xml_path):
    """{(check, key, sample): reason} of the failed tests; the set of XPASS(strict) ones."""
    failed, xpassed = {}, set()
    for case in ET.parse(xml_path).iter("testcase"):
        failure = case.find("failure")
        if failure is None:
            continue
        func, _, param = case.get("name").partition("[")
        key, _, sample = param[:-1].partition(":")
        ident = (CHECKS[func], key, sample)
        message = failure.get("message", "")
        if "XPASS(strict)" in message:
            xpassed.add(ident)
        elif "the database is wrong" in message:
            print(f"not recorded, correct the sample: {ident}: {first_difference(message)}")
        else:
            failed[ident] = first_difference(message)
    return failed, xpassed


def _quote(text):
    return json.dumps(text)


def write(known):
    groups = {}
    for ident, reason in sorted(known.items()):
        groups.setdefault(classify(reason, ident[2]), {})[ident] = reason
    with open(known_failures.__file__) as f:
        head = f.read().split("GROUPS = ")[0]
    lines = ["{"]
    for group in sorted(groups):
        lines.append(f"    {_quote(group)}: {{")
        for (check, key, sample), reason in groups[group].items():
            ident = f"({_quote(check)}, {_quote(key)}, {_quote(sample)}):"
            one_line = f"        {ident} {_quote(reason)},"
            if len(one_line) <= 120:
                lines.append(one_line)
            else:  # the reason on its own line, cut to ruff's width
                lines += [f"        {ident}", f"            {_quote(reason[:104])},"]
        lines.append("    },")
    lines.append("}")
    body = "\n".join(lines)
    with open(known_failures.__file__, "w") as f:
        f.write(head + "GROUPS = " + body + "\n" + _TAIL)


_TAIL = '''
KNOWN = {ident: reason for group in GROUPS.values() for ident, reason in group.items()}


def expected_failure(check, key, sample):
    """The pytest marks for one test: a strict xfail with the recorded reason, or none."""
    reason = KNOWN.get((check, key, sample))
    return [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
'''


def main(argv):
    if argv:
        xml_path = argv[0]
    else:
        xml_path = os.path.join(tempfile.mkdtemp(), "conformance.xml")
        subprocess.run(
            [
                sys.executable,
                "-P",
                "-m",
                "pytest",
                "-q",
                "-p",
                "no:randomly",
                "-p",
                "no:cacheprovider",
                "tests/test_conformance.py",
                f"--junitxml={xml_path}",
            ],
            cwd=ROOT,
            check=False,
        )
    failed, xpassed = failures(xml_path)
    known = {k: v for k, v in known_failures.KNOWN.items() if k not in xpassed}
    for ident, reason in failed.items():
        known.setdefault(ident, reason)
    write(known)
    print(f"{len(known)} known failures ({len(failed)} failing now, {len(xpassed)} fixed and dropped)")


if __name__ == "__main__":
    main(sys.argv[1:])
