// The GEMM behind `matmul` (see gemm.h for the design in brief): the host side that picks a kernel,
// the SIMT kernel (fp32 / fp64, and half types where tensor cores cannot run), and split-K's reduction.
// The tensor-core kernel is in gemm_tensor_core.cu, the cuBLASLt path in gemm_cublaslt.cu.
//
// Both hand-written kernels take any element strides for A (M x K) and B (K x N); a transposed view
// is read in place (the tensor-core kernel copies a B that 16-byte loads cannot read into an aligned
// buffer first, see stage_unaligned_b). C is always a new contiguous (batch, M, N) array. Batch dims are walked with a
// StridedIndexer, so broadcast (stride 0) and strided batches cost nothing; when B is shared by the
// whole batch and A's rows follow each other, the batch is folded into M (one big GEMM instead of
// many small ones).
#include "gemm.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "gemm_args.cuh"
#include "gemm_cublaslt.h"
#include "launch_utils.cuh"
#include "runtime/dispatch.cuh"
#include "runtime/errors.h"
#include "runtime/launch.cuh"

namespace adcuda {
namespace {

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
    T* pre = args.preactivation != nullptr ? static_cast<T*>(args.preactivation) + z * M * N : nullptr;
#pragma unroll
    for (int i = 0; i < TM; ++i) {
      const std::int64_t m = m0 + row_of(i);
      if (m >= M) continue;
#pragma unroll
      for (int j = 0; j < TN; ++j) {
        const std::int64_t n = n0 + col_of(j);
        if (n >= N) continue;
        const Acc value = acc[i][j] + bias_at<T>(args, n);
        c[m * N + n] = convert<T>(apply_activation(args.activation, value));
        if (pre != nullptr) pre[m * N + n] = convert<T>(value);
      }
    }
    // The next batch entry refills the tiles: wait until every thread has stopped reading them.
    __syncthreads();
  }
}

// ------------------------------------------------------------------------------------------------
// Split-K's reduction: the partial sums of every split, added in split order (so the result does not
// depend on which block finished first), then the epilogue. Four consecutive columns per thread:
// 16-byte loads of the partial rows (padded to a multiple of 4 floats).
template <typename T>
__global__ void reduce_split_k_kernel(GemmArgs args, SplitK split) {
  const std::int64_t N = args.N;
  const std::int64_t quads_per_row = (N + 3) / 4;
  const std::int64_t rows = args.batch * args.M;
  const std::int64_t slice = rows * split.partial_stride;  // one split's partial sums
  ADCUDA_GRID_STRIDE_LOOP(index, rows * quads_per_row) {
    const std::int64_t row = index / quads_per_row;
    const std::int64_t n = (index % quads_per_row) * 4;
    const float* partial = split.partial + row * split.partial_stride + n;
    float4 sum = *reinterpret_cast<const float4*>(partial);
    for (int part = 1; part < split.splits; ++part) {
      const float4 more = *reinterpret_cast<const float4*>(partial + part * slice);
      sum.x += more.x;
      sum.y += more.y;
      sum.z += more.z;
      sum.w += more.w;
    }
    const float sums[4] = {sum.x, sum.y, sum.z, sum.w};
    T* c = static_cast<T*>(args.c) + row * N;
    T* pre = args.preactivation != nullptr ? static_cast<T*>(args.preactivation) + row * N : nullptr;
    for (int e = 0; e < 4 && n + e < N; ++e) {
      const float value = sums[e] + bias_at<T>(args, n + e);
      c[n + e] = convert<T>(apply_activation(args.activation, value));
      if (pre != nullptr) pre[n + e] = convert<T>(value);
    }
  }
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

bool aligned_16(const void* pointer) { return reinterpret_cast<std::uintptr_t>(pointer) % 16 == 0; }

// Whether cp.async can load the operand in 16-byte chunks along its contiguous dimension: the
// contiguous stride is 1 and every line (and every batch matrix) starts 16-byte aligned. `inner` /
// `outer` are the contiguous / other dimension's size and stride.
bool chunk_loadable(std::int64_t inner_size, std::int64_t inner_stride, std::int64_t outer_size,
                    std::int64_t outer_stride, bool batch_strides_aligned, const void* data) {
  return (inner_size == 1 || inner_stride == 1) && (outer_size == 1 || outer_stride % 8 == 0) &&
         batch_strides_aligned && aligned_16(data);
}

// Whether the operand's lines along a dim of stride `inner_stride` can be read as realigned 16-byte
// vectors: that dim has stride 1 (or size 1); any leading dimension, batch stride and offset (and the
// aligned blocks around the elements inside the storage: GemmArgs::a_blocks_inside).
bool realignable(std::int64_t inner_size, std::int64_t inner_stride) { return inner_size == 1 || inner_stride == 1; }

// How the tensor-core kernel reads A and B: by 16-byte cp.async chunks along whichever dim allows it,
// else (A) by realigned 16-byte vectors along a unit-stride dim, else element by element along the dim
// with the smaller stride (the one closest to contiguous).
TensorCoreOperands tensor_core_operands(const GemmArgs& args) {
  bool a_batch_aligned = true, b_batch_aligned = true;
  for (int d = 0; d < args.batch_offsets.ndim; ++d) {
    a_batch_aligned = a_batch_aligned && args.batch_offsets.strides[d][0] % 8 == 0;
    b_batch_aligned = b_batch_aligned && args.batch_offsets.strides[d][1] % 8 == 0;
  }
  TensorCoreOperands operands{};
  const bool a_by_k = chunk_loadable(args.K, args.a_stride_k, args.M, args.a_stride_m, a_batch_aligned, args.a);
  const bool a_by_m = chunk_loadable(args.M, args.a_stride_m, args.K, args.a_stride_k, a_batch_aligned, args.a);
  const bool b_by_k = chunk_loadable(args.K, args.b_stride_k, args.N, args.b_stride_n, b_batch_aligned, args.b);
  const bool b_by_n = chunk_loadable(args.N, args.b_stride_n, args.K, args.b_stride_k, b_batch_aligned, args.b);
  const bool a_realigned_by_k = realignable(args.K, args.a_stride_k);
  const bool a_realigned_by_m = realignable(args.M, args.a_stride_m);
  if (a_by_k || a_by_m) {
    operands.a_load = kLoadAsync;
    operands.a_k_contiguous = a_by_k;
  } else if (args.a_blocks_inside && (a_realigned_by_k || a_realigned_by_m)) {
    operands.a_load = kLoadRealigned;
    operands.a_k_contiguous = a_realigned_by_k;
  } else {
    operands.a_load = kLoadElements;
    operands.a_k_contiguous = args.M == 1 || (args.K > 1 && args.a_stride_k <= args.a_stride_m);
  }
  const bool b_async = b_by_k || b_by_n;
  operands.b_load = b_async ? kLoadAsync : kLoadElements;
  operands.b_k_contiguous = b_async ? b_by_k : args.N == 1 || (args.K > 1 && args.b_stride_k <= args.b_stride_n);
  return operands;
}

// ADCUDA_GEMM_SPLIT_K=<n> forces n K splits on the tensor-core kernel (1: none), for tests and
// experiments; unset or "auto" leaves the choice to choose_split_k.
int split_k_override() {
  const char* value = std::getenv("ADCUDA_GEMM_SPLIT_K");
  if (value == nullptr || *value == '\0' || std::string(value) == "auto") return 0;
  char* end = nullptr;
  const long splits = std::strtol(value, &end, 10);
  if (*end != '\0' || splits < 1 || splits > 64) {
    throw std::invalid_argument(std::string("matmul: ADCUDA_GEMM_SPLIT_K must be 'auto' or a count from 1 to 64, got '") +
                                value + "'");
  }
  return static_cast<int>(splits);
}

// Split K when the output tiles leave SMs idle (less than two waves at one block per SM) and K is long:
// the modelled time of s splits is (waves of tiles * s blocks) * (K tiles per split), plus the fp32
// partial sums' round trip through memory, which costs about kReductionKTiles k-tiles of one SM's time
// per partial output tile (a 128 x 256 fp32 tile written and read at an SM's share of DRAM bandwidth).
// For the GPT-2 weight gradient 768 x 2304, K = 8192 on 132 SMs: 54 tiles, 2 splits.
int choose_split_k(std::int64_t tiles, int k_tiles, int multiprocessors) {
  constexpr int kMaxSplits = 16;
  constexpr int kMinKTilesPerSplit = 8;
  constexpr double kReductionKTiles = 24.0;
  if (tiles >= 2 * static_cast<std::int64_t>(multiprocessors)) return 1;
  int best = 1;
  double best_cost = static_cast<double>(k_tiles);
  for (int splits = 2; splits <= kMaxSplits && k_tiles / splits >= kMinKTilesPerSplit; ++splits) {
    const std::int64_t blocks = tiles * splits;
    const std::int64_t waves = (blocks + multiprocessors - 1) / multiprocessors;
    const int per_split = (k_tiles + splits - 1) / splits;
    const double cost = static_cast<double>(waves * per_split) + kReductionKTiles * blocks / multiprocessors;
    if (cost < best_cost) {
      best = splits;
      best_cost = cost;
    }
  }
  return best;
}

}  // namespace

int tensor_core_split_k(std::int64_t M, std::int64_t N, std::int64_t K, std::int64_t batch, int multiprocessors) {
  const TensorCoreTiles tiles = tensor_core_tiles();
  const std::int64_t output_tiles = ((M + tiles.block_m - 1) / tiles.block_m) * ((N + tiles.block_n - 1) / tiles.block_n);
  const std::int64_t k_tiles = (K + tiles.block_k - 1) / tiles.block_k;
  return choose_split_k(output_tiles * batch, static_cast<int>(k_tiles < 0x7fffffff ? k_tiles : 0x7fffffff),
                        multiprocessors);
}

namespace {

// Copies B's batch x K x N matrices (any strides) into `staged`: rows N-contiguous, `row_stride`
// (a multiple of 8) elements apart, matrix z at z * K * row_stride; `per_batch` false copies one
// matrix (B shared by the whole batch).
template <typename T>
__global__ void stage_b_kernel(GemmArgs args, bool per_batch, std::int64_t row_stride, T* staged) {
  const std::int64_t matrices = per_batch ? args.batch : 1;
  const std::int64_t per_matrix = args.K * args.N;
  const T* b = static_cast<const T*>(args.b);
  ADCUDA_GRID_STRIDE_LOOP(index, matrices * per_matrix) {
    const std::int64_t z = index / per_matrix;
    const std::int64_t k = (index % per_matrix) / args.N;
    const std::int64_t n = index % args.N;
    std::int64_t offsets[2] = {0, 0};
    if (per_batch) args.batch_offsets.offsets(z, offsets);
    staged[(z * args.K + k) * row_stride + n] = b[offsets[1] + k * args.b_stride_k + n * args.b_stride_n];
  }
}

// The tensor-core kernel is built only for B by 16-byte cp.async chunks (A may come by elements):
// a B that cannot be read so (an odd row length, a misaligned view) is copied first into rows padded
// to 8 elements. The copy costs one pass over B, small next to the product's K-fold reuse of it.
template <typename T>
DeviceArray stage_unaligned_b(GemmArgs& args, int device, cudaStream_t stream) {
  bool shared_b = true;
  for (int d = 0; d < args.batch_offsets.ndim; ++d) shared_b = shared_b && args.batch_offsets.strides[d][1] == 0;
  const std::int64_t row_stride = (args.N + 7) / 8 * 8;
  const std::int64_t matrices = shared_b ? 1 : args.batch;
  const ScalarType dtype = std::is_same_v<T, __half> ? ScalarType::Float16 : ScalarType::BFloat16;
  DeviceArray staged = DeviceArray::empty({matrices * args.K * row_stride}, dtype, device);
  stage_b_kernel<T><<<grid_size(matrices * args.K * args.N), kBlockSize, 0, stream>>>(args, !shared_b, row_stride,
                                                                                     staged.data<T>());
  ADCUDA_CHECK_LAUNCH();
  args.b = staged.data_ptr();
  args.b_stride_k = row_stride;
  args.b_stride_n = 1;
  // Matrix z of the staged copy is at z * K * row_stride: the batch dims' strides of a contiguous
  // array of the batch shape, or 0 everywhere for a shared B.
  std::int64_t stride = args.K * row_stride;
  for (int d = args.batch_offsets.ndim - 1; d >= 0; --d) {
    args.batch_offsets.strides[d][1] = shared_b ? 0 : stride;
    stride *= args.batch_offsets.sizes[d];
  }
  return staged;
}

// The K splits of a tensor-core product (gemm.h's tensor_core_split_k, or ADCUDA_GEMM_SPLIT_K), with a
// multiple of `granule` 32-wide K tiles per split (the sm_90a kernel's K tile is two of them).
SplitK plan_split_k(const GemmArgs& args, const DeviceFacts& facts, int granule) {
  const TensorCoreTiles tiles = tensor_core_tiles();
  const int k_tiles = static_cast<int>((args.K + tiles.block_k - 1) / tiles.block_k);
  const int forced = split_k_override();
  const int splits = forced > 0 ? forced : tensor_core_split_k(args.M, args.N, args.K, args.batch, facts.multiprocessors);
  SplitK split;
  split.k_tiles_per_split = (k_tiles + splits - 1) / splits;
  split.k_tiles_per_split = (split.k_tiles_per_split + granule - 1) / granule * granule;
  // Every split gets at least one K tile (a forced count above the K tiles is cut down).
  split.splits = k_tiles == 0 ? 1 : (k_tiles + split.k_tiles_per_split - 1) / split.k_tiles_per_split;
  if (split.k_tiles_per_split == 0) split.k_tiles_per_split = granule;
  return split;
}

// Runs `launch(args, split)` once; with more than one split, into an fp32 workspace that the reduction
// then adds up and finishes with the epilogue.
template <typename T, typename Launch>
void run_with_split_k(const GemmArgs& args, SplitK split, int device, cudaStream_t stream, Launch launch) {
  if (split.splits == 1) {
    launch(args, split);
    return;
  }
  split.partial_stride = (args.N + 3) / 4 * 4;
  DeviceArray partial = DeviceArray::empty({split.splits * args.batch * args.M * split.partial_stride},
                                           ScalarType::Float32, device);
  split.partial = partial.data<float>();
  launch(args, split);
  ADCUDA_CHECK_LAUNCH();
  const std::int64_t quads = args.batch * args.M * ((args.N + 3) / 4);
  reduce_split_k_kernel<T><<<grid_size(quads), kBlockSize, 0, stream>>>(args, split);
  ADCUDA_CHECK_LAUNCH();
  // The workspace goes back to the caching allocator when `partial` dies here; the allocator reuses it
  // only in this stream's order, after the reduction.
}

template <typename T>
void run_tensor_core(const GemmArgs& unstaged_args, const DeviceFacts& facts, int device, cudaStream_t stream) {
  GemmArgs args = unstaged_args;
  // Kept until the GEMM is queued: the caching allocator reuses it only in this stream's order.
  std::optional<DeviceArray> staged_b;
  if (tensor_core_operands(args).b_load != kLoadAsync) staged_b = stage_unaligned_b<T>(args, device, stream);
  const TensorCoreTiles tiles = tensor_core_tiles();
  const std::int64_t tiles_m = (args.M + tiles.block_m - 1) / tiles.block_m;
  const std::int64_t tiles_n = (args.N + tiles.block_n - 1) / tiles.block_n;
  if (tiles_m * tiles_n > 0x7fffffff) {
    throw std::invalid_argument("matmul: a " + std::to_string(args.M) + " x " + std::to_string(args.N) +
                                " product is larger than one launch covers");
  }
  run_with_split_k<T>(args, plan_split_k(args, facts, 1), device, stream, [&](const GemmArgs& a, const SplitK& split) {
    launch_tensor_core_gemm<T>(a, split, tensor_core_operands(a), device, stream);
  });
}

// Copies B (K x N, any strides; batch 1) into `staged` as N rows of K contiguous elements, `row_stride`
// (a multiple of 8) apart: the K-major form the sm_90a kernel's TMA reads.
template <typename T>
__global__ void stage_b_k_major_kernel(GemmArgs args, std::int64_t row_stride, T* staged) {
  const T* b = static_cast<const T*>(args.b);
  ADCUDA_GRID_STRIDE_LOOP(index, args.K * args.N) {
    const std::int64_t n = index / args.K;
    const std::int64_t k = index % args.K;
    staged[n * row_stride + k] = b[k * args.b_stride_k + n * args.b_stride_n];
  }
}

// The sm_90a kernel, if it takes the problem: A must be TMA-readable as it is; a B that is not (N
// contiguous, the usual K x N matrix, or misaligned) is copied into K-major rows first, one pass over
// B next to the product's 2 M N K flops. Returns false (nothing queued) where the kernel does not apply.
// ADCUDA_GEMM_SM90=0 keeps fp16/bf16 products off the sm_90a kernel (on the mma.sync one), for tests
// and comparisons; unset or 1 lets it run where it applies.
bool sm90_disabled() {
  const char* value = std::getenv("ADCUDA_GEMM_SM90");
  if (value == nullptr || *value == '\0' || std::string(value) == "1") return false;
  if (std::string(value) == "0") return true;
  throw std::invalid_argument(std::string("matmul: ADCUDA_GEMM_SM90 must be 0 or 1, got '") + value + "'");
}

template <typename T>
bool run_sm90(const GemmArgs& unstaged_args, const DeviceFacts& facts, int device, cudaStream_t stream) {
  if (sm90_disabled() || unstaged_args.batch != 1 || unstaged_args.K < 1 || !sm90_gemm_runs_on(device) ||
      !sm90_operand_readable(unstaged_args.M, unstaged_args.K, unstaged_args.a_stride_m, unstaged_args.a_stride_k,
                             unstaged_args.a)) {
    return false;
  }
  GemmArgs args = unstaged_args;
  std::optional<DeviceArray> staged_b;
  if (!sm90_gemm_accepts(args)) {
    const std::int64_t row_stride = (args.K + 7) / 8 * 8;
    const ScalarType dtype = std::is_same_v<T, __half> ? ScalarType::Float16 : ScalarType::BFloat16;
    staged_b = DeviceArray::empty({args.N * row_stride}, dtype, device);
    stage_b_k_major_kernel<T><<<grid_size(args.K * args.N), kBlockSize, 0, stream>>>(args, row_stride,
                                                                                     staged_b->data<T>());
    ADCUDA_CHECK_LAUNCH();
    args.b = staged_b->data_ptr();
    args.b_stride_k = 1;
    args.b_stride_n = row_stride;
  }
  const Sm90Tiles tiles = sm90_gemm_tiles();
  if (((args.M + tiles.block_m - 1) / tiles.block_m) * ((args.N + tiles.block_n - 1) / tiles.block_n) > 0x3fffffff) {
    return false;
  }
  run_with_split_k<T>(args, plan_split_k(args, facts, tiles.block_k / tensor_core_tiles().block_k), device, stream,
                      [&](const GemmArgs& a, const SplitK& split) { launch_sm90_gemm<T>(a, split, device, stream); });
  return true;
}

// Which hand-written kernel the last fp16/bf16 product on this process ran (for benchmarks and tests).
std::atomic<int> last_half_kernel{static_cast<int>(HalfGemmKernel::kNone)};

template <typename T>
void run_gemm(const GemmArgs& args, int device, cudaStream_t stream) {
  const DeviceFacts facts = device_facts(device);
  if constexpr (is_reduced_float_v<T>) {
    if (run_sm90<T>(args, facts, device, stream)) {
      last_half_kernel = static_cast<int>(HalfGemmKernel::kSm90Wgmma);
      return;
    }
    if (facts.major >= 8 && tensor_core_gemm_runs_on(device)) {
      run_tensor_core<T>(args, facts, device, stream);
      last_half_kernel = static_cast<int>(HalfGemmKernel::kSm80MmaSync);
      return;
    }
    last_half_kernel = static_cast<int>(HalfGemmKernel::kSimt);
  }
  const bool a_k_contiguous = args.K == 1 || args.a_stride_k == 1;
  const bool b_n_contiguous = args.N == 1 || args.b_stride_n == 1;
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

// Whether every aligned 16-byte block that holds one of `a`'s elements lies inside its storage (the
// storage's own bytes: under the emulator's address sanitizer nothing past them is addressable, where
// a GPU's allocation granules would forgive a read up to the block's end).
bool blocks_inside(const DeviceArray& a) {
  const auto [low, high] = a.extent();
  const auto start = reinterpret_cast<std::uintptr_t>(a.storage()->data());
  const auto itemsize = static_cast<std::uintptr_t>(a.itemsize());
  const std::uintptr_t first = start + static_cast<std::uintptr_t>(low) * itemsize;
  const std::uintptr_t end = start + static_cast<std::uintptr_t>(high) * itemsize;
  return first / 16 * 16 >= start && (end + 15) / 16 * 16 <= start + a.storage()->nbytes();
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

MatmulResult matmul(const DeviceArray& a, const DeviceArray& b, const MatmulOptions& options) {
  const DeviceArray* bias = options.bias;
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
  MatmulResult result{DeviceArray::empty(out_shape, a.dtype(), a.device()), std::nullopt};
  if (options.save_preactivation) result.preactivation = DeviceArray::empty(out_shape, a.dtype(), a.device());
  const DeviceArray& out = result.out;
  if (out.numel() == 0) return result;

  KernelLaunch launch(out, a, b);
  if (bias != nullptr) {
    if (bias->device() != out.device()) throw std::invalid_argument("matmul: the bias is on another device");
    bias->storage()->use_on(launch.stream(), launch.device());
  }
  if (result.preactivation) result.preactivation->storage()->use_on(launch.stream(), launch.device());

  GemmArgs args{};
  args.M = M;
  args.N = N;
  args.K = K;
  args.a = a.data_ptr();
  args.a_blocks_inside = blocks_inside(a);
  args.a_stride_m = a.strides()[a.ndim() - 2];
  args.a_stride_k = a.strides()[a.ndim() - 1];
  args.b = b.data_ptr();
  args.b_stride_k = b.strides()[b.ndim() - 2];
  args.b_stride_n = b.strides()[b.ndim() - 1];
  args.c = out.data_ptr();
  args.bias = bias != nullptr ? bias->data_ptr() : nullptr;
  args.bias_stride = bias != nullptr ? bias->strides()[0] : 0;
  args.activation = options.activation;
  args.preactivation = result.preactivation ? result.preactivation->data_ptr() : nullptr;
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

  if (options.allow_cublaslt && cublaslt_matmul(args, a.dtype(), launch.device(), launch.stream())) {
    if (a.dtype() == ScalarType::Float16 || a.dtype() == ScalarType::BFloat16) {
      last_half_kernel = static_cast<int>(HalfGemmKernel::kCublasLt);
    }
    return result;
  }
  dispatch_type(a.dtype(), "matmul", [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_floating_point_v<T> || is_reduced_float_v<T>) {
      run_gemm<T>(args, launch.device(), launch.stream());
    }
  });
  ADCUDA_CHECK_LAUNCH();
  return result;
}

TensorCoreVariant tensor_core_variant(std::int64_t M, std::int64_t N, std::int64_t K, std::int64_t a_stride_m,
                                      std::int64_t a_stride_k, std::int64_t b_stride_k, std::int64_t b_stride_n,
                                      std::int64_t a_offset, std::int64_t b_offset) {
  // Addresses with the given misalignment: the choice reads only their low bits.
  constexpr std::uintptr_t kAligned = 1 << 20;
  GemmArgs args{};
  args.M = M;
  args.N = N;
  args.K = K;
  args.a = reinterpret_cast<const void*>(kAligned + 2 * static_cast<std::uintptr_t>(a_offset));
  args.a_stride_m = a_stride_m;
  args.a_stride_k = a_stride_k;
  args.a_blocks_inside = true;  // storage of whole 16-byte blocks, as allocations of a multiple of 16 bytes
  args.b = reinterpret_cast<const void*>(kAligned + 2 * static_cast<std::uintptr_t>(b_offset));
  args.b_stride_k = b_stride_k;
  args.b_stride_n = b_stride_n;
  args.batch = 1;
  const auto name = [](TileLoad load) {
    return load == kLoadAsync ? "cp.async" : load == kLoadRealigned ? "realigned" : "elements";
  };
  TensorCoreOperands operands = tensor_core_operands(args);
  TensorCoreVariant variant;
  variant.b_staged = operands.b_load != kLoadAsync;
  if (variant.b_staged) {  // read from the aligned copy stage_unaligned_b makes
    args.b = reinterpret_cast<const void*>(kAligned);
    args.b_stride_k = (N + 7) / 8 * 8;
    args.b_stride_n = 1;
    operands = tensor_core_operands(args);
  }
  variant.a_load = name(operands.a_load);
  variant.b_load = name(operands.b_load);
  variant.a_k_contiguous = operands.a_k_contiguous;
  variant.b_k_contiguous = operands.b_k_contiguous;
  variant.epilogue = N % 8 == 0 ? "16-byte" : "16-byte realigned";  // C is new, contiguous, aligned
  return variant;
}

std::string gemm_last_half_kernel() {
  switch (static_cast<HalfGemmKernel>(last_half_kernel.load())) {
    case HalfGemmKernel::kNone: return "none";
    case HalfGemmKernel::kCublasLt: return "cublaslt";
    case HalfGemmKernel::kSm90Wgmma: return "sm90_wgmma";
    case HalfGemmKernel::kSm80MmaSync: return "sm80_mma_sync";
    case HalfGemmKernel::kSimt: return "simt";
  }
  return "none";
}

std::string gemm_path(int device) {
  const TensorCoreTiles tiles = tensor_core_tiles();
  const std::string tensor_core = "mma.sync tensor cores for fp16/bf16 (" + std::to_string(tiles.block_m) + "x" +
                                  std::to_string(tiles.block_n) + "x" + std::to_string(tiles.block_k) +
                                  " block tiles, 64x64 warp tiles, 3-4 stage cp.async, split-K, fp32 accumulation)";
  std::string path = "hand-written: " + tensor_core + ", tiled SIMT fp32/fp64 (128x128x8 block tiles, 8x8 per thread)";
  if (sm90_gemm_runs_on(device)) {
    const Sm90Tiles hopper = sm90_gemm_tiles();
    path = "hand-written: sm_90a TMA + wgmma for fp16/bf16 (" + std::to_string(hopper.block_m) + "x" +
           std::to_string(hopper.block_n) + "x" + std::to_string(hopper.block_k) +
           " block tiles, 2 consumer warpgroups, 4-stage mbarrier ring, persistent; single products with A "
           "K-contiguous), else " + path.substr(std::string("hand-written: ").size());
  } else if (device_facts(device).major < 8) {
    path += "; this device predates sm_80, so fp16/bf16 use the SIMT kernel";
  } else if (!tensor_core_gemm_runs_on(device)) {
    path += "; this build has no sm_80+ code for this device (ADCUDA_CUDA_ARCHS), so fp16/bf16 use the SIMT kernel";
  }
  return path;
}

}  // namespace adcuda
