#include "runtime/io/text_file.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "runtime/core/error.h"

namespace dlb {

std::string read_text_file(const std::string& path, std::string_view what, uint64_t max_bytes) {
  auto refuse = [&](std::string_view why) {
    return InvalidArgument(fmt::format("cannot read {} '{}': {}", what, path, why));
  };
  // O_NONBLOCK: opening a FIFO with no writer returns at once, and fstat then refuses it.
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) throw refuse(std::strerror(errno));
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    throw refuse(S_ISDIR(st.st_mode) ? "it is a directory" : "it is not a regular file");
  }
  if (static_cast<uint64_t>(st.st_size) > max_bytes) {
    close(fd);
    throw refuse(
        fmt::format("{} bytes, more than the {} such a file may hold", st.st_size, max_bytes));
  }
  std::string text(static_cast<size_t>(st.st_size), '\0');
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = read(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      close(fd);
      throw refuse(std::strerror(err));
    }
    if (n == 0) break;  // the file shrank while it was read
    done += static_cast<size_t>(n);
  }
  close(fd);
  text.resize(done);
  return text;
}

bool path_exists(const std::string& path) {
  struct stat st {};
  return lstat(path.c_str(), &st) == 0;
}

}  // namespace dlb
