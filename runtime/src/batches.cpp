// `train --batch` files of global batches (see batches.h).
#include "batches.h"

#include "data.h"
#include "program.h"

#include <cstring>

namespace otcrt {
namespace {

/// Element \p flat of a row-major \p shape as "[i, j]".
std::string positionOf(const std::vector<int64_t> &shape, int64_t flat) {
  std::vector<int64_t> index(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    index[d] = shape[d] ? flat % shape[d] : 0;
    flat = shape[d] ? flat / shape[d] : 0;
  }
  return formatShape(index);
}

} // namespace

Status BatchFiles::open(const std::string &pattern, const OtcProgram &program,
                        const std::vector<const OtcSlot *> &inputs, int ranks) {
  program_ = &program;
  inputs_ = inputs;
  ranks_ = ranks;
  std::vector<std::string> paths;
  if (pattern.find_first_of("*?[") == std::string::npos)
    paths.push_back(pattern);
  else if (Status s = expandGlobs({pattern}, "--batch", paths); !s)
    return s;
  for (size_t f = 0; f < paths.size(); ++f) {
    const std::string &path = paths[f];
    TensorFile layout;
    const bool pipe = !regularFile(path);
    if (pipe && paths.size() > 1)
      return Status::error("--batch: " + path +
                           " is not a regular file: a pipe can only be the one "
                           "batch file");
    Status read = pipe ? readSafetensors(path, heldTensors_)
                       : readSafetensorsLayout(path, layout);
    if (!read)
      return Status::error("cannot load the batch (--batch): " +
                           read.message());
    if (pipe)
      held_ = static_cast<long>(f);
    const TensorFile &given = pipe ? heldTensors_ : layout;
    int64_t batches = -1;
    std::string first;
    for (const OtcSlot *slot : inputs) {
      std::vector<int64_t> want = slotShape(*slot);
      const int64_t rows = want[0] * program.grad_accum * ranks;
      want[0] = rows;
      StDType wantType = StDType::F32;
      toStDType(slot->dtype, wantType); // validated by validateProgram
      std::string expected =
          std::string(dtypeName(wantType)) + " " + formatShape(want) +
          " (micro-batch " + std::to_string(program.micro_batch) +
          " x grad_accum " + std::to_string(program.grad_accum) +
          (ranks > 1 ? " x " + std::to_string(ranks) + " ranks"
                     : std::string()) +
          ")";
      const Tensor *t = given.find(slot->name);
      if (!t)
        return Status::error(path + ": input '" + slot->name +
                             "' not found (expected " + expected + ")");
      bool convertI32 = slot->dtype == OTC_I64 && t->dtype == StDType::I32;
      bool shapeOk =
          t->shape.size() == want.size() && !t->shape.empty() &&
          t->shape[0] > 0 && t->shape[0] % rows == 0 &&
          std::equal(want.begin() + 1, want.end(), t->shape.begin() + 1);
      if (!shapeOk || (t->dtype != wantType && !convertI32))
        return Status::error(path + ": input '" + slot->name + "': expected " +
                             expected + ", found " + dtypeName(t->dtype) + " " +
                             formatShape(t->shape) + " (or a multiple of " +
                             std::to_string(rows) +
                             " rows: one global batch each)");
      int64_t k = t->shape[0] / rows;
      if (batches >= 0 && k != batches)
        return Status::error(path + ": input '" + slot->name + "' holds " +
                             std::to_string(k) + " global batch(es) of " +
                             std::to_string(rows) + " rows, input '" + first +
                             "' " + std::to_string(batches) +
                             ": every input needs the same number");
      if (batches < 0) {
        batches = k;
        first = slot->name;
      }
    }
    files_.push_back({path, batches < 0 ? 1 : batches});
    total_ += files_.back().batches;
  }
  return Status::ok();
}

Status BatchFiles::readFile(size_t f) {
  if (held_ == static_cast<long>(f))
    return Status::ok();
  heldTensors_ = TensorFile();
  held_ = -1;
  if (Status s = readSafetensors(files_[f].path, heldTensors_); !s)
    return Status::error("cannot load the batch (--batch): " + s.message());
  held_ = static_cast<long>(f);
  return Status::ok();
}

Status BatchFiles::select(int64_t index, int rank,
                          std::vector<InputData> &out) {
  index = total_ > 0 ? index % total_ : 0;
  if (index == selected_ && !out.empty())
    return Status::ok();
  size_t f = 0;
  int64_t j = index;
  while (f + 1 < files_.size() && j >= files_[f].batches)
    j -= files_[f++].batches;
  if (Status s = readFile(f); !s)
    return s;
  const std::string &path = files_[f].path;
  out.clear();
  for (const OtcSlot *slot : inputs_) {
    const Tensor *t = heldTensors_.find(slot->name);
    std::vector<int64_t> want = slotShape(*slot);
    const int64_t rows = want[0] * program_->grad_accum * ranks_;
    if (!t || t->shape.empty() || t->shape[0] != rows * files_[f].batches)
      return Status::error(path + ": input '" + slot->name +
                           "' changed after the run started");
    want[0] = rows;
    const int64_t count = numElements(want);
    const bool convertI32 = slot->dtype == OTC_I64 && t->dtype == StDType::I32;
    const size_t elem = convertI32 ? sizeof(int32_t) : dtypeSize(t->dtype);
    const uint8_t *src = t->data.data() + static_cast<size_t>(j * count) * elem;
    InputData data{slot, {}};
    if (convertI32) {
      data.bytes.resize(static_cast<size_t>(count) * sizeof(int64_t));
      for (int64_t i = 0; i < count; ++i) {
        int32_t v;
        std::memcpy(&v, src + i * sizeof(int32_t), sizeof(v));
        int64_t w = v;
        std::memcpy(data.bytes.data() + i * sizeof(int64_t), &w, sizeof(w));
      }
    } else {
      data.bytes.assign(src, src + static_cast<size_t>(count) * elem);
    }
    if (const OtcIndexRange *range = indexRangeOf(*program_, *slot)) {
      int64_t bad = 0, value = 0;
      if (findBadIndex(*range, *slot, data.bytes.data(), count, bad, value)) {
        std::vector<int64_t> whole = t->shape;
        return Status::error(path + ": input '" + slot->name + "' holds " +
                             std::to_string(value) + " at " +
                             positionOf(whole, j * count + bad) + ", outside " +
                             indexRangeText(*range) + " (" + range->what + ")");
      }
    }
    if (ranks_ > 1) {
      // This rank's rows.
      size_t part = static_cast<size_t>(slot->nbytes) * program_->grad_accum;
      data.bytes = std::vector<uint8_t>(data.bytes.begin() + part * rank,
                                        data.bytes.begin() + part * (rank + 1));
    }
    out.push_back(std::move(data));
  }
  selected_ = index;
  return Status::ok();
}

} // namespace otcrt
