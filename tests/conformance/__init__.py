"""adcuda's op conformance database: every public op's samples, run against PyTorch.

- ``spec``: what a sample is (``T`` tensor arguments, ``S`` samples, ``E`` error samples, ``D`` dtypes,
  ``Entry``), made into either library's objects on demand;
- ``generators``: samples by op category (unary, binary, comparison, reductions, losses...);
- ``database``: ``ENTRIES``, one (or more) per public op;
- ``runner``: runs a sample on two libraries and lists the differences;
- ``known_failures``: today's defects, as strict expected failures (the fixers' work list);
- ``record_known_failures``: rewrites ``known_failures`` from a run.

The tests are tests/test_conformance*.py; docs/testing.md says how a new op adds its entry.
"""
