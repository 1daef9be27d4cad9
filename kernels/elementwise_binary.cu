// Binary elementwise kernels and where: which functor (functors.cuh) runs for which op and dtype, over
// the shared loops of elementwise_loops.cuh. Each (op, dtype) pair instantiates one vectorised and one
// strided kernel, only for the dtypes the op is defined on; comparisons and bitwise/logical ops share
// one functor per dtype whose operation is a warp-uniform kernel argument, to keep the build small.
// Unary ops are in elementwise_unary.cu.
#include "elementwise.h"

#include <string>
#include <unordered_map>

#include "elementwise_dispatch.cuh"

namespace adcuda {

namespace {

using namespace elementwise_detail;

enum class BinaryKind { Arithmetic, FloatOnly, Power, Extremum, Division, Compare, Logical, Bitwise, Integer };

// A float-only binary op launches its functor for any floating dtype; the table holds the launcher,
// so such an op is one functor in functors.cuh and one row of FLOAT_BINARY in
// adcuda/backends/elementwise_table.py (its lines of elementwise_ops.def, included in binary_table()).
using FloatBinaryLauncher = void (*)(ScalarType, const char*, const DeviceArray&, const ArrayOrScalar&,
                                     const ArrayOrScalar&);

struct BinaryEntry {
  BinaryKind kind;
  int id;
  FloatBinaryLauncher float_launcher = nullptr;
};

enum BinaryId { kAdd, kSub, kMul, kPow, kMaximum, kMinimum, kFloorDivide, kRemainder, kFmod, kGcd, kLcm };

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
// the binary functions of floating operands: one row each of elementwise_table.py's FLOAT_BINARY
#define ADCUDA_FLOAT_BINARY(name, functor) {#name, {BinaryKind::FloatOnly, 0, &launch_float_binary<math::functor>}},
#include "elementwise_ops.def"
      {"gcd", {BinaryKind::Integer, kGcd}},
      {"lcm", {BinaryKind::Integer, kLcm}},
      {"pow", {BinaryKind::Power, kPow}},
      {"maximum", {BinaryKind::Extremum, kMaximum}},
      {"minimum", {BinaryKind::Extremum, kMinimum}},
      {"floor_divide", {BinaryKind::Division, kFloorDivide}},
      {"remainder", {BinaryKind::Division, kRemainder}},
      {"fmod", {BinaryKind::Division, kFmod}},
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
        else if (id == kRemainder) run_binary<T, T>(math::Remainder{}, out, a, b);
        else run_binary<T, T>(math::Fmod{}, out, a, b);
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
    case BinaryKind::Integer: {  // gcd, lcm: int32 and int64 only
      auto run = [&](auto tag) {
        using T = typename decltype(tag)::type;
        if (id == kGcd) run_binary<T, T>(math::Gcd{}, out, a, b);
        else run_binary<T, T>(math::Lcm{}, out, a, b);
      };
      if (dtype == ScalarType::Int32) run(TypeTag<std::int32_t>{});
      else if (dtype == ScalarType::Int64) run(TypeTag<std::int64_t>{});
      else throw std::invalid_argument(op + ": not defined for dtype " + scalar_type_name(dtype) + " (integer dtypes only)");
      break;
    }
  }
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

}  // namespace adcuda
