//===- Fp8RoundingTest.cpp - the interpreter's own FP8 rounding -----------===//
//
// interp::roundToFp8, the oracle of an FP8 GEMM's operands, on values
// derived by hand from the formats (E4M3: 3 mantissa bits, normals from
// 2^-6, subnormals in steps of 2^-9, largest 448; E5M2: 2 bits, 2^-14,
// 2^-16, 57344).
//
//===----------------------------------------------------------------------===//

#include "interp/Interpreter.h"

#include <gtest/gtest.h>

#include <cmath>

using otc::interp::roundToFp8;

namespace {

TEST(InterpFp8, E4M3) {
  EXPECT_EQ(roundToFp8(1.0625, true), 1.0);   // halfway: even mantissa 000
  EXPECT_EQ(roundToFp8(1.1875, true), 1.25);  // halfway: even mantissa 010
  EXPECT_EQ(roundToFp8(0.672, true), 0.6875); // spacing 1/16 in [0.5, 1)
  EXPECT_EQ(roundToFp8(-3.3, true), -3.25);
  EXPECT_EQ(roundToFp8(449.0, true), 448.0);
  EXPECT_EQ(roundToFp8(464.0, true), 448.0);
  EXPECT_EQ(roundToFp8(INFINITY, true), 448.0);
  EXPECT_EQ(roundToFp8(-1e9, true), -448.0);
  const double s = std::ldexp(1.0, -9);
  EXPECT_EQ(roundToFp8(s, true), s);
  EXPECT_EQ(roundToFp8(0.5 * s, true), 0.0);
  EXPECT_EQ(roundToFp8(1.5 * s, true), 2 * s);
  EXPECT_EQ(roundToFp8(2.5 * s, true), 2 * s);
  EXPECT_EQ(roundToFp8(7.5 * s, true), 8 * s);
  EXPECT_TRUE(std::isnan(roundToFp8(NAN, true)));
}

TEST(InterpFp8, E5M2) {
  EXPECT_EQ(roundToFp8(1.125, false), 1.0);
  EXPECT_EQ(roundToFp8(1.375, false), 1.5);
  EXPECT_EQ(roundToFp8(57344.0, false), 57344.0);
  EXPECT_EQ(roundToFp8(61440.0, false), 57344.0);
  const double s = std::ldexp(1.0, -16);
  EXPECT_EQ(roundToFp8(s, false), s);
  EXPECT_EQ(roundToFp8(0.5 * s, false), 0.0);
  EXPECT_EQ(roundToFp8(1.5 * s, false), 2 * s);
}

} // namespace
