// Typed errors thrown by library code. Only main() turns them into messages and exit codes,
// so every failure path carries its kind up to the CLI and the harness.
#pragma once
#include <stdexcept>
#include <string>

namespace dlb {

// kDevice: the accelerator or one of its libraries failed while running work (a kernel fault, an
// execution failure): neither the input's fault nor a missing feature.
enum class ErrorKind { kInvalidArgument, kOutOfMemory, kUnsupported, kCommError, kIo, kDevice };

const char* error_kind_name(ErrorKind kind);

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
  ErrorKind kind() const { return kind_; }

 private:
  ErrorKind kind_;
};

struct InvalidArgument : Error {
  explicit InvalidArgument(const std::string& m) : Error(ErrorKind::kInvalidArgument, m) {}
};
struct OutOfMemory : Error {
  explicit OutOfMemory(const std::string& m) : Error(ErrorKind::kOutOfMemory, m) {}
};
struct Unsupported : Error {
  explicit Unsupported(const std::string& m) : Error(ErrorKind::kUnsupported, m) {}
};
struct CommError : Error {
  explicit CommError(const std::string& m) : Error(ErrorKind::kCommError, m) {}
};
struct IoError : Error {
  explicit IoError(const std::string& m) : Error(ErrorKind::kIo, m) {}
};
struct DeviceError : Error {
  explicit DeviceError(const std::string& m) : Error(ErrorKind::kDevice, m) {}
};

// Process exit code for an error kind; 2 is reserved for bad input, as CLI11 uses it.
int exit_code_for(ErrorKind kind);

}  // namespace dlb
