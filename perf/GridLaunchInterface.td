//===- GridLaunchInterface.td - how a GPU target runs an op -*- tablegen -*-===//
//
// The machine model of a target that launches grids (a GPU): per op, the
// kernels it launches and whether it runs on a vendor library. The
// step-time model (perf/StepTime.cpp) reads it; the target owns it and
// attaches it to the ops as external models (targets/cuda/LibraryLaunches.cpp),
// so that the launch geometry of its runtime lives beside that runtime's
// target, not in ir/.
//
//===----------------------------------------------------------------------===//

#ifndef OTC_PERF_GRIDLAUNCHINTERFACE_TD
#define OTC_PERF_GRIDLAUNCHINTERFACE_TD

include "mlir/IR/OpBase.td"

def Perf_GridLaunchOpInterface : OpInterface<"GridLaunchOpInterface"> {
  let cppNamespace = "::otc";
  let description = [{
    How a GPU target runs an op of the program (a library call, or a
    generated kernel, otck.kernel): the kernels it launches, each with the
    grid, block and per-thread loop its runtime launches it with for this
    op's sizes on `device`, so that the step-time prediction prices what
    each launch does; and, for a call that a vendor library runs (attention
    on cuDNN), that it does, priced by the device's measured rate instead.
    A target attaches it as external models when the dialects load
    (TargetEntry::attachInterfaces, ir/TargetRegistry.h).
  }];
  let methods = [
    InterfaceMethod<[{
        Appends the kernels one execution launches on `device`, in order.
        Appends nothing for a call that a vendor library runs.
      }], "void", "getGridLaunches",
      (ins "const ::otc::DeviceModel &":$device,
           "::llvm::SmallVectorImpl<::otc::KernelLaunch> &":$launches)>,
    InterfaceMethod<[{
        Whether a vendor library (cuDNN's SDPA) runs the call, at the
        device's measured rate for it, rather than the kernel library's own
        kernels.
      }], "bool", "runsOnVendorLibrary", (ins), [{}], [{ return false; }]>,
    InterfaceMethod<[{
        Bytes the call writes before the vendor library reads them (a key
        padding mask written out along the queries for cuDNN): one more
        launch, bound by bandwidth; 0 for most calls.
      }], "int64_t", "getStagedBytes", (ins), [{}], [{ return 0; }]>,
  ];
}

#endif // OTC_PERF_GRIDLAUNCHINTERFACE_TD
