#include "core/reduce.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "hvdtune/half.h"

namespace hvdtune {
namespace {

TEST(Half, ExactValuesRoundTrip) {
  for (float f : {0.0f, -0.0f, 1.0f, -2.5f, 65504.0f, 0.000061035156f,
                  5.9604645e-08f, 1000.5f}) {
    EXPECT_EQ(HalfToFloat(FloatToHalf(f)), f) << f;
  }
  EXPECT_EQ(FloatToHalf(1.0f), 0x3C00);
  EXPECT_EQ(FloatToHalf(-2.0f), 0xC000);
  EXPECT_TRUE(std::isinf(HalfToFloat(FloatToHalf(70000.0f))));
  EXPECT_TRUE(std::isnan(HalfToFloat(FloatToHalf(std::nanf("")))));
}

TEST(Half, AllHalfBitPatternsRoundTripThroughFloat) {
  for (std::uint32_t h = 0; h < 0x10000; ++h) {
    const float f = HalfToFloat(static_cast<std::uint16_t>(h));
    if (std::isnan(f)) continue;
    EXPECT_EQ(FloatToHalf(f), h) << std::hex << h;
  }
}

TEST(Half, RoundsToNearestEven) {
  // 1 + 2^-11 lies halfway between 1 and the next half (1 + 2^-10).
  EXPECT_EQ(FloatToHalf(1.0f + std::ldexp(1.0f, -11)), 0x3C00);
  EXPECT_EQ(FloatToHalf(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3C02);
  EXPECT_EQ(FloatToHalf(1.0f + std::ldexp(1.0f, -11) + std::ldexp(1.0f, -20)),
            0x3C01);
}

TEST(BFloat16, RoundTripAndRounding) {
  EXPECT_EQ(BFloat16ToFloat(FloatToBFloat16(1.5f)), 1.5f);
  EXPECT_EQ(BFloat16ToFloat(FloatToBFloat16(-3.0e38f)),
            BFloat16ToFloat(FloatToBFloat16(-3.0e38f)));
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties to even (1).
  EXPECT_EQ(FloatToBFloat16(1.0f + std::ldexp(1.0f, -8)), 0x3F80);
  EXPECT_TRUE(std::isnan(BFloat16ToFloat(FloatToBFloat16(std::nanf("")))));
}

TEST(Reduce, HalfSumIsArithmeticNotBitwise) {
  std::vector<std::uint16_t> a = {FloatToHalf(1.5f), FloatToHalf(-2.0f)};
  const std::vector<std::uint16_t> b = {FloatToHalf(0.25f), FloatToHalf(3.0f)};
  ReduceInto(a.data(), b.data(), 2, DataType::kFloat16, ReduceOp::kSum);
  EXPECT_EQ(HalfToFloat(a[0]), 1.75f);
  EXPECT_EQ(HalfToFloat(a[1]), 1.0f);
  ReduceInto(a.data(), b.data(), 2, DataType::kFloat16, ReduceOp::kMin);
  EXPECT_EQ(HalfToFloat(a[0]), 0.25f);
  EXPECT_EQ(HalfToFloat(a[1]), 1.0f);
}

TEST(Reduce, HalfSumMatchesElementwiseFloatRounding) {
  // Long enough for the vectorised path and its scalar tail; values over the
  // whole half range, subnormals and infinities included.
  std::vector<std::uint16_t> a(1003), b(1003);
  std::uint32_t x = 12345;
  for (std::size_t i = 0; i < a.size(); ++i) {
    x = x * 1664525u + 1013904223u;
    a[i] = static_cast<std::uint16_t>(x >> 16);
    b[i] = static_cast<std::uint16_t>(x);
    if (std::isnan(HalfToFloat(a[i]))) a[i] = 0x7C00;  // inf instead
    if (std::isnan(HalfToFloat(b[i]))) b[i] = 0x0001;  // a subnormal
  }
  std::vector<std::uint16_t> want(a.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    want[i] = FloatToHalf(HalfToFloat(a[i]) + HalfToFloat(b[i]));
  }
  ReduceInto(a.data(), b.data(), static_cast<std::int64_t>(a.size()),
             DataType::kFloat16, ReduceOp::kSum);
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(HalfToFloat(want[i]))) {
      EXPECT_TRUE(std::isnan(HalfToFloat(a[i]))) << i;
    } else {
      EXPECT_EQ(a[i], want[i]) << i;
    }
  }
}

TEST(Reduce, IntegerOpsAndAverage) {
  std::vector<std::int32_t> a = {5, -7, 100};
  const std::vector<std::int32_t> b = {-3, 2, 1};
  ReduceInto(a.data(), b.data(), 3, DataType::kInt32, ReduceOp::kMax);
  EXPECT_EQ(a, (std::vector<std::int32_t>{5, 2, 100}));
  ReduceInto(a.data(), b.data(), 3, DataType::kInt32, ReduceOp::kSum);
  EXPECT_EQ(a, (std::vector<std::int32_t>{2, 4, 101}));
  DivideBy(a.data(), 3, DataType::kInt32, 3);
  EXPECT_EQ(a, (std::vector<std::int32_t>{0, 1, 33}));
  std::vector<std::uint16_t> h = {FloatToBFloat16(6.0f)};
  DivideBy(h.data(), 1, DataType::kBFloat16, 4);
  EXPECT_EQ(BFloat16ToFloat(h[0]), 1.5f);
}

}  // namespace
}  // namespace hvdtune
