// Grouped allreduce, local gradient aggregation and mixed-precision fusion
// under several ranks.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "hvdtune/grouping.h"
#include "mpi_test_util.h"
#include "test_env.h"

namespace hvdtune {
namespace {

using namespace testing_util;

struct GroupData {
  std::vector<std::vector<std::uint8_t>> in, out;
  std::vector<AllreduceTensor> tensors;
};

// Members of mixed dtypes and sizes; member i uses rank r's input offset by i.
GroupData MakeGroup(const std::string& prefix, int n, int rank,
                    std::int64_t bad_member = -1) {
  GroupData g;
  g.in.resize(static_cast<std::size_t>(n));
  g.out.resize(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) {
    const DataType dt = i % 3 == 0 ? DataType::kFloat16 : DataType::kFloat32;
    std::int64_t count = 17 * (i + 1);
    if (i == bad_member && rank == 1) ++count;  // disagree on rank 1
    const std::size_t bytes =
        static_cast<std::size_t>(count) * DataTypeSize(dt);
    g.in[static_cast<std::size_t>(i)].resize(bytes);
    g.out[static_cast<std::size_t>(i)].assign(bytes, 0);
    FillInput(dt, g.in[static_cast<std::size_t>(i)].data(), count, rank + i);
    g.tensors.push_back({prefix + "." + std::to_string(i),
                         g.in[static_cast<std::size_t>(i)].data(),
                         g.out[static_cast<std::size_t>(i)].data(),
                         {count},
                         dt});
  }
  return g;
}

void ExpectGroupCorrect(const GroupData& g, int size) {
  for (std::size_t i = 0; i < g.tensors.size(); ++i) {
    const AllreduceTensor& t = g.tensors[i];
    for (std::int64_t k = 0; k < t.shape[0]; ++k) {
      double want = 0;
      for (int r = 0; r < size; ++r) {
        want += InputValue(t.dtype, r + static_cast<int>(i), k);
      }
      ASSERT_EQ(Load(t.dtype, g.out[i].data(), k), want)
          << t.name << "[" << k << "]";
    }
  }
}

TEST(GroupedAllreduce, CompletesTogetherAndIsFused) {
  Runtime rt(RuntimeOptions{MapEnv({})});
  for (int step = 0; step < 3; ++step) {  // later steps go through the cache
    GroupData g = MakeGroup("grp", 12, rt.rank());
    const auto calls_before = rt.stats().collective_calls;
    Handle h = rt.GroupedAllreduce("grp", g.tensors, ReduceOp::kSum);
    const Status s = h.Wait();
    ASSERT_TRUE(s.ok()) << s.ToString();
    ExpectGroupCorrect(g, rt.size());
    // Two dtypes: the 12 members travel in exactly two fused calls.
    EXPECT_EQ(rt.stats().collective_calls - calls_before, 2u);
  }
}

TEST(GroupedAllreduce, MembersHeldUntilEveryRankHasTheWholeGroup) {
  Runtime rt(RuntimeOptions{MapEnv({})});
  GroupData g = MakeGroup("late", 6, rt.rank());
  // The last rank enqueues its group 50 ms late: nothing may complete
  // before that on any rank, and everything completes together.
  if (rt.rank() == rt.size() - 1) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  Handle h = rt.GroupedAllreduce("late", g.tensors, ReduceOp::kSum);
  ASSERT_TRUE(h.Wait().ok());
  ExpectGroupCorrect(g, rt.size());
}

TEST(GroupedAllreduce, OneBadMemberFailsTheWholeGroupOnEveryRank) {
  Runtime rt(RuntimeOptions{MapEnv({})});
  if (rt.size() == 1) GTEST_SKIP() << "a mismatch needs two ranks";
  GroupData g = MakeGroup("atomic", 5, rt.rank(), /*bad_member=*/3);
  std::vector<float> x(4, 1.0f), y(4);
  const std::int64_t shape[] = {4};
  Handle other = rt.Allreduce("outside.group", x.data(), y.data(), shape,
                              DataType::kFloat32, ReduceOp::kSum);
  const Status s =
      rt.GroupedAllreduce("atomic", g.tensors, ReduceOp::kSum).Wait();
  EXPECT_EQ(s.code(), StatusCode::kMismatch) << s.ToString();
  EXPECT_NE(s.message().find("grouped allreduce 'atomic' failed"),
            std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find("atomic.3"), std::string::npos) << s.message();
  // No member's output was written.
  for (const auto& out : g.out) {
    EXPECT_EQ(out, std::vector<std::uint8_t>(out.size(), 0));
  }
  ASSERT_TRUE(other.Wait().ok());
  EXPECT_EQ(y[0], static_cast<float>(rt.size()));
  // The same group, now consistent, works.
  GroupData ok = MakeGroup("atomic", 5, rt.rank());
  ASSERT_TRUE(
      rt.GroupedAllreduce("atomic", ok.tensors, ReduceOp::kSum).Wait().ok());
  ExpectGroupCorrect(ok, rt.size());
}

TEST(GroupedAllreduce, GroupedOnOneRankUngroupedOnAnotherFails) {
  Runtime rt(RuntimeOptions{MapEnv({})});
  if (rt.size() == 1) GTEST_SKIP() << "a mismatch needs two ranks";
  std::vector<float> a(4, 1.0f), b(4), c(4, 1.0f), d(4);
  const std::vector<std::int64_t> shape = {4};
  Status s;
  if (rt.rank() == 0) {
    const AllreduceTensor t[] = {
        {"mixed.a", a.data(), b.data(), shape, DataType::kFloat32},
        {"mixed.b", c.data(), d.data(), shape, DataType::kFloat32}};
    s = rt.GroupedAllreduce("mixed", t, ReduceOp::kSum).Wait();
  } else {
    Handle h1 = rt.Allreduce("mixed.a", a.data(), b.data(), shape,
                             DataType::kFloat32, ReduceOp::kSum);
    Handle h2 = rt.Allreduce("mixed.b", c.data(), d.data(), shape,
                             DataType::kFloat32, ReduceOp::kSum);
    s = h1.Wait();
    if (s.ok()) s = h2.Wait();
  }
  EXPECT_EQ(s.code(), StatusCode::kMismatch) << s.ToString();
  EXPECT_NE(s.message().find("grouping"), std::string::npos) << s.message();
}

TEST(GroupedAllreduce, EmptyMembersFuseWithOthers) {
  // Zero-element members (null buffers allowed) among real ones, with chunk
  // edges inside and across tensors.
  Runtime rt(
      RuntimeOptions{MapEnv({{"HVDTUNE_PIPELINE_CHUNK_BYTES", "4100"}})});
  std::vector<std::vector<float>> in(6), out(6);
  std::vector<AllreduceTensor> tensors;
  for (int i = 0; i < 6; ++i) {
    const std::int64_t n = i % 2 == 0 ? 0 : 1500 * i;
    in[i].assign(static_cast<std::size_t>(n), static_cast<float>(i + 1));
    out[i].assign(static_cast<std::size_t>(n), 0.0f);
    tensors.push_back({"empty.mix." + std::to_string(i),
                       n ? in[i].data() : nullptr,
                       n ? out[i].data() : nullptr,
                       {n},
                       DataType::kFloat32});
  }
  ASSERT_TRUE(
      rt.GroupedAllreduce("empty.mix", tensors, ReduceOp::kSum).Wait().ok());
  for (int i = 1; i < 6; i += 2) {
    for (float v : out[i]) {
      ASSERT_EQ(v, static_cast<float>((i + 1) * rt.size())) << i;
    }
  }
}

TEST(GroupedAllreduce, BadArguments) {
  Runtime& rt = SharedRuntime();
  std::vector<float> a(4);
  const std::vector<std::int64_t> shape = {4};
  const AllreduceTensor twice[] = {
      {"same", a.data(), a.data(), shape, DataType::kFloat32},
      {"same", a.data(), a.data(), shape, DataType::kFloat32}};
  EXPECT_EQ(rt.GroupedAllreduce("g", twice, ReduceOp::kSum).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(rt.GroupedAllreduce("g", {}, ReduceOp::kSum).status().code(),
            StatusCode::kInvalidArgument);
}

TEST(GroupedAllreduce, NumGroupsSplitOfAGradientList) {
  Runtime rt(RuntimeOptions{MapEnv({})});
  GroupData all = MakeGroup("model", 20, rt.rank());
  std::vector<Handle> handles;
  const auto ranges = SplitIntoGroups(all.tensors.size(), 3);
  ASSERT_EQ(ranges.size(), 3u);
  for (std::size_t g = 0; g < ranges.size(); ++g) {
    std::span<const AllreduceTensor> part(all.tensors.data() + ranges[g].first,
                                          ranges[g].second - ranges[g].first);
    handles.push_back(rt.GroupedAllreduce("model.group" + std::to_string(g),
                                          part, ReduceOp::kSum));
  }
  for (Handle& h : handles) ASSERT_TRUE(h.Wait().ok());
  ExpectGroupCorrect(all, rt.size());
}

TEST(LocalAggregation, EqualsTheAverageOfTheSummedPasses) {
  Runtime rt(RuntimeOptions{MapEnv({})});
  constexpr int kPasses = 4;
  constexpr std::int64_t kCount = 1000;
  LocalGradientAggregator agg(rt, kPasses);
  std::vector<float> grad(kCount), out(kCount, -1.0f);
  const std::int64_t shape[] = {kCount};
  for (int step = 0; step < 2; ++step) {
    for (int p = 0; p < kPasses; ++p) {
      FillInput(DataType::kFloat32, grad.data(), kCount, rt.rank() * 10 + p);
      Handle h =
          agg.Add("agg.w", grad.data(), out.data(), shape, DataType::kFloat32);
      if (p + 1 < kPasses) {
        EXPECT_TRUE(h.Poll());
        EXPECT_EQ(agg.pending_passes("agg.w"), p + 1);
        EXPECT_EQ(out[0], step == 0 ? -1.0f : out[0]);
      } else {
        ASSERT_TRUE(h.Wait().ok());
        EXPECT_EQ(agg.pending_passes("agg.w"), 0);
      }
    }
    for (std::int64_t k = 0; k < kCount; ++k) {
      double sum = 0;
      for (int r = 0; r < rt.size(); ++r) {
        for (int p = 0; p < kPasses; ++p) {
          sum += InputValue(DataType::kFloat32, r * 10 + p, k);
        }
      }
      const double want = sum / (kPasses * rt.size());
      ASSERT_NEAR(out[static_cast<std::size_t>(k)], want,
                  1e-6 * (1 + std::fabs(want)))
          << k;
    }
  }
  EXPECT_THROW(LocalGradientAggregator(rt, 0), std::invalid_argument);
}

TEST(MixedPrecisionFusion, LookAheadFusesEachDtypeInOneBuffer) {
  // 40 tensors alternating fp16 / fp32, ready in the same cycle.
  for (const char* look_ahead : {"1", "0"}) {
    Runtime rt(
        RuntimeOptions{MapEnv({{"HVDTUNE_FUSION_LOOKAHEAD", look_ahead}})});
    GroupData g = MakeGroup(std::string("mp") + look_ahead, 40, rt.rank());
    // Every tensor alternates dtype: i % 3 == 0 -> fp16, else fp32.
    const auto before = rt.stats().collective_calls;
    Handle h = rt.GroupedAllreduce(std::string("mp") + look_ahead, g.tensors,
                                   ReduceOp::kSum);
    ASSERT_TRUE(h.Wait().ok());
    ExpectGroupCorrect(g, rt.size());
    const auto calls = rt.stats().collective_calls - before;
    if (look_ahead[0] == '1') {
      EXPECT_EQ(calls, 2u);
    } else {
      EXPECT_GT(calls, 20u);
    }
  }
}

}  // namespace
}  // namespace hvdtune
