// Status: how errors travel on the cycle thread and to the handles that wait
// on it. Setup and configuration errors are exceptions (ConfigError).
#pragma once

#include <stdexcept>
#include <string>
#include <utility>

namespace hvdtune {

enum class StatusCode : int {
  kOk = 0,
  kInProgress = 1,
  /// Bad arguments to an enqueue call (null buffer, negative count, ...).
  kInvalidArgument = 2,
  /// Ranks disagree on a tensor's type, shape, operation or root.
  kMismatch = 3,
  /// The runtime was shut down before the operation completed.
  kAborted = 4,
  /// A failure inside the communication backend.
  kInternal = 5,
  /// Some ranks did not submit the tensor within
  /// HOROVOD_STALL_SHUTDOWN_TIME_SECONDS (6 is the C API's config error).
  kStalled = 7,
};

class Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message)
      : code_(code), message_(std::move(message)) {}

  static Status Ok() { return {}; }
  static Status InProgress() { return {StatusCode::kInProgress, ""}; }
  static Status InvalidArgument(std::string m) {
    return {StatusCode::kInvalidArgument, std::move(m)};
  }
  static Status Mismatch(std::string m) {
    return {StatusCode::kMismatch, std::move(m)};
  }
  static Status Aborted(std::string m) {
    return {StatusCode::kAborted, std::move(m)};
  }
  static Status Internal(std::string m) {
    return {StatusCode::kInternal, std::move(m)};
  }
  static Status Stalled(std::string m) {
    return {StatusCode::kStalled, std::move(m)};
  }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  /// "OK" or "<code name>: <message>".
  std::string ToString() const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

/// Thrown by Runtime::Init and the configuration parser: the message names
/// the variable, the value and what is allowed.
class ConfigError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace hvdtune
