// The `train` command line: parseTrainArgs and the --help text. Every flag is
// one row of a table (name, whether it takes a value, and how the value is
// stored), so the parser, the checks and the usage text stay in step.
#include "driver.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <functional>

namespace otcrt {
namespace {

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

/// One flag: its name and the action storing its value (empty for switches).
struct Flag {
  const char *name;
  bool valued;
  std::function<Status(TrainOptions &, const std::string &)> apply;
};

/// Returns an action storing a positive (or, with \p allowZero,
/// non-negative) integer.
std::function<Status(TrainOptions &, const std::string &)>
intFlag(const char *name, int64_t TrainOptions::*field, bool allowZero) {
  return [=](TrainOptions &o, const std::string &v) {
    int64_t x;
    if (!parseInt64(v, x) || x < (allowZero ? 0 : 1))
      return Status::usage(std::string(name) + " expects a " +
                           (allowZero ? "non-negative" : "positive") +
                           " integer, got '" + v + "'");
    o.*field = x;
    return Status::ok();
  };
}

/// Returns an action storing a finite non-negative number.
std::function<Status(TrainOptions &, const std::string &)>
numberFlag(const char *name, double TrainOptions::*field) {
  return [=](TrainOptions &o, const std::string &v) {
    double x;
    if (!parseDouble(v, x) || x < 0)
      return Status::usage(std::string(name) +
                           " expects a finite non-negative number, got '" + v +
                           "'");
    o.*field = x;
    return Status::ok();
  };
}

/// Returns an action storing a string.
std::function<Status(TrainOptions &, const std::string &)>
stringFlag(std::string TrainOptions::*field) {
  return [=](TrainOptions &o, const std::string &v) {
    o.*field = v;
    return Status::ok();
  };
}

/// Returns an action appending to a string list.
std::function<Status(TrainOptions &, const std::string &)>
listFlag(std::vector<std::string> TrainOptions::*field) {
  return [=](TrainOptions &o, const std::string &v) {
    (o.*field).push_back(v);
    return Status::ok();
  };
}

const std::vector<Flag> &flagTable() {
  using O = TrainOptions;
  static const std::vector<Flag> table = {
      {"--batch", true, stringFlag(&O::batchPath)},
      {"--data", true, listFlag(&O::dataGlobs)},
      {"--val-data", true, listFlag(&O::valGlobs)},
      {"--tokens-input", true, stringFlag(&O::tokensInput)},
      {"--targets-input", true, stringFlag(&O::targetsInput)},
      {"--no-shuffle", false,
       [](O &o, const std::string &) {
         o.shuffle = false;
         return Status::ok();
       }},
      {"--doc-mask", false,
       [](O &o, const std::string &) {
         o.docMask = true;
         return Status::ok();
       }},
      {"--doc-token", true, intFlag("--doc-token", &O::docToken, true)},
      {"--mlm", true,
       [](O &o, const std::string &v) {
         // ID or ID:P, P a probability in (0, 1).
         size_t colon = v.find(':');
         std::string id = v.substr(0, colon);
         bool good = parseInt64(id, o.mlmToken) && o.mlmToken >= 0;
         if (good && colon != std::string::npos)
           good = parseDouble(v.substr(colon + 1), o.mlmProb) &&
                  o.mlmProb > 0 && o.mlmProb < 1;
         if (!good)
           return Status::usage("--mlm expects MASK_ID or MASK_ID:P (the "
                                "mask token's id, not negative, and the "
                                "share of positions chosen, between 0 and "
                                "1), got '" +
                                v + "'");
         return Status::ok();
       }},
      {"--val-every", true, intFlag("--val-every", &O::valEvery, true)},
      {"--val-batches", true, intFlag("--val-batches", &O::valBatches, false)},
      {"--init", true, stringFlag(&O::initPath)},
      {"--dump-grads", true, stringFlag(&O::dumpGradsPath)},
      {"--steps", true, intFlag("--steps", &O::steps, false)},
      {"--lr", true, numberFlag("--lr", &O::lr)},
      {"--lr-schedule", true,
       [](O &o, const std::string &v) {
         if (v != "constant" && v != "cosine")
           return Status::usage(
               "--lr-schedule expects constant or cosine, got '" + v + "'");
         o.lrSchedule = v;
         return Status::ok();
       }},
      {"--warmup", true, intFlag("--warmup", &O::warmupSteps, true)},
      {"--min-lr", true, numberFlag("--min-lr", &O::minLr)},
      {"--lr-decay-steps", true,
       intFlag("--lr-decay-steps", &O::decaySteps, false)},
      {"--grad-clip", true, numberFlag("--grad-clip", &O::gradClip)},
      {"--collective-timeout", true,
       numberFlag("--collective-timeout", &O::collectiveTimeout)},
      {"--skip-nonfinite", false,
       [](O &o, const std::string &) {
         o.skipNonfinite = true;
         return Status::ok();
       }},
      {"--batch-start-tokens", true,
       intFlag("--batch-start-tokens", &O::batchStartTokens, false)},
      {"--batch-ramp-tokens", true,
       intFlag("--batch-ramp-tokens", &O::batchRampTokens, false)},
      {"--seed", true,
       [](O &o, const std::string &v) {
         if (!parseUInt64(v, o.seed))
           return Status::usage("--seed expects a non-negative integer, got '" +
                                v + "'");
         return Status::ok();
       }},
      {"--save", true, stringFlag(&O::saveDir)},
      {"--save-every", true, intFlag("--save-every", &O::saveEvery, false)},
      {"--keep", true, intFlag("--keep", &O::keep, false)},
      {"--resume", true, stringFlag(&O::resumeDir)},
      {"--log-every", true, intFlag("--log-every", &O::logEvery, false)},
      {"--quiet", false,
       [](O &o, const std::string &) {
         o.quiet = true;
         return Status::ok();
       }},
      {"--log-jsonl", true, stringFlag(&O::jsonlPath)},
      {"--trace", true, stringFlag(&O::tracePath)},
      {"--trace-sync", false,
       [](O &o, const std::string &) {
         o.traceSync = true;
         return Status::ok();
       }},
      {"--no-cuda-graphs", false,
       [](O &o, const std::string &) {
         o.cudaGraphs = false;
         return Status::ok();
       }},
      {"--peak-tflops", true, numberFlag("--peak-tflops", &O::peakTflops)},
      {"--generate", true, intFlag("--generate", &O::generate, false)},
      {"--prompt-ids", true,
       [](O &o, const std::string &v) {
         o.promptIds.clear();
         size_t at = 0;
         while (at <= v.size()) {
           size_t comma = std::min(v.find(',', at), v.size());
           int64_t id;
           if (!parseInt64(v.substr(at, comma - at), id) || id < 0)
             return Status::usage("--prompt-ids expects non-negative ids "
                                  "separated by commas, got '" +
                                  v + "'");
           o.promptIds.push_back(id);
           at = comma + 1;
         }
         return Status::ok();
       }},
      {"--temperature", true, numberFlag("--temperature", &O::temperature)},
      {"--top-k", true, intFlag("--top-k", &O::topK, true)},
      {"--top-p", true,
       [](O &o, const std::string &v) {
         double x;
         if (!parseDouble(v, x) || x <= 0 || x > 1)
           return Status::usage("--top-p expects a number in (0, 1], got '" +
                                v + "'");
         o.topP = x;
         return Status::ok();
       }},
      {"--samples", true, intFlag("--samples", &O::samples, false)},
  };
  return table;
}

/// Checks combinations of flags once all are parsed.
Status checkCombination(const TrainOptions &o) {
  if (o.help)
    return Status::ok();
  bool data = !o.dataGlobs.empty();
  if (o.generate) {
    if (o.promptIds.empty())
      return Status::usage("--generate needs --prompt-ids A,B,... (at least "
                           "one id)");
    if (data || !o.batchPath.empty() || !o.saveDir.empty() ||
        !o.resumeDir.empty() || !o.dumpGradsPath.empty() || !o.valGlobs.empty())
      return Status::usage("--generate samples from the parameters of --init "
                           "(a checkpoint's model.safetensors): it takes no "
                           "--data, --batch, --val-data, --save, --resume or "
                           "--dump-grads");
    return Status::ok();
  }
  if (!o.promptIds.empty())
    return Status::usage("--prompt-ids needs --generate N");
  if (o.batchPath.empty() && !data)
    return Status::usage("--batch B.safetensors or --data 'SHARDS' is required "
                         "(see --help)");
  if (!o.batchPath.empty() && data)
    return Status::usage("--batch and --data are exclusive");
  if (!data && (!o.valGlobs.empty() || o.batchStartTokens || o.batchRampTokens))
    return Status::usage("--val-data and the batch ramp need --data");
  if (!data && o.mlmToken >= 0)
    return Status::usage("--mlm needs --data (a --batch file holds its own "
                         "targets)");
  if (o.mlmToken >= 0 && (o.docMask || o.docToken >= 0))
    return Status::usage("--mlm and --doc-mask are exclusive: --doc-mask "
                         "feeds causal masks, and a masked LM attends both "
                         "ways");
  if (!o.dumpGradsPath.empty() && (!o.saveDir.empty() || !o.resumeDir.empty()))
    return Status::usage(
        "--dump-grads cannot be combined with --save or --resume");
  if (o.saveEvery && o.saveDir.empty())
    return Status::usage("--save-every needs --save DIR");
  if ((o.batchStartTokens != 0) != (o.batchRampTokens != 0))
    return Status::usage(
        "--batch-start-tokens and --batch-ramp-tokens go together");
  if (o.traceSync && o.tracePath.empty())
    return Status::usage("--trace-sync needs --trace FILE");
  if (o.lrSchedule == "cosine" && o.minLr > o.lr)
    return Status::usage("--min-lr must not exceed --lr");
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
    const Flag *found = nullptr;
    for (const Flag &f : flagTable())
      if (flag == f.name)
        found = &f;
    if (!found) {
      if (!flag.empty() && flag[0] == '-')
        return Status::usage("unknown flag '" + args[i] + "' (see --help)");
      return Status::usage("unexpected argument '" + args[i] +
                           "' (see --help)");
    }
    if (!found->valued) {
      if (inlineValue)
        return Status::usage(flag + " takes no value");
    } else {
      if (!inlineValue) {
        if (i + 1 >= args.size())
          return Status::usage(flag + " needs a value");
        value = args[++i];
      }
      if (value.empty())
        return Status::usage(flag + " needs a non-empty value");
    }
    Status s = found->apply(out, value);
    if (!s)
      return s;
  }
  return checkCombination(out);
}

/// trainUsage's section Data: --data and --batch.
static const char *usageData() {
  return "Data:\n"
         "  --data GLOB          token shards (llm.c format: 256 int32 header, "
         "uint16\n"
         "                       tokens; made by otc-data); repeatable. "
         "Windows of T+1\n"
         "                       tokens feed the token input [0:T] and the "
         "target input\n"
         "                       [1:T+1]; T is the token input's second "
         "dimension\n"
         "  --tokens-input NAME  graph input fed with tokens (default: first "
         "integer input)\n"
         "  --targets-input NAME graph input fed with targets (default: second "
         "integer input)\n"
         "  --no-shuffle         read windows in order (default: shuffled per "
         "epoch by --seed)\n"
         "  An attention mask input is fed too: a [B, T] one all ones, a [B, "
         "T, T] or\n"
         "  [B, 1, T, T] one causal masks (1 or true where a query sees a key; "
         "float\n"
         "  masks additive: 0 and the float32 minimum).\n"
         "  --doc-mask           those masks stop at document boundaries: a "
         "query sees\n"
         "                       the keys of its own document alone (packed "
         "pre-training)\n"
         "  --doc-token ID       the token that starts every document "
         "(default: the one\n"
         "                       the shards record: otc-data --tokenizer "
         "writes it)\n"
         "  --mlm ID[:P]         masked-LM targets instead (an encoder: "
         "BERT, ModernBERT):\n"
         "                       windows of T tokens, P of the positions "
         "(default 0.15)\n"
         "                       chosen, their inputs replaced by token ID "
         "(80%), a random\n"
         "                       token (10%) or kept (10%); the target of a "
         "chosen\n"
         "                       position is its token, -100 elsewhere. "
         "Masks are drawn\n"
         "                       anew each epoch from --seed; a query-by-key "
         "mask is fed\n"
         "                       all ones\n"
         "  --val-data GLOB      validation shards; eval loss every "
         "--val-every steps and at the end\n"
         "  --val-every N        (default 0: only at the end)\n"
         "  --val-batches N      micro-batches per evaluation (default 20)\n"
         "  --batch PATH         instead of --data: tensors named after the "
         "model inputs,\n"
         "                       each of k global batches (k x micro-batch x "
         "grad_accum\n"
         "                       rows, x ranks); PATH may be a quoted glob of "
         "such files.\n"
         "                       Step s trains on global batch s-1 of them "
         "all, in order,\n"
         "                       starting over after the last (k = 1, one "
         "file: the same\n"
         "                       batch every step)\n"
         "  --init PATH          initial parameters (default: init.safetensors "
         "next to this\n"
         "                       executable); a checkpoint's model.safetensors "
         "works too:\n"
         "                       the buffers it lacks come from that default\n"
         "  --dump-grads PATH    one forward/backward without update; writes "
         "'loss',\n"
         "                       'grad/<param>' and the dropout keys "
         "'rng_key/<k>' to PATH\n"
         "                       (with --data also the rows fed, "
         "'input/<name>')\n"
         "\n";
}

/// trainUsage's section Optimization.
static const char *usageOptimization() {
  return "Optimization (AdamW, compiled in):\n"
         "  --steps N            total optimizer steps, resumed ones included "
         "(default 1)\n"
         "  --lr X               peak learning rate (default 1e-3)\n"
         "  --lr-schedule S      constant (default) or cosine (decays to "
         "--min-lr at --steps)\n"
         "  --warmup N           linear warmup steps (default 0)\n"
         "  --min-lr X           cosine floor (default 0)\n"
         "  --lr-decay-steps N   step at which the cosine reaches --min-lr "
         "(default --steps;\n"
         "                       set it when a run is split by --resume)\n"
         "  --grad-clip X        clip the global gradient norm to X (default "
         "0: off; the\n"
         "                       norm is computed and printed every step "
         "either way)\n"
         "  --skip-nonfinite     skip the update of a step whose loss or "
         "gradient norm is\n"
         "                       NaN/inf (counted) instead of stopping before "
         "it; a run\n"
         "                       that skips every step fails\n"
         "  --batch-start-tokens N, --batch-ramp-tokens M\n"
         "                       batch-size ramp: the global batch starts at N "
         "tokens and\n"
         "                       grows (more micro-batches per step) to the "
         "compiled one\n"
         "                       over the first M training tokens\n"
         "  --seed S             seed for dropout keys and shuffling (default "
         "0)\n"
         "\n";
}

/// trainUsage's section Checkpoints.
static const char *usageCheckpoints() {
  return "Checkpoints:\n"
         "  --save DIR           write DIR/model.safetensors (trained "
         "initializers by ONNX\n"
         "                       name) and DIR/state.safetensors (masters, "
         "AdamW moments,\n"
         "                       counters) at the end\n"
         "  --save-every N       also every N steps, as DIR/step-N, keeping "
         "the last --keep\n"
         "  --keep K             checkpoints kept (default 3)\n"
         "  --resume DIR         continue exactly from DIR's latest checkpoint "
         "(every tensor\n"
         "                       is checked against the CRC-32 stored with "
         "it); the\n"
         "                       buffers (initializers not trained: a LoRA "
         "run's frozen\n"
         "                       base) are not in checkpoints, only their "
         "CRC-32s: they\n"
         "                       are loaded from --init, which must be the "
         "initial\n"
         "                       parameters the run was started from\n"
         "  Ctrl-C (SIGINT) or SIGTERM: the step in flight finishes, its "
         "checkpoint is\n"
         "  saved in --save DIR (without one, nothing is saved), and the "
         "program exits\n"
         "  130 (SIGTERM: 143); a second signal exits at once.\n"
         "\n";
}

/// trainUsage's section Sampling.
static const char *usageSampling() {
  return "Sampling (a program compiled with otc-compile --generate):\n"
         "  --generate N         draw N ids after the prompt, one position at "
         "a time (the\n"
         "                       keys and values of earlier positions cached), "
         "with the\n"
         "                       parameters of --init, and print the prompt "
         "and the ids;\n"
         "                       past the model's T positions the context "
         "restarts from\n"
         "                       its last T/2 ids whenever the cache is full\n"
         "  --prompt-ids A,B,... the prompt's ids (every row of the "
         "micro-batch starts\n"
         "                       with it; each row draws its own ids)\n"
         "  --temperature T      0: the largest logit (the first of equal "
         "ones); otherwise\n"
         "                       drawn from softmax(logits / T) (default 1)\n"
         "  --top-k K            draw among the K largest (default 0: all)\n"
         "  --top-p P            among the fewest largest whose probability "
         "reaches P\n"
         "                       (default 1)\n"
         "  --seed S             the draws' seed (row 0 draws as otc-run "
         "--generate does)\n"
         "  --samples N          print the first N rows (default 1; at most "
         "micro-batch)\n"
         "\n";
}

/// trainUsage's section Execution.
static const char *usageExecution() {
  return "Execution (cuda target):\n"
         "  --no-cuda-graphs     launch every kernel from the host each step; "
         "by default the\n"
         "                       first micro-step and optimizer step run "
         "eagerly, then each\n"
         "                       step function is captured once into a CUDA "
         "graph and replayed\n"
         "\n";
}

/// trainUsage's section Output.
static const char *usageOutput() {
  return "Output:\n"
         "  --log-every K        print every K-th step (default 1); a step "
         "line ends with\n"
         "                       the ETA (the mean step time so far x the "
         "steps left)\n"
         "  --quiet              print only the final loss\n"
         "  --log-jsonl PATH     one JSON object per step, eval, checkpoint "
         "and stop, each\n"
         "                       with \"time\" (Unix seconds, UTC) and "
         "\"elapsed_s\"\n"
         "  --trace PATH         Chrome trace (open in Perfetto) of steps, "
         "micro-steps,\n"
         "                       kernels and a memory counter; on a GPU, "
         "kernels are timed\n"
         "                       by events on the stream and steps run without "
         "CUDA graphs\n"
         "  --trace-sync         with --trace: synchronize the device around "
         "every kernel\n"
         "                       instead (slower; each span is host wall-clock "
         "time)\n"
         "  --peak-tflops X      peak device TFLOP/s for MFU (default: known "
         "GPUs; n/a on cpu)\n"
         "  --help               show this text\n";
}

std::string trainUsage(const std::string &argv0) {
  return "usage: " + argv0 +
         " (--data 'SHARDS' | --batch B.safetensors) [options]\n"
         "       " +
         argv0 +
         " --generate N --prompt-ids A,B,... [--init PATH] [options]\n"
         "\n"
         "Trains the compiled model. Started by mpirun, torchrun or srun "
         "(mpirun\n"
         "-np N " +
         argv0 + " ..., torchrun --nproc-per-node N --no-python " + argv0 +
         " ...),\n"
         "each process is one rank of a data-parallel run: it trains its part "
         "of\n"
         "every global batch (N x micro-batch x grad-accum samples; --batch "
         "files\n"
         "hold the global batch), the ranks' gradients are summed before each\n"
         "update, and rank 0 logs, saves and writes --dump-grads. Under "
         "mpirun\n"
         "the ranks talk through MPI; under torchrun (or srun with "
         "MASTER_ADDR\n"
         "and MASTER_PORT exported) over TCP, meeting at rank 0 at "
         "MASTER_ADDR.\n"
         "A rank that waits for the others longer than --collective-timeout S\n"
         "seconds (default 600; 0: forever; the TCP rendezvous too) ends the "
         "run\n"
         "with one line: a rank that died or hangs never keeps the others "
         "waiting\n"
         "(rank 0's evaluation and checkpoints count as waiting for the "
         "others,\n"
         "so raise it for long ones).\n"
         "\n" +
         std::string(usageData()) + usageOptimization() + usageCheckpoints() +
         usageSampling() + usageExecution() + usageOutput();
}

} // namespace otcrt
