//===- Report.cpp - pictures of a training step's memory -------------------===//
//
// Computes the live bytes at every op of a planned program and draws them,
// with the recompute frontier, as inline SVG in one HTML page that needs no
// network or script to view.
//
//===----------------------------------------------------------------------===//

#include "report/Report.h"
#include "perf/Plan.h"
#include "ir/OtckDialect.h"
#include "passes/Liveness.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/Format.h"

#include <algorithm>

using namespace mlir;
using namespace otc;

/// Live temporary bytes after each op of `f`, plus `base`.
static void appendFunction(func::FuncOp f, int64_t base, StringRef phase,
                           std::vector<TimelinePoint> &out) {
  SmallVector<Operation *> ops;
  for (Operation &op : f.getBody().front())
    if (!isa<otck::BufferOp, func::ReturnOp>(op))
      ops.push_back(&op);
  DenseMap<Operation *, unsigned> pos;
  for (auto [i, op] : llvm::enumerate(ops))
    pos[op] = i;
  // Positions over every op of the body, as temporaryLiveRanges counts them,
  // mapped to the ops drawn.
  DenseMap<unsigned, unsigned> drawn;
  unsigned all = 0;
  for (Operation &op : f.getBody().front()) {
    if (pos.count(&op))
      drawn[all] = pos[&op];
    ++all;
  }
  std::vector<int64_t> delta(ops.size() + 1, 0);
  for (BufferInterval iv : temporaryLiveRanges(f)) {
    // Buffer ops are not drawn: a range starts at the next drawn op.
    unsigned first = iv.first, last = iv.last;
    while (first <= last && !drawn.count(first))
      ++first;
    while (last > first && !drawn.count(last))
      --last;
    if (first > last || !drawn.count(first))
      continue;
    delta[drawn[first]] += iv.size;
    delta[drawn[last] + 1] -= iv.size;
  }
  int64_t live = 0;
  for (size_t i = 0; i < ops.size(); ++i) {
    live += delta[i];
    out.push_back({base + live, phase.str()});
  }
}

std::vector<TimelinePoint> otc::memoryTimeline(ModuleOp planned,
                                               int64_t gradAccum) {
  int64_t persistent = 0;
  llvm::StringSet<> seen;
  planned.walk([&](otck::BufferOp b) {
    if (b.getSlot() && !otck::isGroupSlot(*b.getSlot()) &&
        seen.insert(*b.getSlot()).second)
      persistent += byteSize(b.getType());
  });
  std::vector<TimelinePoint> out;
  if (auto f = planned.lookupSymbol<func::FuncOp>("zero_grads"))
    appendFunction(f, persistent, "zero_grads", out);
  if (auto f = planned.lookupSymbol<func::FuncOp>("micro_step"))
    for (int64_t k = 0; k < gradAccum; ++k)
      appendFunction(f, persistent, "micro_step " + std::to_string(k + 1), out);
  if (auto f = planned.lookupSymbol<func::FuncOp>("optimizer_step"))
    appendFunction(f, persistent, "optimizer_step", out);
  return out;
}


static std::string escape(StringRef s) {
  std::string out;
  for (char c : s) {
    if (c == '<')
      out += "&lt;";
    else if (c == '>')
      out += "&gt;";
    else if (c == '&')
      out += "&amp;";
    else
      out += c;
  }
  return out;
}

namespace {
/// A plot area of an SVG with linear axes from zero.
struct Plot {
  double w = 860, h = 320, left = 90, right = 20, top = 20, bottom = 50;
  double xmax, ymax;
  double x(double v) const { return left + (w - left - right) * v / xmax; }
  double y(double v) const { return h - bottom - (h - top - bottom) * v / ymax; }
};
} // namespace

static void axes(raw_ostream &os, const Plot &p, StringRef xlabel,
                 StringRef ylabel, bool bytesY) {
  os << "<line x1='" << p.left << "' y1='" << p.y(0) << "' x2='"
     << p.w - p.right << "' y2='" << p.y(0) << "' stroke='#333'/>\n"
     << "<line x1='" << p.left << "' y1='" << p.top << "' x2='" << p.left
     << "' y2='" << p.y(0) << "' stroke='#333'/>\n";
  for (int i = 0; i <= 4; ++i) {
    double v = p.ymax * i / 4;
    os << "<text x='" << p.left - 6 << "' y='" << p.y(v) + 4
       << "' font-size='11' text-anchor='end'>"
       << (bytesY ? formatBytes(v) : std::to_string((long long)v)) << "</text>\n"
       << "<line x1='" << p.left << "' y1='" << p.y(v) << "' x2='"
       << p.w - p.right << "' y2='" << p.y(v)
       << "' stroke='#ddd' stroke-dasharray='3,3'/>\n";
  }
  os << "<text x='" << (p.left + p.w - p.right) / 2 << "' y='" << p.h - 12
     << "' font-size='12' text-anchor='middle'>" << escape(xlabel)
     << "</text>\n<text x='14' y='" << (p.top + p.y(0)) / 2
     << "' font-size='12' text-anchor='middle' transform='rotate(-90 14 "
     << (p.top + p.y(0)) / 2 << ")'>" << escape(ylabel) << "</text>\n";
}

/// The predicted step: one rectangle per launch along the time axis, its
/// colour by kind, a band per function call, the name, kind, binding limit
/// and time as a tooltip.
static void writeStepTimeline(raw_ostream &os,
                              const std::vector<StepSegment> &step) {
  double total = 0;
  for (const StepSegment &s : step)
    total += s.seconds;
  if (total <= 0)
    return;
  Plot p;
  p.h = 170;
  p.xmax = total * 1e3;
  p.ymax = 1;
  static const std::pair<const char *, const char *> colours[] = {
      {"gemm", "#1f5fbf"},          {"attention", "#d9480f"},
      {"elementwise", "#2b8a3e"},   {"data_movement", "#862e9c"},
      {"optimizer", "#e67700"},     {"layer_norm", "#0b7285"},
      {"rms_norm", "#0b7285"},      {"cross_entropy", "#c2255c"},
      {"column_sum", "#5c940d"},    {"reduction", "#5c940d"},
      {"memset", "#868e96"},        {"copy", "#868e96"}};
  auto colourOf = [&](StringRef kind) -> const char * {
    for (auto [k, c] : colours)
      if (kind == k)
        return c;
    return "#495057";
  };
  os << "<h2>Predicted step: " << llvm::format("%.3f", total * 1e3)
     << " ms, " << step.size()
     << " launches (hover for each one)</h2>\n<svg "
        "xmlns='http://www.w3.org/2000/svg' width='"
     << p.w << "' height='" << p.h << "'>\n";
  double t = 0, bandStart = 0;
  std::string band = step.front().function;
  auto closeBand = [&](double end) {
    os << "<text x='" << (p.x(bandStart) + p.x(end)) / 2 << "' y='"
       << p.top + 12 << "' font-size='10' text-anchor='middle'>"
       << escape(band) << "</text>\n<line x1='" << p.x(end) << "' y1='"
       << p.top << "' x2='" << p.x(end) << "' y2='" << p.y(0)
       << "' stroke='#adb5bd'/>\n";
  };
  for (const StepSegment &s : step) {
    if (s.function != band) {
      closeBand(t * 1e3);
      band = s.function;
      bandStart = t * 1e3;
    }
    double x0 = p.x(t * 1e3), x1 = p.x((t + s.seconds) * 1e3);
    os << "<rect x='" << x0 << "' y='" << p.top + 20 << "' width='"
       << std::max(x1 - x0, 0.3) << "' height='" << p.y(0) - p.top - 20
       << "' fill='" << colourOf(s.kind) << "'><title>" << escape(s.name)
       << " (" << escape(s.kind)
       << (s.limit.empty() ? "" : ", " + escape(s.limit))
       << "): " << llvm::format("%.4f", s.seconds * 1e3)
       << " ms</title></rect>\n";
    t += s.seconds;
  }
  closeBand(t * 1e3);
  os << "<line x1='" << p.left << "' y1='" << p.y(0) << "' x2='"
     << p.w - p.right << "' y2='" << p.y(0) << "' stroke='#333'/>\n"
     << "<text x='" << (p.left + p.w - p.right) / 2 << "' y='" << p.h - 12
     << "' font-size='12' text-anchor='middle'>predicted time (ms) of one "
        "optimizer step, launches in program order</text>\n</svg>\n"
     << "<p style='font-size:12px'>";
  bool first = true;
  for (auto [k, c] : colours) {
    os << (first ? "" : " &middot; ") << "<span style='color:" << c
       << "'>&#9632;</span> " << k;
    first = false;
  }
  os << "</p>\n";
}

void otc::writeReportHtml(raw_ostream &os, StringRef title,
                          const std::vector<TimelinePoint> &timeline,
                          const std::vector<FrontierPoint> &frontier,
                          const std::vector<std::string> &summary,
                          const std::vector<StepSegment> &step) {
  os << "<!DOCTYPE html>\n<html><head><meta charset='utf-8'><title>"
     << escape(title) << "</title>\n<style>body{font-family:sans-serif;"
     << "margin:24px;max-width:920px}h2{font-size:16px}</style></head><body>\n"
     << "<h1 style='font-size:20px'>" << escape(title) << "</h1>\n<ul>\n";
  for (const std::string &s : summary)
    os << "<li>" << escape(s) << "</li>\n";
  os << "</ul>\n";

  // Memory over one optimizer step.
  if (!timeline.empty()) {
    Plot p;
    p.xmax = std::max<double>(1, timeline.size());
    int64_t peak = 0;
    for (const TimelinePoint &t : timeline)
      peak = std::max(peak, t.bytes);
    p.ymax = std::max<double>(1, peak * 1.1);
    // The curve counts the bytes live at each op: its top is the lower
    // bound of the arena (which adds what placement cannot pack), not the
    // planned peak.
    os << "<h2>Memory of one training step (most bytes live at once "
       << formatBytes(peak) << ": the lower bound of the arena)</h2>\n<svg xmlns='http://www.w3.org/2000/svg' width='" << p.w
       << "' height='" << p.h << "'>\n";
    // Phase bands.
    size_t start = 0;
    static const char *fills[] = {"#eef4ff", "#fff4e6"};
    int band = 0;
    for (size_t i = 1; i <= timeline.size(); ++i) {
      if (i < timeline.size() && timeline[i].phase == timeline[start].phase)
        continue;
      os << "<rect x='" << p.x(start) << "' y='" << p.top << "' width='"
         << p.x(i) - p.x(start) << "' height='" << p.y(0) - p.top
         << "' fill='" << fills[band++ % 2] << "'/>\n<text x='"
         << (p.x(start) + p.x(i)) / 2 << "' y='" << p.top + 12
         << "' font-size='10' text-anchor='middle'>"
         << escape(timeline[start].phase) << "</text>\n";
      start = i;
    }
    axes(os, p, "operation (in execution order)", "bytes live", true);
    os << "<polyline fill='none' stroke='#1f5fbf' stroke-width='1.5' points='";
    for (size_t i = 0; i < timeline.size(); ++i)
      os << p.x(i) << "," << p.y(timeline[i].bytes) << " " << p.x(i + 1)
         << "," << p.y(timeline[i].bytes) << " ";
    os << "'/>\n</svg>\n";
  }

  if (!step.empty())
    writeStepTimeline(os, step);

  // Recompute frontier.
  if (!frontier.empty()) {
    Plot p;
    double fmax = 1, bmax = 1;
    for (const FrontierPoint &f : frontier) {
      fmax = std::max<double>(fmax, f.recomputeFlops);
      bmax = std::max<double>(bmax, f.activationBytes);
    }
    p.xmax = fmax * 1.1;
    p.ymax = bmax * 1.1;
    os << "<h2>Recompute frontier: activation memory against extra FLOPs "
          "per micro-step</h2>\n<svg xmlns='http://www.w3.org/2000/svg' "
          "width='"
       << p.w << "' height='" << p.h << "'>\n";
    axes(os, p, "recomputed FLOPs per micro-step", "activation peak", true);
    os << "<polyline fill='none' stroke='#999' points='";
    for (const FrontierPoint &f : frontier)
      if (!f.chosen)
        os << p.x(f.recomputeFlops) << "," << p.y(f.activationBytes) << " ";
    os << "'/>\n";
    for (const FrontierPoint &f : frontier)
      if (!f.chosen)
        os << "<circle cx='" << p.x(f.recomputeFlops) << "' cy='"
           << p.y(f.activationBytes) << "' r='3.5' fill='#1f5fbf'><title>"
           << escape(f.label) << ": " << formatBytes(f.activationBytes)
           << ", " << f.recomputeFlops << " FLOPs</title></circle>\n";
    for (const FrontierPoint &f : frontier)
      if (f.chosen)
        os << "<circle class='compiled' cx='" << p.x(f.recomputeFlops)
           << "' cy='" << p.y(f.activationBytes)
           << "' r='6' fill='#d9480f'><title>" << escape(f.label) << ": "
           << f.activationBytes << " bytes ("
           << formatBytes(f.activationBytes) << "), " << f.recomputeFlops
           << " FLOPs</title></circle>\n";
    os << "</svg>\n<p style='font-size:12px'>The small points are the "
          "choices of recomputation per block (n = keep, s = selective, f = "
          "full) as measured on the differentiated step, before precision, "
          "fusion and buffer planning (FP32, every intermediate kept); the "
          "large point is the compiled plan, from its buffer plan "
          "(plan.json's activations_peak).</p>\n";
  }
  os << "</body></html>\n";
}
