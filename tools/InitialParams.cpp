//===- InitialParams.cpp - otc-compile's init.safetensors -----------------===//
//
// See InitialParams.h.
//
//===----------------------------------------------------------------------===//

#include "tools/InitialParams.h"

#include "otcrt/safetensors.h"
#include "planner/Progress.h"

using namespace otc;

bool otc::writeInitialParams(const std::string &path,
                             std::vector<InitializerData> &initializers,
                             const std::vector<std::string> &untrained,
                             size_t &reread, std::string &error) {
  otcrt::TensorFile layout;
  if (!untrained.empty()) {
    std::string names;
    for (const std::string &n : untrained)
      names += (names.empty() ? "" : "\n") + n;
    layout.metadata[kUntrainedKey] = names;
  }
  for (const InitializerData &d : initializers)
    layout.addLayout(d.name, otcrt::StDType::F32, d.shape);
  Progress progress("writing the initial parameters", initializers.size(),
                    "tensors");
  std::vector<float> values;
  reread = 0;
  otcrt::Status st = otcrt::writeSafetensorsFrom(
      path, layout, [&](size_t i, const void *&data) {
        InitializerData &d = initializers[i];
        if (i)
          progress.update(i);
        values = std::move(d.values);
        std::vector<float>().swap(d.values);
        std::string why;
        if (values.empty() && d.load) {
          if (!d.load(values, why))
            return otcrt::Status::error(why);
          ++reread;
        }
        if (values.size() != static_cast<size_t>(otcrt::numElements(d.shape)))
          return otcrt::Status::error(
              "initializer '" + d.name + "': " + std::to_string(values.size()) +
              " values for shape " + otcrt::formatShape(d.shape));
        data = values.data();
        return otcrt::Status::ok();
      });
  if (!st) {
    error = st.message();
    return false;
  }
  progress.update(initializers.size());
  return true;
}
