// The allreduce algorithms (ring, hierarchical) and the hierarchical
// allgather: first called directly on MPI communicators over every dtype,
// op, size, segment size and node layout, then through the Runtime (fusion,
// average, knob switches under traffic). Runs under 1 to 4 ranks and in the
// emulated two-node run (ctest -R mpi_two_nodes), where the "shared" layout
// is two real (fake-host) nodes. The Gloo engine's own algorithms are tested
// in mpi_gloo_algorithms_test.cc.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "core/algorithms/hierarchical.h"
#include "core/algorithms/hierarchical_allgather.h"
#include "core/algorithms/ring.h"
#include "core/backends/mpi/mpi_backend.h"
#include "core/config.h"
#include "mpi_algorithms_util.h"
#include "mpi_test_util.h"
#include "test_env.h"

namespace hvdtune {
namespace {

using namespace testing_util;
using internal::AlgorithmContext;
using internal::AllreduceAlgorithm;

// Node layouts. ranks_per_node > 0 groups consecutive ranks (3 per node at 4
// ranks gives nodes of 3 and 1: uneven); 0 asks MPI_Comm_split_type (one node
// here, two in the emulated run); kStrided puts even and odd ranks on two
// nodes, so a node's members are not consecutive ranks.
constexpr int kStrided = -1;
struct Layout {
  const char* name;
  int ranks_per_node;
};
constexpr Layout kLayouts[] = {{"shared", 0},
                               {"rpn1", 1},
                               {"rpn2", 2},
                               {"rpn3", 3},
                               {"strided", kStrided}};

// The runtime's MPI pieces without a Runtime: communicators, types, backend.
class MpiFixture {
 public:
  explicit MpiFixture(int ranks_per_node)
      : mpi_(internal::MpiContext::Create(std::max(ranks_per_node, 0))) {
    if (ranks_per_node == kStrided) {
      MPI_Comm_free(&mpi_.cross);
      MPI_Comm_free(&mpi_.local);
      MPI_Comm_split(mpi_.data, mpi_.rank % 2, mpi_.rank, &mpi_.local);
      MPI_Comm_rank(mpi_.local, &mpi_.local_rank);
      MPI_Comm_size(mpi_.local, &mpi_.local_size);
      MPI_Comm_split(mpi_.data, mpi_.local_rank, mpi_.rank, &mpi_.cross);
      MPI_Comm_rank(mpi_.cross, &mpi_.cross_rank);
      MPI_Comm_size(mpi_.cross, &mpi_.cross_size);
    }
    types_ = std::make_unique<internal::MpiTypes>();
    backend_ = std::make_unique<internal::MpiBackend>(mpi_.data, *types_);
  }
  ~MpiFixture() {
    backend_.reset();
    types_.reset();
    mpi_.Free();
  }
  AlgorithmContext Context(const KnobSettings& knobs) const {
    return AlgorithmContext{*backend_, mpi_, *types_, knobs};
  }
  const internal::MpiContext& mpi() const { return mpi_; }

 private:
  internal::MpiContext mpi_;
  std::unique_ptr<internal::MpiTypes> types_;
  std::unique_ptr<internal::MpiBackend> backend_;
};

// The registry's algorithm called `name`.
std::unique_ptr<AllreduceAlgorithm> MakeAlgorithm(const std::string& name) {
  for (auto& a : internal::MakeAllreduceAlgorithms()) {
    if (a->name() == name) return std::move(a);
  }
  return nullptr;
}

// Every algorithm of the MPI registry: adding one to the registry adds it to
// every direct suite below.
std::vector<std::string> RegisteredAlgorithms() {
  std::vector<std::string> out;
  for (const auto& a : internal::MakeAllreduceAlgorithms()) {
    out.emplace_back(a->name());
  }
  return out;
}

// Every algorithm the engine of this run serves (the suites through the
// Runtime run on Gloo too: HVDTUNE_TEST_ENGINE=gloo).
std::vector<std::string> ServedAlgorithms() {
  const KnobSpec& spec = GetKnobSpec(KnobId::kAllreduceAlgorithm);
  std::vector<std::string> out;
  for (std::size_t i = 0; i < spec.choices.size(); ++i) {
    if (spec.Serves(TestEngine(), i)) out.emplace_back(spec.choices[i]);
  }
  return out;
}

// One direct call: out (and in, in place) checked against the reference,
// the bytes after the output untouched, the input untouched out of place,
// and the result bit-identical on every rank.
void CheckOne(AllreduceAlgorithm& algorithm, const AlgorithmContext& ctx,
              DataType dtype, ReduceOp op, std::int64_t count, bool in_place) {
  const auto esize = static_cast<std::size_t>(DataTypeSize(dtype));
  const std::size_t bytes = static_cast<std::size_t>(count) * esize;
  const int rank = ctx.mpi.rank, size = ctx.mpi.size;
  std::vector<std::uint8_t> in(bytes + 1, 0xCD), out(bytes + 1, 0xAB);
  FillInput(dtype, in.data(), count, rank, op);
  const std::vector<std::uint8_t> in_copy = in;
  void* target = in_place ? in.data() : out.data();
  const Status s = algorithm.Run(ctx, in.data(), target, count, dtype, op);
  ASSERT_TRUE(s.ok()) << s.ToString();
  const auto* result = static_cast<const std::uint8_t*>(target);
  EXPECT_EQ(CountWrong(dtype, op, size, result, count), 0);
  EXPECT_EQ(result[bytes], in_place ? 0xCD : 0xAB) << "wrote past the end";
  if (!in_place) {
    EXPECT_EQ(in, in_copy) << "the input was modified";
  }
  EXPECT_TRUE(SameOnAllRanks(result, bytes));
}

class AlgorithmDirectTest
    : public ::testing::TestWithParam<std::tuple<std::string, Layout>> {};

// An algorithm that ignores the node layout runs on the first layout only.
bool SkipLayout(const AllreduceAlgorithm& algorithm, const Layout& layout) {
  return !algorithm.uses_node_layout() &&
         layout.ranks_per_node != kLayouts[0].ranks_per_node;
}

TEST_P(AlgorithmDirectTest, EveryDtypeOpSizeAndSegmentMatchesReference) {
  if (TestEngine() == EngineKind::kGloo) {
    GTEST_SKIP() << "the MPI engine's algorithms, called directly: run by the "
                    "mpi_algorithms_* entries";
  }
  const auto [name, layout] = GetParam();
  auto algorithm = MakeAlgorithm(name);
  if (SkipLayout(*algorithm, layout)) GTEST_SKIP() << "layout-independent";
  MpiFixture fx(layout.ranks_per_node);
  // Counts around the rank count (smaller, equal, not divisible) and primes.
  const std::int64_t counts[] = {0, 1, 2, 3, 4, 5, 13, 1009, 65537};
  for (const std::int64_t segment :
       {std::int64_t{4096}, std::int64_t{1} << 20}) {
    KnobSettings knobs;
    knobs.Set(KnobId::kRingSegmentBytes, static_cast<double>(segment));
    const AlgorithmContext ctx = fx.Context(knobs);
    for (DataType dtype : kDtypes) {
      for (ReduceOp op : kWireOps) {
        for (std::int64_t count : counts) {
          for (bool in_place : {false, true}) {
            SCOPED_TRACE(std::string(DataTypeName(dtype)) + " " +
                         std::string(ReduceOpName(op)) + " count " +
                         std::to_string(count) + " segment " +
                         std::to_string(segment) +
                         (in_place ? " in place" : ""));
            CheckOne(*algorithm, ctx, dtype, op, count, in_place);
          }
        }
      }
    }
  }
  // One larger prime count per dtype with several segments per chunk.
  KnobSettings knobs;
  knobs.Set(KnobId::kRingSegmentBytes, 16384);
  for (DataType dtype : kDtypes) {
    SCOPED_TRACE(std::string(DataTypeName(dtype)) + " count 1000003");
    CheckOne(*algorithm, fx.Context(knobs), dtype, ReduceOp::kSum, 1000003,
             false);
  }
}

// 64 MiB of float32 and of float16 (the half types reduce through float).
TEST_P(AlgorithmDirectTest, SixtyFourMiB) {
  if (TestEngine() == EngineKind::kGloo) {
    GTEST_SKIP() << "the MPI engine's algorithms, called directly: run by the "
                    "mpi_algorithms_* entries";
  }
  const auto [name, layout] = GetParam();
  auto algorithm = MakeAlgorithm(name);
  if (SkipLayout(*algorithm, layout)) GTEST_SKIP() << "layout-independent";
  if (algorithm->uses_node_layout() &&
      (layout.ranks_per_node == 1 || layout.ranks_per_node == 3)) {
    GTEST_SKIP() << "covered by the other layouts (keeps CI time down)";
  }
  MpiFixture fx(layout.ranks_per_node);
  const KnobSettings knobs;  // default segment
  for (DataType dtype : {DataType::kFloat32, DataType::kFloat16}) {
    SCOPED_TRACE(DataTypeName(dtype));
    const std::int64_t count = (std::int64_t{64} << 20) /
                               static_cast<std::int64_t>(DataTypeSize(dtype));
    CheckOne(*algorithm, fx.Context(knobs), dtype, ReduceOp::kSum, count,
             false);
  }
}

std::string DirectName(
    const ::testing::TestParamInfo<std::tuple<std::string, Layout>>& info) {
  return std::get<0>(info.param) + "_" + std::get<1>(info.param).name;
}

INSTANTIATE_TEST_SUITE_P(
    Registry, AlgorithmDirectTest,
    ::testing::Combine(::testing::ValuesIn(RegisteredAlgorithms()),
                       ::testing::ValuesIn(kLayouts)),
    DirectName);

class HierarchicalPiecesTest : public ::testing::TestWithParam<Layout> {};

// The pipelined hierarchical allreduce at and around its piece boundaries:
// pieces of one element per local rank (the smallest), of an odd number of
// elements, whole-buffer (0), and counts one below, at and one above a
// multiple of the piece, with segments smaller than a piece's shard.
TEST_P(HierarchicalPiecesTest, PieceBoundariesMatchReference) {
  if (TestEngine() == EngineKind::kGloo) {
    GTEST_SKIP() << "the MPI engine's algorithms, called directly: run by the "
                    "mpi_algorithms_* entries";
  }
  MpiFixture fx(GetParam().ranks_per_node);
  internal::HierarchicalAllreduce algorithm;
  for (DataType dtype : {DataType::kUInt8, DataType::kInt32, DataType::kFloat16,
                         DataType::kFloat64}) {
    const auto esize = static_cast<std::int64_t>(DataTypeSize(dtype));
    for (const std::int64_t piece_elems : {0, 1, 7, 1000}) {
      KnobSettings knobs;
      knobs.Set(KnobId::kHierarchicalChunkBytes,
                static_cast<double>(piece_elems * esize));
      knobs.Set(KnobId::kRingSegmentBytes, 4096);
      const AlgorithmContext ctx = fx.Context(knobs);
      // The piece in elements (at least one per local rank); the same
      // counts on every rank, also where nodes differ in size.
      int local_size = fx.mpi().local_size;
      MPI_Allreduce(MPI_IN_PLACE, &local_size, 1, MPI_INT, MPI_MAX,
                    fx.mpi().data);
      const std::int64_t p =
          std::max<std::int64_t>({piece_elems, local_size, std::int64_t{1}});
      std::vector<std::int64_t> counts = {1, 2, 3, 5};
      for (const std::int64_t k : {1, 2, 3, 17}) {
        for (const std::int64_t d : {-1, 0, 1}) {
          if (k * p + d > 0) counts.push_back(k * p + d);
        }
      }
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax}) {
        for (const std::int64_t count : counts) {
          for (bool in_place : {false, true}) {
            SCOPED_TRACE(std::string(DataTypeName(dtype)) + " " +
                         std::string(ReduceOpName(op)) + " count " +
                         std::to_string(count) + " piece " +
                         std::to_string(piece_elems) +
                         (in_place ? " in place" : ""));
            CheckOne(algorithm, ctx, dtype, op, count, in_place);
          }
        }
      }
    }
  }
  // Many pieces of a large buffer, each several segments long.
  KnobSettings knobs;
  knobs.Set(KnobId::kHierarchicalChunkBytes, 3 * 65536 + 4);
  knobs.Set(KnobId::kRingSegmentBytes, 16384);
  CheckOne(algorithm, fx.Context(knobs), DataType::kFloat32, ReduceOp::kSum,
           1000003, false);
  CheckOne(algorithm, fx.Context(knobs), DataType::kFloat32, ReduceOp::kSum,
           1000003, true);
}

INSTANTIATE_TEST_SUITE_P(Layouts, HierarchicalPiecesTest,
                         ::testing::ValuesIn(kLayouts),
                         [](const ::testing::TestParamInfo<Layout>& info) {
                           return std::string(info.param.name);
                         });

class HierarchicalAllgatherDirectTest
    : public ::testing::TestWithParam<Layout> {};

// Byte for byte the flat MPI_Allgatherv, whatever each rank contributes
// (nothing, a little, 1 MiB) and however ranks are spread over nodes.
TEST_P(HierarchicalAllgatherDirectTest, EqualsFlatAllgather) {
  if (TestEngine() == EngineKind::kGloo) {
    GTEST_SKIP() << "the MPI engine's algorithms, called directly: run by the "
                    "mpi_algorithms_* entries";
  }
  MpiFixture fx(GetParam().ranks_per_node);
  const KnobSettings knobs;
  const AlgorithmContext ctx = fx.Context(knobs);
  internal::HierarchicalAllgather gather;
  const int rank = fx.mpi().rank, size = fx.mpi().size;
  for (int pattern = 0; pattern < 4; ++pattern) {
    const auto bytes_of = [&](int r) -> std::int64_t {
      switch (pattern) {
        case 0:
          return 0;
        case 1:
          return r % 2 == 0 ? 0 : 3 + r;
        case 2:
          return 1000 + 17 * r;
        default:
          return (std::int64_t{1} << 20) + r;
      }
    };
    std::vector<std::int64_t> per_rank;
    std::int64_t total = 0;
    for (int r = 0; r < size; ++r) {
      per_rank.push_back(bytes_of(r));
      total += bytes_of(r);
    }
    std::vector<std::uint8_t> in(static_cast<std::size_t>(bytes_of(rank)));
    for (std::size_t i = 0; i < in.size(); ++i) {
      in[i] = static_cast<std::uint8_t>(rank * 31 + i * 7);
    }
    std::vector<std::uint8_t> want(static_cast<std::size_t>(total), 0);
    std::vector<std::uint8_t> got(static_cast<std::size_t>(total), 0xEE);
    if (total > 0) {
      ASSERT_TRUE(
          ctx.backend
              .Allgatherv(in.data(), bytes_of(rank), want.data(), per_rank)
              .ok());
      const Status s =
          gather.Run(ctx, in.data(), bytes_of(rank), got.data(), per_rank);
      ASSERT_TRUE(s.ok()) << s.ToString();
    }
    EXPECT_EQ(got, want) << "pattern " << pattern;
  }
}

INSTANTIATE_TEST_SUITE_P(Layouts, HierarchicalAllgatherDirectTest,
                         ::testing::ValuesIn(kLayouts),
                         [](const ::testing::TestParamInfo<Layout>& info) {
                           return std::string(info.param.name);
                         });

// Through the Runtime: every dtype x op (average included) x size enqueued at
// once, so the fusion buffer (in place) and single tensors (out of place)
// both reach the algorithm.
using AlgorithmConfig = std::tuple<std::string, std::string, std::string>;

class AlgorithmRuntimeTest : public ::testing::TestWithParam<AlgorithmConfig> {
};

TEST_P(AlgorithmRuntimeTest, FusedAndSingleTensorsMatchReference) {
  const auto [algorithm, segment, ranks_per_node] = GetParam();
  std::map<std::string, std::string> env = {
      {"HVDTUNE_ALLREDUCE_ALGORITHM", algorithm},
      {"HVDTUNE_RING_SEGMENT_BYTES", segment}};
  if (std::string(ranks_per_node) != "0") {
    env["HVDTUNE_RANKS_PER_NODE"] = ranks_per_node;
  }
  Runtime rt(RuntimeOptions{MapEnv(env)});
  ASSERT_EQ(rt.knobs().allreduce_algorithm_name(), algorithm);
  std::vector<AllreduceItem> items;
  for (DataType dtype : kDtypes) {
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage, ReduceOp::kMin,
                        ReduceOp::kMax, ReduceOp::kProduct}) {
      for (std::int64_t count : {0, 1, 3, 1009, 70001}) {
        items.push_back(AllreduceItem::Make(dtype, op, count, rt.rank()));
      }
    }
  }
  for (std::size_t i = 0; i < items.size(); ++i) {
    AllreduceItem& it = items[i];
    const std::int64_t shape[] = {it.count};
    it.handle = rt.Allreduce("alg." + std::to_string(i), it.in.data(),
                             it.out.data(), shape, it.dtype, it.op);
  }
  for (AllreduceItem& it : items) {
    const Status s = it.handle.Wait();
    ASSERT_TRUE(s.ok()) << s.ToString();
    SCOPED_TRACE(std::string(DataTypeName(it.dtype)) + " " +
                 std::string(ReduceOpName(it.op)) + " count " +
                 std::to_string(it.count));
    EXPECT_EQ(CountWrong(it.dtype, it.op, rt.size(), it.out.data(), it.count),
              0);
    EXPECT_TRUE(SameOnAllRanks(it.out.data(), it.out.size()));
  }
}

// Every registered algorithm with a large segment on the shared-memory
// layout and a small one on emulated nodes of 2.
std::vector<AlgorithmConfig> RuntimeConfigs() {
  std::vector<AlgorithmConfig> out;
  for (const std::string& a : ServedAlgorithms()) {
    out.emplace_back(a, "1048576", "0");
    out.emplace_back(a, "4096", "2");
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(
    Configs, AlgorithmRuntimeTest, ::testing::ValuesIn(RuntimeConfigs()),
    [](const ::testing::TestParamInfo<AlgorithmConfig>& info) {
      return std::get<0>(info.param) + "_seg" + std::get<1>(info.param) +
             "_rpn" + std::get<2>(info.param);
    });

// Reducescatter whatever the knobs: each algorithm (reducescatter has one
// path, the knob must not matter), fusion off and on, the cache off and on,
// a long and a short cycle; the second round goes through the cache.
using ScatterConfig =
    std::tuple<std::string, std::string, std::string, std::string>;

class ReducescatterKnobsTest : public ::testing::TestWithParam<ScatterConfig> {
};

TEST_P(ReducescatterKnobsTest, SharesMatchTheReference) {
  const auto [algorithm, fusion, cache, cycle] = GetParam();
  Runtime rt(RuntimeOptions{MapEnv({{"HVDTUNE_ALLREDUCE_ALGORITHM", algorithm},
                                    {"HOROVOD_FUSION_THRESHOLD", fusion},
                                    {"HOROVOD_CACHE_CAPACITY", cache},
                                    {"HOROVOD_CYCLE_TIME", cycle}})});
  constexpr std::int64_t kCols = 3;
  for (int round = 0; round < 2; ++round) {
    struct Item {
      DataType dtype;
      ReduceOp op;
      std::int64_t rows;
      std::vector<std::uint8_t> in, ar_out;
      Handle rs, ar;
    };
    std::vector<Item> items;
    for (DataType dtype : {DataType::kFloat32, DataType::kFloat16,
                           DataType::kInt8, DataType::kInt64}) {
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage,
                          ReduceOp::kProduct, ReduceOp::kMax}) {
        for (std::int64_t rows : {3, 1001}) {
          Item it{dtype, op, rows, {}, {}, {}, {}};
          it.in.resize(static_cast<std::size_t>(rows * kCols) *
                       DataTypeSize(dtype));
          it.ar_out.resize(it.in.size());
          FillInput(dtype, it.in.data(), rows * kCols, rt.rank(), op);
          items.push_back(std::move(it));
        }
      }
    }
    // Reducescatters and allreduces interleaved, all in flight at once.
    for (std::size_t i = 0; i < items.size(); ++i) {
      Item& it = items[i];
      const std::int64_t shape[] = {it.rows, kCols};
      it.rs = rt.Reducescatter("rsk." + std::to_string(i), it.in.data(), shape,
                               it.dtype, it.op);
      it.ar = rt.Allreduce("ark." + std::to_string(i), it.in.data(),
                           it.ar_out.data(), shape, it.dtype, it.op);
    }
    for (Item& it : items) {
      SCOPED_TRACE(std::string(DataTypeName(it.dtype)) + " " +
                   std::string(ReduceOpName(it.op)) + " rows " +
                   std::to_string(it.rows) + " round " + std::to_string(round));
      const Status s = it.rs.Wait();
      ASSERT_TRUE(s.ok()) << s.ToString();
      ASSERT_TRUE(it.ar.Wait().ok());
      EXPECT_EQ(CountWrongShare(it.dtype, it.op, rt, it.rows, kCols, it.rs, 0),
                0);
      EXPECT_EQ(CountWrong(it.dtype, it.op, rt.size(), it.ar_out.data(),
                           it.rows * kCols),
                0);
    }
  }
}

std::vector<ScatterConfig> ScatterConfigs() {
  std::vector<ScatterConfig> out;
  for (const std::string& a : ServedAlgorithms()) {
    out.emplace_back(a, "67108864", "1024", "1");
  }
  out.emplace_back("native", "0", "0", "0.2");
  out.emplace_back("ring", "4096", "1024", "20");
  return out;
}

INSTANTIATE_TEST_SUITE_P(
    Configs, ReducescatterKnobsTest, ::testing::ValuesIn(ScatterConfigs()),
    [](const ::testing::TestParamInfo<ScatterConfig>& info) {
      std::string name = std::get<0>(info.param) + "_fusion" +
                         std::get<1>(info.param) + "_cache" +
                         std::get<2>(info.param) + "_cycle" +
                         std::get<3>(info.param);
      for (char& c : name) {
        if (c == '.') c = 'p';
      }
      return name;
    });

// The algorithm knob switched about every cycle by rank 0 while a long mixed
// stream of tensors flows: every result stays exact (the inputs sum exactly,
// so any algorithm gives the same bits).
TEST(AlgorithmSwitching, EveryCycleUnderTrafficNeverChangesResults) {
  Runtime rt(RuntimeOptions{MapEnv(
      {{"HVDTUNE_RANKS_PER_NODE", "2"}, {"HOROVOD_CYCLE_TIME", "0.5"}})});
  std::atomic<bool> stop{false};
  std::thread switcher;
  const KnobSpec& spec = GetKnobSpec(KnobId::kAllreduceAlgorithm);
  std::vector<int> served;
  for (std::size_t i = 0; i < spec.choices.size(); ++i) {
    if (spec.Serves(TestEngine(), i)) served.push_back(static_cast<int>(i));
  }
  if (rt.rank() == 0) {
    switcher = std::thread([&] {
      for (int i = 0; !stop.load(); ++i) {
        KnobSettings k = rt.knobs();
        k.Set(KnobId::kAllreduceAlgorithm,
              static_cast<double>(
                  served[static_cast<std::size_t>(i) % served.size()]));
        k.Set(KnobId::kRingSegmentBytes, i % 2 ? 4096 : 65536);
        k.Set(KnobId::kFusionThreshold, i % 4 == 0 ? 0 : 1 << 20);
        rt.RequestKnobUpdate(k);
        std::this_thread::sleep_for(std::chrono::microseconds(500));
      }
    });
  }
  constexpr DataType kMix[] = {DataType::kFloat32, DataType::kFloat16,
                               DataType::kInt32, DataType::kBFloat16,
                               DataType::kFloat64};
  for (int batch = 0; batch < 150; ++batch) {
    constexpr int kPerBatch = 8;
    std::vector<std::vector<std::uint8_t>> in(kPerBatch), out(kPerBatch);
    std::vector<Handle> handles(kPerBatch);
    for (int t = 0; t < kPerBatch; ++t) {
      const DataType dtype = kMix[(batch + t) % 5];
      const std::int64_t count = (t * 977 + batch * 131) % 20000 + t;
      const std::size_t bytes =
          static_cast<std::size_t>(count) * DataTypeSize(dtype);
      in[t].resize(bytes);
      out[t].assign(bytes, 0);
      FillInput(dtype, in[t].data(), count, rt.rank());
      const std::int64_t shape[] = {count};
      handles[t] = rt.Allreduce("mix." + std::to_string(t), in[t].data(),
                                out[t].data(), shape, dtype, ReduceOp::kSum);
    }
    for (int t = 0; t < kPerBatch; ++t) {
      const Status s = handles[t].Wait();
      ASSERT_TRUE(s.ok()) << s.ToString();
      const DataType dtype = kMix[(batch + t) % 5];
      const auto count =
          static_cast<std::int64_t>(out[t].size() / DataTypeSize(dtype));
      ASSERT_EQ(
          CountWrong(dtype, ReduceOp::kSum, rt.size(), out[t].data(), count), 0)
          << "batch " << batch << " tensor " << t;
    }
  }
  stop = true;
  if (switcher.joinable()) switcher.join();
  // The switcher really switched: many versions were applied.
  std::uint64_t version = rt.knob_version();
  MPI_Bcast(&version, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
  EXPECT_GE(version, 20u);
}

// HOROVOD_HIERARCHICAL_ALLGATHER=1 through the Runtime gives the flat
// allgather's result (rank order), with emulated nodes and with MPI's own.
TEST(HierarchicalAllgatherRuntime, EqualsFlatAllgather) {
  for (const char* rpn : {"2", "0"}) {
    std::map<std::string, std::string> env = {
        {"HOROVOD_HIERARCHICAL_ALLGATHER", "1"}};
    if (std::string(rpn) != "0") env["HVDTUNE_RANKS_PER_NODE"] = rpn;
    Runtime rt(RuntimeOptions{MapEnv(env)});
    ASSERT_TRUE(rt.knobs().hierarchical_allgather());
    constexpr std::int64_t kCols = 5;
    const auto rows_of = [](int r) {
      return static_cast<std::int64_t>(r == 1 ? 0 : 2 * r + 1);
    };
    for (DataType dtype : {DataType::kFloat32, DataType::kUInt8}) {
      const std::size_t esize = DataTypeSize(dtype);
      const std::int64_t rows = rows_of(rt.rank());
      std::vector<std::uint8_t> in(static_cast<std::size_t>(rows * kCols) *
                                   esize);
      FillInput(dtype, in.data(), rows * kCols, rt.rank());
      const std::int64_t shape[] = {rows, kCols};
      Handle h =
          rt.Allgather(std::string("hag.") + rpn, in.data(), shape, dtype);
      const Status s = h.Wait();
      ASSERT_TRUE(s.ok()) << s.ToString();
      std::vector<std::uint8_t> want;
      std::int64_t total_rows = 0;
      for (int r = 0; r < rt.size(); ++r) {
        std::vector<std::uint8_t> part(
            static_cast<std::size_t>(rows_of(r) * kCols) * esize);
        FillInput(dtype, part.data(), rows_of(r) * kCols, r);
        want.insert(want.end(), part.begin(), part.end());
        total_rows += rows_of(r);
      }
      EXPECT_EQ(h.output_shape(),
                (std::vector<std::int64_t>{total_rows, kCols}));
      EXPECT_EQ(h.output(), want) << "ranks per node " << rpn;
    }
  }
}

// In the emulated two-node run (HVDTUNE_EXPECT_NODES=2) MPI's shared-memory
// split must see the fake hosts as separate nodes.
TEST(TwoNodeLayout, RuntimeReportsTheExpectedNodes) {
  const char* expect = std::getenv("HVDTUNE_EXPECT_NODES");
  if (expect == nullptr) {
    GTEST_SKIP() << "HVDTUNE_EXPECT_NODES is not set (only the emulated "
                    "multi-node run sets it)";
  }
  const int nodes = std::atoi(expect);
  Runtime rt(RuntimeOptions{MapEnv({})});
  EXPECT_EQ(rt.cross_size(), nodes);
  EXPECT_EQ(rt.local_size(), rt.size() / nodes);
  EXPECT_EQ(rt.cross_rank(), rt.rank() / (rt.size() / nodes));
}

}  // namespace
}  // namespace hvdtune
