// What the emulator's standalone C++ checks (test_ptx_sm80.cpp, test_ptx_sm90.cpp) share: a check that
// counts its failures and names the first ones, the test that a call is rejected, and main's verdict,
// which tests/emulator/conftest.py's run_cpp_check reads ("all checks passed", exit status 0).
#pragma once

#include <cstdio>
#include <stdexcept>

namespace standalone_check {

inline int failures = 0;

inline void check(bool ok, const char* what, int a = -1, int b = -1, int c = -1) {
  if (ok) return;
  if (++failures <= 20) std::fprintf(stderr, "FAIL: %s (%d, %d, %d)\n", what, a, b, c);
}

template <typename F>
bool throws_invalid_argument(F f) {
  try {
    f();
  } catch (const std::invalid_argument&) {
    return true;
  }
  return false;
}

// main's exit status: 1 after any failed check, else 0 with the line that says `name` passed.
inline int verdict(const char* name) {
  if (failures != 0) {
    std::fprintf(stderr, "%d check(s) failed\n", failures);
    return 1;
  }
  std::printf("%s: all checks passed\n", name);
  return 0;
}

}  // namespace standalone_check
