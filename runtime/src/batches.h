// `train --batch`: global batches of the model's inputs from safetensors
// files. A file holds one tensor per ONNX graph input (by name) whose
// leading dimension is a multiple k of the global batch (ranks x grad_accum
// x micro-batch samples): k global batches, rows in order. A path may be a
// glob (quoted) of such files, taken in sorted order. Step s trains on
// global batch (s - 1) mod N of the N in all files, so the steps go through
// them in order and start over (an epoch every N steps); one file of one
// global batch is the fixed batch of every step. A file is read whole when
// a step first needs it and kept until a step needs another (so a dataset
// larger than host memory is split into files that fit); a pipe is read
// once.
#ifndef OTCRT_BATCHES_H
#define OTCRT_BATCHES_H

#include "inputs.h"

#include <string>
#include <vector>

namespace otcrt {

class BatchFiles {
public:
  /// Opens the files of \p pattern and checks each input slot against
  /// each file's header (name, dtype, shape; an I32 tensor is taken for an
  /// I64 input).
  Status open(const std::string &pattern, const OtcProgram &program,
              const std::vector<const OtcSlot *> &inputs, int ranks);
  /// Global batches in all files.
  int64_t count() const { return total_; }
  size_t files() const { return files_.size(); }
  /// Rank \p rank's part of global batch \p index mod count() in \p out
  /// (its grad_accum micro-batches, converted to the slots' dtypes), each
  /// index checked against the program's index ranges; reads the batch's
  /// file when another is held. Nothing changes when \p index is the batch
  /// \p out holds.
  Status select(int64_t index, int rank, std::vector<InputData> &out);

private:
  struct File {
    std::string path;
    int64_t batches = 0;
  };
  Status readFile(size_t f);

  const OtcProgram *program_ = nullptr;
  std::vector<const OtcSlot *> inputs_;
  int ranks_ = 1;
  std::vector<File> files_;
  int64_t total_ = 0;
  /// The file held (-1: none) and its tensors.
  long held_ = -1;
  TensorFile heldTensors_;
  /// The global batch `out` was last given.
  int64_t selected_ = -1;
};

} // namespace otcrt

#endif // OTCRT_BATCHES_H
