// Hand-written GEMM kernels behind `matmul` (see gemm.h for the design in brief).
//
// Both kernels take any element strides for A (M x K) and B (K x N); the host picks which dimension
// each thread block loads along so global reads stay coalesced: a transposed view is read in place.
// C is always a new contiguous (batch, M, N) array. Batch dims are walked with a StridedIndexer, so
// broadcast (stride 0) and strided batches cost nothing; when B is shared by the whole batch and A's
// rows follow each other, the batch is folded into M (one big GEMM instead of many small ones).
#include "gemm.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <stdexcept>
#include <string>

#if defined(ADCUDA_EMULATION)
#include "emulator/ptx_sm80.h"
#endif
#include "launch_utils.cuh"
#include "runtime/dispatch.cuh"
#include "runtime/errors.h"
#include "runtime/launch.cuh"

namespace adcuda {
namespace {

// A batch of GEMM problems as the kernels see it; strides and offsets in elements.
struct GemmArgs {
  std::int64_t M, N, K;
  const void* a;
  std::int64_t a_stride_m, a_stride_k;
  const void* b;
  std::int64_t b_stride_k, b_stride_n;
  void* c;  // contiguous (batch, M, N)
  const void* bias;  // (N,) or nullptr
  std::int64_t bias_stride;
  std::int64_t batch;
  StridedIndexer<2, std::int64_t> batch_offsets;  // matrix z of A and of B: element offsets
};

// ------------------------------------------------------------------------------------------------
// SIMT kernel: BM x BN block tile, BK = 8, each thread TM x TN outputs in registers. Tiles go through
// registers into double-buffered shared memory (the next tile's global loads overlap this tile's
// math). A thread's TM rows are two runs of TM/2 (one in each half of the tile), likewise its
// columns, so a warp's shared-memory reads are contiguous 16-byte vectors without bank conflicts.
// Two blocks per SM where the registers allow it without spilling; the 128 x 128 fp32 tile and fp64
// need more registers than that leaves (their 64 / 16 fp64 accumulators), so they run one.
template <typename T, int BM, int BN>
constexpr int simt_blocks_per_sm() {
  return (BM == 128 || std::is_same_v<T, double>) ? 1 : 2;
}

template <typename T, int BM, int BN, int TM, int TN>
__global__ void __launch_bounds__((BM / TM) * (BN / TN), (simt_blocks_per_sm<T, BM, BN>()))
    simt_gemm_kernel(GemmArgs args, bool a_k_contiguous, bool b_n_contiguous) {
  using Acc = compute_t<T>;
  constexpr int BK = 8;
  constexpr int kThreads = (BM / TM) * (BN / TN);
  constexpr int kALoads = BM * BK / kThreads;
  constexpr int kBLoads = BK * BN / kThreads;
  static_assert(BM * BK % kThreads == 0 && BK * BN % kThreads == 0, "tile loads must split evenly");
  constexpr int kPad = 4;
  __shared__ Acc a_tile[2][BK][BM + kPad];
  __shared__ Acc b_tile[2][BK][BN + kPad];

  const int tid = threadIdx.x;
  const int thread_row = tid / (BN / TN);
  const int thread_col = tid % (BN / TN);
  const std::int64_t M = args.M, N = args.N, K = args.K;
  const std::int64_t m0 = static_cast<std::int64_t>(blockIdx.x) * BM;
  const std::int64_t n0 = static_cast<std::int64_t>(blockIdx.y) * BN;
  const int k_tiles = static_cast<int>((K + BK - 1) / BK);
  auto row_of = [&](int i) { return (i < TM / 2 ? 0 : BM / 2 - TM / 2) + thread_row * (TM / 2) + i; };
  auto col_of = [&](int j) { return (j < TN / 2 ? 0 : BN / 2 - TN / 2) + thread_col * (TN / 2) + j; };

  for (std::int64_t z = blockIdx.z; z < args.batch; z += gridDim.z) {
    std::int64_t offsets[2];
    args.batch_offsets.offsets(z, offsets);
    // Consecutive threads walk each operand's contiguous dimension. A thread's loads all sit at one
    // position `pos` along it, on lines `line0 + i * line_step` of the other dimension, so one
    // pointer (advanced a tile per step) and one line stride address them all.
    const int a_length = a_k_contiguous ? BK : BM;
    const int a_pos = tid % a_length, a_line0 = tid / a_length, a_line_step = kThreads / a_length;
    const int b_length = b_n_contiguous ? BN : BK;
    const int b_pos = tid % b_length, b_line0 = tid / b_length, b_line_step = kThreads / b_length;
    auto a_mm = [&](int i) { return a_k_contiguous ? a_line0 + i * a_line_step : a_pos; };
    auto a_kk = [&](int i) { return a_k_contiguous ? a_pos : a_line0 + i * a_line_step; };
    auto b_kk = [&](int i) { return b_n_contiguous ? b_line0 + i * b_line_step : b_pos; };
    auto b_nn = [&](int i) { return b_n_contiguous ? b_pos : b_line0 + i * b_line_step; };
    const T* a_next = static_cast<const T*>(args.a) + offsets[0] + (m0 + a_mm(0)) * args.a_stride_m +
                      static_cast<std::int64_t>(a_kk(0)) * args.a_stride_k;
    const T* b_next = static_cast<const T*>(args.b) + offsets[1] + static_cast<std::int64_t>(b_kk(0)) * args.b_stride_k +
                      (n0 + b_nn(0)) * args.b_stride_n;
    const std::int64_t a_line_stride = a_line_step * (a_k_contiguous ? args.a_stride_m : args.a_stride_k);
    const std::int64_t b_line_stride = b_line_step * (b_n_contiguous ? args.b_stride_k : args.b_stride_n);
    Acc a_regs[kALoads];
    Acc b_regs[kBLoads];
    auto load = [&](int kt) {
      const int k0 = kt * BK;
#pragma unroll
      for (int i = 0; i < kALoads; ++i) {
        const bool inside = m0 + a_mm(i) < M && k0 + a_kk(i) < K;
        a_regs[i] = inside ? to_compute(a_next[i * a_line_stride]) : Acc(0);
      }
#pragma unroll
      for (int i = 0; i < kBLoads; ++i) {
        const bool inside = k0 + b_kk(i) < K && n0 + b_nn(i) < N;
        b_regs[i] = inside ? to_compute(b_next[i * b_line_stride]) : Acc(0);
      }
      a_next += BK * args.a_stride_k;
      b_next += BK * args.b_stride_k;
    };
    auto store = [&](int buf) {
#pragma unroll
      for (int i = 0; i < kALoads; ++i) a_tile[buf][a_kk(i)][a_mm(i)] = a_regs[i];
#pragma unroll
      for (int i = 0; i < kBLoads; ++i) b_tile[buf][b_kk(i)][b_nn(i)] = b_regs[i];
    };

    Acc acc[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; ++i) {
#pragma unroll
      for (int j = 0; j < TN; ++j) acc[i][j] = Acc(0);
    }
    load(0);
    store(0);
    __syncthreads();
    for (int kt = 0; kt < k_tiles; ++kt) {
      const int buf = kt & 1;
      if (kt + 1 < k_tiles) load(kt + 1);
#pragma unroll
      for (int kk = 0; kk < BK; ++kk) {
        Acc a_frag[TM];
        Acc b_frag[TN];
#pragma unroll
        for (int i = 0; i < TM; ++i) a_frag[i] = a_tile[buf][kk][row_of(i)];
#pragma unroll
        for (int j = 0; j < TN; ++j) b_frag[j] = b_tile[buf][kk][col_of(j)];
#pragma unroll
        for (int i = 0; i < TM; ++i) {
#pragma unroll
          for (int j = 0; j < TN; ++j) acc[i][j] += a_frag[i] * b_frag[j];
        }
      }
      // The other buffer was last read in iteration kt - 1, which every thread has finished (the
      // barrier below ended it), so it can be refilled while slower threads still read `buf`.
      if (kt + 1 < k_tiles) store(buf ^ 1);
      __syncthreads();
    }

    T* c = static_cast<T*>(args.c) + z * M * N;
    const T* bias = static_cast<const T*>(args.bias);
#pragma unroll
    for (int i = 0; i < TM; ++i) {
      const std::int64_t m = m0 + row_of(i);
      if (m >= M) continue;
#pragma unroll
      for (int j = 0; j < TN; ++j) {
        const std::int64_t n = n0 + col_of(j);
        if (n >= N) continue;
        Acc value = acc[i][j];
        if (bias != nullptr) value += to_compute(bias[n * args.bias_stride]);
        c[m * N + n] = convert<T>(value);
      }
    }
    // The next batch entry refills the tiles: wait until every thread has stopped reading them.
    __syncthreads();
  }
}

// ------------------------------------------------------------------------------------------------
// Tensor-core kernel (fp16 / bf16, sm_80+): 128 x 128 x 32 block tiles, 8 warps as 2 x 4, each warp
// 64 x 32 outputs = 4 x 4 mma.sync m16n8k16 tiles with fp32 accumulators. Global -> shared memory by
// 16-byte cp.async in a 3-stage pipeline (zero-filled past the matrix edges); shared memory ->
// registers by ldmatrix. An operand whose contiguous dimension is K is stored [row][k] and loaded with
// ldmatrix; one contiguous along M (or N) is stored [k][row] and loaded with ldmatrix.trans, which
// delivers the same fragments. Rows are padded by 8 elements (16 bytes): ldmatrix's eight row reads
// then fall in distinct banks.
constexpr int kTcBlockM = 128;
constexpr int kTcBlockN = 128;
constexpr int kTcBlockK = 32;
constexpr int kTcStages = 3;
constexpr int kTcThreads = 256;

template <bool kKContiguous, int kRowsPerTile>
struct TcOperandLayout {
  // [rows][k] when K is contiguous, else [k][rows]
  static constexpr int kStride = kKContiguous ? kTcBlockK + 8 : kRowsPerTile + 8;
  static constexpr int kStageElements = (kKContiguous ? kRowsPerTile : kTcBlockK) * kStride;
};

template <bool kAKContiguous, bool kBKContiguous>
constexpr int tc_shared_bytes() {
  return kTcStages *
         (TcOperandLayout<kAKContiguous, kTcBlockM>::kStageElements +
          TcOperandLayout<kBKContiguous, kTcBlockN>::kStageElements) *
         2;
}

#if !defined(ADCUDA_EMULATION)
__device__ __forceinline__ unsigned shared_address(const void* pointer) {
  return static_cast<unsigned>(__cvta_generic_to_shared(pointer));
}
#endif

// 16 bytes from global to shared memory; bytes past `src_bytes` (0..16) are zero-filled.
__device__ __forceinline__ void cp_async_16(void* shared_dst, const void* global_src, int src_bytes) {
#if defined(ADCUDA_EMULATION)
  emu::cp_async_16(shared_dst, global_src, src_bytes);
#else
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(shared_address(shared_dst)),
               "l"(global_src), "r"(src_bytes));
#endif
}

__device__ __forceinline__ void cp_async_commit() {
#if defined(ADCUDA_EMULATION)
  emu::cp_async_commit();
#else
  asm volatile("cp.async.commit_group;\n" ::);
#endif
}

template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
#if defined(ADCUDA_EMULATION)
  emu::cp_async_wait(kPending);
#else
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending));
#endif
}

template <bool kTranspose>
__device__ __forceinline__ void ldmatrix_x4(unsigned (&r)[4], const void* shared_row) {
#if defined(ADCUDA_EMULATION)
  emu::ldmatrix_x4(kTranspose, r, shared_row);
#else
  if constexpr (kTranspose) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(shared_address(shared_row)));
  } else {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(shared_address(shared_row)));
  }
#endif
}

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

// The cp.asyncs one thread issues for one operand, tile after tile along K. The block tile is `kLines`
// lines of `kLineLength` elements along the operand's contiguous dimension, in 8-element chunks;
// `kKContiguous` says whether that dimension is K (the chunks then move along their line from tile to
// tile) or the M/N one (the lines are K rows, and the tile moves down them). Each chunk keeps its
// global address and advances it by a constant step, so the main loop does no 64-bit index math.
template <typename T, int kLines, int kLineLength, int kStride, bool kKContiguous>
struct TileLoader {
  static constexpr int kChunksPerLine = kLineLength / 8;
  static constexpr int kPerThread = kLines * kChunksPerLine / kTcThreads;
  static_assert(kLines * kChunksPerLine % kTcThreads == 0, "chunks must split evenly over the threads");

  const T* src[kPerThread];
  const T* origin;  // the matrix's first element, 16-byte aligned: the address of chunks that read nothing
  // K-contiguous: whether the chunk's line (an M/N row) exists; otherwise how many of its bytes lie
  // inside the M/N extent.
  int fixed[kPerThread];
  std::int64_t step;  // elements the chunk addresses move per K tile

  // `base` is the operand's matrix; `row0` the tile's first M/N index, `row_extent` M or N,
  // `row_stride` / `k_stride` the operand's strides along M/N and along K.
  __device__ __forceinline__ TileLoader(const T* base, std::int64_t row0, std::int64_t row_extent,
                                        std::int64_t row_stride, std::int64_t k_stride) {
    step = kKContiguous ? kTcBlockK : kTcBlockK * k_stride;
    origin = base;
#pragma unroll
    for (int i = 0; i < kPerThread; ++i) {
      const int chunk = threadIdx.x + i * kTcThreads;
      const int line = chunk / kChunksPerLine;
      const int inner = (chunk % kChunksPerLine) * 8;
      if constexpr (kKContiguous) {
        const std::int64_t row = row0 + line;
        fixed[i] = row < row_extent;
        src[i] = base + row * row_stride + inner;
      } else {
        const std::int64_t left = row_extent - (row0 + inner);
        fixed[i] = left <= 0 ? 0 : static_cast<int>((left < 8 ? left : 8) * sizeof(T));
        src[i] = base + line * k_stride + row0 + inner;
      }
    }
  }

  // Queues the tile starting at K index `k0` into `shared` and moves on to the next tile. A chunk
  // past the matrix's edge reads nothing (cp.async zero-fills it), but cp.async still wants a 16-byte
  // aligned source address, which a chunk past the edge of a 1-row or 1-column operand with an odd
  // stride does not have: such chunks name the matrix's (aligned) start instead.
  __device__ __forceinline__ void load(T* shared, std::int64_t k0, std::int64_t K) {
#pragma unroll
    for (int i = 0; i < kPerThread; ++i) {
      const int chunk = threadIdx.x + i * kTcThreads;
      const int line = chunk / kChunksPerLine;
      const int inner = (chunk % kChunksPerLine) * 8;
      int bytes;
      if constexpr (kKContiguous) {
        const std::int64_t left = K - (k0 + inner);
        bytes = (fixed[i] && left > 0) ? static_cast<int>((left < 8 ? left : 8) * sizeof(T)) : 0;
      } else {
        bytes = k0 + line < K ? fixed[i] : 0;
      }
      cp_async_16(shared + line * kStride + inner, bytes > 0 ? src[i] : origin, bytes);
      src[i] += step;
    }
  }
};

template <typename T, bool kAKContiguous, bool kBKContiguous>
__global__ void __launch_bounds__(kTcThreads, 2) tensor_core_gemm_kernel(GemmArgs args) {
#if (defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800) || defined(ADCUDA_EMULATION)
  using ALayout = TcOperandLayout<kAKContiguous, kTcBlockM>;
  using BLayout = TcOperandLayout<kBKContiguous, kTcBlockN>;
  extern __shared__ __align__(16) unsigned char shared_bytes[];
  T* a_shared = reinterpret_cast<T*>(shared_bytes);
  T* b_shared = a_shared + kTcStages * ALayout::kStageElements;

  const std::int64_t M = args.M, N = args.N, K = args.K;
  const std::int64_t m0 = static_cast<std::int64_t>(blockIdx.x) * kTcBlockM;
  const std::int64_t n0 = static_cast<std::int64_t>(blockIdx.y) * kTcBlockN;
  const int k_tiles = static_cast<int>((K + kTcBlockK - 1) / kTcBlockK);
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  const int warp_m = (warp / 4) * 64;
  const int warp_n = (warp % 4) * 32;
  // ldmatrix: lane supplies row (lane % 8) of 8x8 matrix (lane / 8)
  const int matrix = lane / 8;
  const int matrix_row = lane % 8;

  for (std::int64_t z = blockIdx.z; z < args.batch; z += gridDim.z) {
    std::int64_t offsets[2];
    args.batch_offsets.offsets(z, offsets);
    const T* a = static_cast<const T*>(args.a) + offsets[0];
    const T* b = static_cast<const T*>(args.b) + offsets[1];

    TileLoader<T, kAKContiguous ? kTcBlockM : kTcBlockK, kAKContiguous ? kTcBlockK : kTcBlockM, ALayout::kStride,
               kAKContiguous>
        a_loader(a, m0, M, args.a_stride_m, args.a_stride_k);
    TileLoader<T, kBKContiguous ? kTcBlockN : kTcBlockK, kBKContiguous ? kTcBlockK : kTcBlockN, BLayout::kStride,
               kBKContiguous>
        b_loader(b, n0, N, args.b_stride_n, args.b_stride_k);
    // Tiles are loaded in order kt = 0, 1, 2, ...: each loader advances by one tile per call.
    auto load_stage = [&](int stage, int kt) {
      const std::int64_t k0 = static_cast<std::int64_t>(kt) * kTcBlockK;
      a_loader.load(a_shared + stage * ALayout::kStageElements, k0, K);
      b_loader.load(b_shared + stage * BLayout::kStageElements, k0, K);
    };

    float acc[4][4][4];
#pragma unroll
    for (int mi = 0; mi < 4; ++mi) {
#pragma unroll
      for (int ni = 0; ni < 4; ++ni) {
#pragma unroll
        for (int r = 0; r < 4; ++r) acc[mi][ni][r] = 0.0f;
      }
    }

    // Every iteration commits one group (possibly empty), so "all but the newest kTcStages - 2
    // groups done" always means "tile kt has landed".
#pragma unroll
    for (int s = 0; s < kTcStages - 1; ++s) {
      if (s < k_tiles) load_stage(s, s);
      cp_async_commit();
    }
    for (int kt = 0; kt < k_tiles; ++kt) {
      cp_async_wait<kTcStages - 2>();
      // Tile kt is visible to every thread, and every thread is done with tile kt - 1, whose stage
      // the load below refills.
      __syncthreads();
      const int next = kt + kTcStages - 1;
      if (next < k_tiles) load_stage(next % kTcStages, next);
      cp_async_commit();

      const T* a_stage = a_shared + (kt % kTcStages) * ALayout::kStageElements;
      const T* b_stage = b_shared + (kt % kTcStages) * BLayout::kStageElements;
      // One 16-wide K step at a time, B's fragments first and then A's one 16-row tile at a time:
      // keeps few fragments live next to the 64 accumulators (two blocks fit on an SM).
#pragma unroll 1
      for (int ks = 0; ks < kTcBlockK; ks += 16) {
        unsigned b_frag[4][2];
#pragma unroll
        for (int nj = 0; nj < 4; nj += 2) {
          // matrices: (n-tile nj, k 0-7), (nj, k 8-15), (nj + 1, k 0-7), (nj + 1, k 8-15)
          const int n = warp_n + nj * 8 + (matrix >> 1) * 8;
          const int k = ks + (matrix & 1) * 8;
          unsigned r[4];
          if constexpr (kBKContiguous) {
            ldmatrix_x4<false>(r, b_stage + (n + matrix_row) * BLayout::kStride + k);
          } else {
            ldmatrix_x4<true>(r, b_stage + (k + matrix_row) * BLayout::kStride + n);
          }
          b_frag[nj][0] = r[0];
          b_frag[nj][1] = r[1];
          b_frag[nj + 1][0] = r[2];
          b_frag[nj + 1][1] = r[3];
        }
#pragma unroll
        for (int mi = 0; mi < 4; ++mi) {
          // matrices: (m 0-7, k 0-7), (m 8-15, k 0-7), (m 0-7, k 8-15), (m 8-15, k 8-15)
          const int m = warp_m + mi * 16 + (matrix & 1) * 8;
          const int k = ks + (matrix >> 1) * 8;
          unsigned a_frag[4];
          if constexpr (kAKContiguous) {
            ldmatrix_x4<false>(a_frag, a_stage + (m + matrix_row) * ALayout::kStride + k);
          } else {
            ldmatrix_x4<true>(a_frag, a_stage + (k + matrix_row) * ALayout::kStride + m);
          }
#pragma unroll
          for (int ni = 0; ni < 4; ++ni) mma_16816<T>(acc[mi][ni], a_frag, b_frag[ni][0], b_frag[ni][1]);
        }
      }
    }

    // Accumulator r of tile (mi, ni): row group + 8 * (r / 2), column 2 * (lane % 4) + r % 2.
    T* c = static_cast<T*>(args.c) + z * M * N;
    const T* bias = static_cast<const T*>(args.bias);
    const int group = lane / 4;
    const int pair = (lane % 4) * 2;
#pragma unroll
    for (int mi = 0; mi < 4; ++mi) {
#pragma unroll
      for (int half_row = 0; half_row < 2; ++half_row) {
        const std::int64_t m = m0 + warp_m + mi * 16 + group + half_row * 8;
        if (m >= M) continue;
#pragma unroll
        for (int ni = 0; ni < 4; ++ni) {
          const std::int64_t n = n0 + warp_n + ni * 8 + pair;
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            if (n + e >= N) continue;
            float value = acc[mi][ni][half_row * 2 + e];
            if (bias != nullptr) value += to_compute(bias[(n + e) * args.bias_stride]);
            c[m * N + n + e] = convert<T>(value);
          }
        }
      }
    }
    // Drain the (empty) trailing groups and let every warp finish reading before the next batch
    // entry refills the stages.
    cp_async_wait<0>();
    __syncthreads();
  }
#endif
}

// ------------------------------------------------------------------------------------------------
// Host side.
constexpr unsigned kMaxGridZ = 65535;

unsigned grid_z(std::int64_t batch) { return static_cast<unsigned>(batch < kMaxGridZ ? batch : kMaxGridZ); }

dim3 tile_grid(const GemmArgs& args, int block_m, int block_n, const char* op) {
  const std::int64_t tiles_m = (args.M + block_m - 1) / block_m;
  const std::int64_t tiles_n = (args.N + block_n - 1) / block_n;
  if (tiles_m > 0x7fffffff || tiles_n > 65535) {
    throw std::invalid_argument(std::string(op) + ": a " + std::to_string(args.M) + " x " + std::to_string(args.N) +
                                " product is larger than one launch covers");
  }
  return dim3(static_cast<unsigned>(tiles_m), static_cast<unsigned>(tiles_n), grid_z(args.batch));
}

template <typename T>
void launch_simt(const GemmArgs& args, bool a_k_contiguous, bool b_n_contiguous, const DeviceFacts& facts,
                 cudaStream_t stream) {
  const std::int64_t big_tiles = ((args.M + 127) / 128) * ((args.N + 127) / 128) * args.batch;
  if constexpr (std::is_same_v<T, float>) {
    if (big_tiles >= facts.multiprocessors) {
      simt_gemm_kernel<float, 128, 128, 8, 8><<<tile_grid(args, 128, 128, "matmul"), 256, 0, stream>>>(
          args, a_k_contiguous, b_n_contiguous);
      return;
    }
  }
  simt_gemm_kernel<T, 64, 64, 4, 4><<<tile_grid(args, 64, 64, "matmul"), 256, 0, stream>>>(args, a_k_contiguous,
                                                                                             b_n_contiguous);
}

template <typename T, bool kAKContiguous, bool kBKContiguous>
void launch_tensor_core(const GemmArgs& args, int device, cudaStream_t stream) {
  constexpr int bytes = tc_shared_bytes<kAKContiguous, kBKContiguous>();
  auto kernel = tensor_core_gemm_kernel<T, kAKContiguous, kBKContiguous>;
  allow_shared_bytes(kernel, bytes, device);
  kernel<<<tile_grid(args, kTcBlockM, kTcBlockN, "matmul"), kTcThreads, bytes, stream>>>(args);
}

bool aligned_16(const void* pointer) { return reinterpret_cast<std::uintptr_t>(pointer) % 16 == 0; }

// Whether cp.async can load the operand in 16-byte chunks along its contiguous dimension: the
// contiguous stride is 1 and every line (and every batch matrix) starts 16-byte aligned. `inner` /
// `outer` are the contiguous / other dimension's size and stride.
bool chunk_loadable(std::int64_t inner_size, std::int64_t inner_stride, std::int64_t outer_size,
                    std::int64_t outer_stride, bool batch_strides_aligned, const void* data) {
  return (inner_size == 1 || inner_stride == 1) && (outer_size == 1 || outer_stride % 8 == 0) &&
         batch_strides_aligned && aligned_16(data);
}

template <typename T>
void run_gemm(const GemmArgs& args, int device, cudaStream_t stream) {
  const DeviceFacts facts = device_facts(device);
  const bool a_k_contiguous = args.K == 1 || args.a_stride_k == 1;
  const bool b_n_contiguous = args.N == 1 || args.b_stride_n == 1;
  if constexpr (is_reduced_float_v<T>) {
    if (facts.major >= 8) {
      bool a_batch_aligned = true, b_batch_aligned = true;
      for (int d = 0; d < args.batch_offsets.ndim; ++d) {
        a_batch_aligned = a_batch_aligned && args.batch_offsets.strides[d][0] % 8 == 0;
        b_batch_aligned = b_batch_aligned && args.batch_offsets.strides[d][1] % 8 == 0;
      }
      const bool a_by_k = chunk_loadable(args.K, args.a_stride_k, args.M, args.a_stride_m, a_batch_aligned, args.a);
      const bool a_by_m = chunk_loadable(args.M, args.a_stride_m, args.K, args.a_stride_k, a_batch_aligned, args.a);
      const bool b_by_n = chunk_loadable(args.N, args.b_stride_n, args.K, args.b_stride_k, b_batch_aligned, args.b);
      const bool b_by_k = chunk_loadable(args.K, args.b_stride_k, args.N, args.b_stride_n, b_batch_aligned, args.b);
      if ((a_by_k || a_by_m) && (b_by_n || b_by_k)) {
        if (a_by_k) {
          b_by_n ? launch_tensor_core<T, true, false>(args, device, stream)
                 : launch_tensor_core<T, true, true>(args, device, stream);
        } else {
          b_by_n ? launch_tensor_core<T, false, false>(args, device, stream)
                 : launch_tensor_core<T, false, true>(args, device, stream);
        }
        return;
      }
    }
  }
  launch_simt<T>(args, a_k_contiguous, b_n_contiguous, facts, stream);
}

// The strides of `a`'s batch dims (all but the last two) for the broadcast batch shape `batch`: 0
// where `a` has no such dim or has size 1 there.
Dims batch_strides(const DeviceArray& a, const Dims& batch) {
  const int a_batch = a.ndim() - 2;
  const int offset = static_cast<int>(batch.size()) - a_batch;
  Dims strides(batch.size(), 0);
  for (int d = 0; d < a_batch; ++d) {
    if (a.shape()[d] != 1) strides[offset + d] = a.strides()[d];
  }
  return strides;
}

Dims broadcast_batch(const DeviceArray& a, const DeviceArray& b) {
  const int a_batch = a.ndim() - 2, b_batch = b.ndim() - 2;
  const int nd = a_batch > b_batch ? a_batch : b_batch;
  Dims batch(nd, 1);
  for (int d = 0; d < nd; ++d) {
    const int da = d - (nd - a_batch), db = d - (nd - b_batch);
    const std::int64_t sa = da >= 0 ? a.shape()[da] : 1;
    const std::int64_t sb = db >= 0 ? b.shape()[db] : 1;
    if (sa != sb && sa != 1 && sb != 1) {
      throw std::invalid_argument("matmul: the batch dims of shapes " + format_dims(a.shape()) + " and " +
                                  format_dims(b.shape()) + " cannot be broadcast");
    }
    batch[d] = sa == 1 ? sb : sa;
  }
  return batch;
}

}  // namespace

DeviceArray matmul(const DeviceArray& a, const DeviceArray& b, const DeviceArray* bias) {
  if (a.ndim() < 2 || b.ndim() < 2) {
    throw std::invalid_argument("matmul: both operands need at least 2 dims, got shapes " + format_dims(a.shape()) +
                                " and " + format_dims(b.shape()));
  }
  if (a.dtype() != b.dtype()) {
    throw std::invalid_argument(std::string("matmul: expected both operands to have the same dtype, got ") +
                                scalar_type_name(a.dtype()) + " and " + scalar_type_name(b.dtype()));
  }
  if (!is_floating_point(a.dtype())) {
    throw std::invalid_argument(std::string("matmul: CUDA matrix products need a floating point dtype, got ") +
                                scalar_type_name(a.dtype()));
  }
  const std::int64_t M = a.shape()[a.ndim() - 2], K = a.shape()[a.ndim() - 1];
  const std::int64_t N = b.shape()[b.ndim() - 1];
  if (b.shape()[b.ndim() - 2] != K) {
    throw std::invalid_argument("matmul: shapes " + format_dims(a.shape()) + " and " + format_dims(b.shape()) +
                                " cannot be multiplied");
  }
  if (bias != nullptr && (bias->ndim() != 1 || bias->shape()[0] != N || bias->dtype() != a.dtype())) {
    throw std::invalid_argument("matmul: the bias must be a (" + std::to_string(N) + ",) array of the operands' dtype, got " +
                                format_dims(bias->shape()) + " " + scalar_type_name(bias->dtype()));
  }
  const Dims batch = broadcast_batch(a, b);
  Dims out_shape = batch;
  out_shape.push_back(M);
  out_shape.push_back(N);
  DeviceArray out = DeviceArray::empty(out_shape, a.dtype(), a.device());
  if (out.numel() == 0) return out;

  KernelLaunch launch(out, a, b);
  if (bias != nullptr) {
    if (bias->device() != out.device()) throw std::invalid_argument("matmul: the bias is on another device");
    bias->storage()->use_on(launch.stream(), launch.device());
  }

  GemmArgs args{};
  args.M = M;
  args.N = N;
  args.K = K;
  args.a = a.data_ptr();
  args.a_stride_m = a.strides()[a.ndim() - 2];
  args.a_stride_k = a.strides()[a.ndim() - 1];
  args.b = b.data_ptr();
  args.b_stride_k = b.strides()[b.ndim() - 2];
  args.b_stride_n = b.strides()[b.ndim() - 1];
  args.c = out.data_ptr();
  args.bias = bias != nullptr ? bias->data_ptr() : nullptr;
  args.bias_stride = bias != nullptr ? bias->strides()[0] : 0;
  args.batch = 1;
  for (std::int64_t size : batch) args.batch *= size;
  const Dims a_batch_strides = batch_strides(a, batch);
  const Dims b_batch_strides = batch_strides(b, batch);
  args.batch_offsets = make_strided_indexer<2, std::int64_t>(batch, {&a_batch_strides, &b_batch_strides});
  // B shared by the whole batch and A's matrices stacked row after row: one (batch * M) x N product.
  const auto& merged = args.batch_offsets;
  if (merged.ndim == 1 && merged.strides[0][1] == 0 && merged.strides[0][0] == M * args.a_stride_m) {
    args.M = M * args.batch;
    args.batch = 1;
    args.batch_offsets = StridedIndexer<2, std::int64_t>{};
  }

  dispatch_type(a.dtype(), "matmul", [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_floating_point_v<T> || is_reduced_float_v<T>) {
      run_gemm<T>(args, launch.device(), launch.stream());
    }
  });
  ADCUDA_CHECK_LAUNCH();
  return out;
}

std::string gemm_path(int device) {
  std::string path =
      "hand-written: tiled SIMT fp32/fp64 (128x128x8 block tiles, 8x8 per thread), "
      "mma.sync tensor cores for fp16/bf16 (128x128x32, 3-stage cp.async, fp32 accumulation)";
  if (device_facts(device).major < 8) path += "; this device predates sm_80, so fp16/bf16 use the SIMT kernel";
  return path;
}

}  // namespace adcuda
