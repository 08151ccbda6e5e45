// The allreduce algorithm a job starts with when no variable sets it follows
// the node layout (docs/configuration.md, "The default allreduce
// algorithm"): hierarchical where some node runs more than one rank and the
// job spans several nodes (on Gloo, whose hierarchical allreduce reduces
// through the node's shared memory, on one node too), native elsewhere. A
// variable that sets the algorithm always wins. Runs under 1 to 4 ranks on
// each engine.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <tuple>
#include <vector>

#include "mpi_test_util.h"
#include "test_env.h"

namespace hvdtune {
namespace {

using namespace testing_util;

constexpr int kAlgorithm = static_cast<int>(KnobId::kAllreduceAlgorithm);

// What the layout of `size` ranks in nodes of `rpn` (the last node the
// rest) calls for on `engine`.
std::string Expected(int size, int rpn, EngineKind engine) {
  const bool shares_node = std::min(size, rpn) > 1;
  const bool spans_nodes = size > rpn;
  return shares_node && (spans_nodes || engine == EngineKind::kGloo)
             ? "hierarchical"
             : "native";
}

class DefaultAlgorithmTest : public ::testing::TestWithParam<int> {};

TEST_P(DefaultAlgorithmTest, FollowsTheNodeLayoutAndStaysTunable) {
  const int rpn = GetParam();
  Runtime rt(RuntimeOptions{
      MapEnv({{"HVDTUNE_RANKS_PER_NODE", std::to_string(rpn)}})});
  const std::string expected = Expected(rt.size(), rpn, TestEngine());
  EXPECT_EQ(rt.knobs().allreduce_algorithm_name(), expected)
      << rt.size() << " ranks, " << rpn << " per node";
  // A default, not a setting: the tuner may still move it.
  EXPECT_FALSE(rt.pinned_knobs()[kAlgorithm]);
  // Every layout's default gives every rank the exact sum, fused and alone.
  std::vector<std::vector<float>> outs;
  RunSet(rt, "default.algorithm", 12, Iota(12), &outs);
}

INSTANTIATE_TEST_SUITE_P(RanksPerNode, DefaultAlgorithmTest,
                         ::testing::Values(1, 2, 3),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return "rpn" + std::to_string(info.param);
                         });

TEST(DefaultAlgorithm, AVariableAlwaysWins) {
  for (const auto& [var, value, algorithm] :
       std::vector<std::tuple<std::string, std::string, std::string>>{
           {"HVDTUNE_ALLREDUCE_ALGORITHM", "native", "native"},
           {"HVDTUNE_ALLREDUCE_ALGORITHM", "ring", "ring"},
           {"HOROVOD_HIERARCHICAL_ALLREDUCE", "0", "native"},
           {"HOROVOD_HIERARCHICAL_ALLREDUCE", "1", "hierarchical"}}) {
    Runtime rt(RuntimeOptions{
        MapEnv({{"HVDTUNE_RANKS_PER_NODE", "2"}, {var, value}})});
    EXPECT_EQ(rt.knobs().allreduce_algorithm_name(), algorithm)
        << var << "=" << value;
    EXPECT_TRUE(rt.pinned_knobs()[kAlgorithm]) << var << "=" << value;
  }
}

}  // namespace
}  // namespace hvdtune
