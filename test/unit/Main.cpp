//===- Main.cpp - the unit tests' main: the targets registered ------------===//
//
// The emitter's bodies, the device models and the configurations the tests
// build are those of the registered targets (targets/Targets.h), as in
// every tool.
//
//===----------------------------------------------------------------------===//

#include "targets/Targets.h"

#include "gtest/gtest.h"

int main(int argc, char **argv) {
  otc::registerAllTargets();
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
