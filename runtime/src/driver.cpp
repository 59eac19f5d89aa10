// The otcrt training driver: otcrt_main and everything behind it. It parses
// the `train` command line, validates the OtcProgram descriptor, allocates
// and zeroes the arena through the backend, loads the initial parameters and
// the batch from safetensors files, and then either dumps the gradients of
// one forward/backward pass or runs the optimizer loop, one log line per
// step. Only otcrt_main prints errors and chooses exit codes; everything else
// returns a Status.
#include "driver.h"

#include "otcrt/safetensors.h"

#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <unistd.h>

namespace otcrt {

const char *const kDataUnsupportedMessage =
    "--data (token shards) is not supported yet; use --batch";

namespace {

const char *slotKindName(int32_t kind) {
  switch (kind) {
  case OTC_SLOT_PARAM: return "PARAM";
  case OTC_SLOT_GRAD: return "GRAD";
  case OTC_SLOT_ADAM_M: return "ADAM_M";
  case OTC_SLOT_ADAM_V: return "ADAM_V";
  case OTC_SLOT_INPUT: return "INPUT";
  case OTC_SLOT_LOSS: return "LOSS";
  case OTC_SLOT_LR: return "LR";
  case OTC_SLOT_STEP: return "STEP";
  case OTC_SLOT_RNG: return "RNG";
  default: return "?";
  }
}

/// Maps an OtcDType to the safetensors dtype with the same bytes.
bool toStDType(int32_t dtype, StDType &out) {
  switch (dtype) {
  case OTC_F32: out = StDType::F32; return true;
  case OTC_I64: out = StDType::I64; return true;
  case OTC_BOOL: out = StDType::BOOL; return true;
  case OTC_F64: out = StDType::F64; return true;
  case OTC_I32: out = StDType::I32; return true;
  case OTC_BF16: out = StDType::BF16; return true;
  default: return false;
  }
}

std::vector<int64_t> slotShape(const OtcSlot &slot) {
  std::vector<int64_t> shape;
  for (int32_t i = 0; i < slot.rank; ++i)
    shape.push_back(slot.shape[i]);
  return shape;
}

std::string slotLabel(const OtcSlot &slot) {
  std::string label = slotKindName(slot.kind);
  if (slot.name && *slot.name)
    label += std::string(" slot '") + slot.name + "'";
  else
    label += " slot";
  return label;
}

/// Parses a whole string as a signed decimal integer.
bool parseInt64(const std::string &text, int64_t &out) {
  if (text.empty())
    return false;
  errno = 0;
  char *end = nullptr;
  long long v = std::strtoll(text.c_str(), &end, 10);
  if (errno != 0 || *end != '\0')
    return false;
  out = v;
  return true;
}

/// Parses a whole string as an unsigned decimal integer (no sign allowed).
bool parseUInt64(const std::string &text, uint64_t &out) {
  if (text.empty() || !(text[0] >= '0' && text[0] <= '9'))
    return false;
  errno = 0;
  char *end = nullptr;
  unsigned long long v = std::strtoull(text.c_str(), &end, 10);
  if (errno != 0 || *end != '\0')
    return false;
  out = v;
  return true;
}

/// Parses a whole string as a finite floating-point number.
bool parseDouble(const std::string &text, double &out) {
  if (text.empty())
    return false;
  errno = 0;
  char *end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  if (errno != 0 || *end != '\0' || !std::isfinite(v))
    return false;
  out = v;
  return true;
}

uint64_t splitMix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

/// A global-batch input converted to its slot's dtype.
struct InputData {
  const OtcSlot *slot;
  std::vector<uint8_t> bytes; // grad_accum * slot->nbytes
};

/// Frees the arena on every exit path.
struct ArenaGuard {
  Backend &backend;
  char *arena = nullptr;
  explicit ArenaGuard(Backend &b) : backend(b) {}
  ~ArenaGuard() { backend.release(arena); }
};

/// Loads and checks every PARAM slot from the initial-parameter file.
Status loadInitialParams(const std::string &path,
                         const std::vector<const OtcSlot *> &params,
                         TensorFile &init) {
  Status s = readSafetensors(path, init);
  if (!s)
    return Status::error("cannot load initial parameters (--init): " +
                         s.message());
  for (const OtcSlot *slot : params) {
    const Tensor *t = init.find(slot->name);
    std::vector<int64_t> want = slotShape(*slot);
    if (!t)
      return Status::error(path + ": parameter '" + slot->name +
                           "' not found (expected F32 " + formatShape(want) +
                           ")");
    if (t->dtype != StDType::F32 || t->shape != want)
      return Status::error(path + ": parameter '" + slot->name +
                           "': expected F32 " + formatShape(want) +
                           ", found " + dtypeName(t->dtype) + " " +
                           formatShape(t->shape));
  }
  return Status::ok();
}

/// Loads the batch file and converts each INPUT tensor to its slot dtype.
Status loadBatch(const std::string &path, const OtcProgram &program,
                 const std::vector<const OtcSlot *> &inputs,
                 std::vector<InputData> &out) {
  TensorFile batch;
  Status s = readSafetensors(path, batch);
  if (!s)
    return Status::error("cannot load the batch (--batch): " + s.message());
  for (const OtcSlot *slot : inputs) {
    std::vector<int64_t> want = slotShape(*slot);
    want[0] *= program.grad_accum;
    StDType wantType = StDType::F32;
    toStDType(slot->dtype, wantType); // validated by validateProgram
    std::string expected = std::string(dtypeName(wantType)) + " " +
                           formatShape(want) + " (micro-batch " +
                           std::to_string(program.micro_batch) + " x grad_accum " +
                           std::to_string(program.grad_accum) + ")";
    const Tensor *t = batch.find(slot->name);
    if (!t)
      return Status::error(path + ": input '" + slot->name +
                           "' not found (expected " + expected + ")");
    bool convertI32 = slot->dtype == OTC_I64 && t->dtype == StDType::I32;
    if (t->shape != want || (t->dtype != wantType && !convertI32))
      return Status::error(path + ": input '" + slot->name + "': expected " +
                           expected + ", found " + dtypeName(t->dtype) + " " +
                           formatShape(t->shape));
    InputData data{slot, {}};
    if (convertI32) {
      int64_t n = t->numel();
      data.bytes.resize(static_cast<size_t>(n) * sizeof(int64_t));
      for (int64_t i = 0; i < n; ++i) {
        int32_t v;
        std::memcpy(&v, t->data.data() + i * sizeof(int32_t), sizeof(v));
        int64_t w = v;
        std::memcpy(data.bytes.data() + i * sizeof(int64_t), &w, sizeof(w));
      }
    } else {
      data.bytes = t->data;
    }
    out.push_back(std::move(data));
  }
  return Status::ok();
}

} // namespace

Status parseTrainArgs(const std::vector<std::string> &args, TrainOptions &out) {
  out = TrainOptions();
  for (size_t i = 0; i < args.size(); ++i) {
    std::string flag = args[i];
    std::string value;
    bool inlineValue = false;
    if (flag.rfind("--", 0) == 0) {
      size_t eq = flag.find('=');
      if (eq != std::string::npos) {
        value = flag.substr(eq + 1);
        flag = flag.substr(0, eq);
        inlineValue = true;
      }
    }
    if (flag == "--help" || flag == "-h") {
      out.help = true;
      continue;
    }
    if (flag == "--quiet") {
      if (inlineValue)
        return Status::usage("--quiet takes no value");
      out.quiet = true;
      continue;
    }
    if (flag == "--data") {
      out.dataRequested = true;
      return Status::ok();
    }
    static const char *const kValued[] = {"--batch", "--steps",      "--lr",
                                          "--seed",  "--init",       "--dump-grads",
                                          "--log-every"};
    bool valued = false;
    for (const char *name : kValued)
      valued |= flag == name;
    if (!valued) {
      if (!flag.empty() && flag[0] == '-')
        return Status::usage("unknown flag '" + args[i] + "' (see --help)");
      return Status::usage("unexpected argument '" + args[i] + "' (see --help)");
    }
    if (!inlineValue) {
      if (i + 1 >= args.size())
        return Status::usage(flag + " needs a value");
      value = args[++i];
    }
    if (value.empty())
      return Status::usage(flag + " needs a non-empty value");
    if (flag == "--batch") {
      out.batchPath = value;
    } else if (flag == "--init") {
      out.initPath = value;
    } else if (flag == "--dump-grads") {
      out.dumpGradsPath = value;
    } else if (flag == "--steps") {
      if (!parseInt64(value, out.steps) || out.steps < 1)
        return Status::usage("--steps expects a positive integer, got '" +
                             value + "'");
    } else if (flag == "--log-every") {
      if (!parseInt64(value, out.logEvery) || out.logEvery < 1)
        return Status::usage("--log-every expects a positive integer, got '" +
                             value + "'");
    } else if (flag == "--lr") {
      if (!parseDouble(value, out.lr) || out.lr < 0)
        return Status::usage("--lr expects a finite non-negative number, got '" +
                             value + "'");
    } else if (flag == "--seed") {
      if (!parseUInt64(value, out.seed))
        return Status::usage("--seed expects a non-negative integer, got '" +
                             value + "'");
    }
  }
  if (!out.help && out.batchPath.empty())
    return Status::usage("--batch B.safetensors is required (see --help)");
  return Status::ok();
}

std::string trainUsage(const std::string &argv0) {
  return "usage: " + argv0 +
         " --batch B.safetensors [options]\n"
         "\n"
         "Trains the compiled model on one fixed batch.\n"
         "\n"
         "  --batch PATH       tensors named after the model inputs, global batch\n"
         "                     (micro-batch x grad_accum) along dimension 0\n"
         "  --steps N          optimizer steps (default 1)\n"
         "  --lr X             AdamW learning rate (default 1e-3)\n"
         "  --seed S           seed for the RNG slot (default 0)\n"
         "  --init PATH        initial parameters (default: init.safetensors next\n"
         "                     to this executable)\n"
         "  --dump-grads PATH  run one forward/backward without updating and write\n"
         "                     'loss', 'grad/<param>' and the dropout keys 'rng_key/<k>'\n"
         "                     of each micro-step to PATH\n"
         "  --log-every K      print every K-th step (default 1)\n"
         "  --quiet            print only the final loss\n"
         "  --data FILES...    token shards (not supported yet)\n"
         "  --help             show this text\n";
}

std::string defaultInitPath() {
  char buf[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0)
    return "init.safetensors";
  std::string exe(buf, static_cast<size_t>(n));
  size_t slash = exe.rfind('/');
  if (slash == std::string::npos)
    return "init.safetensors";
  return exe.substr(0, slash + 1) + "init.safetensors";
}

Status validateProgram(const OtcProgram *program, const char *backendName,
                       bool needOptimizer) {
  auto bad = [](const std::string &what) {
    return Status::error("invalid program descriptor: " + what);
  };
  if (!program)
    return bad("null program");
  if (program->abi_version != 1)
    return bad("abi_version is " + std::to_string(program->abi_version) +
               ", this runtime implements version 1");
  if (!program->target || std::strcmp(program->target, backendName) != 0)
    return bad(std::string("compiled for target '") +
               (program->target ? program->target : "(null)") +
               "' but linked with the '" + backendName + "' runtime");
  if (program->arena_bytes < 0)
    return bad("negative arena_bytes");
  if (program->micro_batch < 1 || program->grad_accum < 1)
    return bad("micro_batch and grad_accum must be positive (got " +
               std::to_string(program->micro_batch) + " and " +
               std::to_string(program->grad_accum) + ")");
  if (program->num_slots < 0 || (program->num_slots > 0 && !program->slots))
    return bad("bad slot table");
  if (!program->zero_grads || !program->micro_step || !program->optimizer_step)
    return bad("missing zero_grads, micro_step or optimizer_step");
  int counts[OTC_SLOT_RNG + 1] = {};
  for (int32_t i = 0; i < program->num_slots; ++i) {
    const OtcSlot &slot = program->slots[i];
    std::string where = "slot " + std::to_string(i);
    if (!slot.name)
      return bad(where + " has a null name");
    if (slot.kind < OTC_SLOT_PARAM || slot.kind > OTC_SLOT_RNG)
      return bad(where + " has unknown kind " + std::to_string(slot.kind));
    where = slotLabel(slot);
    StDType st;
    if (!toStDType(slot.dtype, st))
      return bad(where + " has unknown dtype " + std::to_string(slot.dtype));
    if (slot.rank < 0 || (slot.rank > 0 && !slot.shape))
      return bad(where + " has a bad rank or shape");
    int64_t numel = 1;
    for (int32_t d = 0; d < slot.rank; ++d) {
      if (slot.shape[d] < 0)
        return bad(where + " has a negative dimension");
      numel *= slot.shape[d];
    }
    if (slot.nbytes != numel * static_cast<int64_t>(dtypeSize(st)))
      return bad(where + ": nbytes " + std::to_string(slot.nbytes) +
                 " does not match " + dtypeName(st) + " " +
                 formatShape(slotShape(slot)));
    if (slot.offset < 0 || slot.offset + slot.nbytes > program->arena_bytes)
      return bad(where + " [" + std::to_string(slot.offset) + ", " +
                 std::to_string(slot.offset + slot.nbytes) +
                 ") lies outside the arena of " +
                 std::to_string(program->arena_bytes) + " bytes");
    ++counts[slot.kind];
    switch (slot.kind) {
    case OTC_SLOT_PARAM:
    case OTC_SLOT_ADAM_M:
    case OTC_SLOT_ADAM_V:
      if (slot.dtype != OTC_F32 || !*slot.name)
        return bad(where + " must be a named F32 tensor");
      break;
    case OTC_SLOT_GRAD:
      if ((slot.dtype != OTC_F32 && slot.dtype != OTC_BF16) || !*slot.name)
        return bad(where + " must be a named F32 or BF16 tensor");
      break;
    case OTC_SLOT_INPUT:
      if (!*slot.name || slot.rank < 1 || slot.shape[0] != program->micro_batch)
        return bad(where + " must be named and have leading dimension " +
                   std::to_string(program->micro_batch) + " (micro_batch)");
      break;
    case OTC_SLOT_LOSS:
    case OTC_SLOT_LR:
    case OTC_SLOT_STEP:
      if (slot.dtype != OTC_F32 || numel != 1)
        return bad(where + " must be an F32 scalar");
      break;
    case OTC_SLOT_RNG:
      if (slot.dtype != OTC_I64 || numel != 1)
        return bad(where + " must be an I64 scalar");
      break;
    }
  }
  if (counts[OTC_SLOT_LOSS] != 1)
    return bad("expected exactly one LOSS slot, found " +
               std::to_string(counts[OTC_SLOT_LOSS]));
  for (int kind : {OTC_SLOT_LR, OTC_SLOT_STEP, OTC_SLOT_RNG})
    if (counts[kind] > 1)
      return bad(std::string("more than one ") + slotKindName(kind) + " slot");
  if (needOptimizer && (counts[OTC_SLOT_LR] != 1 || counts[OTC_SLOT_STEP] != 1))
    return bad("training needs an LR and a STEP slot");
  return Status::ok();
}

std::vector<uint8_t> widenBf16(const std::vector<uint8_t> &bf16) {
  std::vector<uint8_t> out(bf16.size() * 2);
  for (size_t i = 0; i + 1 < bf16.size(); i += 2) {
    uint32_t bits = uint32_t(bf16[i] | (bf16[i + 1] << 8)) << 16;
    std::memcpy(&out[i * 2], &bits, 4);
  }
  return out;
}

int64_t rngValue(uint64_t seed, int64_t step, int64_t micro) {
  uint64_t x = splitMix64(seed);
  x = splitMix64(x ^ static_cast<uint64_t>(step));
  x = splitMix64(x ^ static_cast<uint64_t>(micro));
  // 53 bits: exact in a double, so the float64 reference interpreter can
  // replay the same dropout masks from a dumped key.
  return static_cast<int64_t>(x >> 11);
}

Status runTraining(const TrainOptions &options, const OtcProgram *program,
                   Backend &backend, std::FILE *log) {
  const bool dumpGrads = !options.dumpGradsPath.empty();
  Status s = validateProgram(program, backend.name(), !dumpGrads);
  if (!s)
    return s;

  const OtcSlot *lossSlot = nullptr, *lrSlot = nullptr, *stepSlot = nullptr,
                *rngSlot = nullptr;
  std::vector<const OtcSlot *> params, grads, inputs;
  int64_t paramValues = 0;
  for (int32_t i = 0; i < program->num_slots; ++i) {
    const OtcSlot &slot = program->slots[i];
    switch (slot.kind) {
    case OTC_SLOT_PARAM:
      params.push_back(&slot);
      paramValues += slot.nbytes / 4;
      break;
    case OTC_SLOT_GRAD: grads.push_back(&slot); break;
    case OTC_SLOT_INPUT: inputs.push_back(&slot); break;
    case OTC_SLOT_LOSS: lossSlot = &slot; break;
    case OTC_SLOT_LR: lrSlot = &slot; break;
    case OTC_SLOT_STEP: stepSlot = &slot; break;
    case OTC_SLOT_RNG: rngSlot = &slot; break;
    default: break;
    }
  }

  TensorFile init;
  s = loadInitialParams(options.initPath, params, init);
  if (!s)
    return s;
  std::vector<InputData> batch;
  s = loadBatch(options.batchPath, *program, inputs, batch);
  if (!s)
    return s;

  s = backend.init();
  if (!s)
    return s;
  ArenaGuard arena(backend);
  s = backend.allocate(program->arena_bytes, &arena.arena);
  if (!s)
    return s;
  s = backend.zero(arena.arena, 0, program->arena_bytes);
  if (!s)
    return s;
  for (const OtcSlot *slot : params) {
    s = backend.upload(arena.arena, slot->offset,
                       init.find(slot->name)->data.data(), slot->nbytes);
    if (!s)
      return s;
  }
  init = TensorFile();

  // zero_grads + grad_accum micro steps; \p loss gets the mean micro loss.
  // Keys written to the RNG slot by the last forwardBackward, per micro-step.
  std::vector<int64_t> rngKeys;
  auto forwardBackward = [&](int64_t step, double &loss) -> Status {
    program->zero_grads(arena.arena);
    rngKeys.clear();
    double sum = 0;
    for (int32_t k = 0; k < program->grad_accum; ++k) {
      for (const InputData &in : batch) {
        Status st = backend.upload(arena.arena, in.slot->offset,
                                   in.bytes.data() + k * in.slot->nbytes,
                                   in.slot->nbytes);
        if (!st)
          return st;
      }
      if (rngSlot) {
        int64_t r = rngValue(options.seed, step, k);
        rngKeys.push_back(r);
        Status st = backend.upload(arena.arena, rngSlot->offset, &r, sizeof(r));
        if (!st)
          return st;
      }
      program->micro_step(arena.arena);
      Status st = backend.synchronize();
      if (!st)
        return st;
      float micro = 0;
      st = backend.download(arena.arena, lossSlot->offset, &micro, sizeof(micro));
      if (!st)
        return st;
      if (!std::isfinite(micro))
        return Status::error("loss is " + std::string(std::isnan(micro) ? "NaN" : "infinite") +
                             " at step " + std::to_string(step) +
                             ", micro-batch " + std::to_string(k));
      sum += micro;
    }
    loss = sum / program->grad_accum;
    return Status::ok();
  };

  if (!options.quiet)
    std::fprintf(log,
                 "otc train: %s | target %s | %zu params (%" PRId64
                 " values) | micro-batch %d x %d | arena %" PRId64 " bytes\n",
                 program->model ? program->model : "?", program->target,
                 params.size(), paramValues, program->micro_batch,
                 program->grad_accum, program->arena_bytes);

  if (dumpGrads) {
    double loss = 0;
    s = forwardBackward(1, loss);
    if (!s)
      return s;
    TensorFile out;
    float lossF = static_cast<float>(loss);
    out.add("loss", StDType::F32, {}, &lossF);
    std::vector<uint8_t> bytes;
    for (const OtcSlot *slot : grads) {
      bytes.resize(static_cast<size_t>(slot->nbytes));
      s = backend.download(arena.arena, slot->offset, bytes.data(), slot->nbytes);
      if (s && slot->dtype == OTC_BF16)
        bytes = widenBf16(bytes);
      if (!s)
        return s;
      out.add(std::string("grad/") + slot->name, StDType::F32, slotShape(*slot),
              bytes.data());
    }
    // The random keys, so that a reference can replay the same masks.
    for (size_t k = 0; k < rngKeys.size(); ++k)
      out.add("rng_key/" + std::to_string(k), StDType::I64, {}, &rngKeys[k]);
    s = writeSafetensors(options.dumpGradsPath, out);
    if (!s)
      return s;
    if (!options.quiet)
      std::fprintf(log, "wrote %s | loss %.6f | %zu gradients\n",
                   options.dumpGradsPath.c_str(), loss, grads.size());
    return Status::ok();
  }

  double loss = 0;
  int width = static_cast<int>(std::to_string(options.steps).size());
  if (width < 4)
    width = 4;
  for (int64_t step = 1; step <= options.steps; ++step) {
    auto start = std::chrono::steady_clock::now();
    s = forwardBackward(step, loss);
    if (!s)
      return s;
    float lr = static_cast<float>(options.lr);
    float stepF = static_cast<float>(step);
    s = backend.upload(arena.arena, lrSlot->offset, &lr, sizeof(lr));
    if (s)
      s = backend.upload(arena.arena, stepSlot->offset, &stepF, sizeof(stepF));
    if (!s)
      return s;
    program->optimizer_step(arena.arena);
    s = backend.synchronize();
    if (!s)
      return s;
    double ms = std::chrono::duration<double, std::milli>(
                    std::chrono::steady_clock::now() - start)
                    .count();
    if (!options.quiet &&
        (step == 1 || step == options.steps || step % options.logEvery == 0))
      std::fprintf(log, "step %*" PRId64 "/%" PRId64 " | loss %.6f | lr %.2e | %.2f ms\n",
                   width, step, options.steps, loss, options.lr, ms);
  }
  std::fprintf(log, "final loss %.6f\n", loss);
  return Status::ok();
}

} // namespace otcrt

extern "C" int otcrt_main(int argc, char **argv, const OtcProgram *program) {
  using namespace otcrt;
  std::vector<std::string> args;
  for (int i = 1; i < argc; ++i)
    args.emplace_back(argv[i]);
  TrainOptions options;
  Status s = parseTrainArgs(args, options);
  if (s && options.help) {
    std::fputs(trainUsage(argc > 0 ? argv[0] : "train").c_str(), stdout);
    return 0;
  }
  if (s && options.dataRequested) {
    std::fprintf(stderr, "otc train: %s\n", kDataUnsupportedMessage);
    return Status::kUsageError;
  }
  if (s) {
    if (options.initPath.empty())
      options.initPath = defaultInitPath();
    s = runTraining(options, program, defaultBackend(), stdout);
  }
  std::fflush(stdout);
  if (!s) {
    std::fprintf(stderr, "otc train: error: %s\n", s.message().c_str());
    return s.code();
  }
  return 0;
}
