#pragma once
// Error values and Result<T>: expected failures (bad input, a conflict, a busy
// store) travel as values; exceptions are kept for what is truly exceptional.

#include <cassert>
#include <optional>
#include <string>
#include <utility>

namespace unisched {

// What kind of failure this is. The API maps each kind to one HTTP status;
// the core never sees HTTP.
enum class ErrorKind {
  kBadRequest,       // malformed input (400)
  kUnauthenticated,  // 401
  kForbidden,        // 403
  kNotFound,         // 404
  kConflict,         // state conflict (409)
  kTooLarge,         // 413
  kUnprocessable,    // well-formed but invalid or unsatisfiable (422)
  kRateLimited,      // 429
  kUnavailable,      // 503
  kInternal,         // 500
};

struct Error {
  ErrorKind kind = ErrorKind::kInternal;
  std::string code;     // snake_case, stable: clients switch on it
  std::string message;  // what is wrong and how to fix it
  std::string field;    // the one field at fault, or empty

  static Error BadRequest(std::string code, std::string message, std::string field = {}) {
    return {ErrorKind::kBadRequest, std::move(code), std::move(message), std::move(field)};
  }
  static Error Unprocessable(std::string code, std::string message, std::string field = {}) {
    return {ErrorKind::kUnprocessable, std::move(code), std::move(message), std::move(field)};
  }
  static Error NotFound(std::string message) { return {ErrorKind::kNotFound, "not_found", std::move(message), {}}; }
  static Error Conflict(std::string code, std::string message) {
    return {ErrorKind::kConflict, std::move(code), std::move(message), {}};
  }
  static Error Forbidden(std::string message, std::string code = "forbidden") {
    return {ErrorKind::kForbidden, std::move(code), std::move(message), {}};
  }
  static Error Unauthenticated(std::string message) {
    return {ErrorKind::kUnauthenticated, "unauthenticated", std::move(message), {}};
  }
  static Error Internal(std::string message) { return {ErrorKind::kInternal, "internal", std::move(message), {}}; }
  static Error Unavailable(std::string message) {
    return {ErrorKind::kUnavailable, "unavailable", std::move(message), {}};
  }
};

// A value or an Error. Small stand-in for C++23 std::expected. (Not a
// std::variant: GCC 12 reports false -Wmaybe-uninitialized on variants.)
template <class T>
class Result {
 public:
  Result(T value) : value_(std::move(value)) {}      // NOLINT: implicit by design
  Result(Error error) : error_(std::move(error)) {}  // NOLINT: implicit by design
  bool ok() const { return value_.has_value(); }
  explicit operator bool() const { return ok(); }
  T& value() & {
    assert(ok());
    return *value_;
  }
  const T& value() const& {
    assert(ok());
    return *value_;
  }
  T&& value() && {
    assert(ok());
    return std::move(*value_);
  }
  const Error& error() const {
    assert(!ok());
    return error_;
  }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::optional<T> value_;
  Error error_;
};

// Result of an operation with no value.
class Status {
 public:
  Status() = default;
  Status(Error error) : error_(std::move(error)), ok_(false) {}  // NOLINT: implicit by design
  static Status Ok() { return {}; }
  bool ok() const { return ok_; }
  explicit operator bool() const { return ok_; }
  const Error& error() const {
    assert(!ok_);
    return error_;
  }

 private:
  Error error_;
  bool ok_ = true;
};

}  // namespace unisched
