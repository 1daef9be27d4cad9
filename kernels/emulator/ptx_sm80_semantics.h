// The sm_80 PTX instructions kernels/gemm.cu and kernels/attention_sm80.cuh use (mma.sync m16n8k16 with
// fp16/bf16 inputs and fp32 accumulators, ldmatrix .m8n8.x4{.trans}.b16, cp.async.cg 16 / commit_group /
// wait_group, ex2.approx.ftz.f32), as pure functions of what the lanes supply. No dependency on the emulator core, so that a plain C++ test can
// check them (tests/emulator/test_ptx_sm80.cpp); ptx_sm80.h wires them to the emulated warps.
//
// Every layout below is written from the PTX ISA, not from gemm.cu:
//  - "Matrix Fragments for mma.m16n8k16 with floating point type" (A, B, C/D fragment formulas);
//  - "Warp-level matrix load instruction: ldmatrix" (row addresses by lanes 0-7 / 8-15 / 16-23 /
//    24-31 for matrices 0..3; lane L receives row L/4, elements 2*(L%4) and +1 of each matrix, in the
//    destination register of that matrix; .trans loads the matrix in column-major form);
//  - cp.async / cp.async.commit_group / cp.async.wait_group;
//  - "Floating Point Instructions: ex2" (attention's block, at the end).
// Packed .b32 / .f16x2 registers hold the lower-indexed element in their low 16 bits.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <utility>

namespace adcuda::emu {

constexpr int kWarpSize = 32;

// ------------------------------------------------------------------------------------------------
// 16-bit floating point inputs, widened exactly to fp32.

enum class MmaInputType { kF16, kBF16 };

inline float f16_bits_to_float(std::uint16_t bits) {
  const bool negative = (bits & 0x8000u) != 0;
  const std::uint32_t exponent = (bits >> 10) & 0x1fu;
  const std::uint32_t mantissa = bits & 0x3ffu;
  std::uint32_t wide;
  if (exponent == 0) {
    // zero or subnormal: mantissa * 2^-24, exact in fp32
    const float magnitude = std::ldexp(static_cast<float>(mantissa), -24);
    return negative ? -magnitude : magnitude;
  }
  if (exponent == 0x1f) {
    wide = 0x7f800000u | (mantissa << 13);  // inf, or NaN keeping its payload
  } else {
    wide = ((exponent + (127 - 15)) << 23) | (mantissa << 13);
  }
  if (negative) wide |= 0x80000000u;
  float value;
  std::memcpy(&value, &wide, sizeof value);
  return value;
}

inline float bf16_bits_to_float(std::uint16_t bits) {
  const std::uint32_t wide = static_cast<std::uint32_t>(bits) << 16;
  float value;
  std::memcpy(&value, &wide, sizeof value);
  return value;
}

inline float input_to_float(MmaInputType type, std::uint16_t bits) {
  return type == MmaInputType::kF16 ? f16_bits_to_float(bits) : bf16_bits_to_float(bits);
}

// Element `half_index` (0 = low 16 bits, the lower-indexed element) of a packed register.
inline std::uint16_t packed_half(std::uint32_t reg, int half_index) {
  return static_cast<std::uint16_t>(reg >> (16 * half_index));
}

inline std::uint32_t pack_halves(std::uint16_t low, std::uint16_t high) {
  return static_cast<std::uint32_t>(low) | (static_cast<std::uint32_t>(high) << 16);
}

// ------------------------------------------------------------------------------------------------
// mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16}.{f16,bf16}.f32: D (16x8) = A (16x16) * B (16x8) + C.

struct FragmentCoord {
  int row, col;
};

inline int group_id(int lane) { return lane >> 2; }
inline int thread_id_in_group(int lane) { return lane % 4; }

// Element a_i (i = 0..7; register i / 2, half i % 2) of `lane`: row of A (M), column of A (K).
inline FragmentCoord mma_a_coord(int lane, int i) {
  const bool upper_rows = !((0 <= i && i < 2) || (4 <= i && i < 6));
  const int row = group_id(lane) + (upper_rows ? 8 : 0);
  const int col = thread_id_in_group(lane) * 2 + (i & 0x1) + (i >= 4 ? 8 : 0);
  return {row, col};
}

// Element b_i (i = 0..3; register i / 2, half i % 2) of `lane`: row of B (K), column of B (N).
inline FragmentCoord mma_b_coord(int lane, int i) {
  const int row = thread_id_in_group(lane) * 2 + (i & 0x1) + (i >= 2 ? 8 : 0);
  const int col = group_id(lane);
  return {row, col};
}

// Element c_i / d_i (i = 0..3) of `lane`: row of C (M), column of C (N).
inline FragmentCoord mma_c_coord(int lane, int i) {
  const int row = group_id(lane) + (i >= 2 ? 8 : 0);
  const int col = thread_id_in_group(lane) * 2 + (i & 0x1);
  return {row, col};
}

// What one lane hands to mma.m16n8k16: its A fragment (a0..a7 in 4 registers), its B fragment
// (b0..b3 in 2 registers) and its C fragment (c0..c3).
struct MmaLaneInput {
  std::uint32_t a[4];
  std::uint32_t b[2];
  float c[4];
};

// Lane `lane`'s D fragment. Products of 16-bit inputs are exact in fp32; they are summed in fp32 onto
// C in ascending k. Only the lanes holding this lane's rows of A (those of its group, by
// mma_a_coord's row) and columns of B (the groups equal to its columns, by mma_b_coord's col) are read.
inline void mma_m16n8k16_lane(MmaInputType type, const MmaLaneInput (&in)[kWarpSize], int lane,
                              float (&d)[4]) {
  const int first_row = group_id(lane);       // this lane's output rows: first_row, first_row + 8
  const int first_col = mma_c_coord(lane, 0).col;  // and columns: first_col, first_col + 1
  float a_rows[2][16];
  float b_cols[2][16];
  for (int holder = 4 * first_row; holder < 4 * first_row + 4; ++holder) {
    for (int i = 0; i < 8; ++i) {
      const FragmentCoord at = mma_a_coord(holder, i);
      a_rows[at.row / 8][at.col] = input_to_float(type, packed_half(in[holder].a[i / 2], i % 2));
    }
  }
  for (int holder = 4 * first_col; holder < 4 * (first_col + 2); ++holder) {
    for (int i = 0; i < 4; ++i) {
      const FragmentCoord at = mma_b_coord(holder, i);
      b_cols[at.col - first_col][at.row] = input_to_float(type, packed_half(in[holder].b[i / 2], i % 2));
    }
  }
  for (int i = 0; i < 4; ++i) {
    const FragmentCoord out = mma_c_coord(lane, i);
    const float* a_row = a_rows[out.row / 8];
    const float* b_col = b_cols[out.col - first_col];
    float sum = in[lane].c[i];
    for (int k = 0; k < 16; ++k) sum += a_row[k] * b_col[k];
    d[i] = sum;
  }
}

// The whole warp's D fragments.
inline void mma_m16n8k16_lanes(MmaInputType type, const MmaLaneInput (&in)[kWarpSize],
                               float (&d)[kWarpSize][4]) {
  for (int lane = 0; lane < kWarpSize; ++lane) mma_m16n8k16_lane(type, in, lane, d[lane]);
}

// ------------------------------------------------------------------------------------------------
// ldmatrix.sync.aligned.m8n8.x4{.trans}.shared.b16: lane 8 * m + r supplies the address of row r of
// 8x8 matrix m (8 contiguous b16 = 16 bytes, 16-byte aligned).

inline void check_ldmatrix_row(const void* row, int lane) {
  if (reinterpret_cast<std::uintptr_t>(row) % 16 != 0) {
    throw std::invalid_argument("ldmatrix: lane " + std::to_string(lane) +
                                " supplies a row address that is not 16-byte aligned");
  }
}

inline std::uint16_t ldmatrix_element(const void* const (&rows)[kWarpSize], int matrix, int row, int col) {
  std::uint16_t value;
  std::memcpy(&value, static_cast<const unsigned char*>(rows[8 * matrix + row]) + 2 * col, sizeof value);
  return value;
}

// Lane `lane`'s four destination registers: register m holds matrix m's row lane / 4, elements
// 2 * (lane % 4) and + 1 -- of the matrix as stored, or, with .trans, of its transpose.
inline void ldmatrix_x4_lane(const void* const (&rows)[kWarpSize], bool trans, int lane,
                             std::uint32_t (&r)[4]) {
  const int row = lane / 4;
  const int col = 2 * (lane % 4);
  for (int matrix = 0; matrix < 4; ++matrix) {
    if (trans) {
      r[matrix] = pack_halves(ldmatrix_element(rows, matrix, col, row), ldmatrix_element(rows, matrix, col + 1, row));
    } else {
      r[matrix] = pack_halves(ldmatrix_element(rows, matrix, row, col), ldmatrix_element(rows, matrix, row, col + 1));
    }
  }
}

inline void ldmatrix_x4_lanes(const void* const (&rows)[kWarpSize], bool trans, std::uint32_t (&r)[kWarpSize][4]) {
  for (int lane = 0; lane < kWarpSize; ++lane) check_ldmatrix_row(rows[lane], lane);
  for (int lane = 0; lane < kWarpSize; ++lane) ldmatrix_x4_lane(rows, trans, lane, r[lane]);
}

// ------------------------------------------------------------------------------------------------
// cp.async.cg.shared.global [dst], [src], 16, src_bytes; cp.async.commit_group; cp.async.wait_group N.
// A copy takes effect only when a wait_group performs it. Written over any state shaped like the
// emulator's AsyncCopyState (`open`: copies since the last commit; `committed`: groups, oldest first)
// and copies shaped like its AsyncCopy (dst, src, bytes, src_bytes).

template <typename Copy>
Copy make_async_copy_16(void* dst, const void* src, int src_bytes) {
  if (src_bytes < 0 || src_bytes > 16) {
    throw std::invalid_argument("cp.async: src-size " + std::to_string(src_bytes) + " is outside 0..16");
  }
  if (reinterpret_cast<std::uintptr_t>(dst) % 16 != 0 || reinterpret_cast<std::uintptr_t>(src) % 16 != 0) {
    throw std::invalid_argument("cp.async: a 16-byte copy needs 16-byte aligned source and destination");
  }
  Copy copy{};
  copy.dst = dst;
  copy.src = src;
  copy.bytes = 16;
  copy.src_bytes = src_bytes;
  return copy;
}

// The first src_bytes bytes come from src; the rest of the `bytes` are zeros. With src_bytes == 0 the
// source is not read at all.
template <typename Copy>
void perform_async_copy(const Copy& copy) {
  auto* dst = static_cast<unsigned char*>(copy.dst);
  if (copy.src_bytes > 0) std::memcpy(dst, copy.src, static_cast<std::size_t>(copy.src_bytes));
  std::memset(dst + copy.src_bytes, 0, static_cast<std::size_t>(copy.bytes - copy.src_bytes));
}

// Closes the open copies into a new (possibly empty) group, the newest.
template <typename State>
void commit_async_group(State& state) {
  state.committed.push_back(std::move(state.open));
  state.open.clear();
}

// Performs, oldest first, every committed group but the newest `pending`, and forgets them. Copies
// not yet committed are untouched.
template <typename State>
void wait_async_groups(State& state, int pending) {
  const auto keep = static_cast<std::size_t>(pending);
  if (state.committed.size() <= keep) return;
  const std::size_t done = state.committed.size() - keep;
  for (std::size_t g = 0; g < done; ++g) {
    for (const auto& copy : state.committed[g]) perform_async_copy(copy);
  }
  state.committed.erase(state.committed.begin(), state.committed.begin() + static_cast<std::ptrdiff_t>(done));
}

// ------------------------------------------------------------------------------------------------
// Attention's instructions (kernels/attention_sm80.cuh).
//
// ex2.approx.ftz.f32 d, a: d = 2^a. The PTX ISA gives a maximum relative error of 2^-22 (for |a| up to
// about 126) and these special cases: -Inf -> +0.0, -0.0 / +0.0 -> +1.0, +Inf -> +Inf, NaN -> NaN;
// .ftz flushes a subnormal input to a same-signed zero (so the result is +1.0) and a subnormal result to
// +0.0. Here the result is 2^a rounded to fp32 (well inside the error bound), then flushed.

inline bool is_subnormal_f32(float x) { return x != 0.0f && std::fabs(x) < 1.17549435e-38f; }

inline float ex2_approx_ftz_f32(float a) {
  if (is_subnormal_f32(a)) return 1.0f;
  const float d = static_cast<float>(std::exp2(static_cast<double>(a)));
  return is_subnormal_f32(d) ? 0.0f : d;
}

}  // namespace adcuda::emu
