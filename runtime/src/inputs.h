// Host-side data of a training step: the initial parameters and the fixed
// batch read from safetensors files (checked against the slot table), and the
// gradient post-processing between the micro-steps and the optimizer step
// (scaling for the batch-size ramp and global-norm clipping).
#ifndef OTCRT_INPUTS_H
#define OTCRT_INPUTS_H

#include "backend.h"
#include "otcrt/abi.h"
#include "otcrt/safetensors.h"

#include <string>
#include <vector>

namespace otcrt {

/// A global-batch input converted to its slot's dtype.
struct InputData {
  const OtcSlot *slot;
  std::vector<uint8_t> bytes; // grad_accum * slot->nbytes
};

/// Loads and checks every PARAM slot from the initial-parameter file.
Status loadInitialParams(const std::string &path,
                         const std::vector<const OtcSlot *> &params,
                         TensorFile &init);

/// Loads the batch file and converts each INPUT tensor to its slot dtype.
Status loadBatch(const std::string &path, const OtcProgram &program,
                 const std::vector<const OtcSlot *> &inputs,
                 std::vector<InputData> &out);

/// Computes the global L2 norm of the GRAD slots after multiplying them by
/// \p scale, then multiplies them by \p scale (times clip/norm when
/// \p clip > 0 and the norm exceeds it) in place. On a device the gradients
/// are downloaded and uploaded once each (no device kernel yet).
Status adjustGradients(const std::vector<const OtcSlot *> &grads, Backend &backend,
                       char *arena, double scale, double clip, double &norm);

} // namespace otcrt

#endif // OTCRT_INPUTS_H
