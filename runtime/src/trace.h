// Chrome trace output of the train driver (`--trace FILE`, JSON array
// format, viewable in Perfetto or chrome://tracing): complete ("X") events
// for each step, micro-step, optimizer step, data load, evaluation and
// checkpoint, nested by time on one track, plus per-kernel spans reported by
// generated code through otcrt_trace_begin/otcrt_trace_end (named after the
// ONNX node), and a "memory" counter track. Times are wall-clock
// microseconds; on an asynchronous device the driver synchronizes before
// closing a span, so spans measure finished work. Kernel spans on such a
// device come from marks the backend records in the device's order of work
// (CUDA events on the stream) around each kernel: they are timed once the
// enclosing span has synchronized and placed so that the last mark ends at
// that moment, which costs no synchronization per kernel. With
// `--trace-sync` the tracer instead synchronizes at each kernel hook and
// reads the host clock, as it does on the cpu.
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
  /// Kernels are timed by the backend's device marks when it has them,
  /// unless \p syncKernels asks for a synchronization at each kernel hook.
  Status open(const std::string &path, Backend *backend,
              bool syncKernels = false);
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
  /// Whether spans are timed by the backend's device marks.
  bool deviceMarks() const { return file_ && deviceMarks_; }
  /// With device marks: the index of a mark for the caller to record
  /// (Backend::mark), and a span between two such marks, written with the
  /// kernels' spans.
  size_t reserveMark() { return marks_++; }
  void markedSpan(const std::string &name, const char *category, size_t begin,
                  size_t end) {
    marked_.push_back({name, category, begin, end});
  }

private:
  void emit(const std::string &event);
  void write(const std::string &name, const char *category, double start,
             double duration, const std::string &args);
  /// Writes the kernel spans timed by device marks so far.
  void flushKernels();

  /// A kernel span between two device marks.
  struct MarkedSpan {
    std::string name;
    const char *category;
    size_t begin, end;
  };

  std::FILE *file_ = nullptr;
  Backend *backend_ = nullptr;
  bool deviceMarks_ = false;
  bool first_ = true;
  std::chrono::steady_clock::time_point origin_;
  /// Open kernels: host start times, or mark indices with device marks.
  std::vector<std::pair<std::string, double>> open_;
  std::vector<MarkedSpan> marked_; ///< finished, not yet written
  size_t marks_ = 0;               ///< marks recorded since the last flush
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
