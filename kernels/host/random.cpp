// The CPU backend's draws (adcuda/backends/cpu/random.py) without NumPy's Generator: a Philox4x64-10
// stream keyed by (seed, offset) as the backend keys NumPy's Philox (counter = offset, key = seed,
// nothing buffered), handed to NumPy's own distribution functions through NumPy's public bit
// generator interface (numpy/random/bitgen.h: a state and its next_uint64 / next_uint32 / next_double).
// NumPy's functions turn the stream into values (uniform doubles, the ziggurat's normals, Lemire's
// bounded integers), so the values are NumPy's, bit for bit; the Generator's own call (argument
// parsing, its lock, a Python-level state setter to re-key it) cost more than the whole small draw.
// The backend finds those functions in NumPy's _generator module (their addresses, bound once with
// host_random_bind) and uses this path only after a probe draws the same numbers both ways; the
// Generator path stays the reference (tests/test_cpu_fast_paths.py compares them).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace py = pybind11;

namespace adcuda::host {
namespace {

using u64 = std::uint64_t;
using u32 = std::uint32_t;

// NumPy's bitgen_t (numpy/random/bitgen.h), the struct its distribution functions take
struct BitGen {
  void* state;
  u64 (*next_uint64)(void* st);
  u32 (*next_uint32)(void* st);
  double (*next_double)(void* st);
  u64 (*next_raw)(void* st);
};

inline u64 mulhilo(u64 a, u64 b, u64* hi) {
#if defined(__SIZEOF_INT128__)
  const unsigned __int128 p = static_cast<unsigned __int128>(a) * b;
  *hi = static_cast<u64>(p >> 64);
  return static_cast<u64>(p);
#else
  const u64 a0 = a & 0xFFFFFFFFu, a1 = a >> 32, b0 = b & 0xFFFFFFFFu, b1 = b >> 32;
  const u64 p00 = a0 * b0, p01 = a0 * b1, p10 = a1 * b0, p11 = a1 * b1;
  const u64 middle = (p00 >> 32) + (p01 & 0xFFFFFFFFu) + (p10 & 0xFFFFFFFFu);
  *hi = p11 + (p01 >> 32) + (p10 >> 32) + (middle >> 32);
  return (middle << 32) | (p00 & 0xFFFFFFFFu);
#endif
}

// Philox4x64 with 10 rounds (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC11), read
// out as NumPy's Philox reads it: the counter is incremented (with carry) before each block, the four
// words of a block are returned in order, and a 32-bit draw takes the low half of a word, then its
// high half.
struct Philox {
  u64 ctr[4];
  u64 key[2];
  u64 buffer[4];
  int buffer_pos;
  bool has_uint32;
  u32 uinteger;

  Philox(u64 seed, u64 offset) : ctr{offset, 0, 0, 0}, key{seed, 0}, buffer{}, buffer_pos(4), has_uint32(false),
                                 uinteger(0) {}

  void block() {
    if (++ctr[0] == 0 && ++ctr[1] == 0 && ++ctr[2] == 0) ++ctr[3];
    u64 c0 = ctr[0], c1 = ctr[1], c2 = ctr[2], c3 = ctr[3];
    u64 k0 = key[0], k1 = key[1];
    for (int round = 0; round < 10; ++round) {
      if (round > 0) {
        k0 += 0x9E3779B97F4A7C15ULL;
        k1 += 0xBB67AE8584CAA73BULL;
      }
      u64 hi0, hi1;
      const u64 lo0 = mulhilo(0xD2E7470EE14C6C93ULL, c0, &hi0);
      const u64 lo1 = mulhilo(0xCA5A826395121157ULL, c2, &hi1);
      c0 = hi1 ^ c1 ^ k0;
      c1 = lo1;
      c2 = hi0 ^ c3 ^ k1;
      c3 = lo0;
    }
    buffer[0] = c0;
    buffer[1] = c1;
    buffer[2] = c2;
    buffer[3] = c3;
    buffer_pos = 0;
  }

  u64 next64() {
    if (buffer_pos == 4) block();
    return buffer[buffer_pos++];
  }

  u32 next32() {
    if (has_uint32) {
      has_uint32 = false;
      return uinteger;
    }
    const u64 word = next64();
    has_uint32 = true;
    uinteger = static_cast<u32>(word >> 32);
    return static_cast<u32>(word & 0xFFFFFFFFu);
  }

  static u64 uint64_of(void* st) { return static_cast<Philox*>(st)->next64(); }
  static u32 uint32_of(void* st) { return static_cast<Philox*>(st)->next32(); }
  static double double_of(void* st) { return static_cast<double>(uint64_of(st) >> 11) * (1.0 / 9007199254740992.0); }

  BitGen bitgen() { return BitGen{this, &uint64_of, &uint32_of, &double_of, &uint64_of}; }
};

// NumPy's distribution functions (numpy/random/distributions.h), as its _generator module exports them
using DoubleFill = void (*)(BitGen*, std::intptr_t, double*);
using BoundedFill = void (*)(BitGen*, u64, u64, std::intptr_t, bool, u64*);
DoubleFill uniform_fill = nullptr;
DoubleFill normal_fill = nullptr;
BoundedFill bounded_fill = nullptr;

using SingleNormal = double (*)(BitGen*);
DoubleFill numpy_normal_fill = nullptr;  // NumPy's own, the reference of ziggurat_fill
SingleNormal numpy_normal = nullptr;     // NumPy's random_standard_normal: ziggurat_fill's rare path

// The ziggurat's strip tables of NumPy's random_standard_normal, read off the function itself
// (zig_tables_probed) rather than copied: each value's common case (about 99% of draws) is one word r of
// the stream, its strip idx = r & 0xff, its sign bit 8, its magnitude rabs = the 52 bits above, and
// the value rabs * wi[idx] (negated by the sign) where rabs < ki[idx]. NumPy's function branches on the
// sign, a coin flip the processor mispredicts half the time; ziggurat_fill computes that case without
// a branch and hands the rest (rabs >= ki[idx]: the strip's edge, the tail) back to NumPy's function
// from the same word, so the values are NumPy's, bit for bit, in a third less time.
double zig_wi[256];
u64 zig_ki[256];
constexpr u64 kMagnitude = 0x000FFFFFFFFFFFFFULL;

// A bit generator reading set words: the word r under probe, then 0, all ones, then zeros, so that
// every way out of NumPy's function ends (a strip's edge test reads 0.0 and returns or draws again;
// the tail's loop reads 0.0 then nearly 1.0 and returns; a new word 0 is strip 0's magnitude 0,
// inside it), counting the words read
struct ProbeStream {
  u64 first;
  int read = 0;
  u64 next() {
    const int i = read++;
    return i == 0 ? first : i == 2 ? ~0ULL : 0ULL;
  }
  static u64 uint64_of(void* st) { return static_cast<ProbeStream*>(st)->next(); }
  static u32 uint32_of(void* st) { return static_cast<u32>(uint64_of(st)); }
  static double double_of(void* st) { return static_cast<double>(uint64_of(st) >> 11) * (1.0 / 9007199254740992.0); }
};

// NumPy's normal of the word `r`, and how many words it read
double probe_normal(u64 r, int* read) {
  ProbeStream probe{r};
  BitGen gen{&probe, &ProbeStream::uint64_of, &ProbeStream::uint32_of, &ProbeStream::double_of,
             &ProbeStream::uint64_of};
  const double x = numpy_normal(&gen);
  *read = probe.read;
  return x;
}

// The tables, found by asking NumPy's function: wi[idx] is the value of magnitude 1 (exact: 1 * wi),
// ki[idx] the least magnitude it does not take from the one word (a binary search: the common case is
// rabs < ki); false where an answer is not of that form
bool zig_tables_probed() {
  for (u64 idx = 0; idx < 256; ++idx) {
    int read;
    const double w = probe_normal(idx | (1ULL << 9), &read);
    // (a strip's edge test that reads 0.0 keeps the value: two words, the value still 1 * wi)
    if (!(read == 1 || (read == 2 && idx != 0)) || !(w > 0)) return false;
    zig_wi[idx] = w;
    u64 lo = 0, hi = kMagnitude + 1;  // the least rejected magnitude lies in [lo, hi]
    while (lo < hi) {
      const u64 mid = lo + (hi - lo) / 2;
      probe_normal(idx | (mid << 9), &read);
      if (read == 1)
        lo = mid + 1;
      else
        hi = mid;
    }
    zig_ki[idx] = lo;
  }
  return true;
}

// NumPy's random_standard_normal_fill over the Philox stream, the common case without a branch
void ziggurat_fill(BitGen* gen, std::intptr_t n, double* out) {
  auto* philox = static_cast<Philox*>(gen->state);
  for (std::intptr_t i = 0; i < n; ++i) {
    const u64 r = philox->next64();
    const u64 idx = r & 0xFF, rabs = (r >> 9) & kMagnitude;
    double x = static_cast<double>(static_cast<std::int64_t>(rabs)) * zig_wi[idx];
    u64 bits;
    std::memcpy(&bits, &x, sizeof bits);
    bits ^= ((r >> 8) & 1) << 63;  // the sign, as NumPy's negation flips it
    std::memcpy(&x, &bits, sizeof x);
    if (rabs >= zig_ki[idx]) {
      --philox->buffer_pos;  // (the word again, for NumPy's function: next64 read it from the buffer)
      x = numpy_normal(gen);
    }
    out[i] = x;
  }
}

// Whether ziggurat_fill gives NumPy's fill's values over `n` draws of a few streams
bool ziggurat_matches(std::intptr_t n) {
  std::vector<double> ours(n), numpy(n);
  for (const u64 seed : {0ULL, 0x9E3779B97F4A7C15ULL, ~0ULL}) {
    Philox a(seed, 12345), b(seed, 12345);
    BitGen ga = a.bitgen(), gb = b.bitgen();
    ziggurat_fill(&ga, n, ours.data());
    numpy_normal_fill(&gb, n, numpy.data());
    if (std::memcmp(ours.data(), numpy.data(), n * sizeof(double)) != 0) return false;
  }
  return true;
}

// A seed or offset (any Python int) modulo 2**64, as the CUDA backend's Philox takes them
u64 mod64(const py::handle& value) {
  const unsigned long long v = PyLong_AsUnsignedLongLongMask(value.ptr());
  if (v == static_cast<unsigned long long>(-1) && PyErr_Occurred()) throw py::error_already_set();
  return static_cast<u64>(v);
}

// draws of this many values or more release the GIL (below it, releasing costs more than it frees)
constexpr std::intptr_t kReleaseAt = 1 << 15;

std::vector<py::ssize_t> checked_shape(const char* op, const py::tuple& shape, std::intptr_t* count) {
  std::vector<py::ssize_t> dims;
  dims.reserve(shape.size());
  std::intptr_t n = 1;
  for (const py::handle d : shape) {
    const auto s = d.cast<py::ssize_t>();
    if (s < 0) throw std::invalid_argument(std::string(op) + ": negative dimension in shape");
    dims.push_back(s);
    n *= s;
  }
  *count = n;
  return dims;
}

// The stream (seed, offset) as NumPy's bit generator; `run(gen)` draws from it, without the GIL where
// it draws `n` values or more
template <typename Run>
void with_stream(const py::handle& seed, const py::handle& offset, std::intptr_t n, Run run) {
  Philox philox(mod64(seed), mod64(offset));
  BitGen gen = philox.bitgen();
  if (n >= kReleaseAt) {
    py::gil_scoped_release release;
    run(&gen);
  } else {
    run(&gen);
  }
}

DoubleFill bound(DoubleFill fill) {
  if (fill == nullptr) throw std::runtime_error("host_random: NumPy's distribution functions are not bound");
  return fill;
}

// `n` doubles of `fill` from the stream, each passed to `store(i, value)`: in chunks through a stack
// buffer (no allocation for a small draw; NumPy's fills draw value after value, so chunks continue
// the one stream)
template <typename Store>
void each_double(DoubleFill fill, const py::handle& seed, const py::handle& offset, std::intptr_t n, Store store) {
  fill = bound(fill);
  with_stream(seed, offset, n, [&](BitGen* gen) {
    constexpr std::intptr_t kChunk = 256;
    double chunk[kChunk];
    for (std::intptr_t i = 0; i < n; i += kChunk) {
      const std::intptr_t m = n - i < kChunk ? n - i : kChunk;
      fill(gen, m, chunk);
      for (std::intptr_t j = 0; j < m; ++j) store(i + j, chunk[j]);
    }
  });
}

// the float64 draws of `fill` in float64, or rounded to float32 (below_one: the largest float32 below 1
// where a rounding reached 1.0, as rand keeps [0, 1))
py::array floating(const char* op, DoubleFill fill, const py::object& seed, const py::object& offset,
                   const py::tuple& shape, bool single, bool below_one) {
  std::intptr_t n;
  auto dims = checked_shape(op, shape, &n);
  if (!single) {
    py::array_t<double> out(dims);
    double* o = out.mutable_data();
    fill = bound(fill);
    with_stream(seed, offset, n, [&](BitGen* gen) { fill(gen, n, o); });
    return std::move(out);
  }
  py::array_t<float> out(dims);
  float* o = out.mutable_data();
  const float top = 0.99999994f;  // nextafter(1.0f, 0.0f)
  each_double(fill, seed, offset, n, [&](std::intptr_t i, double u) {
    const float v = static_cast<float>(u);
    o[i] = below_one && v > top ? top : v;
  });
  return std::move(out);
}

// What host_random_fill_ writes: U[0, 1) (kept below 1 in float32), N(0, 1), or 1 where U[0, 1) < p, else 0
enum FillKind { kUniform = 0, kNormal = 1, kBelow = 2 };

// `out` (float32 or float64) overwritten with kind's draws in its dtype, each then times `scale` and plus
// `shift` (or compared with `p`), rounded at each step in that dtype as the backend's ops round them
// (a multiply by 1 and an add of 0 skipped, as the ops skip them: -0.0 + 0.0 would be +0.0)
template <typename T>
void fill_drawn(T* o, std::intptr_t n, int kind, double scale, double shift, const py::object& seed,
                const py::object& offset) {
  const T s = static_cast<T>(scale), b = static_cast<T>(shift);
  const bool scaled = scale != 1.0, shifted = shift != 0.0;
  if (kind == kBelow) {
    each_double(uniform_fill, seed, offset, n, [&](std::intptr_t i, double u) {
      T v = static_cast<T>(u);
      if constexpr (std::is_same_v<T, float>) v = v > 0.99999994f ? 0.99999994f : v;
      o[i] = v < s ? T(1) : T(0);
    });
    return;
  }
  each_double(kind == kUniform ? uniform_fill : normal_fill, seed, offset, n, [&](std::intptr_t i, double u) {
    T v = static_cast<T>(u);
    if constexpr (std::is_same_v<T, float>) {
      if (kind == kUniform && v > 0.99999994f) v = 0.99999994f;
    }
    if (scaled) v = v * s;
    if (shifted) v = v + b;
    o[i] = v;
  });
}

// p (float32 or float64, C-contiguous) as a typed pointer, or an error naming the function
template <typename T>
const T* probabilities(const char* name, const py::array& p) {
  if (!(p.flags() & py::array::c_style))
    throw std::invalid_argument(std::string(name) + ": p must be a C-contiguous array");
  return static_cast<const T*>(p.data());
}

// Whether every element of p lies in [0, 1] (NaN does not)
template <typename T>
bool in_unit_interval(const T* p, std::intptr_t n) {
  for (std::intptr_t i = 0; i < n; ++i)
    if (!(p[i] >= T(0) && p[i] <= T(1))) return false;
  return true;
}

// 1 where the i-th uniform draw of the stream, in p's dtype (float32's rounded and kept below 1, as
// host_random_uniform gives it), is below p[i], else 0: rand's draw compared with p, in p's dtype
template <typename T>
py::array below_each(const py::array& p, const py::object& seed, const py::object& offset) {
  const T* probs = probabilities<T>("host_random_below_each", p);
  std::vector<py::ssize_t> dims(p.shape(), p.shape() + p.ndim());
  py::array_t<T> out(dims);
  T* o = out.mutable_data();
  each_double(uniform_fill, seed, offset, p.size(), [&](std::intptr_t i, double u) {
    T v = static_cast<T>(u);
    if constexpr (std::is_same_v<T, float>) v = v > 0.99999994f ? 0.99999994f : v;
    o[i] = v < probs[i] ? T(1) : T(0);
  });
  return std::move(out);
}

// Whether `a` holds float32 (1), float64 (0), or another dtype (-1), by NumPy's type numbers, found once
// (comparing dtype objects cost a tenth of a small draw each)
int float32_or_64(const py::array& a) {
  static const int single = py::dtype::of<float>().num(), twice = py::dtype::of<double>().num();
  const int num = a.dtype().num();
  return num == single ? 1 : num == twice ? 0 : -1;
}

bool is_float32(const py::array& a) {
  const int kind = float32_or_64(a);
  if (kind >= 0) return kind == 1;
  throw std::invalid_argument("host_random: p must be float32 or float64");
}

// host_random_fill_'s checks of its arguments: whether out is float32 (else float64)
bool fill_checked(const py::array& out, int kind) {
  if (kind != kUniform && kind != kNormal && kind != kBelow)
    throw std::invalid_argument("host_random_fill_: unknown kind " + std::to_string(kind));
  if (!(out.flags() & py::array::c_style) || !out.writeable())
    throw std::invalid_argument("host_random_fill_: out must be a writeable C-contiguous array");
  const int single = float32_or_64(out);
  if (single >= 0) return single == 1;
  throw std::invalid_argument("host_random_fill_: out must be float32 or float64");
}

// host_random_fill_'s work, after fill_checked
void fill_into(py::array& out, bool single, int kind, double scale, double shift, const py::object& seed,
               const py::object& offset) {
  const std::intptr_t n = out.size();
  if (single)
    fill_drawn(static_cast<float*>(out.mutable_data()), n, kind, scale, shift, seed, offset);
  else
    fill_drawn(static_cast<double*>(out.mutable_data()), n, kind, scale, shift, seed, offset);
}

// The generator's next_offset(n), taken here under the GIL (no Python code runs between the read and the
// write): its seed and offset, or false (nothing taken) while a thread holds its lock (manual_seed,
// set_state, a draw), where the caller takes next_offset, which waits for it
bool reserved(const py::object& generator, std::intptr_t n, py::object* seed, py::object* offset) {
  // (the attribute names interned once: building them per call cost more than a small draw)
  static PyObject* const lock_name = PyUnicode_InternFromString("_lock");
  static PyObject* const locked_name = PyUnicode_InternFromString("locked");
  static PyObject* const seed_name = PyUnicode_InternFromString("_seed");
  static PyObject* const offset_name = PyUnicode_InternFromString("_offset");
  PyObject* gen = generator.ptr();
  const auto lock = py::reinterpret_steal<py::object>(PyObject_GetAttr(gen, lock_name));
  if (!lock) throw py::error_already_set();
  const auto held = py::reinterpret_steal<py::object>(PyObject_CallMethodNoArgs(lock.ptr(), locked_name));
  if (!held) throw py::error_already_set();
  if (PyObject_IsTrue(held.ptr())) return false;
  *seed = py::reinterpret_steal<py::object>(PyObject_GetAttr(gen, seed_name));
  *offset = py::reinterpret_steal<py::object>(PyObject_GetAttr(gen, offset_name));
  if (!*seed || !*offset) throw py::error_already_set();
  const auto step = py::reinterpret_steal<py::object>(PyLong_FromSsize_t(n > 0 ? n : 1));
  const auto next = py::reinterpret_steal<py::object>(PyNumber_Add(offset->ptr(), step.ptr()));
  if (!next || PyObject_SetAttr(gen, offset_name, next.ptr()) != 0) throw py::error_already_set();
  return true;
}

// out (C-contiguous, writeable) overwritten with host_random_integers' draws of
// [low, high), cast to its dtype as NumPy's assignment casts int64 (C's conversion)
template <typename T>
void integers_into(py::array& out, const std::vector<std::int64_t>& drawn) {
  T* o = static_cast<T*>(out.mutable_data());
  for (std::size_t i = 0; i < drawn.size(); ++i) o[i] = static_cast<T>(drawn[i]);
}

bool integers_from(py::array out, std::int64_t low, std::int64_t high, const py::object& generator) {
  if (bounded_fill == nullptr) throw std::runtime_error("host_random: NumPy's distribution functions are not bound");
  if (high <= low) throw std::invalid_argument("host_random_integers_from_: expected low < high");
  if (!(out.flags() & py::array::c_style) || !out.writeable())
    throw std::invalid_argument("host_random_integers_from_: out must be a writeable C-contiguous array");
  // the dtype (float32/64, int64/32; float16 and bool are the caller's) checked before the generator's
  // offset is taken, so that a refusal draws nothing; by NumPy's type numbers, found once
  using Into = void (*)(py::array&, const std::vector<std::int64_t>&);
  static const std::pair<int, Into> writers[] = {
      {py::dtype::of<float>().num(), &integers_into<float>},
      {py::dtype::of<double>().num(), &integers_into<double>},
      {py::dtype::of<std::int64_t>().num(), &integers_into<std::int64_t>},
      {py::dtype::of<std::int32_t>().num(), &integers_into<std::int32_t>},
  };
  const int num = out.dtype().num();
  Into into = nullptr;
  for (const auto& [type, writer] : writers)
    if (type == num) into = writer;
  if (into == nullptr) throw std::invalid_argument("host_random_integers_from_: out's dtype is not one it writes");
  const std::intptr_t n = out.size();
  py::object seed, offset;
  if (!reserved(generator, n, &seed, &offset)) return false;
  std::vector<std::int64_t> drawn(static_cast<std::size_t>(n));
  // NumPy's integers(low, high, dtype=int64), as host_random_integers draws them
  const u64 off = static_cast<u64>(low), range = static_cast<u64>(high) - static_cast<u64>(low) - 1;
  auto* o = reinterpret_cast<u64*>(drawn.data());
  with_stream(seed, offset, n, [&](BitGen* gen) { bounded_fill(gen, off, range, n, false, o); });
  into(out, drawn);
  return true;
}

}  // namespace

void bind_random(py::module_& m) {
  m.def(
      "host_unit_interval",
      [](const py::array& p) {
        return is_float32(p) ? in_unit_interval(probabilities<float>("host_unit_interval", p), p.size())
                             : in_unit_interval(probabilities<double>("host_unit_interval", p), p.size());
      },
      py::arg("p"), "Whether every element of p (float32 or float64, C-contiguous) lies in [0, 1] (NaN does not).");
  m.def(
      "host_random_below_each",
      [](const py::array& p, const py::object& seed, const py::object& offset) {
        return is_float32(p) ? below_each<float>(p, seed, offset) : below_each<double>(p, seed, offset);
      },
      py::arg("p"), py::arg("seed"), py::arg("offset"),
      "1 where host_random_uniform's value of the Philox stream (seed, offset), in p's dtype (float32 or float64, "
      "C-contiguous), is below p's element, else 0, in p's dtype and shape: bernoulli of the probabilities p.");
  m.def(
      "host_random_bind",
      [](std::uintptr_t uniform, std::uintptr_t normal, std::uintptr_t bounded, std::uintptr_t single_normal) {
        uniform_fill = reinterpret_cast<DoubleFill>(uniform);
        numpy_normal_fill = normal_fill = reinterpret_cast<DoubleFill>(normal);
        bounded_fill = reinterpret_cast<BoundedFill>(bounded);
        numpy_normal = reinterpret_cast<SingleNormal>(single_normal);
        // (a NumPy whose function answers otherwise, or whose fill differs: its own fill, as before)
        if (zig_tables_probed() && ziggurat_matches(4096)) normal_fill = &ziggurat_fill;
      },
      py::arg("uniform_fill"), py::arg("normal_fill"), py::arg("bounded_uint64_fill"), py::arg("normal"),
      "Bind the addresses of NumPy's random_standard_uniform_fill, random_standard_normal_fill, "
      "random_bounded_uint64_fill and random_standard_normal (its _generator module's exports), which the "
      "host_random_* draws call; normal draws then take the branch-free ziggurat where it gives the same values.");
  m.def(
      "host_random_branch_free_normals", [] { return normal_fill == &ziggurat_fill; },
      "Whether the normal draws take the branch-free ziggurat (host_random_bind found it gives NumPy's values).");
  // rand's and randn's draws: the same signature over NumPy's uniform and normal fills
  const auto def_floating = [&m](const char* name, DoubleFill* fill, bool below_one, const char* doc) {
    m.def(
        name,
        [name, fill, below_one](const py::object& seed, const py::object& offset, const py::tuple& shape,
                                bool single) { return floating(name, *fill, seed, offset, shape, single, below_one); },
        py::arg("seed"), py::arg("offset"), py::arg("shape"), py::arg("single"), doc);
  };
  def_floating("host_random_uniform", &uniform_fill, true,
               "Uniform [0, 1) samples of shape from the Philox stream (seed, offset), both taken modulo 2**64: "
               "NumPy's Philox Generator's random(shape), as float64, or rounded to float32 and kept below 1 "
               "(single).");
  def_floating("host_random_normal", &normal_fill, false,
               "Standard normal samples of shape from the Philox stream (seed, offset): NumPy's Philox Generator's "
               "standard_normal(shape), as float64 or rounded to float32 (single).");
  m.def(
      "host_random_integers",
      [](std::int64_t low, std::int64_t high, const py::object& seed, const py::object& offset,
         const py::tuple& shape) {
        if (bounded_fill == nullptr)
          throw std::runtime_error("host_random: NumPy's distribution functions are not bound");
        if (high <= low) throw std::invalid_argument("host_random_integers: expected low < high");
        std::intptr_t n;
        auto dims = checked_shape("host_random_integers", shape, &n);
        py::array_t<std::int64_t> out(dims);
        // NumPy's integers(low, high, dtype=int64): an offset and an inclusive range, unmasked (Lemire)
        const u64 off = static_cast<u64>(low);
        const u64 range = static_cast<u64>(high) - static_cast<u64>(low) - 1;
        auto* o = reinterpret_cast<u64*>(out.mutable_data());
        with_stream(seed, offset, n, [&](BitGen* gen) { bounded_fill(gen, off, range, n, false, o); });
        return out;
      },
      py::arg("low"), py::arg("high"), py::arg("seed"), py::arg("offset"), py::arg("shape"),
      "Uniform int64 samples of [low, high) of shape from the Philox stream (seed, offset): NumPy's Philox "
      "Generator's integers(low, high, shape, dtype=int64).");
  m.def(
      "host_random_below",
      [](double p, const py::object& seed, const py::object& offset, const py::tuple& shape) {
        std::intptr_t n;
        auto dims = checked_shape("host_random_below", shape, &n);
        py::array_t<bool> out(dims);
        bool* o = out.mutable_data();
        each_double(uniform_fill, seed, offset, n, [&](std::intptr_t i, double u) { o[i] = u < p; });
        return out;
      },
      py::arg("p"), py::arg("seed"), py::arg("offset"), py::arg("shape"),
      "Whether each uniform [0, 1) sample of shape from the Philox stream (seed, offset) is below p (a bool "
      "array): NumPy's Philox Generator's random(shape) < p.");
  m.def(
      "host_trials",
      [](py::array out, const py::array& logs, double log_q) {
        // geometric_'s arithmetic after NumPy's log1p: exact IEEE steps (a division, ceil, max), the
        // cast to out's dtype rounding to nearest as NumPy's cast does
        if (!(out.flags() & py::array::c_style) || !out.writeable() || out.size() != logs.size())
          throw std::invalid_argument("host_trials: out must be a writeable C-contiguous array of logs' size");
        if (float32_or_64(logs) != 0 || !(logs.flags() & py::array::c_style))
          throw std::invalid_argument("host_trials: logs must be a C-contiguous float64 array");
        const double* l = static_cast<const double*>(logs.data());
        const std::intptr_t n = logs.size();
        const auto trials = [&](std::intptr_t i) {
          const double t = std::ceil(l[i] / log_q);
          return t > 1.0 ? t : 1.0;  // (NumPy's maximum: never NaN here, logs are finite and log_q < 0)
        };
        const int single = float32_or_64(out);
        if (single == 1) {
          float* o = static_cast<float*>(out.mutable_data());
          for (std::intptr_t i = 0; i < n; ++i) o[i] = static_cast<float>(trials(i));
        } else if (single == 0) {
          double* o = static_cast<double*>(out.mutable_data());
          for (std::intptr_t i = 0; i < n; ++i) o[i] = trials(i);
        } else {
          throw std::invalid_argument("host_trials: out must be float32 or float64");
        }
      },
      py::arg("out"), py::arg("logs"), py::arg("log_q"),
      "out (float32 or float64) overwritten with max(ceil(logs / log_q), 1), computed in float64 (logs: float64 "
      "log1p(-u) of uniform draws u, log_q = log1p(-p)): geometric_'s number of trials.");
  m.def(
      "host_random_fill_",
      [](py::array out, int kind, double scale, double shift, const py::object& seed,
         const py::object& offset) { fill_into(out, fill_checked(out, kind), kind, scale, shift, seed, offset); },
      py::arg("out"), py::arg("kind"), py::arg("scale"), py::arg("shift"), py::arg("seed"), py::arg("offset"),
      "out overwritten with draws from the Philox stream (seed, offset) in its dtype (float32 or float64): "
      "kind 0, host_random_uniform's values; 1, host_random_normal's; each times scale plus shift, rounded "
      "at each step in that dtype (a scale of 1 and a shift of 0 skipped); kind 2, 1 where "
      "host_random_uniform's value is below scale (taken in that dtype), else 0.");
  m.def(
      "host_random_fill_from",
      [](py::array out, int kind, double scale, double shift, const py::object& generator) {
        // the generator's next_offset(out.size), taken here under the GIL (no Python code runs between
        // the read and the write), unless a thread holds its lock (manual_seed, set_state, a draw): then
        // nothing is drawn and the caller takes next_offset, which waits for it
        const bool single = fill_checked(out, kind);
        py::object seed, offset;
        if (!reserved(generator, out.size(), &seed, &offset)) return false;
        fill_into(out, single, kind, scale, shift, seed, offset);
        return true;
      },
      py::arg("out"), py::arg("kind"), py::arg("scale"), py::arg("shift"), py::arg("generator"),
      "host_random_fill_ from generator's next_offset(out.size), taken here; False (nothing done) while locked.");
  m.def("host_random_integers_from_", &integers_from, py::arg("out"), py::arg("low"), py::arg("high"),
        py::arg("generator"),
        "out (C-contiguous: float32/64, int64/32) overwritten with host_random_integers' values of "
        "[low, high) from generator's next_offset(out.size), taken here, cast to its dtype; False (nothing done) "
        "while the generator is locked.");
}

}  // namespace adcuda::host
