// Elementwise kernels: which functor (functors.cuh) runs for which op and dtype, over the shared loops
// of elementwise_loops.cuh. Each (op, dtype) pair instantiates one vectorised and one strided kernel,
// only for the dtypes the op is defined on; comparisons and bitwise/logical ops share one functor per
// dtype whose operation is a warp-uniform kernel argument, to keep the build small.
#include "elementwise.h"

#include <stdexcept>
#include <string>
#include <unordered_map>

#include "elementwise_loops.cuh"
#include "functors.cuh"

namespace adcuda {

namespace {

[[noreturn]] void unknown_op(const char* family, const std::string& op) {
  throw std::invalid_argument(std::string(family) + ": unknown op '" + op + "'");
}

[[noreturn]] void undefined_for(const std::string& op, ScalarType dtype) {
  throw std::invalid_argument(op + ": not defined for dtype " + scalar_type_name(dtype));
}

DeviceArray new_like(const Dims& shape, ScalarType dtype, const DeviceArray& on) {
  return DeviceArray::empty(shape, dtype, on.device());
}

// ---------------------------------------------------------------------------------------------------
// unary
enum class UnaryKind { FloatOnly, Numeric, Rounding, Bitwise, Logical };

struct UnaryEntry {
  UnaryKind kind;
  int id;
};

enum UnaryId {
  kNeg, kAbs, kExp, kLog, kLog1p, kSqrt, kRsqrt, kSin, kCos, kTanh, kSigmoid, kRelu, kGelu, kGeluTanh, kSilu,
  kSign, kErf, kFloor, kCeil, kTrunc, kRound, kExp2, kLog2, kLog10, kBitwiseNot, kLogicalNot
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
  };
  return table;
}

// Rare ops whose functors are long (trigonometric range reduction, divmod, pow) skip the vectorised
// kernel: four inlined copies each would cost build time for no training workload's benefit.
template <typename F>
constexpr bool vectorize() {
  return !(std::is_same_v<F, math::Sin> || std::is_same_v<F, math::Cos> || std::is_same_v<F, math::Pow> ||
           std::is_same_v<F, math::FloorDivide> || std::is_same_v<F, math::Remainder>);
}

template <typename T, typename F>
void run_unary(const F& f, const DeviceArray& out, const DeviceArray& a) {
  launch_map<T, vectorize<F>()>(f, out, Arg<T>::of(a));
}

template <typename T>
void unary_float_op(int id, const DeviceArray& out, const DeviceArray& a) {
  switch (id) {
    case kExp: return run_unary<T>(math::Exp{}, out, a);
    case kLog: return run_unary<T>(math::Log{}, out, a);
    case kLog1p: return run_unary<T>(math::Log1p{}, out, a);
    case kSqrt: return run_unary<T>(math::Sqrt{}, out, a);
    case kRsqrt: return run_unary<T>(math::Rsqrt{}, out, a);
    case kSin: return run_unary<T>(math::Sin{}, out, a);
    case kCos: return run_unary<T>(math::Cos{}, out, a);
    case kTanh: return run_unary<T>(math::Tanh{}, out, a);
    case kSigmoid: return run_unary<T>(math::Sigmoid{}, out, a);
    case kGelu: return run_unary<T>(math::Gelu{}, out, a);
    case kGeluTanh: return run_unary<T>(math::GeluTanh{}, out, a);
    case kSilu: return run_unary<T>(math::Silu{}, out, a);
    case kErf: return run_unary<T>(math::Erf{}, out, a);
    case kExp2: return run_unary<T>(math::Exp2{}, out, a);
    case kLog2: return run_unary<T>(math::Log2{}, out, a);
    case kLog10: return run_unary<T>(math::Log10{}, out, a);
    case kFloor: return run_unary<T>(math::Floor{}, out, a);
    case kCeil: return run_unary<T>(math::Ceil{}, out, a);
    case kTrunc: return run_unary<T>(math::Trunc{}, out, a);
    case kRound: return run_unary<T>(math::Round{}, out, a);
    default: break;
  }
}

template <typename T>
void unary_numeric_op(int id, const DeviceArray& out, const DeviceArray& a) {
  switch (id) {
    case kNeg: return run_unary<T>(math::Neg{}, out, a);
    case kAbs: return run_unary<T>(math::Abs{}, out, a);
    case kRelu: return run_unary<T>(math::Relu{}, out, a);
    case kSign: return run_unary<T>(math::Sign{}, out, a);
    default: break;
  }
}

// ---------------------------------------------------------------------------------------------------
// binary
enum class BinaryKind { Arithmetic, FloatOnly, Power, Extremum, Division, Compare, Logical, Bitwise };

// A float-only binary op launches its functor for any floating dtype; the table holds the launcher,
// so such an op is one functor in functors.cuh and one line in binary_table().
using FloatBinaryLauncher = void (*)(ScalarType, const char*, const DeviceArray&, const ArrayOrScalar&,
                                     const ArrayOrScalar&);

struct BinaryEntry {
  BinaryKind kind;
  int id;
  FloatBinaryLauncher float_launcher = nullptr;
};

enum BinaryId { kAdd, kSub, kMul, kPow, kMaximum, kMinimum, kFloorDivide, kRemainder };

template <typename T>
Arg<T> arg_of(const ArrayOrScalar& x) {
  return x.array ? Arg<T>::of(*x.array) : Arg<T>::value(scalar_to_compute<T>(x.scalar));
}

template <typename T, typename Out, typename F>
void run_binary(const F& f, const DeviceArray& out, const ArrayOrScalar& a, const ArrayOrScalar& b) {
  launch_map<Out, vectorize<F>()>(f, out, arg_of<T>(a), arg_of<T>(b));
}

template <typename F>
void launch_float_binary(ScalarType dtype, const char* name, const DeviceArray& out, const ArrayOrScalar& a,
                         const ArrayOrScalar& b) {
  dispatch_floating(dtype, name, [&](auto tag) {
    using T = typename decltype(tag)::type;
    run_binary<T, T>(F{}, out, a, b);
  });
}

const std::unordered_map<std::string, BinaryEntry>& binary_table() {
  static const std::unordered_map<std::string, BinaryEntry> table = {
      {"add", {BinaryKind::Arithmetic, kAdd}},
      {"sub", {BinaryKind::Arithmetic, kSub}},
      {"mul", {BinaryKind::Arithmetic, kMul}},
      {"div", {BinaryKind::FloatOnly, 0, &launch_float_binary<math::Div>}},
      {"logaddexp", {BinaryKind::FloatOnly, 0, &launch_float_binary<math::LogAddExp>}},
      {"hypot", {BinaryKind::FloatOnly, 0, &launch_float_binary<math::Hypot>}},
      {"pow", {BinaryKind::Power, kPow}},
      {"maximum", {BinaryKind::Extremum, kMaximum}},
      {"minimum", {BinaryKind::Extremum, kMinimum}},
      {"floor_divide", {BinaryKind::Division, kFloorDivide}},
      {"remainder", {BinaryKind::Division, kRemainder}},
      {"eq", {BinaryKind::Compare, static_cast<int>(math::CompareOp::Eq)}},
      {"ne", {BinaryKind::Compare, static_cast<int>(math::CompareOp::Ne)}},
      {"lt", {BinaryKind::Compare, static_cast<int>(math::CompareOp::Lt)}},
      {"le", {BinaryKind::Compare, static_cast<int>(math::CompareOp::Le)}},
      {"gt", {BinaryKind::Compare, static_cast<int>(math::CompareOp::Gt)}},
      {"ge", {BinaryKind::Compare, static_cast<int>(math::CompareOp::Ge)}},
      {"logical_and", {BinaryKind::Logical, static_cast<int>(math::BitOp::And)}},
      {"logical_or", {BinaryKind::Logical, static_cast<int>(math::BitOp::Or)}},
      {"logical_xor", {BinaryKind::Logical, static_cast<int>(math::BitOp::Xor)}},
      {"bitwise_and", {BinaryKind::Bitwise, static_cast<int>(math::BitOp::And)}},
      {"bitwise_or", {BinaryKind::Bitwise, static_cast<int>(math::BitOp::Or)}},
      {"bitwise_xor", {BinaryKind::Bitwise, static_cast<int>(math::BitOp::Xor)}},
  };
  return table;
}

// The operand with its array in `dtype` (a cast copy if it is in another).
ArrayOrScalar in_dtype(const ArrayOrScalar& x, ScalarType dtype) {
  if (!x.array || x.array->dtype() == dtype) return x;
  return ArrayOrScalar{astype(*x.array, dtype), x.scalar};
}

Dims operand_shape(const ArrayOrScalar& x) { return x.array ? x.array->shape() : Dims{}; }

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

DeviceArray binary(const std::string& op, const ArrayOrScalar& a_in, const ArrayOrScalar& b_in, ScalarType dtype) {
  const auto found = binary_table().find(op);
  if (found == binary_table().end()) unknown_op("binary", op);
  if (!a_in.array && !b_in.array) throw std::invalid_argument(op + ": needs at least one array operand");
  BinaryKind kind = found->second.kind;
  int id = found->second.id;
  const DeviceArray& ref = a_in.array ? *a_in.array : *b_in.array;

  // bool arithmetic is logical, as NumPy's: add/maximum are or, mul/minimum are and
  if (dtype == ScalarType::Bool && (kind == BinaryKind::Arithmetic || kind == BinaryKind::Extremum)) {
    if (id == kAdd || id == kMaximum) {
      kind = BinaryKind::Bitwise, id = static_cast<int>(math::BitOp::Or);
    } else if (id == kMul || id == kMinimum) {
      kind = BinaryKind::Bitwise, id = static_cast<int>(math::BitOp::And);
    } else {
      throw std::invalid_argument(op + ": subtraction of bool arrays is not supported; use logical_xor");
    }
  }
  // logical ops read each operand's truth value, whatever its dtype
  const ScalarType work = kind == BinaryKind::Logical ? ScalarType::Bool : dtype;
  const ArrayOrScalar a = in_dtype(a_in, work);
  const ArrayOrScalar b = in_dtype(b_in, work);
  const Dims a_shape = operand_shape(a);
  const Dims b_shape = operand_shape(b);
  const Dims shape = broadcast_shapes(op.c_str(), {&a_shape, &b_shape});
  const bool bool_result = kind == BinaryKind::Compare || kind == BinaryKind::Logical;
  DeviceArray out = new_like(shape, bool_result ? ScalarType::Bool : dtype, ref);
  const char* name = op.c_str();

  switch (kind) {
    case BinaryKind::Arithmetic:
      dispatch_numeric(dtype, name, [&](auto tag) {
        using T = typename decltype(tag)::type;
        if (id == kAdd) run_binary<T, T>(math::Add{}, out, a, b);
        else if (id == kSub) run_binary<T, T>(math::Sub{}, out, a, b);
        else run_binary<T, T>(math::Mul{}, out, a, b);
      });
      break;
    case BinaryKind::FloatOnly:
      found->second.float_launcher(dtype, name, out, a, b);
      break;
    case BinaryKind::Power:
      dispatch_numeric(dtype, name, [&](auto tag) {
        using T = typename decltype(tag)::type;
        run_binary<T, T>(math::Pow{}, out, a, b);
      });
      break;
    case BinaryKind::Extremum:
      dispatch_numeric(dtype, name, [&](auto tag) {
        using T = typename decltype(tag)::type;
        if (id == kMaximum) run_binary<T, T>(math::Maximum{}, out, a, b);
        else run_binary<T, T>(math::Minimum{}, out, a, b);
      });
      break;
    case BinaryKind::Division:
      dispatch_numeric(dtype, name, [&](auto tag) {
        using T = typename decltype(tag)::type;
        if (id == kFloorDivide) run_binary<T, T>(math::FloorDivide{}, out, a, b);
        else run_binary<T, T>(math::Remainder{}, out, a, b);
      });
      break;
    case BinaryKind::Compare:
      dispatch_type(dtype, name, [&](auto tag) {
        using T = typename decltype(tag)::type;
        run_binary<T, bool>(math::Compare{static_cast<math::CompareOp>(id)}, out, a, b);
      });
      break;
    case BinaryKind::Logical:
      run_binary<bool, bool>(math::Bitwise{static_cast<math::BitOp>(id)}, out, a, b);
      break;
    case BinaryKind::Bitwise:
      dispatch_integral(dtype, name, [&](auto tag) {
        using T = typename decltype(tag)::type;
        run_binary<T, T>(math::Bitwise{static_cast<math::BitOp>(id)}, out, a, b);
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

DeviceArray where(const DeviceArray& cond_in, const ArrayOrScalar& a_in, const ArrayOrScalar& b_in,
                  ScalarType dtype) {
  const DeviceArray cond = cond_in.dtype() == ScalarType::Bool ? cond_in : astype(cond_in, ScalarType::Bool);
  const ArrayOrScalar a = in_dtype(a_in, dtype);
  const ArrayOrScalar b = in_dtype(b_in, dtype);
  const Dims a_shape = operand_shape(a);
  const Dims b_shape = operand_shape(b);
  const Dims shape = broadcast_shapes("where", {&cond.shape(), &a_shape, &b_shape});
  DeviceArray out = new_like(shape, dtype, cond);
  dispatch_type(dtype, "where", [&](auto tag) {
    using T = typename decltype(tag)::type;
    launch_map<T>(math::Select{}, out, Arg<bool>::of(cond), arg_of<T>(a), arg_of<T>(b));
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
