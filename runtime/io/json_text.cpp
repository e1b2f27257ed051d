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

namespace {

// The length of the valid UTF-8 sequence at `p` (of `n` bytes left), or 0 where there is none
// (RFC 3629: no overlong forms, no surrogates, nothing past U+10FFFF).
size_t utf8_sequence(const unsigned char* p, size_t n) {
  const auto in = [](unsigned char c, unsigned char lo, unsigned char hi) {
    return c >= lo && c <= hi;
  };
  if (p[0] < 0x80) return 1;
  size_t len = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // the second byte's range
  if (in(p[0], 0xC2, 0xDF)) {
    len = 2;
  } else if (in(p[0], 0xE0, 0xEF)) {
    len = 3;
    if (p[0] == 0xE0) lo = 0xA0;
    if (p[0] == 0xED) hi = 0x9F;
  } else if (in(p[0], 0xF0, 0xF4)) {
    len = 4;
    if (p[0] == 0xF0) lo = 0x90;
    if (p[0] == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  if (n < len || !in(p[1], lo, hi)) return 0;
  for (size_t i = 2; i < len; ++i) {
    if (!in(p[i], 0x80, 0xBF)) return 0;
  }
  return len;
}

}  // namespace

std::string escape_non_utf8(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  for (size_t i = 0; i < text.size();) {
    const size_t len = utf8_sequence(p + i, text.size() - i);
    if (len == 0) {
      out += fmt::format("\\x{:02X}", p[i]);
      ++i;
    } else {
      out.append(text.substr(i, len));
      i += len;
    }
  }
  return out;
}

}  // namespace dlb
