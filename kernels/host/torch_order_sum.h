// PyTorch's CPU sum of a contiguous float32/float64 row in its order of additions (SumKernel.cpp's
// cascade_sum), for the CPU backend's small sums (adcuda/backends/cpu/reduce.py): the same algorithm
// as reduce.py's NumPy `_torch_order_sum`, which stays the reference it is tested against
// (tests/test_reduce_order.py), without NumPy's per-call cost on the small rows of losses and scalars
// (about 15 us there, under 1 us here). Plain C++, no Python, no threads; additions only, so no
// contraction or reassociation can change a rounding (the module is built without -ffast-math).
#pragma once

#include <cstddef>
#include <vector>

namespace adcuda::host {

// One lane's rows, `count` of them `stride` elements apart.
template <typename T>
struct Rows {
  const T* first;
  std::size_t stride;
  std::size_t count;
  T operator[](std::size_t i) const { return first[i * stride]; }
  Rows from(std::size_t start) const { return {first + start * stride, stride, count - start}; }
  Rows head(std::size_t n) const { return {first, stride, n}; }
};

// The rows added one after another, from the first (count >= 1).
template <typename T>
T running_sum(const Rows<T>& rows) {
  T total = rows[0];
  for (std::size_t i = 1; i < rows.count; ++i) total += rows[i];
  return total;
}

// Running sums of consecutive blocks of `step` rows (count a multiple of step).
template <typename T>
std::vector<T> block_sums(const Rows<T>& rows, std::size_t step) {
  std::vector<T> sums(rows.count / step);
  for (std::size_t b = 0; b < sums.size(); ++b)
    sums[b] = running_sum(Rows<T>{rows.first + b * step * rows.stride, rows.stride, step});
  return sums;
}

template <typename T>
Rows<T> rows_of(const std::vector<T>& v) {
  return {v.data(), 1, v.size()};
}

// PyTorch's multi_row_sum of one lane: block sums of `step` rows, of `step` of those, of those again,
// and the rest; the incomplete blocks' sums added to the leftover rows' sum from the lowest level up.
template <typename T>
T cascade(const Rows<T>& rows) {
  const std::size_t size = rows.count;
  std::size_t bits = 1;
  if (size > 2) {
    bits = 0;
    for (std::size_t v = size - 1; v; v >>= 1) ++bits;
  }
  const std::size_t step = std::size_t{1} << (bits / 4 > 4 ? bits / 4 : 4);
  const std::size_t full = size / step;
  T total = size > full * step ? running_sum(rows.from(full * step)) : T(0);
  std::vector<T> level;
  bool have = full > 0;
  if (have) level = block_sums(rows.head(full * step), step);
  for (int depth = 0; depth < 2 && have; ++depth) {
    const std::size_t done = level.size() / step;
    if (level.size() > done * step) total = total + running_sum(rows_of(level).from(done * step));
    have = done > 0;
    if (have) level = block_sums(rows_of(level).head(done * step), step);
    if (have && depth == 1) total = total + running_sum(rows_of(level));
  }
  return total;
}

// PyTorch's row_sum of one lane: four interleaved cascades, the leftover rows added to the first,
// then the other three.
template <typename T>
T row_sum(const Rows<T>& rows) {
  const std::size_t k = rows.count / 4;
  T partial[4] = {T(0), T(0), T(0), T(0)};
  if (k)
    for (std::size_t a = 0; a < 4; ++a) partial[a] = cascade(Rows<T>{rows.first + a * rows.stride, 4 * rows.stride, k});
  T total = partial[0];
  for (std::size_t i = 4 * k; i < rows.count; ++i) total += rows[i];
  for (std::size_t a = 1; a < 4; ++a) total += partial[a];
  return total;
}

// The sum of x[0..n) (n >= 1) as PyTorch's vectorised inner sum adds it up: 32-byte vectors of lanes.
template <typename T>
T torch_order_sum(const T* x, std::size_t n) {
  constexpr std::size_t width = 32 / sizeof(T);
  if (n < width) return row_sum(Rows<T>{x, 1, n});
  const std::size_t vectors = n / width;
  T total = T(0);
  for (std::size_t i = vectors * width; i < n; ++i) total += x[i];
  for (std::size_t lane = 0; lane < width; ++lane) total += row_sum(Rows<T>{x + lane, width, vectors});
  return total;
}

}  // namespace adcuda::host
