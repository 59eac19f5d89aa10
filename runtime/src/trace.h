// Chrome trace output of the train driver (`--trace FILE`, JSON array
// format, viewable in Perfetto or chrome://tracing): complete ("X") events
// for each step, micro-step, optimizer step, data load, evaluation and
// checkpoint, nested by time on one track, plus per-kernel spans reported by
// generated code through otcrt_trace_begin/otcrt_trace_end (named after the
// ONNX node), and a "memory" counter track. Times are wall-clock
// microseconds; on an asynchronous device the driver synchronizes before
// closing a span, so spans measure finished work.
#ifndef OTCRT_TRACE_H
#define OTCRT_TRACE_H

#include "backend.h"
#include "otcrt/status.h"

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace otcrt {

class Tracer {
public:
  ~Tracer() { close(); }
  /// Starts writing \p path; \p backend is synchronized before spans end.
  Status open(const std::string &path, Backend *backend);
  /// Finishes the file (closing the JSON array).
  void close();
  bool active() const { return file_ != nullptr; }
  /// Microseconds since open().
  double now() const;
  /// Writes a complete event [start, now) named \p name with \p args (a JSON
  /// object body, e.g. "\"step\": 3", or empty).
  void complete(const std::string &name, const char *category, double start,
                const std::string &args = "");
  /// Writes a counter sample of \p series on the track \p name.
  void counter(const char *name, const char *series, double value);
  /// Kernel hooks (otcrt_trace_begin / otcrt_trace_end).
  void kernelBegin(const char *name);
  void kernelEnd();

private:
  void emit(const std::string &event);

  std::FILE *file_ = nullptr;
  Backend *backend_ = nullptr;
  bool first_ = true;
  std::chrono::steady_clock::time_point origin_;
  std::vector<std::pair<std::string, double>> open_; ///< kernel stack
};

/// The process-wide tracer the ABI hooks write to.
Tracer &processTracer();

/// Opens a span at construction and writes it at destruction.
class TraceSpan {
public:
  TraceSpan(Tracer &t, std::string name, const char *category,
            std::string args = "")
      : t_(t), name_(std::move(name)), category_(category),
        args_(std::move(args)), start_(t.active() ? t.now() : 0) {}
  ~TraceSpan() {
    if (t_.active())
      t_.complete(name_, category_, start_, args_);
  }

private:
  Tracer &t_;
  std::string name_;
  const char *category_;
  std::string args_;
  double start_;
};

} // namespace otcrt

#endif // OTCRT_TRACE_H
