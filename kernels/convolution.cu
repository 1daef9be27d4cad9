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
// outputs = 2 x 4 mma.sync m16n8k16 with fp32 accumulators. Shared memory holds two K tiles (double
// buffering: tile t + 1 is written while tile t's mma run, one barrier per tile), [row][k] with rows
// padded by 8 elements so that ldmatrix's eight 16-byte rows fall in distinct banks. An operand whose
// rows are contiguous in k in memory (the forward's weight: [o][c kh kw]; the weight gradient's output
// gradient: consecutive pixels of a plane) goes global -> shared by cp.async in 16-byte pieces when its
// rows allow it (K, or Ho*Wo, a multiple of 8 and a 16-byte aligned base: e.g. channels a multiple of 8);
// every other operand, and every operand when the rows do not allow it, is gathered element by element
// into registers (window arithmetic, zero padding), in flight during tile t's mma, then stored.
// fp32 / fp64 take a SIMT kernel: block tile 64 x 64 x 16, 256 threads with 4 x 4 outputs each, fp32
// (fp64) FMA.
#include "convolution.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "elementwise_loops.cuh"
#include "ptx_sm80.cuh"
#include "runtime/dispatch.cuh"
#include "runtime/errors.h"
#include "runtime/launch.cuh"

namespace adcuda {
namespace {

// ------------------------------------------------------------------------------------------------
// The three problems. Element reads return the storage type (zero outside the tensor). Window
// arithmetic runs in 32-bit ints (the host checks that every GEMM extent and tensor fits; 64-bit
// division costs several times more), element offsets in 64-bit.
using Index = int;

struct Geometry32 {
  Index n, c, h, w, o, kh, kw, ho, wo, groups;
  Index stride_h, stride_w, pad_h, pad_w, dilation_h, dilation_w;
  Index cg, og, taps, in_plane, out_plane;  // derived once: C/groups, O/groups, kh*kw, H*W, Ho*Wo
};

// A problem's reads come in two steps, so that the kernels decompose each index once: a thread's loads
// of one operand tile share one index (along-M A loads share their row m for the whole kernel; the other
// loads share their k within a K tile), `a_fixed` / `b_fixed` turn that index into a context, and
// `a_at` / `b_at` read the element at the loads' other index.
template <typename T>
struct ForwardProblem {
  const T* x;
  const T* weight;
  T* y;
  Geometry32 g;
  Index M, N, K;
  static constexpr bool kAAlongM = true;  // consecutive m are consecutive output columns: coalesced reads
  // B(k, n) = weight[group row n][k]: K consecutive elements per n, copied 8 at a time where aligned
  static constexpr bool kARowsContiguous = false;
  static constexpr bool kBRowsContiguous = true;
  struct AContext {
    std::int64_t base;  // x[n, first channel of the group, 0, 0]
    Index ih0, iw0;     // the window's top-left corner (may lie in the padding)
  };

  bool rows_copyable() const { return K % 8 == 0 && reinterpret_cast<std::uintptr_t>(weight) % 16 == 0; }
  __device__ __forceinline__ const T* b_row(int z, Index n, Index k) const {
    return weight + static_cast<std::int64_t>(z * N + n) * K + k;
  }
  struct BContext {
    std::int64_t base;  // weight[first row of the group, k]
  };

  __device__ __forceinline__ Index k_begin(int) const { return 0; }
  __device__ __forceinline__ Index k_end(int) const { return K; }
  __device__ __forceinline__ AContext a_fixed(int z, Index m) const {
    const Index n = m / g.out_plane, r = m - n * g.out_plane;
    const Index oh = r / g.wo, ow = r - oh * g.wo;
    return {static_cast<std::int64_t>(n * g.c + z * g.cg) * g.in_plane, oh * g.stride_h - g.pad_h,
            ow * g.stride_w - g.pad_w};
  }
  __device__ __forceinline__ T a_at(const AContext& a, Index k) const {
    const Index c = k / g.taps, t = k - c * g.taps;
    const Index i = t / g.kw, j = t - i * g.kw;
    const Index ih = a.ih0 + i * g.dilation_h, iw = a.iw0 + j * g.dilation_w;
    if (ih < 0 || ih >= g.h || iw < 0 || iw >= g.w) return T(0.0f);
    return x[a.base + static_cast<std::int64_t>(c) * g.in_plane + ih * g.w + iw];
  }
  __device__ __forceinline__ BContext b_fixed(int z, Index k) const {
    return {static_cast<std::int64_t>(z) * N * K + k};
  }
  __device__ __forceinline__ T b_at(const BContext& b, Index n) const {
    return weight[b.base + static_cast<std::int64_t>(n) * K];
  }
  template <typename Acc>
  __device__ __forceinline__ void store(int z, Index m, Index n, Acc value) const {
    const Index batch = m / g.out_plane, r = m - batch * g.out_plane;
    y[static_cast<std::int64_t>(batch * g.o + z * N + n) * g.out_plane + r] = convert<T>(value);
  }
};

template <typename T>
struct BackwardInputProblem {
  const T* grad;
  const T* weight;
  T* dx;
  Geometry32 g;
  Index M, N, K;
  static constexpr bool kAAlongM = true;
  static constexpr bool kARowsContiguous = false;  // both operands are gathers (taps skip by the stride)
  static constexpr bool kBRowsContiguous = false;
  struct AContext {
    std::int64_t base;  // grad[n, first channel of the group, 0, 0]
    Index th0, tw0;     // the input position plus the padding
  };
  struct BContext {
    std::int64_t base;  // weight[o, 0, i, j] of the group
  };

  __device__ __forceinline__ Index k_begin(int) const { return 0; }
  __device__ __forceinline__ Index k_end(int) const { return K; }
  __device__ __forceinline__ AContext a_fixed(int z, Index m) const {
    const Index n = m / g.in_plane, r = m - n * g.in_plane;
    const Index ih = r / g.w, iw = r - ih * g.w;
    return {static_cast<std::int64_t>(n * g.o + z * g.og) * g.out_plane, ih + g.pad_h, iw + g.pad_w};
  }
  // tap (i, j) of output channel o reads g where the tap lands on the input position: only where the
  // distance is a multiple of the stride
  __device__ __forceinline__ T a_at(const AContext& a, Index k) const {
    const Index o = k / g.taps, t = k - o * g.taps;
    const Index i = t / g.kw, j = t - i * g.kw;
    const Index th = a.th0 - i * g.dilation_h, tw = a.tw0 - j * g.dilation_w;
    if (th < 0 || tw < 0) return T(0.0f);
    const Index oh = th / g.stride_h, ow = tw / g.stride_w;
    if (oh * g.stride_h != th || ow * g.stride_w != tw || oh >= g.ho || ow >= g.wo) return T(0.0f);
    return grad[a.base + static_cast<std::int64_t>(o) * g.out_plane + oh * g.wo + ow];
  }
  __device__ __forceinline__ BContext b_fixed(int z, Index k) const {
    const Index o = k / g.taps, t = k - o * g.taps;
    return {static_cast<std::int64_t>(z * g.og + o) * N * g.taps + t};
  }
  __device__ __forceinline__ T b_at(const BContext& b, Index n) const {
    return weight[b.base + static_cast<std::int64_t>(n) * g.taps];
  }
  template <typename Acc>
  __device__ __forceinline__ void store(int z, Index m, Index n, Acc value) const {
    const Index batch = m / g.in_plane, r = m - batch * g.in_plane;
    dx[static_cast<std::int64_t>(batch * g.c + z * N + n) * g.in_plane + r] = convert<T>(value);
  }
};

// Partial sums of split s, group z % groups go to partial[s][group rows][N] (fp32; fp64 for double).
template <typename T>
struct BackwardWeightProblem {
  using Partial = std::conditional_t<std::is_same_v<T, double>, double, float>;
  const T* grad;
  const T* x;
  Partial* partial;
  Geometry32 g;
  Index M, N, K;
  Index split_length;  // K indices per split, a multiple of the K tile
  static constexpr bool kAAlongM = false;  // consecutive k are consecutive output columns of grad
  // A(m, k) for a fixed m: consecutive k are consecutive pixels of one grad plane, so 8 of them are one
  // 16-byte piece when Ho*Wo is a multiple of 8 (pieces then never straddle two planes; K splits and
  // K itself are multiples of 8 too)
  static constexpr bool kARowsContiguous = true;
  static constexpr bool kBRowsContiguous = false;
  struct AContext {
    std::int64_t base;  // grad[n, first channel of the group, oh, ow]
  };

  bool rows_copyable() const {
    return g.out_plane % 8 == 0 && reinterpret_cast<std::uintptr_t>(grad) % 16 == 0;
  }
  __device__ __forceinline__ const T* a_row(int z, Index m, Index k) const {
    const Index n = k / g.out_plane, r = k - n * g.out_plane;
    return grad + static_cast<std::int64_t>(n * g.o + group(z) * M + m) * g.out_plane + r;
  }
  struct BContext {
    std::int64_t base;  // x[n, first channel of the group, 0, 0]
    Index ih0, iw0;     // the window's top-left corner
  };

  __device__ __forceinline__ Index group(int z) const { return z % g.groups; }
  __device__ __forceinline__ Index k_begin(int z) const { return (z / g.groups) * split_length; }
  __device__ __forceinline__ Index k_end(int z) const {
    const Index end = k_begin(z) + split_length;
    return end < K ? end : K;
  }
  __device__ __forceinline__ AContext a_fixed(int z, Index k) const {
    const Index n = k / g.out_plane, r = k - n * g.out_plane;
    return {static_cast<std::int64_t>(n * g.o + group(z) * M) * g.out_plane + r};
  }
  __device__ __forceinline__ T a_at(const AContext& a, Index m) const {
    return grad[a.base + static_cast<std::int64_t>(m) * g.out_plane];
  }
  __device__ __forceinline__ BContext b_fixed(int z, Index k) const {
    const Index n = k / g.out_plane, r = k - n * g.out_plane;
    const Index oh = r / g.wo, ow = r - oh * g.wo;
    return {static_cast<std::int64_t>(n * g.c + group(z) * g.cg) * g.in_plane, oh * g.stride_h - g.pad_h,
            ow * g.stride_w - g.pad_w};
  }
  __device__ __forceinline__ T b_at(const BContext& b, Index q) const {
    const Index c = q / g.taps, t = q - c * g.taps;
    const Index i = t / g.kw, j = t - i * g.kw;
    const Index ih = b.ih0 + i * g.dilation_h, iw = b.iw0 + j * g.dilation_w;
    if (ih < 0 || ih >= g.h || iw < 0 || iw >= g.w) return T(0.0f);
    return x[b.base + static_cast<std::int64_t>(c) * g.in_plane + ih * g.w + iw];
  }
  template <typename Acc>
  __device__ __forceinline__ void store(int z, Index m, Index q, Acc value) const {
    const Index split = z / g.groups;
    partial[static_cast<std::int64_t>(split * g.o + group(z) * M + m) * N + q] = static_cast<Partial>(value);
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
static_assert(kTcThreads % kTcTileM == 0 && kTcThreads % kTcTileK == 0,
              "a thread's loads keep one row (along M) or one k (along K): load_tiles relies on it");

using ptx::cp_async_16;
using ptx::cp_async_commit;
using ptx::cp_async_wait;
using ptx::ldmatrix_x4;
using ptx::mma_16816;

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

// One operand tile of rows [r0, r0 + 64) x k [k0, k0 + 32) by cp.async, 16 bytes (8 k) per copy, 2 per
// thread; `row_at(r, k)` points at the operand's element (r, k). Pieces past the operand are zero-filled
// without reading: the rows' layout makes a piece either wholly inside or wholly outside.
template <typename T, typename RowAt>
__device__ __forceinline__ void copy_tile_async(T* stage, Index r0, Index rows, Index k0, Index k_end,
                                                const T* any_valid, RowAt row_at) {
  constexpr int kPiecesPerRow = kTcTileK / 8;
#pragma unroll
  for (int e = 0; e < kTcTileM * kPiecesPerRow / kTcThreads; ++e) {
    const int piece = threadIdx.x + kTcThreads * e;
    const int row = piece / kPiecesPerRow, k = (piece % kPiecesPerRow) * 8;
    const bool inside = r0 + row < rows && k0 + k < k_end;
    cp_async_16(stage + row * kTcRowStride + k, inside ? row_at(r0 + row, k0 + k) : any_valid, inside ? 16 : 0);
  }
}

// One K tile's loads: operands copied by cp.async (kCopyRows and a problem whose rows allow it) go
// straight into the shared `stage`; the others into registers, for store_gathered once the stage is free.
// A thread's along-M A loads share their row (threadIdx % 64: the context made once per kernel); its
// other loads share their k (threadIdx % 32: contexts made here).
template <typename T, typename Problem, bool kCopyRows>
__device__ __forceinline__ void load_tiles(const Problem& p, int z, Index m0, Index n0, Index k0, Index k_end,
                                           typename Problem::AContext& a_context, T (&a)[kTcLoads],
                                           T (&b)[kTcLoads], T* a_stage, T* b_stage) {
  constexpr bool kCopyA = kCopyRows && Problem::kARowsContiguous;
  constexpr bool kCopyB = kCopyRows && Problem::kBRowsContiguous;
  if constexpr (kCopyA) {
    copy_tile_async(a_stage, m0, p.M, k0, k_end, p.a_row(z, 0, k0),
                    [&](Index m, Index k) { return p.a_row(z, m, k); });
  }
  if constexpr (kCopyB) {
    copy_tile_async(b_stage, n0, p.N, k0, k_end, p.b_row(z, 0, k0),
                    [&](Index n, Index k) { return p.b_row(z, n, k); });
  }
  if constexpr (kCopyRows) cp_async_commit();
  const Index fixed_k = k0 + static_cast<Index>(threadIdx.x) % kTcTileK;
  if constexpr (!kCopyA) {
    if constexpr (!Problem::kAAlongM) a_context = p.a_fixed(z, fixed_k);
#pragma unroll
    for (int e = 0; e < kTcLoads; ++e) {
      int row, k;
      tile_position(Problem::kAAlongM, e, row, k);
      const Index m = m0 + row, kk = k0 + k;
      if constexpr (Problem::kAAlongM) {
        a[e] = (m < p.M && kk < k_end) ? p.a_at(a_context, kk) : T(0.0f);
      } else {
        a[e] = (m < p.M && kk < k_end) ? p.a_at(a_context, m) : T(0.0f);
      }
    }
  }
  if constexpr (!kCopyB) {
    const typename Problem::BContext b_context = p.b_fixed(z, fixed_k);
#pragma unroll
    for (int e = 0; e < kTcLoads; ++e) {
      int row, k;
      tile_position(false, e, row, k);  // B(k, n): the weight's and the input's k are their inner index
      const Index n = n0 + row;
      b[e] = (n < p.N && fixed_k < k_end) ? p.b_at(b_context, n) : T(0.0f);
    }
  }
}

template <typename T, typename Problem, bool kCopyRows>
__device__ __forceinline__ void store_gathered(const T (&a)[kTcLoads], const T (&b)[kTcLoads], T* a_stage,
                                               T* b_stage) {
#pragma unroll
  for (int e = 0; e < kTcLoads; ++e) {
    int row, k;
    if constexpr (!(kCopyRows && Problem::kARowsContiguous)) {
      tile_position(Problem::kAAlongM, e, row, k);
      a_stage[row * kTcRowStride + k] = a[e];
    }
    if constexpr (!(kCopyRows && Problem::kBRowsContiguous)) {
      tile_position(false, e, row, k);
      b_stage[row * kTcRowStride + k] = b[e];
    }
  }
}

// kCopyRows: the problem's row-contiguous operand goes by cp.async (only instantiated for problems that
// have one; the host picks it where the rows allow, see rows_copyable).
template <typename T, typename Problem, bool kCopyRows>
__global__ void __launch_bounds__(kTcThreads) conv_tensor_core_kernel(const Problem p) {
  constexpr int kStage = kTcTileM * kTcRowStride;
  __shared__ __align__(16) T a_tile[2 * kStage];  // two K tiles of [m][k]
  __shared__ __align__(16) T b_tile[2 * kStage];  // two K tiles of [n][k]
  const int z = blockIdx.z;
  const Index m0 = static_cast<Index>(blockIdx.x) * kTcTileM;
  const Index n0 = static_cast<Index>(blockIdx.y) * kTcTileN;
  const Index k_begin = p.k_begin(z), k_end = p.k_end(z);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int warp_m = (warp / 2) * 32, warp_n = (warp % 2) * 32;
  const int group = lane / 4, pair = (lane % 4) * 2;
  // ldmatrix.x4: lane supplies row (lane % 8) of 8x8 matrix (lane / 8). A's matrices are (m 0-7, k 0-7),
  // (m 8-15, k 0-7), (m 0-7, k 8-15), (m 8-15, k 8-15): mma's a0..a3. B's are (n 0-7, k 0-7), (n 0-7,
  // k 8-15), (n 8-15, k 0-7), (n 8-15, k 8-15): b0, b1 of two n8 tiles.
  const int a_fragment_offset = (warp_m + lane % 16) * kTcRowStride + (lane / 16) * 8;
  const int b_fragment_offset = (warp_n + (lane / 16) * 8 + lane % 8) * kTcRowStride + ((lane / 8) % 2) * 8;

  float acc[2][4][4];
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int r = 0; r < 4; ++r) acc[i][j][r] = 0.0f;

  typename Problem::AContext a_context{};
  if constexpr (Problem::kAAlongM) a_context = p.a_fixed(z, m0 + static_cast<Index>(threadIdx.x) % kTcTileM);
  T a_next[kTcLoads], b_next[kTcLoads];
  load_tiles<T, Problem, kCopyRows>(p, z, m0, n0, k_begin, k_end, a_context, a_next, b_next, a_tile, b_tile);
  store_gathered<T, Problem, kCopyRows>(a_next, b_next, a_tile, b_tile);
  if constexpr (kCopyRows) cp_async_wait<0>();
  __syncthreads();
  int stage = 0;
  for (Index k0 = k_begin; k0 < k_end; k0 += kTcTileK) {
    // tile t + 1 goes to the other stage, which every warp left at the previous barrier
    const bool more = k0 + kTcTileK < k_end;
    T* const a_free = a_tile + (stage ^ 1) * kStage;
    T* const b_free = b_tile + (stage ^ 1) * kStage;
    if (more) {
      load_tiles<T, Problem, kCopyRows>(p, z, m0, n0, k0 + kTcTileK, k_end, a_context, a_next, b_next, a_free,
                                        b_free);
    }
    const T* const a_stage = a_tile + stage * kStage;
    const T* const b_stage = b_tile + stage * kStage;
#pragma unroll
    for (int ks = 0; ks < kTcTileK; ks += 16) {
      std::uint32_t a_frag[2][4];
#pragma unroll
      for (int i = 0; i < 2; ++i) ldmatrix_x4<false>(a_frag[i], a_stage + a_fragment_offset + i * 16 * kTcRowStride + ks);
#pragma unroll
      for (int jp = 0; jp < 2; ++jp) {
        std::uint32_t b_frag[4];
        ldmatrix_x4<false>(b_frag, b_stage + b_fragment_offset + jp * 16 * kTcRowStride + ks);
#pragma unroll
        for (int i = 0; i < 2; ++i) {
          mma_16816<T>(acc[i][2 * jp], a_frag[i], b_frag[0], b_frag[1]);
          mma_16816<T>(acc[i][2 * jp + 1], a_frag[i], b_frag[2], b_frag[3]);
        }
      }
    }
    if (more) {
      store_gathered<T, Problem, kCopyRows>(a_next, b_next, a_free, b_free);
      if constexpr (kCopyRows) cp_async_wait<0>();
    }
    __syncthreads();
    stage ^= 1;
  }
  // accumulator r of tile (i, j): row group (+8 for r >= 2), column pair (+1 for odd r)
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const Index m = m0 + warp_m + i * 16 + group + (r >= 2 ? 8 : 0);
        const Index n = n0 + warp_n + j * 8 + pair + (r & 1);
        if (m < p.M && n < p.N) p.store(z, m, n, acc[i][j][r]);
      }
}

// ------------------------------------------------------------------------------------------------
// The SIMT kernel (fp32 / fp64).
constexpr int kSimtTileM = 64;
constexpr int kSimtTileN = 64;
constexpr int kSimtTileK = 16;
constexpr int kSimtThreads = 256;
static_assert(kSimtThreads % kSimtTileM == 0 && kSimtThreads % kSimtTileK == 0,
              "a thread's loads keep one row (along M) or one k (along K)");

template <typename T, typename Problem>
__global__ void __launch_bounds__(kSimtThreads) conv_simt_kernel(const Problem p) {
  using Acc = compute_t<T>;
  __shared__ Acc a_tile[kSimtTileK][kSimtTileM];
  __shared__ Acc b_tile[kSimtTileK][kSimtTileN];
  const int z = blockIdx.z;
  const Index m0 = static_cast<Index>(blockIdx.x) * kSimtTileM;
  const Index n0 = static_cast<Index>(blockIdx.y) * kSimtTileN;
  const Index k_begin = p.k_begin(z), k_end = p.k_end(z);
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  Acc acc[4][4];
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) acc[i][j] = Acc(0);

  // as in the tensor-core kernel: along-M A loads share their row, the others their k
  typename Problem::AContext a_context{};
  if constexpr (Problem::kAAlongM) a_context = p.a_fixed(z, m0 + static_cast<Index>(threadIdx.x) % kSimtTileM);
  for (Index k0 = k_begin; k0 < k_end; k0 += kSimtTileK) {
    const Index fixed_k = k0 + static_cast<Index>(threadIdx.x) % kSimtTileK;
    if constexpr (!Problem::kAAlongM) a_context = p.a_fixed(z, fixed_k);
    const typename Problem::BContext b_context = p.b_fixed(z, fixed_k);
#pragma unroll
    for (int e = 0; e < kSimtTileM * kSimtTileK / kSimtThreads; ++e) {
      const int index = threadIdx.x + kSimtThreads * e;
      if constexpr (Problem::kAAlongM) {
        const int row = index % kSimtTileM, k = index / kSimtTileM;
        const Index m = m0 + row, kk = k0 + k;
        a_tile[k][row] = (m < p.M && kk < k_end) ? to_compute(p.a_at(a_context, kk)) : Acc(0);
      } else {
        const int row = index / kSimtTileK, k = index % kSimtTileK;
        const Index m = m0 + row;
        a_tile[k][row] = (m < p.M && fixed_k < k_end) ? to_compute(p.a_at(a_context, m)) : Acc(0);
      }
      const int n_row = index / kSimtTileK, n_k = index % kSimtTileK;
      const Index n = n0 + n_row;
      b_tile[n_k][n_row] = (n < p.N && fixed_k < k_end) ? to_compute(p.b_at(b_context, n)) : Acc(0);
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
      const Index m = m0 + ty + 16 * i, n = n0 + tx + 16 * j;
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
  constexpr bool kHasCopyableRows = Problem::kARowsContiguous || Problem::kBRowsContiguous;
  if constexpr (kTensorCore<T>) {
    const dim3 grid(static_cast<unsigned>((p.M + kTcTileM - 1) / kTcTileM),
                    static_cast<unsigned>((p.N + kTcTileN - 1) / kTcTileN), batches);
    if constexpr (kHasCopyableRows) {
      if (p.rows_copyable()) {
        conv_tensor_core_kernel<T, Problem, true><<<grid, kTcThreads, 0, stream>>>(p);
        ADCUDA_CHECK_LAUNCH();
        return;
      }
    }
    conv_tensor_core_kernel<T, Problem, false><<<grid, kTcThreads, 0, stream>>>(p);
  } else {
    const dim3 grid(static_cast<unsigned>((p.M + kSimtTileM - 1) / kSimtTileM),
                    static_cast<unsigned>((p.N + kSimtTileN - 1) / kSimtTileN), batches);
    conv_simt_kernel<T, Problem><<<grid, kSimtThreads, 0, stream>>>(p);
  }
  ADCUDA_CHECK_LAUNCH();
}

void check_operands(const char* op, const DeviceArray& a, const DeviceArray& b) {
  require(a.dtype() == b.dtype(), op, std::string("operands must share one dtype, got ") +
                                          scalar_type_name(a.dtype()) + " and " + scalar_type_name(b.dtype()));
  require(a.is_contiguous() && b.is_contiguous(), op, "operands must be contiguous");
  require(a.ndim() == 4 && b.ndim() == 4, op, "operands must be 4-d, got shapes " + format_dims(a.shape()) +
                                                  " and " + format_dims(b.shape()));
}

// The device's 32-bit view of the geometry; std::invalid_argument where a GEMM extent or a tensor's
// leading index would not fit (about 2^31 elements of one plane set: far beyond any layer's memory).
Geometry32 narrow(const char* op, const ConvGeometry& g) {
  const std::int64_t limit = 2147483647;
  const std::int64_t taps = g.kh * g.kw;
  require(g.n * g.h * g.w <= limit && g.n * g.ho * g.wo <= limit && g.n * g.c <= limit && g.n * g.o <= limit &&
              g.o * (g.c / g.groups) * taps <= limit,
          op, "tensors too large for the convolution kernels' 32-bit window arithmetic");
  auto i = [](std::int64_t v) { return static_cast<Index>(v); };
  return Geometry32{i(g.n), i(g.c), i(g.h), i(g.w), i(g.o), i(g.kh), i(g.kw), i(g.ho), i(g.wo), i(g.groups),
                    i(g.stride_h), i(g.stride_w), i(g.pad_h), i(g.pad_w), i(g.dilation_h), i(g.dilation_w),
                    i(g.c / g.groups), i(g.o / g.groups), i(taps), i(g.h * g.w), i(g.ho * g.wo)};
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
    const Geometry32 g32 = narrow(op, g);
    ForwardProblem<T> p{x.data<T>(), weight.data<T>(), y.data<T>(), g32, g32.n * g32.out_plane, g32.og,
                        g32.cg * g32.taps};
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
    const Geometry32 g32 = narrow(op, g);
    BackwardInputProblem<T> p{grad.data<T>(), weight.data<T>(), dx.data<T>(), g32, g32.n * g32.in_plane, g32.cg,
                              g32.og * g32.taps};
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
    const Geometry32 g32 = narrow(op, g);
    const std::int64_t m = g32.og, n = static_cast<std::int64_t>(g32.cg) * g32.taps;
    const std::int64_t tile_k = kTensorCore<T> ? kTcTileK : kSimtTileK;
    const std::int64_t tiles = ((m + 63) / 64) * ((n + 63) / 64) * g.groups;
    // enough blocks to fill a large GPU (about 4 per SM of 132) without splits shorter than 8 K tiles
    std::int64_t splits = std::max<std::int64_t>(1, std::min<std::int64_t>((528 + tiles - 1) / tiles,
                                                                            k_total / (8 * tile_k)));
    splits = std::min<std::int64_t>(splits, std::max<std::int64_t>(1, 65535 / g.groups));
    const std::int64_t split_length = ((k_total + splits - 1) / splits + tile_k - 1) / tile_k * tile_k;
    splits = (k_total + split_length - 1) / split_length;
    require(splits * g.o * n <= 2147483647, op, "too many partial sums for the 32-bit kernels");
    DeviceArray partial = DeviceArray::empty({splits, g.o, n},
                                             std::is_same_v<Partial, double> ? ScalarType::Float64
                                                                             : ScalarType::Float32,
                                             grad.device());
    partial.storage()->use_on(stream, kernel_launch.device());
    Problem p{grad.data<T>(), x.data<T>(), partial.data<Partial>(), g32, static_cast<Index>(m), static_cast<Index>(n),
              static_cast<Index>(k_total), static_cast<Index>(split_length)};
    launch<T>(p, static_cast<unsigned>(splits * g.groups), stream);
    conv_sum_splits_kernel<T, Partial><<<grid_size(dw.numel()), kBlockSize, 0, stream>>>(
        dw.data<T>(), partial.data<Partial>(), dw.numel(), splits);
    ADCUDA_CHECK_LAUNCH();
  });
  return dw;
}

}  // namespace adcuda
