// One binding per element type: `for_types<float, double>([&](auto type) { m.def(..., &f<decltype(type)>, ...); })`
// binds the overloads of a host function template for each of the types its array argument may have
// (kernels/host/reduce.cpp, sort.cpp), so a function's binding is written once, not once per type.
#pragma once

namespace adcuda::host {

template <typename... Ts, typename Bind>
void for_types(Bind bind) {
  (bind(Ts{}), ...);
}

}  // namespace adcuda::host
