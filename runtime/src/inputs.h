// Host-side data of a training step: the initial parameters and the fixed
// batch read from safetensors files (checked against the slot table), and the
// gradient post-processing between the micro-steps and the optimizer step
// (the global norm, which is also the non-finite check, and scaling for the
// batch-size ramp and global-norm clipping).
#ifndef OTCRT_INPUTS_H
#define OTCRT_INPUTS_H

#include "backend.h"
#include "otcrt/abi.h"
#include "otcrt/kernels.h"
#include "otcrt/safetensors.h"

#include <map>
#include <string>
#include <vector>

namespace otcrt {

/// A global-batch input converted to its slot's dtype.
struct InputData {
  const OtcSlot *slot;
  std::vector<uint8_t> bytes; // grad_accum * slot->nbytes
};

/// Loads and checks every PARAM and BUFFER slot from the initial-parameter
/// file (those tensors alone: any other's bytes are not read). A buffer that
/// file lacks (a checkpoint's model.safetensors holds the trained parameters
/// only) comes from \p fallbackPath, the compiled init.safetensors, when that
/// is another file.
Status loadInitialParams(const std::string &path,
                         const std::vector<const OtcSlot *> &params,
                         const std::vector<const OtcSlot *> &buffers,
                         const std::string &fallbackPath, TensorFile &init);
/// Loads and checks the BUFFER slots alone from the initial-parameter file,
/// as loadInitialParams does (a buffer it lacks from \p fallbackPath),
/// reading no other tensor's bytes; \p sources gets the file each buffer
/// came from. Errors are one line naming the file (as readSafetensors
/// gives them for the file itself).
Status loadInitialBuffers(const std::string &path,
                          const std::vector<const OtcSlot *> &buffers,
                          const std::string &fallbackPath, TensorFile &init,
                          std::map<std::string, std::string> &sources);

/// Loads the batch file and converts each INPUT tensor to its slot dtype.
/// The file holds the global batch, \p ranks x grad_accum micro-batches;
/// \p out keeps rank \p rank's part (its grad_accum micro-batches, in rank
/// order).
Status loadBatch(const std::string &path, const OtcProgram &program,
                 const std::vector<const OtcSlot *> &inputs, int ranks,
                 int rank, std::vector<InputData> &out);

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
