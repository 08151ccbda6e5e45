#include "hvdtune/tuner/search_space.h"

#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>

namespace hvdtune::tuner {
namespace {

SearchSpace KnobLikeSpace() {
  return SearchSpace({
      Dimension::Continuous("fusion_threshold_bytes", 1 << 20, 256 << 20, true),
      Dimension::Continuous("cycle_time_ms", 0.1, 50, true),
      Dimension::Categorical("algorithm", 3),
      Dimension::Categorical("cache", 2).Pinned(1),
      Dimension::Integer("num_groups", 1, 16),
  });
}

TEST(SearchSpaceTest, LayoutPutsContinuousFirstAndSkipsPinned) {
  const SearchSpace space = KnobLikeSpace();
  EXPECT_EQ(space.size(), 5u);
  EXPECT_EQ(space.num_continuous(), 3);
  EXPECT_EQ(space.num_categorical(), 1);
  EXPECT_EQ(space.num_free(), 4);
  EXPECT_EQ(space.CategoryCounts(), std::vector<int>{3});
  EXPECT_EQ(space.IndexOf("num_groups"), 4u);
  EXPECT_THROW(space.IndexOf("nope"), std::out_of_range);
}

TEST(SearchSpaceTest, LogAxisMapsGeometricMidpointToHalf) {
  const SearchSpace space = KnobLikeSpace();
  const Config c = {std::sqrt(double(1 << 20) * double(256 << 20)),
                    std::sqrt(0.1 * 50), 2, 1, 1};
  const Eigen::VectorXd u = space.ToUnit(c);
  EXPECT_NEAR(u[0], 0.5, 1e-12);
  EXPECT_NEAR(u[1], 0.5, 1e-12);
  EXPECT_NEAR(u[2], 0.0, 1e-12);  // num_groups 1 -> 0
  EXPECT_EQ(u[3], 2.0);           // categorical index
}

TEST(SearchSpaceTest, RoundTripAndValidity) {
  const SearchSpace space = KnobLikeSpace();
  Eigen::VectorXd u(4);
  u << 0.3, 0.7, 0.41, 1.6;
  const Config c = space.FromUnit(u);
  EXPECT_TRUE(space.IsValid(c));
  EXPECT_EQ(c[2], 2.0);  // 1.6 rounds to category 2
  EXPECT_EQ(c[3], 1.0);  // pinned
  EXPECT_EQ(c[4], std::round(c[4]));
  const Config again = space.FromUnit(space.ToUnit(c));
  for (std::size_t i = 0; i < c.size(); ++i)
    EXPECT_NEAR(again[i], c[i], 1e-9 * std::abs(c[i]));
}

TEST(SearchSpaceTest, OutOfRangeUnitIsClampedAndPinnedWins) {
  const SearchSpace space = KnobLikeSpace();
  Eigen::VectorXd u(4);
  u << -3, 7, 2, 99;
  const Config c = space.FromUnit(u);
  EXPECT_EQ(c[0], double(1 << 20));
  EXPECT_NEAR(c[1], 50, 1e-9);
  EXPECT_EQ(c[2], 2);
  EXPECT_EQ(c[4], 16);
  const Config fixed = space.MakeValid({1e12, -1, 7, 0, 3.4});
  EXPECT_EQ(fixed[3], 1.0);  // pinned value replaces the given one
  EXPECT_EQ(fixed[4], 3.0);
  EXPECT_TRUE(space.IsValid(fixed));
  EXPECT_FALSE(space.IsValid({1e12, -1, 7, 0, 3.4}));
}

TEST(SearchSpaceTest, RejectsBadDimensions) {
  EXPECT_THROW(SearchSpace({Dimension::Continuous("a", 0, 1, true)}),
               std::invalid_argument);
  EXPECT_THROW(SearchSpace({Dimension::Continuous("a", 2, 1)}),
               std::invalid_argument);
  EXPECT_THROW(SearchSpace({Dimension::Categorical("a", 0)}),
               std::invalid_argument);
  EXPECT_THROW(SearchSpace({Dimension::Continuous("a", 0, 1),
                            Dimension::Continuous("a", 0, 1)}),
               std::invalid_argument);
  EXPECT_THROW(SearchSpace({Dimension::Categorical("a", 2).Pinned(5)}),
               std::invalid_argument);
  EXPECT_THROW(SearchSpace({Dimension::Integer("a", 0.2, 0.8)}),
               std::invalid_argument);
  const SearchSpace space = KnobLikeSpace();
  EXPECT_THROW(space.MakeValid({1, 2}), std::invalid_argument);
  EXPECT_THROW(space.MakeValid({NAN, 1, 0, 0, 1}), std::invalid_argument);
}

}  // namespace
}  // namespace hvdtune::tuner
