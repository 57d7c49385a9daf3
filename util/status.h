// Recoverable errors of the library: Error carries a kind and a message that names the file and
// the field at fault; Expected<T> is a value or an Error. The library never exits; the binary's
// main() maps Error kinds to exit codes in one place.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace parity {

enum class ErrorKind {
  kBadInput,     // malformed or inconsistent user input: exit status 2
  kUnsupported,  // valid input that parity (or a backend) cannot handle
  kRuntime,      // an op or a backend failed while running
  kInternal,     // a bug in parity
};

struct Error {
  ErrorKind kind = ErrorKind::kInternal;
  std::string message;
  // An exception raised by foreign code (the Python worker): its type and traceback, kept
  // apart from the message so nobody parses them back out of it. Empty otherwise.
  std::string exception_type;
  std::string traceback;

  static Error Of(ErrorKind k, std::string m) {
    Error e;
    e.kind = k;
    e.message = std::move(m);
    return e;
  }
  static Error BadInput(std::string m) { return Of(ErrorKind::kBadInput, std::move(m)); }
  static Error Unsupported(std::string m) { return Of(ErrorKind::kUnsupported, std::move(m)); }
  static Error Runtime(std::string m) { return Of(ErrorKind::kRuntime, std::move(m)); }
  static Error Internal(std::string m) { return Of(ErrorKind::kInternal, std::move(m)); }

  // The message, after the foreign exception's type when there is one ("ValueError: ...").
  std::string Text() const { return exception_type.empty() ? message : exception_type + ": " + message; }

  // Returns a copy with `context: ` prepended (e.g. the file being read).
  [[nodiscard]] Error With(const std::string& context) const {
    Error e = *this;
    e.message = context + ": " + message;
    return e;
  }
};

template <typename T>
class [[nodiscard]] Expected {
 public:
  Expected(T value) : v_(std::move(value)) {}      // NOLINT(google-explicit-constructor)
  Expected(Error error) : v_(std::move(error)) {}  // NOLINT(google-explicit-constructor)

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }
  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  const Error& error() const { return std::get<1>(v_); }
  // The value, or `fallback` when this holds an error.
  T value_or(T fallback) const { return ok() ? value() : std::move(fallback); }

 private:
  std::variant<T, Error> v_;
};

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Error error) : error_(std::move(error)) {}  // NOLINT(google-explicit-constructor)
  static Status Ok() { return {}; }
  bool ok() const { return !error_.has_value(); }
  explicit operator bool() const { return ok(); }
  const Error& error() const { return *error_; }

 private:
  std::optional<Error> error_;
};

// The exit status of a command that ends with an error of this kind: the one mapping, asked by
// main() and by a command that goes on past one input's error (repro run over several dirs).
inline int ExitStatus(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kBadInput:
    case ErrorKind::kUnsupported: return 2;
    case ErrorKind::kRuntime: return 1;
    case ErrorKind::kInternal: return 3;
  }
  return 3;
}

// The exception the binary's main() catches and maps to an exit code (ExitStatus). Library code returns
// Expected/Status; only command code converts a final Error into this.
struct Failure {
  Error error;
};

#define PARITY_ASSIGN_OR_RETURN(lhs, expr)                                                 \
  auto PARITY_CONCAT(_res_, __LINE__) = (expr);                                            \
  if (!PARITY_CONCAT(_res_, __LINE__).ok()) return PARITY_CONCAT(_res_, __LINE__).error(); \
  lhs = std::move(PARITY_CONCAT(_res_, __LINE__).value())

#define PARITY_RETURN_IF_ERROR(expr)   \
  do {                                 \
    auto _st = (expr);                 \
    if (!_st.ok()) return _st.error(); \
  } while (0)

#define PARITY_CONCAT_INNER(a, b) a##b
#define PARITY_CONCAT(a, b) PARITY_CONCAT_INNER(a, b)

}  // namespace parity
