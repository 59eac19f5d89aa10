//===- NameRegex.cpp - --freeze and --train patterns ----------------------===//
//
// Built with exceptions (ir/CMakeLists.txt): std::regex reports a bad
// pattern by throwing, which is caught here.
//
//===----------------------------------------------------------------------===//

#include "ir/NameRegex.h"

#include <regex>

using namespace otc;

struct NameRegex::Impl {
  std::regex re;
};

NameRegex::NameRegex(std::string pattern, std::unique_ptr<Impl> impl)
    : pattern_(std::move(pattern)), impl_(std::move(impl)) {}

NameRegex::~NameRegex() = default;

std::unique_ptr<NameRegex> NameRegex::compile(const std::string &pattern,
                                              std::string &error) {
  try {
    auto impl = std::make_unique<Impl>();
    impl->re = std::regex(pattern, std::regex::ECMAScript);
    return std::unique_ptr<NameRegex>(new NameRegex(pattern, std::move(impl)));
  } catch (const std::regex_error &e) {
    error = e.what();
    return nullptr;
  }
}

bool NameRegex::matches(const std::string &name) const {
  try {
    return std::regex_search(name, impl_->re);
  } catch (const std::regex_error &) {
    // The engine's own limits (a pathological pattern on a long name).
    return false;
  }
}
