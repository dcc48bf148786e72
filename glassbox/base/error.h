// glassbox::Error — the one exception type of glassbox.
//
// Every failure carries a code (what kind of failure), a message (what is wrong, naming the
// file, key, tensor or value) and a hint (how to fix it). Code throws inside the library and
// catches at the boundaries: the CLI maps the code to an exit status (user errors -> 2,
// runtime failures -> 1), an HTTP handler to a status code.
//
//   GB_CHECK(n > 0, InvalidArgument, "batch_size must be positive, got " << n,
//            "set data.batch_size to a value >= 1");
//   throw Error(ErrorCode::kNotFound, "no such file: " + path, "check data.root");
//
// Thread safety: value type, safe to copy between threads (use std::exception_ptr).
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace glassbox {

enum class ErrorCode {
  kInvalidArgument,     // bad config value, bad CLI flag, bad request
  kNotFound,            // missing file, unknown model name, unknown key
  kAlreadyExists,       // refusing to overwrite
  kDataLoss,            // corrupt or truncated file
  kFailedPrecondition,  // state does not allow the operation (e.g. checkpoint of another model)
  kResourceExhausted,   // out of memory / disk / queue full
  kUnavailable,         // a service not available now (a model loading, a server stopping)
  kPermissionDenied,    // credentials missing or wrong (an API key)
  kUnimplemented,       // a valid request for something glassbox does not do
  kDeadlineExceeded,    // a time limit passed (a queued request's timeout)
  kInternal,            // a bug in glassbox
};

// Name of a code, e.g. "InvalidArgument".
const char* error_code_name(ErrorCode code);

// True for codes that describe the user's input (exit code 2) rather than a runtime failure.
bool is_user_error(ErrorCode code);

// The one mapping of codes to a process exit status: 2 for the user's input, 1 otherwise.
int exit_code_for(ErrorCode code);

// The one mapping of codes to an HTTP status: 400 InvalidArgument/FailedPrecondition, 404
// NotFound, 409 AlreadyExists, 403 PermissionDenied, 501 Unimplemented, 503 Unavailable/
// ResourceExhausted, 504 DeadlineExceeded, 500 DataLoss/Internal.
int http_status_for(ErrorCode code);

class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, std::string message, std::string hint = {});

  ErrorCode code() const { return code_; }
  const std::string& message() const { return message_; }
  const std::string& hint() const { return hint_; }
  // One line: "message (hint: hint)".
  std::string one_line() const;

 private:
  ErrorCode code_;
  std::string message_;
  std::string hint_;
};

}  // namespace glassbox

// GB_CHECK(cond, Code, message-stream-expression, hint-string)
#define GB_CHECK(cond, code, msg, hint)                                                  \
  do {                                                                                   \
    if (!(cond)) {                                                                       \
      std::ostringstream gb_check_os_;                                                   \
      gb_check_os_ << msg;                                                               \
      throw ::glassbox::Error(::glassbox::ErrorCode::k##code, gb_check_os_.str(), hint); \
    }                                                                                    \
  } while (false)

#define GB_THROW(code, msg, hint)                                                      \
  do {                                                                                 \
    std::ostringstream gb_throw_os_;                                                   \
    gb_throw_os_ << msg;                                                               \
    throw ::glassbox::Error(::glassbox::ErrorCode::k##code, gb_throw_os_.str(), hint); \
  } while (false)
