// Every dtype x op x size against a reference computed locally, on the
// shared runtime, under 1 to 4 ranks.
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

constexpr std::int64_t k64MiB = 64 << 20;
// Element counts for every dtype x op; -1 stands for 64 MiB of the dtype,
// run for one dtype per op (kLarge): a buffer far beyond the fusion buffer
// takes the same chunked path whatever its dtype, and 45 of them made this
// suite a quarter of the whole CI run.
constexpr std::int64_t kSizes[] = {0, 1, 7, 1000003};
constexpr DataType kDtypes[] = {
    DataType::kUInt8,    DataType::kInt8,    DataType::kInt16,
    DataType::kInt32,    DataType::kInt64,   DataType::kFloat16,
    DataType::kBFloat16, DataType::kFloat32, DataType::kFloat64};
// What broadcast and allgather move: every dtype, bool included.
constexpr DataType kAllDtypes[] = {DataType::kUInt8,    DataType::kInt8,
                                   DataType::kInt16,    DataType::kInt32,
                                   DataType::kInt64,    DataType::kFloat16,
                                   DataType::kBFloat16, DataType::kFloat32,
                                   DataType::kFloat64,  DataType::kBool};
constexpr ReduceOp kOps[] = {ReduceOp::kSum, ReduceOp::kAverage, ReduceOp::kMin,
                             ReduceOp::kMax, ReduceOp::kProduct};

using Param = std::tuple<DataType, ReduceOp, std::int64_t>;

class AllreduceTest : public ::testing::TestWithParam<Param> {};

TEST_P(AllreduceTest, MatchesLocalReferenceOnEveryRank) {
  const auto [dtype, op, size_class] = GetParam();
  const std::int64_t esize = static_cast<std::int64_t>(DataTypeSize(dtype));
  const std::int64_t count = size_class < 0 ? k64MiB / esize : size_class;
  Runtime& rt = SharedRuntime();
  std::vector<std::uint8_t> in(static_cast<std::size_t>(count * esize) + 1);
  std::vector<std::uint8_t> out(in.size(), 0xAB);
  FillInput(dtype, in.data(), count, rt.rank(), op);
  const std::int64_t shape[] = {count};
  const std::string name = "ar." + std::string(DataTypeName(dtype)) + "." +
                           std::string(ReduceOpName(op)) + "." +
                           std::to_string(count);
  const Status s =
      rt.Allreduce(name, in.data(), out.data(), shape, dtype, op).Wait();
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(CountWrong(dtype, op, rt.size(), out.data(), count), 0);
  EXPECT_EQ(out.back(), 0xAB) << "wrote past the end of the output";
  EXPECT_TRUE(SameOnAllRanks(out.data(), out.size()));

  // In place gives the same bytes.
  const Status s2 =
      rt.Allreduce(name + ".inplace", in.data(), in.data(), shape, dtype, op)
          .Wait();
  ASSERT_TRUE(s2.ok()) << s2.ToString();
  EXPECT_EQ(std::memcmp(in.data(), out.data(),
                        static_cast<std::size_t>(count * esize)),
            0);
}

std::string ParamName(const ::testing::TestParamInfo<Param>& info) {
  const auto [dtype, op, size] = info.param;
  return std::string(DataTypeName(dtype)) + "_" +
         std::string(ReduceOpName(op)) + "_" +
         (size < 0 ? std::string("64MiB") : std::to_string(size));
}

INSTANTIATE_TEST_SUITE_P(AllDtypesOpsSizes, AllreduceTest,
                         ::testing::Combine(::testing::ValuesIn(kDtypes),
                                            ::testing::ValuesIn(kOps),
                                            ::testing::ValuesIn(kSizes)),
                         ParamName);

INSTANTIATE_TEST_SUITE_P(
    Large, AllreduceTest,
    ::testing::Values(Param{DataType::kFloat32, ReduceOp::kSum, -1},
                      Param{DataType::kFloat16, ReduceOp::kAverage, -1},
                      Param{DataType::kInt8, ReduceOp::kMin, -1},
                      Param{DataType::kFloat64, ReduceOp::kMax, -1},
                      Param{DataType::kInt32, ReduceOp::kProduct, -1}),
    ParamName);

class BroadcastTest
    : public ::testing::TestWithParam<std::tuple<DataType, std::int64_t>> {};

TEST_P(BroadcastTest, EveryRootReachesEveryRank) {
  const auto [dtype, count] = GetParam();
  Runtime& rt = SharedRuntime();
  const std::size_t bytes =
      static_cast<std::size_t>(count) * DataTypeSize(dtype);
  for (int root = 0; root < rt.size(); ++root) {
    std::vector<std::uint8_t> buf(bytes);
    FillInput(dtype, buf.data(), count, rt.rank());
    const std::int64_t shape[] = {count};
    const Status s = rt.Broadcast("bc." + std::to_string(root) + "." +
                                      std::string(DataTypeName(dtype)) + "." +
                                      std::to_string(count),
                                  buf.data(), shape, dtype, root)
                         .Wait();
    ASSERT_TRUE(s.ok()) << s.ToString();
    std::vector<std::uint8_t> want(bytes);
    FillInput(dtype, want.data(), count, root);
    EXPECT_EQ(buf, want) << "root " << root;
  }
}

INSTANTIATE_TEST_SUITE_P(
    DtypesSizes, BroadcastTest,
    ::testing::Combine(::testing::ValuesIn(kAllDtypes),
                       ::testing::Values<std::int64_t>(0, 1, 7, 1000003)));

class AllgatherTest : public ::testing::TestWithParam<DataType> {};

TEST_P(AllgatherTest, FirstDimensionMayDifferPerRank) {
  const DataType dtype = GetParam();
  Runtime& rt = SharedRuntime();
  constexpr std::int64_t kCols = 3;
  // Rank r contributes r rows (rank 0 none) plus 2: sizes differ per rank.
  auto rows_of = [](int r) {
    return static_cast<std::int64_t>(r == 1 ? 0 : r + 2);
  };
  const std::int64_t rows = rows_of(rt.rank());
  const std::size_t esize = DataTypeSize(dtype);
  std::vector<std::uint8_t> in(static_cast<std::size_t>(rows * kCols) * esize);
  FillInput(dtype, in.data(), rows * kCols, rt.rank());
  const std::int64_t shape[] = {rows, kCols};
  Handle h = rt.Allgather("ag." + std::string(DataTypeName(dtype)), in.data(),
                          shape, dtype);
  const Status s = h.Wait();
  ASSERT_TRUE(s.ok()) << s.ToString();
  std::int64_t total_rows = 0;
  std::vector<std::uint8_t> want;
  for (int r = 0; r < rt.size(); ++r) {
    std::vector<std::uint8_t> part(
        static_cast<std::size_t>(rows_of(r) * kCols) * esize);
    FillInput(dtype, part.data(), rows_of(r) * kCols, r);
    want.insert(want.end(), part.begin(), part.end());
    total_rows += rows_of(r);
  }
  EXPECT_EQ(h.output_shape(), (std::vector<std::int64_t>{total_rows, kCols}));
  EXPECT_EQ(h.output(), want);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, AllgatherTest,
                         ::testing::ValuesIn(kAllDtypes));

// Bool tensors move but are never reduced: refused at once, naming why.
TEST(BoolTensors, ReductionIsRefusedWithAReason) {
  Runtime& rt = SharedRuntime();
  std::uint8_t in[4] = {0, 1, 1, 0}, out[4] = {};
  const std::int64_t shape[] = {4};
  const Status s =
      rt.Allreduce("bool.sum", in, out, shape, DataType::kBool, ReduceOp::kSum)
          .Wait();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("bool"), std::string::npos) << s.message();
}

// Product and average of integers as a user sees them: average truncates
// toward zero, product wraps nothing here (|result| <= 16).
TEST(IntegerOps, ProductAndAverageOfInt8AndInt16) {
  Runtime& rt = SharedRuntime();
  for (DataType dtype : {DataType::kInt8, DataType::kInt16}) {
    for (ReduceOp op : {ReduceOp::kProduct, ReduceOp::kAverage}) {
      std::vector<std::uint8_t> in(10 * DataTypeSize(dtype)), out(in.size());
      FillInput(dtype, in.data(), 10, rt.rank(), op);
      const std::int64_t shape[] = {2, 5};
      const Status s = rt.Allreduce("int." + std::string(DataTypeName(dtype)) +
                                        "." + std::string(ReduceOpName(op)),
                                    in.data(), out.data(), shape, dtype, op)
                           .Wait();
      ASSERT_TRUE(s.ok()) << s.ToString();
      EXPECT_EQ(CountWrong(dtype, op, rt.size(), out.data(), 10), 0);
    }
  }
}

}  // namespace
}  // namespace hvdtune

namespace hvdtune {
namespace {

using namespace testing_util;

// Every rank leaves only after the last one arrived; repeated barriers (the
// second and third through the response cache) keep that.
TEST(Barrier, NoRankLeavesBeforeTheLastArrives) {
  Runtime& rt = SharedRuntime();
  for (int round = 0; round < 3; ++round) {
    // The last rank arrives late.
    if (rt.rank() == rt.size() - 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    const double arrived =
        std::chrono::duration<double>(
            std::chrono::steady_clock::now().time_since_epoch())
            .count();
    const Status s = rt.Barrier().Wait();
    const double left = std::chrono::duration<double>(
                            std::chrono::steady_clock::now().time_since_epoch())
                            .count();
    ASSERT_TRUE(s.ok()) << s.ToString();
    std::vector<double> arrivals(static_cast<std::size_t>(rt.size()));
    MPI_Allgather(&arrived, 1, MPI_DOUBLE, arrivals.data(), 1, MPI_DOUBLE,
                  MPI_COMM_WORLD);
    EXPECT_GE(left, *std::max_element(arrivals.begin(), arrivals.end()))
        << "round " << round;
  }
}

class ReducescatterTest
    : public ::testing::TestWithParam<std::tuple<DataType, ReduceOp>> {};

// Row counts below, at and above the rank count, not divisible by it, and
// none; all enqueued at once so that they fuse.
constexpr std::int64_t kRsCols = 5;
constexpr std::int64_t kRowCounts[] = {0, 1, 3, 4, 7, 1001};

// One reducescatter of kRowCounts[i] x kRsCols per count, named prefix + rows,
// all enqueued before any is waited for; `in` keeps the inputs alive.
std::vector<Handle> EnqueueReducescatters(
    Runtime& rt, const std::string& prefix, DataType dtype, ReduceOp op,
    std::vector<std::vector<std::uint8_t>>* in) {
  std::vector<Handle> handles;
  for (std::int64_t rows : kRowCounts) {
    in->emplace_back(static_cast<std::size_t>(rows * kRsCols) *
                     DataTypeSize(dtype));
    FillInput(dtype, in->back().data(), rows * kRsCols, rt.rank(), op);
    const std::int64_t shape[] = {rows, kRsCols};
    handles.push_back(rt.Reducescatter(prefix + std::to_string(rows),
                                       in->back().data(), shape, dtype, op));
  }
  return handles;
}

TEST_P(ReducescatterTest, EachRankGetsItsRowsOfTheReduction) {
  const auto [dtype, op] = GetParam();
  Runtime& rt = SharedRuntime();
  const std::int64_t* row_counts = kRowCounts;
  std::vector<std::vector<std::uint8_t>> in;
  const std::vector<Handle> handles =
      EnqueueReducescatters(rt,
                            "rs." + std::string(DataTypeName(dtype)) + "." +
                                std::string(ReduceOpName(op)) + ".",
                            dtype, op, &in);
  for (std::size_t i = 0; i < handles.size(); ++i) {
    const Status s = handles[i].Wait();
    ASSERT_TRUE(s.ok()) << s.ToString();
    SCOPED_TRACE("rows " + std::to_string(row_counts[i]));
    EXPECT_EQ(
        CountWrongShare(dtype, op, rt, row_counts[i], kRsCols, handles[i], 0),
        0);
  }
}

std::string RsName(
    const ::testing::TestParamInfo<std::tuple<DataType, ReduceOp>>& info) {
  return std::string(DataTypeName(std::get<0>(info.param))) + "_" +
         std::string(ReduceOpName(std::get<1>(info.param)));
}

INSTANTIATE_TEST_SUITE_P(DtypesOps, ReducescatterTest,
                         ::testing::Combine(::testing::ValuesIn(kDtypes),
                                            ::testing::ValuesIn(kOps)),
                         RsName);

// With a pipeline chunk far smaller than the tensors (not a multiple of an
// element times the ranks) a reducescatter runs in many pieces, fused and
// alone, into the handle's buffer and into the caller's: every element as
// in one call.
TEST(Reducescatter, InPiecesOfThePipelineChunk) {
  Runtime rt(RuntimeOptions{MapEnv({{"HVDTUNE_PIPELINE_CHUNK_BYTES", "100"}})});
  const std::int64_t* row_counts = kRowCounts;
  for (const DataType dtype : {DataType::kFloat32, DataType::kInt32}) {
    for (const ReduceOp op : kOps) {
      SCOPED_TRACE(std::string(DataTypeName(dtype)) + " " +
                   std::string(ReduceOpName(op)));
      const std::string prefix = "rs.pieces." +
                                 std::string(DataTypeName(dtype)) + "." +
                                 std::string(ReduceOpName(op)) + ".";
      std::vector<std::vector<std::uint8_t>> in;
      const std::vector<Handle> handles =
          EnqueueReducescatters(rt, prefix, dtype, op, &in);
      for (std::size_t i = 0; i < handles.size(); ++i) {
        ASSERT_TRUE(handles[i].Wait().ok());
        SCOPED_TRACE("fused, rows " + std::to_string(row_counts[i]));
        EXPECT_EQ(CountWrongShare(dtype, op, rt, row_counts[i], kRsCols,
                                  handles[i], 0),
                  0);
      }
      // The largest alone, into the handle's buffer and into the caller's.
      const std::int64_t shape[] = {1001, kRsCols};
      Handle alone = rt.Reducescatter(prefix + "alone", in.back().data(), shape,
                                      dtype, op);
      ASSERT_TRUE(alone.Wait().ok());
      EXPECT_EQ(CountWrongShare(dtype, op, rt, 1001, kRsCols, alone, 0), 0);
      const std::size_t mine = static_cast<std::size_t>(
          ShareOf(1001, rt.size(), rt.rank()) * kRsCols * 4);
      std::vector<std::uint8_t> out(mine + 1, 0xAB);
      ASSERT_TRUE(rt.Reducescatter(prefix + "caller", in.back().data(), shape,
                                   dtype, op, out.data())
                      .Wait()
                      .ok());
      EXPECT_EQ(out.back(), 0xAB) << "wrote past this rank's rows";
      out.pop_back();
      EXPECT_EQ(out, alone.output());
    }
  }
  rt.Shutdown();
}

// Into a buffer of the caller's: the same rows, Handle::output() empty;
// fused with a handle-output one.
TEST(Reducescatter, IntoTheCallersBuffer) {
  Runtime& rt = SharedRuntime();
  const std::int64_t rows = 7, cols = 3;
  std::vector<float> in(static_cast<std::size_t>(rows * cols));
  FillInput(DataType::kFloat32, in.data(), rows * cols, rt.rank());
  const std::int64_t mine = ShareOf(rows, rt.size(), rt.rank());
  std::vector<float> out(static_cast<std::size_t>(mine * cols) + 1, -1.0f);
  const std::int64_t shape[] = {rows, cols};
  Handle given =
      rt.Reducescatter("rs.caller", in.data(), shape, DataType::kFloat32,
                       ReduceOp::kSum, out.data());
  Handle own = rt.Reducescatter("rs.own", in.data(), shape, DataType::kFloat32,
                                ReduceOp::kSum);
  ASSERT_TRUE(given.Wait().ok());
  ASSERT_TRUE(own.Wait().ok());
  EXPECT_TRUE(given.output().empty());
  EXPECT_EQ(given.output_shape(), (std::vector<std::int64_t>{mine, cols}));
  ASSERT_EQ(own.output().size(), static_cast<std::size_t>(mine * cols) * 4);
  EXPECT_EQ(std::memcmp(own.output().data(), out.data(), own.output().size()),
            0);
  EXPECT_EQ(out.back(), -1.0f) << "wrote past this rank's rows";
}

TEST(GroupedReducescatter, MembersCompleteTogetherWithTheirOwnShares) {
  Runtime& rt = SharedRuntime();
  const std::int64_t rows[] = {5, 0, 2, 64};
  std::vector<std::vector<float>> in(std::size(rows));
  std::vector<InputTensor> tensors;
  for (std::size_t i = 0; i < std::size(rows); ++i) {
    in[i].resize(static_cast<std::size_t>(rows[i] * 3));
    FillInput(DataType::kFloat32, in[i].data(), rows[i] * 3, rt.rank());
    tensors.push_back({"grs." + std::to_string(i),
                       in[i].data(),
                       {rows[i], 3},
                       DataType::kFloat32});
  }
  Handle h = rt.GroupedReducescatter("grs", tensors, ReduceOp::kSum);
  const Status s = h.Wait();
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_EQ(h.num_outputs(), std::size(rows));
  for (std::size_t i = 0; i < std::size(rows); ++i) {
    EXPECT_EQ(CountWrongShare(DataType::kFloat32, ReduceOp::kSum, rt, rows[i],
                              3, h, i),
              0)
        << "member " << i;
  }
}

TEST(GroupedReducescatter, OneMismatchedMemberFailsTheGroupOnEveryRank) {
  Runtime& rt = SharedRuntime();
  if (rt.size() == 1) GTEST_SKIP() << "a mismatch needs two ranks";
  std::vector<float> a(8, 1.0f), b(8, 1.0f);
  const std::int64_t rows_b = rt.rank() == 1 ? 2 : 4;
  std::vector<InputTensor> tensors = {
      {"grsbad.a", a.data(), {4, 2}, DataType::kFloat32},
      {"grsbad.b", b.data(), {rows_b, 2}, DataType::kFloat32}};
  const Status s =
      rt.GroupedReducescatter("grsbad", tensors, ReduceOp::kSum).Wait();
  EXPECT_EQ(s.code(), StatusCode::kMismatch) << s.ToString();
}

TEST(Reducescatter, BadArgumentsFailAtOnce) {
  Runtime& rt = SharedRuntime();
  float x = 1;
  const Status scalar =
      rt.Reducescatter("rs.scalar", &x, {}, DataType::kFloat32, ReduceOp::kSum)
          .Wait();
  EXPECT_EQ(scalar.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(scalar.message().find("at least one dimension"), std::string::npos)
      << scalar.message();
  std::uint8_t flags[2] = {1, 0};
  const std::int64_t shape[] = {2};
  EXPECT_EQ(
      rt.Reducescatter("rs.bool", flags, shape, DataType::kBool, ReduceOp::kMax)
          .Wait()
          .code(),
      StatusCode::kInvalidArgument);
}

class AlltoallTest
    : public ::testing::TestWithParam<std::tuple<DataType, bool>> {};

// Rank s sends (s + d) % 3 rows to rank d with splits (some none), or
// two rows to every rank without; the rows arrive in rank order and the
// received splits say how many came from each rank.
TEST_P(AlltoallTest, RowsArriveInRankOrder) {
  const auto [dtype, with_splits] = GetParam();
  Runtime& rt = SharedRuntime();
  constexpr std::int64_t kCols = 3;
  const int size = rt.size(), rank = rt.rank();
  auto rows_to = [&](int s, int d) -> std::int64_t {
    return with_splits ? (s + d) % 3 : 2;
  };
  const std::size_t esize = DataTypeSize(dtype);
  auto input_of = [&](int s) {
    std::int64_t rows = 0;
    for (int d = 0; d < size; ++d) rows += rows_to(s, d);
    std::vector<std::uint8_t> buf(static_cast<std::size_t>(rows * kCols) *
                                  esize);
    FillInput(dtype, buf.data(), rows * kCols, s + 1);
    return buf;
  };
  const std::vector<std::uint8_t> in = input_of(rank);
  std::vector<std::int64_t> splits;
  for (int d = 0; d < size && with_splits; ++d) {
    splits.push_back(rows_to(rank, d));
  }
  const std::int64_t shape[] = {
      static_cast<std::int64_t>(in.size() / esize / kCols), kCols};
  Handle h = rt.Alltoall("a2a." + std::string(DataTypeName(dtype)) +
                             (with_splits ? ".splits" : ".even"),
                         in.data(), shape, dtype, splits);
  const Status s = h.Wait();
  ASSERT_TRUE(s.ok()) << s.ToString();
  std::vector<std::uint8_t> want;
  std::vector<std::int64_t> want_splits;
  std::int64_t want_rows = 0;
  for (int src = 0; src < size; ++src) {
    const std::vector<std::uint8_t> theirs = input_of(src);
    std::int64_t first = 0;
    for (int d = 0; d < rank; ++d) first += rows_to(src, d);
    const std::size_t row_bytes = static_cast<std::size_t>(kCols) * esize;
    want.insert(
        want.end(),
        theirs.begin() + static_cast<std::ptrdiff_t>(
                             static_cast<std::size_t>(first) * row_bytes),
        theirs.begin() +
            static_cast<std::ptrdiff_t>(
                static_cast<std::size_t>(first + rows_to(src, rank)) *
                row_bytes));
    want_splits.push_back(rows_to(src, rank));
    want_rows += rows_to(src, rank);
  }
  EXPECT_EQ(h.output(), want);
  EXPECT_EQ(h.output_shape(), (std::vector<std::int64_t>{want_rows, kCols}));
  EXPECT_EQ(h.received_splits(), want_splits);
}

INSTANTIATE_TEST_SUITE_P(
    DtypesSplits, AlltoallTest,
    ::testing::Combine(::testing::ValuesIn(kAllDtypes), ::testing::Bool()),
    [](const ::testing::TestParamInfo<std::tuple<DataType, bool>>& info) {
      return std::string(DataTypeName(std::get<0>(info.param))) +
             (std::get<1>(info.param) ? "_splits" : "_even");
    });

TEST(Alltoall, BadSplitsFailAtOnceNamingWhy) {
  Runtime& rt = SharedRuntime();
  std::vector<float> x(static_cast<std::size_t>(rt.size() * 2 + 1), 1.0f);
  const std::int64_t odd[] = {rt.size() * 2 + 1};
  if (rt.size() > 1) {
    const Status uneven =
        rt.Alltoall("a2a.uneven", x.data(), odd, DataType::kFloat32).Wait();
    EXPECT_EQ(uneven.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(uneven.message().find("divisible"), std::string::npos)
        << uneven.message();
  }
  std::vector<std::int64_t> splits(static_cast<std::size_t>(rt.size()), 1);
  const Status sum =
      rt.Alltoall("a2a.sum", x.data(), odd, DataType::kFloat32, splits).Wait();
  EXPECT_EQ(sum.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(sum.message().find("add up"), std::string::npos) << sum.message();
  splits.push_back(0);
  const Status count =
      rt.Alltoall("a2a.count", x.data(), odd, DataType::kFloat32, splits)
          .Wait();
  EXPECT_EQ(count.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(count.message().find("one per rank"), std::string::npos)
      << count.message();
}

// Repeated with other splits: the cached negotiation is renegotiated, never
// reused with the old splits.
TEST(Alltoall, ChangedSplitsOfACachedNameAreRenegotiated) {
  Runtime& rt = SharedRuntime();
  const int size = rt.size();
  for (int round = 0; round < 3; ++round) {
    std::vector<std::int64_t> splits(static_cast<std::size_t>(size), 0);
    splits[static_cast<std::size_t>((rt.rank() + round) % size)] = 2;
    std::vector<std::int32_t> in = {rt.rank() * 10 + round,
                                    rt.rank() * 10 + round};
    const std::int64_t shape[] = {2};
    Handle h =
        rt.Alltoall("a2a.cached", in.data(), shape, DataType::kInt32, splits);
    ASSERT_TRUE(h.Wait().ok());
    std::vector<std::int64_t> want(static_cast<std::size_t>(size), 0);
    std::vector<std::int32_t> want_rows;
    for (int s = 0; s < size; ++s) {
      if ((s + round) % size == rt.rank()) {
        want[static_cast<std::size_t>(s)] = 2;
        want_rows.push_back(s * 10 + round);
        want_rows.push_back(s * 10 + round);
      }
    }
    EXPECT_EQ(h.received_splits(), want) << "round " << round;
    std::vector<std::int32_t> got(h.output().size() / 4);
    std::memcpy(got.data(), h.output().data(), h.output().size());
    EXPECT_EQ(got, want_rows) << "round " << round;
  }
}

TEST(GroupedAllgather, EachMemberGathersItsOwnRows) {
  Runtime& rt = SharedRuntime();
  std::vector<std::vector<std::int16_t>> in(3);
  std::vector<InputTensor> tensors;
  for (int i = 0; i < 3; ++i) {
    const std::int64_t rows = (rt.rank() + i) % 3;
    in[static_cast<std::size_t>(i)].assign(
        static_cast<std::size_t>(rows * 2),
        static_cast<std::int16_t>(rt.rank() * 100 + i));
    tensors.push_back({"gag." + std::to_string(i),
                       in[static_cast<std::size_t>(i)].data(),
                       {rows, 2},
                       DataType::kInt16});
  }
  Handle h = rt.GroupedAllgather("gag", tensors);
  const Status s = h.Wait();
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_EQ(h.num_outputs(), 3u);
  for (int i = 0; i < 3; ++i) {
    std::vector<std::int16_t> want;
    for (int r = 0; r < rt.size(); ++r) {
      want.insert(want.end(), static_cast<std::size_t>((r + i) % 3 * 2),
                  static_cast<std::int16_t>(r * 100 + i));
    }
    const auto& out = h.output(static_cast<std::size_t>(i));
    std::vector<std::int16_t> got(out.size() / 2);
    if (!out.empty()) std::memcpy(got.data(), out.data(), out.size());
    EXPECT_EQ(got, want) << "member " << i;
    EXPECT_EQ(h.output_shape(static_cast<std::size_t>(i)),
              (std::vector<std::int64_t>{
                  static_cast<std::int64_t>(want.size() / 2), 2}));
  }
}

// Rank r runs r + 1 steps of allreduces and then joins: step k completes
// with the ranks below k joined (their neutral elements change nothing but
// the average's divisor, which stays size()), a broadcast meanwhile fails
// and a barrier passes. Rank size - 1 is the last to join, on every rank;
// afterwards everything is back to normal.
TEST(Join, JoinedRanksTakePartWithNeutralElements) {
  Runtime& rt = SharedRuntime();
  const int size = rt.size(), rank = rt.rank();
  for (int step = 0; step <= rank; ++step) {
    for (ReduceOp op : kOps) {
      for (DataType dtype :
           {DataType::kFloat32, DataType::kInt32, DataType::kFloat16}) {
        std::vector<std::uint8_t> in(6 * DataTypeSize(dtype)), out(in.size());
        FillInput(dtype, in.data(), 6, rank, op);
        const std::int64_t shape[] = {2, 3};
        const Status s = rt.Allreduce("join." + std::to_string(step) + "." +
                                          std::string(ReduceOpName(op)) + "." +
                                          std::string(DataTypeName(dtype)),
                                      in.data(), out.data(), shape, dtype, op)
                             .Wait();
        ASSERT_TRUE(s.ok()) << s.ToString();
        // Ranks step..size-1 contribute.
        for (std::int64_t i = 0; i < 6; ++i) {
          double want = InputFor(dtype, op, step, i);
          for (int r = step + 1; r < size; ++r) {
            const double v = InputFor(dtype, op, r, i);
            want = op == ReduceOp::kMin       ? std::min(want, v)
                   : op == ReduceOp::kMax     ? std::max(want, v)
                   : op == ReduceOp::kProduct ? want * v
                                              : want + v;
          }
          if (op == ReduceOp::kAverage) {
            want = dtype == DataType::kInt32 ? std::trunc(want / size)
                                             : want / size;
          }
          EXPECT_NEAR(Load(dtype, out.data(), i), want,
                      std::fabs(want) * AverageTolerance(dtype))
              << "step " << step << " " << ReduceOpName(op) << " "
              << DataTypeName(dtype) << " element " << i;
        }
      }
    }
    if (step > 0) {
      float b = 1;
      const std::int64_t one[] = {1};
      const Status bs = rt.Broadcast("join.bcast." + std::to_string(step), &b,
                                     one, DataType::kFloat32, size - 1)
                            .Wait();
      EXPECT_EQ(bs.code(), StatusCode::kMismatch) << bs.ToString();
      EXPECT_NE(bs.message().find("joined"), std::string::npos) << bs.message();
      EXPECT_TRUE(rt.Barrier().Wait().ok());
    }
  }
  Handle join = rt.Join();
  ASSERT_TRUE(join.Wait().ok());
  EXPECT_EQ(join.last_joined_rank(), size - 1);
  // Back to normal: every rank takes part again, through the cache too.
  for (int round = 0; round < 2; ++round) {
    float x = 1, y = 0;
    const std::int64_t one[] = {1};
    ASSERT_TRUE(rt.Allreduce("join.after", &x, &y, one, DataType::kFloat32,
                             ReduceOp::kSum)
                    .Wait()
                    .ok());
    EXPECT_EQ(y, static_cast<float>(size));
  }
}

}  // namespace
}  // namespace hvdtune
