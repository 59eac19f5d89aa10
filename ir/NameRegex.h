//===- NameRegex.h - --freeze and --train patterns --------------*- C++ -*-===//
//
// The regular expressions --freeze and --train match parameter names with:
// ECMAScript syntax (std::regex), searched anywhere in the name as grep
// does, so that a negative lookahead selects by absence:
// `--freeze='^(?!.*lora_)'` freezes every parameter whose name has no
// `lora_`. Compiled here, in a file built with exceptions, so that a bad
// pattern is an error message and never an exception in LLVM-style code.
//
//===----------------------------------------------------------------------===//

#ifndef OTC_IR_NAMEREGEX_H
#define OTC_IR_NAMEREGEX_H

#include <memory>
#include <string>

namespace otc {

class NameRegex {
public:
  /// Compiles \p pattern; on a bad one returns null and sets \p error to
  /// the library's description.
  static std::unique_ptr<NameRegex> compile(const std::string &pattern,
                                            std::string &error);
  ~NameRegex();
  /// Whether the pattern matches somewhere in \p name.
  bool matches(const std::string &name) const;
  const std::string &pattern() const { return pattern_; }

private:
  struct Impl;
  NameRegex(std::string pattern, std::unique_ptr<Impl> impl);
  std::string pattern_;
  std::unique_ptr<Impl> impl_;
};

} // namespace otc

#endif // OTC_IR_NAMEREGEX_H
