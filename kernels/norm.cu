// Layer norm: one block per row for the row-wise work (forward; backward's dx), and a two-pass
// column reduction for the weight and bias gradients.
//
// Forward takes the two-pass statistics the CPU backend takes (mean, then the mean of squared
// deviations), reading the row three times; the second and third reads come from L1/L2, so DRAM sees
// one read and one write. The weight/bias gradients are sums over every row: blocks of 32 columns x
// a chunk of rows write partial sums, and a second small kernel adds each column's partials in a
// fixed order, so the result is deterministic and no two threads ever update the same address.
#include "norm.h"

#include <stdexcept>
#include <string>

#include "nn_common.cuh"
#include "runtime/dispatch.cuh"
#include "runtime/errors.h"
#include "runtime/launch.cuh"

namespace adcuda {
namespace {

using nn::block_reduce;

template <typename T, int V>
__global__ void layer_norm_kernel(const T* x, const T* weight, const T* bias, T* y, compute_t<T>* mean_out,
                                  compute_t<T>* rstd_out, std::int64_t rows, std::int64_t D, double eps) {
  using Acc = compute_t<T>;
  __shared__ Acc scratch[32];
  const std::int64_t first = static_cast<std::int64_t>(threadIdx.x) * V;
  const std::int64_t step = static_cast<std::int64_t>(blockDim.x) * V;
  for (std::int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* in = x + row * D;
    Acc partial = Acc(0);
    for (std::int64_t j = first; j < D; j += step) {
      const auto pack = nn::load_pack<T, V>(in + j);
#pragma unroll
      for (int k = 0; k < V; ++k) partial += to_compute(pack.item[k]);
    }
    const Acc mean = block_reduce(partial, nn::Sum{}, scratch) / static_cast<Acc>(D);
    partial = Acc(0);
    for (std::int64_t j = first; j < D; j += step) {
      const auto pack = nn::load_pack<T, V>(in + j);
#pragma unroll
      for (int k = 0; k < V; ++k) {
        const Acc centered = to_compute(pack.item[k]) - mean;
        partial += centered * centered;
      }
    }
    const Acc variance = block_reduce(partial, nn::Sum{}, scratch) / static_cast<Acc>(D);
    const Acc rstd = Acc(1) / nn::sqrt_of(variance + static_cast<Acc>(eps));
    for (std::int64_t j = first; j < D; j += step) {
      auto pack = nn::load_pack<T, V>(in + j);
#pragma unroll
      for (int k = 0; k < V; ++k) {
        Acc value = (to_compute(pack.item[k]) - mean) * rstd;
        if (weight != nullptr) value *= to_compute(weight[j + k]);
        if (bias != nullptr) value += to_compute(bias[j + k]);
        pack.item[k] = convert<T>(value);
      }
      nn::store_pack<T, V>(y + row * D + j, pack);
    }
    if (threadIdx.x == 0) {
      mean_out[row] = mean;
      rstd_out[row] = rstd;
    }
  }
}

// dx = rstd * (gx - mean(gx) - xhat * mean(gx * xhat)), gx = g * weight, xhat = (x - mean) * rstd.
template <typename T, int V>
__global__ void layer_norm_backward_dx_kernel(const T* g, const T* x, const T* weight, const compute_t<T>* mean,
                                              const compute_t<T>* rstd, T* dx, std::int64_t rows, std::int64_t D) {
  using Acc = compute_t<T>;
  __shared__ Acc scratch[32];
  const std::int64_t first = static_cast<std::int64_t>(threadIdx.x) * V;
  const std::int64_t step = static_cast<std::int64_t>(blockDim.x) * V;
  for (std::int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* gr = g + row * D;
    const T* xr = x + row * D;
    const Acc row_mean = mean[row], row_rstd = rstd[row];
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
    const Acc mean_gx = block_reduce(sum_gx, nn::Sum{}, scratch) / static_cast<Acc>(D);
    const Acc mean_gx_xhat = block_reduce(sum_gx_xhat, nn::Sum{}, scratch) / static_cast<Acc>(D);
    for (std::int64_t j = first; j < D; j += step) {
      const auto gp = nn::load_pack<T, V>(gr + j);
      auto xp = nn::load_pack<T, V>(xr + j);
#pragma unroll
      for (int k = 0; k < V; ++k) {
        Acc gx = to_compute(gp.item[k]);
        if (weight != nullptr) gx *= to_compute(weight[j + k]);
        const Acc xhat = (to_compute(xp.item[k]) - row_mean) * row_rstd;
        xp.item[k] = convert<T>(row_rstd * (gx - mean_gx - xhat * mean_gx_xhat));
      }
      nn::store_pack<T, V>(dx + row * D + j, xp);
    }
  }
}

constexpr int kColumnTile = 32;
constexpr int kRowLanes = 8;

// Pass 1 of the weight/bias gradients: block (32 columns, chunk of rows) -> partial sums of g * xhat
// and of g for its columns, at partial_*[chunk * D + column].
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
      const Acc xhat = (to_compute(x[row * D + column]) - mean[row]) * rstd[row];
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

// Pass 2: each column's partials, added in chunk order. dweight may be nullptr (no weight).
template <typename T>
__global__ void layer_norm_param_finish_kernel(const compute_t<T>* partial_weight, const compute_t<T>* partial_bias,
                                               T* dweight, T* dbias, std::int64_t chunks, std::int64_t D) {
  using Acc = compute_t<T>;
  ADCUDA_GRID_STRIDE_LOOP(column, D) {
    Acc sum_weight = Acc(0), sum_bias = Acc(0);
    for (std::int64_t chunk = 0; chunk < chunks; ++chunk) {
      sum_weight += partial_weight[chunk * D + column];
      sum_bias += partial_bias[chunk * D + column];
    }
    if (dweight != nullptr) dweight[column] = convert<T>(sum_weight);
    dbias[column] = convert<T>(sum_bias);
  }
}

// ------------------------------------------------------------------------------------------------
// Host side.
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

void require(bool condition, const char* op, const std::string& what) {
  if (!condition) throw std::invalid_argument(std::string(op) + ": " + what);
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

template <typename F>
void dispatch_floating(ScalarType type, const char* op, F&& f) {
  dispatch_type(type, op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_floating_point_v<T> || is_reduced_float_v<T>) {
      f(tag);
    } else {
      throw std::invalid_argument(std::string(op) + ": expected a floating point array, got " + scalar_type_name(type));
    }
  });
}

// Calls f with V = 16 bytes' worth of T when rows of D elements at every pointer (and the weight /
// bias indices j..j+V) can go in packs, else V = 1.
template <typename T, typename F, typename... Pointers>
void with_pack_width(std::int64_t D, F&& f, const Pointers*... pointers) {
  constexpr int kWide = nn::kPackWidth<T>;
  if (nn::rows_packable(D, kWide, sizeof(T), pointers...)) {
    f(std::integral_constant<int, kWide>{});
  } else {
    f(std::integral_constant<int, 1>{});
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
  KernelLaunch launch(y, mean, rstd, x);
  for (const DeviceArray* p : {weight, bias}) {
    if (p != nullptr) p->storage()->use_on(launch.stream(), launch.device());
  }
  dispatch_floating(x.dtype(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using Acc = compute_t<T>;
    with_pack_width<T>(split.D, [&](auto width) {
      layer_norm_kernel<T, decltype(width)::value>
          <<<nn::row_blocks(split.rows), nn::row_block_threads(split.D), 0, launch.stream()>>>(
              x.data<T>(), data_or_null<T>(weight), data_or_null<T>(bias), y.data<T>(), mean.data<Acc>(),
              rstd.data<Acc>(), split.rows, split.D, eps);
    }, x.data<T>(), y.data<T>());
  });
  ADCUDA_CHECK_LAUNCH();
  return {y, mean, rstd};
}

std::tuple<DeviceArray, std::optional<DeviceArray>, DeviceArray> layer_norm_backward(const DeviceArray& g,
                                                                                     const DeviceArray& x,
                                                                                     const DeviceArray* weight,
                                                                                     const DeviceArray& mean,
                                                                                     const DeviceArray& rstd, int n) {
  const char* op = "layer_norm_backward";
  require(x.is_contiguous() && g.is_contiguous() && mean.is_contiguous() && rstd.is_contiguous(), op,
          "the arrays must be contiguous");
  require(g.shape() == x.shape() && g.dtype() == x.dtype(), op,
          "the gradient " + format_dims(g.shape()) + " " + scalar_type_name(g.dtype()) + " does not match the input " +
              format_dims(x.shape()) + " " + scalar_type_name(x.dtype()));
  const RowSplit split = split_rows(x, n, op);
  check_parameter(weight, x, split.D, op, "weight");
  const ScalarType stats = statistics_type(x.dtype());
  require(mean.numel() == split.rows && rstd.numel() == split.rows && mean.dtype() == stats && rstd.dtype() == stats,
          op, "mean and rstd must be " + std::to_string(split.rows) + " " + scalar_type_name(stats) + " values each");

  DeviceArray dx = DeviceArray::empty(x.shape(), x.dtype(), x.device());
  std::optional<DeviceArray> dweight;
  if (weight != nullptr) dweight = DeviceArray::empty(weight->shape(), x.dtype(), x.device());
  DeviceArray dbias = DeviceArray::empty(weight != nullptr ? weight->shape() : Dims(x.shape().end() - n, x.shape().end()),
                                         x.dtype(), x.device());
  if (split.D == 0) return {dx, dweight, dbias};
  if (split.rows == 0) {
    // sums over no rows: zero gradients for the parameters
    KernelLaunch launch(dbias);
    ADCUDA_CHECK(cudaMemsetAsync(dbias.data_ptr(), 0, dbias.nbytes(), launch.stream()));
    if (dweight) {
      dweight->storage()->use_on(launch.stream(), launch.device());
      ADCUDA_CHECK(cudaMemsetAsync(dweight->data_ptr(), 0, dweight->nbytes(), launch.stream()));
    }
    return {dx, dweight, dbias};
  }

  const std::int64_t chunks = std::min<std::int64_t>(std::max<std::int64_t>((split.rows + 31) / 32, 1), 512);
  const std::int64_t rows_per_chunk = (split.rows + chunks - 1) / chunks;
  DeviceArray partials = DeviceArray::empty({2, chunks, split.D}, stats, x.device());
  KernelLaunch launch(dx, dbias, partials, g, x, mean, rstd);
  if (weight != nullptr) {
    weight->storage()->use_on(launch.stream(), launch.device());
    dweight->storage()->use_on(launch.stream(), launch.device());
  }
  dispatch_floating(x.dtype(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using Acc = compute_t<T>;
    with_pack_width<T>(split.D, [&](auto width) {
      layer_norm_backward_dx_kernel<T, decltype(width)::value>
          <<<nn::row_blocks(split.rows), nn::row_block_threads(split.D), 0, launch.stream()>>>(
              g.data<T>(), x.data<T>(), data_or_null<T>(weight), mean.data<Acc>(), rstd.data<Acc>(), dx.data<T>(),
              split.rows, split.D);
    }, g.data<T>(), x.data<T>(), dx.data<T>());
    Acc* partial_weight = partials.data<Acc>();
    Acc* partial_bias = partial_weight + chunks * split.D;
    const dim3 tiles(static_cast<unsigned>((split.D + kColumnTile - 1) / kColumnTile), static_cast<unsigned>(chunks));
    layer_norm_param_partials_kernel<T><<<tiles, dim3(kColumnTile, kRowLanes), 0, launch.stream()>>>(
        g.data<T>(), x.data<T>(), mean.data<Acc>(), rstd.data<Acc>(), partial_weight, partial_bias, split.rows, split.D,
        rows_per_chunk);
    layer_norm_param_finish_kernel<T><<<grid_size(split.D), kBlockSize, 0, launch.stream()>>>(
        partial_weight, partial_bias, dweight ? dweight->data<T>() : nullptr, dbias.data<T>(), chunks, split.D);
  });
  ADCUDA_CHECK_LAUNCH();
  return {dx, dweight, dbias};
}

}  // namespace adcuda
