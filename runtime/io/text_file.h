// Reading a file that dlbench did not write itself, whole, as text: only a regular file, and
// only up to a size limit, checked before a byte is read. A directory, a FIFO, a device such as
// /dev/zero, a path under a regular file or a file past the limit is refused with a message that
// names the file, never read until memory runs out or until a writer that never comes.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace dlb {

// No input file dlbench reads legitimately comes near this (a suite, a point, a peak file, a
// results.jsonl of a thousand points).
constexpr uint64_t kMaxTextFileBytes = uint64_t{256} << 20;

// The file's bytes. InvalidArgument("cannot read <what> '<path>': <why>") when it does not exist,
// is not a regular file, is larger than `max_bytes`, or cannot be read.
std::string read_text_file(const std::string& path, std::string_view what,
                           uint64_t max_bytes = kMaxTextFileBytes);

// InvalidArgument("cannot read <what> '<path>': ...") unless `path` is a regular file: for the
// readers that stream a file (safetensors, gzip) rather than take it whole. A FIFO or a device
// is refused before it is opened, so nothing waits on it or reads it without end.
void require_regular_file(const std::string& path, std::string_view what);

// Whether `path` exists as anything at all (a broken link counts); false when a component of
// its directory is a regular file, where a plain exists() would throw.
bool path_exists(const std::string& path);

}  // namespace dlb
