#include "runtime/io/output_file.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>

#include "runtime/core/error.h"

namespace dlb {
namespace {

std::string kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

// The folder part of a path ("." for a bare name, "/" for "/x").
std::string dir_of(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

// Encoding and length: the rules of a path, whatever is there.
std::string text_problem(const std::string& path) {
  if (path.empty()) return "an empty path";
  if (path.find('\0') != std::string::npos) return "the path holds a NUL byte";
  try {
    (void)nlohmann::json(path).dump();  // the strict encoder refuses what is not UTF-8
  } catch (const nlohmann::json::exception&) {
    return "the path is not valid UTF-8 (records and traces carry it as JSON text)";
  }
  if (path.size() >= PATH_MAX) {
    return fmt::format("the path is {} bytes, at least PATH_MAX ({})", path.size(), PATH_MAX);
  }
  size_t begin = 0;
  while (begin < path.size()) {
    size_t end = path.find('/', begin);
    if (end == std::string::npos) end = path.size();
    if (end - begin > NAME_MAX) {
      return fmt::format("a component of the path is {} bytes, more than NAME_MAX ({})",
                         end - begin, NAME_MAX);
    }
    begin = end + 1;
  }
  return "";
}

// Whether a file can be made in `dir`: a temporary one is made and removed, which answers for
// read-only mounts and /proc as access(2) does not for root.
std::string writable_dir_problem(const std::string& dir) {
  struct stat st {};
  if (stat(dir.c_str(), &st) != 0) {
    return fmt::format("its directory '{}' cannot be used: {}", dir, std::strerror(errno));
  }
  if (!S_ISDIR(st.st_mode)) return fmt::format("'{}' is {}", dir, kind_of(st.st_mode));
  std::string probe = dir + "/.dlbench-XXXXXX";
  const int fd = mkostemp(probe.data(), O_CLOEXEC);
  if (fd < 0) {
    return fmt::format("no file can be made in its directory '{}': {}", dir, std::strerror(errno));
  }
  close(fd);
  unlink(probe.c_str());
  return "";
}

// Removes the temporary file unless the write got as far as the rename.
struct TempFile {
  std::string path;
  int fd = -1;
  bool renamed = false;
  ~TempFile() {
    if (fd >= 0) close(fd);
    if (!renamed && !path.empty()) unlink(path.c_str());
  }
};

// The path the rename must replace: a link's target, so the link stays a link.
std::string resolved_target(const std::string& path) {
  struct stat st {};
  if (lstat(path.c_str(), &st) != 0 || !S_ISLNK(st.st_mode)) return path;
  char* real = realpath(path.c_str(), nullptr);
  if (!real) return path;  // a dangling link: the rename replaces it
  std::string out(real);
  std::free(real);
  return out;
}

// The process's umask, read once (reading it means setting it, which races with threads that
// create files).
mode_t process_umask() {
  static const mode_t mask = [] {
    const mode_t m = umask(0);
    umask(m);
    return m;
  }();
  return mask;
}

mode_t mode_for(const std::string& target) {
  struct stat st {};
  if (stat(target.c_str(), &st) == 0) return st.st_mode & 07777;
  return 0666 & ~process_umask();
}

void write_all(int fd, std::string_view bytes, const std::string& tmp) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw IoError(fmt::format("writing '{}' failed: {}", tmp, std::strerror(errno)));
    done += static_cast<size_t>(n);
  }
}

// InvalidArgument("<what> '<path>': <problem>"), unless there is no problem.
void refuse_if(const std::string& problem, const std::string& path, std::string_view what) {
  if (!problem.empty()) throw InvalidArgument(fmt::format("{} '{}': {}", what, path, problem));
}

}  // namespace

std::string output_file_problem(const std::string& path) {
  if (std::string p = text_problem(path); !p.empty()) return p;
  struct stat st {};
  if (stat(path.c_str(), &st) == 0) {
    if (!S_ISREG(st.st_mode)) {
      return fmt::format("it is {}; dlbench writes only regular files", kind_of(st.st_mode));
    }
    return writable_dir_problem(dir_of(resolved_target(path)));
  }
  if (errno != ENOENT) return fmt::format("it cannot be used: {}", std::strerror(errno));
  return writable_dir_problem(dir_of(path));
}

std::string output_dir_problem(const std::string& path) {
  if (std::string p = text_problem(path); !p.empty()) return p;
  std::string existing = path;
  while (true) {
    struct stat st {};
    if (stat(existing.c_str(), &st) == 0) {
      if (!S_ISDIR(st.st_mode)) {
        return existing == path ? fmt::format("it is {}, not a directory", kind_of(st.st_mode))
                                : fmt::format("'{}' is {}", existing, kind_of(st.st_mode));
      }
      return writable_dir_problem(existing);
    }
    if (errno != ENOENT) {
      return fmt::format("'{}' cannot be used: {}", existing, std::strerror(errno));
    }
    const std::string parent = dir_of(existing);
    if (parent == existing) return fmt::format("'{}' does not exist", existing);
    existing = parent;
  }
}

std::string output_stream_problem(const std::string& path) {
  if (std::string p = text_problem(path); !p.empty()) return p;
  struct stat st {};
  if (stat(path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode) || S_ISSOCK(st.st_mode))
      return fmt::format("it is {}", kind_of(st.st_mode));
    return "";
  }
  if (errno != ENOENT) return fmt::format("it cannot be used: {}", std::strerror(errno));
  return writable_dir_problem(dir_of(path));
}

void check_output_stream(const std::string& path, std::string_view what) {
  refuse_if(output_stream_problem(path), path, what);
}

void check_output_file(const std::string& path, std::string_view what) {
  refuse_if(output_file_problem(path), path, what);
}

void check_output_dir(const std::string& path, std::string_view what) {
  refuse_if(output_dir_problem(path), path, what);
}

void write_file_atomically(const std::string& path, std::string_view bytes) {
  write_file_atomically(path, std::vector<std::string_view>{bytes});
}

void write_file_atomically(const std::string& path, const std::vector<std::string_view>& pieces) {
  const std::string target = resolved_target(path);
  struct stat st {};
  if (stat(target.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    throw IoError(fmt::format("will not write '{}': it is {}; dlbench replaces only regular files",
                              path, kind_of(st.st_mode)));
  }
  TempFile tmp;
  tmp.path = dir_of(target) + "/.dlbench-XXXXXX";
  tmp.fd = mkostemp(tmp.path.data(), O_CLOEXEC);
  if (tmp.fd < 0) {
    const std::string why = std::strerror(errno);
    tmp.path.clear();
    throw IoError(fmt::format("cannot write '{}': no temporary file beside it ({})", path, why));
  }
  for (std::string_view bytes : pieces) write_all(tmp.fd, bytes, tmp.path);
  if (fchmod(tmp.fd, mode_for(target)) != 0 || fsync(tmp.fd) != 0) {
    throw IoError(fmt::format("writing '{}' failed: {}", tmp.path, std::strerror(errno)));
  }
  if (std::rename(tmp.path.c_str(), target.c_str()) != 0) {
    throw IoError(
        fmt::format("cannot rename '{}' to '{}': {}", tmp.path, target, std::strerror(errno)));
  }
  tmp.renamed = true;
}

}  // namespace dlb
