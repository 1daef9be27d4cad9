#include "bindings/registry.h"

#include <algorithm>
#include <string>
#include <tuple>
#include <vector>

namespace adcuda::bindings {
namespace {

struct Entry {
  std::string name;
  int order;
  BindFunction bind;
};

// A function-local static: registrations run during static initialisation, in any file order.
std::vector<Entry>& entries() {
  static std::vector<Entry> registered;
  return registered;
}

}  // namespace

Registration::Registration(const char* name, int order, BindFunction bind) { entries().push_back({name, order, bind}); }

void bind_registered(pybind11::module_& m) {
  std::vector<Entry> sorted = entries();
  std::sort(sorted.begin(), sorted.end(),
            [](const Entry& a, const Entry& b) { return std::tie(a.order, a.name) < std::tie(b.order, b.name); });
  for (const Entry& entry : sorted) entry.bind(m);
}

}  // namespace adcuda::bindings
