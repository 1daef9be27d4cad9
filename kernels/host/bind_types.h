// One binding per element type: `for_types<float, double>([&](auto type) { m.def(..., &f<decltype(type)>, ...); })`
// binds the overloads of a host function template for each of the types its array argument may have
// (kernels/host/reduce.cpp, sort.cpp), so a function's binding is written once, not once per type.
// ``RowMajor<T>``: the C-contiguous array of T such a function takes (with ``noconvert``: no copy).
#pragma once

#include <pybind11/numpy.h>

namespace adcuda::host {

template <typename T>
using RowMajor = pybind11::array_t<T, pybind11::array::c_style>;

template <typename... Ts, typename Bind>
void for_types(Bind bind) {
  (bind(Ts{}), ...);
}

}  // namespace adcuda::host
