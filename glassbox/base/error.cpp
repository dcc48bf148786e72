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
    case ErrorCode::kFailedPrecondition: return true;
    default: return false;
  }
}

Error::Error(ErrorCode code, std::string message, std::string hint)
    : std::runtime_error(hint.empty() ? message : message + " (hint: " + hint + ")"),
      code_(code),
      message_(std::move(message)),
      hint_(std::move(hint)) {}

std::string Error::one_line() const { return what(); }

}  // namespace glassbox
