// Every dtype x op x size against a reference computed locally, on the
// shared runtime, under 1 to 4 ranks.
#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

#include "mpi_test_util.h"

namespace hvdtune {
namespace {

using namespace testing_util;

constexpr std::int64_t k64MiB = 64 << 20;
// Element counts; -1 stands for 64 MiB of the dtype.
constexpr std::int64_t kSizes[] = {0, 1, 7, 1000003, -1};
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
