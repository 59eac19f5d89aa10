//===- StateDictReference.cpp - state-dict names from the original weights ===//
//
// With a reference (the model's original state dict, otc-export
// --reference), every initializer is matched by value: the same values,
// transposed, reshaped, or shifted by a constant the exporter folded in
// (Gemma's `1 + weight`). Every name the graph's metadata gave is checked
// against it, tied names are found (the reference holds both), and
// reference entries the graph lacks are copied through, so the output
// loads with `strict=True`.
//
//===----------------------------------------------------------------------===//

#include "frontend/StateDictInit.h"

#include <cassert>
#include <cmath>
#include <sstream>

namespace otc {
namespace statedict {

std::optional<Relation> relate(const Init &init, const ExportWeight &ref,
                               const Relation *preferred, Rules rules) {
  int64_t n = numel(init.shape);
  if (n != numel(ref.shape))
    return std::nullopt;
  const float *r = ref.data;
  // Values are kept whenever a reference is given (StateDictBuilder::load).
  assert(!init.deferred() && "values compared with a reference are kept");
  const std::vector<float> &v = init.original;
  auto near = [&](float a, float b) {
    return a == b || std::fabs(a - b) <= ref.relTol * std::fabs(b);
  };
  auto same = [&]() {
    for (int64_t i = 0; i < n; ++i)
      if (!near(v[i], r[i]))
        return false;
    return true;
  };
  auto transposed = [&]() {
    if (init.shape.size() != 2 || ref.shape.size() != 2 ||
        init.shape[0] != ref.shape[1] || init.shape[1] != ref.shape[0])
      return false;
    int64_t rows = ref.shape[0], cols = ref.shape[1];
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j)
        if (!near(v[j * rows + i], r[i * cols + j]))
          return false;
    return true;
  };
  auto offset = [&]() -> std::optional<float> {
    if (n == 0)
      return std::nullopt;
    double c = double(v[0]) - r[0];
    if (c == 0)
      return std::nullopt;
    for (int64_t i = 0; i < n; ++i) {
      double d = double(v[i]) - r[i];
      // The fold rounded v = r + c once in float32.
      if (std::fabs(d - c) > 4 * std::ldexp(1.0, -23) * (std::fabs(v[i]) + 1) +
                                 ref.relTol * (std::fabs(r[i]) + 1))
        return std::nullopt;
    }
    return float(std::nearbyint(c * 1e6) / 1e6);
  };
  std::vector<Relation::Kind> order = {Relation::Identical,
                                       Relation::Transposed, Relation::Reshaped,
                                       Relation::Offset};
  if (preferred)
    order.insert(order.begin(), preferred->kind);
  for (Relation::Kind k : order) {
    if (k == Relation::Offset && rules == Rules::Exact)
      continue;
    Relation rel;
    rel.kind = k;
    rel.shape = ref.shape;
    switch (k) {
    case Relation::Identical:
      if (init.shape == ref.shape && same())
        return rel;
      break;
    case Relation::Transposed:
      if (transposed())
        return rel;
      break;
    case Relation::Reshaped:
      if (init.shape != ref.shape && same())
        return rel;
      break;
    case Relation::Offset:
      if (init.shape == ref.shape)
        if (auto c = offset()) {
          rel.offset = *c;
          return rel;
        }
      break;
    }
  }
  return std::nullopt;
}

std::string relationText(const Relation &rel) {
  switch (rel.kind) {
  case Relation::Identical:
    return "";
  case Relation::Transposed:
    return ", transposed";
  case Relation::Reshaped:
    return ", reshaped to " + detail::shapeStr(rel.shape);
  case Relation::Offset: {
    std::ostringstream s;
    s << ", minus the " << rel.offset << " the exporter folded in";
    return s.str();
  }
  }
  return "";
}

std::vector<float> invert(std::vector<float> v, const Init &init,
                          const Relation &rel) {
  switch (rel.kind) {
  case Relation::Identical:
  case Relation::Reshaped:
    return v;
  case Relation::Transposed:
    return transposed2d(v.data(), init.shape[0], init.shape[1]);
  case Relation::Offset:
    for (float &x : v)
      x -= rel.offset;
    return v;
  }
  return v;
}

ReferenceResolver::ReferenceResolver(std::vector<Init> &inits,
                                     const std::vector<ExportWeight> &reference,
                                     const std::string &prefix)
    : inits(inits), ref(reference) {
  std::vector<std::string> graphNames;
  for (const Init &init : inits)
    for (const Init::Named &n : init.names)
      graphNames.push_back(n.name);
  auto self = [](const std::string &s) -> const std::string & { return s; };
  auto nameOf = [](const ExportWeight &w) -> const std::string & {
    return w.name;
  };
  if (!prefix.empty() && allStartWith(graphNames, self, prefix) &&
      !allStartWith(ref, nameOf, prefix))
    for (ExportWeight &w : ref)
      w.name = prefix + w.name;
  for (const ExportWeight &w : ref)
    refByName[w.name] = &w;
}

bool ReferenceResolver::run(std::string &error) {
  if (!checkGraphNames(error))
    return false;
  matchHints();
  nameByValue();
  claimUnnamedReference();
  return true;
}

bool ReferenceResolver::checkGraphNames(std::string &error) {
  // Names from the graph, checked by value.
  for (Init &init : inits) {
    std::vector<Init::Named> kept;
    for (Init::Named &n : init.names) {
      auto it = refByName.find(n.name);
      if (it == refByName.end()) {
        // An alias the reference lacks (it saved one name of a tie) or a
        // parameter it does not have.
        if (&n != &init.names.front())
          continue;
        error = "initializer '" + init.name + "' is '" + n.name + "' (" +
                n.how +
                ") but the reference has no tensor of that name (the reference "
                "of another model?)";
        return false;
      }
      std::optional<Relation> rel = relate(init, *it->second, &n.relation);
      if (!rel) {
        error = "initializer '" + init.name + "' is '" + n.name + "' (" +
                n.how + ") but its values are not the reference's " + n.name +
                " (identical, transposed, reshaped or shifted): the model was "
                "exported from other weights than the reference's";
        return false;
      }
      n.relation = *rel;
      n.how += ", checked against the reference";
      claimed.insert(n.name);
      kept.push_back(n);
    }
    init.names = kept;
  }
  return true;
}

void ReferenceResolver::matchHints() {
  for (Init &init : inits) {
    if (!init.names.empty() || init.hint.empty())
      continue;
    auto it = refByName.find(init.hint);
    if (it == refByName.end() || claimed.count(init.hint))
      continue;
    if (std::optional<Relation> rel = relate(init, *it->second)) {
      init.names.push_back(
          {init.hint, *rel,
           init.hintWhy + ", matched by value with the reference"});
      claimed.insert(init.hint);
    }
  }
}

void ReferenceResolver::nameByValue() {
  // Initializers still unnamed: by value among the unclaimed reference
  // tensors, trained ones first (constants may match nothing); exactly, and
  // a tensor of a few values (zeros, ones) only where one tensor matches.
  std::vector<Init *> unnamed;
  for (bool trainedPass : {true, false})
    for (Init &init : inits)
      if (init.names.empty() && init.trained == trainedPass)
        unnamed.push_back(&init);
  for (Init *ip : unnamed) {
    Init &init = *ip;
    std::vector<std::pair<const ExportWeight *, Relation>> found;
    for (const ExportWeight &w : ref)
      if (!claimed.count(w.name))
        if (std::optional<Relation> rel =
                relate(init, w, nullptr, Rules::Exact))
          found.push_back({&w, *rel});
    if (found.empty() ||
        (found.size() > 1 && detail::fewDistinct(init.original)))
      continue;
    std::string how = "matched by value with the reference";
    if (found.size() > 1)
      how += " (first of " + std::to_string(found.size()) +
             " tensors of equal values)";
    init.names.push_back({found[0].first->name, found[0].second, how});
    claimed.insert(found[0].first->name);
  }
}

void ReferenceResolver::claimUnnamedReference() {
  // Reference names no initializer took: the other name of a tie, or a
  // tensor the graph does not read (the exporter may have folded it away:
  // the dynamo exporter drops an addition of a zero bias). A tie is an
  // exact copy of values that say which tensor they are; zeros or ones
  // equal every other such tensor, so those are copied through unchanged.
  for (const ExportWeight &w : ref) {
    if (claimed.count(w.name))
      continue;
    Init *holder = nullptr;
    std::optional<Relation> holderRel;
    bool fewValues = detail::fewDistinct(
        std::vector<float>(w.data, w.data + numel(w.shape)));
    for (Init &init : inits) {
      if (init.names.empty() || fewValues)
        continue;
      if (std::optional<Relation> rel =
              relate(init, w, nullptr, Rules::Exact)) {
        // Prefer the trained source over an untrained copy.
        if (!holder || (init.trained && !holder->trained)) {
          holder = &init;
          holderRel = rel;
        }
      }
    }
    if (holder) {
      holder->names.push_back({w.name, *holderRel,
                               "tied: the reference's " + w.name + " equals " +
                                   holder->names.front().name});
    } else {
      copiedThrough.push_back(&w);
    }
    claimed.insert(w.name);
  }
}

} // namespace statedict
} // namespace otc
