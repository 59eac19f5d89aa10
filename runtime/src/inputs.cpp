// Loading the initial parameters, and the host-side
// gradient scaling and clipping (see inputs.h).
#include "inputs.h"

#include "driver.h"
#include "program.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>
#include <sys/stat.h>

namespace otcrt {

bool regularFile(const std::string &path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

namespace {

/// loadInitialParams and loadInitialBuffers: \p readFailed tells an error
/// reading \p path itself (its message as readSafetensors gives it) from
/// the others.
Status loadInitial(const std::string &path,
                   const std::vector<const OtcSlot *> &params,
                   const std::vector<const OtcSlot *> &buffers,
                   const std::string &fallbackPath, InitialTensors &init,
                   bool &readFailed) {
  readFailed = false;
  // The slots' tensors alone: the file may hold more (a resume's buffers
  // are read from a file that also holds every parameter).
  std::set<std::string> wanted;
  for (const auto *list : {&params, &buffers})
    for (const OtcSlot *slot : *list)
      wanted.insert(slot->name);
  auto isWanted = [&](const std::string &name) {
    return wanted.count(name) > 0;
  };
  // A file's layout now, its tensors when they are uploaded (a few at a
  // time: an 8B model's 32 GB of F32 values are never held at once); a
  // pipe's wanted tensors now.
  const bool pipe = !regularFile(path);
  if (pipe)
    init.pipe = path;
  Status read = pipe ? readSafetensors(path, init.loaded, isWanted)
                     : readSafetensorsLayout(path, init.layout);
  if (!read) {
    readFailed = true;
    return read;
  }
  const TensorFile &given = pipe ? init.loaded : init.layout;
  for (const std::string &name : wanted)
    if (given.find(name))
      init.source[name] = path;
  // The buffers the file lacks (a checkpoint's model.safetensors holds the
  // trained parameters only) from the fallback, when that is another file.
  std::vector<std::string> missing;
  for (const OtcSlot *slot : buffers)
    if (!init.source.count(slot->name))
      missing.push_back(slot->name);
  if (!missing.empty() && !fallbackPath.empty() && fallbackPath != path) {
    TensorFile fallback;
    if (Status r = readSafetensorsLayout(fallbackPath, fallback); !r)
      return Status::error(path + ": buffer '" + missing.front() +
                           "' not found, and " + r.message());
    for (const std::string &name : missing)
      if (Tensor *t = fallback.find(name)) {
        init.source[name] = fallbackPath;
        init.layout.tensors.push_back(std::move(*t));
      }
  }
  auto check = [&](const OtcSlot *slot, bool buffer) -> Status {
    auto source = init.source.find(slot->name);
    std::vector<int64_t> want = slotShape(*slot);
    if (source == init.source.end())
      return Status::error(path + ": " + (buffer ? "buffer '" : "parameter '") +
                           slot->name + "' not found (expected F32 " +
                           formatShape(want) + ")");
    const std::string &where = source->second;
    const Tensor *t = where == init.pipe ? init.loaded.find(slot->name)
                                         : init.layout.find(slot->name);
    // A BF16 buffer (a frozen parameter read in BF16 alone) is rounded
    // from F32 values as it is uploaded, or given in BF16.
    bool bf16Slot = slot->dtype == OTC_BF16;
    if ((t->dtype != StDType::F32 &&
         !(bf16Slot && t->dtype == StDType::BF16)) ||
        t->shape != want)
      return Status::error(where + ": " +
                           (buffer ? "buffer '" : "parameter '") + slot->name +
                           "': expected F32 " + (bf16Slot ? "or BF16 " : "") +
                           formatShape(want) + ", found " +
                           dtypeName(t->dtype) + " " + formatShape(t->shape));
    return Status::ok();
  };
  for (const OtcSlot *slot : params)
    if (Status r = check(slot, false); !r)
      return r;
  for (const OtcSlot *slot : buffers)
    if (Status r = check(slot, true); !r)
      return r;
  return Status::ok();
}

} // namespace

Status loadInitialParams(const std::string &path,
                         const std::vector<const OtcSlot *> &params,
                         const std::vector<const OtcSlot *> &buffers,
                         const std::string &fallbackPath,
                         InitialTensors &init) {
  bool readFailed = false;
  Status s = loadInitial(path, params, buffers, fallbackPath, init, readFailed);
  if (!s && readFailed)
    return Status::error("cannot load initial parameters (--init): " +
                         s.message());
  return s;
}

Status loadInitialBuffers(const std::string &path,
                          const std::vector<const OtcSlot *> &buffers,
                          const std::string &fallbackPath,
                          InitialTensors &init) {
  bool readFailed = false;
  return loadInitial(path, {}, buffers, fallbackPath, init, readFailed);
}

Status forEachInitialTensor(
    InitialTensors &init, const std::vector<const OtcSlot *> &slots,
    const std::function<Status(const OtcSlot &, Tensor &)> &use,
    size_t batchBytes) {
  // A pipe's tensors, read already; from each file, batches of at most
  // batchBytes (or one tensor), each read, used and freed before the next.
  std::map<std::string, std::vector<const OtcSlot *>> byFile;
  for (const OtcSlot *slot : slots) {
    const std::string &file = init.source.at(slot->name);
    if (file != init.pipe) {
      byFile[file].push_back(slot);
      continue;
    }
    Tensor *t = init.loaded.find(slot->name);
    if (!t)
      return Status::error(std::string("internal error: initial tensor '") +
                           slot->name + "' was not read");
    if (Status s = use(*slot, *t); !s)
      return s;
    std::vector<uint8_t>().swap(t->data);
  }
  for (auto &[file, fileSlots] : byFile)
    for (size_t first = 0; first < fileSlots.size();) {
      std::set<std::string> names;
      size_t bytes = 0, last = first;
      while (last < fileSlots.size() &&
             (last == first || bytes + fileSlots[last]->nbytes <= batchBytes)) {
        names.insert(fileSlots[last]->name);
        bytes += static_cast<size_t>(fileSlots[last]->nbytes);
        ++last;
      }
      TensorFile batch;
      if (Status s = readSafetensors(
              file, batch,
              [&](const std::string &name) { return names.count(name) > 0; });
          !s)
        return s;
      for (size_t i = first; i < last; ++i) {
        Tensor *t = batch.find(fileSlots[i]->name);
        const Tensor *seen = init.layout.find(fileSlots[i]->name);
        if (!t || !seen || t->dtype != seen->dtype || t->shape != seen->shape)
          return Status::error(file + ": tensor '" + fileSlots[i]->name +
                               "' changed while it was read");
        if (Status s = use(*fileSlots[i], *t); !s)
          return s;
        std::vector<uint8_t>().swap(t->data);
      }
      first = last;
    }
  return Status::ok();
}

std::vector<OtcrtRange> gradientRanges(const std::vector<const OtcSlot *> &grads) {
  std::vector<const OtcSlot *> sorted = grads;
  std::sort(sorted.begin(), sorted.end(),
            [](const OtcSlot *a, const OtcSlot *b) { return a->offset < b->offset; });
  std::vector<OtcrtRange> ranges;
  int64_t end = -1;
  for (const OtcSlot *slot : sorted) {
    int32_t bf16 = slot->dtype == OTC_BF16 ? 1 : 0;
    int64_t elemBytes = bf16 ? 2 : 4;
    if (!ranges.empty() && slot->offset == end && ranges.back().bf16 == bf16)
      ranges.back().count += slot->nbytes / elemBytes;
    else
      ranges.push_back({slot->offset, slot->nbytes / elemBytes, bf16, 0});
    end = slot->offset + slot->nbytes;
  }
  return ranges;
}

Status gradientNorm(const std::vector<OtcrtRange> &ranges, const char *arena,
                    double &norm) {
  double sum = 0;
  if (otcrt_sum_squares(arena, static_cast<int32_t>(ranges.size()),
                        ranges.data(), &sum, otcrt_stream()) != 0)
    return Status::error("the gradient norm (otcrt_sum_squares) failed");
  norm = std::sqrt(sum);
  return Status::ok();
}

Status gradFactor(const std::vector<OtcrtRange> &ranges, char *arena,
                  int64_t factorOffset, double scale, double clip,
                  const float *checks, int32_t numChecks, double *norm) {
  auto *factor = reinterpret_cast<float *>(arena + factorOffset);
  if (otcrt_grad_factor(arena, static_cast<int32_t>(ranges.size()),
                        ranges.data(), static_cast<float>(scale),
                        static_cast<float>(clip), checks, numChecks, factor,
                        norm, otcrt_stream()) != 0)
    return Status::error("the gradient factor (otcrt_grad_factor) failed");
  return Status::ok();
}

Status scaleGradients(const std::vector<OtcrtRange> &ranges, char *arena,
                      double factor) {
  if (otcrt_scale_ranges(arena, static_cast<int32_t>(ranges.size()),
                         ranges.data(), static_cast<float>(factor),
                         otcrt_stream()) != 0)
    return Status::error("scaling the gradients (otcrt_scale_ranges) failed");
  return Status::ok();
}

} // namespace otcrt
