// otc-kernel-bench: times the cuda runtime's GEMM forms, a layer's weight
// and bias gradients in two calls and in one (otcrt_gemm_sums), its
// attention (q, k and v apart, and packed in one projection) and the LM
// head's loss (chunked and whole) at GPT-2 124M's shapes, BF16, on random
// data, so that the device model's GEMM curve, its attention rates
// (targets/cuda/Devices.cpp) and its chunk choice can be judged against the
// GPU; and a mixture of experts' products (otcrt_expert_matmul and its
// weight gradient) at OLMoE-1B-7B's shapes, whose rate the step-time model
// estimates (ir/OtcLibraryCalls.cpp).
//
//   otc-kernel-bench [--rows R] [--reps N] [--json FILE]
//
// Each case: 3 untimed calls (the first builds cuBLASLt's plan), then N
// calls each between two events on one stream; the median is reported.
// With OTCRT_GEMM_TUNE=1 in the environment the runtime times the
// heuristic's algorithms on each shape's first call and keeps the fastest
// (the first line says which).
// Inputs are uniform in [-1, 1) (scaled like a trained layer's where the
// magnitude matters), never zeros; outputs are not checked here (the
// kernel tests do that).
#include "otcrt/abi.h"
#include "otcrt/kernels.h"
#include "src/linear_cross_entropy_gemms.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

#define CK(x)                                                                  \
  do {                                                                         \
    cudaError_t e_ = (x);                                                      \
    if (e_ != cudaSuccess) {                                                   \
      std::fprintf(stderr, "otc-kernel-bench: %s: %s (%s:%d)\n", #x,          \
                   cudaGetErrorString(e_), __FILE__, __LINE__);                \
      std::exit(1);                                                            \
    }                                                                          \
  } while (0)

__device__ float uniformAt(uint64_t i, uint32_t seed) {
  uint64_t x = i * 0x9E3779B97F4A7C15ull + seed;
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBull;
  x ^= x >> 31;
  return float(x >> 40) / float(1 << 24) * 2.0f - 1.0f;
}

__global__ void fillF32(float *p, int64_t n, uint32_t seed, float scale) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    p[i] = scale * uniformAt(i, seed);
}

__global__ void fillBf16(otcrt_bf16 *p, int64_t n, uint32_t seed,
                         float scale) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    float v = scale * uniformAt(i, seed);
    uint32_t b;
    std::memcpy(&b, &v, 4);
    b += 0x7FFF + ((b >> 16) & 1);
    p[i] = uint16_t(b >> 16);
  }
}

__global__ void fillLabels(int64_t *p, int64_t n, int64_t classes,
                           uint32_t seed) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    p[i] = int64_t((uniformAt(i, seed) * 0.5f + 0.5f) * float(classes)) %
           classes;
}

uint32_t nextSeed = 1;

float *f32(int64_t n, float scale = 1) {
  float *p;
  CK(cudaMalloc(&p, std::max<int64_t>(n, 1) * sizeof(float)));
  fillF32<<<1024, 256>>>(p, n, nextSeed++, scale);
  CK(cudaGetLastError());
  return p;
}

otcrt_bf16 *bf16(int64_t n, float scale = 1) {
  otcrt_bf16 *p;
  CK(cudaMalloc(&p, std::max<int64_t>(n, 1) * sizeof(otcrt_bf16)));
  fillBf16<<<1024, 256>>>(p, n, nextSeed++, scale);
  CK(cudaGetLastError());
  return p;
}

struct Result {
  std::string name, form;
  int64_t m = 0, n = 0, k = 0;
  double ms = 0, flops = 0, bytes = 0;
};

std::vector<Result> results;
int reps = 20;
cudaStream_t stream;

/// The median milliseconds of `fn` (which returns a status) over `reps`
/// calls, after 3 untimed ones.
template <typename Fn> double timeMedian(const char *what, Fn fn) {
  for (int i = 0; i < 3; ++i)
    if (fn() != 0) {
      std::fprintf(stderr, "otc-kernel-bench: %s failed\n", what);
      std::exit(1);
    }
  CK(cudaStreamSynchronize(stream));
  std::vector<float> ms(reps);
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  for (int i = 0; i < reps; ++i) {
    CK(cudaEventRecord(a, stream));
    if (fn() != 0) {
      std::fprintf(stderr, "otc-kernel-bench: %s failed\n", what);
      std::exit(1);
    }
    CK(cudaEventRecord(b, stream));
    CK(cudaEventSynchronize(b));
    CK(cudaEventElapsedTime(&ms[i], a, b));
  }
  CK(cudaEventDestroy(a));
  CK(cudaEventDestroy(b));
  std::sort(ms.begin(), ms.end());
  return ms[reps / 2];
}

/// A GEMM C[m, n] = A op B of BF16 operands, `out` C's type, beta 0 or 1:
/// a forward product (A [m, k] times Bᵀ, B stored [n, k]: trans_b), a
/// gradient for the input (B stored [k, n]) or a weight gradient (A stored
/// [k, m]: trans_a, B [k, n]).
void gemm(const std::string &name, const char *form, int64_t m, int64_t n,
          int64_t k, int32_t out, float beta) {
  OtcrtGemm g{};
  g.trans_a = std::strcmp(form, "weight_grad") == 0;
  g.trans_b = std::strcmp(form, "forward") == 0;
  g.m = m;
  g.n = n;
  g.k = k;
  g.batch = 1;
  g.alpha = 1;
  g.beta = beta;
  g.ab_type = OTC_BF16;
  g.c_type = out;
  g.epilogue_type = out;
  g.epilogue = OTCRT_GEMM_NONE;
  g.lda = g.trans_a ? m : k;
  g.ldb = g.trans_b ? k : n;
  g.ldc = n;
  const otcrt_bf16 *a = bf16(m * k), *b = bf16(k * n, 0.05f);
  void *c = out == OTC_F32 ? static_cast<void *>(f32(m * n))
                           : static_cast<void *>(bf16(m * n));
  Result r;
  r.name = name;
  r.form = std::string(form) + (out == OTC_F32 ? " f32" : " bf16") +
           (beta != 0 ? " beta1" : "");
  r.m = m;
  r.n = n;
  r.k = k;
  r.flops = 2.0 * m * n * k;
  double cBytes = double(m) * n * (out == OTC_F32 ? 4 : 2);
  r.bytes = 2.0 * (m * k + k * n) + cBytes * (beta != 0 ? 2 : 1);
  r.ms = timeMedian(name.c_str(), [&] {
    return otcrt_gemm(&g, a, b, c, nullptr, nullptr, nullptr, stream);
  });
  results.push_back(r);
  CK(cudaFree(const_cast<otcrt_bf16 *>(a)));
  CK(cudaFree(const_cast<otcrt_bf16 *>(b)));
  CK(cudaFree(c));
}

/// A layer's weight and bias gradients from its output gradient dy [k, m]
/// (BF16) and input x [k, n] into BF16 slots, as a BF16 program makes
/// them: the weight-gradient GEMM (beta 1) and a column sum of dy added
/// into the bias's slot (two calls), or one otcrt_gemm_sums (cuBLASLt's
/// BGRADB epilogue, or its fallback where cuBLASLt declines it).
void biasGrad(const std::string &name, int64_t m, int64_t n, int64_t k) {
  OtcrtGemm g{};
  g.trans_a = 1;
  g.m = m;
  g.n = n;
  g.k = k;
  g.batch = 1;
  g.alpha = 1;
  g.beta = 1;
  g.ab_type = g.c_type = g.epilogue_type = OTC_BF16;
  g.epilogue = OTCRT_GEMM_NONE;
  g.lda = m;
  g.ldb = n;
  g.ldc = n;
  otcrt_bf16 *dy = bf16(k * m), *x = bf16(k * n, 0.05f), *dw = bf16(m * n),
             *db = bf16(m);
  Result r;
  r.m = m;
  r.n = n;
  r.k = k;
  r.flops = 2.0 * m * n * k;
  r.bytes = 2.0 * (m * k + k * n) + 2.0 * 2 * m * n;
  r.name = name + " dw + db";
  r.form = "gemm, column_sum_into";
  r.ms = timeMedian(r.name.c_str(), [&] {
    int rc = otcrt_gemm(&g, dy, x, dw, nullptr, nullptr, nullptr, stream);
    return rc ? rc : otcrt_column_sum_into_bf16(k, m, dy, db, stream);
  });
  results.push_back(r);
  r.name = name + " dw + db, one call";
  r.form = "gemm_sums";
  r.ms = timeMedian(r.name.c_str(), [&] {
    return otcrt_gemm_sums(&g, dy, x, dw, db, OTCRT_GEMM_SUMS_A, OTC_BF16, 1,
                           stream);
  });
  results.push_back(r);
  for (void *p : {(void *)dy, (void *)x, (void *)dw, (void *)db})
    CK(cudaFree(p));
}

/// The LM head's loss over `rows` rows of GPT-2's width and padded
/// vocabulary: otcrt_linear_cross_entropy_bf16 in chunks of `chunk` rows
/// (dw FP32, accumulating), or (chunk 0) its parts as the unchunked program
/// calls them: the logits GEMM, the fused cross-entropy in place, dh and
/// dw's GEMMs.
void headLoss(int64_t rows, int64_t chunk) {
  const int64_t hidden = 768, classes = 50304;
  const otcrt_bf16 *h = bf16(rows * hidden), *w = bf16(classes * hidden, 0.05f);
  int64_t *labels;
  CK(cudaMalloc(&labels, rows * sizeof(int64_t)));
  fillLabels<<<256, 256>>>(labels, rows, 50257, nextSeed++);
  float *dloss = f32(1), *loss = f32(1), *rowLoss = f32(rows),
        *dh = f32(rows * hidden), *dw = f32(classes * hidden);
  CK(cudaMemcpy(dloss, std::vector<float>{1.0f}.data(), sizeof(float),
                cudaMemcpyHostToDevice));
  const int64_t logitRows = chunk ? chunk : rows;
  otcrt_bf16 *logits = bf16(logitRows * classes);
  Result r;
  r.m = rows;
  r.n = classes;
  r.k = hidden;
  r.flops = 3 * 2.0 * rows * classes * hidden;
  int64_t chunks = (rows + logitRows - 1) / logitRows;
  r.bytes = 2.0 * (rows * hidden + classes * hidden) * chunks +
            4.0 * 2 * classes * hidden * chunks + 2 * 2.0 * rows * classes;
  if (chunk) {
    r.name = "head loss, chunks of " + std::to_string(chunk) + " rows";
    r.form = "linear_cross_entropy";
    r.ms = timeMedian(r.name.c_str(), [&] {
      return otcrt_linear_cross_entropy_bf16(
          rows, hidden, classes, chunk, dloss, h, w, OTCRT_W_CLASSES_HIDDEN,
          labels, 1, -100, OTCRT_MEAN, OTC_F32, 1, nullptr, loss, rowLoss, dh,
          dw, nullptr, logits, stream);
    });
  } else {
    r.name = "head loss, unchunked (gemm, cross_entropy_fused, 2 gemms)";
    r.form = "unchunked";
    otcrt_bf16 *dhBf16 = bf16(rows * hidden);
    // The chunked call's three products over all rows at once, dh in BF16
    // as the unchunked BF16 program writes it.
    const otcrt::LinearCrossEntropyGemms gemms{hidden, classes, OTC_BF16};
    const OtcrtGemm fwd = gemms.head(rows), dW = gemms.dw(rows, OTC_F32, true);
    OtcrtGemm dIn = gemms.dh(rows);
    dIn.c_type = dIn.epilogue_type = OTC_BF16;
    r.ms = timeMedian(r.name.c_str(), [&] {
      int rc = otcrt_gemm(&fwd, h, w, logits, nullptr, nullptr, nullptr,
                          stream);
      rc = rc ? rc
              : otcrt_cross_entropy_fused_bf16(rows, classes, dloss, logits,
                                               labels, 1, -100, OTCRT_MEAN,
                                               loss, rowLoss, logits, stream);
      rc = rc ? rc
              : otcrt_gemm(&dIn, logits, w, dhBf16, nullptr, nullptr, nullptr,
                           stream);
      return rc ? rc
                : otcrt_gemm(&dW, logits, h, dw, nullptr, nullptr, nullptr,
                             stream);
    });
    CK(cudaFree(dhBf16));
  }
  results.push_back(r);
  for (void *p : {(void *)h, (void *)w, (void *)labels, (void *)dloss,
                  (void *)loss, (void *)rowLoss, (void *)dh, (void *)dw,
                  (void *)logits})
    CK(cudaFree(p));
}

/// cuDNN's attention (through the runtime's entry points) at GPT-2's shapes,
/// causal, [B, T, H, D] storage: q, k and v as three tensors, or read from
/// one fused projection's output (row_stride, layout "packed" of
/// otc-pack-attention) with the gradients written into one such tensor. FLOPs
/// as the cost interface counts them (ir/OtcFused.cpp), bytes those the call
/// must move.
void attention(int64_t rows, bool packed) {
  const int64_t t = 1024, h = 12, d = 64, b = std::max<int64_t>(1, rows / t);
  const int64_t qn = b * t * h * d, scores = b * h * t * t;
  OtcrtAttention a{};
  a.b = b, a.h = h, a.hk = h, a.t = t, a.s = t, a.d = d;
  a.scale = 0.125f;
  a.causal = 1;
  a.layout = OTCRT_LAYOUT_BTHD;
  a.row_stride = packed ? 3 * h * d : 0;
  // Packed: one [b, t, 3h, d] buffer (and one for the gradients); else three.
  otcrt_bf16 *qkv = bf16(3 * qn), *grads = bf16(3 * qn);
  const int64_t second = packed ? h * d : qn;
  const otcrt_bf16 *q = qkv, *k = qkv + second, *v = qkv + 2 * second;
  otcrt_bf16 *dq = grads, *dk = grads + second, *dv = grads + 2 * second;
  otcrt_bf16 *out = bf16(qn), *dout = bf16(qn);
  float *lse = f32(b * h * t);
  const char *layout = packed ? "packed" : "bthd";
  Result f;
  f.name = std::string("attention fwd, ") + layout;
  f.form = "attention";
  f.m = b * h, f.n = t, f.k = d;
  f.flops = 4.0 * scores * d + 5.0 * scores;
  f.bytes = 2.0 * 4 * qn + 4.0 * b * h * t;
  f.ms = timeMedian(f.name.c_str(), [&] {
    return otcrt_attention_fwd_bf16(&a, q, k, v, nullptr, out, lse, stream);
  });
  results.push_back(f);
  Result g = f;
  g.name = std::string("attention bwd, ") + layout;
  g.flops = 10.0 * scores * d + 8.0 * scores;
  g.bytes = 2.0 * 8 * qn + 4.0 * b * h * t;
  g.ms = timeMedian(g.name.c_str(), [&] {
    return otcrt_attention_bwd_bf16(&a, dout, q, k, v, nullptr, out, lse, dq,
                                    dk, dv, stream);
  });
  results.push_back(g);
  for (void *p :
       {(void *)qkv, (void *)grads, (void *)out, (void *)dout, (void *)lse})
    CK(cudaFree(p));
}

__global__ void fillIds(int64_t *p, int64_t n, int64_t experts, uint32_t seed) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    p[i] =
        int64_t((uniformAt(i, seed) * 0.5f + 0.5f) * float(experts)) % experts;
}

/// The experts' products of one OLMoE-1B-7B layer (64 experts, width 2048,
/// each expert's gate and up [2048, 2048] and down [2048, 1024], stored
/// transposed as the exports hold them) over `rows` rows already repeated
/// top-k times, routed uniformly at random; forward and weight gradient, as
/// a BF16 program calls them: the forward stores BF16, the weight gradient
/// adds into a BF16 gradient slot.
void experts(int64_t rows) {
  const int64_t e = 64, c = 2048, f = 1024;
  int64_t *ids;
  CK(cudaMalloc(&ids, rows * sizeof(int64_t)));
  fillIds<<<1024, 256>>>(ids, rows, e, nextSeed++);
  CK(cudaGetLastError());
  struct Shape {
    const char *name;
    int64_t depth, width;
  } shapes[] = {{"experts gate_up", c, 2 * f}, {"experts down", f, c}};
  for (const Shape &s : shapes) {
    otcrt_bf16 *x = bf16(rows * s.depth), *w = bf16(e * s.width * s.depth),
               *dy = bf16(rows * s.width), *out = bf16(rows * s.width),
               *dw = bf16(e * s.width * s.depth, 1e-3f);
    Result r;
    r.name = s.name;
    r.form = "expert_matmul";
    r.m = rows, r.n = s.width, r.k = s.depth;
    r.flops = 2.0 * rows * s.depth * s.width;
    r.bytes = 2.0 * (rows * s.depth + e * s.depth * s.width + rows * s.width);
    r.ms = timeMedian(s.name, [&] {
      return otcrt_expert_matmul_bf16(rows, e, s.depth, s.width, 1, x, ids, w,
                                      OTC_BF16, out, stream);
    });
    results.push_back(r);
    Result g = r;
    g.name = std::string(s.name) + " dw";
    g.form = "expert_matmul_wgrad";
    g.bytes = 2.0 * rows * (s.depth + s.width) + 4.0 * e * s.depth * s.width;
    g.ms = timeMedian(g.name.c_str(), [&] {
      return otcrt_expert_matmul_wgrad_bf16(rows, e, s.depth, s.width, 1, dy, x,
                                            ids, OTC_BF16, 1, dw, stream);
    });
    results.push_back(g);
    for (void *p : {(void *)x, (void *)w, (void *)dy, (void *)out, (void *)dw})
      CK(cudaFree(p));
  }
  CK(cudaFree(ids));
}

} // namespace

int main(int argc, char **argv) {
  int64_t rows = 8192;
  const char *json = nullptr;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--rows") && i + 1 < argc)
      rows = std::atoll(argv[++i]);
    else if (!std::strcmp(argv[i], "--reps") && i + 1 < argc)
      reps = std::max(1, std::atoi(argv[++i]));
    else if (!std::strcmp(argv[i], "--json") && i + 1 < argc)
      json = argv[++i];
    else {
      std::fprintf(stderr,
                   "usage: otc-kernel-bench [--rows R] [--reps N] [--json "
                   "FILE]\n");
      return 2;
    }
  }
  CK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));

  // The layers' products at micro-batch 8 x 1024 tokens: qkv, attention
  // projection, MLP up and down; their input and weight gradients (the
  // weight gradient into an FP32 accumulator, as a BF16 program's slots).
  const int64_t c = 768;
  struct Shape {
    const char *name;
    int64_t in, out;
  } layers[] = {{"qkv", c, 3 * c},
                {"attn proj", c, c},
                {"mlp up", c, 4 * c},
                {"mlp down", 4 * c, c}};
  for (const Shape &s : layers) {
    std::string n = s.name;
    gemm(n, "forward", rows, s.out, s.in, OTC_BF16, 0);
    gemm(n + " dx", "input_grad", rows, s.in, s.out, OTC_BF16, 0);
    gemm(n + " dw", "weight_grad", s.out, s.in, rows, OTC_F32, 1);
  }
  // Each layer's weight and bias gradients, in two calls or one.
  for (const Shape &s : layers)
    biasGrad(s.name, s.out, s.in, rows);
  // The head's products: whole and in chunks of 1024 rows, the epilogue's
  // share seen through the dw product's output type and beta.
  const int64_t v = 50304;
  gemm("head", "forward", rows, v, c, OTC_BF16, 0);
  gemm("head dx", "input_grad", rows, c, v, OTC_BF16, 0);
  gemm("head dw", "weight_grad", v, c, rows, OTC_F32, 1);
  for (int64_t k : {int64_t(1024), int64_t(2048), int64_t(4096)}) {
    std::string n = "head dw, " + std::to_string(k) + " rows";
    gemm(n, "weight_grad", v, c, k, OTC_F32, 1);
    gemm(n, "weight_grad", v, c, k, OTC_F32, 0);
    gemm(n, "weight_grad", v, c, k, OTC_BF16, 0);
  }
  gemm("head, 1024 rows", "forward", 1024, v, c, OTC_BF16, 0);
  gemm("head dx, 1024 rows", "input_grad", 1024, c, v, OTC_F32, 0);
  attention(rows, false);
  attention(rows, true);
  // Top-8 of 64 experts: each token's row repeated 8 times.
  experts(8 * rows);
  headLoss(rows, 0);
  for (int64_t chunk : {int64_t(512), int64_t(1024), int64_t(2048),
                         int64_t(4096), rows})
    if (chunk <= rows)
      headLoss(rows, chunk);

  const char *tune = std::getenv("OTCRT_GEMM_TUNE");
  std::printf("%s, %d SMs; median of %d calls; GEMM algorithms %s\n",
              prop.name, prop.multiProcessorCount, reps,
              tune && !std::strcmp(tune, "1")
                  ? "timed on each shape's first call (OTCRT_GEMM_TUNE=1)"
                  : "the heuristic's first that runs");
  std::printf("%10s %8s %8s  %-40s %s\n", "ms", "TFLOP/s", "GB/s", "case",
              "form (m x n x k)");
  for (const Result &r : results)
    std::printf("%10.4f %8.1f %8.0f  %-40s %s (%lld x %lld x %lld)\n", r.ms,
                r.flops / r.ms / 1e9, r.bytes / r.ms / 1e6, r.name.c_str(),
                r.form.c_str(), (long long)r.m, (long long)r.n,
                (long long)r.k);
  if (json) {
    FILE *f = std::fopen(json, "w");
    if (!f) {
      std::fprintf(stderr, "otc-kernel-bench: cannot write %s\n", json);
      return 1;
    }
    std::fprintf(f, "{\"device\": \"%s\", \"reps\": %d, \"cases\": [\n",
                 prop.name, reps);
    for (size_t i = 0; i < results.size(); ++i) {
      const Result &r = results[i];
      std::fprintf(f,
                   "  {\"name\": \"%s\", \"form\": \"%s\", \"m\": %lld, "
                   "\"n\": %lld, \"k\": %lld, \"ms\": %.5f, \"flops\": %.6g, "
                   "\"bytes\": %.6g}%s\n",
                   r.name.c_str(), r.form.c_str(), (long long)r.m,
                   (long long)r.n, (long long)r.k, r.ms, r.flops, r.bytes,
                   i + 1 < results.size() ? "," : "");
    }
    std::fprintf(f, "]}\n");
    std::fclose(f);
  }
  return 0;
}
