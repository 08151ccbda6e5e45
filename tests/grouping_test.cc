#include "hvdtune/grouping.h"

#include <gtest/gtest.h>

namespace hvdtune {
namespace {

using Ranges = std::vector<std::pair<std::size_t, std::size_t>>;

TEST(SplitIntoGroups, NearlyEqualContiguousGroups) {
  EXPECT_EQ(SplitIntoGroups(10, 3), (Ranges{{0, 4}, {4, 7}, {7, 10}}));
  EXPECT_EQ(SplitIntoGroups(161, 1), (Ranges{{0, 161}}));
  EXPECT_EQ(SplitIntoGroups(3, 5), (Ranges{{0, 1}, {1, 2}, {2, 3}}));
  EXPECT_EQ(SplitIntoGroups(3, 0), (Ranges{{0, 1}, {1, 2}, {2, 3}}));
  EXPECT_TRUE(SplitIntoGroups(0, 4).empty());
}

TEST(SplitIntoGroups, CoversEveryTensorOnce) {
  for (std::size_t n : {1u, 7u, 161u, 1000u}) {
    for (int g : {0, 1, 2, 7, 16, 2000}) {
      const Ranges r = SplitIntoGroups(n, g);
      std::size_t next = 0, smallest = n, largest = 0;
      for (const auto& [b, e] : r) {
        EXPECT_EQ(b, next);
        EXPECT_GT(e, b);
        smallest = std::min(smallest, e - b);
        largest = std::max(largest, e - b);
        next = e;
      }
      EXPECT_EQ(next, n);
      EXPECT_LE(largest - smallest, 1u);
    }
  }
}

}  // namespace
}  // namespace hvdtune
