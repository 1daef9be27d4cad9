// Layer norm and RMS norm (kCentered = false: no mean, rstd = 1 / sqrt(mean(x^2) + eps), no bias; the same
// kernels with the centring compiled out): one block per row for the forward; for the backward one pass
// that reads g and x once,
// writes dx and leaves per-block partial weight/bias gradients in fp32, then a small pass adding each
// column's partials in a fixed order.
//
// Forward takes the two-pass statistics the CPU backend takes (mean, then the mean of squared
// deviations), reading the row three times; the second and third reads come from L1/L2, so DRAM sees
// one read and one write.
//
// Backward (rows of up to fused_max_row elements): a block is R row groups of T threads; each thread
// owns the same columns in every row (16 elements, 8 in fp64: P packs of V), holds a row's g and x
// for them in registers (so the row's two reductions and dx need one read), and adds g * xhat and g
// into its own fp32 column accumulators. At the end the block's R groups add their accumulators in
// group order and the block writes one partial row; a second kernel adds the blocks' partials per
// column in block order. Memory: g and x read once, dx written once, plus 2 * blocks * D fp32 partials
// (blocks = 2 per SM: ~2% of the traffic for GPT-2's 8192 x 768 rows in fp32, less for more rows):
// 3 passes where the separate dx and column kernels took 5.
// No atomics, so the gradients are the same on every run. Longer rows take the separate kernels: a
// row kernel for dx and a 32-column x chunk-of-rows kernel for the partials.
#include "norm.h"

#include <algorithm>
#include <initializer_list>
#include <stdexcept>
#include <string>

#include "launch_utils.cuh"
#include "nn_common.cuh"
#include "runtime/dispatch.cuh"
#include "runtime/errors.h"
#include "runtime/launch.cuh"

namespace adcuda {
namespace {

using nn::block_reduce;

// mean_out is not written without kCentered (RMS norm has no mean). With a `residual` (nullptr
// otherwise) the rows normalised are those of x + residual, rounded to T as the sum is kept:
// `sum_out` receives it (the fused residual add: x and residual are read, the sum and y written, in
// one kernel). y may be of a narrower type than x (Y: a half type for float32 x, under autocast).
template <typename T, typename Y, int V, bool kCentered>
__global__ void layer_norm_kernel(const T* x, const T* residual, const T* weight, const T* bias, Y* y, T* sum_out,
                                  compute_t<T>* mean_out, compute_t<T>* rstd_out, std::int64_t rows, std::int64_t D,
                                  double eps) {
  using Acc = compute_t<T>;
  __shared__ Acc scratch[32];
  const std::int64_t first = static_cast<std::int64_t>(threadIdx.x) * V;
  const std::int64_t step = static_cast<std::int64_t>(blockDim.x) * V;
  const auto load_row = [&](std::int64_t at) {
    auto pack = nn::load_pack<T, V>(x + at);
    if (residual != nullptr) {
      const auto other = nn::load_pack<T, V>(residual + at);
#pragma unroll
      for (int k = 0; k < V; ++k) pack.item[k] = convert<T>(to_compute(pack.item[k]) + to_compute(other.item[k]));
    }
    return pack;
  };
  for (std::int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const std::int64_t origin = row * D;
    Acc partial = Acc(0);
    Acc mean = Acc(0);
    if constexpr (kCentered) {
      for (std::int64_t j = first; j < D; j += step) {
        const auto pack = load_row(origin + j);
#pragma unroll
        for (int k = 0; k < V; ++k) partial += to_compute(pack.item[k]);
      }
      mean = block_reduce(partial, nn::Sum{}, scratch) / static_cast<Acc>(D);
      partial = Acc(0);
    }
    for (std::int64_t j = first; j < D; j += step) {
      const auto pack = load_row(origin + j);
#pragma unroll
      for (int k = 0; k < V; ++k) {
        const Acc centered = to_compute(pack.item[k]) - mean;
        partial += centered * centered;
      }
    }
    const Acc variance = block_reduce(partial, nn::Sum{}, scratch) / static_cast<Acc>(D);
    const Acc rstd = Acc(1) / nn::sqrt_of(variance + static_cast<Acc>(eps));
    for (std::int64_t j = first; j < D; j += step) {
      const auto pack = load_row(origin + j);
      if (sum_out != nullptr) nn::store_pack<T, V>(sum_out + origin + j, pack);
      nn::Pack<Y, V> out;
#pragma unroll
      for (int k = 0; k < V; ++k) {
        Acc value = (to_compute(pack.item[k]) - mean) * rstd;
        if (weight != nullptr) value *= to_compute(weight[j + k]);
        if (bias != nullptr) value += to_compute(bias[j + k]);
        out.item[k] = convert<Y>(value);
      }
      nn::store_pack<Y, V>(y + origin + j, out);
    }
    if (threadIdx.x == 0) {
      if constexpr (kCentered) mean_out[row] = mean;
      rstd_out[row] = rstd;
    }
  }
}

// dx = rstd * (gx - mean(gx) - xhat * mean(gx * xhat)), gx = g * weight, xhat = (x - mean) * rstd; without
// kCentered (RMS norm) xhat = x * rstd and the mean(gx) term goes (mean may be nullptr).
// `grad_sum` (nullptr otherwise): a gradient added to dx, that of the fused residual add's sum.
template <typename T, int V, bool kCentered>
__global__ void layer_norm_backward_dx_kernel(const T* g, const T* x, const T* weight, const compute_t<T>* mean,
                                              const compute_t<T>* rstd, const T* grad_sum, T* dx, std::int64_t rows,
                                              std::int64_t D) {
  using Acc = compute_t<T>;
  __shared__ Acc scratch[32];
  const std::int64_t first = static_cast<std::int64_t>(threadIdx.x) * V;
  const std::int64_t step = static_cast<std::int64_t>(blockDim.x) * V;
  for (std::int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* gr = g + row * D;
    const T* xr = x + row * D;
    const Acc row_mean = kCentered ? mean[row] : Acc(0), row_rstd = rstd[row];
    Acc sum_gx = Acc(0), sum_gx_xhat = Acc(0);
    for (std::int64_t j = first; j < D; j += step) {
      const auto gp = nn::load_pack<T, V>(gr + j);
      const auto xp = nn::load_pack<T, V>(xr + j);
#pragma unroll
      for (int k = 0; k < V; ++k) {
        Acc gx = to_compute(gp.item[k]);
        if (weight != nullptr) gx *= to_compute(weight[j + k]);
        sum_gx += gx;
        sum_gx_xhat += gx * ((to_compute(xp.item[k]) - row_mean) * row_rstd);
      }
    }
    const Acc mean_gx = kCentered ? block_reduce(sum_gx, nn::Sum{}, scratch) / static_cast<Acc>(D) : Acc(0);
    const Acc mean_gx_xhat = block_reduce(sum_gx_xhat, nn::Sum{}, scratch) / static_cast<Acc>(D);
    for (std::int64_t j = first; j < D; j += step) {
      const auto gp = nn::load_pack<T, V>(gr + j);
      auto xp = nn::load_pack<T, V>(xr + j);
      nn::Pack<T, V> added{};
      if (grad_sum != nullptr) added = nn::load_pack<T, V>(grad_sum + row * D + j);
#pragma unroll
      for (int k = 0; k < V; ++k) {
        Acc gx = to_compute(gp.item[k]);
        if (weight != nullptr) gx *= to_compute(weight[j + k]);
        const Acc xhat = (to_compute(xp.item[k]) - row_mean) * row_rstd;
        Acc value = row_rstd * (gx - mean_gx - xhat * mean_gx_xhat);
        if (grad_sum != nullptr) value += to_compute(added.item[k]);
        xp.item[k] = convert<T>(value);
      }
      nn::store_pack<T, V>(dx + row * D + j, xp);
    }
  }
}

// The fused backward: threads per row group at most, the elements of a row each thread owns (8 in
// fp64, whose accumulators take twice the registers: 16 would spill), and so the longest row it takes.
constexpr int kFusedMaxThreads = 512;

__host__ __device__ constexpr int fused_elements(bool fp64) { return fp64 ? 8 : 16; }

constexpr std::int64_t fused_max_row(bool fp64) {
  return static_cast<std::int64_t>(fused_elements(fp64)) * kFusedMaxThreads;
}

// The two row sums dx needs, reduced together.
template <typename Acc>
struct RowSums {
  Acc gx;
  Acc gx_xhat;
};

struct AddRowSums {
  template <typename Acc>
  __device__ __forceinline__ RowSums<Acc> operator()(RowSums<Acc> a, RowSums<Acc> b) const {
    return {a.gx + b.gx, a.gx_xhat + b.gx_xhat};
  }
};

// Every thread of a row group (blockDim.x threads, a whole number of warps) gets the group's sums,
// combined in a fixed order. Called by every thread of the block together.
template <typename Acc>
__device__ __forceinline__ RowSums<Acc> row_group_sum(RowSums<Acc> value, RowSums<Acc>* scratch) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    value.gx += __shfl_xor_sync(nn::kFullMask, value.gx, offset);
    value.gx_xhat += __shfl_xor_sync(nn::kFullMask, value.gx_xhat, offset);
  }
  const int warps = blockDim.x / 32;
  if (warps == 1) return value;
  RowSums<Acc>* mine = scratch + threadIdx.y * warps;
  __syncthreads();  // the previous row's readers are done with scratch
  if (threadIdx.x % 32 == 0) mine[threadIdx.x / 32] = value;
  __syncthreads();
  value = mine[0];
  for (int w = 1; w < warps; ++w) value = AddRowSums{}(value, mine[w]);
  return value;
}

// Thread (x, y) of block b handles rows b * R + y, b * R + y + gridDim.x * R, ... and, in each, the
// packs starting at columns (x + p * T) * V for p < P. partial_*[b * D + column]: the block's sums of
// g * xhat and of g (without kCentered, RMS norm: only g * xhat; mean and partial_bias unused).
// `grad_sum` (nullptr otherwise) is added to dx, as in layer_norm_backward_dx_kernel.
template <typename T, int V, bool kCentered>
__global__ void __launch_bounds__(kFusedMaxThreads)
    layer_norm_backward_fused_kernel(const T* g, const T* x, const T* weight, const compute_t<T>* mean,
                                     const compute_t<T>* rstd, const T* grad_sum, T* dx, compute_t<T>* partial_weight,
                                     compute_t<T>* partial_bias, std::int64_t rows, std::int64_t D) {
  using Acc = compute_t<T>;
  constexpr int P = fused_elements(std::is_same_v<Acc, double>) / V;
  __shared__ RowSums<Acc> scratch[kFusedMaxThreads / 32];
  __shared__ Acc exchange[2][kFusedMaxThreads];
  // the first column of this thread's pack p (owned if < D): recomputed where needed, not kept in
  // registers
  const auto column = [&](int p) {
    return (static_cast<std::int64_t>(threadIdx.x) + static_cast<std::int64_t>(p) * blockDim.x) * V;
  };
  Acc w[P][V];
#pragma unroll
  for (int p = 0; p < P; ++p) {
#pragma unroll
    for (int k = 0; k < V; ++k) {
      w[p][k] = weight != nullptr && column(p) < D ? to_compute(weight[column(p) + k]) : Acc(1);
    }
  }
  Acc sum_weight[P][V], sum_bias[P][V];
#pragma unroll
  for (int p = 0; p < P; ++p) {
#pragma unroll
    for (int k = 0; k < V; ++k) sum_weight[p][k] = sum_bias[p][k] = Acc(0);
  }
  const Acc inverse_D = Acc(1) / static_cast<Acc>(D);
  const std::int64_t rows_per_step = static_cast<std::int64_t>(gridDim.x) * blockDim.y;
  // every group of the block takes the same number of steps: the row sums synchronise the block
  for (std::int64_t first = static_cast<std::int64_t>(blockIdx.x) * blockDim.y; first < rows; first += rows_per_step) {
    const std::int64_t row = first + threadIdx.y;
    const bool live = row < rows;
    nn::Pack<T, V> gp[P], xp[P];
    const Acc row_mean = kCentered && live ? mean[row] : Acc(0);
    const Acc row_rstd = live ? rstd[row] : Acc(0);
    RowSums<Acc> sums{Acc(0), Acc(0)};
#pragma unroll
    for (int p = 0; p < P; ++p) {
      if (live && column(p) < D) {
        gp[p] = nn::load_pack<T, V>(g + row * D + column(p));
        xp[p] = nn::load_pack<T, V>(x + row * D + column(p));
#pragma unroll
        for (int k = 0; k < V; ++k) {
          const Acc gx = to_compute(gp[p].item[k]) * w[p][k];
          sums.gx += gx;
          sums.gx_xhat += gx * ((to_compute(xp[p].item[k]) - row_mean) * row_rstd);
        }
      }
    }
    sums = row_group_sum(sums, scratch);
    const Acc mean_gx = kCentered ? sums.gx * inverse_D : Acc(0);
    const Acc mean_gx_xhat = sums.gx_xhat * inverse_D;
#pragma unroll
    for (int p = 0; p < P; ++p) {
      if (live && column(p) < D) {
        nn::Pack<T, V> out{};
        if (grad_sum != nullptr) out = nn::load_pack<T, V>(grad_sum + row * D + column(p));
#pragma unroll
        for (int k = 0; k < V; ++k) {
          const Acc gv = to_compute(gp[p].item[k]);
          const Acc xhat = (to_compute(xp[p].item[k]) - row_mean) * row_rstd;
          Acc value = row_rstd * (gv * w[p][k] - mean_gx - xhat * mean_gx_xhat);
          if (grad_sum != nullptr) value += to_compute(out.item[k]);
          out.item[k] = convert<T>(value);
          sum_weight[p][k] += gv * xhat;
          if constexpr (kCentered) sum_bias[p][k] += gv;
        }
        nn::store_pack<T, V>(dx + row * D + column(p), out);
      }
    }
  }
  // the block's partials: group 0 adds the other groups' accumulators in group order, one element
  // of each thread's columns at a time through shared memory
  const int flat = threadIdx.y * blockDim.x + threadIdx.x;
#pragma unroll
  for (int p = 0; p < P; ++p) {
#pragma unroll
    for (int k = 0; k < V; ++k) {
      __syncthreads();
      exchange[0][flat] = sum_weight[p][k];
      exchange[1][flat] = sum_bias[p][k];
      __syncthreads();
      if (threadIdx.y == 0 && column(p) < D) {
        Acc total_weight = exchange[0][threadIdx.x], total_bias = exchange[1][threadIdx.x];
        for (int y = 1; y < static_cast<int>(blockDim.y); ++y) {
          total_weight += exchange[0][y * blockDim.x + threadIdx.x];
          total_bias += exchange[1][y * blockDim.x + threadIdx.x];
        }
        partial_weight[static_cast<std::int64_t>(blockIdx.x) * D + column(p) + k] = total_weight;
        if constexpr (kCentered) partial_bias[static_cast<std::int64_t>(blockIdx.x) * D + column(p) + k] = total_bias;
      }
    }
  }
}

constexpr int kColumnTile = 32;
constexpr int kRowLanes = 8;

// Pass 1 of the weight/bias gradients: block (32 columns, chunk of rows) -> partial sums of g * xhat
// and of g for its columns, at partial_*[chunk * D + column]. mean is nullptr for RMS norm (xhat = x * rstd).
template <typename T>
__global__ void layer_norm_param_partials_kernel(const T* g, const T* x, const compute_t<T>* mean,
                                                 const compute_t<T>* rstd, compute_t<T>* partial_weight,
                                                 compute_t<T>* partial_bias, std::int64_t rows, std::int64_t D,
                                                 std::int64_t rows_per_chunk) {
  using Acc = compute_t<T>;
  __shared__ Acc weight_sums[kRowLanes][kColumnTile + 1];
  __shared__ Acc bias_sums[kRowLanes][kColumnTile + 1];
  const std::int64_t column = static_cast<std::int64_t>(blockIdx.x) * kColumnTile + threadIdx.x;
  const std::int64_t chunk = blockIdx.y;
  const std::int64_t row_end = min(rows, (chunk + 1) * rows_per_chunk);
  Acc sum_weight = Acc(0), sum_bias = Acc(0);
  if (column < D) {
    for (std::int64_t row = chunk * rows_per_chunk + threadIdx.y; row < row_end; row += kRowLanes) {
      const Acc gv = to_compute(g[row * D + column]);
      const Acc xhat = (to_compute(x[row * D + column]) - (mean != nullptr ? mean[row] : Acc(0))) * rstd[row];
      sum_weight += gv * xhat;
      sum_bias += gv;
    }
  }
  weight_sums[threadIdx.y][threadIdx.x] = sum_weight;
  bias_sums[threadIdx.y][threadIdx.x] = sum_bias;
  __syncthreads();
  if (threadIdx.y == 0 && column < D) {
    for (int lane = 1; lane < kRowLanes; ++lane) {
      sum_weight += weight_sums[lane][threadIdx.x];
      sum_bias += bias_sums[lane][threadIdx.x];
    }
    partial_weight[chunk * D + column] = sum_weight;
    partial_bias[chunk * D + column] = sum_bias;
  }
}

// Pass 2: each column's partials, added in chunk order. dweight may be nullptr (no weight), dbias too
// (RMS norm: partial_bias unused).
template <typename T>
__global__ void layer_norm_param_finish_kernel(const compute_t<T>* partial_weight, const compute_t<T>* partial_bias,
                                               T* dweight, T* dbias, std::int64_t chunks, std::int64_t D) {
  using Acc = compute_t<T>;
  ADCUDA_GRID_STRIDE_LOOP(column, D) {
    Acc sum_weight = Acc(0), sum_bias = Acc(0);
    for (std::int64_t chunk = 0; chunk < chunks; ++chunk) {
      sum_weight += partial_weight[chunk * D + column];
      if (dbias != nullptr) sum_bias += partial_bias[chunk * D + column];
    }
    if (dweight != nullptr) dweight[column] = convert<T>(sum_weight);
    if (dbias != nullptr) dbias[column] = convert<T>(sum_bias);
  }
}

// ------------------------------------------------------------------------------------------------
// Host side.
std::int64_t next_power_of_two(std::int64_t n) {
  std::int64_t p = 1;
  while (p < n) p *= 2;
  return p;
}

int multiprocessor_count(int device) { return device_facts(device).multiprocessors; }

ScalarType statistics_type(ScalarType x) { return x == ScalarType::Float64 ? ScalarType::Float64 : ScalarType::Float32; }

struct RowSplit {
  std::int64_t rows = 1, D = 1;
  Dims statistics_shape;
};

RowSplit split_rows(const DeviceArray& x, int n, const char* op) {
  if (n < 1 || n > x.ndim()) {
    throw std::invalid_argument(std::string(op) + ": cannot normalise the last " + std::to_string(n) +
                                " dims of shape " + format_dims(x.shape()));
  }
  RowSplit split;
  split.statistics_shape = x.shape();
  for (int d = 0; d < x.ndim(); ++d) {
    if (d < x.ndim() - n) {
      split.rows *= x.shape()[d];
    } else {
      split.D *= x.shape()[d];
      split.statistics_shape[d] = 1;
    }
  }
  return split;
}

// A weight or bias: contiguous, x's dtype, D elements.
void check_parameter(const DeviceArray* p, const DeviceArray& x, std::int64_t D, const char* op, const char* name) {
  if (p == nullptr) return;
  require(p->dtype() == x.dtype() && p->numel() == D && p->is_contiguous(), op,
          std::string(name) + " must be a contiguous array of " + std::to_string(D) + " " + scalar_type_name(x.dtype()) +
              " elements, got " + format_dims(p->shape()) + " " + scalar_type_name(p->dtype()));
}

template <typename T>
const T* data_or_null(const DeviceArray* a) {
  return a != nullptr ? a->data<T>() : nullptr;
}

// ------------------------------------------------------------------------------------------------
// Batch norm over x viewed as (N, C, S): channel c's M = N * S values are column c of N rows of C * S,
// S apart. One block per channel reduces them (two passes for the statistics, as the CPU backend:
// the mean, then the mean of squared deviations; one pass of two sums for the backward), in a fixed
// order; an elementwise pass normalises (or makes dx). No atomics: the same result on every run.
template <typename T>
__global__ void batch_norm_stats_kernel(const T* x, compute_t<T>* mean_out, compute_t<T>* rstd_out, std::int64_t N,
                                        std::int64_t C, std::int64_t S, double eps) {
  using Acc = compute_t<T>;
  __shared__ Acc scratch[32];
  const std::int64_t count = N * S;
  for (std::int64_t c = blockIdx.x; c < C; c += gridDim.x) {
    Acc partial = Acc(0);
    for (std::int64_t i = threadIdx.x; i < count; i += blockDim.x) {
      const std::int64_t n = i / S;
      partial += to_compute(x[(n * C + c) * S + (i - n * S)]);
    }
    const Acc mean = block_reduce(partial, nn::Sum{}, scratch) / static_cast<Acc>(count);
    partial = Acc(0);
    for (std::int64_t i = threadIdx.x; i < count; i += blockDim.x) {
      const std::int64_t n = i / S;
      const Acc centered = to_compute(x[(n * C + c) * S + (i - n * S)]) - mean;
      partial += centered * centered;
    }
    const Acc variance = block_reduce(partial, nn::Sum{}, scratch) / static_cast<Acc>(count);
    if (threadIdx.x == 0) {
      mean_out[c] = mean;
      rstd_out[c] = Acc(1) / nn::sqrt_of(variance + static_cast<Acc>(eps));
    }
  }
}

template <typename T>
__global__ void batch_norm_apply_kernel(const T* x, const compute_t<T>* mean, const compute_t<T>* rstd,
                                        const T* weight, const T* bias, T* y, std::int64_t numel, std::int64_t C,
                                        std::int64_t S) {
  using Acc = compute_t<T>;
  ADCUDA_GRID_STRIDE_LOOP(i, numel) {
    const std::int64_t c = (i / S) % C;
    Acc value = (to_compute(x[i]) - mean[c]) * rstd[c];
    if (weight != nullptr) value *= to_compute(weight[c]);
    if (bias != nullptr) value += to_compute(bias[c]);
    y[i] = convert<T>(value);
  }
}

// Per channel: sum of g and of g * xhat, kept in fp32 (fp64) for the dx pass and written as dbias and
// dweight.
template <typename T>
__global__ void batch_norm_backward_sums_kernel(const T* g, const T* x, const compute_t<T>* mean,
                                                const compute_t<T>* rstd, compute_t<T>* sums, T* dweight, T* dbias,
                                                std::int64_t N, std::int64_t C, std::int64_t S) {
  using Acc = compute_t<T>;
  __shared__ Acc scratch[32];
  const std::int64_t count = N * S;
  for (std::int64_t c = blockIdx.x; c < C; c += gridDim.x) {
    const Acc channel_mean = mean[c], channel_rstd = rstd[c];
    Acc sum_g = Acc(0), sum_g_xhat = Acc(0);
    for (std::int64_t i = threadIdx.x; i < count; i += blockDim.x) {
      const std::int64_t n = i / S;
      const std::int64_t at = (n * C + c) * S + (i - n * S);
      const Acc gv = to_compute(g[at]);
      sum_g += gv;
      sum_g_xhat += gv * ((to_compute(x[at]) - channel_mean) * channel_rstd);
    }
    sum_g = block_reduce(sum_g, nn::Sum{}, scratch);
    sum_g_xhat = block_reduce(sum_g_xhat, nn::Sum{}, scratch);
    if (threadIdx.x == 0) {
      sums[c] = sum_g;
      sums[C + c] = sum_g_xhat;
      dbias[c] = convert<T>(sum_g);
      if (dweight != nullptr) dweight[c] = convert<T>(sum_g_xhat);
    }
  }
}

// dx = rstd * w * (g - mean(g) - xhat * mean(g * xhat)), the means over the channel's M values.
template <typename T>
__global__ void batch_norm_backward_dx_kernel(const T* g, const T* x, const compute_t<T>* mean,
                                              const compute_t<T>* rstd, const T* weight, const compute_t<T>* sums,
                                              T* dx, std::int64_t numel, std::int64_t C, std::int64_t S,
                                              std::int64_t count) {
  using Acc = compute_t<T>;
  ADCUDA_GRID_STRIDE_LOOP(i, numel) {
    const std::int64_t c = (i / S) % C;
    const Acc xhat = (to_compute(x[i]) - mean[c]) * rstd[c];
    const Acc scale = weight != nullptr ? rstd[c] * to_compute(weight[c]) : rstd[c];
    const Acc mean_g = sums[c] / static_cast<Acc>(count), mean_g_xhat = sums[C + c] / static_cast<Acc>(count);
    dx[i] = convert<T>(scale * (to_compute(g[i]) - mean_g - xhat * mean_g_xhat));
  }
}

// Short planes (S < kShortPlane: BatchNorm1d's (N, C), or (N, C, L) with small L) make the channel
// kernels above read x S elements at a time, C * S apart: uncoalesced. There x is read as N rows of
// W = C * S columns instead: a block of 32 columns x 8 row lanes reads 32 consecutive elements of a row
// at a time, over a chunk of the rows; the chunks' per-column partials are then merged per channel (over
// chunks, then s, in that order) by a second small kernel. Two levels, no atomics, the same result on
// every run. The statistics merge (count, mean, M2) triples (Welford within a thread, Chan et al.'s
// pairwise formula across threads and chunks), so x is read once and the variance never subtracts two
// large sums.
constexpr std::int64_t kShortPlane = 32;
constexpr int kColumnLanes = 8;

template <typename Acc>
struct Moments {
  Acc count, mean, m2;  // m2: the sum of squared deviations from mean
};

template <typename Acc>
__device__ __forceinline__ Moments<Acc> merge(const Moments<Acc>& a, const Moments<Acc>& b) {
  if (b.count == Acc(0)) return a;
  if (a.count == Acc(0)) return b;
  const Acc count = a.count + b.count;
  const Acc delta = b.mean - a.mean;
  return {count, a.mean + delta * (b.count / count), a.m2 + b.m2 + delta * delta * (a.count * b.count / count)};
}

// Block (32 columns, chunk) -> the chunk's moments of each column at partial_{mean,m2}[chunk * W + column]
// (the count is the chunk's row count, known to the finishing kernel).
template <typename T>
__global__ void batch_norm_column_moments_kernel(const T* x, compute_t<T>* partial_mean, compute_t<T>* partial_m2,
                                                 std::int64_t N, std::int64_t W, std::int64_t rows_per_chunk) {
  using Acc = compute_t<T>;
  __shared__ Moments<Acc> lanes[kColumnLanes][kColumnTile];
  const std::int64_t column = static_cast<std::int64_t>(blockIdx.x) * kColumnTile + threadIdx.x;
  const std::int64_t chunk = blockIdx.y;
  const std::int64_t row_end = min(N, (chunk + 1) * rows_per_chunk);
  Moments<Acc> m{Acc(0), Acc(0), Acc(0)};
  if (column < W) {
    for (std::int64_t row = chunk * rows_per_chunk + threadIdx.y; row < row_end; row += kColumnLanes) {
      const Acc value = to_compute(x[row * W + column]);
      m.count += Acc(1);
      const Acc delta = value - m.mean;
      m.mean += delta / m.count;
      m.m2 += delta * (value - m.mean);
    }
  }
  lanes[threadIdx.y][threadIdx.x] = m;
  __syncthreads();
  if (threadIdx.y == 0 && column < W) {
    for (int lane = 1; lane < kColumnLanes; ++lane) m = merge(m, lanes[lane][threadIdx.x]);
    partial_mean[chunk * W + column] = m.mean;
    partial_m2[chunk * W + column] = m.m2;
  }
}

// Channel c's statistics from its S columns' partials, chunk by chunk.
template <typename T>
__global__ void batch_norm_finish_moments_kernel(const compute_t<T>* partial_mean, const compute_t<T>* partial_m2,
                                                 compute_t<T>* mean_out, compute_t<T>* rstd_out, std::int64_t N,
                                                 std::int64_t C, std::int64_t S, std::int64_t chunks,
                                                 std::int64_t rows_per_chunk, double eps) {
  using Acc = compute_t<T>;
  const std::int64_t W = C * S;
  ADCUDA_GRID_STRIDE_LOOP(c, C) {
    Moments<Acc> total{Acc(0), Acc(0), Acc(0)};
    for (std::int64_t chunk = 0; chunk < chunks; ++chunk) {
      const Acc rows = static_cast<Acc>(min(N, (chunk + 1) * rows_per_chunk) - chunk * rows_per_chunk);
      for (std::int64_t s = 0; s < S; ++s) {
        const std::int64_t at = chunk * W + c * S + s;
        total = merge(total, Moments<Acc>{rows, partial_mean[at], partial_m2[at]});
      }
    }
    mean_out[c] = total.mean;
    rstd_out[c] = Acc(1) / nn::sqrt_of(total.m2 / total.count + static_cast<Acc>(eps));
  }
}

// The backward's per-channel sums (of g and g * xhat) the same way: partial sums per (chunk, column)...
template <typename T>
__global__ void batch_norm_backward_column_sums_kernel(const T* g, const T* x, const compute_t<T>* mean,
                                                       const compute_t<T>* rstd, compute_t<T>* partial_g,
                                                       compute_t<T>* partial_g_xhat, std::int64_t N, std::int64_t S,
                                                       std::int64_t W, std::int64_t rows_per_chunk) {
  using Acc = compute_t<T>;
  __shared__ Acc lanes[2][kColumnLanes][kColumnTile];
  const std::int64_t column = static_cast<std::int64_t>(blockIdx.x) * kColumnTile + threadIdx.x;
  const std::int64_t chunk = blockIdx.y;
  const std::int64_t row_end = min(N, (chunk + 1) * rows_per_chunk);
  Acc sum_g = Acc(0), sum_g_xhat = Acc(0);
  if (column < W) {
    const std::int64_t c = column / S;
    const Acc channel_mean = mean[c], channel_rstd = rstd[c];
    for (std::int64_t row = chunk * rows_per_chunk + threadIdx.y; row < row_end; row += kColumnLanes) {
      const Acc gv = to_compute(g[row * W + column]);
      sum_g += gv;
      sum_g_xhat += gv * ((to_compute(x[row * W + column]) - channel_mean) * channel_rstd);
    }
  }
  lanes[0][threadIdx.y][threadIdx.x] = sum_g;
  lanes[1][threadIdx.y][threadIdx.x] = sum_g_xhat;
  __syncthreads();
  if (threadIdx.y == 0 && column < W) {
    for (int lane = 1; lane < kColumnLanes; ++lane) {
      sum_g += lanes[0][lane][threadIdx.x];
      sum_g_xhat += lanes[1][lane][threadIdx.x];
    }
    partial_g[chunk * W + column] = sum_g;
    partial_g_xhat[chunk * W + column] = sum_g_xhat;
  }
}

// ...then added per channel in chunk, then s, order, written as batch_norm_backward_sums_kernel writes them.
template <typename T>
__global__ void batch_norm_backward_finish_sums_kernel(const compute_t<T>* partial_g, const compute_t<T>* partial_g_xhat,
                                                       compute_t<T>* sums, T* dweight, T* dbias, std::int64_t C,
                                                       std::int64_t S, std::int64_t chunks) {
  using Acc = compute_t<T>;
  const std::int64_t W = C * S;
  ADCUDA_GRID_STRIDE_LOOP(c, C) {
    Acc sum_g = Acc(0), sum_g_xhat = Acc(0);
    for (std::int64_t chunk = 0; chunk < chunks; ++chunk) {
      for (std::int64_t s = 0; s < S; ++s) {
        sum_g += partial_g[chunk * W + c * S + s];
        sum_g_xhat += partial_g_xhat[chunk * W + c * S + s];
      }
    }
    sums[c] = sum_g;
    sums[C + c] = sum_g_xhat;
    dbias[c] = convert<T>(sum_g);
    if (dweight != nullptr) dweight[c] = convert<T>(sum_g_xhat);
  }
}

// How the short-plane kernels split the N rows: enough (32-column, chunk) blocks to fill the GPU (about
// 4 per SM), chunks of at least 64 rows.
struct ColumnChunks {
  std::int64_t chunks, rows_per_chunk;
  dim3 grid;
};

ColumnChunks column_chunks(std::int64_t N, std::int64_t W, int device) {
  const std::int64_t column_blocks = (W + kColumnTile - 1) / kColumnTile;
  const std::int64_t wanted = (4 * multiprocessor_count(device) + column_blocks - 1) / column_blocks;
  std::int64_t chunks = std::clamp<std::int64_t>(std::min(wanted, (N + 63) / 64), 1, 65535);
  const std::int64_t rows_per_chunk = (N + chunks - 1) / chunks;
  chunks = (N + rows_per_chunk - 1) / rows_per_chunk;
  return {chunks, rows_per_chunk, dim3(static_cast<unsigned>(column_blocks), static_cast<unsigned>(chunks))};
}

// ------------------------------------------------------------------------------------------------
// Group norm (instance norm is its C-group case) over x viewed as (N, G, Cg, S): each (n, group) is one
// contiguous row of Cg * S elements, normalised with its own statistics (two passes, as layer norm's)
// and then scaled and shifted per channel inside the kernel. One block per row; the per-channel work
// walks the row channel by channel (S contiguous elements each), so no element index is divided.
template <typename T>
__global__ void group_norm_kernel(const T* x, const T* weight, const T* bias, T* y, compute_t<T>* mean_out,
                                  compute_t<T>* rstd_out, std::int64_t rows, std::int64_t G, std::int64_t Cg,
                                  std::int64_t S, double eps) {
  using Acc = compute_t<T>;
  __shared__ Acc scratch[32];
  const std::int64_t D = Cg * S;
  for (std::int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* in = x + row * D;
    Acc partial = Acc(0);
    for (std::int64_t j = threadIdx.x; j < D; j += blockDim.x) partial += to_compute(in[j]);
    const Acc mean = block_reduce(partial, nn::Sum{}, scratch) / static_cast<Acc>(D);
    partial = Acc(0);
    for (std::int64_t j = threadIdx.x; j < D; j += blockDim.x) {
      const Acc centered = to_compute(in[j]) - mean;
      partial += centered * centered;
    }
    const Acc rstd = Acc(1) / nn::sqrt_of(block_reduce(partial, nn::Sum{}, scratch) / static_cast<Acc>(D) +
                                          static_cast<Acc>(eps));
    const std::int64_t first_channel = (row % G) * Cg;
    for (std::int64_t k = 0; k < Cg; ++k) {
      const std::int64_t c = first_channel + k;
      const Acc scale = weight != nullptr ? rstd * to_compute(weight[c]) : rstd;
      const Acc shift = bias != nullptr ? to_compute(bias[c]) : Acc(0);
      for (std::int64_t s = threadIdx.x; s < S; s += blockDim.x) {
        y[row * D + k * S + s] = convert<T>((to_compute(in[k * S + s]) - mean) * scale + shift);
      }
    }
    if (threadIdx.x == 0) {
      mean_out[row] = mean;
      rstd_out[row] = rstd;
    }
  }
}

// One block per (n, group) row: the row's sums of gx = g * weight[c] and gx * xhat, then dx =
// rstd * (gx - mean(gx) - xhat * mean(gx * xhat)); on the way, each channel's sums of g * xhat and of g
// over its S positions, written per (n, c) for group_norm_parameter_sums_kernel (no atomics).
template <typename T>
__global__ void group_norm_backward_kernel(const T* g, const T* x, const T* weight, const compute_t<T>* mean,
                                           const compute_t<T>* rstd, T* dx, compute_t<T>* partial_weight,
                                           compute_t<T>* partial_bias, std::int64_t rows, std::int64_t G,
                                           std::int64_t Cg, std::int64_t S) {
  using Acc = compute_t<T>;
  __shared__ Acc scratch[32];
  const std::int64_t D = Cg * S;
  for (std::int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* gr = g + row * D;
    const T* xr = x + row * D;
    const Acc row_mean = mean[row], row_rstd = rstd[row];
    // (n, c) of the row's first channel, as a flat index of the (N, C) partials
    const std::int64_t first = (row / G) * (G * Cg) + (row % G) * Cg;
    Acc sum_gx = Acc(0), sum_gx_xhat = Acc(0);
    for (std::int64_t k = 0; k < Cg; ++k) {
      const Acc w = weight != nullptr ? to_compute(weight[(row % G) * Cg + k]) : Acc(1);
      Acc channel_g = Acc(0), channel_g_xhat = Acc(0);
      for (std::int64_t s = threadIdx.x; s < S; s += blockDim.x) {
        const Acc gv = to_compute(gr[k * S + s]);
        const Acc xhat = (to_compute(xr[k * S + s]) - row_mean) * row_rstd;
        channel_g += gv;
        channel_g_xhat += gv * xhat;
      }
      sum_gx += w * channel_g;
      sum_gx_xhat += w * channel_g_xhat;
      channel_g = block_reduce(channel_g, nn::Sum{}, scratch);
      channel_g_xhat = block_reduce(channel_g_xhat, nn::Sum{}, scratch);
      if (threadIdx.x == 0) {
        partial_weight[first + k] = channel_g_xhat;
        partial_bias[first + k] = channel_g;
      }
    }
    const Acc mean_gx = block_reduce(sum_gx, nn::Sum{}, scratch) / static_cast<Acc>(D);
    const Acc mean_gx_xhat = block_reduce(sum_gx_xhat, nn::Sum{}, scratch) / static_cast<Acc>(D);
    for (std::int64_t k = 0; k < Cg; ++k) {
      const Acc w = weight != nullptr ? to_compute(weight[(row % G) * Cg + k]) : Acc(1);
      for (std::int64_t s = threadIdx.x; s < S; s += blockDim.x) {
        const Acc xhat = (to_compute(xr[k * S + s]) - row_mean) * row_rstd;
        dx[row * D + k * S + s] =
            convert<T>(row_rstd * (w * to_compute(gr[k * S + s]) - mean_gx - xhat * mean_gx_xhat));
      }
    }
  }
}

// dweight[c] / dbias[c]: the (n, c) partials added in n order. dweight may be nullptr.
template <typename T>
__global__ void group_norm_parameter_sums_kernel(const compute_t<T>* partial_weight, const compute_t<T>* partial_bias,
                                                 T* dweight, T* dbias, std::int64_t N, std::int64_t C) {
  using Acc = compute_t<T>;
  ADCUDA_GRID_STRIDE_LOOP(c, C) {
    Acc sum_weight = Acc(0), sum_bias = Acc(0);
    for (std::int64_t n = 0; n < N; ++n) {
      sum_weight += partial_weight[n * C + c];
      sum_bias += partial_bias[n * C + c];
    }
    if (dweight != nullptr) dweight[c] = convert<T>(sum_weight);
    dbias[c] = convert<T>(sum_bias);
  }
}

// (N, C, S) of an input (N, C, *) of at least 2 dims.
struct ChannelSplit {
  std::int64_t N, C, S;
};

ChannelSplit split_channels(const DeviceArray& x, const char* op) {
  require(x.ndim() >= 2, op, "expected an input (N, C, *) of at least 2 dims, got shape " + format_dims(x.shape()));
  std::int64_t S = 1;
  for (int d = 2; d < x.ndim(); ++d) S *= x.shape()[d];
  return {x.shape()[0], x.shape()[1], S};
}

unsigned channel_blocks(std::int64_t C) {
  return static_cast<unsigned>(std::min<std::int64_t>(std::max<std::int64_t>(C, 1), 65535));
}

// Calls f with a TypeTag of y's element type: x's own (T), or, for float32 x only, the half type y has
// (under autocast the normalised output is written in the autocast dtype).
template <typename T, typename F>
void dispatch_output(ScalarType x, ScalarType y, const char* op, F&& f) {
  if (y == x) return f(TypeTag<T>{});
  if constexpr (std::is_same_v<T, float>) {
    if (y == ScalarType::Float16) return f(TypeTag<__half>{});
    if (y == ScalarType::BFloat16) return f(TypeTag<__nv_bfloat16>{});
  }
  throw std::invalid_argument(std::string(op) + ": the output may be " + scalar_type_name(x) +
                              ", or float16 / bfloat16 for a float32 input, got " + scalar_type_name(y));
}

// The forward of layer norm (kCentered) and RMS norm over split.rows > 0 rows: y, rstd, and mean when
// centred (nullptr otherwise); with a residual (nullptr otherwise), of x + residual, whose sum goes to
// `sum`.
template <bool kCentered>
void row_norm_forward(const char* op, const DeviceArray& x, const DeviceArray* residual, const DeviceArray* weight,
                      const DeviceArray* bias, const RowSplit& split, double eps, DeviceArray& y, DeviceArray* sum,
                      DeviceArray* mean, DeviceArray& rstd) {
  KernelLaunch launch(y, rstd, x);
  for (const DeviceArray* p : {static_cast<const DeviceArray*>(mean), static_cast<const DeviceArray*>(sum), residual,
                               weight, bias}) {
    if (p != nullptr) p->storage()->use_on(launch.stream(), launch.device());
  }
  dispatch_floating(x.dtype(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using Acc = compute_t<T>;
    dispatch_output<T>(x.dtype(), y.dtype(), op, [&](auto y_tag) {
      using Y = typename decltype(y_tag)::type;
      T* const sum_data = sum != nullptr ? sum->data<T>() : nullptr;
      nn::with_pack_width<T>(split.D, [&](auto width) {
        layer_norm_kernel<T, Y, decltype(width)::value, kCentered>
            <<<nn::row_blocks(split.rows), nn::row_block_threads(split.D), 0, launch.stream()>>>(
                x.data<T>(), data_or_null<T>(residual), data_or_null<T>(weight), data_or_null<T>(bias), y.data<Y>(),
                sum_data, mean != nullptr ? mean->data<Acc>() : nullptr, rstd.data<Acc>(), split.rows, split.D, eps);
      }, x.data<T>(), data_or_null<T>(residual), static_cast<const T*>(sum_data), y.data<Y>());
    });
  });
  ADCUDA_CHECK_LAUNCH();
}

void check_backward_operands(const char* op, const DeviceArray& g, const DeviceArray& x, const DeviceArray* mean,
                             const DeviceArray& rstd, const RowSplit& split) {
  require(x.is_contiguous() && g.is_contiguous() && (mean == nullptr || mean->is_contiguous()) &&
              rstd.is_contiguous(),
          op, "the arrays must be contiguous");
  require(g.shape() == x.shape() && g.dtype() == x.dtype(), op,
          "the gradient " + format_dims(g.shape()) + " " + scalar_type_name(g.dtype()) + " does not match the input " +
              format_dims(x.shape()) + " " + scalar_type_name(x.dtype()));
  const ScalarType stats = statistics_type(x.dtype());
  const auto fits = [&](const DeviceArray& a) { return a.numel() == split.rows && a.dtype() == stats; };
  require((mean == nullptr || fits(*mean)) && fits(rstd), op,
          std::string(mean != nullptr ? "mean and rstd" : "rstd") + " must be " + std::to_string(split.rows) + " " +
              scalar_type_name(stats) + " values each");
}

// The backward of layer norm (kCentered; dbias given) and RMS norm (mean and dbias nullptr) over
// split.rows > 0 rows of split.D > 0 elements: dx, and the column sums into dweight / dbias.
template <bool kCentered>
void row_norm_backward(const char* op, const DeviceArray& g, const DeviceArray& x, const DeviceArray* weight,
                       const DeviceArray* mean, const DeviceArray& rstd, const DeviceArray* grad_sum,
                       const RowSplit& split, DeviceArray& dx, DeviceArray* dweight, DeviceArray* dbias) {
  const bool fp64 = x.dtype() == ScalarType::Float64;
  const bool fused = split.D <= fused_max_row(fp64);
  // fused: blocks of R row groups of `threads` threads, two blocks per SM; else chunks of rows
  const int elements = fused_elements(fp64);
  const int threads = static_cast<int>(
      std::clamp<std::int64_t>(next_power_of_two((split.D + elements - 1) / elements), 32, kFusedMaxThreads));
  const int groups = kFusedMaxThreads / threads;
  const std::int64_t chunks =
      fused ? std::min<std::int64_t>((split.rows + groups - 1) / groups, 2 * multiprocessor_count(x.device()))
            : std::min<std::int64_t>(std::max<std::int64_t>((split.rows + 31) / 32, 1), 512);
  DeviceArray partials = DeviceArray::empty({2, chunks, split.D}, statistics_type(x.dtype()), x.device());
  KernelLaunch launch(dx, partials, g, x, rstd);
  for (const DeviceArray* a : {weight, mean, grad_sum, static_cast<const DeviceArray*>(dweight),
                               static_cast<const DeviceArray*>(dbias)}) {
    if (a != nullptr) a->storage()->use_on(launch.stream(), launch.device());
  }
  dispatch_floating(x.dtype(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using Acc = compute_t<T>;
    Acc* partial_weight = partials.data<Acc>();
    Acc* partial_bias = partial_weight + chunks * split.D;
    const Acc* mean_data = mean != nullptr ? mean->data<Acc>() : nullptr;
    if (fused) {
      nn::with_pack_width<T>(split.D, [&](auto width) {
        layer_norm_backward_fused_kernel<T, decltype(width)::value, kCentered>
            <<<static_cast<unsigned>(chunks), dim3(threads, groups), 0, launch.stream()>>>(
                g.data<T>(), x.data<T>(), data_or_null<T>(weight), mean_data, rstd.data<Acc>(),
                data_or_null<T>(grad_sum), dx.data<T>(), partial_weight, partial_bias, split.rows, split.D);
      }, g.data<T>(), x.data<T>(), dx.data<T>(), data_or_null<T>(grad_sum));
    } else {
      const std::int64_t rows_per_chunk = (split.rows + chunks - 1) / chunks;
      nn::with_pack_width<T>(split.D, [&](auto width) {
        layer_norm_backward_dx_kernel<T, decltype(width)::value, kCentered>
            <<<nn::row_blocks(split.rows), nn::row_block_threads(split.D), 0, launch.stream()>>>(
                g.data<T>(), x.data<T>(), data_or_null<T>(weight), mean_data, rstd.data<Acc>(),
                data_or_null<T>(grad_sum), dx.data<T>(), split.rows, split.D);
      }, g.data<T>(), x.data<T>(), dx.data<T>(), data_or_null<T>(grad_sum));
      if (dweight != nullptr || dbias != nullptr) {
        const dim3 tiles(static_cast<unsigned>((split.D + kColumnTile - 1) / kColumnTile),
                         static_cast<unsigned>(chunks));
        layer_norm_param_partials_kernel<T><<<tiles, dim3(kColumnTile, kRowLanes), 0, launch.stream()>>>(
            g.data<T>(), x.data<T>(), mean_data, rstd.data<Acc>(), partial_weight, partial_bias, split.rows, split.D,
            rows_per_chunk);
      }
    }
    if (dweight != nullptr || dbias != nullptr) {
      layer_norm_param_finish_kernel<T><<<grid_size(split.D), kBlockSize, 0, launch.stream()>>>(
          partial_weight, partial_bias, dweight != nullptr ? dweight->data<T>() : nullptr,
          dbias != nullptr ? dbias->data<T>() : nullptr, chunks, split.D);
    }
  });
  ADCUDA_CHECK_LAUNCH();
}

// Zero gradients for the parameters (sums over no rows).
void zero_parameters(std::initializer_list<DeviceArray*> arrays) {
  for (DeviceArray* a : arrays) {
    if (a == nullptr) continue;
    KernelLaunch launch(*a);
    ADCUDA_CHECK(cudaMemsetAsync(a->data_ptr(), 0, a->nbytes(), launch.stream()));
  }
}

}  // namespace

std::tuple<DeviceArray, DeviceArray, DeviceArray> layer_norm(const DeviceArray& x, const DeviceArray* weight,
                                                             const DeviceArray* bias, int n, double eps) {
  const char* op = "layer_norm";
  require(x.is_contiguous(), op, "the input must be contiguous");
  const RowSplit split = split_rows(x, n, op);
  check_parameter(weight, x, split.D, op, "weight");
  check_parameter(bias, x, split.D, op, "bias");
  DeviceArray y = DeviceArray::empty(x.shape(), x.dtype(), x.device());
  DeviceArray mean = DeviceArray::empty(split.statistics_shape, statistics_type(x.dtype()), x.device());
  DeviceArray rstd = DeviceArray::empty(split.statistics_shape, statistics_type(x.dtype()), x.device());
  if (split.rows == 0) return {y, mean, rstd};
  row_norm_forward<true>(op, x, nullptr, weight, bias, split, eps, y, nullptr, &mean, rstd);
  return {y, mean, rstd};
}

std::tuple<DeviceArray, std::optional<DeviceArray>, DeviceArray> layer_norm_backward(const DeviceArray& g,
                                                                                     const DeviceArray& x,
                                                                                     const DeviceArray* weight,
                                                                                     const DeviceArray& mean,
                                                                                     const DeviceArray& rstd, int n) {
  const char* op = "layer_norm_backward";
  const RowSplit split = split_rows(x, n, op);
  check_backward_operands(op, g, x, &mean, rstd, split);
  check_parameter(weight, x, split.D, op, "weight");
  DeviceArray dx = DeviceArray::empty(x.shape(), x.dtype(), x.device());
  std::optional<DeviceArray> dweight;
  if (weight != nullptr) dweight = DeviceArray::empty(weight->shape(), x.dtype(), x.device());
  DeviceArray dbias = DeviceArray::empty(weight != nullptr ? weight->shape() : Dims(x.shape().end() - n, x.shape().end()),
                                         x.dtype(), x.device());
  DeviceArray* dweight_or_null = dweight ? &*dweight : nullptr;
  if (split.D == 0) return {dx, dweight, dbias};
  if (split.rows == 0) {
    zero_parameters({&dbias, dweight_or_null});
    return {dx, dweight, dbias};
  }
  row_norm_backward<true>(op, g, x, weight, &mean, rstd, nullptr, split, dx, dweight_or_null, &dbias);
  return {dx, dweight, dbias};
}

std::tuple<DeviceArray, DeviceArray, DeviceArray, DeviceArray> add_layer_norm(const DeviceArray& x,
                                                                             const DeviceArray& residual,
                                                                             const DeviceArray* weight,
                                                                             const DeviceArray* bias, int n,
                                                                             double eps, ScalarType y_dtype) {
  const char* op = "add_layer_norm";
  require(x.is_contiguous() && residual.is_contiguous(), op, "the input and the residual must be contiguous");
  require(residual.shape() == x.shape() && residual.dtype() == x.dtype(), op,
          "the residual " + format_dims(residual.shape()) + " " + scalar_type_name(residual.dtype()) +
              " does not match the input " + format_dims(x.shape()) + " " + scalar_type_name(x.dtype()));
  require(residual.device() == x.device(), op, "the input and the residual are on different devices");
  const RowSplit split = split_rows(x, n, op);
  check_parameter(weight, x, split.D, op, "weight");
  check_parameter(bias, x, split.D, op, "bias");
  DeviceArray y = DeviceArray::empty(x.shape(), y_dtype, x.device());
  DeviceArray sum = DeviceArray::empty(x.shape(), x.dtype(), x.device());
  DeviceArray mean = DeviceArray::empty(split.statistics_shape, statistics_type(x.dtype()), x.device());
  DeviceArray rstd = DeviceArray::empty(split.statistics_shape, statistics_type(x.dtype()), x.device());
  if (split.rows == 0) return {y, sum, mean, rstd};
  row_norm_forward<true>(op, x, &residual, weight, bias, split, eps, y, &sum, &mean, rstd);
  return {y, sum, mean, rstd};
}

std::tuple<DeviceArray, std::optional<DeviceArray>, DeviceArray> add_layer_norm_backward(
    const DeviceArray& g, const DeviceArray* grad_sum, const DeviceArray& h, const DeviceArray* weight,
    const DeviceArray& mean, const DeviceArray& rstd, int n) {
  const char* op = "add_layer_norm_backward";
  const RowSplit split = split_rows(h, n, op);
  check_backward_operands(op, g, h, &mean, rstd, split);
  check_parameter(weight, h, split.D, op, "weight");
  if (grad_sum != nullptr) {
    require(grad_sum->is_contiguous() && grad_sum->shape() == h.shape() && grad_sum->dtype() == h.dtype(), op,
            "the sum's gradient " + format_dims(grad_sum->shape()) + " " + scalar_type_name(grad_sum->dtype()) +
                " must be contiguous and match the sum " + format_dims(h.shape()) + " " + scalar_type_name(h.dtype()));
  }
  DeviceArray dh = DeviceArray::empty(h.shape(), h.dtype(), h.device());
  std::optional<DeviceArray> dweight;
  if (weight != nullptr) dweight = DeviceArray::empty(weight->shape(), h.dtype(), h.device());
  DeviceArray dbias = DeviceArray::empty(weight != nullptr ? weight->shape() : Dims(h.shape().end() - n, h.shape().end()),
                                         h.dtype(), h.device());
  DeviceArray* dweight_or_null = dweight ? &*dweight : nullptr;
  if (split.D == 0) return {dh, dweight, dbias};
  if (split.rows == 0) {
    zero_parameters({&dbias, dweight_or_null});
    return {dh, dweight, dbias};
  }
  row_norm_backward<true>(op, g, h, weight, &mean, rstd, grad_sum, split, dh, dweight_or_null, &dbias);
  return {dh, dweight, dbias};
}

std::tuple<DeviceArray, DeviceArray> rms_norm(const DeviceArray& x, const DeviceArray* weight, int n, double eps) {
  const char* op = "rms_norm";
  require(x.is_contiguous(), op, "the input must be contiguous");
  const RowSplit split = split_rows(x, n, op);
  check_parameter(weight, x, split.D, op, "weight");
  DeviceArray y = DeviceArray::empty(x.shape(), x.dtype(), x.device());
  DeviceArray rstd = DeviceArray::empty(split.statistics_shape, statistics_type(x.dtype()), x.device());
  if (split.rows == 0) return {y, rstd};
  row_norm_forward<false>(op, x, nullptr, weight, nullptr, split, eps, y, nullptr, nullptr, rstd);
  return {y, rstd};
}

std::tuple<DeviceArray, std::optional<DeviceArray>> rms_norm_backward(const DeviceArray& g, const DeviceArray& x,
                                                                      const DeviceArray* weight,
                                                                      const DeviceArray& rstd, int n) {
  const char* op = "rms_norm_backward";
  const RowSplit split = split_rows(x, n, op);
  check_backward_operands(op, g, x, nullptr, rstd, split);
  check_parameter(weight, x, split.D, op, "weight");
  DeviceArray dx = DeviceArray::empty(x.shape(), x.dtype(), x.device());
  std::optional<DeviceArray> dweight;
  if (weight != nullptr) dweight = DeviceArray::empty(weight->shape(), x.dtype(), x.device());
  DeviceArray* dweight_or_null = dweight ? &*dweight : nullptr;
  if (split.D == 0) return {dx, dweight};
  if (split.rows == 0) {
    zero_parameters({dweight_or_null});
    return {dx, dweight};
  }
  row_norm_backward<false>(op, g, x, weight, nullptr, rstd, nullptr, split, dx, dweight_or_null, nullptr);
  return {dx, dweight};
}

std::tuple<DeviceArray, DeviceArray, DeviceArray> batch_norm(const DeviceArray& x, const DeviceArray* weight,
                                                             const DeviceArray* bias, double eps) {
  const char* op = "batch_norm";
  require(x.is_contiguous(), op, "the input must be contiguous");
  const ChannelSplit split = split_channels(x, op);
  check_parameter(weight, x, split.C, op, "weight");
  check_parameter(bias, x, split.C, op, "bias");
  DeviceArray y = DeviceArray::empty(x.shape(), x.dtype(), x.device());
  DeviceArray mean = DeviceArray::empty({split.C}, statistics_type(x.dtype()), x.device());
  DeviceArray rstd = DeviceArray::empty({split.C}, statistics_type(x.dtype()), x.device());
  if (split.C == 0) return {y, mean, rstd};
  KernelLaunch launch(y, mean, rstd, x);
  for (const DeviceArray* p : {weight, bias}) {
    if (p != nullptr) p->storage()->use_on(launch.stream(), launch.device());
  }
  dispatch_floating(x.dtype(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using Acc = compute_t<T>;
    if (split.S < kShortPlane && x.numel() > 0) {
      const std::int64_t W = split.C * split.S;
      const ColumnChunks split_rows = column_chunks(split.N, W, launch.device());
      DeviceArray partials = DeviceArray::empty({2, split_rows.chunks, W}, mean.dtype(), x.device());
      partials.storage()->use_on(launch.stream(), launch.device());
      Acc* partial_mean = partials.data<Acc>();
      Acc* partial_m2 = partial_mean + split_rows.chunks * W;
      batch_norm_column_moments_kernel<T><<<split_rows.grid, dim3(kColumnTile, kColumnLanes), 0, launch.stream()>>>(
          x.data<T>(), partial_mean, partial_m2, split.N, W, split_rows.rows_per_chunk);
      batch_norm_finish_moments_kernel<T><<<grid_size(split.C), kBlockSize, 0, launch.stream()>>>(
          partial_mean, partial_m2, mean.data<Acc>(), rstd.data<Acc>(), split.N, split.C, split.S, split_rows.chunks,
          split_rows.rows_per_chunk, eps);
    } else {
      // an empty batch gives 0 / 0 statistics (NaN), as the CPU backend's mean of nothing
      batch_norm_stats_kernel<T><<<channel_blocks(split.C), kBlockSize, 0, launch.stream()>>>(
          x.data<T>(), mean.data<Acc>(), rstd.data<Acc>(), split.N, split.C, split.S, eps);
    }
    if (x.numel() > 0) {
      batch_norm_apply_kernel<T><<<grid_size(x.numel()), kBlockSize, 0, launch.stream()>>>(
          x.data<T>(), mean.data<Acc>(), rstd.data<Acc>(), data_or_null<T>(weight), data_or_null<T>(bias), y.data<T>(),
          x.numel(), split.C, split.S);
    }
  });
  ADCUDA_CHECK_LAUNCH();
  return {y, mean, rstd};
}

std::tuple<DeviceArray, std::optional<DeviceArray>, DeviceArray> batch_norm_backward(const DeviceArray& g,
                                                                                     const DeviceArray& x,
                                                                                     const DeviceArray* weight,
                                                                                     const DeviceArray& mean,
                                                                                     const DeviceArray& rstd) {
  const char* op = "batch_norm_backward";
  require(x.is_contiguous() && g.is_contiguous() && mean.is_contiguous() && rstd.is_contiguous(), op,
          "the arrays must be contiguous");
  require(g.shape() == x.shape() && g.dtype() == x.dtype(), op,
          "the gradient " + format_dims(g.shape()) + " " + scalar_type_name(g.dtype()) + " does not match the input " +
              format_dims(x.shape()) + " " + scalar_type_name(x.dtype()));
  const ChannelSplit split = split_channels(x, op);
  check_parameter(weight, x, split.C, op, "weight");
  const ScalarType stats = statistics_type(x.dtype());
  require(mean.numel() == split.C && rstd.numel() == split.C && mean.dtype() == stats && rstd.dtype() == stats, op,
          "mean and rstd must be " + std::to_string(split.C) + " " + scalar_type_name(stats) + " values each");
  DeviceArray dx = DeviceArray::empty(x.shape(), x.dtype(), x.device());
  std::optional<DeviceArray> dweight;
  if (weight != nullptr) dweight = DeviceArray::empty({split.C}, x.dtype(), x.device());
  DeviceArray dbias = DeviceArray::empty({split.C}, x.dtype(), x.device());
  if (split.C == 0) return {dx, dweight, dbias};
  DeviceArray sums = DeviceArray::empty({2, split.C}, stats, x.device());
  KernelLaunch launch(dx, dbias, sums, g, x, mean, rstd);
  if (weight != nullptr) {
    weight->storage()->use_on(launch.stream(), launch.device());
    dweight->storage()->use_on(launch.stream(), launch.device());
  }
  dispatch_floating(x.dtype(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using Acc = compute_t<T>;
    if (split.S < kShortPlane && x.numel() > 0) {
      const std::int64_t W = split.C * split.S;
      const ColumnChunks split_rows = column_chunks(split.N, W, launch.device());
      DeviceArray partials = DeviceArray::empty({2, split_rows.chunks, W}, stats, x.device());
      partials.storage()->use_on(launch.stream(), launch.device());
      Acc* partial_g = partials.data<Acc>();
      Acc* partial_g_xhat = partial_g + split_rows.chunks * W;
      batch_norm_backward_column_sums_kernel<T>
          <<<split_rows.grid, dim3(kColumnTile, kColumnLanes), 0, launch.stream()>>>(
              g.data<T>(), x.data<T>(), mean.data<Acc>(), rstd.data<Acc>(), partial_g, partial_g_xhat, split.N,
              split.S, W, split_rows.rows_per_chunk);
      batch_norm_backward_finish_sums_kernel<T><<<grid_size(split.C), kBlockSize, 0, launch.stream()>>>(
          partial_g, partial_g_xhat, sums.data<Acc>(), dweight ? dweight->data<T>() : nullptr, dbias.data<T>(),
          split.C, split.S, split_rows.chunks);
    } else {
      batch_norm_backward_sums_kernel<T><<<channel_blocks(split.C), kBlockSize, 0, launch.stream()>>>(
          g.data<T>(), x.data<T>(), mean.data<Acc>(), rstd.data<Acc>(), sums.data<Acc>(),
          dweight ? dweight->data<T>() : nullptr, dbias.data<T>(), split.N, split.C, split.S);
    }
    if (x.numel() > 0) {
      batch_norm_backward_dx_kernel<T><<<grid_size(x.numel()), kBlockSize, 0, launch.stream()>>>(
          g.data<T>(), x.data<T>(), mean.data<Acc>(), rstd.data<Acc>(), data_or_null<T>(weight), sums.data<Acc>(),
          dx.data<T>(), x.numel(), split.C, split.S, split.N * split.S);
    }
  });
  ADCUDA_CHECK_LAUNCH();
  return {dx, dweight, dbias};
}

namespace {

struct GroupSplit {
  ChannelSplit channels;
  std::int64_t G, Cg;
};

GroupSplit split_groups(const DeviceArray& x, std::int64_t groups, const char* op) {
  const ChannelSplit channels = split_channels(x, op);
  require(groups >= 1 && channels.C % groups == 0, op,
          "the channels of " + format_dims(x.shape()) + " must divide into " + std::to_string(groups) + " groups");
  return {channels, groups, channels.C / groups};
}

}  // namespace

std::tuple<DeviceArray, DeviceArray, DeviceArray> group_norm(const DeviceArray& x, const DeviceArray* weight,
                                                             const DeviceArray* bias, std::int64_t groups,
                                                             double eps) {
  const char* op = "group_norm";
  require(x.is_contiguous(), op, "the input must be contiguous");
  const GroupSplit split = split_groups(x, groups, op);
  check_parameter(weight, x, split.channels.C, op, "weight");
  check_parameter(bias, x, split.channels.C, op, "bias");
  DeviceArray y = DeviceArray::empty(x.shape(), x.dtype(), x.device());
  DeviceArray mean = DeviceArray::empty({split.channels.N, groups}, statistics_type(x.dtype()), x.device());
  DeviceArray rstd = DeviceArray::empty({split.channels.N, groups}, statistics_type(x.dtype()), x.device());
  const std::int64_t rows = split.channels.N * groups;
  if (rows == 0) return {y, mean, rstd};
  KernelLaunch launch(y, mean, rstd, x);
  for (const DeviceArray* p : {weight, bias}) {
    if (p != nullptr) p->storage()->use_on(launch.stream(), launch.device());
  }
  dispatch_floating(x.dtype(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using Acc = compute_t<T>;
    // an empty row (S = 0) gives 0 / 0 statistics (NaN), as the CPU backend's mean of nothing
    group_norm_kernel<T><<<nn::row_blocks(rows), nn::row_block_threads(split.Cg * split.channels.S), 0,
                           launch.stream()>>>(x.data<T>(), data_or_null<T>(weight), data_or_null<T>(bias), y.data<T>(),
                                              mean.data<Acc>(), rstd.data<Acc>(), rows, groups, split.Cg,
                                              split.channels.S, eps);
  });
  ADCUDA_CHECK_LAUNCH();
  return {y, mean, rstd};
}

std::tuple<DeviceArray, std::optional<DeviceArray>, DeviceArray> group_norm_backward(
    const DeviceArray& g, const DeviceArray& x, const DeviceArray* weight, const DeviceArray& mean,
    const DeviceArray& rstd, std::int64_t groups) {
  const char* op = "group_norm_backward";
  const GroupSplit split = split_groups(x, groups, op);
  const std::int64_t N = split.channels.N, C = split.channels.C, rows = N * groups;
  require(x.is_contiguous() && g.is_contiguous() && mean.is_contiguous() && rstd.is_contiguous(), op,
          "the arrays must be contiguous");
  require(g.shape() == x.shape() && g.dtype() == x.dtype(), op,
          "the gradient " + format_dims(g.shape()) + " " + scalar_type_name(g.dtype()) + " does not match the input " +
              format_dims(x.shape()) + " " + scalar_type_name(x.dtype()));
  const ScalarType stats = statistics_type(x.dtype());
  require(mean.numel() == rows && rstd.numel() == rows && mean.dtype() == stats && rstd.dtype() == stats, op,
          "mean and rstd must be " + std::to_string(rows) + " " + scalar_type_name(stats) + " values each");
  check_parameter(weight, x, C, op, "weight");
  DeviceArray dx = DeviceArray::empty(x.shape(), x.dtype(), x.device());
  std::optional<DeviceArray> dweight;
  if (weight != nullptr) dweight = DeviceArray::empty({C}, x.dtype(), x.device());
  DeviceArray dbias = DeviceArray::empty({C}, x.dtype(), x.device());
  if (C == 0) return {dx, dweight, dbias};
  if (N == 0 || split.channels.S == 0) {
    zero_parameters({&dbias, dweight ? &*dweight : nullptr});
    return {dx, dweight, dbias};
  }
  DeviceArray partials = DeviceArray::empty({2, N, C}, stats, x.device());
  KernelLaunch launch(dx, dbias, partials, g, x, mean, rstd);
  if (weight != nullptr) {
    weight->storage()->use_on(launch.stream(), launch.device());
    dweight->storage()->use_on(launch.stream(), launch.device());
  }
  dispatch_floating(x.dtype(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using Acc = compute_t<T>;
    Acc* partial_weight = partials.data<Acc>();
    Acc* partial_bias = partial_weight + N * C;
    group_norm_backward_kernel<T><<<nn::row_blocks(rows), nn::row_block_threads(split.channels.S), 0,
                                    launch.stream()>>>(g.data<T>(), x.data<T>(), data_or_null<T>(weight),
                                                       mean.data<Acc>(), rstd.data<Acc>(), dx.data<T>(),
                                                       partial_weight, partial_bias, rows, groups, split.Cg,
                                                       split.channels.S);
    group_norm_parameter_sums_kernel<T><<<grid_size(C), kBlockSize, 0, launch.stream()>>>(
        partial_weight, partial_bias, dweight ? dweight->data<T>() : nullptr, dbias.data<T>(), N, C);
  });
  ADCUDA_CHECK_LAUNCH();
  return {dx, dweight, dbias};
}

}  // namespace adcuda
