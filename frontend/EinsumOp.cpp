//===- EinsumOp.cpp - Einsum as transposes, sums and a batched product ----===//
//
// The einsums that models write (Mamba2's, Falcon-H1's and Bamba's state
// space scan: `bclhn,bcshn->bclsh`, five a layer) on one or two float
// operands, explicit (`->`) or implicit (the output the letters that appear
// once, sorted), with `...` for leading dimensions:
//  - a letter of one operand that neither the other nor the output has is
//    summed out of it first;
//  - the letters both operands and the output have are batch dimensions,
//    those both have and the output does not are contracted, the rest are
//    kept from one side;
//  - each operand is transposed to [batch..., kept..., contracted...] (the
//    second to [batch..., contracted..., kept...]) and reshaped to
//    [batch..., M, K] and [batch..., K, N], otc.matmul multiplies them, and
//    the result is reshaped and transposed to the output's order.
// So the gradient, the interpreter and the kernels are the product's,
// transposes' and sums' already. A letter repeated within one operand (a
// diagonal or a trace) and three or more operands are refused in one line.
//
//===----------------------------------------------------------------------===//

#include "frontend/Importer.h"

#include "ir/ShapeUtils.h"

#include <algorithm>
#include <map>

using namespace mlir;

namespace otc {
namespace detail {

namespace {

/// Letters standing for the dimensions of `...` (not letters ONNX allows).
char ellipsisLetter(int k) { return static_cast<char>(1 + k); }

} // namespace

/// `term`'s letters for an operand of rank `rank`, its `...` expanded into
/// the last `ellipsis` ellipsis letters (ellipsis: the rank the dots stand
/// for, returned).
std::string Importer::einsumLetters(std::string term, int64_t rank,
                                    int64_t &ellipsis) {
  size_t dots = term.find("...");
  if (dots == std::string::npos) {
    if (static_cast<int64_t>(term.size()) != rank)
      nodeFail("the subscripts '" + term + "' name " +
               std::to_string(term.size()) +
               " dimension(s) of an operand of rank " + std::to_string(rank));
    return term;
  }
  ellipsis = rank - static_cast<int64_t>(term.size() - 3);
  if (ellipsis < 0)
    nodeFail("the subscripts '" + term +
             "' name more dimensions than the "
             "operand's " +
             std::to_string(rank));
  std::string dims;
  for (int64_t k = 0; k < ellipsis; ++k)
    dims += ellipsisLetter(static_cast<int>(k));
  return term.substr(0, dots) + dims + term.substr(dots + 3);
}

namespace {
bool has(const std::string &s, char ch) {
  return s.find(ch) != std::string::npos;
}
} // namespace

/// The node's equation without spaces, split into its operands' terms and
/// the output's (`-> ...`, or none: implicit).
static void splitEquation(const std::string &equation,
                          std::vector<std::string> &terms,
                          std::optional<std::string> &output) {
  std::string eq;
  for (char ch : equation)
    if (ch != ' ')
      eq += ch;
  size_t arrow = eq.find("->");
  if (arrow != std::string::npos)
    output = eq.substr(arrow + 2);
  std::string lhs = eq.substr(0, arrow);
  for (size_t begin = 0;;) {
    size_t comma = lhs.find(',', begin);
    terms.push_back(lhs.substr(begin, comma - begin));
    if (comma == std::string::npos)
      break;
    begin = comma + 1;
  }
}

EinsumTerms Importer::einsumTerms() {
  std::string equation = attrString("equation", "");
  std::vector<std::string> terms;
  std::optional<std::string> rhs;
  splitEquation(equation, terms, rhs);
  int n = current->proto->input_size();
  if (static_cast<int>(terms.size()) != n)
    nodeFail("the equation '" + equation + "' has " +
             std::to_string(terms.size()) + " operand(s), the node " +
             std::to_string(n));
  if (n < 1 || n > 2)
    nodeFail("an einsum of " + std::to_string(n) +
             " operands: otc imports one or two");
  EinsumTerms t;
  int64_t ellipsis = 0;
  for (int i = 0; i < n; ++i) {
    Value x = requireFloat(input(i), "operand " + std::to_string(i));
    int64_t e = 0;
    std::string l = einsumLetters(terms[i], shapeOf(x).size(), e);
    ellipsis = std::max(ellipsis, e);
    for (size_t d = 0; d < l.size(); ++d) {
      if (l.find(l[d]) != d)
        nodeFail("the subscripts '" + terms[i] +
                 "' repeat a letter (a diagonal or trace): not imported");
      int64_t dim = shapeOf(x)[d];
      auto [it, fresh] = t.size.try_emplace(l[d], dim);
      if (!fresh && it->second != dim)
        nodeFail("subscript '" + std::string(1, l[d]) + "' is " +
                 std::to_string(it->second) + " in one operand and " +
                 std::to_string(dim) + " in another");
    }
    t.xs.push_back(x);
    t.letters.push_back(l);
  }
  if (rhs) {
    int64_t e = 0;
    t.out = has(*rhs, '.')
                ? einsumLetters(
                      *rhs, static_cast<int64_t>(rhs->size() - 3) + ellipsis, e)
                : *rhs;
  } else {
    // Implicit: the ellipsis's dimensions, then the letters that appear
    // once, in alphabetical order (std::map's).
    for (int64_t k = 0; k < ellipsis; ++k)
      t.out += ellipsisLetter(static_cast<int>(k));
    for (auto [ch, dim] : t.size) {
      int count = 0;
      for (const std::string &l : t.letters)
        count += has(l, ch);
      if (count == 1 && ch > ellipsisLetter(static_cast<int>(ellipsis) - 1))
        t.out += ch;
    }
  }
  for (char ch : t.out)
    if (!t.size.count(ch))
      nodeFail("output subscript '" + std::string(1, ch) +
               "' is in no operand");
  return t;
}

void Importer::sumOutLoneLetters(EinsumTerms &t) {
  for (size_t i = 0; i < t.xs.size(); ++i) {
    SmallVector<int64_t> axes;
    std::string kept;
    for (size_t d = 0; d < t.letters[i].size(); ++d) {
      char ch = t.letters[i][d];
      bool elsewhere =
          has(t.out, ch) || (t.xs.size() == 2 && has(t.letters[1 - i], ch));
      if (elsewhere)
        kept += ch;
      else
        axes.push_back(static_cast<int64_t>(d));
    }
    if (!axes.empty()) {
      t.xs[i] = reduceSum(t.xs[i], axes, /*keepDims=*/false);
      t.letters[i] = kept;
    }
  }
}

Value Importer::transposeLetters(Value x, const std::string &from,
                                 const std::string &to) {
  SmallVector<int64_t> perm;
  bool identity = true;
  for (char ch : to) {
    perm.push_back(static_cast<int64_t>(from.find(ch)));
    identity &= perm.back() == static_cast<int64_t>(perm.size() - 1);
  }
  return identity ? x : transposeTo(x, perm);
}

Value Importer::einsumProduct(const EinsumTerms &t, std::string &letters) {
  const std::string &a = t.letters[0], &b = t.letters[1];
  std::string batch, contracted, aKeep, bKeep;
  for (char ch : t.out)
    if (has(a, ch) && has(b, ch))
      batch += ch;
  for (char ch : a)
    if (has(b, ch) && !has(t.out, ch))
      contracted += ch;
    else if (!has(b, ch))
      aKeep += ch;
  for (char ch : b)
    if (!has(a, ch))
      bKeep += ch;
  auto dims = [&](const std::string &ls) {
    SmallVector<int64_t> d;
    for (char ch : ls)
      d.push_back(t.size.at(ch));
    return d;
  };
  auto product = [&](const std::string &ls) {
    int64_t p = 1;
    for (int64_t d : dims(ls))
      p *= d;
    return p;
  };
  auto with = [&](int64_t m, int64_t k) {
    SmallVector<int64_t> s = dims(batch);
    s.push_back(m);
    s.push_back(k);
    return s;
  };
  int64_t m = product(aKeep), k = product(contracted), n = product(bKeep);
  Value lhs = reshape(transposeLetters(t.xs[0], a, batch + aKeep + contracted),
                      with(m, k));
  Value rhs = reshape(transposeLetters(t.xs[1], b, batch + contracted + bKeep),
                      with(k, n));
  Value prod = builder.createOrFold<MatMulOp>(
      currentLoc, tensorType(with(m, n), builder.getF32Type()), lhs, rhs);
  letters = batch + aKeep + bKeep;
  return reshape(prod, dims(letters));
}

void Importer::importEinsum() {
  EinsumTerms t = einsumTerms();
  // Letters of one operand that nothing else has: summed out first.
  sumOutLoneLetters(t);
  std::string letters = t.letters[0];
  Value y = t.xs.size() == 1 ? t.xs[0] : einsumProduct(t, letters);
  define(0, transposeLetters(y, letters, t.out));
}

} // namespace detail
} // namespace otc
