#include "hvdtune/fusion.h"

#include <gtest/gtest.h>

namespace hvdtune::internal {
namespace {

FusionItem Ar(std::int64_t bytes, DataType dt = DataType::kFloat32,
              ReduceOp op = ReduceOp::kSum) {
  return {CollectiveType::kAllreduce, dt, op, bytes, false};
}

std::vector<std::vector<std::size_t>> Members(
    const std::vector<FusionGroup>& groups) {
  std::vector<std::vector<std::size_t>> out;
  for (const auto& g : groups) out.push_back(g.members);
  return out;
}

TEST(FusionPlanner, PacksUpToThreshold) {
  const auto g = PlanFusion({Ar(40), Ar(40), Ar(40), Ar(10)}, 100);
  EXPECT_EQ(Members(g),
            (std::vector<std::vector<std::size_t>>{{0, 1}, {2, 3}}));
  EXPECT_EQ(g[0].bytes, 80);
  EXPECT_EQ(g[1].bytes, 50);
}

TEST(FusionPlanner, ThresholdZeroMeansNoFusion) {
  const auto g = PlanFusion({Ar(4), Ar(4), Ar(4)}, 0);
  EXPECT_EQ(Members(g), (std::vector<std::vector<std::size_t>>{{0}, {1}, {2}}));
}

TEST(FusionPlanner, LargeTensorGoesAlone) {
  const auto g = PlanFusion({Ar(10), Ar(500), Ar(10)}, 100);
  EXPECT_EQ(Members(g), (std::vector<std::vector<std::size_t>>{{0, 2}, {1}}));
}

TEST(FusionPlanner, DtypesAndOpsFuseSeparatelyWithoutBreakingEachOther) {
  const auto g =
      PlanFusion({Ar(10, DataType::kFloat32), Ar(10, DataType::kFloat16),
                  Ar(10, DataType::kFloat32), Ar(10, DataType::kFloat16),
                  Ar(10, DataType::kFloat32, ReduceOp::kMax)},
                 1000);
  EXPECT_EQ(Members(g),
            (std::vector<std::vector<std::size_t>>{{0, 2}, {1, 3}, {4}}));
}

TEST(FusionPlanner, WithoutLookAheadADtypeChangeClosesTheBuffer) {
  const std::vector<FusionItem> items = {
      Ar(10, DataType::kFloat32), Ar(10, DataType::kFloat16),
      Ar(10, DataType::kFloat32), Ar(10, DataType::kFloat16),
      Ar(10, DataType::kFloat16)};
  EXPECT_EQ(Members(PlanFusion(items, 1000, /*look_ahead=*/false)),
            (std::vector<std::vector<std::size_t>>{{0}, {1}, {2}, {3, 4}}));
  EXPECT_EQ(Members(PlanFusion(items, 1000, /*look_ahead=*/true)),
            (std::vector<std::vector<std::size_t>>{{0, 2}, {1, 3, 4}}));
}

TEST(FusionPlanner, OtherCollectivesAndErrorsAreAlone) {
  std::vector<FusionItem> items = {Ar(10), Ar(10), Ar(10), Ar(10)};
  items[1].type = CollectiveType::kBroadcast;
  items[2].error = true;
  const auto g = PlanFusion(items, 1000);
  EXPECT_EQ(Members(g),
            (std::vector<std::vector<std::size_t>>{{0, 3}, {1}, {2}}));
}

TEST(FusionPlanner, ZeroByteTensorsFuse) {
  const auto g = PlanFusion({Ar(0), Ar(8), Ar(0)}, 16);
  EXPECT_EQ(Members(g), (std::vector<std::vector<std::size_t>>{{0, 1, 2}}));
}

TEST(FusionPlanner, EveryItemPlannedExactlyOnce) {
  std::vector<FusionItem> items;
  for (int i = 0; i < 1000; ++i) {
    items.push_back(Ar(4096 + (i % 7) * 100,
                       i % 3 ? DataType::kFloat32 : DataType::kBFloat16));
  }
  const auto g = PlanFusion(items, 64 * 1024);
  std::vector<int> seen(items.size(), 0);
  for (const auto& group : g) {
    std::int64_t bytes = 0;
    for (std::size_t m : group.members) {
      ++seen[m];
      bytes += items[m].bytes;
      EXPECT_EQ(items[m].dtype, items[group.members[0]].dtype);
    }
    EXPECT_EQ(bytes, group.bytes);
    EXPECT_LE(group.bytes, 64 * 1024);
  }
  for (int s : seen) EXPECT_EQ(s, 1);
}

}  // namespace
}  // namespace hvdtune::internal
