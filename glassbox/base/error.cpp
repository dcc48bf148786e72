#include "glassbox/base/error.h"

#include <utility>

namespace glassbox {

const char* error_code_name(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidArgument: return "InvalidArgument";
    case ErrorCode::kNotFound: return "NotFound";
    case ErrorCode::kAlreadyExists: return "AlreadyExists";
    case ErrorCode::kDataLoss: return "DataLoss";
    case ErrorCode::kFailedPrecondition: return "FailedPrecondition";
    case ErrorCode::kResourceExhausted: return "ResourceExhausted";
    case ErrorCode::kUnavailable: return "Unavailable";
    case ErrorCode::kPermissionDenied: return "PermissionDenied";
    case ErrorCode::kUnimplemented: return "Unimplemented";
    case ErrorCode::kDeadlineExceeded: return "DeadlineExceeded";
    case ErrorCode::kInternal: return "Internal";
  }
  return "Unknown";
}

bool is_user_error(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidArgument:
    case ErrorCode::kNotFound:
    case ErrorCode::kAlreadyExists:
    case ErrorCode::kDataLoss:
    case ErrorCode::kFailedPrecondition:
    case ErrorCode::kPermissionDenied: return true;
    default: return false;
  }
}

int exit_code_for(ErrorCode code) { return is_user_error(code) ? 2 : 1; }

int http_status_for(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidArgument:
    case ErrorCode::kFailedPrecondition: return 400;
    case ErrorCode::kNotFound: return 404;
    case ErrorCode::kAlreadyExists: return 409;
    case ErrorCode::kPermissionDenied: return 403;
    case ErrorCode::kUnimplemented: return 501;
    case ErrorCode::kUnavailable:
    case ErrorCode::kResourceExhausted: return 503;
    case ErrorCode::kDeadlineExceeded: return 504;
    case ErrorCode::kDataLoss:
    case ErrorCode::kInternal: return 500;
  }
  return 500;
}

Error::Error(ErrorCode code, std::string message, std::string hint)
    : std::runtime_error(hint.empty() ? message : message + " (hint: " + hint + ")"),
      code_(code),
      message_(std::move(message)),
      hint_(std::move(hint)) {}

std::string Error::one_line() const { return what(); }

}  // namespace glassbox
