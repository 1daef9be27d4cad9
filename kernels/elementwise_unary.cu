// Unary elementwise kernels: which functor (functors.cuh) runs for which unary op and dtype, their
// fused backward and clamp, over the shared loops of elementwise_loops.cuh. Each (op, dtype) pair
// instantiates one vectorised and one strided kernel, only for the dtypes the op is defined on (and the
// rare ops none for float16/bfloat16, which compute them through float32: through_float32).
// Binary ops and where are in elementwise_binary.cu.
#include "elementwise.h"

#include <string>
#include <unordered_map>

#include "elementwise_dispatch.cuh"

namespace adcuda {

namespace {

using namespace elementwise_detail;

enum class UnaryKind { FloatOnly, Numeric, Rounding, Bitwise, Logical };

struct UnaryEntry {
  UnaryKind kind;
  int id;
};

enum UnaryId {
  kNeg, kAbs, kExp, kLog, kLog1p, kSqrt, kRsqrt, kSin, kCos, kTanh, kSigmoid, kRelu, kGelu, kGeluTanh, kSilu,
  kSign, kErf, kFloor, kCeil, kTrunc, kRound, kExp2, kLog2, kLog10, kBitwiseNot, kLogicalNot,
  // issue 27's inverse trigonometric and hyperbolic functions and erfc
  kAsin, kAcos, kAtan, kAsinh, kAcosh, kAtanh, kErfc,
  kLgamma, kDigamma, kTrigamma, kErfinv
};

const std::unordered_map<std::string, UnaryEntry>& unary_table() {
  static const std::unordered_map<std::string, UnaryEntry> table = {
      {"neg", {UnaryKind::Numeric, kNeg}},         {"abs", {UnaryKind::Numeric, kAbs}},
      {"relu", {UnaryKind::Numeric, kRelu}},       {"sign", {UnaryKind::Numeric, kSign}},
      {"exp", {UnaryKind::FloatOnly, kExp}},       {"log", {UnaryKind::FloatOnly, kLog}},
      {"log1p", {UnaryKind::FloatOnly, kLog1p}},   {"sqrt", {UnaryKind::FloatOnly, kSqrt}},
      {"rsqrt", {UnaryKind::FloatOnly, kRsqrt}},   {"sin", {UnaryKind::FloatOnly, kSin}},
      {"cos", {UnaryKind::FloatOnly, kCos}},       {"tanh", {UnaryKind::FloatOnly, kTanh}},
      {"sigmoid", {UnaryKind::FloatOnly, kSigmoid}}, {"gelu", {UnaryKind::FloatOnly, kGelu}},
      {"gelu_tanh", {UnaryKind::FloatOnly, kGeluTanh}}, {"silu", {UnaryKind::FloatOnly, kSilu}},
      {"erf", {UnaryKind::FloatOnly, kErf}},       {"exp2", {UnaryKind::FloatOnly, kExp2}},
      {"log2", {UnaryKind::FloatOnly, kLog2}},     {"log10", {UnaryKind::FloatOnly, kLog10}},
      {"floor", {UnaryKind::Rounding, kFloor}},    {"ceil", {UnaryKind::Rounding, kCeil}},
      {"trunc", {UnaryKind::Rounding, kTrunc}},    {"round", {UnaryKind::Rounding, kRound}},
      {"bitwise_not", {UnaryKind::Bitwise, kBitwiseNot}}, {"logical_not", {UnaryKind::Logical, kLogicalNot}},
      // issue 27's names
      {"asin", {UnaryKind::FloatOnly, kAsin}},     {"acos", {UnaryKind::FloatOnly, kAcos}},
      {"atan", {UnaryKind::FloatOnly, kAtan}},     {"asinh", {UnaryKind::FloatOnly, kAsinh}},
      {"acosh", {UnaryKind::FloatOnly, kAcosh}},   {"atanh", {UnaryKind::FloatOnly, kAtanh}},
      {"erfc", {UnaryKind::FloatOnly, kErfc}},
      {"lgamma", {UnaryKind::FloatOnly, kLgamma}}, {"digamma", {UnaryKind::FloatOnly, kDigamma}},
      {"trigamma", {UnaryKind::FloatOnly, kTrigamma}}, {"erfinv", {UnaryKind::FloatOnly, kErfinv}},
  };
  return table;
}

template <typename T, typename F>
void run_unary(const F& f, const DeviceArray& out, const DeviceArray& a) {
  launch_map<T, vectorize<F>()>(f, out, Arg<T>::of(a));
}

// The unary ops that float16 and bfloat16 compute through float32 (unary() says why): the ones no
// training step runs in half precision. Every other op has its own kernels for every dtype it takes.
constexpr bool through_float32_27(int id) {
  return id == kAsin || id == kAcos || id == kAtan || id == kAsinh || id == kAcosh || id == kAtanh || id == kErfc;
}
constexpr bool through_float32(int id) {
  return id == kLog1p || id == kSin || id == kCos || id == kErf || id == kExp2 || id == kLog2 || id == kLog10 ||
         id == kFloor || id == kCeil || id == kTrunc || id == kRound || id == kSign || id == kLgamma ||
         id == kDigamma || id == kTrigamma || id == kErfinv || through_float32_27(id);
}

template <typename T>
void unary_float_op(int id, const DeviceArray& out, const DeviceArray& a) {
  if constexpr (!is_reduced_float_v<T>) {
    switch (id) {
      case kLog1p: return run_unary<T>(math::Log1p{}, out, a);
      case kSin: return run_unary<T>(math::Sin{}, out, a);
      case kCos: return run_unary<T>(math::Cos{}, out, a);
      case kErf: return run_unary<T>(math::Erf{}, out, a);
      case kExp2: return run_unary<T>(math::Exp2{}, out, a);
      case kLog2: return run_unary<T>(math::Log2{}, out, a);
      case kLog10: return run_unary<T>(math::Log10{}, out, a);
      case kFloor: return run_unary<T>(math::Floor{}, out, a);
      case kCeil: return run_unary<T>(math::Ceil{}, out, a);
      case kTrunc: return run_unary<T>(math::Trunc{}, out, a);
      case kRound: return run_unary<T>(math::Round{}, out, a);
      // issue 27's names
      case kAsin: return run_unary<T>(math::Asin{}, out, a);
      case kAcos: return run_unary<T>(math::Acos{}, out, a);
      case kAtan: return run_unary<T>(math::Atan{}, out, a);
      case kAsinh: return run_unary<T>(math::Asinh{}, out, a);
      case kAcosh: return run_unary<T>(math::Acosh{}, out, a);
      case kAtanh: return run_unary<T>(math::Atanh{}, out, a);
      case kErfc: return run_unary<T>(math::Erfc{}, out, a);
      case kLgamma: return run_unary<T>(math::Lgamma{}, out, a);
      case kDigamma: return run_unary<T>(math::Digamma{}, out, a);
      case kTrigamma: return run_unary<T>(math::Trigamma{}, out, a);
      case kErfinv: return run_unary<T>(math::Erfinv{}, out, a);
      default: break;
    }
  }
  switch (id) {
    case kExp: return run_unary<T>(math::Exp{}, out, a);
    case kLog: return run_unary<T>(math::Log{}, out, a);
    case kSqrt: return run_unary<T>(math::Sqrt{}, out, a);
    case kRsqrt: return run_unary<T>(math::Rsqrt{}, out, a);
    case kTanh: return run_unary<T>(math::Tanh{}, out, a);
    case kSigmoid: return run_unary<T>(math::Sigmoid{}, out, a);
    case kGelu: return run_unary<T>(math::Gelu{}, out, a);
    case kGeluTanh: return run_unary<T>(math::GeluTanh{}, out, a);
    case kSilu: return run_unary<T>(math::Silu{}, out, a);
    default: break;
  }
}

template <typename T>
void unary_numeric_op(int id, const DeviceArray& out, const DeviceArray& a) {
  if constexpr (!is_reduced_float_v<T>) {
    if (id == kSign) return run_unary<T>(math::Sign{}, out, a);
  }
  switch (id) {
    case kNeg: return run_unary<T>(math::Neg{}, out, a);
    case kAbs: return run_unary<T>(math::Abs{}, out, a);
    case kRelu: return run_unary<T>(math::Relu{}, out, a);
    default: break;
  }
}

}  // namespace

DeviceArray unary(const std::string& op, const DeviceArray& a) {
  const auto found = unary_table().find(op);
  if (found == unary_table().end()) unknown_op("unary", op);
  const UnaryKind kind = found->second.kind;
  const int id = found->second.id;
  const ScalarType dtype = a.dtype();
  const bool floating = is_floating_point(dtype);
  if (kind == UnaryKind::Rounding && !floating) return astype(a, dtype);  // integers are already whole
  if (kind == UnaryKind::Numeric && dtype == ScalarType::Bool) {
    if (id == kAbs || id == kRelu) return astype(a, dtype);
    undefined_for(op, dtype);
  }
  // float16/bfloat16 kernels compute in float32 and round once, so computing these rare ops in float32
  // between two casts gives the same values: two cast passes more, where a vectorised and a strided
  // kernel per op and dtype of their own would cost build time for no training workload.
  if ((dtype == ScalarType::Float16 || dtype == ScalarType::BFloat16) && through_float32(id)) {
    return astype(unary(op, astype(a, ScalarType::Float32)), dtype);
  }
  DeviceArray out = new_like(a.shape(), kind == UnaryKind::Logical ? ScalarType::Bool : dtype, a);
  switch (kind) {
    case UnaryKind::FloatOnly:
    case UnaryKind::Rounding:
      if (!floating) undefined_for(op, dtype);
      dispatch_floating(dtype, op.c_str(), [&](auto tag) { unary_float_op<typename decltype(tag)::type>(id, out, a); });
      break;
    case UnaryKind::Numeric:
      dispatch_numeric(dtype, op.c_str(), [&](auto tag) { unary_numeric_op<typename decltype(tag)::type>(id, out, a); });
      break;
    case UnaryKind::Bitwise:
      dispatch_integral(dtype, op.c_str(), [&](auto tag) {
        using T = typename decltype(tag)::type;
        run_unary<T>(math::BitwiseNot{}, out, a);
      });
      break;
    case UnaryKind::Logical:
      dispatch_type(dtype, op.c_str(), [&](auto tag) {
        using T = typename decltype(tag)::type;
        launch_map<bool>(math::LogicalNot{}, out, Arg<T>::of(a));
      });
      break;
  }
  return out;
}

DeviceArray unary_backward(const std::string& op, const std::optional<DeviceArray>& x,
                           const std::optional<DeviceArray>& y, const DeviceArray& g) {
  static const std::unordered_map<std::string, int> ops = {
      {"relu", 0}, {"gelu", 1}, {"gelu_tanh", 2}, {"silu", 3}, {"sigmoid", 4}, {"tanh", 5}};
  const auto found = ops.find(op);
  if (found == ops.end()) unknown_op("unary_backward", op);
  const int id = found->second;
  const bool from_input = id <= 3;
  const std::optional<DeviceArray>& saved = from_input ? x : y;
  if (!saved) {
    throw std::invalid_argument("unary_backward: " + op + " needs its " + (from_input ? "input x" : "output y"));
  }
  const ScalarType dtype = g.dtype();
  const DeviceArray s = saved->dtype() == dtype ? *saved : astype(*saved, dtype);
  const Dims shape = broadcast_shapes(("unary_backward " + op).c_str(), {&s.shape(), &g.shape()});
  DeviceArray out = new_like(shape, dtype, g);
  dispatch_floating(dtype, "unary_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = compute_t<T>;
    // the functors take (x, y, g); the unused one is a scalar that is never read
    const Arg<T> saved_arg = Arg<T>::of(s);
    const Arg<T> unused = Arg<T>::value(C(0));
    const Arg<T>& x_arg = from_input ? saved_arg : unused;
    const Arg<T>& y_arg = from_input ? unused : saved_arg;
    const Arg<T> g_arg = Arg<T>::of(g);
    switch (id) {
      case 0: return launch_map<T>(math::ReluBackward{}, out, x_arg, y_arg, g_arg);
      case 1: return launch_map<T>(math::GeluBackward{}, out, x_arg, y_arg, g_arg);
      case 2: return launch_map<T>(math::GeluTanhBackward{}, out, x_arg, y_arg, g_arg);
      case 3: return launch_map<T>(math::SiluBackward{}, out, x_arg, y_arg, g_arg);
      case 4: return launch_map<T>(math::SigmoidBackward{}, out, x_arg, y_arg, g_arg);
      default: return launch_map<T>(math::TanhBackward{}, out, x_arg, y_arg, g_arg);
    }
  });
  return out;
}

DeviceArray clamp(const DeviceArray& a, const std::optional<Scalar>& lo, const std::optional<Scalar>& hi) {
  DeviceArray out = new_like(a.shape(), a.dtype(), a);
  dispatch_numeric(a.dtype(), "clamp", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = compute_t<T>;
    const math::Clamp<C> f{lo ? scalar_to_compute<T>(*lo) : C(0), hi ? scalar_to_compute<T>(*hi) : C(0),
                           lo.has_value(), hi.has_value()};
    run_unary<T>(f, out, a);
  });
  return out;
}

}  // namespace adcuda
