// Step lines, the JSONL log and the progress bar (see metrics.h).
#include "metrics.h"

#include "json.h"

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <unistd.h>

namespace otcrt {

std::string formatBytes(int64_t bytes) {
  const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), u == 0 ? "%.0f %s" : "%.1f %s", v, units[u]);
  return buf;
}

std::string formatDuration(double seconds) {
  const int64_t s = std::llround(std::max(0.0, seconds));
  char buf[48];
  if (s < 60)
    std::snprintf(buf, sizeof(buf), "%" PRId64 "s", s);
  else if (s < 3600)
    std::snprintf(buf, sizeof(buf), "%" PRId64 "m%02" PRId64 "s", s / 60,
                  s % 60);
  else {
    const int64_t m = (s + 30) / 60;
    std::snprintf(buf, sizeof(buf), "%" PRId64 "h%02" PRId64 "m", m / 60,
                  m % 60);
  }
  return buf;
}

std::string formatStepLine(const StepReport &r, int width) {
  char buf[512];
  int n = std::snprintf(buf, sizeof(buf),
                        "step %*" PRId64 "/%" PRId64 " | loss %.6f | lr %.2e",
                        width, r.step, r.totalSteps, r.loss, r.lr);
  std::string line(buf, static_cast<size_t>(n));
  auto add = [&](const char *fmt, auto... args) {
    int m = std::snprintf(buf, sizeof(buf), fmt, args...);
    line.append(buf, static_cast<size_t>(m));
  };
  if (std::isnan(r.gradNorm)) // "nan", whatever its sign bit
    add(" | norm nan");
  else if (r.gradNorm >= 0)
    add(" | norm %.4f", r.gradNorm);
  add(" | %.2f ms", r.ms);
  double seconds = r.ms / 1000.0;
  if (seconds > 0) {
    // A slow step (a vision model on the cpu: 0.3 images/s) keeps two
    // decimals rather than reading 0.
    double rate = r.tokens / seconds;
    add(rate < 10 ? " | %.2f %s/s" : " | %.0f %s/s", rate,
        r.tokenUnits ? "tok" : "samples");
  }
  if (r.flops > 0 && r.peakFlops > 0 && seconds > 0)
    add(" | MFU %.1f%%", 100.0 * r.flops / seconds / r.peakFlops);
  else
    add(" | MFU n/a");
  if (r.memoryBytes >= 0)
    add(" | mem %s", formatBytes(r.memoryBytes).c_str());
  if (r.micros > 0)
    add(" | accum %" PRId64, r.micros);
  if (r.skipped)
    line += " | skipped";
  if (r.etaSeconds >= 0)
    line += " | eta " + formatDuration(r.etaSeconds);
  return line;
}

JsonlLog::~JsonlLog() {
  if (file_)
    std::fclose(file_);
}

Status JsonlLog::open(const std::string &path, bool append,
                      std::chrono::steady_clock::time_point started) {
  started_ = started;
  file_ = std::fopen(path.c_str(), append ? "a" : "w");
  if (!file_)
    return Status::error("cannot open --log-jsonl " + path);
  return Status::ok();
}

void JsonlLog::write(const std::vector<std::pair<std::string, std::string>> &fields) {
  if (!file_)
    return;
  using namespace std::chrono;
  const double now =
      duration<double>(system_clock::now().time_since_epoch()).count();
  const double elapsed =
      duration<double>(steady_clock::now() - started_).count();
  char time[64];
  std::snprintf(time, sizeof(time), "\"time\": %.3f, \"elapsed_s\": %.3f", now,
                elapsed);
  std::string line = "{";
  for (const auto &[key, value] : fields) {
    json::appendQuoted(line, key);
    line += ": " + value + ", ";
  }
  line += std::string(time) + "}\n";
  std::fputs(line.c_str(), file_);
  std::fflush(file_);
}

void JsonlLog::writeStep(const StepReport &r) {
  double seconds = r.ms / 1000.0;
  std::vector<std::pair<std::string, std::string>> f = {
      {"event", jsonString("step")},
      {"step", std::to_string(r.step)},
      {"loss", jsonNumber(r.loss)},
      {"lr", jsonNumber(r.lr)},
      {"ms", jsonNumber(r.ms)},
      {"micro_batches", std::to_string(r.micros)},
      {r.tokenUnits ? "tokens" : "samples", std::to_string(r.tokens)},
      {r.tokenUnits ? "tokens_per_s" : "samples_per_s",
       jsonNumber(seconds > 0 ? r.tokens / seconds : 0)},
  };
  if (r.gradNorm >= 0 || std::isnan(r.gradNorm))
    f.push_back({"grad_norm", jsonNumber(r.gradNorm)});
  if (r.flops > 0 && r.peakFlops > 0 && seconds > 0)
    f.push_back({"mfu", jsonNumber(r.flops / seconds / r.peakFlops)});
  if (r.memoryBytes >= 0)
    f.push_back({"memory_bytes", std::to_string(r.memoryBytes)});
  if (r.skipped)
    f.push_back({"skipped", "true"});
  if (r.etaSeconds >= 0)
    f.push_back({"eta_s", jsonNumber(r.etaSeconds)});
  write(f);
}

std::string jsonNumber(double v) {
  if (!std::isfinite(v))
    return std::isnan(v) ? "\"NaN\"" : (v > 0 ? "\"Infinity\"" : "\"-Infinity\"");
  char buf[40];
  std::snprintf(buf, sizeof(buf), "%.9g", v);
  return buf;
}

std::string jsonString(const std::string &s) {
  std::string out;
  json::appendQuoted(out, s);
  return out;
}

ProgressBar::ProgressBar(std::string label, int64_t total)
    : label_(std::move(label)), total_(total), active_(isatty(2) && total > 1) {}

ProgressBar::~ProgressBar() {
  if (active_)
    std::fprintf(stderr, "\r\033[K");
}

void ProgressBar::update(int64_t done) {
  if (!active_)
    return;
  constexpr int kWidth = 30;
  int filled = static_cast<int>(kWidth * done / total_);
  std::string bar(static_cast<size_t>(filled), '#');
  bar.resize(kWidth, '.');
  std::fprintf(stderr, "\r%s [%s] %" PRId64 "/%" PRId64, label_.c_str(),
               bar.c_str(), done, total_);
  std::fflush(stderr);
}

} // namespace otcrt
