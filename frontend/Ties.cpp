//===- Ties.cpp - initializers that repeat another one --------------------===//
//
// Exporters split a tied weight: TorchScript's constant folding writes a tied
// embedding / LM head as the table W and a folded copy of W^T. Trained as two
// parameters, the tie is lost after the first update. findTies finds such
// copies by value (exact equality, element for element), so the importer can
// make the copy a view of the one trained tensor and otc-export can write it
// back from that tensor.
//
//===----------------------------------------------------------------------===//

#include "frontend/Importer.h"

#include <algorithm>
#include <cstdint>
#include <cmath>
#include <cstring>
#include <map>
#include <tuple>
#include <unordered_set>

namespace otc {

namespace {

bool bitEqual(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; }

bool isCopy(const NamedTensor &a, const std::vector<float> &av,
            const NamedTensor &b, const std::vector<float> &bv) {
  if (a.shape != b.shape || av.size() != bv.size())
    return false;
  for (size_t i = 0; i < av.size(); ++i)
    if (!bitEqual(av[i], bv[i]))
      return false;
  return true;
}

bool isTranspose(const NamedTensor &a, const std::vector<float> &av,
                 const NamedTensor &b, const std::vector<float> &bv) {
  if (a.shape.size() != 2 || b.shape.size() != 2 || a.shape[0] != b.shape[1] ||
      a.shape[1] != b.shape[0] || av.size() != bv.size())
    return false;
  int64_t rows = a.shape[0], cols = a.shape[1];
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j)
      if (!bitEqual(av[i * cols + j], bv[j * rows + i]))
        return false;
  return true;
}

/// The values of `t`: its own, or read again.
const std::vector<float> &valuesOf(const NamedTensor &t,
                                   std::vector<float> &loaded) {
  if (t.values)
    return *t.values;
  loaded = t.load ? t.load() : std::vector<float>();
  return loaded;
}

/// Whether `name` reads as given by the exporter from the model's own names
/// (`transformer.wte.weight`) rather than made up for a folded constant
/// (`onnx::MatMul_1234`).
bool modelGivenName(const std::string &name) {
  return name.find("::") == std::string::npos;
}

} // namespace

detail::DistinctValues::DistinctValues(size_t count)
    : limit(std::min(kFewValues, (count + 1) / 2)) {
  seen.reserve(2 * kFewValues);
}

bool detail::DistinctValues::add(float f) {
  if (many)
    return true;
  uint32_t bits = 0; // -0 counts as 0; NaNs of one bit pattern count once
  if (f != 0.0f)
    std::memcpy(&bits, &f, sizeof bits);
  if (seen.insert(bits).second && seen.size() >= limit) {
    many = true;
    seen = {};
  }
  return many;
}

bool detail::fewDistinct(const std::vector<float> &v) {
  // Fewer than half the elements distinct, and fewer than kFewValues: a
  // constant, a zero or an identity tensor holds one to a few values; a
  // random or trained weight reaches kFewValues within its first thousand
  // elements, so the pass stops there instead of hashing half the tensor
  // (which at GPT-2 124M's size took most of the import). A constant tensor
  // is read whole once.
  DistinctValues distinct(v.size());
  for (float f : v)
    if (distinct.add(f))
      return false;
  return distinct.few();
}

TieKeyBuilder::TieKeyBuilder(size_t count) : distinct(count) {
  k.count = count;
}

void TieKeyBuilder::add(const float *v, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, &v[i], sizeof bits);
    uint64_t h = bits * 0x9E3779B97F4A7C15ull;
    k.sum += bits;
    k.mixed += h ^ (h >> 29);
    distinct.add(v[i]);
  }
}

TieKey TieKeyBuilder::key() const {
  TieKey out = k;
  out.fewDistinct = distinct.few();
  return out;
}

TieKey tieKey(const std::vector<float> &v) {
  TieKeyBuilder b(v.size());
  b.add(v.data(), v.size());
  return b.key();
}

std::optional<detail::StreamedKey>
detail::keyWithoutValues(const onnx::TensorProto &t, const std::string &what,
                         const std::string &modelPath) {
  if (t.data_location() != onnx::TensorProto::EXTERNAL ||
      !kindOf(t.data_type()) || *kindOf(t.data_type()) != Kind::F32)
    return std::nullopt;
  size_t count = 1;
  for (int64_t d : t.dims())
    count *= d < 0 ? 0 : size_t(d);
  if (count < valuelessElements())
    return std::nullopt;
  StreamedKey out;
  TieKeyBuilder key(count);
  bool started = false;
  forEachFloatChunk(t, what, modelPath, [&](const float *v, size_t n) {
    if (n && !started)
      out.first = v[0];
    started |= n > 0;
    if (n)
      out.last = v[n - 1];
    key.add(v, n);
    for (size_t i = 0; i < n && out.finite; ++i)
      out.finite = std::isfinite(v[i]);
  });
  out.key = key.key();
  return out;
}

TieKey diagonalTieKey(size_t count, const std::vector<float> &diagonal,
                      bool fewDistinct) {
  TieKey k = tieKey(diagonal);
  k.count = count;
  k.fewDistinct = fewDistinct;
  return k;
}

std::vector<InitializerTie> findTies(const std::vector<NamedTensor> &tensors) {
  std::map<TieKey, std::vector<size_t>> buckets;
  std::vector<TieKey> keys(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    const NamedTensor &t = tensors[i];
    keys[i] = t.key ? *t.key : t.values ? tieKey(*t.values) : TieKey();
    if (t.shape.size() < 2 || keys[i].count < 4)
      continue;
    buckets[keys[i]].push_back(i);
  }
  std::vector<InitializerTie> ties;
  std::vector<bool> taken(tensors.size(), false);
  for (auto &[summary, members] : buckets) {
    if (members.size() < 2)
      continue;
    for (size_t x = 0; x < members.size(); ++x) {
      const NamedTensor &a = tensors[members[x]];
      if (taken[members[x]] || keys[members[x]].fewDistinct)
        continue;
      std::vector<float> aLoaded;
      const std::vector<float> &av = valuesOf(a, aLoaded);
      for (size_t y = x + 1; y < members.size(); ++y) {
        if (taken[members[y]])
          continue;
        const NamedTensor &b = tensors[members[y]];
        std::vector<float> bLoaded;
        const std::vector<float> &bv = valuesOf(b, bLoaded);
        bool transposed = isTranspose(a, av, b, bv);
        if (!transposed && !isCopy(a, av, b, bv))
          continue;
        // Keep the model-given name; between two such, the earlier one.
        bool keepB = modelGivenName(b.name) && !modelGivenName(a.name);
        const NamedTensor &source = keepB ? b : a, &copy = keepB ? a : b;
        ties.push_back({copy.name, source.name, transposed});
        taken[keepB ? members[x] : members[y]] = true;
        if (keepB)
          break;
      }
    }
  }
  return ties;
}

std::vector<float> transposed2d(const float *src, int64_t rows, int64_t cols) {
  std::vector<float> out(static_cast<size_t>(rows * cols));
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j)
      out[j * rows + i] = src[i * cols + j];
  return out;
}

} // namespace otc
