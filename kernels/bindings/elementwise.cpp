// Python bindings of the elementwise kernels (kernels/elementwise.h); the Python primitives over them
// are in adcuda/backends/cuda/elementwise.py. Operands arrive as a DeviceArray or a Python scalar and are
// converted while the GIL is held; the kernels are queued with it released.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <optional>
#include <string>

#include "bindings/registry.h"
#include "elementwise.h"

namespace py = pybind11;
using adcuda::DeviceArray;
using adcuda::ScalarType;

namespace {

adcuda::Scalar scalar_of(const py::handle& value) {
  if (py::isinstance<py::bool_>(value)) return adcuda::Scalar::from_bool(value.cast<bool>());
  if (py::isinstance<py::int_>(value)) return adcuda::Scalar::from_int(value.cast<std::int64_t>());
  return adcuda::Scalar::from_float(value.cast<double>());
}

adcuda::ArrayOrScalar operand_of(const py::handle& value) {
  if (py::isinstance<DeviceArray>(value)) return {value.cast<DeviceArray>(), adcuda::Scalar::from_int(0)};
  return {std::nullopt, scalar_of(value)};
}

std::optional<adcuda::Scalar> bound_of(const py::handle& value) {
  if (value.is_none()) return std::nullopt;
  return scalar_of(value);
}

}  // namespace

ADCUDA_REGISTER_BINDINGS(elementwise, 10) {
  m.def("unary", &adcuda::unary, py::arg("op"), py::arg("a"), py::call_guard<py::gil_scoped_release>(),
        "op(a) elementwise, in a's dtype (logical_not: bool); a new contiguous array.");
  m.def(
      "binary",
      [](const std::string& op, const py::object& a, const py::object& b, ScalarType dtype) {
        const adcuda::ArrayOrScalar x = operand_of(a);
        const adcuda::ArrayOrScalar y = operand_of(b);
        py::gil_scoped_release release;
        return adcuda::binary(op, x, y, dtype);
      },
      py::arg("op"), py::arg("a"), py::arg("b"), py::arg("dtype"),
      "op(a, b) with broadcasting, operands (DeviceArray or Python scalar) taken in `dtype`; comparisons and "
      "logical ops give bool.");
  m.def("unary_backward", &adcuda::unary_backward, py::arg("op"), py::arg("x"), py::arg("y"), py::arg("g"),
        py::call_guard<py::gil_scoped_release>(), "The fused gradient of unary op `op` (one kernel).");
  m.def(
      "where",
      [](const DeviceArray& cond, const py::object& a, const py::object& b, ScalarType dtype) {
        const adcuda::ArrayOrScalar x = operand_of(a);
        const adcuda::ArrayOrScalar y = operand_of(b);
        py::gil_scoped_release release;
        return adcuda::where(cond, x, y, dtype);
      },
      py::arg("cond"), py::arg("a"), py::arg("b"), py::arg("dtype"), "cond ? a : b, broadcast, in `dtype`.");
  m.def(
      "clamp",
      [](const DeviceArray& a, const py::object& lo, const py::object& hi) {
        const std::optional<adcuda::Scalar> low = bound_of(lo);
        const std::optional<adcuda::Scalar> high = bound_of(hi);
        py::gil_scoped_release release;
        return adcuda::clamp(a, low, high);
      },
      py::arg("a"), py::arg("lo"), py::arg("hi"), "a clamped to [lo, hi]; None leaves a side open.");
}
