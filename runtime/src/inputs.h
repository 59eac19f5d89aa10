// Host-side data of a training step: the initial parameters read from
// safetensors files (checked against the slot table; the --batch files are
// batches.h's), and the
// gradient post-processing between the micro-steps and the optimizer step
// (the global norm, which is also the non-finite check, and scaling for the
// batch-size ramp and global-norm clipping).
#ifndef OTCRT_INPUTS_H
#define OTCRT_INPUTS_H

#include "backend.h"
#include "otcrt/abi.h"
#include "otcrt/kernels.h"
#include "otcrt/safetensors.h"

#include <functional>
#include <map>
#include <string>
#include <vector>

namespace otcrt {

/// Whether \p path is a regular file, whose layout can be read apart from
/// its tensors (a pipe cannot).
bool regularFile(const std::string &path);

/// A global-batch input converted to its slot's dtype.
struct InputData {
  const OtcSlot *slot;
  std::vector<uint8_t> bytes; // grad_accum * slot->nbytes
};

/// The initial tensors of a program's slots, checked, before their bytes
/// are read: each slot's file and the tensors' layouts (a pipe's tensors
/// are read whole instead, into `loaded`).
struct InitialTensors {
  TensorFile layout; ///< names, dtypes, shapes
  std::string pipe;  ///< the initial parameters, when not a regular file
  TensorFile loaded; ///< that pipe's tensors, with data
  std::map<std::string, std::string> source; ///< slot name -> file
};

/// Checks every PARAM and BUFFER slot against the initial-parameter file's
/// header (reading no tensor's bytes: forEachInitialTensor reads them). A
/// buffer that file lacks (a checkpoint's model.safetensors holds the
/// trained parameters only) comes from \p fallbackPath, the compiled
/// init.safetensors, when that is another file.
Status loadInitialParams(const std::string &path,
                         const std::vector<const OtcSlot *> &params,
                         const std::vector<const OtcSlot *> &buffers,
                         const std::string &fallbackPath, InitialTensors &init);
/// Checks the BUFFER slots alone, as loadInitialParams does (a buffer the
/// file lacks from \p fallbackPath); init.source gives the file of each.
/// Errors are one line naming the file (as readSafetensors gives them for
/// the file itself).
Status loadInitialBuffers(const std::string &path,
                          const std::vector<const OtcSlot *> &buffers,
                          const std::string &fallbackPath,
                          InitialTensors &init);
/// Reads the initial tensors of \p slots from their files, at most
/// \p batchBytes of them (or one tensor) at a time, and calls \p use with
/// each (which may change its bytes), freeing its bytes after: an 8B
/// model's 32 GB of F32 values are never held at once.
Status forEachInitialTensor(
    InitialTensors &init, const std::vector<const OtcSlot *> &slots,
    const std::function<Status(const OtcSlot &, Tensor &)> &use,
    size_t batchBytes = size_t(1) << 30);

/// The arena ranges of the GRAD slots for otcrt_sum_squares, in offset
/// order, slots of one dtype that follow each other without a gap merged
/// into one range (all of them when the gradients lie contiguously).
std::vector<OtcrtRange> gradientRanges(const std::vector<const OtcSlot *> &grads);

/// The global L2 norm of the gradients: the square root of
/// otcrt_sum_squares over \p ranges (one pass, one value read back).
Status gradientNorm(const std::vector<OtcrtRange> &ranges, const char *arena,
                    double &norm);

/// Queues otcrt_grad_factor: the GRAD_FACTOR slot at \p factorOffset gets
/// \p scale times the clipping factor of the gradients' norm (\p clip; 0:
/// none), NaN when the norm, one of the \p numChecks floats at \p checks
/// (where the arena is) or the kernels' error record is bad, and the norm
/// (the scaled one) arrives at \p norm (backend host memory) once the
/// stream is synchronized.
Status gradFactor(const std::vector<OtcrtRange> &ranges, char *arena,
                  int64_t factorOffset, double scale, double clip,
                  const float *checks, int32_t numChecks, double *norm);

/// Multiplies the gradients in \p ranges by \p factor in place where they
/// are (otcrt_scale_ranges: a device kernel on cuda, queued without a wait).
Status scaleGradients(const std::vector<OtcrtRange> &ranges, char *arena,
                      double factor);

} // namespace otcrt

#endif // OTCRT_INPUTS_H
