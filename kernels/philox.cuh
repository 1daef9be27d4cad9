// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC11), the
// counter-based generator behind adcuda's random primitives: four 32-bit words from a 128-bit counter
// and a 64-bit key, with no state to carry between threads or launches. __host__ __device__ so that a
// host test can check it against the Random123 known-answer vectors.
//
// How a draw is keyed (random.cu): key = the seed; counter = (block index within the draw, the draw's
// offset). Element i of a draw takes word i % P of block i / P (P words per block, 4 or 2), so it
// depends only on (seed, offset, i), never on how the launch is configured; draws at different offsets
// read disjoint counter ranges.
#pragma once

#include <cmath>
#include <cstdint>

namespace adcuda::philox {

struct Words {
  std::uint32_t x[4];
};

__host__ __device__ __forceinline__ void mulhilo(std::uint32_t a, std::uint32_t b, std::uint32_t& hi, std::uint32_t& lo) {
#ifdef __CUDA_ARCH__
  hi = __umulhi(a, b);
  lo = a * b;
#else
  const std::uint64_t product = static_cast<std::uint64_t>(a) * b;
  hi = static_cast<std::uint32_t>(product >> 32);
  lo = static_cast<std::uint32_t>(product);
#endif
}

__host__ __device__ __forceinline__ Words philox4x32_10(Words counter, std::uint32_t key0, std::uint32_t key1) {
  constexpr std::uint32_t kMul0 = 0xD2511F53u;
  constexpr std::uint32_t kMul1 = 0xCD9E8D57u;
  constexpr std::uint32_t kWeyl0 = 0x9E3779B9u;
  constexpr std::uint32_t kWeyl1 = 0xBB67AE85u;
#pragma unroll
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      key0 += kWeyl0;
      key1 += kWeyl1;
    }
    std::uint32_t hi0, lo0, hi1, lo1;
    mulhilo(kMul0, counter.x[0], hi0, lo0);
    mulhilo(kMul1, counter.x[2], hi1, lo1);
    counter = Words{{hi1 ^ counter.x[1] ^ key0, lo1, hi0 ^ counter.x[3] ^ key1, lo0}};
  }
  return counter;
}

// Where a launch takes its (seed, offset) from: the values passed, or, for a launch captured into a CUDA
// graph (runtime/graph.h), the {seed, offset base} in device memory that each replay rewrites, `offset`
// then counting from that base; so every replay draws new numbers, those an eager run would draw.
struct Source {
  std::uint64_t seed;
  std::uint64_t offset;
  const std::uint64_t* state;  // nullptr outside a capture

  __host__ __device__ __forceinline__ std::uint64_t seed_now() const { return state ? state[0] : seed; }
  __host__ __device__ __forceinline__ std::uint64_t offset_now() const { return state ? state[1] + offset : offset; }
};

// The four words of block `block` of the draw at `offset` under `seed`.
__host__ __device__ __forceinline__ Words draw_block(std::uint64_t seed, std::uint64_t offset, std::uint64_t block) {
  const Words counter{{static_cast<std::uint32_t>(block), static_cast<std::uint32_t>(block >> 32),
                       static_cast<std::uint32_t>(offset), static_cast<std::uint32_t>(offset >> 32)}};
  return philox4x32_10(counter, static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32));
}

// Uniform values on [0, 1) from random words, with only as many bits as the target type represents
// exactly, so rounding to it can never give 1.0.
__host__ __device__ __forceinline__ float uniform_bits(std::uint32_t word, int bits) {
  return static_cast<float>(word >> (32 - bits)) * (1.0f / static_cast<float>(1u << bits));
}
__host__ __device__ __forceinline__ double uniform_double(std::uint32_t high, std::uint32_t low) {
  const std::uint64_t word = (static_cast<std::uint64_t>(high) << 32 | low) >> 11;  // 53 bits
  return static_cast<double>(word) * (1.0 / 9007199254740992.0);
}

// Box-Muller: two independent standard normals from u1 in (0, 1] and u2 in [0, 1).
__host__ __device__ __forceinline__ void box_muller(float u1, float u2, float& z0, float& z1) {
  const float radius = sqrtf(-2.0f * logf(u1));
  float s, c;
#ifdef __CUDA_ARCH__
  sincospif(2.0f * u2, &s, &c);
#else
  s = sinf(6.28318530717958647692f * u2);
  c = cosf(6.28318530717958647692f * u2);
#endif
  z0 = radius * c;
  z1 = radius * s;
}
__host__ __device__ __forceinline__ void box_muller(double u1, double u2, double& z0, double& z1) {
  const double radius = sqrt(-2.0 * log(u1));
  double s, c;
#ifdef __CUDA_ARCH__
  sincospi(2.0 * u2, &s, &c);
#else
  s = sin(6.28318530717958647692 * u2);
  c = cos(6.28318530717958647692 * u2);
#endif
  z0 = radius * c;
  z1 = radius * s;
}

}  // namespace adcuda::philox
