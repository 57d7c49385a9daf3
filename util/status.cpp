#include "util/status.h"

namespace parity {

const char* ToString(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kBadInput: return "bad input";
    case ErrorKind::kUnsupported: return "unsupported";
    case ErrorKind::kRuntime: return "runtime error";
    case ErrorKind::kInternal: return "internal error";
  }
  return "error";
}

}  // namespace parity
