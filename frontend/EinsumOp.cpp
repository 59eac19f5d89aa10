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

void Importer::importEinsum() {
  std::string eq;
  for (char ch : attrString("equation", ""))
    if (ch != ' ')
      eq += ch;
  size_t arrow = eq.find("->");
  std::string lhs = eq.substr(0, arrow);
  std::vector<std::string> terms;
  for (size_t begin = 0;;) {
    size_t comma = lhs.find(',', begin);
    terms.push_back(lhs.substr(begin, comma - begin));
    if (comma == std::string::npos)
      break;
    begin = comma + 1;
  }
  int n = current->proto->input_size();
  if (static_cast<int>(terms.size()) != n)
    nodeFail("the equation '" + eq + "' has " + std::to_string(terms.size()) +
             " operand(s), the node " + std::to_string(n));
  if (n < 1 || n > 2)
    nodeFail("an einsum of " + std::to_string(n) +
             " operands: otc imports one or two");
  SmallVector<Value> xs;
  SmallVector<std::string> letters;
  std::map<char, int64_t> size;
  int64_t ellipsis = 0;
  for (int i = 0; i < n; ++i) {
    Value x = requireFloat(input(i), "operand " + std::to_string(i));
    int64_t e = 0;
    std::string l = einsumLetters(terms[i], shapeOf(x).size(), e);
    ellipsis = std::max(ellipsis, e);
    for (size_t d = 0; d < l.size(); ++d) {
      if (l.find(l[d]) != d)
        nodeFail("the subscripts '" + terms[i] +
                 "' repeat a letter (a "
                 "diagonal or trace): not imported");
      int64_t dim = shapeOf(x)[d];
      auto [it, fresh] = size.try_emplace(l[d], dim);
      if (!fresh && it->second != dim)
        nodeFail("subscript '" + std::string(1, l[d]) + "' is " +
                 std::to_string(it->second) + " in one operand and " +
                 std::to_string(dim) + " in another");
    }
    xs.push_back(x);
    letters.push_back(l);
  }
  std::string out;
  if (arrow != std::string::npos) {
    int64_t e = 0;
    std::string rhs = eq.substr(arrow + 2);
    out = rhs.find("...") == std::string::npos
              ? rhs
              : einsumLetters(
                    rhs, static_cast<int64_t>(rhs.size() - 3) + ellipsis, e);
  } else {
    // Implicit: the ellipsis's dimensions, then the letters that appear
    // once, in alphabetical order.
    for (int64_t k = 0; k < ellipsis; ++k)
      out += ellipsisLetter(static_cast<int>(k));
    std::string once;
    for (auto [ch, dim] : size) {
      int count = 0;
      for (const std::string &l : letters)
        count += l.find(ch) != std::string::npos;
      if (count == 1 && ch > ellipsisLetter(static_cast<int>(ellipsis) - 1))
        once += ch;
    }
    std::sort(once.begin(), once.end());
    out += once;
  }
  for (char ch : out)
    if (!size.count(ch))
      nodeFail("output subscript '" + std::string(1, ch) +
               "' is in no operand");
  auto has = [](const std::string &s, char ch) {
    return s.find(ch) != std::string::npos;
  };
  // Letters of one operand that nothing else has: summed out first.
  for (int i = 0; i < n; ++i) {
    SmallVector<int64_t> axes;
    std::string kept;
    for (size_t d = 0; d < letters[i].size(); ++d) {
      char ch = letters[i][d];
      bool elsewhere = has(out, ch) || (n == 2 && has(letters[1 - i], ch));
      if (elsewhere)
        kept += ch;
      else
        axes.push_back(static_cast<int64_t>(d));
    }
    if (!axes.empty()) {
      xs[i] = reduceSum(xs[i], axes, /*keepDims=*/false);
      letters[i] = kept;
    }
  }
  auto transposeLetters = [&](Value x, const std::string &from,
                              const std::string &to) {
    SmallVector<int64_t> perm;
    for (char ch : to)
      perm.push_back(static_cast<int64_t>(from.find(ch)));
    bool identity = true;
    for (size_t d = 0; d < perm.size(); ++d)
      identity &= perm[d] == static_cast<int64_t>(d);
    return identity ? x : transposeTo(x, perm);
  };
  Value y;
  std::string yLetters;
  if (n == 1) {
    y = xs[0];
    yLetters = letters[0];
  } else {
    std::string batch, contracted, aKeep, bKeep;
    for (char ch : out)
      if (has(letters[0], ch) && has(letters[1], ch))
        batch += ch;
    for (char ch : letters[0])
      if (has(letters[1], ch) && !has(out, ch))
        contracted += ch;
      else if (!has(letters[1], ch))
        aKeep += ch;
    for (char ch : letters[1])
      if (!has(letters[0], ch))
        bKeep += ch;
    auto product = [&](const std::string &ls) {
      int64_t p = 1;
      for (char ch : ls)
        p *= size.at(ch);
      return p;
    };
    SmallVector<int64_t> batchShape;
    for (char ch : batch)
      batchShape.push_back(size.at(ch));
    auto with = [&](int64_t m, int64_t k) {
      SmallVector<int64_t> s(batchShape);
      s.push_back(m);
      s.push_back(k);
      return s;
    };
    int64_t m = product(aKeep), k = product(contracted), nn = product(bKeep);
    Value a =
        reshape(transposeLetters(xs[0], letters[0], batch + aKeep + contracted),
                with(m, k));
    Value b =
        reshape(transposeLetters(xs[1], letters[1], batch + contracted + bKeep),
                with(k, nn));
    Value prod = builder.createOrFold<MatMulOp>(
        currentLoc, tensorType(with(m, nn), builder.getF32Type()), a, b);
    yLetters = batch + aKeep + bKeep;
    SmallVector<int64_t> shape;
    for (char ch : yLetters)
      shape.push_back(size.at(ch));
    y = reshape(prod, shape);
  }
  define(0, transposeLetters(y, yLetters, out));
}

} // namespace detail
} // namespace otc
