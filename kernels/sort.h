// Sorting, scans and compaction (sort.cu), on CUB's device-wide radix sort, scan, select and
// reduce-by-key (the toolkit's CCCL). Plain C++ for the bindings and index.cu.
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include "runtime/device_array.h"

namespace adcuda {

// Each row of `a` (contiguous; rows along the last dim) sorted stably: (values, int64 indices into the
// row). NaN sorts last ascending and first descending; -0.0 and 0.0 are equal; ties keep their order.
std::pair<DeviceArray, DeviceArray> sort_rows(const DeviceArray& a, bool descending);

// Inclusive prefix sums along the last dim of contiguous `a`: int64 for integer and bool input, else
// a's dtype (half types accumulated in fp32). Floating sums may differ in the last bits from run to run
// (CUB's decoupled look-back combines tile sums in a timing-dependent order).
DeviceArray cumsum_rows(const DeviceArray& a);

// Inclusive prefix products along the last dim, with cumsum_rows's types (and its run-to-run caveat).
DeviceArray cumprod_rows(const DeviceArray& a);

// Inclusive scans along the last dim of contiguous `a` by `op`: "max" and "min" (NaN propagates) or
// "logaddexp" (floating input only), with cumsum_rows's types (int64 for integers and bool).
DeviceArray scan_rows(const DeviceArray& a, const std::string& op);

// The coordinates of the true elements of bool array `mask` in row-major order: (count, ndim) int64.
// Needs the count on the host to size the result, so it waits for the device once.
DeviceArray nonzero(const DeviceArray& mask);

// For the deterministic scatters of index.cu: `keys` (int64 >= 0, contiguous, 1-D) and `values` (int64,
// same length) sorted stably by key; only the low `key_bits` bits of the keys are compared.
std::pair<DeviceArray, DeviceArray> sort_pairs(const DeviceArray& keys, const DeviceArray& values, int key_bits);

// Runs of equal keys in sorted `keys` and the sums of `values` (float32, float64 or int64, contiguous) over
// each run, added in order: (unique keys, sums, 1-element int64 device array holding the run count).
struct KeyRuns {
  DeviceArray keys;
  DeviceArray sums;
  DeviceArray count;
};
KeyRuns sum_runs(const DeviceArray& sorted_keys, const DeviceArray& values);

}  // namespace adcuda
