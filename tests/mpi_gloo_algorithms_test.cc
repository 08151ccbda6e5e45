// The Gloo engine's own algorithms: its hierarchical allreduce through the
// nodes' shared memory (run through the Runtime) and its allreduce across
// nodes (called directly on the engine's sockets). Every test skips on the
// MPI engine, so CTest runs this file only on Gloo: gloo_gloo_algorithms_npN
// (HVDTUNE_TEST_ENGINE=gloo).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>
#include <tuple>
#include <vector>

#include "core/config.h"
#include "mpi_algorithms_util.h"
#include "mpi_test_util.h"
#include "test_env.h"
#if HVDTUNE_HAVE_GLOO
#include "core/engine/gloo/gloo_context.h"
#include "core/engine/gloo/mesh_allreduce.h"
#endif

namespace hvdtune {
namespace {

using namespace testing_util;

// The Gloo engine's hierarchical allreduce through its nodes' shared memory
// (gloo_hierarchical.h): exact and the same bits on every rank for every
// dtype and op, odd counts (shards of unequal length, fewer elements than
// ranks) and counts across pipeline pieces; the segment is mapped exactly
// where every node has the same number of ranks (> 1) and there is more than
// one node, its name is gone from /dev/shm while it is mapped, and nothing
// stays mapped once the runtime is gone.
using SharedConfig = std::tuple<std::string, std::string>;

class GlooSharedHierarchicalTest
    : public ::testing::TestWithParam<SharedConfig> {};

// Whether this process maps a node segment of the Gloo engine; every such
// mapping must already be unlinked.
bool MapsNodeSegment() {
  std::ifstream maps("/proc/self/maps");
  bool mapped = false;
  for (std::string line; std::getline(maps, line);) {
    if (line.find("/dev/shm/hvdtune-") == std::string::npos) continue;
    mapped = true;
    EXPECT_NE(line.find("(deleted)"), std::string::npos)
        << "a mapped node segment still has its name: " << line;
  }
  return mapped;
}

// Node segments this process created whose names were not unlinked.
int NamedSegmentsOfThisProcess() {
  const std::string mine = "hvdtune-" + std::to_string(::getpid()) + "-";
  int n = 0;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/dev/shm", ec)) {
    if (e.path().filename().string().rfind(mine, 0) == 0) ++n;
  }
  return n;
}

TEST_P(GlooSharedHierarchicalTest, ExactOnEveryRankAndSegmentLifetime) {
  if (TestEngine() != EngineKind::kGloo) {
    GTEST_SKIP() << "the Gloo engine's hierarchical allreduce: run by the "
                    "gloo_gloo_algorithms_* entries";
  }
  const auto [ranks_per_node, chunk] = GetParam();
  const int rpn = std::stoi(ranks_per_node);
  {
    Runtime rt(
        RuntimeOptions{MapEnv({{"HVDTUNE_ALLREDUCE_ALGORITHM", "hierarchical"},
                               {"HVDTUNE_RANKS_PER_NODE", ranks_per_node},
                               {"HVDTUNE_HIERARCHICAL_CHUNK_BYTES", chunk},
                               {"HVDTUNE_RING_SEGMENT_BYTES", "65536"}})});
    ASSERT_EQ(rt.knobs().allreduce_algorithm_name(), "hierarchical");
    const int size = rt.size();
    // Nodes of rpn ranks, the last one the rest: the segment serves even
    // nodes of more than one rank, one node included.
    const bool shared =
        std::min(rpn, size) > 1 && (size % rpn == 0 || size < rpn);
    std::vector<AllreduceItem> items;
    const auto add = [&](DataType dtype, ReduceOp op, std::int64_t count) {
      items.push_back(AllreduceItem::Make(dtype, op, count, rt.rank()));
    };
    for (DataType dtype : kDtypes) {
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage, ReduceOp::kMin,
                          ReduceOp::kMax, ReduceOp::kProduct}) {
        for (std::int64_t count : {1, 3, 1009}) add(dtype, op, count);
      }
    }
    // Two and a half of the largest pieces (kGlooShmPieceBytes, 4 MiB: a
    // build without Gloo has no header to name it), and one element past
    // one.
    const std::int64_t piece = (4 << 20) / 4;
    add(DataType::kFloat32, ReduceOp::kSum, piece * 5 / 2 + 3);
    add(DataType::kFloat32, ReduceOp::kMax, piece + 1);
    add(DataType::kInt8, ReduceOp::kSum, 4 * piece + 7);
    // One at a time: each tensor alone reaches the algorithm (out of place),
    // not only the fusion buffer.
    for (std::size_t i = 0; i < items.size(); ++i) {
      AllreduceItem& it = items[i];
      const std::int64_t shape[] = {it.count};
      it.handle = rt.Allreduce("shm." + std::to_string(i), it.in.data(),
                               it.out.data(), shape, it.dtype, it.op);
      const Status s = it.handle.Wait();
      ASSERT_TRUE(s.ok()) << s.ToString();
      SCOPED_TRACE(std::string(DataTypeName(it.dtype)) + " " +
                   std::string(ReduceOpName(it.op)) + " count " +
                   std::to_string(it.count));
      EXPECT_EQ(CountWrong(it.dtype, it.op, size, it.out.data(), it.count), 0);
      EXPECT_TRUE(SameOnAllRanks(it.out.data(), it.out.size()));
    }
    EXPECT_EQ(MapsNodeSegment(), shared)
        << "ranks per node " << rpn << ", " << size << " ranks";
    EXPECT_EQ(NamedSegmentsOfThisProcess(), 0);
  }
  EXPECT_FALSE(MapsNodeSegment()) << "still mapped after the runtime ended";
  EXPECT_EQ(NamedSegmentsOfThisProcess(), 0);
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, GlooSharedHierarchicalTest,
    ::testing::Combine(::testing::Values("1", "2", "3"),
                       ::testing::Values("0", "65536", "200000")),
    [](const ::testing::TestParamInfo<SharedConfig>& info) {
      return "rpn" + std::get<0>(info.param) + "_chunk" +
             std::get<1>(info.param);
    });

// The Gloo engine's allreduce across nodes (mesh_allreduce.h, the
// hierarchical allreduce's step 3) on the engine's own sockets among all
// ranks, at 1 to 4 ranks: exact and the same bits on every rank for every
// dtype and wire op, counts smaller than the ranks, blocks of unequal
// length, and segments from one element to more than a block; calls follow
// each other on the same mesh (their messages never cross). An abort
// descriptor that is already readable stops a call before it moves a byte.
TEST(GlooMeshAllreduce, ExactAndTheSameOnEveryRank) {
  if (TestEngine() != EngineKind::kGloo) {
    GTEST_SKIP() << "the Gloo engine's mesh allreduce: run by the "
                    "gloo_gloo_algorithms_* entries";
  }
#if HVDTUNE_HAVE_GLOO
  const RuntimeConfig config = ParseConfig(MapEnv({}));
  internal::GlooGroups groups(config.gloo, {}, 0);
  const int rank = groups.world().rank;
  const int size = groups.world().size;
  // One node per rank: the cross group spans every rank, as the world.
  std::vector<int> node_of(static_cast<std::size_t>(size));
  for (int r = 0; r < size; ++r) node_of[static_cast<std::size_t>(r)] = r;
  groups.SplitNodes(node_of);
  if (size == 1) {
    EXPECT_EQ(groups.cross_mesh(), nullptr);
    return;
  }
  ASSERT_NE(groups.cross_mesh(), nullptr);
  const internal::SocketMesh& mesh = *groups.cross_mesh();
  ASSERT_EQ(mesh.size(), size);
  ASSERT_EQ(mesh.rank(), rank);
  struct Case {
    std::int64_t segment_bytes;
    std::vector<std::int64_t> counts;
  };
  const Case cases[] = {{1, {1, 2, 3, 5, 67}},
                        {64, {1, 3, 1009}},
                        {4096, {0, 7, 1009, 100003}},
                        {1 << 20, {3, 100003, 300007}}};
  std::vector<std::uint8_t> scratch;
  for (const Case& c : cases) {
    for (DataType dtype : kDtypes) {
      for (ReduceOp op : kWireOps) {
        for (std::int64_t count : c.counts) {
          SCOPED_TRACE(std::string(DataTypeName(dtype)) + " " +
                       std::string(ReduceOpName(op)) + " count " +
                       std::to_string(count) + " segment " +
                       std::to_string(c.segment_bytes));
          std::vector<std::uint8_t> buf(static_cast<std::size_t>(count) *
                                        DataTypeSize(dtype));
          FillInput(dtype, buf.data(), count, rank, op);
          const Status s = groups.Guard("allreduce", [&] {
            internal::MeshAllreduce(mesh, buf.data(), count, dtype, op,
                                    c.segment_bytes, groups.timeout(),
                                    &scratch);
          });
          ASSERT_TRUE(s.ok()) << s.ToString();
          EXPECT_EQ(CountWrong(dtype, op, size, buf.data(), count), 0);
          EXPECT_TRUE(SameOnAllRanks(buf.data(), buf.size()));
        }
      }
    }
  }
  int abort_pipe[2];
  ASSERT_EQ(::pipe(abort_pipe), 0);
  ASSERT_EQ(::write(abort_pipe[1], "x", 1), 1);
  std::vector<float> data(1000, 1.0f);
  const Status aborted = groups.Guard("allreduce", [&] {
    internal::MeshAllreduce(mesh, data.data(), 1000, DataType::kFloat32,
                            ReduceOp::kSum, 4096, groups.timeout(), &scratch,
                            abort_pipe[0]);
  });
  ::close(abort_pipe[0]);
  ::close(abort_pipe[1]);
  EXPECT_FALSE(aborted.ok());
  EXPECT_NE(aborted.ToString().find("aborted"), std::string::npos)
      << aborted.ToString();
  EXPECT_EQ(data, std::vector<float>(1000, 1.0f));
#endif
}

}  // namespace
}  // namespace hvdtune
