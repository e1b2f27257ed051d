// Writing a file someone asked for (--json, --trace, --save, ...): the path is checked before any
// work starts, and the file is written whole or not at all. The whole-or-nothing write is a
// temporary file renamed over the target, which is only right for a regular file: renamed over
// /dev/null, it would replace the machine's /dev/null (as root) with a regular file. So an
// existing target that is not a regular file (a device, a FIFO, a socket, a directory) is refused,
// both when the path is checked and again when the file is written.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace dlb {

// Why `path` cannot take a file dlbench writes whole, or "" when it can:
//   - not valid UTF-8 (records and traces carry their paths as JSON strings), or a NUL byte;
//   - longer than PATH_MAX, or a component longer than NAME_MAX bytes;
//   - it exists (a link is followed) and is not a regular file;
//   - it does not exist and its directory does not, is not a directory, or is not writable.
std::string output_file_problem(const std::string& path);
// The same for a folder dlbench writes files into, creating it and its parents as needed: an
// existing path must be a directory, and the nearest existing ancestor a writable directory.
std::string output_dir_problem(const std::string& path);

// The same for a file written as the run goes and never renamed (a log): a FIFO or a character
// device (/dev/stdout) may take it, a directory or a socket may not; a new file's directory must
// take it.
std::string output_stream_problem(const std::string& path);

// InvalidArgument("<what> '<path>': <problem>") when output_*_problem finds one; `what` names
// the path as the user gave it ("--json").
void check_output_file(const std::string& path, std::string_view what);
void check_output_dir(const std::string& path, std::string_view what);
void check_output_stream(const std::string& path, std::string_view what);

// Writes `bytes` to `path` whole: a uniquely named temporary file in the target's directory,
// flushed to disk, then renamed over it. A link is followed, so its target is replaced, not the
// link. An existing target that is not a regular file is refused (IoError) before anything is
// written; the file keeps an existing target's permissions, else 0666 less the umask. On failure
// the temporary file is removed and the target is untouched.
void write_file_atomically(const std::string& path, std::string_view bytes);
// The same for a file made of several pieces, written one after another (a safetensors header and
// its tensors), so that a large file is not copied into one string first.
void write_file_atomically(const std::string& path, const std::vector<std::string_view>& pieces);

}  // namespace dlb
