// The Chrome trace writer and the otcrt_trace_begin/otcrt_trace_end ABI
// hooks (see trace.h).
#include "trace.h"

#include "json.h"
#include "otcrt/abi.h"

#include <cerrno>
#include <cstring>

namespace otcrt {

Status Tracer::open(const std::string &path, Backend *backend,
                    bool syncKernels) {
  file_ = std::fopen(path.c_str(), "w");
  if (!file_)
    return Status::error("cannot write --trace " + path + ": " +
                         std::strerror(errno));
  backend_ = backend;
  deviceMarks_ = backend && backend->hasDeviceMarks() && !syncKernels;
  marked_.clear();
  marks_ = 0;
  origin_ = std::chrono::steady_clock::now();
  std::fputs("[\n", file_);
  emit("{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": 1, \"tid\": 1, "
       "\"args\": {\"name\": \"otc train\"}}");
  emit("{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": 1, \"tid\": 1, "
       "\"args\": {\"name\": \"steps, micro-steps, kernels\"}}");
  return Status::ok();
}

void Tracer::close() {
  if (!file_)
    return;
  flushKernels();
  std::fputs("\n]\n", file_);
  std::fclose(file_);
  file_ = nullptr;
}

double Tracer::now() const {
  return std::chrono::duration<double, std::micro>(
             std::chrono::steady_clock::now() - origin_)
      .count();
}

void Tracer::emit(const std::string &event) {
  if (!first_)
    std::fputs(",\n", file_);
  first_ = false;
  std::fputs(event.c_str(), file_);
}

void Tracer::write(const std::string &name, const char *category,
                   double start, double duration, const std::string &args) {
  std::string e = "{\"name\": ";
  json::appendQuoted(e, name);
  // Communication has a lane of its own (tid 2): an overlapped sum runs
  // beside the kernels.
  int lane = std::strcmp(category, "communication") == 0 ? 2 : 1;
  char buf[160];
  std::snprintf(buf, sizeof(buf),
                ", \"cat\": \"%s\", \"ph\": \"X\", \"pid\": 1, \"tid\": %d, "
                "\"ts\": %.3f, \"dur\": %.3f",
                category, lane, start, duration);
  e += buf;
  if (!args.empty())
    e += ", \"args\": {" + args + "}";
  e += "}";
  emit(e);
}

void Tracer::complete(const std::string &name, const char *category,
                      double start, const std::string &args) {
  if (!file_)
    return;
  if (backend_)
    (void)backend_->synchronize();
  flushKernels();
  double end = now();
  write(name, category, start, end - start, args);
}

void Tracer::flushKernels() {
  if (!deviceMarks_ || marks_ == 0 || !open_.empty())
    return;
  std::vector<double> ms;
  Status s = backend_->markTimes(marks_, ms);
  // The last mark completed about now: place the others before it.
  double last = now();
  if (s) {
    double base = last - ms[marks_ - 1] * 1e3;
    for (const MarkedSpan &k : marked_)
      write(k.name, k.category, base + ms[k.begin] * 1e3,
            (ms[k.end] - ms[k.begin]) * 1e3, "");
  }
  marked_.clear();
  marks_ = 0;
}

void Tracer::counter(const char *name, const char *series, double value) {
  if (!file_)
    return;
  char buf[256];
  std::snprintf(buf, sizeof(buf),
                "{\"name\": \"%s\", \"ph\": \"C\", \"pid\": 1, \"ts\": %.3f, "
                "\"args\": {\"%s\": %.0f}}",
                name, now(), series, value);
  emit(buf);
}

void Tracer::kernelBegin(const char *name) {
  if (!file_)
    return;
  if (deviceMarks_) {
    (void)backend_->mark(marks_);
    open_.emplace_back(name ? name : "?", static_cast<double>(marks_++));
    return;
  }
  if (backend_)
    (void)backend_->synchronize();
  open_.emplace_back(name ? name : "?", now());
}

void Tracer::kernelEnd() {
  if (!file_ || open_.empty())
    return;
  auto [name, start] = open_.back();
  open_.pop_back();
  if (deviceMarks_) {
    (void)backend_->mark(marks_);
    marked_.push_back({name, "kernel", static_cast<size_t>(start), marks_++});
    return;
  }
  complete(name, "kernel", start);
}

Tracer &processTracer() {
  static Tracer tracer;
  return tracer;
}

} // namespace otcrt

extern "C" void otcrt_trace_begin(const char *name) {
  otcrt::processTracer().kernelBegin(name);
}

extern "C" void otcrt_trace_end(void) { otcrt::processTracer().kernelEnd(); }
