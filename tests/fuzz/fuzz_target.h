// What every fuzz target asserts: a reader given any bytes either returns, or refuses them with a
// dlb::Error (the clean message the command line prints, exit 2). Any other exception (an
// out_of_range, a JSON type_error, bad_alloc), like any sanitizer report, is a defect: it
// aborts, and libFuzzer saves the input.
#pragma once
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <string>
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

// The input as a file, for a reader that takes a path (the simulator's calibration, network and
// device files): one file of this process's, under $TMPDIR, rewritten for each input. `name` is
// its last component ("calibration.json": the readers tell a path by its .json ending).
inline std::string as_file(const uint8_t* data, size_t size, std::string_view name) {
  const char* tmp = std::getenv("TMPDIR");
  const std::string path = std::string(tmp && *tmp ? tmp : "/tmp") + "/dlb-fuzz-" +
                           std::to_string(getpid()) + "-" + std::string(name);
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      .write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  // Removed when the process exits (libFuzzer ends with exit()).
  static const struct Remove {
    std::string path;
    ~Remove() { std::remove(path.c_str()); }
  } remove{path};
  return path;
}

// Aborts, saying why, when an input a reader accepted breaks what its users rely on.
inline void require(bool holds, const char* what) {
  if (holds) return;
  std::fprintf(stderr, "fuzz: %s\n", what);
  std::abort();
}

}  // namespace dlb::fuzz
