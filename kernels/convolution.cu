// 2-d convolution as implicit GEMM (see convolution.h): no column matrix is ever written; each GEMM
// tile gathers its operands from the NCHW tensors as it loads them.
//
// The three primitives are three GEMM "problems" over the same two kernels:
//   forward        M = N*Ho*Wo (output pixels)  N = O/groups      K = C/groups*kh*kw   (per group)
//   backward data  M = N*H*W (input pixels)     N = C/groups      K = O/groups*kh*kw   (per group; a tap
//                  reads g where (h + pad - i*dilation) is a multiple of the stride, else 0)
//   backward weight M = O/groups                N = C/groups*kh*kw K = N*Ho*Wo, split into ranges whose
//                  fp32 partial sums a second kernel adds in a fixed order
// A problem says how to read A(m, k) and B(k, n) (zero outside the tensors) and where D(m, n) goes;
// blockIdx.z picks the group (and the K split).
//
// fp16 / bf16 run on the tensor cores: block tile 64 x 64 x 32, 4 warps as 2 x 2, each warp 32 x 32
// outputs = 2 x 4 mma.sync m16n8k16 with fp32 accumulators; operands are gathered element by element
// into registers one K tile ahead (the loads of tile t + 1 are in flight while tile t's mma run),
// then stored to shared memory [row][k] with rows padded by 8 elements so that the fragment reads
// (32-bit, lane-strided) fall in distinct banks. fp32 / fp64 take a SIMT kernel: block tile 64 x 64
// x 16, 256 threads with 4 x 4 outputs each, fp32 (fp64) FMA.
#include "convolution.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>

#if defined(ADCUDA_EMULATION)
#include "emulator/ptx_sm80.h"
#endif
#include "elementwise_loops.cuh"
#include "runtime/dispatch.cuh"
#include "runtime/errors.h"
#include "runtime/launch.cuh"

namespace adcuda {
namespace {

// ------------------------------------------------------------------------------------------------
// The three problems. Element reads return the storage type (zero outside the tensor).
template <typename T>
struct ForwardProblem {
  const T* x;
  const T* weight;
  T* y;
  ConvGeometry g;
  std::int64_t M, N, K;
  static constexpr bool kAAlongM = true;  // consecutive m are consecutive output columns: coalesced reads

  __device__ __forceinline__ std::int64_t k_begin(int) const { return 0; }
  __device__ __forceinline__ std::int64_t k_end(int) const { return K; }
  __device__ __forceinline__ T a(int z, std::int64_t m, std::int64_t k) const {
    const std::int64_t plane = g.ho * g.wo;
    const std::int64_t n = m / plane, r = m - n * plane;
    const std::int64_t oh = r / g.wo, ow = r - oh * g.wo;
    const std::int64_t taps = g.kh * g.kw;
    const std::int64_t c = k / taps, t = k - c * taps;
    const std::int64_t i = t / g.kw, j = t - i * g.kw;
    const std::int64_t ih = oh * g.stride_h - g.pad_h + i * g.dilation_h;
    const std::int64_t iw = ow * g.stride_w - g.pad_w + j * g.dilation_w;
    if (ih < 0 || ih >= g.h || iw < 0 || iw >= g.w) return T(0.0f);
    const std::int64_t channel = z * (g.c / g.groups) + c;
    return x[((n * g.c + channel) * g.h + ih) * g.w + iw];
  }
  __device__ __forceinline__ T b(int z, std::int64_t k, std::int64_t n) const {
    return weight[(z * N + n) * K + k];
  }
  template <typename Acc>
  __device__ __forceinline__ void store(int z, std::int64_t m, std::int64_t n, Acc value) const {
    const std::int64_t plane = g.ho * g.wo;
    const std::int64_t batch = m / plane, r = m - batch * plane;
    y[(batch * g.o + z * N + n) * plane + r] = convert<T>(value);
  }
};

template <typename T>
struct BackwardInputProblem {
  const T* grad;
  const T* weight;
  T* dx;
  ConvGeometry g;
  std::int64_t M, N, K;
  static constexpr bool kAAlongM = true;

  __device__ __forceinline__ std::int64_t k_begin(int) const { return 0; }
  __device__ __forceinline__ std::int64_t k_end(int) const { return K; }
  __device__ __forceinline__ T a(int z, std::int64_t m, std::int64_t k) const {
    const std::int64_t plane = g.h * g.w;
    const std::int64_t n = m / plane, r = m - n * plane;
    const std::int64_t ih = r / g.w, iw = r - ih * g.w;
    const std::int64_t taps = g.kh * g.kw;
    const std::int64_t o = k / taps, t = k - o * taps;
    const std::int64_t i = t / g.kw, j = t - i * g.kw;
    const std::int64_t th = ih + g.pad_h - i * g.dilation_h;
    const std::int64_t tw = iw + g.pad_w - j * g.dilation_w;
    if (th < 0 || tw < 0 || th % g.stride_h || tw % g.stride_w) return T(0.0f);
    const std::int64_t oh = th / g.stride_h, ow = tw / g.stride_w;
    if (oh >= g.ho || ow >= g.wo) return T(0.0f);
    const std::int64_t channel = z * (g.o / g.groups) + o;
    return grad[((n * g.o + channel) * g.ho + oh) * g.wo + ow];
  }
  __device__ __forceinline__ T b(int z, std::int64_t k, std::int64_t n) const {
    const std::int64_t taps = g.kh * g.kw;
    const std::int64_t o = k / taps, t = k - o * taps;
    return weight[((z * (g.o / g.groups) + o) * N + n) * taps + t];
  }
  template <typename Acc>
  __device__ __forceinline__ void store(int z, std::int64_t m, std::int64_t n, Acc value) const {
    const std::int64_t plane = g.h * g.w;
    const std::int64_t batch = m / plane, r = m - batch * plane;
    dx[(batch * g.c + z * N + n) * plane + r] = convert<T>(value);
  }
};

// Partial sums of split s, group z % groups go to partial[s][group rows][N] (fp32; fp64 for double).
template <typename T>
struct BackwardWeightProblem {
  using Partial = std::conditional_t<std::is_same_v<T, double>, double, float>;
  const T* grad;
  const T* x;
  Partial* partial;
  ConvGeometry g;
  std::int64_t M, N, K;
  std::int64_t split_length;  // K indices per split, a multiple of the K tile
  static constexpr bool kAAlongM = false;  // consecutive k are consecutive output columns of grad

  __device__ __forceinline__ int group(int z) const { return z % static_cast<int>(g.groups); }
  __device__ __forceinline__ std::int64_t k_begin(int z) const { return (z / g.groups) * split_length; }
  __device__ __forceinline__ std::int64_t k_end(int z) const {
    const std::int64_t end = k_begin(z) + split_length;
    return end < K ? end : K;
  }
  __device__ __forceinline__ T a(int z, std::int64_t m, std::int64_t k) const {
    const std::int64_t plane = g.ho * g.wo;
    const std::int64_t n = k / plane, r = k - n * plane;
    return grad[(n * g.o + group(z) * M + m) * plane + r];
  }
  __device__ __forceinline__ T b(int z, std::int64_t k, std::int64_t q) const {
    const std::int64_t plane = g.ho * g.wo;
    const std::int64_t n = k / plane, r = k - n * plane;
    const std::int64_t oh = r / g.wo, ow = r - oh * g.wo;
    const std::int64_t taps = g.kh * g.kw;
    const std::int64_t c = q / taps, t = q - c * taps;
    const std::int64_t i = t / g.kw, j = t - i * g.kw;
    const std::int64_t ih = oh * g.stride_h - g.pad_h + i * g.dilation_h;
    const std::int64_t iw = ow * g.stride_w - g.pad_w + j * g.dilation_w;
    if (ih < 0 || ih >= g.h || iw < 0 || iw >= g.w) return T(0.0f);
    const std::int64_t channel = group(z) * (g.c / g.groups) + c;
    return x[((n * g.c + channel) * g.h + ih) * g.w + iw];
  }
  template <typename Acc>
  __device__ __forceinline__ void store(int z, std::int64_t m, std::int64_t q, Acc value) const {
    const std::int64_t split = z / g.groups;
    partial[(split * g.o + group(z) * M + m) * N + q] = static_cast<Partial>(value);
  }
};

// ------------------------------------------------------------------------------------------------
// The tensor-core kernel (fp16 / bf16).
constexpr int kTcTileM = 64;
constexpr int kTcTileN = 64;
constexpr int kTcTileK = 32;
constexpr int kTcRowStride = kTcTileK + 8;  // padded rows: conflict-free fragment reads
constexpr int kTcThreads = 128;
constexpr int kTcLoads = kTcTileM * kTcTileK / kTcThreads;  // elements per thread per operand tile
static_assert(kTcTileM == kTcTileN, "both operand tiles are loaded with one mapping");

template <typename T>
__device__ __forceinline__ void mma_16816(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
#if defined(ADCUDA_EMULATION)
  emu::mma_m16n8k16(std::is_same_v<T, __half> ? emu::MmaInputType::kF16 : emu::MmaInputType::kBF16, d, a, b0, b1);
#else
  if constexpr (std::is_same_v<T, __half>) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
#endif
}

// Which (row, k) of a 64 x 32 operand tile the thread's load `e` is: along the rows first (coalesced
// where consecutive rows are consecutive in memory) or along k first.
__device__ __forceinline__ void tile_position(bool along_rows, int e, int& row, int& k) {
  const int index = threadIdx.x + kTcThreads * e;
  if (along_rows) {
    row = index % kTcTileM;
    k = index / kTcTileM;
  } else {
    row = index / kTcTileK;
    k = index % kTcTileK;
  }
}

template <typename T, typename Problem>
__device__ __forceinline__ void load_tiles(const Problem& p, int z, std::int64_t m0, std::int64_t n0,
                                           std::int64_t k0, std::int64_t k_end, T (&a)[kTcLoads],
                                           T (&b)[kTcLoads]) {
#pragma unroll
  for (int e = 0; e < kTcLoads; ++e) {
    int row, k;
    tile_position(Problem::kAAlongM, e, row, k);
    const std::int64_t m = m0 + row, kk = k0 + k;
    a[e] = (m < p.M && kk < k_end) ? p.a(z, m, kk) : T(0.0f);
    tile_position(false, e, row, k);  // B(k, n): the weight's and the input's k are their inner index
    const std::int64_t n = n0 + row, kb = k0 + k;
    b[e] = (n < p.N && kb < k_end) ? p.b(z, kb, n) : T(0.0f);
  }
}

template <typename T, typename Problem>
__global__ void __launch_bounds__(kTcThreads) conv_tensor_core_kernel(const Problem p) {
  __shared__ __align__(16) T a_tile[kTcTileM * kTcRowStride];  // [m][k]
  __shared__ __align__(16) T b_tile[kTcTileN * kTcRowStride];  // [n][k]
  const int z = blockIdx.z;
  const std::int64_t m0 = static_cast<std::int64_t>(blockIdx.x) * kTcTileM;
  const std::int64_t n0 = static_cast<std::int64_t>(blockIdx.y) * kTcTileN;
  const std::int64_t k_begin = p.k_begin(z), k_end = p.k_end(z);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int warp_m = (warp / 2) * 32, warp_n = (warp % 2) * 32;
  const int group = lane / 4, pair = (lane % 4) * 2;

  float acc[2][4][4];
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int r = 0; r < 4; ++r) acc[i][j][r] = 0.0f;

  T a_next[kTcLoads], b_next[kTcLoads];
  load_tiles<T>(p, z, m0, n0, k_begin, k_end, a_next, b_next);
  for (std::int64_t k0 = k_begin; k0 < k_end; k0 += kTcTileK) {
#pragma unroll
    for (int e = 0; e < kTcLoads; ++e) {
      int row, k;
      tile_position(Problem::kAAlongM, e, row, k);
      a_tile[row * kTcRowStride + k] = a_next[e];
      tile_position(false, e, row, k);
      b_tile[row * kTcRowStride + k] = b_next[e];
    }
    __syncthreads();
    if (k0 + kTcTileK < k_end) load_tiles<T>(p, z, m0, n0, k0 + kTcTileK, k_end, a_next, b_next);
#pragma unroll
    for (int ks = 0; ks < kTcTileK; ks += 16) {
      unsigned a_frag[2][4];
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        const T* base = a_tile + (warp_m + i * 16 + group) * kTcRowStride + ks + pair;
        a_frag[i][0] = *reinterpret_cast<const unsigned*>(base);
        a_frag[i][1] = *reinterpret_cast<const unsigned*>(base + 8 * kTcRowStride);
        a_frag[i][2] = *reinterpret_cast<const unsigned*>(base + 8);
        a_frag[i][3] = *reinterpret_cast<const unsigned*>(base + 8 * kTcRowStride + 8);
      }
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const T* base = b_tile + (warp_n + j * 8 + group) * kTcRowStride + ks + pair;
        const unsigned b0 = *reinterpret_cast<const unsigned*>(base);
        const unsigned b1 = *reinterpret_cast<const unsigned*>(base + 8);
#pragma unroll
        for (int i = 0; i < 2; ++i) mma_16816<T>(acc[i][j], a_frag[i], b0, b1);
      }
    }
    __syncthreads();
  }
  // accumulator r of tile (i, j): row group (+8 for r >= 2), column pair (+1 for odd r)
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const std::int64_t m = m0 + warp_m + i * 16 + group + (r >= 2 ? 8 : 0);
        const std::int64_t n = n0 + warp_n + j * 8 + pair + (r & 1);
        if (m < p.M && n < p.N) p.store(z, m, n, acc[i][j][r]);
      }
}

// ------------------------------------------------------------------------------------------------
// The SIMT kernel (fp32 / fp64).
constexpr int kSimtTileM = 64;
constexpr int kSimtTileN = 64;
constexpr int kSimtTileK = 16;
constexpr int kSimtThreads = 256;

template <typename T, typename Problem>
__global__ void __launch_bounds__(kSimtThreads) conv_simt_kernel(const Problem p) {
  using Acc = compute_t<T>;
  __shared__ Acc a_tile[kSimtTileK][kSimtTileM];
  __shared__ Acc b_tile[kSimtTileK][kSimtTileN];
  const int z = blockIdx.z;
  const std::int64_t m0 = static_cast<std::int64_t>(blockIdx.x) * kSimtTileM;
  const std::int64_t n0 = static_cast<std::int64_t>(blockIdx.y) * kSimtTileN;
  const std::int64_t k_begin = p.k_begin(z), k_end = p.k_end(z);
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  Acc acc[4][4];
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) acc[i][j] = Acc(0);

  for (std::int64_t k0 = k_begin; k0 < k_end; k0 += kSimtTileK) {
#pragma unroll
    for (int e = 0; e < kSimtTileM * kSimtTileK / kSimtThreads; ++e) {
      const int index = threadIdx.x + kSimtThreads * e;
      int row, k;
      if (Problem::kAAlongM) {
        row = index % kSimtTileM;
        k = index / kSimtTileM;
      } else {
        row = index / kSimtTileK;
        k = index % kSimtTileK;
      }
      const std::int64_t m = m0 + row, kk = k0 + k;
      a_tile[k][row] = (m < p.M && kk < k_end) ? to_compute(p.a(z, m, kk)) : Acc(0);
      const int n_row = index / kSimtTileK, n_k = index % kSimtTileK;
      const std::int64_t n = n0 + n_row, kb = k0 + n_k;
      b_tile[n_k][n_row] = (n < p.N && kb < k_end) ? to_compute(p.b(z, kb, n)) : Acc(0);
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < kSimtTileK; ++k) {
      Acc a[4], b[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) a[i] = a_tile[k][ty + 16 * i];
#pragma unroll
      for (int j = 0; j < 4; ++j) b[j] = b_tile[k][tx + 16 * j];
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] += a[i] * b[j];
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const std::int64_t m = m0 + ty + 16 * i, n = n0 + tx + 16 * j;
      if (m < p.M && n < p.N) p.store(z, m, n, acc[i][j]);
    }
}

// Adds the splits' partial sums in split order and writes the weight gradient in T.
template <typename T, typename Partial>
__global__ void conv_sum_splits_kernel(T* out, const Partial* partial, std::int64_t size, std::int64_t splits) {
  ADCUDA_GRID_STRIDE_LOOP(i, size) {
    Partial sum = 0;
    for (std::int64_t s = 0; s < splits; ++s) sum += partial[s * size + i];
    out[i] = convert<T>(sum);
  }
}

template <typename T>
constexpr bool kTensorCore = std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>;

template <typename T, typename Problem>
void launch(const Problem& p, unsigned int batches, cudaStream_t stream) {
  if constexpr (kTensorCore<T>) {
    const dim3 grid(static_cast<unsigned>((p.M + kTcTileM - 1) / kTcTileM),
                    static_cast<unsigned>((p.N + kTcTileN - 1) / kTcTileN), batches);
    conv_tensor_core_kernel<T, Problem><<<grid, kTcThreads, 0, stream>>>(p);
  } else {
    const dim3 grid(static_cast<unsigned>((p.M + kSimtTileM - 1) / kSimtTileM),
                    static_cast<unsigned>((p.N + kSimtTileN - 1) / kSimtTileN), batches);
    conv_simt_kernel<T, Problem><<<grid, kSimtThreads, 0, stream>>>(p);
  }
  ADCUDA_CHECK_LAUNCH();
}

void require(bool condition, const char* op, const std::string& what) {
  if (!condition) throw std::invalid_argument(std::string(op) + ": " + what);
}

void check_operands(const char* op, const DeviceArray& a, const DeviceArray& b) {
  require(a.dtype() == b.dtype(), op, std::string("operands must share one dtype, got ") +
                                          scalar_type_name(a.dtype()) + " and " + scalar_type_name(b.dtype()));
  require(a.is_contiguous() && b.is_contiguous(), op, "operands must be contiguous");
  require(a.ndim() == 4 && b.ndim() == 4, op, "operands must be 4-d, got shapes " + format_dims(a.shape()) +
                                                  " and " + format_dims(b.shape()));
}

void check_geometry(const char* op, const ConvGeometry& g) {
  require(g.groups >= 1 && g.c % g.groups == 0 && g.o % g.groups == 0, op, "channels must divide by groups");
  require(g.stride_h >= 1 && g.stride_w >= 1 && g.dilation_h >= 1 && g.dilation_w >= 1 && g.pad_h >= 0 &&
              g.pad_w >= 0,
          op, "stride and dilation must be positive, padding non-negative");
  // the grid's z dimension holds the groups (times the K splits)
  require(g.groups <= 65535, op, "at most 65535 groups");
}

}  // namespace

DeviceArray conv2d(const DeviceArray& x, const DeviceArray& weight, const ConvGeometry& g) {
  const char* op = "conv2d";
  check_operands(op, x, weight);
  check_geometry(op, g);
  require(x.shape() == Dims{g.n, g.c, g.h, g.w} && weight.shape() == Dims{g.o, g.c / g.groups, g.kh, g.kw}, op,
          "shapes " + format_dims(x.shape()) + " and " + format_dims(weight.shape()) + " do not fit the geometry");
  DeviceArray y = DeviceArray::empty({g.n, g.o, g.ho, g.wo}, x.dtype(), x.device());
  if (y.numel() == 0) return y;
  KernelLaunch kernel_launch(y, x, weight);
  dispatch_floating(x.dtype(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    ForwardProblem<T> p{x.data<T>(), weight.data<T>(), y.data<T>(), g, g.n * g.ho * g.wo, g.o / g.groups,
                        (g.c / g.groups) * g.kh * g.kw};
    if (p.K == 0) {
      ADCUDA_CHECK(cudaMemsetAsync(y.data_ptr(), 0, y.nbytes(), kernel_launch.stream()));
      return;
    }
    launch<T>(p, static_cast<unsigned>(g.groups), kernel_launch.stream());
  });
  return y;
}

DeviceArray conv2d_backward_input(const DeviceArray& grad, const DeviceArray& weight, const ConvGeometry& g) {
  const char* op = "conv2d_backward_input";
  check_operands(op, grad, weight);
  check_geometry(op, g);
  require(grad.shape() == Dims{g.n, g.o, g.ho, g.wo} && weight.shape() == Dims{g.o, g.c / g.groups, g.kh, g.kw},
          op, "shapes " + format_dims(grad.shape()) + " and " + format_dims(weight.shape()) +
                  " do not fit the geometry");
  DeviceArray dx = DeviceArray::empty({g.n, g.c, g.h, g.w}, grad.dtype(), grad.device());
  if (dx.numel() == 0) return dx;
  KernelLaunch kernel_launch(dx, grad, weight);
  dispatch_floating(grad.dtype(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    BackwardInputProblem<T> p{grad.data<T>(), weight.data<T>(), dx.data<T>(), g, g.n * g.h * g.w, g.c / g.groups,
                              (g.o / g.groups) * g.kh * g.kw};
    if (p.K == 0) {
      ADCUDA_CHECK(cudaMemsetAsync(dx.data_ptr(), 0, dx.nbytes(), kernel_launch.stream()));
      return;
    }
    launch<T>(p, static_cast<unsigned>(g.groups), kernel_launch.stream());
  });
  return dx;
}

DeviceArray conv2d_backward_weight(const DeviceArray& grad, const DeviceArray& x, const ConvGeometry& g) {
  const char* op = "conv2d_backward_weight";
  check_operands(op, grad, x);
  check_geometry(op, g);
  require(grad.shape() == Dims{g.n, g.o, g.ho, g.wo} && x.shape() == Dims{g.n, g.c, g.h, g.w}, op,
          "shapes " + format_dims(grad.shape()) + " and " + format_dims(x.shape()) + " do not fit the geometry");
  DeviceArray dw = DeviceArray::empty({g.o, g.c / g.groups, g.kh, g.kw}, grad.dtype(), grad.device());
  if (dw.numel() == 0) return dw;
  KernelLaunch kernel_launch(dw, grad, x);
  const cudaStream_t stream = kernel_launch.stream();
  const std::int64_t k_total = g.n * g.ho * g.wo;
  if (k_total == 0) {
    ADCUDA_CHECK(cudaMemsetAsync(dw.data_ptr(), 0, dw.nbytes(), stream));
    return dw;
  }
  dispatch_floating(grad.dtype(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using Problem = BackwardWeightProblem<T>;
    using Partial = typename Problem::Partial;
    const std::int64_t m = g.o / g.groups, n = (g.c / g.groups) * g.kh * g.kw;
    const std::int64_t tile_k = kTensorCore<T> ? kTcTileK : kSimtTileK;
    const std::int64_t tiles = ((m + 63) / 64) * ((n + 63) / 64) * g.groups;
    // enough blocks to fill a large GPU (about 4 per SM of 132) without splits shorter than 8 K tiles
    std::int64_t splits = std::max<std::int64_t>(1, std::min<std::int64_t>((528 + tiles - 1) / tiles,
                                                                            k_total / (8 * tile_k)));
    splits = std::min<std::int64_t>(splits, std::max<std::int64_t>(1, 65535 / g.groups));
    const std::int64_t split_length = ((k_total + splits - 1) / splits + tile_k - 1) / tile_k * tile_k;
    splits = (k_total + split_length - 1) / split_length;
    DeviceArray partial = DeviceArray::empty({splits, g.o, n},
                                             std::is_same_v<Partial, double> ? ScalarType::Float64
                                                                             : ScalarType::Float32,
                                             grad.device());
    partial.storage()->use_on(stream, kernel_launch.device());
    Problem p{grad.data<T>(), x.data<T>(), partial.data<Partial>(), g, m, n, k_total, split_length};
    launch<T>(p, static_cast<unsigned>(splits * g.groups), stream);
    conv_sum_splits_kernel<T, Partial><<<grid_size(dw.numel()), kBlockSize, 0, stream>>>(
        dw.data<T>(), partial.data<Partial>(), dw.numel(), splits);
    ADCUDA_CHECK_LAUNCH();
  });
  return dw;
}

}  // namespace adcuda
