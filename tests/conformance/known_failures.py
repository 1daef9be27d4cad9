"""Known defects the database finds today, as strict expected failures: the fixers' work list.

Each line is ``(check, entry key, sample name): what differs``, grouped by defect class; check is
``value`` (values, dtype, shape, strides, whether it raises), ``grad`` (float64 first/second-order
gradients), ``error`` (an error input: family, adcuda error class, message) or ``cuda`` (the CUDA
variant). When a defect is fixed, its test fails as XPASS(strict): delete its line (or run
``python tests/conformance/record_known_failures.py``, which drops fixed lines and adds new failures:
read its diff, a new line is a defect to fix or a sample to correct). A defect not listed fails.
"""

import pytest

GROUPS = {
    "extreme values (inf, nan, overflow, huge logits)": {
        (
            "value",
            "gelu",
            "extreme-f32",
        ): "functional gelu: result: 2 of 12 values differ; at (2,) got np.float32(3.4e+38), expected np.float32(inf)",
    },
    "first-order gradients": {
        (
            "grad",
            "kl_div",
            "zero-target",
        ): "grad[0]: 12 of 12 values differ; at (0, 0) got np.float64(0.9935327172279358), expected np.float64(nan)",
        (
            "grad",
            "kl_div",
            "zero-target-noncontig",
        ): "grad[0]: 12 of 12 values differ; at (0, 0) got np.float64(0.9935327172279358), expected np.float64(nan)",
    },
    "second-order gradients": {
        (
            "grad",
            "mish",
            "kinks-f64",
        ): "gradgrad[0]: 1 of 3 values differ; at (2,) got np.float64(0.0), expected np.float64(nan)",
    },
    "strides of new tensors": {
        ("value", "clone", "float32[0x3]-noncontig"): "function clone: result: strides (3, 1), expected (0, 0)",
        ("value", "from_numpy", "scalars#3"): "function from_numpy: result: strides (3, 1), expected (0, 0)",
        ("value", "ones_like", "float32[0x3]-noncontig"): "function ones_like: result: strides (3, 1), expected (0, 0)",
        (
            "value",
            "zeros_like",
            "float32[0x3]-noncontig",
        ): "function zeros_like: result: strides (3, 1), expected (0, 0)",
    },
}

KNOWN = {ident: reason for group in GROUPS.values() for ident, reason in group.items()}


def expected_failure(check, key, sample):
    """The pytest marks for one test: a strict xfail with the recorded reason, or none."""
    reason = KNOWN.get((check, key, sample))
    return [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
