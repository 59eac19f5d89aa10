// Bfloat16 attention through cuDNN's fused scaled dot-product attention
// (SDPA), with the cudnn-frontend graph API: one `sdpa` node for the forward
// and one `sdpa_backward` node for the gradients, over otc's layouts (q,
// out [b, h, t, d], k, v [b, hk, s, d], lse [b, h, t] float; or sequence
// before heads, the rows of q, k, v and their gradients row_stride apart).
// cuDNN computes the same function as the kernels of attention.cu:
//  - scores scale q k^T plus the mask as cuDNN's additive bias (read with
//    otc's strides, a 0 stride becoming a dimension of size 1; a mask
//    broadcast over the queries first written out along them into the
//    library's scratch), or a key padding (key_padding) as cuDNN's padding
//    mask with per-sequence key lengths read from it on the device (no mask
//    tensor), with or without a sliding window;
//  - causal: cuDNN's diagonal band aligned top-left with right bound 0, i.e.
//    key j hidden from query i when j > i, for any t and s; a sliding
//    window W its left bound W (key j kept while j + W > i); a
//    bidirectional window W (not causal) right bound W - 1 beside that
//    left bound (key j kept while j <= i + W - 1 too);
//  - a key padding hides its keys, so that a query row can see no key (a
//    window's query W or more past its sequence's last key, any query of a
//    sequence hiding every key, given to cuDNN as length 1): cuDNN does not
//    document what such a row gives, so the library's kernel sets it after
//    the graph as the fallback kernels compute it (clearNoKeyRows: output 0
//    and lse = the sink, or +inf; the backward's dQ 0), and the backward's
//    dK and dV of the hidden keys are set to 0. lse +inf makes every
//    probability exp(s - lse) of the row 0 in cuDNN's backward, the -inf of
//    a hidden score included (-inf would make it NaN). The same rows are set
//    after a graph that reads the padding written out as a bias
//    (OTCRT_ATTENTION_PADDING=mask), whose -9984 fills cuDNN adds, giving a
//    row that sees no key the average of its band's values;
//  - grouped-query heads: cuDNN's K/V head count hk divides h;
//  - Stats, its per-row softmax statistic, is max + log(sum exp(x - max))
//    of the scaled, masked scores in float (the natural log, since the
//    graph leaves stats_use_log2 off): otc's lse as it is, so that either
//    implementation's backward accepts the other's forward;
//  - attention sinks: the forward gives them to cuDNN's softmax as its sink
//    token [1, h, 1, 1] (cuDNN 9.13 or newer, not with one query), which
//    joins the row's max and sum of exponentials, so Stats is otc's lse
//    with sinks. The backward's graph has no sink: dQ, dK and dV rebuild
//    the probabilities from Stats alone (the frontend reads the sink token
//    only for its dSink output), and the sinks' gradient is the library's
//    own kernel after it (sinkGradient): cuDNN sums its dSink
//    nondeterministically even with the deterministic algorithm
//    (cudnn-frontend 1.32's tests say so), and the frontend's graph of it,
//    + sum exp(sink - Stats) D, has the sign opposite to the gradient its
//    tests compare it with (autograd's).
// A graph is built once per device, direction and shape+options, with its
// workspace (cudaMalloc, kept for the life of the process); later calls
// look it up, set the stream on the device's cuDNN handle and launch: no
// allocation, no synchronization, capturable in a CUDA graph. Calls cuDNN
// cannot run (dropout, unsupported head sizes or mask layouts, a graph its
// heuristics reject) are declined with the reason, and the decline is cached
// too.
#include "attention.h"

#include <cuda_runtime.h>
#include <cudnn.h>
#include <cudnn_frontend.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

namespace otcrt {
namespace cuda {
namespace {

namespace fe = cudnn_frontend;
using TensorPtr = std::shared_ptr<fe::graph::Tensor_attributes>;
using Dims = std::vector<int64_t>;

/// The uids of the graphs' tensors: the keys of the variant pack.
enum Uid : int64_t {
  kQ = 1,
  kK,
  kV,
  kO,
  kStats,
  kBias,
  kDO,
  kDQ,
  kDK,
  kDV,
  kSeqQ,
  kSeqKV,
  kSink
};

/// What a graph is built for: device, direction, sizes and options.
struct GraphKey {
  int device = 0;
  bool backward = false;
  int64_t b = 0, h = 0, hk = 0, t = 0, s = 0, d = 0;
  uint32_t scaleBits = 0;
  bool causal = false, mask = false;
  /// A key padding given as per-sequence lengths (padding mask), no bias.
  bool padding = false;
  /// A forward with sinks (cuDNN's sink token); the backward's graph has none.
  bool sinks = false;
  int64_t maskStrides[4] = {0, 0, 0, 0};
  int32_t layout = OTCRT_LAYOUT_BHTD;
  int32_t window = 0;
  int64_t rowStride = 0;

  auto tie() const {
    return std::tie(device, backward, b, h, hk, t, s, d, scaleBits, causal,
                    mask, padding, sinks, maskStrides[0], maskStrides[1],
                    maskStrides[2], maskStrides[3], layout, window, rowStride);
  }
  bool operator<(const GraphKey &o) const { return tie() < o.tie(); }
};

/// False when the environment sets OTCRT_ATTENTION_DETERMINISTIC=0 (read
/// once): the backward may then use cuDNN's non-deterministic plans.
bool deterministicBackward() {
  static const bool on = [] {
    const char *env = std::getenv("OTCRT_ATTENTION_DETERMINISTIC");
    return !(env && std::strcmp(env, "0") == 0);
  }();
  return on;
}

/// A built graph and its workspace, or why cuDNN declines the key.
struct CachedGraph {
  std::shared_ptr<fe::graph::Graph> graph;
  void *workspace = nullptr;
  std::string declined;
  /// Declined for want of memory (its workspace): not cached, so that a
  /// later call of the shape tries again.
  bool retry = false;
  /// OTCRT_ATTENTION_TUNE=1: every plan was built; the first run times them
  /// and keeps the fastest.
  bool tunePending = false;
};

/// True when the environment sets OTCRT_ATTENTION_TUNE=1 (read once): cuDNN
/// builds every plan its heuristics list for a shape and times them on the
/// shape's first call (cudnn-frontend's autotune), instead of taking the
/// first. Plans of a deterministic backward stay deterministic.
bool tuning() {
  static const bool on = [] {
    const char *env = std::getenv("OTCRT_ATTENTION_TUNE");
    return env && std::strcmp(env, "1") == 0;
  }();
  return on;
}

/// The per-device handles and the graphs. Never destroyed: the program may
/// still call attention from other static destructors.
struct Cache {
  std::mutex mutex;
  std::map<int, cudnnHandle_t> handles;
  std::map<int, std::string> handleErrors;
  std::map<GraphKey, std::unique_ptr<CachedGraph>> graphs;
};

Cache &cache() {
  static Cache *c = new Cache;
  return *c;
}

/// Strides of a contiguous [n0, n1, n2, n3] tensor.
Dims packed(int64_t n1, int64_t n2, int64_t n3) {
  return {n1 * n2 * n3, n2 * n3, n3, 1};
}

/// The mask as cuDNN's bias [1|b, 1|h, 1|t, s]: a dimension with stride 0
/// (broadcast) gets size 1 and a stride past the rest of the tensor.
void biasLayout(const OtcrtAttention &a, Dims &dims, Dims &strides) {
  const int64_t full[4] = {a.b, a.h, a.t, a.s};
  dims.assign(4, 1);
  strides.assign(4, 1);
  int64_t extent = 1;
  for (int i = 3; i >= 0; --i) {
    if (a.mask_strides[i] != 0) {
      dims[i] = full[i];
      strides[i] = a.mask_strides[i];
    } else {
      strides[i] = extent;
    }
    extent = std::max(extent, dims[i] * strides[i]);
  }
}

/// The reason cuDNN cannot take calls of `a` whatever their pointers, or
/// the empty string; `sinks`: a forward with sinks (its sink token).
std::string shapeDeclined(const OtcrtAttention &a, bool mask, bool sinks) {
  if (a.b <= 0 || a.h <= 0 || a.hk <= 0 || a.t <= 0 || a.s <= 0 || a.d <= 0 ||
      a.h % a.hk != 0)
    return "empty or invalid sizes";
  if (a.row_stride != 0 &&
      (a.layout != OTCRT_LAYOUT_BTHD || a.row_stride < a.h * a.d ||
       a.row_stride < a.hk * a.d))
    return "row_stride without the [b, t, h, d] layout or shorter than a row";
  if (a.d % 8 != 0 || a.d > 256)
    return "head size " + std::to_string(a.d) +
           " (cuDNN takes multiples of 8 up to 256)";
  if (a.window < 0)
    return "negative window";
  if (sinks) {
    // The frontend refuses a sink token with one query (its decode mode)
    // and before cuDNN 9.13.
    if (a.t == 1)
      return "sinks with one query (cuDNN takes no sink token for s_q = 1)";
    const size_t version = cudnnGetVersion();
    if (version < 91300)
      return "sinks (cuDNN's sink token needs cuDNN 9.13, this is " +
             std::to_string(version / 10000) + "." +
             std::to_string(version / 100 % 100) + ")";
  }
  if (mask && a.mask_strides[3] != 1)
    return "mask not contiguous along the keys";
  // cuDNN's bias is documented as [1|b, 1|h, t, s]; seen on an H200 (cuDNN
  // 9.19), a key-padding bias [b, 1, 1, s] gave wrong gradients (no error)
  // while [1, h, t, s] was right. A mask broadcast over the queries is
  // written out along them and the heads first (expandedMask); one that
  // gets here was not.
  if (mask && a.mask_strides[2] == 0 && a.t > 1)
    return "mask broadcast over queries";
  for (int i = 0; mask && i < 3; ++i) {
    if (a.mask_strides[i] < 0)
      return "mask with a negative stride";
    // Rows must start 16-byte aligned, as the operands' do.
    if (a.mask_strides[i] % 8 != 0)
      return "mask rows not 16-byte aligned (a stride of " +
             std::to_string(a.mask_strides[i]) + " elements)";
  }
  return "";
}

/// Throws the frontend's message when `e` is an error.
void check(const fe::error_t &e, const char *step) {
  if (e.is_bad())
    throw std::runtime_error(std::string(step) + ": " + e.err_msg);
}

/// A named tensor of the graph with the given uid, sizes and strides.
TensorPtr tensor(fe::graph::Graph &g, const char *name, Uid uid, Dims dims,
                 Dims strides) {
  return g.tensor(fe::graph::Tensor_attributes()
                      .set_name(name)
                      .set_uid(uid)
                      .set_dim(std::move(dims))
                      .set_stride(std::move(strides)));
}

/// Sets uid, sizes and strides of an output of a node.
void output(const TensorPtr &t, Uid uid, Dims dims, Dims strides) {
  t->set_output(true)
      .set_uid(uid)
      .set_dim(std::move(dims))
      .set_stride(std::move(strides));
}

/// The per-sequence lengths of a padding graph: [b, 1, 1, 1] int32.
TensorPtr lengths(fe::graph::Graph &g, const char *name, Uid uid, int64_t b) {
  TensorPtr t = tensor(g, name, uid, {b, 1, 1, 1}, {1, 1, 1, 1});
  t->set_data_type(fe::DataType_t::INT32);
  return t;
}

/// The band of `key` on SDPA's forward or backward attributes: causal,
/// top-left with right bound 0; a window W its left bound W, and right
/// bound W - 1 where it is bidirectional (not causal).
template <typename Attributes>
void setBand(Attributes &opts, const GraphKey &key) {
  if (key.causal || key.window > 0)
    opts.set_diagonal_alignment(fe::DiagonalAlignment_t::TOP_LEFT)
        .set_diagonal_band_right_bound(key.causal ? 0 : key.window - 1);
  if (key.window > 0)
    opts.set_diagonal_band_left_bound(key.window);
}

/// Builds the graph of `key` (attributes from `a`) and its workspace.
std::unique_ptr<CachedGraph> build(const GraphKey &key, const OtcrtAttention &a,
                                   cudnnHandle_t handle) {
  auto entry = std::make_unique<CachedGraph>();
  try {
    auto g = std::make_shared<fe::graph::Graph>();
    g->set_io_data_type(fe::DataType_t::BFLOAT16)
        .set_intermediate_data_type(fe::DataType_t::FLOAT)
        .set_compute_data_type(fe::DataType_t::FLOAT);
    // [b, h, t, d] dims; the strides of how they are stored: packed, or
    // [b, t, h, d] (OTCRT_LAYOUT_BTHD: sequence before heads) read in place,
    // the rows of Q, K, V, dQ, dK and dV row_stride apart when it is set (O
    // and dO stay dense).
    const bool bthd = a.layout == OTCRT_LAYOUT_BTHD;
    const int64_t rq = a.row_stride != 0 ? a.row_stride : a.h * a.d,
                  rkv = a.row_stride != 0 ? a.row_stride : a.hk * a.d;
    const Dims qDims = {a.b, a.h, a.t, a.d},
               qStrides =
                   bthd ? Dims{a.t * rq, a.d, rq, 1} : packed(a.h, a.t, a.d),
               oStrides = bthd ? Dims{a.t * a.h * a.d, a.d, a.h * a.d, 1}
                               : packed(a.h, a.t, a.d);
    const Dims kvDims = {a.b, a.hk, a.s, a.d},
               kvStrides =
                   bthd ? Dims{a.s * rkv, a.d, rkv, 1} : packed(a.hk, a.s, a.d);
    const Dims statsDims = {a.b, a.h, a.t, 1},
               statsStrides = packed(a.h, a.t, 1);
    TensorPtr q = tensor(*g, "Q", kQ, qDims, qStrides);
    TensorPtr k = tensor(*g, "K", kK, kvDims, kvStrides);
    TensorPtr v = tensor(*g, "V", kV, kvDims, kvStrides);
    TensorPtr bias;
    if (key.mask) {
      Dims dims, strides;
      biasLayout(a, dims, strides);
      bias = tensor(*g, "Bias", kBias, dims, strides);
    }
    TensorPtr seqQ, seqKV;
    if (key.padding) {
      seqQ = lengths(*g, "SeqLenQ", kSeqQ, a.b);
      seqKV = lengths(*g, "SeqLenKV", kSeqKV, a.b);
    }
    TensorPtr sink;
    if (key.sinks) {
      sink = tensor(*g, "Sinks", kSink, {1, a.h, 1, 1}, {a.h, 1, 1, 1});
      sink->set_data_type(fe::DataType_t::FLOAT);
    }
    if (!key.backward) {
      auto opts = fe::graph::SDPA_attributes()
                      .set_name("attention")
                      .set_generate_stats(true)
                      .set_attn_scale(a.scale);
      setBand(opts, key);
      if (bias)
        opts.set_bias(bias);
      if (key.padding)
        opts.set_padding_mask(true).set_seq_len_q(seqQ).set_seq_len_kv(seqKV);
      if (sink)
        opts.set_sink_token(sink);
      auto [o, stats] = g->sdpa(q, k, v, std::move(opts));
      output(o, kO, qDims, oStrides);
      output(stats, kStats, statsDims, statsStrides);
      stats->set_data_type(fe::DataType_t::FLOAT);
    } else {
      TensorPtr o = tensor(*g, "O", kO, qDims, oStrides);
      TensorPtr dO = tensor(*g, "dO", kDO, qDims, oStrides);
      TensorPtr stats = tensor(*g, "Stats", kStats, statsDims, statsStrides);
      stats->set_data_type(fe::DataType_t::FLOAT);
      // Deterministic: the same inputs give the same gradients bit for bit
      // (run to run, graph replay or not), as the fallback kernels do; a
      // cuDNN that has no such plan for the shape declines, and the
      // fallback runs. OTCRT_ATTENTION_DETERMINISTIC=0 lets cuDNN choose a
      // plan that sums dQ with atomics (the last bits then vary run to run).
      auto opts = fe::graph::SDPA_backward_attributes()
                      .set_name("attention_grad")
                      .set_attn_scale(a.scale)
                      .set_deterministic_algorithm(deterministicBackward());
      setBand(opts, key);
      if (bias)
        opts.set_bias(bias);
      if (key.padding)
        opts.set_padding_mask(true).set_seq_len_q(seqQ).set_seq_len_kv(seqKV);
      auto [dq, dk, dv] =
          g->sdpa_backward(q, k, v, o, dO, stats, std::move(opts));
      output(dq, kDQ, qDims, qStrides);
      output(dk, kDK, kvDims, kvStrides);
      output(dv, kDV, kvDims, kvStrides);
    }
    check(g->validate(), "validate");
    check(g->build_operation_graph(handle), "build_operation_graph");
    check(g->create_execution_plans({fe::HeurMode_t::A}),
          "create_execution_plans");
    check(g->check_support(), "check_support");
    int64_t bytes = 0;
    if (tuning()) {
      check(g->build_plans(fe::BuildPlanPolicy_t::ALL), "build_plans");
      bytes = g->get_autotune_workspace_size();
      entry->tunePending = true;
    } else {
      check(g->build_plans(), "build_plans");
      check(g->get_workspace_size(bytes), "get_workspace_size");
    }
    if (bytes > 0 && cudaMalloc(&entry->workspace,
                                static_cast<size_t>(bytes)) != cudaSuccess) {
      cudaGetLastError();
      entry->retry = true;
      throw std::runtime_error("cannot allocate its workspace of " +
                               std::to_string(bytes) + " bytes");
    }
    entry->graph = std::move(g);
  } catch (const std::exception &e) {
    entry->declined = e.what();
  } catch (...) {
    entry->declined = "unknown error";
  }
  if (!entry->declined.empty()) {
    char shape[200];
    std::snprintf(shape, sizeof shape,
                  "cuDNN declines %s b=%lld h=%lld hk=%lld t=%lld s=%lld "
                  "d=%lld%s%s%s%s window=%d: ",
                  key.backward ? "backward" : "forward",
                  static_cast<long long>(a.b), static_cast<long long>(a.h),
                  static_cast<long long>(a.hk), static_cast<long long>(a.t),
                  static_cast<long long>(a.s), static_cast<long long>(a.d),
                  key.causal ? " causal" : "", key.mask ? " masked" : "",
                  key.padding ? " padded" : "", key.sinks ? " sinks" : "",
                  key.window);
    entry->declined = shape + entry->declined;
  }
  return entry;
}

/// The cuDNN handle of `device` (created on first use, under the lock), or
/// NULL with the reason in `why`.
cudnnHandle_t handleFor(Cache &c, int device, const char *&why) {
  auto found = c.handles.find(device);
  if (found != c.handles.end())
    return found->second;
  auto failed = c.handleErrors.find(device);
  if (failed == c.handleErrors.end()) {
    cudnnHandle_t handle = nullptr;
    cudnnStatus_t st = cudnnCreate(&handle);
    if (st == CUDNN_STATUS_SUCCESS) {
      c.handles[device] = handle;
      return handle;
    }
    failed = c.handleErrors
                 .emplace(device, std::string("cudnnCreate failed: ") +
                                      cudnnGetErrorString(st))
                 .first;
  }
  why = failed->second.c_str();
  return nullptr;
}

/// True when every operand is 16-byte aligned (cuDNN's vector loads).
bool aligned(const std::unordered_map<int64_t, void *> &pack) {
  for (const auto &operand : pack)
    if (reinterpret_cast<uintptr_t>(operand.second) % 16 != 0)
      return false;
  return true;
}

/// Why cuDNN declines call `a` whatever its shape, or NULL. Checked before
/// the graph cache, whose key holds none of these: a call of a shape cuDNN
/// runs without dropout, uncapped and without dS must not take its graph.
const char *callDeclined(const OtcrtAttention &a) {
  if (a.dropout > 0.0f)
    return "dropout: cuDNN does not reproduce otc's keep mask";
  if (a.softcap != 0.0f)
    return "soft-capped scores";
  if (a.dscores)
    return "the scores' gradient asked for (a mask with a gradient)";
  return nullptr;
}

/// The graph cache's key of call `a`; false without a current device.
bool graphKey(const OtcrtAttention &a, bool backward, bool mask, bool padding,
              GraphKey &key) {
  if (cudaGetDevice(&key.device) != cudaSuccess)
    return false;
  key.backward = backward;
  key.b = a.b, key.h = a.h, key.hk = a.hk, key.t = a.t, key.s = a.s,
  key.d = a.d;
  std::memcpy(&key.scaleBits, &a.scale, sizeof key.scaleBits);
  key.causal = a.causal != 0;
  key.window = a.window;
  key.layout = a.layout;
  key.rowStride = a.row_stride;
  key.mask = mask;
  key.padding = padding;
  key.sinks = !backward && a.sinks;
  if (key.mask)
    std::memcpy(key.maskStrides, a.mask_strides, sizeof key.maskStrides);
  return true;
}

/// Whether the graph cache already holds call `a`'s shape as declined (a
/// build that failed before), so that nothing is prepared for it.
bool knownDeclined(const OtcrtAttention &a, bool backward, bool mask) {
  GraphKey key;
  if (!graphKey(a, backward, mask, /*padding=*/false, key))
    return false;
  Cache &c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  auto found = c.graphs.find(key);
  return found != c.graphs.end() && !found->second->graph;
}

/// What follows a graph that ran call `a`: with a key padding, given as
/// lengths `lens` (keyLengths) read from `padding` or written out as the
/// bias `mask`, the rows that see no key (clearNoKeyRows: the forward's
/// output and lse, the backward's dQ) and, with lengths, a backward's dK
/// and dV rows of the keys past a sequence's length (cuDNN leaves them; a
/// sequence hiding every key was given length 1) set to 0; then a
/// backward's sinks' gradient (sinkGradient) where asked, into `sinkRows`.
/// Returns the launch status.
int afterGraph(const OtcrtAttention &a, bool backward, const void *mask,
               const otcrt_bf16 *padding, const int32_t *lens,
               const std::unordered_map<int64_t, void *> &pack, float *sinkRows,
               cudaStream_t stream) {
  auto bf16 = [&](Uid uid) { return static_cast<otcrt_bf16 *>(pack.at(uid)); };
  const int32_t *keyLens = padding ? lens + keyLengthsOffset(a.b) : nullptr;
  const otcrt_bf16 *filled =
      padding ? padding : static_cast<const otcrt_bf16 *>(mask);
  int status = 0;
  if (a.key_padding && filled)
    status = backward ? clearNoKeyRows(a, keyLens, filled, nullptr, nullptr,
                                       bf16(kDQ), stream)
                      : clearNoKeyRows(a, keyLens, filled, bf16(kO),
                                       static_cast<float *>(pack.at(kStats)),
                                       nullptr, stream);
  if (status == 0 && padding && backward)
    status =
        zeroKeysPastLengths(a, keyLens, padding, bf16(kDK), bf16(kDV), stream);
  if (status == 0 && sinkRows)
    status = sinkGradient(a, bf16(kDO), bf16(kO),
                          static_cast<const float *>(pack.at(kStats)), sinkRows,
                          stream);
  return status;
}

/// Looks up (or builds) the graph of `a` and runs it with `pack`. With
/// `padding` (a key padding, `mask` then NULL), the graph takes per-sequence
/// key lengths, written from it (keyLengths) once the graph is known to run.
/// What a key padding and sinks need after the graph is afterGraph's.
CudnnAttempt run(const OtcrtAttention &a, bool backward, const void *mask,
                 std::unordered_map<int64_t, void *> &pack, void *streamArg,
                 const otcrt_bf16 *padding = nullptr) {
  CudnnAttempt result;
  if ((result.why = callDeclined(a)))
    return result;
  cudaStream_t stream = static_cast<cudaStream_t>(streamArg);
  GraphKey key;
  if (!graphKey(a, backward, mask != nullptr, padding != nullptr, key)) {
    result.why = "no current CUDA device";
    return result;
  }

  Cache &c = cache();
  CachedGraph *entry = nullptr;
  cudnnHandle_t handle = nullptr;
  {
    std::lock_guard<std::mutex> lock(c.mutex);
    auto found = c.graphs.find(key);
    if (found == c.graphs.end()) {
      // Building runs cuDNN's heuristics and allocates: never inside a
      // capture (this call then runs on the fallback kernels, uncached).
      cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
      if (cudaStreamIsCapturing(stream, &capture) != cudaSuccess ||
          capture != cudaStreamCaptureStatusNone) {
        result.why = "first call of this shape inside a CUDA graph capture";
        return result;
      }
      auto built = std::make_unique<CachedGraph>();
      built->declined = shapeDeclined(a, key.mask, key.sinks);
      if (built->declined.empty()) {
        const char *why = nullptr;
        cudnnHandle_t h = handleFor(c, key.device, why);
        if (!h) {
          result.why = why;
          return result;
        }
        built = build(key, a, h);
        if (built->retry) {
          // Kept for the caller's message; the shape is tried again.
          static std::string lastRetry;
          lastRetry = built->declined;
          result.why = lastRetry.c_str();
          return result;
        }
      }
      found = c.graphs.emplace(key, std::move(built)).first;
    }
    entry = found->second.get();
    if (entry->graph)
      handle = c.handles.at(key.device);
  }
  if (!entry->graph) {
    result.why = entry->declined.c_str();
    return result;
  }
  if (!aligned(pack)) {
    result.why = "an operand not 16-byte aligned";
    return result;
  }
  const int32_t *lens = nullptr;
  if (padding) {
    lens = keyLengths(a, padding, stream);
    if (!lens) {
      result.why = "the key padding's lengths cannot be written";
      return result;
    }
    pack[kSeqQ] = const_cast<int32_t *>(lens);
    pack[kSeqKV] = const_cast<int32_t *>(lens + keyLengthsOffset(a.b));
  }
  float *sinkRows = nullptr;
  if (backward && a.sinks && a.dsinks) {
    sinkRows = sinkGradRows(a, stream);
    if (!sinkRows) {
      result.why = "the sinks' gradient rows cannot be had";
      return result;
    }
  }
  result.ran = true;
  if (cudnnSetStream(handle, stream) != CUDNN_STATUS_SUCCESS) {
    result.status = 1;
    return result;
  }
  cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
  if (entry->tunePending &&
      cudaStreamIsCapturing(stream, &capturing) == cudaSuccess &&
      capturing == cudaStreamCaptureStatusNone) {
    // The shape's first call outside a capture (timing synchronizes): every
    // plan runs on these operands, then the fastest runs below.
    entry->tunePending = false;
    fe::error_t tuned = entry->graph->autotune(handle, pack, entry->workspace);
    if (tuned.is_bad())
      std::fprintf(stderr,
                   "otcrt: attention: cuDNN autotune failed (%s); the "
                   "heuristics' first plan runs\n",
                   tuned.err_msg.c_str());
  }
  fe::error_t status = entry->graph->execute(handle, pack, entry->workspace);
  if (status.is_bad()) {
    std::fprintf(stderr, "otcrt: attention: cuDNN SDPA failed: %s\n",
                 status.err_msg.c_str());
    result.status = 1;
  } else {
    result.status =
        afterGraph(a, backward, mask, padding, lens, pack, sinkRows, stream);
  }
  return result;
}

void *mut(const void *p) { return const_cast<void *>(p); }

/// False when OTCRT_ATTENTION_PADDING=mask (read once): a key padding is
/// then written out along the queries as any mask broadcast over them.
bool paddingAsLengths() {
  static const bool on = [] {
    const char *env = std::getenv("OTCRT_ATTENTION_PADDING");
    return !(env && std::strcmp(env, "mask") == 0);
  }();
  return on;
}

/// The key padding of a call that gives it to cuDNN as lengths (with or
/// without a sliding window: the rows that see no key are set after the
/// graph, afterGraph), or NULL.
const otcrt_bf16 *keyPadding(const OtcrtAttention &a, const otcrt_bf16 *mask) {
  if (!a.key_padding || !mask || a.mask_strides[1] != 0 ||
      a.mask_strides[2] != 0 || !paddingAsLengths())
    return nullptr;
  return mask;
}

/// A mask broadcast over the queries (a key padding) written out along them
/// (maskOverQueries) when cuDNN would otherwise take the call: `a` and
/// `mask` then describe the written tensor. False when it cannot be written.
bool expandedMask(OtcrtAttention &a, bool backward, const otcrt_bf16 *&mask,
                  void *stream) {
  if (!mask || a.mask_strides[2] != 0 || a.t <= 1 || callDeclined(a))
    return true;
  OtcrtAttention written = a;
  writtenMaskStrides(a, written.mask_strides);
  if (!shapeDeclined(written, true, !backward && a.sinks).empty() ||
      knownDeclined(written, backward, true))
    return true;
  const otcrt_bf16 *full = maskOverQueries(a, mask, written, stream);
  if (!full)
    return false;
  a = written;
  mask = full;
  return true;
}

} // namespace

bool cudnnAttentionBuilt() { return true; }

CudnnAttempt cudnnAttentionFwd(const OtcrtAttention *call, const otcrt_bf16 *q,
                               const otcrt_bf16 *k, const otcrt_bf16 *v,
                               const otcrt_bf16 *mask, otcrt_bf16 *out,
                               float *lse, void *stream) {
  OtcrtAttention e = *call;
  const OtcrtAttention *a = &e;
  const otcrt_bf16 *padding = keyPadding(e, mask);
  if (padding)
    mask = nullptr;
  else if (!expandedMask(e, false, mask, stream))
    return {false, 0, "the mask cannot be written out along the queries"};
  std::unordered_map<int64_t, void *> pack = {
      {kQ, mut(q)}, {kK, mut(k)}, {kV, mut(v)}, {kO, out}, {kStats, lse}};
  if (mask)
    pack.emplace(kBias, mut(mask));
  if (e.sinks)
    pack.emplace(kSink, mut(e.sinks));
  return run(*a, false, mask, pack, stream, padding);
}

CudnnAttempt cudnnAttentionBwd(const OtcrtAttention *call,
                               const otcrt_bf16 *dout, const otcrt_bf16 *q,
                               const otcrt_bf16 *k, const otcrt_bf16 *v,
                               const otcrt_bf16 *mask, const otcrt_bf16 *out,
                               const float *lse, otcrt_bf16 *dq, otcrt_bf16 *dk,
                               otcrt_bf16 *dv, void *stream) {
  OtcrtAttention e = *call;
  const OtcrtAttention *a = &e;
  const otcrt_bf16 *padding = keyPadding(e, mask);
  if (padding)
    mask = nullptr;
  else if (!expandedMask(e, true, mask, stream))
    return {false, 0, "the mask cannot be written out along the queries"};
  std::unordered_map<int64_t, void *> pack = {
      {kQ, mut(q)},   {kK, mut(k)},     {kV, mut(v)},
      {kO, mut(out)}, {kDO, mut(dout)}, {kStats, mut(lse)},
      {kDQ, dq},      {kDK, dk},        {kDV, dv}};
  if (mask)
    pack.emplace(kBias, mut(mask));
  return run(*a, true, mask, pack, stream, padding);
}

} // namespace cuda
} // namespace otcrt
