// What every fuzz target asserts: a reader given any bytes either returns, or refuses them with a
// dlb::Error (the clean message the command line prints, exit 2). Any other exception (an
// out_of_range, a JSON type_error, bad_alloc), like any sanitizer report, is a defect: it
// aborts, and libFuzzer saves the input.
#pragma once
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string_view>

#include "runtime/core/error.h"

namespace dlb::fuzz {

template <typename F>
int run_reader(F&& read) {
  try {
    read();
  } catch (const Error&) {
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fuzz: escaped a reader: %s\n", e.what());
    std::abort();
  }
  return 0;
}

inline std::string_view as_text(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

}  // namespace dlb::fuzz
