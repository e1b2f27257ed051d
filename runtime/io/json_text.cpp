#include "runtime/io/json_text.h"

namespace dlb {

void check_json_text(std::string_view text, std::string_view where, int max_depth) {
  int depth = 0;
  bool in_string = false, escaped = false;
  if (const size_t nul = text.find('\0'); nul != std::string_view::npos) {
    throw InvalidArgument(fmt::format("{}: a NUL byte at offset {} (JSON holds none)", where, nul));
  }
  for (const char c : text) {
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) {
        throw InvalidArgument(
            fmt::format("{}: JSON nested deeper than {} levels", where, max_depth));
      }
    } else if (c == ']' || c == '}') {
      --depth;  // unbalanced brackets are the parser's to report
    }
  }
}

}  // namespace dlb
