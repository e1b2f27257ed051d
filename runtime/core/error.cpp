#include "runtime/core/error.h"

namespace dlb {

const char* error_kind_name(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kInvalidArgument:
      return "invalid argument";
    case ErrorKind::kOutOfMemory:
      return "out of memory";
    case ErrorKind::kUnsupported:
      return "unsupported";
    case ErrorKind::kCommError:
      return "communication error";
    case ErrorKind::kIo:
      return "i/o error";
    case ErrorKind::kDevice:
      return "device error";
  }
  return "error";
}

int exit_code_for(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kInvalidArgument:
      return 2;
    case ErrorKind::kIo:
      return 2;
    case ErrorKind::kOutOfMemory:
      return 3;
    case ErrorKind::kUnsupported:
      return 4;
    case ErrorKind::kCommError:
      return 5;
    case ErrorKind::kDevice:
      return 6;
  }
  return 1;
}

}  // namespace dlb
