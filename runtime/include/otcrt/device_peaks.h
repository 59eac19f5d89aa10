/* The dense peak FLOP/s of the GPUs otc knows, per precision of a
 * program's products (OtcPrecision, otcrt/abi.h): the one table that MFU
 * is quoted against, by the compiler (plan.json and the step-time model's
 * device models, targets/cuda/Devices.cpp) and by the runtime (train's MFU,
 * the device found by its compute capability). A program's FP32 GEMMs run
 * with FP32 compute (no TF32, otcrt_gemm), so FP32 is the CUDA cores'
 * rate; BF16 the tensor cores' dense rate (no sparsity). Every figure is
 * NVIDIA's published one at the boost clock (datasheet and architecture
 * whitepaper). C-compatible. */
#ifndef OTCRT_DEVICE_PEAKS_H
#define OTCRT_DEVICE_PEAKS_H

#include "otcrt/abi.h"

#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef struct {
  const char *name;     /* otc-compile --device */
  int32_t major, minor; /* compute capability */
  double fp32;          /* FLOP/s, OTC_PRECISION_FP32 */
  double bf16;          /* FLOP/s, OTC_PRECISION_BF16 */
} OtcrtDevicePeak;

/// The table; *count gets its length.
static inline const OtcrtDevicePeak *otcrt_device_peaks(size_t *count) {
  static const OtcrtDevicePeak peaks[] = {
      /* H100 SXM5 (GH100, 132 SMs): 66.9 TFLOP/s FP32, 989.4 BF16 dense
         (Hopper whitepaper; the datasheet's 67 and 1,979 with sparsity). */
      {"h100", 9, 0, 66.9e12, 989.4e12},
      /* H200 SXM: the same chip and clocks (datasheet: 67 FP32, 1,979 BF16
         with sparsity). Found by compute capability, the runtime reads the
         H100's row, which has the same figures. */
      {"h200", 9, 0, 66.9e12, 989.4e12},
      /* A100 SXM4/PCIe (GA100, 108 SMs): 19.5 FP32, 312 BF16 dense
         (Ampere whitepaper, datasheet). */
      {"a100", 8, 0, 19.5e12, 312e12},
  };
  *count = sizeof(peaks) / sizeof(peaks[0]);
  return peaks;
}

/// The figure of `peak` for `precision` (OtcPrecision); 0 for another.
static inline double otcrt_peak_for(const OtcrtDevicePeak *peak,
                                    int32_t precision) {
  if (!peak)
    return 0;
  return precision == OTC_PRECISION_BF16   ? peak->bf16
         : precision == OTC_PRECISION_FP32 ? peak->fp32
                                           : 0;
}

/// The row called `name`, or NULL.
static inline const OtcrtDevicePeak *otcrt_device_peak_named(const char *name) {
  size_t count = 0;
  const OtcrtDevicePeak *peaks = otcrt_device_peaks(&count);
  for (size_t i = 0; i < count; ++i)
    if (strcmp(peaks[i].name, name) == 0)
      return &peaks[i];
  return NULL;
}

/// The first row of compute capability major.minor, or NULL (an unknown
/// GPU: MFU n/a unless `train --peak-tflops` gives the peak).
static inline const OtcrtDevicePeak *otcrt_device_peak_of(int32_t major,
                                                          int32_t minor) {
  size_t count = 0;
  const OtcrtDevicePeak *peaks = otcrt_device_peaks(&count);
  for (size_t i = 0; i < count; ++i)
    if (peaks[i].major == major && peaks[i].minor == minor)
      return &peaks[i];
  return NULL;
}

#endif /* OTCRT_DEVICE_PEAKS_H */
