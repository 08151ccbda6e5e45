// Rank 0's coordination decisions, without MPI: when a tensor is ready,
// in which order, which disagreements fail it, grouped release, stalls.
#include "core/coordinator.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace hvdtune::internal {
namespace {

Request Req(const std::string& name, int rank,
            std::vector<std::int64_t> shape = {4}) {
  Request r;
  r.name = name;
  r.rank = rank;
  r.shape = std::move(shape);
  return r;
}

std::vector<std::string> Names(const std::vector<Response>& v) {
  std::vector<std::string> out;
  for (const Response& r : v) out.push_back(r.name);
  return out;
}

TEST(Coordinator, AnswersOnceEveryRankAskedInFirstRequestOrder) {
  Coordinator c(3);
  EXPECT_TRUE(c.Add({Req("b", 0), Req("a", 0)}, 0).empty());
  EXPECT_TRUE(c.Add({Req("a", 1), Req("b", 2)}, 0).empty());
  EXPECT_EQ(c.waiting(), 2u);
  const auto out = c.Add({Req("a", 2), Req("b", 1)}, 0);
  EXPECT_EQ(Names(out), (std::vector<std::string>{"b", "a"}));
  for (const Response& r : out) EXPECT_EQ(r.kind, Response::Kind::kRun);
  EXPECT_EQ(c.waiting(), 0u);
}

TEST(Coordinator, DisagreementsFailTheTensorNamingBothSides) {
  struct Case {
    const char* what;
    void (*change)(Request&);
  };
  const Case cases[] = {
      {"shape", [](Request& r) { r.shape = {5}; }},
      {"dtype", [](Request& r) { r.dtype = DataType::kFloat64; }},
      {"reduce op", [](Request& r) { r.op = ReduceOp::kMax; }},
      {"collective", [](Request& r) { r.type = CollectiveType::kBroadcast; }},
      {"buffer location", [](Request& r) { r.device = true; }},
      {"grouping",
       [](Request& r) {
         r.group = "g";
         r.group_size = 2;
       }},
  };
  for (const Case& k : cases) {
    Coordinator c(2);
    Request other = Req("t", 1);
    k.change(other);
    c.Add({Req("t", 0)}, 0);
    const auto out = c.Add({other}, 0);
    ASSERT_EQ(out.size(), 1u) << k.what;
    EXPECT_EQ(out[0].kind, Response::Kind::kError) << k.what;
    EXPECT_NE(out[0].error.find(std::string("mismatched ") + k.what),
              std::string::npos)
        << out[0].error;
    EXPECT_NE(out[0].error.find("rank 1"), std::string::npos) << out[0].error;
  }
}

TEST(Coordinator, AllgatherAgreesOnAllButTheFirstDimension) {
  Coordinator c(2);
  Request a = Req("g", 0, {3, 2});
  Request b = Req("g", 1, {5, 2});
  a.type = b.type = CollectiveType::kAllgather;
  c.Add({a}, 0);
  const auto out = c.Add({b}, 0);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].kind, Response::Kind::kRun);
  EXPECT_EQ(out[0].first_dims, (std::vector<std::int64_t>{3, 5}));
  Coordinator bad(2);
  b.shape = {5, 3};
  bad.Add({a}, 0);
  EXPECT_EQ(bad.Add({b}, 0)[0].kind, Response::Kind::kError);
}

TEST(Coordinator, AllgatherRowsThatSumPastInt64Fail) {
  // Empty rows pass every rank's own size check, whatever the first
  // dimension; the total row count must still be representable.
  Coordinator c(2);
  Request a = Req("g", 0, {std::int64_t{1} << 62, 0});
  Request b = Req("g", 1, {std::int64_t{1} << 62, 0});
  a.type = b.type = CollectiveType::kAllgather;
  c.Add({a}, 0);
  const auto out = c.Add({b}, 0);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].kind, Response::Kind::kError);
  EXPECT_NE(out[0].error.find("first dimensions add up"), std::string::npos)
      << out[0].error;
}

TEST(Request, EmptyShapeWithHugeDimensionsHasNoElements) {
  Request r;
  r.shape = {std::int64_t{1} << 62, 3, 0};
  EXPECT_EQ(r.NumElements(), 0);
}

TEST(Coordinator, BroadcastRootOutsideTheWorldFails) {
  Coordinator c(2);
  Request a = Req("x", 0), b = Req("x", 1);
  a.type = b.type = CollectiveType::kBroadcast;
  a.root = b.root = 2;
  c.Add({a}, 0);
  const auto out = c.Add({b}, 0);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].kind, Response::Kind::kError);
  EXPECT_NE(out[0].error.find("root 2"), std::string::npos);
}

TEST(Coordinator, StallWarnsNamingMissingRanksThenFailsAfterShutdownTime) {
  Coordinator c(4, StallSettings{1.0, 3.0});
  c.Add({Req("late", 0), Req("late", 2)}, 10.0);
  Request waited = Req("late", 3);
  waited.waited_seconds = 0.5;  // rank 3 has waited since 9.5
  c.Add({waited}, 10.0);
  std::vector<StallEvent> stalls;
  std::vector<Response> failed;
  c.CheckStalls(10.4, &stalls, &failed);
  EXPECT_TRUE(stalls.empty());
  c.CheckStalls(10.6, &stalls, &failed);  // 1.1 s since 9.5
  ASSERT_EQ(stalls.size(), 1u);
  EXPECT_EQ(stalls[0].tensor, "late");
  EXPECT_EQ(stalls[0].missing_ranks, std::vector<int>{1});
  EXPECT_FALSE(stalls[0].shutdown);
  EXPECT_TRUE(failed.empty());
  c.CheckStalls(10.8, &stalls, &failed);  // warned 0.2 s ago: quiet
  EXPECT_EQ(stalls.size(), 1u);
  c.CheckStalls(12.6, &stalls, &failed);  // 3.1 s: shut down
  ASSERT_EQ(failed.size(), 1u);
  EXPECT_TRUE(failed[0].stalled);
  EXPECT_EQ(failed[0].kind, Response::Kind::kError);
  EXPECT_NE(failed[0].error.find("rank 1 did not submit it"), std::string::npos)
      << failed[0].error;
  EXPECT_TRUE(stalls.back().shutdown);
  EXPECT_EQ(c.waiting(), 0u);
  // A late submission afterwards starts a new wait instead of running.
  EXPECT_TRUE(c.Add({Req("late", 1)}, 13.0).empty());
}

TEST(Coordinator, RanksOutOfStepByOneCollectiveMeetAgainAfterAStall) {
  // Rank 1 submitted a collective the others never will (they moved on to
  // "next" after an error of their own); each side waits on the other.
  Coordinator c(3, StallSettings{0, 3.0});
  c.Add({Req("extra", 1)}, 0.0);
  c.Add({Req("next", 0), Req("next", 2)}, 0.5);
  std::vector<StallEvent> stalls;
  std::vector<Response> failed;
  c.CheckStalls(4.0, &stalls, &failed);  // both past 3 s
  ASSERT_EQ(failed.size(), 1u);
  EXPECT_EQ(failed[0].name, "extra");
  EXPECT_NE(failed[0].error.find("ranks 0, 2 did not submit it"),
            std::string::npos)
      << failed[0].error;
  EXPECT_EQ(c.waiting(), 1u);  // "next" waits again, from 4.0
  c.CheckStalls(6.5, &stalls, &failed);
  EXPECT_EQ(failed.size(), 1u);
  // Rank 1, released, submits "next": it runs on every rank.
  const auto out = c.Add({Req("next", 1)}, 6.5);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].kind, Response::Kind::kRun);
  EXPECT_EQ(c.waiting(), 0u);
}

TEST(Coordinator, EveryTensorWaitingForAnAbsentRankFailsInOnePass) {
  Coordinator c(3, StallSettings{0, 3.0});
  c.Add({Req("a", 0), Req("a", 1)}, 0.0);
  c.Add({Req("b", 0), Req("b", 1)}, 1.0);
  c.Add({Req("c", 2)}, 1.5);  // rank 2 is alive but a, b never come from it
  std::vector<StallEvent> stalls;
  std::vector<Response> failed;
  c.CheckStalls(10.0, &stalls, &failed);
  // a fails first and frees ranks 0 and 1, so c (missing 0 and 1) waits
  // again; b misses only rank 2, which nothing freed: it fails too.
  ASSERT_EQ(failed.size(), 2u);
  EXPECT_EQ(failed[0].name, "a");
  EXPECT_EQ(failed[1].name, "b");
  EXPECT_EQ(c.waiting(), 1u);
  c.CheckStalls(13.5, &stalls, &failed);  // c's new wait passed 3 s
  ASSERT_EQ(failed.size(), 3u);
  EXPECT_EQ(failed[2].name, "c");
  EXPECT_EQ(c.waiting(), 0u);
}

TEST(Coordinator, NoStallHandlingWhenBothTimesAreZero) {
  Coordinator c(2, StallSettings{0, 0});
  c.Add({Req("t", 0)}, 0);
  std::vector<StallEvent> stalls;
  std::vector<Response> failed;
  c.CheckStalls(1e6, &stalls, &failed);
  EXPECT_TRUE(stalls.empty());
  EXPECT_TRUE(failed.empty());
  EXPECT_EQ(StallThreshold({0, 0}), 0);
  EXPECT_EQ(StallThreshold({60, 0}), 60);
  EXPECT_EQ(StallThreshold({60, 5}), 5);
}

Response Member(const std::string& name, const std::string& group, int size,
                bool error = false) {
  Response r;
  r.name = name;
  r.group = group;
  r.group_size = size;
  if (error) {
    r.kind = Response::Kind::kError;
    r.error = "mismatched shape";
  }
  return r;
}

TEST(GroupRelease,
     HoldsMembersUntilTheGroupIsCompleteThenReleasesThemTogether) {
  GroupRelease g;
  Response solo;
  solo.name = "solo";
  auto out = g.Release({Member("a", "G", 3), solo});
  EXPECT_EQ(Names(out), std::vector<std::string>{"solo"});
  out = g.Release({Member("b", "G", 3)});
  EXPECT_TRUE(out.empty());
  out = g.Release({Member("c", "G", 3)});
  EXPECT_EQ(Names(out), (std::vector<std::string>{"a", "b", "c"}));
}

TEST(GroupRelease, OneFailedMemberFailsTheWholeGroup) {
  GroupRelease g;
  auto out = g.Release({Member("a", "G", 3)});
  EXPECT_TRUE(out.empty());
  out = g.Release({Member("b", "G", 3, /*error=*/true)});
  ASSERT_EQ(out.size(), 2u);  // a (waiting) and b fail now
  for (const Response& r : out) {
    EXPECT_EQ(r.kind, Response::Kind::kError);
    EXPECT_NE(r.error.find("grouped allreduce 'G' failed"), std::string::npos);
  }
  out = g.Release({Member("c", "G", 3)});
  ASSERT_EQ(out.size(), 1u);  // c arrives later and fails too
  EXPECT_EQ(out[0].kind, Response::Kind::kError);
}

}  // namespace
}  // namespace hvdtune::internal
