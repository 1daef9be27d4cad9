"""Rewrites known_failures.py from a run of the conformance tests: every failing (check, entry,
sample) becomes a strict expected failure with the first difference as its reason, grouped by defect
class; lines of known_failures.py that still fail keep their (possibly hand-edited) reason, lines whose
test now passes (XPASS(strict)) are dropped.

    python tests/conformance/record_known_failures.py             # runs the tests itself (CPU)
    python tests/conformance/record_known_failures.py run.xml...  # from pytest --junitxml files

Read the diff before committing it: a new line is a defect to fix (or a wrong sample to correct),
not something to hide.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.dirname(HERE))

from conformance import known_failures  # noqa: E402

# test function: (check, key): key None where the test id is "key:sample"; else the id is the sample,
# except for signatures, whose id is the key (one test per callable, sample "params")
CHECKS = {
    "test_values": ("value", None),
    "test_gradients": ("grad", None),
    "test_errors": ("error", None),
    "test_cuda_against_cpu": ("cuda", None),
    "test_promotion_table": ("promotion", None),
    "test_alpha_promotion": ("promotion", None),
    "test_beta_promotion": ("promotion", None),
    "test_broadcasting": ("property", "broadcasting"),
    "test_zero_size_reductions": ("property", "zero-size-reductions"),
    "test_zero_size_elementwise": ("property", "zero-size-elementwise"),
    "test_signature_matches_pytorch": ("signature", "params"),
}
TEST_FILES = [
    "tests/test_conformance.py",
    "tests/test_conformance_properties.py",
    "tests/test_conformance_signatures.py",
]

# (defect class, pattern of the first difference), the first match wins
CLASSES = [
    ("missing op or form", r"has no (function|method|functional)"),
    ("signature: keyword aliases (axis, keepdims)", r"^signature .*no keyword (axis|keepdims)\b"),
    ("signature: varargs dims", r"^signature .*no varargs dims"),
    ("signature: parameter names and order", r"^signature "),
    ("in-place: result type cast error family", r"DTypeError: \w+_: result type"),
    ("raw Python/NumPy error leaks", r"raw error, not an adcuda one"),
    ("NumPy warnings escape", r"NumPy warning escapes"),
    ("exception family differs from PyTorch's", r"where (PyTorch|the CPU backend) raises"),
    ("error message does not name the op", r"message does not name"),
    ("invalid input accepted (PyTorch raises)", r"accepts what (PyTorch|the CPU backend) rejects"),
    ("valid input rejected (PyTorch returns a result)", r"rejects what (PyTorch|the CPU backend) accepts"),
    ("views: a copy or other strides", r"PyTorch returns a view|view strides"),
    ("strides of new tensors", r"result(\[\d+\])?: strides \("),
    ("dtype and type promotion", r"result(\[\d+\])?: dtype \w+, expected"),
    ("shape", r"result(\[\d+\])?: (shape \(|\d+ items, expected)"),
    ("gradient: output does not require grad", r"no output requires grad"),
    ("gradient: raises", r"^grad (gradient|second-order): raises"),
    ("second-order gradients", r"^grad gradgrad"),
    ("first-order gradients", r"^grad grad\["),
    ("extreme values (inf, nan, overflow, huge logits)", r"(nan|inf)\)|e\+?[123]\d\)|extreme|huge"),
    ("values", r"values differ|expected"),
]


def classify(check, reason, sample):
    if check == "cuda":
        return "CUDA device differs from the CPU backend"
    text = f"{check} {reason} {sample}"
    for name, pattern in CLASSES:
        if re.search(pattern, text):
            return name
    return "other"


def first_difference(message):
    line = message.split("\n")[0]
    line = re.sub(r"^AssertionError: ", "", line)
    return line[:200]


def _ident(case):
    """(check, key, sample) of a test case, or None for a test that is no conformance check."""
    func, _, param = case.get("name").partition("[")
    if func not in CHECKS or not param:
        return None
    check, key = CHECKS[func]
    if check == "signature":
        return check, param[:-1], key
    if key is None:
        key, _, sample = param[:-1].partition(":")
    else:
        sample = param[:-1]
    return check, key, sample


SEEN = set()  # every conformance test the runs read ran


def failures(xml_path):
    """{(check, key, sample): reason} of the failed tests, the set of XPASS(strict) ones and the set
    of those that failed as expected (xfail)."""
    failed, xpassed, xfailed = {}, set(), set()
    for case in ET.parse(xml_path).iter("testcase"):
        ident = _ident(case)
        skipped = case.find("skipped")
        if skipped is None or skipped.get("type") == "pytest.xfail":  # a skipped test says nothing
            SEEN.add(ident)
        if skipped is not None and skipped.get("type") == "pytest.xfail":
            xfailed.add(ident)
        failure = case.find("failure")
        if failure is None:
            continue
        message = failure.get("message", "")
        if ident is None:
            print(f"not recorded, not a conformance check: {case.get('name')}")
        elif "XPASS(strict)" in message:
            xpassed.add(ident)
        elif "the database is wrong" in message:
            print(f"not recorded, correct the sample: {ident}: {first_difference(message)}")
        else:
            failed[ident] = first_difference(message)
    return failed, xpassed, xfailed


def _quote(text):
    return json.dumps(text, ensure_ascii=False)


def write(known):
    groups = {}
    for ident, reason in sorted(known.items()):
        groups.setdefault(classify(ident[0], reason, ident[2]), {})[ident] = reason
    with open(known_failures.__file__) as f:
        head = f.read().split("GROUPS = ")[0]
    lines = ["{"]
    for group in sorted(groups):
        lines.append(f"    {_quote(group)}: {{")
        for (check, key, sample), reason in groups[group].items():
            ident = f"({_quote(check)}, {_quote(key)}, {_quote(sample)}):"
            reason = reason.replace('"', "'")
            one_line = f"        {ident} {_quote(reason)},"
            if len(one_line) <= 120:
                lines.append(one_line)
            else:  # the reason on its own line, cut to ruff's width
                lines += [f"        {ident}", f"            {_quote(reason[:105])},"]
        lines.append("    },")
    lines.append("}")
    body = "\n".join(lines)
    with open(known_failures.__file__, "w") as f:
        f.write(head + "GROUPS = " + body + "\n" + _TAIL)
    ruff = shutil.which("ruff")
    if ruff:  # the layout CI checks (ruff format --check)
        subprocess.run([ruff, "format", "-q", known_failures.__file__], check=False)
    else:
        print("ruff not found: run `ruff format` on known_failures.py before committing")


_TAIL = '''
KNOWN = {ident: reason for group in GROUPS.values() for ident, reason in group.items()}


def expected_failure(check, key, sample):
    """The pytest marks for one test: a strict xfail with the recorded reason, or none."""
    reason = KNOWN.get((check, key, sample))
    return [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
'''


def main(argv):
    xml_paths = argv
    if not xml_paths:
        xml_paths = [os.path.join(tempfile.mkdtemp(), "conformance.xml")]
        pytest_args = ["-q", "-p", "no:randomly", "-p", "no:cacheprovider", f"--junitxml={xml_paths[0]}"]
        subprocess.run([sys.executable, "-P", "-m", "pytest", *pytest_args, *TEST_FILES], cwd=ROOT, check=False)
    failed, xpassed, xfailed = {}, set(), set()
    for path in xml_paths:
        f, x, still = failures(path)
        failed.update(f)
        xpassed |= x
        xfailed |= still
    # a line stays while its test still fails as expected, or did not run (a partial run); a renamed
    # sample's stale line is caught by tests/test_conformance_coverage.py
    known = {k: v for k, v in known_failures.KNOWN.items() if k in xfailed or k not in SEEN}
    dropped = len(known_failures.KNOWN) - len(known)
    known.update(failed)
    write(known)
    print(f"{len(known)} known failures ({len(failed)} new, {dropped} dropped, of which {len(xpassed)} fixed)")


if __name__ == "__main__":
    main(sys.argv[1:])
