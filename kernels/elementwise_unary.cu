// Unary elementwise kernels: which functor (functors.cuh) runs for which unary op and dtype, their
// fused backward and clamp, over the shared loops of elementwise_loops.cuh. The ops, their kinds and
// functors are the X-macro list elementwise_ops.def, generated from adcuda/backends/elementwise_table.py
// (the table the CPU backend's dispatch is made from too). Each (op, dtype) pair instantiates one
// vectorised and one strided kernel, only for the dtypes the op's kind takes (and the rare ops none for
// float16/bfloat16, which compute them through float32: half_via_float32).
// Binary ops and where are in elementwise_binary.cu.
#include "elementwise.h"

#include <string>
#include <type_traits>
#include <unordered_map>

#include "elementwise_dispatch.cuh"

namespace adcuda {

namespace {

using namespace elementwise_detail;

enum class UnaryKind { FloatOnly, Numeric, Rounding, Bitwise, Logical };

// The ops of elementwise_ops.def (generated from adcuda/backends/elementwise_table.py, the one table of
// both backends), numbered in its order.
enum class UnaryId : int {
#define ADCUDA_UNARY(name, kind, functor, half_via_float32, bool_is_identity) name,
#include "elementwise_ops.def"
};

// half_via_float32: the rare ops no training step runs in half precision, which float16 and bfloat16
// compute through float32 (unary() says why); bool_is_identity: abs and relu of bools are the bools.
struct UnaryEntry {
  UnaryKind kind;
  UnaryId id;
  bool half_via_float32;
  bool bool_is_identity;
};

const std::unordered_map<std::string, UnaryEntry>& unary_table() {
  static const std::unordered_map<std::string, UnaryEntry> table = {
#define ADCUDA_UNARY(name, kind, functor, half_via_float32, bool_is_identity) \
  {#name, {UnaryKind::kind, UnaryId::name, half_via_float32, bool_is_identity}},
#include "elementwise_ops.def"
  };
  return table;
}

// Op `id` (of kind K) on storage type T. Each dispatcher of unary() instantiates this for its kind's
// dtypes, so each op's functor gets kernels only for the dtypes of its kind, and for float16/bfloat16
// only where it does not compute through float32.
template <UnaryKind K, typename T>
void unary_op(UnaryId id, const DeviceArray& out, const DeviceArray& a) {
  using Out = std::conditional_t<K == UnaryKind::Logical, bool, T>;
  switch (id) {
#define ADCUDA_UNARY(name, kind, functor, half_via_float32, bool_is_identity)             \
  case UnaryId::name:                                                                      \
    if constexpr (UnaryKind::kind == K && !(half_via_float32 && is_reduced_float_v<T>)) {  \
      launch_map<Out, vectorize<math::functor>()>(math::functor{}, out, Arg<T>::of(a));   \
    }                                                                                      \
    return;
#include "elementwise_ops.def"
  }
}

// unary_op over the dtypes of kind K: its dispatcher (the dtype subsets of elementwise_loops.cuh).
template <UnaryKind K>
void run_kind(const std::string& op, UnaryId id, const DeviceArray& out, const DeviceArray& a) {
  const auto launch = [&](auto tag) { unary_op<K, typename decltype(tag)::type>(id, out, a); };
  if constexpr (K == UnaryKind::FloatOnly || K == UnaryKind::Rounding) dispatch_floating(a.dtype(), op.c_str(), launch);
  else if constexpr (K == UnaryKind::Numeric) dispatch_numeric(a.dtype(), op.c_str(), launch);
  else if constexpr (K == UnaryKind::Bitwise) dispatch_integral(a.dtype(), op.c_str(), launch);
  else dispatch_type(a.dtype(), op.c_str(), launch);
}

template <typename T, typename F>
void run_unary(const F& f, const DeviceArray& out, const DeviceArray& a) {
  launch_map<T, vectorize<F>()>(f, out, Arg<T>::of(a));
}

// The fused gradients of elementwise_ops.def, and the saved array each reads: the input x or the output y.
enum class UnaryBackwardId : int {
#define ADCUDA_UNARY_BACKWARD(name, reads, functor) name,
#include "elementwise_ops.def"
};
enum class Reads { X, Y };

struct UnaryBackwardEntry {
  UnaryBackwardId id;
  Reads reads;
};

const std::unordered_map<std::string, UnaryBackwardEntry>& unary_backward_table() {
  static const std::unordered_map<std::string, UnaryBackwardEntry> table = {
#define ADCUDA_UNARY_BACKWARD(name, reads, functor) {#name, {UnaryBackwardId::name, Reads::reads}},
#include "elementwise_ops.def"
  };
  return table;
}

}  // namespace

DeviceArray unary(const std::string& op, const DeviceArray& a) {
  const auto found = unary_table().find(op);
  if (found == unary_table().end()) unknown_op("unary", op);
  const UnaryEntry& entry = found->second;
  const UnaryKind kind = entry.kind;
  const UnaryId id = entry.id;
  const ScalarType dtype = a.dtype();
  const bool floating = is_floating_point(dtype);
  if (kind == UnaryKind::Rounding && !floating) return astype(a, dtype);  // integers are already whole
  if (kind == UnaryKind::Numeric && dtype == ScalarType::Bool) {
    if (entry.bool_is_identity) return astype(a, dtype);
    undefined_for(op, dtype);
  }
  // float16/bfloat16 kernels compute in float32 and round once, so computing these rare ops in float32
  // between two casts gives the same values: two cast passes more, where a vectorised and a strided
  // kernel per op and dtype of their own would cost build time for no training workload.
  if ((dtype == ScalarType::Float16 || dtype == ScalarType::BFloat16) && entry.half_via_float32) {
    return astype(unary(op, astype(a, ScalarType::Float32)), dtype);
  }
  DeviceArray out = new_like(a.shape(), kind == UnaryKind::Logical ? ScalarType::Bool : dtype, a);
  switch (kind) {
    case UnaryKind::FloatOnly:
      if (!floating) undefined_for(op, dtype);
      run_kind<UnaryKind::FloatOnly>(op, id, out, a);
      break;
    case UnaryKind::Rounding: run_kind<UnaryKind::Rounding>(op, id, out, a); break;
    case UnaryKind::Numeric: run_kind<UnaryKind::Numeric>(op, id, out, a); break;
    case UnaryKind::Bitwise: run_kind<UnaryKind::Bitwise>(op, id, out, a); break;
    case UnaryKind::Logical: run_kind<UnaryKind::Logical>(op, id, out, a); break;
  }
  return out;
}

DeviceArray unary_backward(const std::string& op, const std::optional<DeviceArray>& x,
                           const std::optional<DeviceArray>& y, const DeviceArray& g) {
  const auto found = unary_backward_table().find(op);
  if (found == unary_backward_table().end()) unknown_op("unary_backward", op);
  const UnaryBackwardId id = found->second.id;
  const bool from_input = found->second.reads == Reads::X;
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
#define ADCUDA_UNARY_BACKWARD(name, reads, functor) \
  case UnaryBackwardId::name: return launch_map<T>(math::functor{}, out, x_arg, y_arg, g_arg);
#include "elementwise_ops.def"
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
