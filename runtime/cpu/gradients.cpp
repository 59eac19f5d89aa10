// The gradient sums of libotcrt_cpu (communicator.h): the arena is host
// memory, so the gradients go over the process's host collectives as they
// are (MPI or TCP), a BF16 range widened to FP32 for the sum and rounded
// once after it. Their buckets are summed while the backward goes on
// (overlapsGradientSum) through the host collectives' startSum.
#include "src/communicator.h"
#include "src/world.h"

#include "otcrt/bf16.h"

#include <vector>

namespace otcrt {
namespace {

class HostGradients final : public GradientCommunicator {
public:
  explicit HostGradients(HostCollectives &host) : host_(host) {}

  Status sumGradients(char *arena, const std::vector<OtcrtRange> &ranges,
                      double preMul) override {
    for (const OtcrtRange &r : ranges) {
      if (!r.bf16) {
        float *p = reinterpret_cast<float *>(arena + r.offset);
        if (Status s = host_.sumFloats(p, r.count, preMul); !s)
          return s;
        continue;
      }
      uint16_t *p = reinterpret_cast<uint16_t *>(arena + r.offset);
      std::vector<float> wide(static_cast<size_t>(r.count));
      for (int64_t i = 0; i < r.count; ++i)
        wide[i] = otcrt_bf16_to_float(p[i]);
      if (Status s = host_.sumFloats(wide.data(), r.count, preMul); !s)
        return s;
      for (int64_t i = 0; i < r.count; ++i)
        p[i] = otcrt_float_to_bf16(wide[i]);
    }
    return Status::ok();
  }

  Status reduceScatterGradients(char *arena, int64_t offset, int64_t perRank,
                                bool bf16, double preMul) override {
    const int64_t ranks = host_.world().size;
    if (!bf16)
      return host_.reduceScatterFloats(
          reinterpret_cast<float *>(arena + offset), perRank, preMul);
    // BF16 gradients are summed in float and rounded once, as the
    // all-reduce does.
    uint16_t *p = reinterpret_cast<uint16_t *>(arena + offset);
    std::vector<float> wide(static_cast<size_t>(ranks * perRank));
    for (int64_t i = 0; i < ranks * perRank; ++i)
      wide[i] = otcrt_bf16_to_float(p[i]);
    if (Status s = host_.reduceScatterFloats(wide.data(), perRank, preMul); !s)
      return s;
    const int64_t first = host_.world().rank * perRank;
    for (int64_t i = first; i < first + perRank; ++i)
      p[i] = otcrt_float_to_bf16(wide[i]);
    return Status::ok();
  }

  Status allGather(char *arena, int64_t offset, int64_t bytesPerRank) override {
    return host_.allGatherBytes(arena + offset, bytesPerRank);
  }

  bool overlapsGradientSum() const override { return true; }

private:
  HostCollectives &host_;
};

} // namespace

GradientCommunicator &defaultGradientCommunicator() {
  static HostGradients gradients(hostCollectives());
  return gradients;
}

} // namespace otcrt
