// The CPU backend's unary ops on small arrays (adcuda/backends/cpu/elementwise.py's ``unary``): the CUDA
// kernels' own functors (functors.cuh), one per row of the unary table (elementwise_ops.def, generated
// from adcuda/backends/elementwise_table.py), run over a contiguous float32/float64 array. A formula
// that NumPy evaluates as several passes (sigmoid's exp, add, divide and select; sign's NaN fix) costs
// a microsecond of call overhead per pass on an array of a few dozen elements, so the CPU backend
// sends small arrays here, one call; on large ones NumPy's vectorised passes are faster, and the NumPy
// formulas stay the reference these are tested against (tests/test_elementwise_host.py). The binary ops
// whose NumPy formula is several passes or a slow scalar loop have the same path (``host_binary``).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "elementwise_avx2.h"
#include "functors.cuh"

namespace py = pybind11;

namespace adcuda::host {

bool choose_avx2(const char* who, std::optional<bool> wanted) {
  if (!wanted) return cpu_has_avx2();
  if (*wanted && !cpu_has_avx2()) throw std::runtime_error(std::string(who) + ": this CPU or build has no AVX2 and FMA");
  return *wanted;
}

namespace {

// The unary table's kinds (elementwise_table.py): the bitwise and logical ops take no floating arrays.
enum class Kind { FloatOnly, Numeric, Rounding, Bitwise, Logical };

template <typename T>
using UnaryFn = void (*)(const T*, T*, py::ssize_t);

template <typename T, typename F>
void map_unary(const T* in, T* out, py::ssize_t n) {
  const F f{};
  for (py::ssize_t i = 0; i < n; ++i) out[i] = f(in[i]);
}

template <Kind K, typename F, typename T>
constexpr UnaryFn<T> entry() {
  if constexpr (K == Kind::Bitwise || K == Kind::Logical) {
    return nullptr;
  } else {
    return &map_unary<T, F>;
  }
}

struct Row {
  const char* name;
  UnaryFn<float> f32;
  UnaryFn<double> f64;
};

const Row kRows[] = {
#define ADCUDA_UNARY(name, kind, functor, half_via_float32, bool_is_identity) \
  {#name, entry<Kind::kind, math::functor, float>(), entry<Kind::kind, math::functor, double>()},
#include "elementwise_ops.def"
};
constexpr py::ssize_t kRowCount = sizeof(kRows) / sizeof(kRows[0]);

template <typename T>
py::array_t<T> host_unary(py::ssize_t index, const py::array_t<T, py::array::c_style>& x) {
  if (index < 0 || index >= kRowCount) throw py::index_error("host_unary: no unary op " + std::to_string(index));
  const UnaryFn<T> fn = [&] {
    if constexpr (std::is_same_v<T, float>) return kRows[index].f32;
    else return kRows[index].f64;
  }();
  if (fn == nullptr) throw py::type_error(std::string("host_unary: ") + kRows[index].name + " takes no floating arrays");
  py::array_t<T> out(std::vector<py::ssize_t>(x.shape(), x.shape() + x.ndim()));
  fn(x.data(), out.mutable_data(), x.size());
  return out;
}

// The binary ops whose NumPy formula is several passes (remainder's sign fix, xlogy's mask, the
// one-parameter activations), for same-shape operands or a scalar second one: the CPU backend's
// ``binary`` on small arrays.
template <typename T>
using BinaryFn = void (*)(const T*, const T*, py::ssize_t, T*, py::ssize_t);

// b_step 0: b is one value, broadcast
template <typename T, typename F>
void map_binary(const T* a, const T* b, py::ssize_t b_step, T* out, py::ssize_t n) {
  const F f{};
  for (py::ssize_t i = 0; i < n; ++i) out[i] = f(a[i], b[i * b_step]);
}

struct BinaryRow {
  const char* name;
  BinaryFn<float> f32;
  BinaryFn<double> f64;
};

// the rows of elementwise_table.py's FLOAT_BINARY marked ``host``
const BinaryRow kBinaryRows[] = {
#define ADCUDA_HOST_BINARY(name, functor) {#name, &map_binary<float, math::functor>, &map_binary<double, math::functor>},
#include "elementwise_ops.def"
};
constexpr py::ssize_t kBinaryRowCount = sizeof(kBinaryRows) / sizeof(kBinaryRows[0]);

template <typename T>
BinaryFn<T> binary_row(py::ssize_t index) {
  if (index < 0 || index >= kBinaryRowCount) throw py::index_error("host_binary: no binary op " + std::to_string(index));
  if constexpr (std::is_same_v<T, float>) return kBinaryRows[index].f32;
  else return kBinaryRows[index].f64;
}

template <typename T>
py::array_t<T> host_binary(py::ssize_t index, const py::array_t<T, py::array::c_style>& a,
                           const py::array_t<T, py::array::c_style>& b) {
  const BinaryFn<T> fn = binary_row<T>(index);
  if (a.ndim() != b.ndim() || !std::equal(a.shape(), a.shape() + a.ndim(), b.shape()))
    throw py::value_error("host_binary: the operands' shapes differ");
  py::array_t<T> out(std::vector<py::ssize_t>(a.shape(), a.shape() + a.ndim()));
  fn(a.data(), b.data(), 1, out.mutable_data(), a.size());
  return out;
}

template <typename T>
py::array_t<T> host_binary_scalar(py::ssize_t index, const py::array_t<T, py::array::c_style>& a, double b) {
  const BinaryFn<T> fn = binary_row<T>(index);
  const T value = static_cast<T>(b);
  py::array_t<T> out(std::vector<py::ssize_t>(a.shape(), a.shape() + a.ndim()));
  fn(a.data(), &value, 0, out.mutable_data(), a.size());
  return out;
}

using Floats = py::array_t<float, py::array::c_style>;
using Doubles = py::array_t<double, py::array::c_style>;

// equal's loop: whether two row-major arrays of one dtype and size hold equal values, as ``==`` of
// each pair (a NaN is unequal to everything, -0.0 equals 0.0); None for arrays of another kind.
template <typename T>
py::object equal_of(py::handle a, py::handle b) {
  using Array = py::array_t<T, py::array::c_style>;
  if (!Array::check_(a) || !Array::check_(b)) return py::none();
  const auto x = py::reinterpret_borrow<Array>(a), y = py::reinterpret_borrow<Array>(b);
  if (x.size() != y.size()) throw py::value_error("host_equal: the arrays' sizes differ");
  const T* p = x.data();
  const T* q = y.data();
  for (py::ssize_t i = 0, n = x.size(); i < n; ++i)
    if (!(p[i] == q[i])) return py::bool_(false);
  return py::bool_(true);
}

py::object host_equal(py::handle a, py::handle b) {
  for (auto equal : {&equal_of<float>, &equal_of<double>, &equal_of<std::int64_t>, &equal_of<bool>}) {
    py::object result = equal(a, b);
    if (!result.is_none()) return result;
  }
  return py::none();
}

// host_binary's one entry: pybind11's overloads would try each signature in turn, converting the
// arguments for each (a float64 array and a float reached the fourth after three failed tries: half a
// microsecond of a small op's call); the operands' types are told apart here instead.
template <typename T>
py::object binary_of(py::ssize_t index, const py::array_t<T, py::array::c_style>& a, py::handle b) {
  using Array = py::array_t<T, py::array::c_style>;
  if (PyFloat_Check(b.ptr())) return host_binary_scalar<T>(index, a, PyFloat_AS_DOUBLE(b.ptr()));
  if (Array::check_(b)) return host_binary<T>(index, a, py::reinterpret_borrow<Array>(b));
  throw py::type_error("host_binary: b must be a row-major array of a's dtype or a Python float");
}

py::object host_binary_entry(py::ssize_t index, py::handle a, py::handle b) {
  if (Floats::check_(a)) return binary_of<float>(index, py::reinterpret_borrow<Floats>(a), b);
  if (Doubles::check_(a)) return binary_of<double>(index, py::reinterpret_borrow<Doubles>(a), b);
  throw py::type_error("host_binary: a must be a row-major float32 or float64 array");
}

py::object host_unary_entry(py::ssize_t index, py::handle x) {
  if (Floats::check_(x)) return host_unary<float>(index, py::reinterpret_borrow<Floats>(x));
  if (Doubles::check_(x)) return host_unary<double>(index, py::reinterpret_borrow<Doubles>(x));
  throw py::type_error("host_unary: x must be a row-major float32 or float64 array");
}

// An optional float32 array (None: nullptr) of n elements, row-major, for gelu_tanh's kept tanh argument.
float* kept_inner(const py::object& inner, py::ssize_t n, const char* who) {
  if (inner.is_none()) return nullptr;
  if (!Floats::check_(inner)) throw py::type_error(std::string(who) + ": inner must be a row-major float32 array");
  auto array = py::reinterpret_borrow<Floats>(inner);
  if (array.size() != n) throw py::value_error(std::string(who) + ": inner's size differs from x's");
  return array.mutable_data();
}

void require_avx2(const char* who) { choose_avx2(who, true); }

void host_gelu_tanh(const Floats& x, Floats& out, const py::object& inner) {
  require_avx2("host_gelu_tanh");
  if (out.size() != x.size()) throw py::value_error("host_gelu_tanh: out's size differs from x's");
  gelu_tanh_avx2(x.data(), out.mutable_data(), kept_inner(inner, x.size(), "host_gelu_tanh"), x.size());
}

void host_gelu_tanh_backward(const Floats& x, const Floats& g, Floats& out, const py::object& inner) {
  require_avx2("host_gelu_tanh_backward");
  if (g.size() != x.size() || out.size() != x.size())
    throw py::value_error("host_gelu_tanh_backward: the arrays' sizes differ");
  const float* kept = kept_inner(inner, x.size(), "host_gelu_tanh_backward");
  gelu_tanh_backward_avx2(x.data(), g.data(), kept, out.mutable_data(), x.size());
}

void host_gelu(const Floats& x, Floats& out) {
  require_avx2("host_gelu");
  if (out.size() != x.size()) throw py::value_error("host_gelu: out's size differs from x's");
  gelu_avx2(x.data(), out.mutable_data(), x.size());
}

void host_gelu_backward(const Floats& x, const Floats& g, Floats& out) {
  require_avx2("host_gelu_backward");
  if (g.size() != x.size() || out.size() != x.size()) throw py::value_error("host_gelu_backward: the arrays' sizes differ");
  gelu_backward_avx2(x.data(), g.data(), out.mutable_data(), x.size());
}

// A compiled replay's relu after a bias add, in one pass (adcuda/capture/program.py's ``_fusions``): relu(a + bias)
// with ``bias`` broadcast along a's last dim, each step rounded as the two NumPy calls it stands for round it
// (np.add, then np.maximum(t, 0): NaN kept as it is, -0.0 made +0.0).
template <typename T>
void host_bias_relu(const py::array_t<T, py::array::c_style>& a, const py::array_t<T, py::array::c_style>& bias,
                    py::array_t<T, py::array::c_style>& out) {
  const py::ssize_t columns = bias.size();
  if (a.ndim() < 1 || bias.ndim() != 1 || a.shape(a.ndim() - 1) != columns || out.size() != a.size())
    throw py::value_error("host_bias_relu: bias must have a's last dim, out a's size");
  const T* x = a.data();
  const T* b = bias.data();
  T* y = out.mutable_data();
  for (py::ssize_t start = 0; start < a.size(); start += columns) {
    // (out may be a itself: each element is read, then written, so no lane depends on another's write)
#pragma GCC ivdep
    for (py::ssize_t j = 0; j < columns; ++j) {
      const T t = x[start + j] + b[j];
      y[start + j] = (t != t || t > T(0)) ? t : T(0);
    }
  }
}

// relu's backward as the CPU backend's NumPy path computes it: g times (x > 0 or NaN) taken as 1 or 0, so
// g * 0 where x <= 0 (a NaN or inf gradient gives NaN there, a negative one -0.0).
template <typename T>
void host_relu_backward(const py::array_t<T, py::array::c_style>& x, const py::array_t<T, py::array::c_style>& g,
                        py::array_t<T, py::array::c_style>& out) {
  if (g.size() != x.size() || out.size() != x.size()) throw py::value_error("host_relu_backward: the arrays' sizes differ");
  const T* xs = x.data();
  const T* gs = g.data();
  T* y = out.mutable_data();
  const py::ssize_t n = x.size();
  using Bits = std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>;
  // g where it is kept (g * 1), g * 0 elsewhere, chosen by a bit mask: a select the compiler vectorises, where
  // a conditional became a branch that random signs mispredict half the time. (out may be x or g: each
  // element is read, then written, so no lane depends on another's write.)
#pragma GCC ivdep
  for (py::ssize_t i = 0; i < n; ++i) {
    const T g = gs[i], dropped = g * T(0);
    Bits kept_bits, dropped_bits;
    std::memcpy(&kept_bits, &g, sizeof(T));
    std::memcpy(&dropped_bits, &dropped, sizeof(T));
    const Bits mask = Bits(0) - static_cast<Bits>(!(xs[i] <= T(0)));
    const Bits bits = (kept_bits & mask) | (dropped_bits & ~mask);
    std::memcpy(&y[i], &bits, sizeof(T));
  }
}

// A kernel of two operands and ``out``, float32 and float64 (``f32``, ``f64``), bound under ``name``.
template <typename F32, typename F64>
void def_floats(py::module_& m, const char* name, F32 f32, F64 f64, const char* first, const char* second,
                const char* doc) {
  m.def(name, f32, py::arg(first).noconvert(), py::arg(second).noconvert(), py::arg("out").noconvert());
  m.def(name, f64, py::arg(first).noconvert(), py::arg(second).noconvert(), py::arg("out").noconvert(), doc);
}

}  // namespace

void bind_elementwise(py::module_& m) {
  m.def("host_has_avx2", &cpu_has_avx2, "Whether host_gelu(_tanh) and their backwards run here (AVX2 and FMA).");
  m.def("host_gelu", &host_gelu, py::arg("x").noconvert(), py::arg("out").noconvert(),
        "gelu (exact) of a row-major float32 array into ``out`` (row-major float32, as many elements; it may be x), "
        "in PyTorch's CPU order of operations, on eight AVX2 lanes. Only where host_has_avx2().");
  m.def("host_gelu_backward", &host_gelu_backward, py::arg("x").noconvert(), py::arg("g").noconvert(),
        py::arg("out").noconvert(),
        "g times gelu's derivative at x into ``out`` (row-major float32 arrays of one size), AVX2. Only where "
        "host_has_avx2().");
  m.def("host_gelu_tanh", &host_gelu_tanh, py::arg("x").noconvert(), py::arg("out").noconvert(),
        py::arg("inner") = py::none(),
        "gelu_tanh of a row-major float32 array into ``out`` (row-major float32, as many elements; it may be "
        "x), with the CUDA kernels' formula on eight AVX2 lanes; ``inner``: where to keep tanh's argument "
        "for the backward. Only where host_has_avx2().");
  m.def("host_gelu_tanh_backward", &host_gelu_tanh_backward, py::arg("x").noconvert(), py::arg("g").noconvert(),
        py::arg("out").noconvert(), py::arg("inner") = py::none(),
        "g times gelu_tanh's derivative at x into ``out`` (row-major float32 arrays of one size; out may be "
        "x or g), AVX2; ``inner``: what host_gelu_tanh kept for these x. Only where host_has_avx2().");
  m.def("host_unary_names", [] {
    py::list names;
    for (const Row& row : kRows) names.append(row.name);
    return names;
  }, "The unary table's op names in host_unary's order (elementwise_ops.def's).");
  // no array conversion: another dtype or a strided array raises TypeError, the caller's to handle
  m.def("host_unary", &host_unary_entry, py::arg("index"), py::arg("x"),
        "Unary op number ``index`` of host_unary_names() over a contiguous float32/float64 array, with the "
        "CUDA kernels' functor, in the array's dtype (a new array of its shape). Meant for small arrays: "
        "the GIL is held.");
  m.def("host_equal", &host_equal, py::arg("a"), py::arg("b"),
        "Whether two row-major arrays of one dtype (float32, float64, int64 or bool) and size hold equal "
        "values (NaN unequal, -0.0 == 0.0); None for other arrays. Meant for small arrays: the GIL is held.");
  m.def("host_binary_names", [] {
    py::list names;
    for (const BinaryRow& row : kBinaryRows) names.append(row.name);
    return names;
  }, "The binary ops host_binary computes, in its order.");
  m.def("host_binary", &host_binary_entry, py::arg("index"), py::arg("a"), py::arg("b"),
        "Binary op number ``index`` of host_binary_names() of two contiguous float32/float64 arrays of one shape "
        "and dtype, or of such an array and a Python float (taken in its dtype), with the CUDA kernels' "
        "functor (a new array). Meant for small arrays: the GIL is held.");
  // (out may be a or x, g: each element is read before it is written)
  def_floats(m, "host_bias_relu", &host_bias_relu<float>, &host_bias_relu<double>, "a", "bias",
             "relu(a + bias) into ``out``, bias (1-d) broadcast along a's last dim, rounded as np.add then "
             "np.maximum round it (row-major arrays of one float dtype).");
  def_floats(m, "host_relu_backward", &host_relu_backward<float>, &host_relu_backward<double>, "x", "g",
             "relu's backward g * (x > 0 or NaN, as 1 or 0) into ``out`` (row-major arrays of one float dtype "
             "and size).");
}

}  // namespace adcuda::host
