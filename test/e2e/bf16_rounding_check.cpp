// Checks the BF16 emulation that otc emits into programs with BF16 buffers
// (the prelude is spliced in front of this file by bf16-rounding.test):
// round to nearest, ties to even, on every store; exact widening on loads;
// NaN stays NaN and overflow rounds to infinity. Prints "bf16 rounding ok".
#include <cmath>
#include <cstdio>

/// Rounds `x` through one BF16 store and load.
static float roundTrip(float x) {
  otc_bf16 h;
  h = x;
  return (float)h;
}

int main() {
  struct Case {
    float in, out;
  } cases[] = {
      {1.0f, 1.0f},
      {1.0f + 0x1p-8f, 1.0f},                       // tie: to even (down)
      {1.0f + 0x1p-7f + 0x1p-8f, 1.0f + 0x1p-6f},   // tie: to even (up)
      {1.0f + 0x1p-8f + 0x1p-20f, 1.0f + 0x1p-7f},  // above the tie: up
      {-(1.0f + 0x1p-8f + 0x1p-20f), -(1.0f + 0x1p-7f)},
      {0x1.ffp+127f, INFINITY},                     // past the largest: inf
      {0x1p-130f, 0x1p-130f},                       // subnormal, exact
  };
  int bad = 0;
  for (const Case &c : cases)
    if (roundTrip(c.in) != c.out) {
      std::printf("bf16(%a) = %a, expected %a\n", c.in, roundTrip(c.in), c.out);
      ++bad;
    }
  if (!std::isnan(roundTrip(NAN))) {
    std::printf("NaN did not stay NaN\n");
    ++bad;
  }
  // Arithmetic on loaded values happens in float, rounded once on store.
  otc_bf16 a(1.0f), b(0x1p-8f), c;
  c = a + b;
  if ((float)c != 1.0f) {
    std::printf("1 + 2^-8 stored as %a\n", (float)c);
    ++bad;
  }
  if (!bad)
    std::printf("bf16 rounding ok\n");
  return bad != 0;
}
