#include "runtime/io/text_file.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "runtime/core/error.h"

namespace dlb {

namespace {

// Closes the descriptor however the read ends (a refusal, or bad_alloc for the text).
struct Fd {
  int fd;
  ~Fd() {
    if (fd >= 0) close(fd);
  }
};

}  // namespace

std::string read_text_file(const std::string& path, std::string_view what, uint64_t max_bytes) {
  auto refuse = [&](std::string_view why) {
    return InvalidArgument(fmt::format("cannot read {} '{}': {}", what, path, why));
  };
  // O_NONBLOCK: opening a FIFO with no writer returns at once, and fstat then refuses it.
  const Fd file{open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK)};
  if (file.fd < 0) throw refuse(std::strerror(errno));
  struct stat st {};
  if (fstat(file.fd, &st) != 0) throw refuse(std::strerror(errno));
  if (!S_ISREG(st.st_mode)) {
    throw refuse(S_ISDIR(st.st_mode) ? "it is a directory" : "it is not a regular file");
  }
  if (static_cast<uint64_t>(st.st_size) > max_bytes) {
    throw refuse(
        fmt::format("{} bytes, more than the {} such a file may hold", st.st_size, max_bytes));
  }
  std::string text(static_cast<size_t>(st.st_size), '\0');
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = read(file.fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw refuse(std::strerror(errno));
    if (n == 0) break;  // the file shrank while it was read
    done += static_cast<size_t>(n);
  }
  text.resize(done);
  return text;
}

void require_regular_file(const std::string& path, std::string_view what) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) {
    throw InvalidArgument(fmt::format("cannot read {} '{}': {}", what, path, std::strerror(errno)));
  }
  if (!S_ISREG(st.st_mode)) {
    throw InvalidArgument(
        fmt::format("cannot read {} '{}': {}", what, path,
                    S_ISDIR(st.st_mode) ? "it is a directory" : "it is not a regular file"));
  }
}

bool path_exists(const std::string& path) {
  struct stat st {};
  return lstat(path.c_str(), &st) == 0;
}

}  // namespace dlb
