// Indexing kernels (index.cu): one gather and one scatter over an "index geometry", which the Python
// layer (adcuda/backends/cuda/index.py) builds for NumPy-style advanced indexing, index_put_, gather
// and scatter_add alike. Plain C++ for the bindings.
//
// Determinism: a gather is deterministic. A scatter with accumulate adds with atomics, so with
// duplicate indices floating-point sums depend on the order the atomics land in (integer sums do
// not); a scatter without accumulate lets an unspecified duplicate win. With `deterministic`, a scatter
// sorts the destinations first (stable radix sort), then sums each run of duplicates in index order,
// or lets the last duplicate win as NumPy does: reproducible bit for bit, at the price of a sort.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/device_array.h"

namespace adcuda {

// Element c (a coordinate over `shape`) of an indexed result lives in `base` at element offset
//   sum_d c[d] * strides[d]  +  sum_k wrap_k(indices[k][c]) * index_strides[k]
// from base.data_ptr(), where indices[k] are int64 arrays of shape `shape` (typically broadcast views)
// and wrap_k maps [-index_sizes[k], 0) to [0, index_sizes[k]), as negative indices count from the end.
struct IndexGeometry {
  Dims shape;
  Dims strides;
  std::vector<DeviceArray> indices;
  std::vector<std::int64_t> index_sizes;
  std::vector<std::int64_t> index_strides;
};

// Checks on the device, without waiting, that each indices[k] lies in [-sizes[k], sizes[k]): one that
// does not is raised (DeviceIndexError, an IndexError naming it) at the next synchronising call
// (runtime/device_errors.h), and the gathers and scatters use element 0 of its dim meanwhile. Throws
// std::out_of_range at once for indices into a dim of size 0.
void check_indices(const std::vector<DeviceArray>& indices, const std::vector<std::int64_t>& sizes);

// A new contiguous array of geometry.shape: base's elements at the geometry's offsets.
DeviceArray index_gather(const DeviceArray& base, const IndexGeometry& geometry);

// base[geometry] = values (or += with `accumulate`), values of shape geometry.shape (a broadcast view is
// fine) in base's dtype, not overlapping base.
void index_scatter_(const DeviceArray& base, const IndexGeometry& geometry, const DeviceArray& values, bool accumulate,
                    bool deterministic);

// base[geometry] combined with values by `reduce` ("prod", "amax" or "amin"; NaN propagates), duplicates
// included, with a compare-and-swap per element: float32, float64, int32 and int64 arrays. Products of
// floats with duplicate indices may differ in the last bits from run to run (the order the swaps land in).
void index_scatter_reduce_(const DeviceArray& base, const IndexGeometry& geometry, const DeviceArray& values,
                           const std::string& reduce);

}  // namespace adcuda
