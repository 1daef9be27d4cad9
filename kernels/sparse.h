// Sparse products (sparse.cu): the CUDA backend's coo_to_csr, spmm and sddmm primitives, with the CPU
// backend's semantics (adcuda/backends/cpu/sparse.py). Plain C++ for the bindings.
#pragma once

#include <cstdint>
#include <optional>
#include <utility>

#include "runtime/device_array.h"

namespace adcuda {

// The CSR row pointers (int64, n_rows + 1) of the entries whose rows are `rows` (int64, contiguous, 1-D,
// each in [0, n_rows): the ops layer checked them), and, unless `rows_sorted`, the stable order (int64,
// nnz) that sorts the entries by row (CUB's radix sort of sort.cu). Never waits for the device.
std::pair<DeviceArray, std::optional<DeviceArray>> coo_to_csr(const DeviceArray& rows, std::int64_t n_rows,
                                                              bool rows_sorted);

// The (n_rows, width) product of the CSR matrix (`row_ptr`; entries `order[row_ptr[i]:row_ptr[i + 1]]`,
// or those positions themselves without an order; column `cols`, value `values`) by the 2-D `dense`
// (any strides, values' dtype): one warp per row, lanes over the dense columns (coalesced where the
// dense rows are contiguous), each batch of 32 entries loaded once by the warp and broadcast by shuffles;
// fp32 accumulation for the half types (fp64 for float64); duplicates add, in entry order.
DeviceArray spmm(const DeviceArray& row_ptr, const std::optional<DeviceArray>& order, const DeviceArray& cols,
                 const DeviceArray& values, const DeviceArray& dense);

// out[k] = dot(a[rows[k]], b[cols[k]]) for each entry k (a and b 2-D, any strides, one floating dtype):
// the gradient of spmm w.r.t. its values. One warp per entry, lanes over the columns, a shuffle-tree sum.
DeviceArray sddmm(const DeviceArray& rows, const DeviceArray& cols, const DeviceArray& a, const DeviceArray& b);

}  // namespace adcuda
