// The hand-written tensor-core GEMM (fp16 / bf16, sm_80+): the path `matmul` takes for half types when
// cuBLASLt is not used (gemm.cu chooses; this file only runs what it is given).
//
// Block tile 128 x 256 x 32, 8 warps as 2 x 4, each warp 64 x 64 outputs = 4 x 8 mma.sync m16n8k16
// tiles with fp32 accumulators (128 registers). Per k-tile a warp issues 2 k-steps x 32 mma and
// 2 x 8 ldmatrix.x4; the fragments of k-step s + 1 are loaded (register double-buffering) while the
// mma of k-step s run, across the k-tile boundary too.
//
// Global -> shared memory, per operand:
//   - 16-byte cp.async chunks in a 3- or 4-stage pipeline (4 where the device's shared memory allows)
//     when the operand's contiguous dimension has stride 1 and its lines start 16-byte aligned;
//   - where the contiguous dimension has stride 1 but lines start anywhere (a leading dimension of
//     50257: the language-model head's logit gradient, A of both backward GEMMs), the aligned 16-byte
//     vectors holding each chunk are loaded into registers one k-step before they are realigned and
//     stored to the same pipeline stage (two 16-byte loads per chunk, predicated at the edges);
//   - otherwise (no unit stride: a view such as x[::2, ::2]) element-granular loads into registers,
//     issued and stored the same way: slower, but still the tensor-core kernel.
// Past the matrix edges chunks are zero-filled (cp.async's src-size, or predicated element loads), so
// every M, N, K works. An operand whose contiguous dimension is K is stored [row][k] and read with
// ldmatrix; one contiguous along M (or N) is stored [k][row] and read with ldmatrix.trans, which
// delivers the same fragments. Rows are padded by 8 elements (16 bytes) so that ldmatrix's eight row
// reads fall in distinct banks.
//
// Blocks are rasterised in groups of 8 tile rows (consecutive blocks share B's column tiles and 8 of
// A's row tiles, which stay in L2). Split-K (SplitK, chosen by gemm.cu) gives each block a K range and
// fp32 partial sums that gemm.cu's reduction adds in a fixed order. Without split-K the epilogue adds
// the bias, applies the activation, and writes each warp's 64 x 64 tile through shared memory as
// 16-byte row vectors; rows that do not start 16-byte aligned (N not a multiple of 8: the 50257-wide
// logits) are staged shifted by their misalignment, so that they too leave as aligned 16-byte stores
// with only the blocks at the row ends written element by element.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "gemm_args.cuh"
#include "launch_utils.cuh"
#include "ptx_sm80.cuh"
#include "runtime/errors.h"

namespace adcuda {
namespace {

constexpr int kBlockM = 128;
constexpr int kBlockN = 256;
constexpr int kBlockK = 32;
constexpr int kWarpM = 64;
constexpr int kWarpN = 64;
constexpr int kWarpsN = kBlockN / kWarpN;
constexpr int kThreads = 32 * (kBlockM / kWarpM) * kWarpsN;
constexpr int kMmaTilesM = kWarpM / 16;  // mma.m16n8k16 tiles per warp along M
constexpr int kMmaTilesN = kWarpN / 8;   // and along N
constexpr int kKSteps = kBlockK / 16;
constexpr int kMinStages = 3;
constexpr int kMaxStages = 4;
constexpr int kRasterGroup = 8;  // tile rows per rasterisation group
static_assert(kThreads == 256, "8 warps");

// One pipeline stage of an operand: [rows][k] when K is contiguous, else [k][rows].
template <bool kKContiguous, int kRows>
struct StageLayout {
  static constexpr int kStride = kKContiguous ? kBlockK + 8 : kRows + 8;
  static constexpr int kElements = (kKContiguous ? kRows : kBlockK) * kStride;
};

template <bool kAKContiguous, bool kBKContiguous>
constexpr int stage_bytes() {
  return (StageLayout<kAKContiguous, kBlockM>::kElements + StageLayout<kBKContiguous, kBlockN>::kElements) * 2;
}

// The epilogue stages each warp's 64 x 64 tile in the (then idle) pipeline memory.
constexpr int kEpilogueStride = kWarpN + 8;
constexpr int kEpilogueBytes = (kThreads / 32) * kWarpM * kEpilogueStride * 2;
static_assert(kEpilogueBytes <= kMinStages * stage_bytes<false, false>(), "the epilogue tile must fit the pipeline");

// ------------------------------------------------------------------------------------------------
// sm_80 PTX (kernels/ptx_sm80.cuh).
using ptx::cp_async_16;
using ptx::cp_async_commit;
using ptx::cp_async_wait;
using ptx::ldmatrix_x4;
using ptx::mma_16816;

// Waits until at most `pending` (stages - 2: 1 or 2) groups are in flight.
__device__ __forceinline__ void cp_async_wait_stages(int stages) {
  if (stages == kMaxStages) {
    cp_async_wait<kMaxStages - 2>();
  } else {
    cp_async_wait<kMinStages - 2>();
  }
}

// ------------------------------------------------------------------------------------------------
// Loading one operand's tiles. The block tile is `kLines` lines of `kLineLength` elements along the
// operand's contiguous (stored-contiguous) dimension, in 8-element chunks spread over the threads:
// a thread's chunks sit at one position along their line, on lines kLineDelta apart. `kKContiguous`
// says whether that dimension is K (chunks then move along their line from tile to tile) or M/N (the
// lines are K rows, and the tile moves down them). A loader keeps only its first chunk's address and
// the steps to the others and to the next tile (few registers next to the 128 accumulators). Both
// loaders have the same interface: begin(stage, k_left) starts the loads of the tile with k_left K
// indices left from its start, finish(stage) ends them.
template <int kLines, int kLineLength>
struct ChunkMap {
  static constexpr int kChunksPerLine = kLineLength / 8;
  static constexpr int kPerThread = kLines * kChunksPerLine / kThreads;
  static constexpr int kLineDelta = kThreads / kChunksPerLine;  // lines between a thread's chunks
  static_assert(kThreads % kChunksPerLine == 0 && kLines % kLineDelta == 0, "chunks must split evenly");
  static __device__ __forceinline__ int line0() { return threadIdx.x / kChunksPerLine; }
  static __device__ __forceinline__ int inner() { return threadIdx.x % kChunksPerLine * 8; }
};

// The loaders' common state. `base` is the operand's matrix; `row0` the tile's first M/N index,
// `row_extent` M or N, `row_stride` / `k_stride` the operand's strides along M/N and along K; `k_begin`
// the first K index.
template <typename T, int kLines, int kLineLength, bool kKContiguous>
struct ChunkCursor {
  using Map = ChunkMap<kLines, kLineLength>;
  const T* src;            // the thread's first chunk in the next tile
  std::int64_t line_step;  // elements from one of the thread's chunks to the next
  std::int64_t tile_step;  // elements from one tile to the next
  // K-contiguous: bit i says whether chunk i's line (an M/N row) exists; otherwise the number of the
  // chunks' elements inside the M/N extent (0..8, the same for all of them).
  int valid;
  bool interior;  // the block's whole tile lies inside the M/N extent (the same for every thread)

  __device__ __forceinline__ ChunkCursor(const T* base, std::int64_t row0, std::int64_t row_extent,
                                         std::int64_t row_stride, std::int64_t k_stride, std::int64_t k_begin,
                                         std::int64_t inner_stride) {
    const int line0 = Map::line0(), inner = Map::inner();
    interior = row0 + (kKContiguous ? kLines : kLineLength) <= row_extent;
    tile_step = kBlockK * (kKContiguous ? inner_stride : k_stride);
    if constexpr (kKContiguous) {
      line_step = Map::kLineDelta * row_stride;
      src = base + (row0 + line0) * row_stride + (k_begin + inner) * inner_stride;
      valid = 0;
#pragma unroll
      for (int i = 0; i < Map::kPerThread; ++i) valid |= (row0 + line0 + i * Map::kLineDelta < row_extent) << i;
    } else {
      line_step = Map::kLineDelta * k_stride;
      src = base + (k_begin + line0) * k_stride + (row0 + inner) * inner_stride;
      const std::int64_t left = row_extent - (row0 + inner);
      valid = left <= 0 ? 0 : static_cast<int>(left < 8 ? left : 8);
    }
  }

  // How many of chunk i's 8 elements lie inside the matrix, for a tile with k_left K indices left.
  __device__ __forceinline__ int elements_inside(int i, int k_left) const {
    if constexpr (kKContiguous) {
      const int left = k_left - Map::inner();
      return ((valid >> i) & 1) == 0 || left <= 0 ? 0 : (left < 8 ? left : 8);
    } else {
      return Map::line0() + i * Map::kLineDelta < k_left ? valid : 0;
    }
  }

  __device__ __forceinline__ int shared_offset(int i, int stride) const {
    return (Map::line0() + i * Map::kLineDelta) * stride + Map::inner();
  }
};

// cp.async loader: the contiguous dimension has stride 1 and every line starts 16-byte aligned.
template <typename T, int kLines, int kLineLength, int kStride, bool kKContiguous>
struct AsyncTileLoader {
  using Cursor = ChunkCursor<T, kLines, kLineLength, kKContiguous>;
  Cursor cursor;
  const T* origin;  // the matrix's first element, 16-byte aligned: the address of chunks that read nothing

  __device__ __forceinline__ AsyncTileLoader(const T* base, std::int64_t row0, std::int64_t row_extent,
                                             std::int64_t row_stride, std::int64_t k_stride, std::int64_t k_begin)
      : cursor(base, row0, row_extent, row_stride, k_stride, k_begin, 1), origin(base) {}

  // A tile wholly inside the matrix (all of the block's rows or columns exist, 32 K indices left) is
  // copied without any bounds arithmetic; that is every tile but the edges, and keeps the main loop's
  // issue slots for the mma. At the edges a chunk past the matrix reads nothing (cp.async zero-fills
  // it), but cp.async still wants a 16-byte aligned source address, which a chunk past the edge of a
  // 1-row or 1-column operand with an odd stride does not have: such chunks name the matrix's
  // (aligned) start instead.
  __device__ __forceinline__ void begin(T* shared, int k_left) {
    if (cursor.interior && k_left >= kBlockK) {
#pragma unroll
      for (int i = 0; i < Cursor::Map::kPerThread; ++i) {
        cp_async_16(shared + cursor.shared_offset(i, kStride), cursor.src + i * cursor.line_step, 16);
      }
    } else {
#pragma unroll
      for (int i = 0; i < Cursor::Map::kPerThread; ++i) {
        const int bytes = cursor.elements_inside(i, k_left) * static_cast<int>(sizeof(T));
        cp_async_16(shared + cursor.shared_offset(i, kStride),
                    bytes > 0 ? cursor.src + i * cursor.line_step : origin, bytes);
      }
    }
    cursor.src += cursor.tile_step;
  }

  __device__ __forceinline__ void finish(T*) {}
};

// Element loader, for any strides and alignment: begin() loads the chunks' elements into registers
// (zeros past the edges), finish() stores each chunk to shared memory as one 16-byte vector.
template <typename T, int kLines, int kLineLength, int kStride, bool kKContiguous>
struct ElementTileLoader {
  using Cursor = ChunkCursor<std::uint16_t, kLines, kLineLength, kKContiguous>;
  Cursor cursor;
  std::int64_t inner_stride;  // between a chunk's elements
  unsigned staged[Cursor::Map::kPerThread][4];

  __device__ __forceinline__ ElementTileLoader(const T* base, std::int64_t row0, std::int64_t row_extent,
                                               std::int64_t row_stride, std::int64_t k_stride,
                                               std::int64_t k_begin)
      : cursor(reinterpret_cast<const std::uint16_t*>(base), row0, row_extent, row_stride, k_stride, k_begin,
               kKContiguous ? k_stride : row_stride),
        inner_stride(kKContiguous ? k_stride : row_stride) {}

  __device__ __forceinline__ void begin(T*, int k_left) {
#pragma unroll
    for (int i = 0; i < Cursor::Map::kPerThread; ++i) {
      const int inside = cursor.elements_inside(i, k_left);
      const std::uint16_t* chunk = cursor.src + i * cursor.line_step;
      std::uint16_t values[8];
#pragma unroll
      for (int j = 0; j < 8; ++j) values[j] = j < inside ? chunk[j * inner_stride] : std::uint16_t(0);
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        staged[i][j] = static_cast<unsigned>(values[2 * j]) | (static_cast<unsigned>(values[2 * j + 1]) << 16);
      }
    }
    cursor.src += cursor.tile_step;
  }

  __device__ __forceinline__ void finish(T* shared) {
#pragma unroll
    for (int i = 0; i < Cursor::Map::kPerThread; ++i) {
      *reinterpret_cast<uint4*>(shared + cursor.shared_offset(i, kStride)) =
          make_uint4(staged[i][0], staged[i][1], staged[i][2], staged[i][3]);
    }
  }
};

// Realigning loader, for an operand whose contiguous dimension has stride 1 but whose lines do not all
// start 16-byte aligned (a leading dimension of 50257: a language-model head's logits or their
// gradient), where cp.async cannot be used: begin() loads the one or two aligned 16-byte vectors that
// hold a chunk's 8 elements, finish() shifts the chunk's elements out of them, zeroes those past the
// matrix edges and stores the chunk to shared memory as one 16-byte vector. Two 16-byte loads per chunk
// where the element loader issues eight 2-byte ones; the second vector is usually the next chunk's
// first, an L1 hit. A vector holding none of the chunk's elements inside the matrix is not read; one
// that is may reach past the matrix's first or last element, so gemm.cu chooses this loader only where
// the operand's storage holds every 16-byte block its elements touch (GemmArgs::a_blocks_inside).
template <typename T, int kLines, int kLineLength, int kStride, bool kKContiguous>
struct RealignedTileLoader {
  using Cursor = ChunkCursor<std::uint16_t, kLines, kLineLength, kKContiguous>;
  Cursor cursor;
  uint4 raw[Cursor::Map::kPerThread][2];
  // per chunk: the elements before it in its first aligned vector (bits 0-2), and how many of its 8
  // elements lie inside the matrix (bits 4-7)
  int placement[Cursor::Map::kPerThread];

  __device__ __forceinline__ RealignedTileLoader(const T* base, std::int64_t row0, std::int64_t row_extent,
                                                 std::int64_t row_stride, std::int64_t k_stride,
                                                 std::int64_t k_begin)
      : cursor(reinterpret_cast<const std::uint16_t*>(base), row0, row_extent, row_stride, k_stride, k_begin, 1) {}

  __device__ __forceinline__ void begin(T*, int k_left) {
#pragma unroll
    for (int i = 0; i < Cursor::Map::kPerThread; ++i) {
      const int inside = cursor.elements_inside(i, k_left);
      const std::uint16_t* chunk = cursor.src + i * cursor.line_step;
      const int shift = static_cast<int>((reinterpret_cast<std::uintptr_t>(chunk) >> 1) & 7);
      const uint4* aligned = reinterpret_cast<const uint4*>(chunk - shift);
      raw[i][0] = inside > 0 ? aligned[0] : make_uint4(0, 0, 0, 0);
      raw[i][1] = shift + inside > 8 ? aligned[1] : make_uint4(0, 0, 0, 0);
      placement[i] = shift | (inside << 4);
    }
    cursor.src += cursor.tile_step;
  }

  __device__ __forceinline__ void finish(T* shared) {
#pragma unroll
    for (int i = 0; i < Cursor::Map::kPerThread; ++i) {
      const int shift = placement[i] & 7, inside = placement[i] >> 4;
      // the 16 elements as 8 words; the chunk starts `shift` elements in: move by whole words (a
      // barrel shifter of two select stages, no dynamic register indexing), then by a half word
      const unsigned w[8] = {raw[i][0].x, raw[i][0].y, raw[i][0].z, raw[i][0].w,
                             raw[i][1].x, raw[i][1].y, raw[i][1].z, raw[i][1].w};
      unsigned v[6], u[5], out[4];
#pragma unroll
      for (int j = 0; j < 6; ++j) v[j] = (shift & 4) ? w[j + 2] : w[j];
#pragma unroll
      for (int j = 0; j < 5; ++j) u[j] = (shift & 2) ? v[j + 1] : v[j];
      const int half = (shift & 1) * 16;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const unsigned long long pair = (static_cast<unsigned long long>(u[j + 1]) << 32) | u[j];
        out[j] = static_cast<unsigned>(pair >> half);
        // past the matrix edge: zeros (the loaded vectors hold whatever follows there)
        if (2 * j >= inside) {
          out[j] = 0;
        } else if (2 * j + 1 >= inside) {
          out[j] &= 0xffffu;
        }
      }
      *reinterpret_cast<uint4*>(shared + cursor.shared_offset(i, kStride)) = make_uint4(out[0], out[1], out[2], out[3]);
    }
  }
};

// How the kernel loads an operand's tiles (TensorCoreOperands' load_a / load_b).
template <typename T, bool kKContiguous, int kLoad, int kRows, int kStride>
using TileLoader = std::conditional_t<
    kLoad == kLoadAsync,
    AsyncTileLoader<T, kKContiguous ? kRows : kBlockK, kKContiguous ? kBlockK : kRows, kStride, kKContiguous>,
    std::conditional_t<
        kLoad == kLoadRealigned,
        RealignedTileLoader<T, kKContiguous ? kRows : kBlockK, kKContiguous ? kBlockK : kRows, kStride, kKContiguous>,
        ElementTileLoader<T, kKContiguous ? kRows : kBlockK, kKContiguous ? kBlockK : kRows, kStride, kKContiguous>>>;

// K indices left from k0 on, capped (a tile only needs to know whether more than its 32 are left).
__device__ __forceinline__ int k_left_at(std::int64_t K, std::int64_t k0) {
  const std::int64_t left = K - k0;
  return left < (1 << 20) ? static_cast<int>(left) : (1 << 20);
}

// Block index -> output tile: groups of kRasterGroup tile rows, walked column by column.
struct TileRaster {
  int tiles_m, tiles_n;
  __device__ __forceinline__ void tile(int linear, int& tile_m, int& tile_n) const {
    const int per_group = kRasterGroup * tiles_n;
    const int group = linear / per_group;
    const int first_m = group * kRasterGroup;
    const int rows = tiles_m - first_m < kRasterGroup ? tiles_m - first_m : kRasterGroup;
    const int within = linear - group * per_group;
    tile_m = first_m + within % rows;
    tile_n = within / rows;
  }
};

// ------------------------------------------------------------------------------------------------
template <typename T, bool kAKContiguous, bool kBKContiguous, int kALoad, int kBLoad>
__global__ void __launch_bounds__(kThreads, 1)
    tensor_core_gemm_kernel(GemmArgs args, SplitK split, TileRaster raster, int stages) {
#if (defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800) || defined(ADCUDA_EMULATION)
  using ALayout = StageLayout<kAKContiguous, kBlockM>;
  using BLayout = StageLayout<kBKContiguous, kBlockN>;
  extern __shared__ __align__(16) unsigned char shared_bytes[];
  T* const a_shared = reinterpret_cast<T*>(shared_bytes);
  T* const b_shared = a_shared + stages * ALayout::kElements;

  const std::int64_t M = args.M, N = args.N, K = args.K;
  int tile_m, tile_n;
  raster.tile(static_cast<int>(blockIdx.x), tile_m, tile_n);
  const std::int64_t m0 = static_cast<std::int64_t>(tile_m) * kBlockM;
  const std::int64_t n0 = static_cast<std::int64_t>(tile_n) * kBlockN;
  const int all_k_tiles = static_cast<int>((K + kBlockK - 1) / kBlockK);
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  const int warp_m = (warp / kWarpsN) * kWarpM;
  const int warp_n = (warp % kWarpsN) * kWarpN;

  // ldmatrix.x4: lane supplies row (lane % 8) of 8x8 matrix (lane / 8). A's matrices are (m 0-7, k 0-7),
  // (m 8-15, k 0-7), (m 0-7, k 8-15), (m 8-15, k 8-15) of a 16x16 tile; B's are (n 0-7, k 0-7),
  // (n 0-7, k 8-15), (n 8-15, k 0-7), (n 8-15, k 8-15) of two n8 tiles. The lane's element offsets in
  // a stage for the warp's first tile at k-step 0, and the moves to the next tile and k-step:
  const int matrix = lane / 8, matrix_row = lane % 8;
  const int a_m = warp_m + (matrix & 1) * 8, a_k = (matrix >> 1) * 8;
  const int b_n = warp_n + (matrix >> 1) * 8, b_k = (matrix & 1) * 8;
  const int a_offset = kAKContiguous ? (a_m + matrix_row) * ALayout::kStride + a_k
                                     : (a_k + matrix_row) * ALayout::kStride + a_m;
  const int b_offset = kBKContiguous ? (b_n + matrix_row) * BLayout::kStride + b_k
                                     : (b_k + matrix_row) * BLayout::kStride + b_n;
  constexpr int kATileStep = kAKContiguous ? 16 * ALayout::kStride : 16;
  constexpr int kAKStep = kAKContiguous ? 16 : 16 * ALayout::kStride;
  constexpr int kBTileStep = kBKContiguous ? 16 * BLayout::kStride : 16;
  constexpr int kBKStep = kBKContiguous ? 16 : 16 * BLayout::kStride;

  const std::int64_t work = args.batch * split.splits;
  for (std::int64_t w = blockIdx.z; w < work; w += gridDim.z) {
    const std::int64_t z = w / split.splits;
    const int part = static_cast<int>(w % split.splits);
    std::int64_t offsets[2];
    args.batch_offsets.offsets(z, offsets);
    const int k_tile_begin = part * split.k_tiles_per_split;
    const int k_tiles = all_k_tiles - k_tile_begin < split.k_tiles_per_split ? all_k_tiles - k_tile_begin
                                                                               : split.k_tiles_per_split;
    const std::int64_t k_begin = static_cast<std::int64_t>(k_tile_begin) * kBlockK;

    TileLoader<T, kAKContiguous, kALoad, kBlockM, ALayout::kStride> a_loader(
        static_cast<const T*>(args.a) + offsets[0], m0, M, args.a_stride_m, args.a_stride_k, k_begin);
    TileLoader<T, kBKContiguous, kBLoad, kBlockN, BLayout::kStride> b_loader(
        static_cast<const T*>(args.b) + offsets[1], n0, N, args.b_stride_n, args.b_stride_k, k_begin);

    float acc[kMmaTilesM][kMmaTilesN][4];
#pragma unroll
    for (int mi = 0; mi < kMmaTilesM; ++mi) {
#pragma unroll
      for (int ni = 0; ni < kMmaTilesN; ++ni) {
#pragma unroll
        for (int r = 0; r < 4; ++r) acc[mi][ni][r] = 0.0f;
      }
    }
    // Register double-buffering of the fragments (k-step s + 1's ldmatrix in flight during k-step s's
    // mma) where both operands come by cp.async; the register loaders' staging registers take that
    // room in the other variants, which load each k-step's fragments just before its mma.
    constexpr int kFragmentBuffers = kALoad == kLoadAsync && kBLoad == kLoadAsync ? 2 : 1;
    unsigned a_frag[kFragmentBuffers][kMmaTilesM][4];
    unsigned b_frag[kFragmentBuffers][kMmaTilesN][2];
    auto load_fragments = [&](int buffer, const T* a_stage, const T* b_stage, int ks) {
#pragma unroll
      for (int nj = 0; nj < kMmaTilesN; nj += 2) {
        unsigned r[4];
        ldmatrix_x4<!kBKContiguous>(r, b_stage + b_offset + (nj / 2) * kBTileStep + ks * kBKStep);
        b_frag[buffer][nj][0] = r[0];
        b_frag[buffer][nj][1] = r[1];
        b_frag[buffer][nj + 1][0] = r[2];
        b_frag[buffer][nj + 1][1] = r[3];
      }
#pragma unroll
      for (int mi = 0; mi < kMmaTilesM; ++mi) {
        ldmatrix_x4<!kAKContiguous>(a_frag[buffer][mi], a_stage + a_offset + mi * kATileStep + ks * kAKStep);
      }
    };

    // Every stage slot commits one cp.async group (possibly empty), so "all but the newest stages - 2
    // groups done" always means "the tile about to be read has landed".
    for (int s = 0; s < stages - 1; ++s) {
      if (s < k_tiles) {
        const int k_left = k_left_at(K, k_begin + static_cast<std::int64_t>(s) * kBlockK);
        a_loader.begin(a_shared + s * ALayout::kElements, k_left);
        b_loader.begin(b_shared + s * BLayout::kElements, k_left);
        a_loader.finish(a_shared + s * ALayout::kElements);
        b_loader.finish(b_shared + s * BLayout::kElements);
      }
      cp_async_commit();
    }
    cp_async_wait_stages(stages);
    __syncthreads();

    int read_stage = 0;
    int write_stage = stages - 1;
    if constexpr (kFragmentBuffers == 2) load_fragments(0, a_shared, b_shared, 0);
#pragma unroll 1
    for (int kt = 0; kt < k_tiles; ++kt) {
      const bool load_next = kt + stages - 1 < k_tiles;
      T* const a_write = a_shared + write_stage * ALayout::kElements;
      T* const b_write = b_shared + write_stage * BLayout::kElements;
#pragma unroll
      for (int ks = 0; ks < kKSteps; ++ks) {
        const int buffer = kFragmentBuffers == 2 ? ks % 2 : 0;
        if constexpr (kFragmentBuffers == 1) {
          load_fragments(0, a_shared + read_stage * ALayout::kElements, b_shared + read_stage * BLayout::kElements, ks);
        }
        if (ks == 0) {
          if (load_next) {
            const int k_left = k_left_at(K, k_begin + static_cast<std::int64_t>(kt + stages - 1) * kBlockK);
            a_loader.begin(a_write, k_left);
            b_loader.begin(b_write, k_left);
          }
          cp_async_commit();
        }
        if (ks == kKSteps - 1) {
          // Tile kt + 1 must have landed and every warp be done with tile kt - 1's stage (read last in
          // iteration kt - 1), which this iteration refills; then its first fragments can be loaded.
          if (load_next) {
            a_loader.finish(a_write);
            b_loader.finish(b_write);
          }
          cp_async_wait_stages(stages);
          __syncthreads();
          read_stage = read_stage + 1 == stages ? 0 : read_stage + 1;
          if constexpr (kFragmentBuffers == 2) {
            load_fragments(1 - buffer, a_shared + read_stage * ALayout::kElements,
                           b_shared + read_stage * BLayout::kElements, 0);
          }
        } else if constexpr (kFragmentBuffers == 2) {
          load_fragments(1 - buffer, a_shared + read_stage * ALayout::kElements,
                         b_shared + read_stage * BLayout::kElements, ks + 1);
        }
#pragma unroll
        for (int mi = 0; mi < kMmaTilesM; ++mi) {
#pragma unroll
          for (int ni = 0; ni < kMmaTilesN; ++ni) {
            mma_16816<T>(acc[mi][ni], a_frag[buffer][mi], b_frag[buffer][ni][0], b_frag[buffer][ni][1]);
          }
        }
      }
      write_stage = write_stage + 1 == stages ? 0 : write_stage + 1;
    }
    // Drain the (empty) trailing groups and let every warp finish reading before the epilogue reuses
    // the pipeline's shared memory.
    cp_async_wait<0>();
    __syncthreads();

    // Accumulator r of tile (mi, ni): row group + 8 * (r / 2), column 2 * (lane % 4) + r % 2.
    const int group = lane / 4;
    const int pair = (lane % 4) * 2;
    if (split.splits > 1) {
      // fp32 partial sums, two columns per store (the rows are padded to a multiple of 4 floats).
      float* partial = split.partial + (static_cast<std::int64_t>(part) * args.batch + z) * M * split.partial_stride;
#pragma unroll
      for (int mi = 0; mi < kMmaTilesM; ++mi) {
#pragma unroll
        for (int half_row = 0; half_row < 2; ++half_row) {
          const std::int64_t m = m0 + warp_m + mi * 16 + group + half_row * 8;
          if (m >= M) continue;
#pragma unroll
          for (int ni = 0; ni < kMmaTilesN; ++ni) {
            const std::int64_t n = n0 + warp_n + ni * 8 + pair;
            if (n >= N) continue;
            *reinterpret_cast<float2*>(partial + m * split.partial_stride + n) =
                make_float2(acc[mi][ni][half_row * 2], acc[mi][ni][half_row * 2 + 1]);
          }
        }
      }
    } else {
      float bias[kMmaTilesN][2];
#pragma unroll
      for (int ni = 0; ni < kMmaTilesN; ++ni) {
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const std::int64_t n = n0 + warp_n + ni * 8 + pair + e;
          bias[ni][e] = n < N ? bias_at<T>(args, n) : 0.0f;
        }
      }
      T* const staged = reinterpret_cast<T*>(shared_bytes) + warp * kWarpM * kEpilogueStride;
      // The warp's tile, with or without the activation, through shared memory into `out` (batch
      // entry z) as 16-byte stores. Where the output rows are not 16-byte aligned (N not a multiple
      // of 8: a 50257-wide language-model head), each row is staged `shift` elements to the right,
      // its misalignment, so that the staged row's 16-byte vectors are the aligned 16-byte blocks of
      // its global row: the lanes store those vectors whole and only the one or two blocks at the row
      // ends element by element. Rows 8 apart share their shift (8 * N elements is a whole number of
      // blocks), so a lane's rows, all `group` modulo 8, have one.
      auto write_tile = [&](bool activate, T* out) {
        out += z * M * N;
        const T* const warp_origin = out + (m0 + warp_m) * N + n0 + warp_n;
        const int origin_shift = static_cast<int>((reinterpret_cast<std::uintptr_t>(warp_origin) / sizeof(T)) & 7);
        const int row_shift_step = static_cast<int>(N & 7);
        const int lane_shift = (origin_shift + group * row_shift_step) & 7;
#pragma unroll
        for (int mi = 0; mi < kMmaTilesM; ++mi) {
#pragma unroll
          for (int half_row = 0; half_row < 2; ++half_row) {
#pragma unroll
            for (int ni = 0; ni < kMmaTilesN; ++ni) {
              float v0 = acc[mi][ni][half_row * 2] + bias[ni][0];
              float v1 = acc[mi][ni][half_row * 2 + 1] + bias[ni][1];
              if (activate) {
                v0 = apply_activation(args.activation, v0);
                v1 = apply_activation(args.activation, v1);
              }
              T* dst = staged + (mi * 16 + group + half_row * 8) * kEpilogueStride + lane_shift + ni * 8 + pair;
              dst[0] = convert<T>(v0);
              dst[1] = convert<T>(v1);
            }
          }
        }
        __syncwarp();
        constexpr int kVectorsPerRow = kWarpN / 8;
        constexpr int kRowsPerStep = 32 / kVectorsPerRow;
        const int vector = lane % kVectorsPerRow;
        const std::int64_t columns_left = N - (n0 + warp_n);  // of the warp's 64 columns, those inside
#pragma unroll 4
        for (int row = lane / kVectorsPerRow; row < kWarpM; row += kRowsPerStep) {
          const std::int64_t m = m0 + warp_m + row;
          if (m >= M || columns_left <= 0) continue;
          const int shift = (origin_shift + (row & 7) * row_shift_step) & 7;
          // staged elements [8 * vector, 8 * vector + 8) are the row's columns from `first` on
          const int first = vector * 8 - shift;
          const T* src = staged + row * kEpilogueStride + vector * 8;
          T* const dst = out + m * N + n0 + warp_n;
          if (first >= 0 && first + 8 <= columns_left) {
            *reinterpret_cast<uint4*>(dst + first) = *reinterpret_cast<const uint4*>(src);
          } else {
            for (int e = 0; e < 8; ++e) {
              if (first + e >= 0 && first + e < columns_left) dst[first + e] = src[e];
            }
          }
          // the block past the staged row's 8 vectors: its last `shift` columns
          if (vector == 0) {
            for (int e = 0; e < shift; ++e) {
              const int column = kWarpN - shift + e;
              if (column < columns_left) dst[column] = src[kWarpN + e];
            }
          }
        }
        __syncwarp();
      };
      write_tile(true, static_cast<T*>(args.c));
      if (args.preactivation != nullptr) write_tile(false, static_cast<T*>(args.preactivation));
    }
    // The next batch entry's prologue refills the shared memory the epilogue used.
    __syncthreads();
  }
#else
  // Built without sm_80 code for this device: launch_tensor_core_gemm checks for that before it
  // launches, so reaching here is a bug; fail loudly instead of returning uninitialised memory.
  __trap();
#endif
}

template <typename T, bool kAKContiguous, bool kBKContiguous, int kALoad, int kBLoad>
void launch_instance(const GemmArgs& args, const SplitK& split, int device, cudaStream_t stream) {
  constexpr int per_stage = stage_bytes<kAKContiguous, kBKContiguous>();
  const DeviceFacts facts = device_facts(device);
  const int stages = kMaxStages * per_stage <= facts.max_shared_per_block ? kMaxStages : kMinStages;
  const int bytes = stages * per_stage;
  if (bytes > facts.max_shared_per_block) {
    throw std::runtime_error("matmul: the tensor-core GEMM needs " + std::to_string(bytes) +
                             " bytes of shared memory per block; device " + std::to_string(device) + " has " +
                             std::to_string(facts.max_shared_per_block));
  }
  auto kernel = tensor_core_gemm_kernel<T, kAKContiguous, kBKContiguous, kALoad, kBLoad>;
  allow_shared_bytes(kernel, bytes, device);
  TileRaster raster{static_cast<int>((args.M + kBlockM - 1) / kBlockM), static_cast<int>((args.N + kBlockN - 1) / kBlockN)};
  const std::int64_t work = args.batch * split.splits;
  const dim3 grid(static_cast<unsigned>(raster.tiles_m * raster.tiles_n), 1,
                  static_cast<unsigned>(work < 65535 ? work : 65535));
  kernel<<<grid, kThreads, bytes, stream>>>(args, split, raster, stages);
}

// The load variants built: B by cp.async, A by cp.async, realigned vectors (the language-model
// head's backward GEMMs: a 50257-wide gradient) or elements (no unit stride). gemm.cu copies a B
// that cp.async cannot read into an aligned buffer first, so B always comes by cp.async (its other
// variants would be 16 more kernels to compile for a rare case).
template <typename T, bool kAKContiguous, bool kBKContiguous>
void launch_layout(const GemmArgs& args, const SplitK& split, const TensorCoreOperands& operands, int device,
                   cudaStream_t stream) {
  if (operands.b_load != kLoadAsync) {
    throw std::logic_error("matmul: the tensor-core GEMM was given a B it cannot read by cp.async (gemm.cu stages it)");
  }
  switch (operands.a_load) {
    case kLoadAsync:
      return launch_instance<T, kAKContiguous, kBKContiguous, kLoadAsync, kLoadAsync>(args, split, device, stream);
    case kLoadRealigned:
      return launch_instance<T, kAKContiguous, kBKContiguous, kLoadRealigned, kLoadAsync>(args, split, device, stream);
    case kLoadElements:
      return launch_instance<T, kAKContiguous, kBKContiguous, kLoadElements, kLoadAsync>(args, split, device, stream);
  }
}

}  // namespace

TensorCoreTiles tensor_core_tiles() { return {kBlockM, kBlockN, kBlockK}; }

bool tensor_core_gemm_runs_on(int device) {
  static std::mutex mutex;
  static std::map<int, bool> known;
  std::lock_guard<std::mutex> lock(mutex);
  auto found = known.find(device);
  if (found != known.end()) return found->second;
  // The virtual architecture the code loaded for this device was compiled for: below 80 (an sm_75
  // build, or its PTX JIT-compiled for a newer GPU) the kernel body is empty.
  int previous = 0;
  ADCUDA_CHECK(cudaGetDevice(&previous));
  ADCUDA_CHECK(cudaSetDevice(device));
  cudaFuncAttributes attributes{};
  const cudaError_t status =
      cudaFuncGetAttributes(&attributes, tensor_core_gemm_kernel<__half, true, true, kLoadAsync, kLoadAsync>);
  ADCUDA_CHECK(cudaSetDevice(previous));
  ADCUDA_CHECK(status);
  return known[device] = attributes.ptxVersion >= 80;
}

template <typename T>
void launch_tensor_core_gemm(const GemmArgs& args, const SplitK& split, const TensorCoreOperands& operands,
                             int device, cudaStream_t stream) {
  if (operands.a_k_contiguous) {
    operands.b_k_contiguous ? launch_layout<T, true, true>(args, split, operands, device, stream)
                            : launch_layout<T, true, false>(args, split, operands, device, stream);
  } else {
    operands.b_k_contiguous ? launch_layout<T, false, true>(args, split, operands, device, stream)
                            : launch_layout<T, false, false>(args, split, operands, device, stream);
  }
}

template void launch_tensor_core_gemm<__half>(const GemmArgs&, const SplitK&, const TensorCoreOperands&, int,
                                              cudaStream_t);
template void launch_tensor_core_gemm<__nv_bfloat16>(const GemmArgs&, const SplitK&, const TensorCoreOperands&, int,
                                                     cudaStream_t);

}  // namespace adcuda
