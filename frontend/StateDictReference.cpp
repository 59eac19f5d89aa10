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

namespace {

/// Whether `a` is `b` within `tol` relative.
bool nearBy(float a, float b, float tol) {
  return a == b || std::fabs(a - b) <= tol * std::fabs(b);
}

/// Whether `v` is `r + c` as a fold rounds it once in float32 (within
/// `tol` relative of `r` besides).
bool offsetBy(float v, float r, double c, float tol) {
  double d = double(v) - r;
  return std::fabs(d - c) <= 4 * std::ldexp(1.0, -23) * (std::fabs(v) + 1) +
                                 tol * (std::fabs(r) + 1);
}

} // namespace

std::optional<Relation> relate(const std::vector<int64_t> &shape,
                               const float *v, const ExportWeight &ref,
                               const float *r, const Relation *preferred,
                               Rules rules) {
  int64_t n = numel(shape);
  if (n != numel(ref.shape))
    return std::nullopt;
  auto near = [&](float a, float b) { return nearBy(a, b, ref.relTol); };
  auto same = [&]() {
    for (int64_t i = 0; i < n; ++i)
      if (!near(v[i], r[i]))
        return false;
    return true;
  };
  auto transposed = [&]() {
    if (shape.size() != 2 || ref.shape.size() != 2 ||
        shape[0] != ref.shape[1] || shape[1] != ref.shape[0])
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
      if (!offsetBy(v[i], r[i], c, ref.relTol))
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
      if (shape == ref.shape && same())
        return rel;
      break;
    case Relation::Transposed:
      if (transposed())
        return rel;
      break;
    case Relation::Reshaped:
      if (shape != ref.shape && same())
        return rel;
      break;
    case Relation::Offset:
      if (shape == ref.shape)
        if (auto c = offset()) {
          rel.offset = *c;
          return rel;
        }
      break;
    }
  }
  return std::nullopt;
}

bool mayRelate(const ValuePrint &a, const ValuePrint &b, float relTol,
               Rules rules) {
  // The first and last values keep their places under every relation:
  // relate compares them among the rest.
  if (nearBy(a.first, b.first, relTol) && nearBy(a.last, b.last, relTol))
    return true;
  double c = double(a.first) - b.first;
  return rules == Rules::All && c != 0 && offsetBy(a.last, b.last, c, relTol);
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

ReferenceResolver::ReferenceResolver(
    std::vector<Init> &inits, const std::vector<ExportWeight> &reference,
    const std::string &prefix,
    std::function<std::vector<float>(const Init &)> readInit)
    : inits(inits), readInit(std::move(readInit)), ref(reference) {
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

ValuePrint ReferenceResolver::printOf(const Init &init) const {
  if (init.print)
    return *init.print;
  return valuePrint(init.original.data(), init.original.size());
}

ValuePrint ReferenceResolver::printOf(const ExportWeight &w) const {
  if (w.print)
    return *w.print;
  return valuePrint(w.data, size_t(numel(w.shape)));
}

std::optional<Relation> ReferenceResolver::match(const Init &init,
                                                 const ExportWeight &w,
                                                 const Relation *preferred,
                                                 Rules rules) {
  if (numel(init.shape) != numel(w.shape) ||
      !mayRelate(printOf(init), printOf(w), w.relTol, rules))
    return std::nullopt;
  const float *v = init.original.data();
  if (init.deferred()) {
    if (initRead != &init) {
      initValues = readInit(init);
      initRead = &init;
    }
    v = initValues.data();
  }
  const float *r = w.data;
  if (!r) {
    if (refRead != &w) {
      refValues = w.values();
      refRead = &w;
    }
    r = refValues.data();
  }
  return relate(init.shape, v, w, r, preferred, rules);
}

bool ReferenceResolver::run(std::string &error) {
  if (!checkGraphNames(error))
    return false;
  matchHints();
  nameByValue();
  claimUnnamedReference();
  // The values last compared let go before anything is written.
  std::vector<float>().swap(initValues);
  std::vector<float>().swap(refValues);
  initRead = nullptr;
  refRead = nullptr;
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
      std::optional<Relation> rel = match(init, *it->second, &n.relation);
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
    if (std::optional<Relation> rel = match(init, *it->second)) {
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
        if (std::optional<Relation> rel = match(init, w, nullptr, Rules::Exact))
          found.push_back({&w, *rel});
    if (found.empty() || (found.size() > 1 && printOf(init).few))
      continue;
    std::string how = "matched by value with the reference";
    if (found.size() > 1)
      how += " (first of " + std::to_string(found.size()) +
             " tensors of equal values)";
    init.names.push_back({found[0].first->name, found[0].second, how});
    claimed.insert(found[0].first->name);
  }
}

/// Whether `parent` names a tensor of the module that holds the module of
/// `child` under the same leaf name ("cls.predictions.bias" and
/// "cls.predictions.decoder.bias"): a module's parameter that its parent
/// also registers, as BERT's masked-LM head sets `decoder.bias = bias`
/// (the graph may name either).
static bool parentAlias(const std::string &child, const std::string &parent) {
  return child.find('.') != std::string::npos &&
         leafOf(child) == leafOf(parent) &&
         ownerOf(ownerOf(child)) == ownerOf(parent);
}

void ReferenceResolver::claimUnnamedReference() {
  // Reference names no initializer took: the other name of a tie, or a
  // tensor the graph does not read (the exporter may have folded it away:
  // the dynamo exporter drops an addition of a zero bias). A tie is an
  // exact copy of values that say which tensor they are; zeros or ones
  // equal every other such tensor, so those are copied through unchanged,
  // unless the names say it is a tie too: the same leaf registered by a
  // module and by its parent (BERT's zero-initialized cls.predictions.bias,
  // which is cls.predictions.decoder.bias).
  for (const ExportWeight &w : ref) {
    if (claimed.count(w.name))
      continue;
    Init *holder = nullptr;
    std::optional<Relation> holderRel;
    bool fewValues = printOf(w).few;
    for (Init &init : inits) {
      if (init.names.empty() ||
          (fewValues && !parentAlias(init.names.front().name, w.name) &&
           !parentAlias(w.name, init.names.front().name)))
        continue;
      if (std::optional<Relation> rel = match(init, w, nullptr, Rules::Exact)) {
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

ValuePrint valuePrint(const float *v, size_t n) {
  ValuePrint p;
  if (n) {
    p.first = v[0];
    p.last = v[n - 1];
  }
  detail::DistinctValues distinct(n);
  for (size_t i = 0; i < n && !distinct.add(v[i]); ++i) {
  }
  p.few = distinct.few();
  return p;
}

} // namespace otc
