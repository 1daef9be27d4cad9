// How the native files that know Python add to adcuda._C. Each family of kernels binds itself from its
// own file, kernels/bindings/<family>.cpp, without editing a shared list:
//
//   ADCUDA_REGISTER_BINDINGS(elementwise, 10) {
//     m.def("unary", [](const std::string& op, const adcuda::DeviceArray& a) { ... },
//           py::call_guard<py::gil_scoped_release>());
//   }
//
// Registrations run in (order, name) order when the module is imported; the runtime (order 0) comes
// first, since it registers the types (DeviceArray, ScalarType) the families take and return.
// kernels/bindings/*.cpp are compiled only in a CUDA build, and there as one translation unit (CMake's
// unity build, CMakeLists.txt says why): a helper in a file's anonymous namespace needs a name no other
// binding file uses.
#pragma once

#include <pybind11/pybind11.h>

namespace adcuda::bindings {

using BindFunction = void (*)(pybind11::module_&);

struct Registration {
  Registration(const char* name, int order, BindFunction bind);
};

// Runs every registered BindFunction on `m`.
void bind_registered(pybind11::module_& m);

}  // namespace adcuda::bindings

#define ADCUDA_REGISTER_BINDINGS(name, order)                                                           \
  static void adcuda_bind_##name(pybind11::module_& m);                                                 \
  static const ::adcuda::bindings::Registration adcuda_registration_##name(#name, order, &adcuda_bind_##name); \
  static void adcuda_bind_##name(pybind11::module_& m)
