// Standalone check of kernels/emulator/ptx_sm80_semantics.h: no emulator core, no GPU.
// Build: g++ -std=c++17 -I<cuda>/include -I kernels tests/emulator/test_ptx_sm80.cpp; exit status 0 = pass.
//
// The header follows the PTX ISA's formulas; this test packs and unpacks operands with a second source
// for the same layouts, CuTe's (thread, value) layouts from CUTLASS:
//   MMA_Traits<SM80_16x8x16_F16F16F16F16_TN> (cute/atom/mma_traits_sm80.hpp; the F32-accumulating fp16
//   and bf16 traits inherit it) and Copy_Traits<SM75_U32x4_LDSM_N> / <SM75_U16x8_LDSM_T>
//   (cute/atom/copy_traits_sm75.hpp),
// and checks values with the CUDA headers' own fp16/bf16 conversions and a plain triple loop.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <random>
#include <stdexcept>
#include <vector>

#include "check.h"
#include "emulator/ptx_sm80_semantics.h"

namespace emu = adcuda::emu;

namespace {

using standalone_check::check;
using standalone_check::throws_invalid_argument;

// ------------------------------------------------------------------------------------------------
// CuTe layouts: (lane, value) -> offset into a column-major tile; lane = t0 + 4 * t1.

struct Coord {
  int row, col;
};

// ALayout ((4,8),(2,2,2)) : ((32,1),(16,8,128)) over M16 x K16 -> (m, k)
Coord cute_a(int lane, int v) {
  const int offset = 32 * (lane % 4) + (lane / 4) + 16 * (v % 2) + 8 * ((v / 2) % 2) + 128 * (v / 4);
  return {offset % 16, offset / 16};
}

// BLayout ((4,8),(2,2)) : ((16,1),(8,64)) over N8 x K16 -> (k, n)
Coord cute_b(int lane, int v) {
  const int offset = 16 * (lane % 4) + (lane / 4) + 8 * (v % 2) + 64 * (v / 2);
  return {offset / 8, offset % 8};
}

// CLayout SM80_16x8_Row ((4,8),(2,2)) : ((32,1),(16,8)) over M16 x N8 -> (m, n)
Coord cute_c(int lane, int v) {
  const int offset = 32 * (lane % 4) + (lane / 4) + 16 * (v % 2) + 8 * (v / 2);
  return {offset % 16, offset / 16};
}

// A b16 element of the four row-major 8x8 matrices ldmatrix reads, by its first bit in CuTe's
// reference layout (1024 bits per matrix, 128 per row).
struct MatrixElement {
  int matrix, row, col;
};

MatrixElement element_at_bit(int bit) { return {bit / 1024, (bit % 1024) / 128, (bit % 128) / 16}; }

// SM75_U32x4_LDSM_N DstLayout (32,(32,4)) : (32,(1,1024)); half h of register r starts at bit 16 h.
MatrixElement cute_ldsm_n(int lane, int reg, int half) { return element_at_bit(32 * lane + 16 * half + 1024 * reg); }

// SM75_U16x8_LDSM_T DstLayout ((4,8),(16,2,4)) : ((256,16),(1,128,1024)); value modes (bit, half, reg).
MatrixElement cute_ldsm_t(int lane, int reg, int half) {
  return element_at_bit(256 * (lane % 4) + 16 * (lane / 4) + 128 * half + 1024 * reg);
}

// ------------------------------------------------------------------------------------------------
// Fragment coordinates: the PTX formulas (header) against CuTe, and each a bijection onto the tile.

void test_fragment_coordinates() {
  int a_seen[16][16] = {}, b_seen[16][8] = {}, c_seen[16][8] = {};
  for (int lane = 0; lane < 32; ++lane) {
    for (int i = 0; i < 8; ++i) {
      const emu::FragmentCoord p = emu::mma_a_coord(lane, i);
      const Coord q = cute_a(lane, i);
      check(p.row == q.row && p.col == q.col, "A fragment: PTX formula vs CuTe", lane, i);
      ++a_seen[p.row][p.col];
    }
    for (int i = 0; i < 4; ++i) {
      const emu::FragmentCoord p = emu::mma_b_coord(lane, i);
      const Coord q = cute_b(lane, i);
      check(p.row == q.row && p.col == q.col, "B fragment: PTX formula vs CuTe", lane, i);
      ++b_seen[p.row][p.col];
      const emu::FragmentCoord pc = emu::mma_c_coord(lane, i);
      const Coord qc = cute_c(lane, i);
      check(pc.row == qc.row && pc.col == qc.col, "C fragment: PTX formula vs CuTe", lane, i);
      ++c_seen[pc.row][pc.col];
    }
  }
  for (int r = 0; r < 16; ++r) {
    for (int c = 0; c < 16; ++c) check(a_seen[r][c] == 1, "A element held by exactly one lane", r, c);
    for (int c = 0; c < 8; ++c) {
      check(b_seen[r][c] == 1, "B element held by exactly one lane", r, c);
      check(c_seen[r][c] == 1, "C element held by exactly one lane", r, c);
    }
  }
  // Spot values straight from the PTX text: lane 31 is groupID 7, threadID_in_group 3.
  check(emu::mma_a_coord(31, 0).row == 7 && emu::mma_a_coord(31, 0).col == 6, "a0 of lane 31");
  check(emu::mma_a_coord(31, 3).row == 15 && emu::mma_a_coord(31, 3).col == 7, "a3 of lane 31");
  check(emu::mma_a_coord(31, 4).row == 7 && emu::mma_a_coord(31, 4).col == 14, "a4 of lane 31");
  check(emu::mma_b_coord(31, 2).row == 14 && emu::mma_b_coord(31, 2).col == 7, "b2 of lane 31");
  check(emu::mma_c_coord(31, 3).row == 15 && emu::mma_c_coord(31, 3).col == 7, "c3 of lane 31");
}

// ------------------------------------------------------------------------------------------------
// Random 16-bit operands, through the CUDA headers' conversions.

struct Operand {
  std::uint16_t bits;
  float value;
};

Operand to_operand(emu::MmaInputType type, float x) {
  if (type == emu::MmaInputType::kF16) {
    const __half h = __float2half_rn(x);
    return {__half_as_ushort(h), __half2float(h)};
  }
  const __nv_bfloat16 h = __float2bfloat16_rn(x);
  return {__bfloat16_as_ushort(h), __bfloat162float(h)};
}

Operand random_operand(emu::MmaInputType type, std::mt19937& rng) {
  std::uniform_real_distribution<float> uniform(-4.0f, 4.0f);
  std::uniform_int_distribution<int> pick(0, 15);
  const int kind = pick(rng);
  if (kind == 0) return to_operand(type, -0.0f);
  if (kind == 1) return to_operand(type, uniform(rng) * 1e-6f);  // fp16: subnormal
  if (kind == 2) return to_operand(type, uniform(rng) * 1e4f);
  return to_operand(type, uniform(rng));
}

bool same_float(float x, float y) { return std::memcmp(&x, &y, sizeof x) == 0; }

// D = C + sum over ascending k of A[m][k] * B[k][n], in fp32.
template <int kN>
void reference_product(const Operand (&a)[16][16], const Operand (&b)[16][kN], const float (&c)[16][kN],
                       float (&d)[16][kN]) {
  for (int m = 0; m < 16; ++m) {
    for (int n = 0; n < kN; ++n) {
      float sum = c[m][n];
      for (int k = 0; k < 16; ++k) sum += a[m][k].value * b[k][n].value;
      d[m][n] = sum;
    }
  }
}

void test_mma(emu::MmaInputType type, std::mt19937& rng) {
  std::uniform_real_distribution<float> uniform(-8.0f, 8.0f);
  for (int trial = 0; trial < 20; ++trial) {
    Operand a[16][16], b[16][8];
    float c[16][8], expected[16][8];
    for (auto& row : a)
      for (auto& x : row) x = random_operand(type, rng);
    for (auto& row : b)
      for (auto& x : row) x = random_operand(type, rng);
    for (auto& row : c)
      for (auto& x : row) x = uniform(rng);
    reference_product(a, b, c, expected);

    emu::MmaLaneInput in[32] = {};
    for (int lane = 0; lane < 32; ++lane) {
      for (int v = 0; v < 8; ++v) {
        const Coord at = cute_a(lane, v);
        in[lane].a[v / 2] |= static_cast<std::uint32_t>(a[at.row][at.col].bits) << (16 * (v % 2));
      }
      for (int v = 0; v < 4; ++v) {
        const Coord bt = cute_b(lane, v);
        in[lane].b[v / 2] |= static_cast<std::uint32_t>(b[bt.row][bt.col].bits) << (16 * (v % 2));
        const Coord ct = cute_c(lane, v);
        in[lane].c[v] = c[ct.row][ct.col];
      }
    }
    float d[32][4];
    emu::mma_m16n8k16_lanes(type, in, d);
    for (int lane = 0; lane < 32; ++lane) {
      for (int v = 0; v < 4; ++v) {
        const Coord at = cute_c(lane, v);
        check(same_float(d[lane][v], expected[at.row][at.col]), "mma D element", static_cast<int>(type), lane, v);
      }
    }
  }
}

void test_input_conversion() {
  // Every finite fp16 and bf16 bit pattern widens exactly as the CUDA headers widen it.
  for (std::uint32_t bits = 0; bits <= 0xffff; ++bits) {
    const auto b16 = static_cast<std::uint16_t>(bits);
    const float f16 = __half2float(__ushort_as_half(b16));
    const float bf16 = __bfloat162float(__ushort_as_bfloat16(b16));
    if (!std::isnan(f16)) check(same_float(emu::f16_bits_to_float(b16), f16), "fp16 widening", int(bits));
    if (!std::isnan(bf16)) check(same_float(emu::bf16_bits_to_float(b16), bf16), "bf16 widening", int(bits));
  }
}

// ------------------------------------------------------------------------------------------------
// ldmatrix against CuTe's LDSM layouts, with the 32 rows scattered over a pool in random order.

void test_ldmatrix(std::mt19937& rng) {
  alignas(16) std::uint16_t pool[64][8];
  std::uniform_int_distribution<int> value(0, 0xffff);
  for (auto& row : pool)
    for (auto& x : row) x = static_cast<std::uint16_t>(value(rng));
  std::vector<int> slot(64);
  std::iota(slot.begin(), slot.end(), 0);
  std::shuffle(slot.begin(), slot.end(), rng);
  const void* rows[32];
  for (int lane = 0; lane < 32; ++lane) rows[lane] = pool[slot[lane]];  // SrcLayout: row lane % 8 of matrix lane / 8

  for (const bool trans : {false, true}) {
    std::uint32_t r[32][4];
    emu::ldmatrix_x4_lanes(rows, trans, r);
    for (int lane = 0; lane < 32; ++lane) {
      for (int reg = 0; reg < 4; ++reg) {
        for (int half = 0; half < 2; ++half) {
          const MatrixElement e = trans ? cute_ldsm_t(lane, reg, half) : cute_ldsm_n(lane, reg, half);
          const std::uint16_t want = pool[slot[8 * e.matrix + e.row]][e.col];
          const auto got = static_cast<std::uint16_t>(r[lane][reg] >> (16 * half));
          check(got == want, trans ? "ldmatrix.trans element" : "ldmatrix element", lane, reg, half);
        }
      }
    }
  }

  rows[9] = reinterpret_cast<const unsigned char*>(pool[3]) + 2;
  bool threw = false;
  try {
    std::uint32_t r[32][4];
    emu::ldmatrix_x4_lanes(rows, false, r);
  } catch (const std::invalid_argument&) {
    threw = true;
  }
  check(threw, "ldmatrix rejects a row address that is not 16-byte aligned");
}

// ------------------------------------------------------------------------------------------------
// The ldmatrix -> mma path with operands stored either way round in padded shared tiles and loaded
// plain or .trans, in the matrix order gemm.cu documents: A's four matrices (m 0-7, k 0-7),
// (m 8-15, k 0-7), (m 0-7, k 8-15), (m 8-15, k 8-15); B's (n-tile 0, k 0-7), (0, k 8-15),
// (1, k 0-7), (1, k 8-15), registers 0-1 feeding n-tile 0's mma and 2-3 n-tile 1's.

constexpr int kPaddedStride = 24;  // 48-byte rows: every ldmatrix row stays 16-byte aligned

void test_ldmatrix_feeds_mma(emu::MmaInputType type, bool a_trans, bool b_trans, std::mt19937& rng) {
  Operand a[16][16], b[16][16];
  float c[16][16], expected[16][16];
  std::uniform_real_distribution<float> uniform(-8.0f, 8.0f);
  for (auto& row : a)
    for (auto& x : row) x = random_operand(type, rng);
  for (auto& row : b)
    for (auto& x : row) x = random_operand(type, rng);
  for (auto& row : c)
    for (auto& x : row) x = uniform(rng);
  reference_product(a, b, c, expected);

  // A as [m][k] (K contiguous) or [k][m]; B as [n][k] (K contiguous) or [k][n].
  alignas(16) std::uint16_t a_tile[16][kPaddedStride] = {};
  alignas(16) std::uint16_t b_tile[16][kPaddedStride] = {};
  for (int i = 0; i < 16; ++i) {
    for (int j = 0; j < 16; ++j) {
      (a_trans ? a_tile[j][i] : a_tile[i][j]) = a[i][j].bits;  // a[m][k]
      (b_trans ? b_tile[i][j] : b_tile[j][i]) = b[i][j].bits;  // b[k][n]
    }
  }
  const void* a_rows[32];
  const void* b_rows[32];
  for (int lane = 0; lane < 32; ++lane) {
    const int matrix = lane / 8, row = lane % 8;
    const int a_m = (matrix & 1) * 8, a_k = (matrix >> 1) * 8;
    a_rows[lane] = a_trans ? &a_tile[a_k + row][a_m] : &a_tile[a_m + row][a_k];
    const int b_n = (matrix >> 1) * 8, b_k = (matrix & 1) * 8;
    b_rows[lane] = b_trans ? &b_tile[b_k + row][b_n] : &b_tile[b_n + row][b_k];
  }
  std::uint32_t a_regs[32][4], b_regs[32][4];
  emu::ldmatrix_x4_lanes(a_rows, a_trans, a_regs);
  emu::ldmatrix_x4_lanes(b_rows, b_trans, b_regs);

  for (int n_tile = 0; n_tile < 2; ++n_tile) {
    emu::MmaLaneInput in[32];
    for (int lane = 0; lane < 32; ++lane) {
      for (int i = 0; i < 4; ++i) in[lane].a[i] = a_regs[lane][i];
      in[lane].b[0] = b_regs[lane][2 * n_tile];
      in[lane].b[1] = b_regs[lane][2 * n_tile + 1];
      for (int v = 0; v < 4; ++v) {
        const Coord at = cute_c(lane, v);
        in[lane].c[v] = c[at.row][8 * n_tile + at.col];
      }
    }
    float d[32][4];
    emu::mma_m16n8k16_lanes(type, in, d);
    for (int lane = 0; lane < 32; ++lane) {
      for (int v = 0; v < 4; ++v) {
        const Coord at = cute_c(lane, v);
        check(same_float(d[lane][v], expected[at.row][8 * n_tile + at.col]), "ldmatrix -> mma product",
              static_cast<int>(a_trans) * 2 + static_cast<int>(b_trans), lane, n_tile * 4 + v);
      }
    }
  }
}

// ------------------------------------------------------------------------------------------------
// cp.async groups over a state shaped like the emulator core's AsyncCopyState.

struct Copy {
  void* dst;
  const void* src;
  int bytes;
  int src_bytes;
};

struct CopyState {
  std::vector<Copy> open;
  std::vector<std::vector<Copy>> committed;
};

bool filled_with(const unsigned char* p, int n, unsigned char value) {
  return std::all_of(p, p + n, [value](unsigned char x) { return x == value; });
}

void test_cp_async_groups() {
  alignas(16) unsigned char src[3][16];
  alignas(16) unsigned char dst[5][16];
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 16; ++j) src[i][j] = static_cast<unsigned char>(1 + 16 * i + j);
  std::memset(dst, 0xAA, sizeof dst);

  CopyState state;
  state.open.push_back(emu::make_async_copy_16<Copy>(dst[0], src[0], 16));
  emu::commit_async_group(state);  // G0
  state.open.push_back(emu::make_async_copy_16<Copy>(dst[1], src[1], 5));
  emu::commit_async_group(state);  // G1
  emu::commit_async_group(state);  // G2, empty
  state.open.push_back(emu::make_async_copy_16<Copy>(dst[2], nullptr, 0));
  state.open.push_back(emu::make_async_copy_16<Copy>(dst[4], src[0], 16));
  emu::commit_async_group(state);  // G3
  state.open.push_back(emu::make_async_copy_16<Copy>(dst[4], src[2], 8));
  emu::commit_async_group(state);  // G4: same destination as G3's second copy
  state.open.push_back(emu::make_async_copy_16<Copy>(dst[3], src[2], 16));  // left open
  check(filled_with(&dst[0][0], sizeof dst, 0xAA), "cp.async writes nothing before a wait");

  emu::wait_async_groups(state, 5);
  check(filled_with(&dst[0][0], sizeof dst, 0xAA), "wait_group 5 with 5 groups performs nothing");
  emu::wait_async_groups(state, 4);
  check(std::memcmp(dst[0], src[0], 16) == 0, "wait_group 4 performs the oldest group");
  check(filled_with(dst[1], 16, 0xAA), "wait_group 4 leaves the newer groups");
  check(state.committed.size() == 4, "wait_group 4 forgets the performed group");
  emu::wait_async_groups(state, 2);
  check(std::memcmp(dst[1], src[1], 5) == 0 && filled_with(dst[1] + 5, 11, 0),
        "src-size 5 copies 5 bytes and zero-fills 11");
  check(filled_with(dst[2], 16, 0xAA), "wait_group 2 leaves the newest two groups");
  emu::wait_async_groups(state, 0);
  check(filled_with(dst[2], 16, 0), "src-size 0 zero-fills without reading the source");
  check(std::memcmp(dst[4], src[2], 8) == 0 && filled_with(dst[4] + 8, 8, 0), "groups are performed oldest first");
  check(filled_with(dst[3], 16, 0xAA) && state.committed.empty() && state.open.size() == 1,
        "wait_group leaves uncommitted copies alone");
  emu::commit_async_group(state);
  emu::wait_async_groups(state, 0);
  check(std::memcmp(dst[3], src[2], 16) == 0 && state.open.empty(), "a later commit and wait perform it");

  check(throws_invalid_argument([&] { emu::make_async_copy_16<Copy>(dst[0], src[0], 17); }), "src-size 17 is rejected");
  check(throws_invalid_argument([&] { emu::make_async_copy_16<Copy>(dst[0], src[0], -1); }), "src-size -1 is rejected");
  check(throws_invalid_argument([&] { emu::make_async_copy_16<Copy>(dst[0] + 8, src[0], 16); }),
        "a misaligned destination is rejected");
  check(throws_invalid_argument([&] { emu::make_async_copy_16<Copy>(dst[0], src[0] + 4, 16); }),
        "a misaligned source is rejected");
}

// ------------------------------------------------------------------------------------------------
// ex2.approx.ftz.f32 against a plain loop in long double: within the PTX ISA's 2^-22 relative error over
// the normal range, and the ISA's special values.

void test_ex2_approx_ftz() {
  const float kMinNormal = 1.17549435e-38f;
  int checked = 0;
  for (float a = -126.0f; a <= 127.9f; a += 0.0371f, ++checked) {
    const long double want = std::exp2(static_cast<long double>(a));
    const float got = emu::ex2_approx_ftz_f32(a);
    check(std::fabs(static_cast<long double>(got) - want) <= want * std::ldexp(1.0L, -22), "ex2 relative error",
          static_cast<int>(a * 100));
  }
  check(checked > 6000, "ex2 sweep covered the normal range");
  check(same_float(emu::ex2_approx_ftz_f32(-INFINITY), 0.0f), "ex2(-inf) = +0");
  check(same_float(emu::ex2_approx_ftz_f32(INFINITY), INFINITY), "ex2(+inf) = +inf");
  check(std::isnan(emu::ex2_approx_ftz_f32(NAN)), "ex2(NaN) = NaN");
  check(same_float(emu::ex2_approx_ftz_f32(0.0f), 1.0f) && same_float(emu::ex2_approx_ftz_f32(-0.0f), 1.0f),
        "ex2(+-0) = 1");
  check(same_float(emu::ex2_approx_ftz_f32(kMinNormal / 4), 1.0f) &&
            same_float(emu::ex2_approx_ftz_f32(-kMinNormal / 4), 1.0f),
        "a subnormal input is flushed to zero: ex2 = 1");
  check(same_float(emu::ex2_approx_ftz_f32(-130.0f), 0.0f), "a subnormal result (2^-130) is flushed to +0");
  check(same_float(emu::ex2_approx_ftz_f32(-126.0f), kMinNormal), "2^-126 is the smallest normal, kept");
  check(same_float(emu::ex2_approx_ftz_f32(3.0f), 8.0f), "ex2(3) = 8 exactly");
}

}  // namespace

int main() {
  std::mt19937 rng(20240607);
  test_fragment_coordinates();
  test_input_conversion();
  for (const auto type : {emu::MmaInputType::kF16, emu::MmaInputType::kBF16}) {
    test_mma(type, rng);
    for (const bool a_trans : {false, true})
      for (const bool b_trans : {false, true}) test_ldmatrix_feeds_mma(type, a_trans, b_trans, rng);
  }
  test_ldmatrix(rng);
  test_cp_async_groups();
  test_ex2_approx_ftz();
  return standalone_check::verdict("ptx_sm80 semantics");
}
