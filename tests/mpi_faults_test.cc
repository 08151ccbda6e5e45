// Faults found by feeding the runtime bad input: settings that differ
// between ranks (init fails on every rank with the variable and both values
// as the user wrote them, nobody hangs), element counts whose byte size
// overflows, and what the error messages say. Runs under mpirun; the init
// cases need two ranks or more.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdint>
#include <cstdio>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "core/argument_checks.h"
#include "hvdtune/runtime.h"
#include "test_env.h"

namespace hvdtune {
namespace {

using testing_util::MapEnv;
using Vars = std::map<std::string, std::string>;

int WorldRank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

int WorldSize() {
  int n = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

// Init with this rank's variables; the ConfigError's text ("" if init
// succeeded, which the caller reports).
std::string InitError(const Vars& vars) {
  try {
    Runtime rt(RuntimeOptions{MapEnv(vars)});
  } catch (const ConfigError& e) {
    return e.what();
  }
  return {};
}

// Rank 1 gets `one`, every other rank `rest` (a missing value = unset).
Vars RankOne(const std::string& var, const char* one, const char* rest) {
  const char* v = WorldRank() == 1 ? one : rest;
  return v ? Vars{{var, v}} : Vars{};
}

class InitAgreement : public ::testing::Test {
 protected:
  void SetUp() override {
    if (WorldSize() < 2) GTEST_SKIP() << "needs two ranks";
  }
  // Every rank must fail with exactly this sentence in its message.
  void ExpectEveryRankSays(const Vars& vars, const std::string& want) {
    const std::string err = InitError(vars);
    EXPECT_NE(err.find(want), std::string::npos)
        << "rank " << WorldRank() << " said: '" << err << "'";
  }
};

TEST_F(InitAgreement, RanksPerNodeUnsetOnSomeRanks) {
  ExpectEveryRankSays(RankOne("HVDTUNE_RANKS_PER_NODE", "1", nullptr),
                      "HVDTUNE_RANKS_PER_NODE differs between ranks: rank 0 "
                      "has unset, rank 1 has 1");
}

TEST_F(InitAgreement, RanksPerNodeInvalidOnSomeRanks) {
  // Odd ranks have a value that does not parse, even ranks a valid one.
  const bool bad = WorldRank() % 2 == 1;
  const std::string err =
      InitError({{"HVDTUNE_RANKS_PER_NODE", bad ? "abc" : "2"}});
  EXPECT_NE(err.find("HVDTUNE_RANKS_PER_NODE"), std::string::npos) << err;
  EXPECT_NE(err.find("'abc'"), std::string::npos) << err;
  if (!bad) {
    EXPECT_NE(err.find("rank 1 rejected its configuration"), std::string::npos)
        << err;
  }
}

TEST_F(InitAgreement, IntegerKnobPrintedAsWritten) {
  const std::string err =
      InitError(RankOne("HOROVOD_FUSION_THRESHOLD", "2097152", "1048576"));
  EXPECT_NE(err.find("HOROVOD_FUSION_THRESHOLD differs between ranks: rank 0 "
                     "has 1048576, rank 1 has 2097152"),
            std::string::npos)
      << err;
  EXPECT_EQ(err.find("e+06"), std::string::npos) << err;
}

TEST_F(InitAgreement, FractionalKnobPrintedAsWritten) {
  ExpectEveryRankSays(RankOne("HOROVOD_CYCLE_TIME", "2.5", "0.5"),
                      "HOROVOD_CYCLE_TIME differs between ranks: rank 0 has "
                      "0.5, rank 1 has 2.5");
}

TEST_F(InitAgreement, AlgorithmPrintedByName) {
  ExpectEveryRankSays(RankOne("HVDTUNE_ALLREDUCE_ALGORITHM", "ring", "native"),
                      "HVDTUNE_ALLREDUCE_ALGORITHM differs between ranks: "
                      "rank 0 has native, rank 1 has ring");
}

TEST_F(InitAgreement, LookaheadPrintsBothValues) {
  ExpectEveryRankSays(RankOne("HVDTUNE_FUSION_LOOKAHEAD", "0", "1"),
                      "HVDTUNE_FUSION_LOOKAHEAD differs between ranks: rank 0 "
                      "has 1, rank 1 has 0");
}

TEST_F(InitAgreement, AutotuneOnSomeRanksOnly) {
  ExpectEveryRankSays(RankOne("HOROVOD_AUTOTUNE", nullptr, "1"),
                      "HOROVOD_AUTOTUNE differs between ranks: rank 0 has 1, "
                      "rank 1 has 0");
}

TEST_F(InitAgreement, StallCheckSecondsPrintedAsWritten) {
  ExpectEveryRankSays(RankOne("HOROVOD_STALL_CHECK_TIME_SECONDS", "30", "60"),
                      "HOROVOD_STALL_CHECK_TIME_SECONDS differs between ranks: "
                      "rank 0 has 60, rank 1 has 30");
}

TEST_F(InitAgreement, AgreeingRanksStillInitAfterFailures) {
  Runtime rt(RuntimeOptions{MapEnv({{"HVDTUNE_RANKS_PER_NODE", "1"}})});
  std::int64_t in = 1, out = 0;
  const Status s =
      rt.Allreduce("agree", &in, &out, {}, DataType::kInt64, ReduceOp::kSum)
          .Wait();
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(out, WorldSize());
}

// --- sizes -----------------------------------------------------------------

constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
constexpr std::int64_t k2to32 = std::int64_t{1} << 32;
constexpr std::int64_t k2to62 = std::int64_t{1} << 62;

TEST(TensorSize, CountsAndBytesWithoutOverflow) {
  using internal::SizeOf;
  const std::vector<std::int64_t> ok = {kMax / 8};
  EXPECT_EQ(SizeOf("t", ok, DataType::kFloat64, kMax).bytes, kMax / 8 * 8);
  const std::vector<std::int64_t> one_more = {kMax / 8 + 1};
  EXPECT_NE(SizeOf("t", one_more, DataType::kFloat64, kMax).error, "");
  for (const std::vector<std::int64_t>& shape :
       {std::vector<std::int64_t>{3, k2to62},
        std::vector<std::int64_t>{k2to32, k2to32},
        std::vector<std::int64_t>{k2to32, k2to32, 0, 5},
        std::vector<std::int64_t>{kMax, kMax}}) {
    const internal::TensorSize s = SizeOf("t", shape, DataType::kUInt8, kMax);
    const bool has_zero = shape.size() == 4;
    EXPECT_EQ(s.error.empty(), has_zero) << s.error;
    if (!has_zero) {
      EXPECT_NE(s.error.find("too large"), std::string::npos) << s.error;
    }
  }
  // A zero dimension anywhere makes an empty tensor, however large the rest.
  const std::vector<std::int64_t> empty = {0, kMax, kMax};
  EXPECT_EQ(SizeOf("t", empty, DataType::kFloat64, kMax).elements, 0);
  // The limit is the caller's (allgather: divided by the world size).
  const std::vector<std::int64_t> ten = {10};
  EXPECT_EQ(SizeOf("t", ten, DataType::kInt32, 40).error, "");
  EXPECT_NE(SizeOf("t", ten, DataType::kInt32, 39).error, "");
}

class Sizes : public ::testing::Test {
 protected:
  Runtime rt_{RuntimeOptions{MapEnv({})}};
  std::vector<float> buf_ = std::vector<float>(16, 1.0f);

  void ExpectTooLarge(const Handle& h, const std::string& shape_text) {
    const Status s = h.Wait();
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
    EXPECT_NE(s.message().find("too large"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find(shape_text), std::string::npos) << s.message();
  }
};

TEST_F(Sizes, OverflowingShapesAreRejectedNotRunAsEmpty) {
  const std::vector<std::int64_t> a = {3, k2to62}, b = {k2to32, k2to32};
  for (DataType t : {DataType::kUInt8, DataType::kFloat32}) {
    ExpectTooLarge(
        rt_.Allreduce("big.a", buf_.data(), buf_.data(), a, t, ReduceOp::kSum),
        "{3, 4611686018427387904}");
    ExpectTooLarge(
        rt_.Allreduce("big.b", buf_.data(), buf_.data(), b, t, ReduceOp::kSum),
        "{4294967296, 4294967296}");
    ExpectTooLarge(rt_.Broadcast("big.c", buf_.data(), b, t, 0),
                   "{4294967296, 4294967296}");
    ExpectTooLarge(rt_.Allgather("big.d", buf_.data(), a, t),
                   "{3, 4611686018427387904}");
  }
  // The element count fits, the byte count does not.
  const std::vector<std::int64_t> c = {k2to62};
  ExpectTooLarge(rt_.Allreduce("big.e", buf_.data(), buf_.data(), c,
                               DataType::kFloat32, ReduceOp::kSum),
                 "{4611686018427387904}");
  std::vector<AllreduceTensor> group(2);
  group[0] = {"g.ok", buf_.data(), buf_.data(), {4}, DataType::kFloat32};
  group[1] = {"g.big", buf_.data(), buf_.data(), b, DataType::kFloat32};
  ExpectTooLarge(rt_.GroupedAllreduce("g", group, ReduceOp::kSum), "g.big");
  // Nothing was enqueued: a real collective still completes normally.
  const std::vector<std::int64_t> four = {4};
  ASSERT_TRUE(rt_.Allreduce("after", buf_.data(), buf_.data(), four,
                            DataType::kFloat32, ReduceOp::kSum)
                  .Wait()
                  .ok());
  EXPECT_EQ(buf_[0], static_cast<float>(WorldSize()));
}

TEST_F(Sizes, AllgatherResultMustFitTooNotJustOneRank) {
  if (rt_.size() < 2) GTEST_SKIP() << "needs two ranks";
  const std::vector<std::int64_t> half = {kMax / 2 + 1};
  ExpectTooLarge(rt_.Allgather("half", buf_.data(), half, DataType::kUInt8),
                 "does not fit in " + std::to_string(kMax / rt_.size()));
}

TEST_F(Sizes, ArgumentErrorsNameTheValue) {
  const std::vector<std::int64_t> four = {4};
  Status s = rt_.Allreduce("e", buf_.data(), buf_.data(), four,
                           static_cast<DataType>(200), ReduceOp::kSum)
                 .Wait();
  EXPECT_NE(s.message().find("unknown dtype 200"), std::string::npos)
      << s.message();
  s = rt_.Allreduce("e", buf_.data(), buf_.data(), four, DataType::kFloat32,
                    static_cast<ReduceOp>(9))
          .Wait();
  EXPECT_NE(s.message().find("unknown reduce op 9"), std::string::npos)
      << s.message();
  s = rt_.Broadcast("e", buf_.data(), four, DataType::kFloat32, rt_.size())
          .Wait();
  EXPECT_NE(s.message().find("root " + std::to_string(rt_.size())),
            std::string::npos)
      << s.message();
}

}  // namespace
}  // namespace hvdtune

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  testing::InitGoogleTest(&argc, argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const int rc = RUN_ALL_TESTS();
  if (rc != 0) std::fprintf(stderr, "[rank %d] failures\n", rank);
  int worst = rc;
  MPI_Allreduce(&rc, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return worst;
}
