// The draw of the next id from a position's logits, shared by
// `train --generate` (the compiled decode_step's logits) and `otc-run
// --generate` (the reference interpreter's): the same rule and random
// numbers, so that both print the same ids for a seed. Header-only.
#ifndef OTCRT_SAMPLING_H
#define OTCRT_SAMPLING_H

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <vector>

namespace otcrt {

/// --temperature (0: the largest logit), --top-k (0: all), --top-p.
struct DrawRule {
  double temperature = 1.0;
  int64_t topK = 0;
  double topP = 1.0;
};

/// Uniform in [0, 1) for draw `step` of `seed`: SplitMix64 over both, the
/// same on every machine.
inline double drawUniform(uint64_t seed, uint64_t step) {
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + step;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  x ^= x >> 31;
  return static_cast<double>(x >> 11) * 0x1.0p-53;
}

/// One id from the `V` logits: the largest at temperature 0 (the first of
/// equal ones), else from softmax(logits / temperature) over the top-k
/// largest and the fewest largest whose probabilities reach top-p (largest
/// first, equal ones by index), by the uniform `u`.
template <typename T>
int64_t drawId(const T *logits, int64_t V, const DrawRule &rule, double u) {
  if (rule.temperature == 0) {
    int64_t best = 0;
    for (int64_t i = 1; i < V; ++i)
      if (logits[i] > logits[best])
        best = i;
    return best;
  }
  int64_t keep = rule.topK > 0 ? std::min(rule.topK, V) : V;
  std::vector<int64_t> order(static_cast<size_t>(V));
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(order.begin(), order.begin() + keep, order.end(),
                    [&](int64_t a, int64_t b) {
                      return logits[a] > logits[b] ||
                             (logits[a] == logits[b] && a < b);
                    });
  std::vector<double> p(static_cast<size_t>(keep));
  double top = logits[order[0]] / rule.temperature, sum = 0;
  for (int64_t i = 0; i < keep; ++i)
    sum += p[i] = std::exp(logits[order[i]] / rule.temperature - top);
  if (rule.topP < 1) {
    double reached = 0;
    int64_t n = 0;
    while (n < keep && reached < rule.topP * sum)
      reached += p[n++];
    keep = std::max<int64_t>(n, 1);
    sum = reached > 0 ? reached : p[0];
  }
  double at = u * sum, run = 0;
  for (int64_t i = 0; i < keep; ++i) {
    run += p[i];
    if (at < run)
      return order[i];
  }
  return order[keep - 1];
}

} // namespace otcrt

#endif // OTCRT_SAMPLING_H
