// The gradient sums of libotcrt_cuda (communicator.h): NCCL's collectives on
// the device, over a communicator made at the first sum, whose id rank 0
// makes and hands to the others through the host collectives, whichever
// transport they use (MPI or TCP). A rank's share multiplies its gradients
// in the reduction (ncclRedOpCreatePreMulSum). The blocking sums run on the
// runtime's stream; the overlapped buckets' on the backend's communication
// stream (Backend::forkCommunicationStream), with their multiplier read
// from device scalars so that a replayed graph sums with its step's value.
// NCCL is loaded when a run has more than one rank: a program links no
// NCCL and runs alone without it.
#include "src/backend.h"
#include "src/communicator.h"
#include "src/inputs.h"
#include "src/world.h"

#include "otcrt/abi.h"
#include "otcrt/bf16.h"
#include "otcrt/kernels.h"

#include <cuda_runtime.h>
#ifdef OTCRT_HAVE_NCCL
#include "src/dynamic_library.h"

#include <nccl.h>
#endif

#include <cstdlib>
#include <cstring>
#include <string>

namespace otcrt {
namespace {

#ifdef OTCRT_HAVE_NCCL
struct NcclLibrary {
  DynamicLibrary library;
  decltype(&ncclGetUniqueId) getUniqueId = nullptr;
  decltype(&ncclCommInitRank) commInitRank = nullptr;
  decltype(&ncclCommDestroy) commDestroy = nullptr;
  decltype(&ncclAllReduce) allReduce = nullptr;
  decltype(&ncclReduceScatter) reduceScatter = nullptr;
  decltype(&ncclAllGather) allGather = nullptr;
  decltype(&ncclRedOpCreatePreMulSum) redOpCreatePreMulSum = nullptr;
  decltype(&ncclRedOpDestroy) redOpDestroy = nullptr;
  decltype(&ncclGetErrorString) errorString = nullptr;

  /// Loads it; false with \p why when it cannot be.
  bool load(std::string &why) {
    if (library.isOpen())
      return true;
    if (!library.open({"libnccl.so.2", "libnccl.so"}, why)) {
      why = "cannot load NCCL's libnccl.so.2 (" + why + ")";
      return false;
    }
    DynamicLibrary &l = library;
    bool ok = l.bind(getUniqueId, "ncclGetUniqueId") &&
              l.bind(commInitRank, "ncclCommInitRank") &&
              l.bind(commDestroy, "ncclCommDestroy") &&
              l.bind(allReduce, "ncclAllReduce") &&
              l.bind(reduceScatter, "ncclReduceScatter") &&
              l.bind(allGather, "ncclAllGather") &&
              l.bind(redOpCreatePreMulSum, "ncclRedOpCreatePreMulSum") &&
              l.bind(redOpDestroy, "ncclRedOpDestroy") &&
              l.bind(errorString, "ncclGetErrorString");
    if (!ok)
      why = "the NCCL library loaded lacks a function (NCCL 2.11 or later "
            "is needed)";
    return ok;
  }
};

class NcclGradients final : public GradientCommunicator {
public:
  NcclGradients(Backend &backend, HostCollectives &host)
      : backend_(backend), host_(host) {}

  ~NcclGradients() override {
    if (nccl_) {
      for (ncclRedOp_t op : preMulOps_)
        if (op != ncclSum)
          (void)nccl().redOpDestroy(op, nccl_);
      (void)nccl().commDestroy(nccl_);
    }
    if (preMulScalars_)
      (void)cudaFree(preMulScalars_);
  }

  /// NCCL's all-reduce on the runtime's stream.
  Status sumGradients(char *arena, const std::vector<OtcrtRange> &ranges,
                      double preMul) override {
    // One rank alone sums nothing, unless the test hook asks for NCCL's
    // sum over a communicator of this GPU alone.
    static const bool alone =
        std::getenv("OTC_TEST_COLLECTIVES_ALONE") != nullptr;
    if (!host_.joined() && !alone)
      return preMul == 1.0 ? Status::ok()
                           : scaleGradients(ranges, arena, preMul);
    if (Status s = communicator(); !s)
      return s;
    for (const OtcrtRange &r : ranges) {
      ncclDataType_t type = r.bf16 ? ncclBfloat16 : ncclFloat32;
      ncclRedOp_t op = ncclSum;
      if (Status s = preMulSum(preMul, r.bf16, op); !s)
        return s;
      void *p = arena + r.offset;
      Status s = ncclTry(nccl().allReduce(p, p, static_cast<size_t>(r.count),
                                          type, op, nccl_, stream()),
                         "ncclAllReduce");
      if (op != ncclSum)
        (void)nccl().redOpDestroy(op, nccl_);
      if (!s)
        return s;
    }
    return Status::ok();
  }

  /// ZeRO-1's reduce-scatter, in place (NCCL reads the whole group and
  /// writes this rank's part of it).
  Status reduceScatterGradients(char *arena, int64_t offset, int64_t perRank,
                                bool bf16, double preMul) override {
    if (Status s = shardedCommunicator(); !s)
      return s;
    ncclRedOp_t op = ncclSum;
    if (Status s = preMulSum(preMul, bf16, op); !s)
      return s;
    char *p = arena + offset;
    const int64_t element = bf16 ? 2 : 4;
    Status s =
        ncclTry(nccl().reduceScatter(
                    p, p + host_.world().rank * perRank * element,
                    static_cast<size_t>(perRank),
                    bf16 ? ncclBfloat16 : ncclFloat32, op, nccl_, stream()),
                "ncclReduceScatter");
    if (op != ncclSum)
      (void)nccl().redOpDestroy(op, nccl_);
    return s;
  }

  /// ZeRO-1's all-gather, in place.
  Status allGather(char *arena, int64_t offset, int64_t bytesPerRank) override {
    if (Status s = shardedCommunicator(); !s)
      return s;
    char *p = arena + offset;
    return ncclTry(nccl().allGather(p + host_.world().rank * bytesPerRank, p,
                                    static_cast<size_t>(bytesPerRank), ncclInt8,
                                    nccl_, stream()),
                   "ncclAllGather");
  }

  bool overlapsGradientSum() const override { return true; }
  bool sumsBucketsOnDevice() const override { return true; }

  /// Writes \p preMul to the device scalars (FP32 and BF16) that the
  /// bucket sums' operators read when they run; the communicator, the
  /// scalars and the operators are made at the first call.
  Status setBucketPreMul(double preMul) override {
    if (Status s = communicator(); !s)
      return s;
    if (!preMulScalars_) {
      if (cudaMalloc(&preMulScalars_, 8) != cudaSuccess) {
        (void)cudaGetLastError();
        preMulScalars_ = nullptr;
        return Status::error("cannot allocate the gradient sums' multiplier "
                             "on the device");
      }
      const ncclDataType_t types[2] = {ncclFloat32, ncclBfloat16};
      for (int i = 0; i < 2; ++i)
        if (Status s = ncclTry(nccl().redOpCreatePreMulSum(
                                   &preMulOps_[i], preMulScalars_ + 4 * i,
                                   types[i], ncclScalarDevice, nccl_),
                               "ncclRedOpCreatePreMulSum");
            !s)
          return s;
    }
    const float f = static_cast<float>(preMul);
    const uint16_t b = otcrt_float_to_bf16(f);
    char bytes[8] = {};
    std::memcpy(bytes, &f, 4);
    std::memcpy(bytes + 4, &b, 2);
    return backend_.upload(preMulScalars_, 0, bytes, sizeof(bytes));
  }

  /// The communication stream waits for the work queued so far on the
  /// compute stream, then runs NCCL's all-reduce of each range; the
  /// backend's runStep joins it back before the step function ends.
  Status startBucketSum(char *arena, const std::vector<OtcrtRange> &ranges,
                        const size_t *marks) override {
    if (!preMulScalars_)
      return Status::error("a bucket's sum started before its multiplier "
                           "was set (setBucketPreMul)");
    void *comm = nullptr;
    if (Status s = backend_.forkCommunicationStream(&comm); !s)
      return s;
    if (marks)
      if (Status s = backend_.mark(marks[0], true); !s)
        return s;
    for (const OtcrtRange &r : ranges) {
      void *p = arena + r.offset;
      if (Status s =
              ncclTry(nccl().allReduce(p, p, static_cast<size_t>(r.count),
                                       r.bf16 ? ncclBfloat16 : ncclFloat32,
                                       preMulOps_[r.bf16 ? 1 : 0], nccl_,
                                       static_cast<cudaStream_t>(comm)),
                      "ncclAllReduce (an overlapped bucket)");
          !s)
        return s;
    }
    if (marks)
      return backend_.mark(marks[1], true);
    return Status::ok();
  }

private:
  static NcclLibrary &nccl() {
    static NcclLibrary library;
    return library;
  }
  static cudaStream_t stream() {
    return static_cast<cudaStream_t>(otcrt_stream());
  }
  Status ncclTry(ncclResult_t r, const char *what) {
    if (r == ncclSuccess)
      return Status::ok();
    return Status::error(std::string(what) +
                         " failed: " + nccl().errorString(r));
  }
  /// The communicator, made at the first call: rank 0's id reaches the
  /// others through the host collectives.
  Status communicator() {
    if (nccl_)
      return Status::ok();
    const World &world = host_.world();
    std::string why;
    if (!nccl().load(why))
      return Status::error(why);
    ncclUniqueId id;
    std::memset(&id, 0, sizeof(id));
    if (world.isRoot())
      if (Status s = ncclTry(nccl().getUniqueId(&id), "ncclGetUniqueId"); !s)
        return s;
    {
      HostCollectives::Waiting wait(host_, "NCCL's id from rank 0");
      if (Status s = host_.broadcast(&id, sizeof(id)); !s)
        return s;
    }
    return ncclTry(nccl().commInitRank(&nccl_, world.size, id, world.rank),
                   "ncclCommInitRank");
  }
  /// The communicator of a sharded optimizer's collectives, which need the
  /// ranks of a data-parallel run.
  Status shardedCommunicator() {
    if (!host_.joined())
      return Status::error("a sharded optimizer needs the ranks of a "
                           "data-parallel run (mpirun, torchrun, srun)");
    return communicator();
  }
  /// A sum that multiplies each rank's values by \p preMul first (ncclSum
  /// when it is 1), in `op`; the caller destroys one that is not ncclSum.
  Status preMulSum(double preMul, bool bf16, ncclRedOp_t &op) {
    op = ncclSum;
    if (preMul == 1.0)
      return Status::ok();
    float f = static_cast<float>(preMul);
    uint16_t b = otcrt_float_to_bf16(f);
    return ncclTry(
        nccl().redOpCreatePreMulSum(
            &op, bf16 ? static_cast<void *>(&b) : static_cast<void *>(&f),
            bf16 ? ncclBfloat16 : ncclFloat32, ncclScalarHostImmediate, nccl_),
        "ncclRedOpCreatePreMulSum");
  }

  Backend &backend_;
  HostCollectives &host_;
  ncclComm_t nccl_ = nullptr;
  /// The bucket sums' operators (FP32, BF16), which multiply each rank's
  /// values by the device scalars at preMulScalars_ (FP32 at 0, BF16 at 4).
  ncclRedOp_t preMulOps_[2] = {ncclSum, ncclSum};
  char *preMulScalars_ = nullptr;
};

#else // !OTCRT_HAVE_NCCL

/// Without NCCL the cuda target runs one rank only.
class NcclGradients final : public GradientCommunicator {
public:
  NcclGradients(Backend &, HostCollectives &host) : host_(host) {}
  /// One rank's sum is its own gradients, weighted as the NCCL build
  /// weights them.
  Status sumGradients(char *arena, const std::vector<OtcrtRange> &ranges,
                      double preMul) override {
    if (host_.joined())
      return noNccl();
    return preMul == 1.0 ? Status::ok() : scaleGradients(ranges, arena, preMul);
  }
  Status reduceScatterGradients(char *, int64_t, int64_t, bool,
                                double) override {
    return noNccl();
  }
  Status allGather(char *, int64_t, int64_t) override { return noNccl(); }

private:
  static Status noNccl() {
    return Status::error("this runtime was built without NCCL: the cuda "
                         "target runs one rank only");
  }
  HostCollectives &host_;
};

#endif

} // namespace

GradientCommunicator &defaultGradientCommunicator() {
  static NcclGradients gradients(defaultBackend(), hostCollectives());
  return gradients;
}

} // namespace otcrt
