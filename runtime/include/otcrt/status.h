// A minimal success-or-error value returned by every fallible function of the
// otcrt runtime and its safetensors library. Library code never throws or
// exits; it returns a Status whose message is a complete, human-readable
// sentence and whose code says which process exit code a driver should use
// (1 for runtime failures, 2 for command-line usage errors).
#ifndef OTCRT_STATUS_H
#define OTCRT_STATUS_H

#include <string>
#include <utility>

namespace otcrt {

class Status {
public:
  /// Exit code for runtime failures.
  static constexpr int kRuntimeError = 1;
  /// Exit code for command-line usage errors.
  static constexpr int kUsageError = 2;

  /// Returns a success value.
  static Status ok() { return Status(); }
  /// Returns a runtime failure carrying \p message.
  static Status error(std::string message) {
    return Status(kRuntimeError, std::move(message));
  }
  /// Returns a usage failure carrying \p message.
  static Status usage(std::string message) {
    return Status(kUsageError, std::move(message));
  }

  /// True when the operation succeeded.
  bool isOk() const { return code_ == 0; }
  explicit operator bool() const { return isOk(); }
  /// 0 on success, otherwise the suggested process exit code.
  int code() const { return code_; }
  /// The error message; empty on success.
  const std::string &message() const { return message_; }

private:
  Status() = default;
  Status(int code, std::string message)
      : code_(code), message_(std::move(message)) {}

  int code_ = 0;
  std::string message_;
};

} // namespace otcrt

#endif // OTCRT_STATUS_H
