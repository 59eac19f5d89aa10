//===- otc-export.cpp - ONNX model with trained weights -------------------===//
//
//   otc-export MODEL.onnx --weights DIR/model.safetensors -o OUT.onnx
//              [--expose-logits]
//   otc-export MODEL.onnx [--weights DIR] -o OUT.safetensors
//              [--reference ORIGINAL.safetensors|DIR ...] [--peft-adapter[=NAME]]
//
// Writes a copy of MODEL (the model a train program was compiled from) whose
// initializers hold the trained weights of a checkpoint (float32 tensors by
// initializer name; a checkpoint directory may be given instead of the file).
// Initializers without a trained weight (frozen ones, buffers) keep their
// data. The result runs in otc-run or onnxruntime. --expose-logits also
// outputs the scores that the SoftmaxCrossEntropyLoss reads, as "logits".
//
// An output named *.safetensors is a PyTorch state dict instead: the
// trained weights under the names of the module the model was exported
// from, for `model.load_state_dict(load_file(OUT), strict=True)`. One line
// per tensor says how its name was recovered (frontend/StateDictExport.cpp);
// --reference (the model's original weights, e.g. the checkpoint it was
// loaded from) checks every name by value and supplies what the graph lost.
// Without --weights it writes the weights the model was exported with.
// --peft-adapter[=NAME] keeps a peft model's LoRA tensors alone, named as
// peft's adapter_model.safetensors (`...q_proj.lora_A.weight`), which
// PeftModel.from_pretrained loads beside the adapter_config.json that
// peft_model.save_pretrained wrote.
//
// Errors are one line `otc-export: error: ...` and exit status 1.
//
//===----------------------------------------------------------------------===//

#include "frontend/OnnxExporter.h"
#include "otcrt/safetensors.h"
#include "planner/Progress.h"
#include "tools/InitialParams.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <deque>
#include <map>
#include <set>

using namespace llvm;

static cl::OptionCategory toolCategory("otc-export options");

static cl::opt<std::string> modelPath(cl::Positional, cl::desc("<model.onnx>"),
                                      cl::Required, cl::cat(toolCategory));
static cl::opt<std::string>
    weightsPath("weights",
                cl::desc("Trained weights (model.safetensors or its directory); "
                         "optional for a state dict"),
                cl::value_desc("PATH"), cl::cat(toolCategory));
static cl::opt<std::string> outputPath(
    "o",
    cl::desc("Output: an ONNX model with the trained weights (OUT.onnx, with "
             "--weights) or a PyTorch state dict (OUT.safetensors)"),
    cl::value_desc("OUT.onnx|OUT.safetensors"), cl::Required,
    cl::cat(toolCategory));
static cl::list<std::string> referencePaths(
    "reference",
    cl::desc("With a .safetensors output: the model's original state dict "
             "(safetensors files or a directory of them)"),
    cl::value_desc("PATH"), cl::cat(toolCategory));
static cl::opt<std::string> stripPrefix(
    "strip-prefix",
    cl::desc("With a .safetensors output: the prefix of a wrapper module's "
             "attribute, taken off every name when every name has it (default "
             "'model.': README's Logits wrapper; '' keeps the names)"),
    cl::value_desc("PREFIX"), cl::init("model."), cl::cat(toolCategory));
static cl::opt<std::string> peftAdapter(
    "peft-adapter",
    cl::desc("With a .safetensors output: only a peft model's LoRA tensors "
             "(lora_A, lora_B, ...) of adapter NAME, named as peft's "
             "adapter_model.safetensors names them (without '.NAME'); put "
             "the file beside the adapter_config.json of the peft model"),
    cl::value_desc("NAME"), cl::ValueOptional, cl::cat(toolCategory));
static cl::opt<bool> exposeLogits(
    "expose-logits",
    cl::desc("Also output the loss's scores as a graph output 'logits'"), cl::cat(toolCategory));

/// Prints `otc-export: error: <message>` and returns exit status 1.
static int fail(const Twine &message) {
  errs() << "otc-export: error: " << message << "\n";
  return 1;
}

/// The one tensor `name` of the safetensors file at `path`, or an error.
static otcrt::Status readOneTensor(const std::string &path,
                                   const std::string &name,
                                   otcrt::TensorFile &one) {
  return otcrt::readSafetensors(
      path, one, [&](const std::string &n) { return n == name; });
}

/// Reads a checkpoint of float32 tensors: its layout, each tensor checked
/// against its checksum one at a time, and the weights' values read again
/// when they are written (ExportWeight::load), so that one tensor is in
/// memory at a time however large the checkpoint (a file that cannot seek,
/// a pipe, is read whole).
static bool readWeights(std::string path, otcrt::TensorFile &file,
                        std::vector<otc::ExportWeight> &list, std::string &error) {
  if (sys::fs::is_directory(path))
    path += "/model.safetensors";
  // Read again when written: the file itself, not a link a running train
  // --save may point elsewhere by then (ck/latest), and checked to be the
  // same file each time.
  SmallString<256> resolved;
  sys::fs::file_status identity;
  bool lazy = !sys::fs::real_path(path, resolved) &&
              !sys::fs::status(resolved, identity) &&
              sys::fs::is_regular_file(identity) &&
              static_cast<bool>(
                  otcrt::readSafetensorsLayout(resolved.str().str(), file));
  if (!lazy) {
    file = otcrt::TensorFile();
    if (otcrt::Status s = otcrt::readSafetensors(path, file); !s) {
      error = s.message();
      return false;
    }
  }
  bool checked = false;
  for (size_t i = 0; i < file.tensors.size(); ++i) {
    otcrt::TensorFile one;
    const otcrt::TensorFile *source = &file;
    if (lazy) {
      if (otcrt::Status s =
              readOneTensor(resolved.str().str(), file.tensors[i].name, one);
          !s) {
        error = s.message();
        return false;
      }
      source = &one;
    } else if (i > 0) {
      break; // the whole file, checked at once
    }
    if (otcrt::Status s = otcrt::verifyChecksums(*source, path, checked); !s) {
      error = s.message();
      return false;
    }
    if (!checked)
      break;
  }
  auto format = file.metadata.find("format");
  if (!checked && format != file.metadata.end() && format->second == "otc-weights")
    errs() << "otc-export: warning: " << path
           << " has no checksums (saved before they were stored); exporting "
              "it unverified\n";
  // otc-compile's init.safetensors also holds what the program does not
  // train (a rotary table, a frozen weight): the model's own values.
  std::set<std::string> untrained;
  if (auto it = file.metadata.find(otc::kUntrainedKey);
      it != file.metadata.end())
    for (StringRef rest = it->second; !rest.empty();) {
      auto [name, tail] = rest.split('\n');
      untrained.insert(name.str());
      rest = tail;
    }
  for (const otcrt::Tensor &t : file.tensors) {
    if (untrained.count(t.name))
      continue;
    if (t.dtype != otcrt::StDType::F32) {
      error = path + ": tensor '" + t.name + "' is " + otcrt::dtypeName(t.dtype) +
              ", expected F32";
      return false;
    }
    otc::ExportWeight w{t.name, t.shape};
    if (!lazy) {
      w.data = reinterpret_cast<const float *>(t.data.data());
    } else {
      auto crc = file.metadata.find("crc32/" + t.name);
      w.load = [path, file = resolved.str().str(), identity, name = t.name,
                count = static_cast<size_t>(t.numel()),
                crc = crc == file.metadata.end() ? std::string() : crc->second](
                   std::vector<float> &v, std::string &error) {
        sys::fs::file_status now;
        if (sys::fs::status(file, now) ||
            now.getUniqueID() != identity.getUniqueID() ||
            now.getSize() != identity.getSize() ||
            now.getLastModificationTime() !=
                identity.getLastModificationTime()) {
          error = path + " changed while it was exported (a train --save "
                         "beside it?): export a checkpoint no run writes to";
          return false;
        }
        otcrt::TensorFile one;
        otcrt::Status s = readOneTensor(file, name, one);
        if (!s || one.tensors.size() != 1 ||
            one.tensors[0].dtype != otcrt::StDType::F32 ||
            static_cast<size_t>(one.tensors[0].numel()) != count) {
          error = s ? path + ": tensor '" + name + "' is not what it was"
                    : s.message();
          return false;
        }
        const std::vector<uint8_t> &bytes = one.tensors[0].data;
        if (!crc.empty()) {
          char actual[9];
          std::snprintf(actual, sizeof actual, "%08x",
                        otcrt::crc32(bytes.data(), bytes.size()));
          if (crc != actual) {
            error =
                path + ": tensor '" + name + "' no longer matches its checksum";
            return false;
          }
        }
        v.resize(count);
        std::memcpy(v.data(), bytes.data(), count * sizeof(float));
        return true;
      };
    }
    list.push_back(std::move(w));
  }
  return true;
}

/// A float of a 16-bit format widened to float32.
static float halfToFloat(uint16_t h) {
  int exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  float v = exp == 0    ? std::ldexp(float(man), -24)
            : exp == 31 ? (man ? NAN : INFINITY)
                        : std::ldexp(float(man | 0x400), exp - 25);
  return (h & 0x8000) ? -v : v;
}
static float bf16ToFloat(uint16_t b) {
  uint32_t bits = uint32_t(b) << 16;
  float v;
  std::memcpy(&v, &bits, 4);
  return v;
}

/// The float values of tensor `t`, widened to float32 (`tol`: the relative
/// tolerance of its precision); false for an integer tensor.
static bool widened(const otcrt::Tensor &t, std::vector<float> &v, float &tol) {
  tol = 0;
  v.resize(t.numel());
  const uint8_t *d = t.data.data();
  switch (t.dtype) {
  case otcrt::StDType::F32:
    std::memcpy(v.data(), d, v.size() * 4);
    return true;
  case otcrt::StDType::F64:
    for (size_t i = 0; i < v.size(); ++i) {
      double x;
      std::memcpy(&x, d + 8 * i, 8);
      v[i] = float(x);
    }
    return true;
  case otcrt::StDType::F16:
  case otcrt::StDType::BF16:
    tol = t.dtype == otcrt::StDType::F16 ? 1.0f / 2048 : 1.0f / 256;
    for (size_t i = 0; i < v.size(); ++i) {
      uint16_t h;
      std::memcpy(&h, d + 2 * i, 2);
      v[i] = t.dtype == otcrt::StDType::F16 ? halfToFloat(h) : bf16ToFloat(h);
    }
    return true;
  default:
    return false; // integer buffers are not weights
  }
}

/// Reads the reference state dict: float tensors of every file given (a
/// directory: its *.safetensors), widened to float32, one tensor at a time:
/// each tensor's print is kept (what a match by value checks first) and
/// its values are read again when compared or written, so that the
/// reference is never held (a file that cannot seek, a pipe, is read whole
/// and kept).
static bool readReference(std::deque<std::vector<float>> &storage,
                          std::vector<otc::ExportWeight> &list,
                          std::string &error) {
  std::vector<std::string> paths;
  for (const std::string &p : referencePaths) {
    if (!sys::fs::is_directory(p)) {
      paths.push_back(p);
      continue;
    }
    std::vector<std::string> found;
    std::error_code ec;
    for (sys::fs::directory_iterator it(p, ec), end; it != end && !ec; it.increment(ec))
      if (StringRef(it->path()).ends_with(".safetensors"))
        found.push_back(it->path());
    if (found.empty()) {
      error = "--reference " + p + ": no .safetensors file in the directory";
      return false;
    }
    std::sort(found.begin(), found.end());
    paths.insert(paths.end(), found.begin(), found.end());
  }
  for (const std::string &path : paths) {
    // A file that cannot seek (a pipe) is read whole.
    otcrt::TensorFile layout;
    const bool whole = !otcrt::readSafetensorsLayout(path, layout);
    if (whole)
      if (otcrt::Status s = otcrt::readSafetensors(path, layout); !s) {
        error = "--reference: " + s.message();
        return false;
      }
    otc::Progress progress("reading the reference " +
                               sys::path::filename(path).str(),
                           layout.tensors.size(), "tensors");
    for (size_t i = 0; i < layout.tensors.size(); ++i) {
      otcrt::Tensor &t = layout.tensors[i];
      progress.update(i);
      otcrt::TensorFile one;
      if (!whole)
        if (otcrt::Status s = readOneTensor(path, t.name, one);
            !s || one.tensors.size() != 1) {
          error = "--reference: " +
                  (s ? path + ": tensor '" + t.name + "' cannot be read"
                     : s.message());
          return false;
        }
      std::vector<float> v;
      float tol = 0;
      bool isFloat = widened(whole ? t : one.tensors[0], v, tol);
      std::vector<uint8_t>().swap(t.data);
      if (!isFloat)
        continue;
      otc::ExportWeight w{t.name, t.shape};
      w.relTol = tol;
      if (whole) {
        storage.push_back(std::move(v));
        w.data = storage.back().data();
      } else {
        // Its print now, its values again when compared or written.
        w.print = otc::valuePrint(v.data(), v.size());
        w.load = [path, name = t.name](std::vector<float> &out,
                                       std::string &error) {
          otcrt::TensorFile again;
          float tol = 0;
          if (otcrt::Status s = readOneTensor(path, name, again);
              !s || again.tensors.size() != 1 ||
              !widened(again.tensors[0], out, tol)) {
            error = "--reference: " +
                    (s ? path + ": tensor '" + name + "' cannot be read again"
                       : s.message());
            return false;
          }
          return true;
        };
      }
      list.push_back(std::move(w));
    }
    progress.update(layout.tensors.size());
  }
  return true;
}

/// Writes `tensors` as a safetensors file at `path` (metadata format "pt",
/// as torch.save_file writes it): the header, then each tensor's bytes,
/// made when it is written, so that one tensor is in memory at a time.
static bool writeTensors(const std::string &path,
                         const std::vector<otc::StateDictTensor> &tensors,
                         std::string &error) {
  otcrt::TensorFile layout;
  layout.metadata["format"] = "pt";
  for (const otc::StateDictTensor &t : tensors)
    layout.addLayout(t.name, otcrt::StDType::F32, t.shape);
  otc::Progress progress("writing the state dict", tensors.size(), "tensors");
  std::vector<float> values;
  otcrt::Status s = otcrt::writeSafetensorsFrom(
      path, layout, [&](size_t i, const void *&data) {
        if (i)
          progress.update(i);
        std::string why;
        // The previous tensor's values let go before this one's are made.
        std::vector<float>().swap(values);
        if (!tensors[i].values(values, why))
          return otcrt::Status::error(why);
        data = values.data();
        return otcrt::Status::ok();
      });
  if (!s)
    error = s.message();
  else
    progress.update(tensors.size());
  return static_cast<bool>(s);
}

/// Where `tensors` are an encoder-decoder model's whose token embedding is
/// shared (a tensor named `*shared.weight`, or one tensor written under an
/// encoder's and a decoder's names), what a strict load may miss and how
/// to get it; else "".
static std::string
sharedEmbeddingNote(const std::vector<otc::StateDictTensor> &tensors) {
  bool encoder = false, decoder = false;
  std::string shared;
  std::map<std::string, std::pair<bool, bool>> sides; // by initializer
  for (const otc::StateDictTensor &t : tensors) {
    bool e = t.name.find("encoder.") != std::string::npos;
    bool d = t.name.find("decoder.") != std::string::npos;
    encoder |= e;
    decoder |= d;
    if (StringRef(t.name).ends_with("shared.weight"))
      shared = t.name;
    if (!t.initializer.empty()) {
      auto &side = sides[t.initializer];
      side.first |= e && t.name.find("embed_tokens") != std::string::npos;
      side.second |= d && t.name.find("embed_tokens") != std::string::npos;
      if (side.first && side.second && shared.empty())
        shared = t.name;
    }
  }
  if (!encoder || !decoder || shared.empty())
    return "";
  return "this encoder-decoder model shares its token embedding ('" + shared +
         "'): PyTorch's state dict also names it where no module of the "
         "graph reads it (BART's model.shared.weight, T5's "
         "encoder.embed_tokens.weight and decoder.embed_tokens.weight), and "
         "those names are not written; load with strict=False, or pass "
         "--reference ORIGINAL.safetensors to write them";
}

/// Writes the state dict; prints how each name was recovered.
static int writeStateDict(const std::vector<otc::ExportWeight> &trained) {
  std::deque<std::vector<float>> refStorage;
  std::vector<otc::ExportWeight> reference;
  std::string error;
  if (!referencePaths.empty() && !readReference(refStorage, reference, error))
    return fail(error);
  otc::StateDictOptions options;
  options.modelPath = modelPath;
  options.stripPrefix = stripPrefix;
  if (!referencePaths.empty())
    options.reference = &reference;
  // --peft-adapter: the LoRA tensors alone are made (the adapter is chosen
  // below, by name).
  if (peftAdapter.getNumOccurrences())
    options.keep = [](const std::string &name) {
      return name.find(".lora_") != std::string::npos;
    };
  std::vector<otc::StateDictTensor> tensors;
  std::vector<std::string> unresolved;
  if (!otc::exportStateDict(options, trained, tensors, unresolved, error))
    return fail(error);
  if (!unresolved.empty()) {
    for (const std::string &u : unresolved)
      errs() << "otc-export: unresolved " << u << "\n";
    return fail(
        std::to_string(unresolved.size()) +
        (referencePaths.empty()
             ? " weight(s) have no recoverable state-dict name or value "
               "(listed above); pass --reference with the model's original "
               "weights (e.g. a safetensors of model.state_dict())"
             : " weight(s) match no tensor of the reference by name or value "
               "(listed above): the reference lacks them, or the exporter "
               "merged equal fresh weights into one tensor (export from "
               "trained weights, or with the dynamo exporter, which records "
               "merges)"));
  }
  // --peft-adapter: the adapter's tensors alone, under peft's names.
  if (peftAdapter.getNumOccurrences()) {
    std::string adapter = peftAdapter.empty() ? "default" : peftAdapter.getValue();
    std::vector<otc::StateDictTensor> kept;
    for (otc::StateDictTensor &t : tensors) {
      if (t.name.find(".lora_") == std::string::npos)
        continue;
      std::string segment = "." + adapter + ".";
      size_t at = t.name.rfind(segment);
      if (at == std::string::npos)
        continue;
      t.name.erase(at, segment.size() - 1);
      kept.push_back(std::move(t));
    }
    if (kept.empty())
      return fail("--peft-adapter: no LoRA tensor of adapter '" + adapter +
                  "' (names like '...lora_A." + adapter + ".weight') in " +
                  modelPath);
    tensors = std::move(kept);
  }
  for (const otc::StateDictTensor &t : tensors)
    outs() << "  " << t.name << " " << otcrt::formatShape(t.shape) << " <- "
           << (t.initializer.empty() ? std::string("(reference)") : "'" + t.initializer + "'")
           << ": " << t.how << "\n";
  // Before the progress lines, should both streams go to one file.
  outs().flush();
  if (!writeTensors(outputPath, tensors, error))
    return fail(error);
  size_t readAgain = 0;
  for (const otc::StateDictTensor &t : tensors)
    readAgain += t.readAgain;
  outs() << "otc-export: wrote " << outputPath << " (" << tensors.size()
         << " tensors, a PyTorch state dict";
  if (readAgain)
    outs() << "; " << readAgain << " read again from the model's external data";
  outs() << ")\n";
  if (referencePaths.empty() && !peftAdapter.getNumOccurrences())
    if (std::string note = sharedEmbeddingNote(tensors); !note.empty()) {
      outs().flush();
      errs() << "otc-export: note: " << note << "\n";
    }
  // What the graph does not read was not trained: said once, by name.
  std::string untrained;
  size_t count = 0;
  for (const otc::StateDictTensor &t : tensors)
    if (t.initializer.empty()) {
      if (count < 8)
        untrained += (count ? ", " : "") + t.name;
      ++count;
    }
  if (count)
    errs() << "otc-export: warning: " << count << " tensor(s) not in the graph, "
           << "not trained (the reference's values): " << untrained
           << (count > 8 ? ", ..." : "") << "\n";
  return 0;
}

int main(int argc, char **argv) {
  InitLLVM init(argc, argv);
  cl::HideUnrelatedOptions(toolCategory);
  cl::ParseCommandLineOptions(argc, argv,
                              "otc-export: ONNX model with trained weights\n");
  // A line a second while a large state dict is written.
  otc::setProgressMode(otc::ProgressMode::Slow, "otc-export");
  bool stateDict = StringRef(outputPath).ends_with(".safetensors");
  if (!stateDict && !referencePaths.empty())
    return fail("--reference is for a state dict: name the output *.safetensors");
  if (stateDict && exposeLogits)
    return fail("--expose-logits is for an ONNX output, not a state dict");
  if (!stateDict && peftAdapter.getNumOccurrences())
    return fail("--peft-adapter is for a state dict: name the output "
                "adapter_model.safetensors");
  if (!stateDict && weightsPath.empty())
    return fail("--weights is required for an ONNX output");
  otcrt::TensorFile file;
  std::vector<otc::ExportWeight> list;
  std::string error;
  if (!weightsPath.empty() && !readWeights(weightsPath, file, list, error))
    return fail(error);
  if (stateDict)
    return writeStateDict(list);
  std::string weights = weightsPath;
  if (sys::fs::is_directory(weights))
    weights += "/model.safetensors";
  otc::ExportOptions options;
  options.modelPath = modelPath;
  options.outputPath = outputPath;
  options.exposeLogits = exposeLogits;
  int64_t replaced = 0;
  if (!otc::exportOnnxWithWeights(options, list, replaced, error))
    return fail(error);
  outs() << "otc-export: wrote " << outputPath << " (" << replaced
         << " initializers from " << weights << ")\n";
  return 0;
}
