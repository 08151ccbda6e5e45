// Pure parts of the algorithms: how the ring cuts a buffer into chunks, and
// that the registry lists the knob's choices.
#include <gtest/gtest.h>

#include <string_view>
#include <vector>

#include "core/algorithms/algorithm.h"
#include "core/algorithms/ring.h"

namespace hvdtune::internal {
namespace {

TEST(RingChunks, CoverTheBufferInOrderAndDifferByAtMostOne) {
  for (int size = 1; size <= 9; ++size) {
    for (std::int64_t count : {0, 1, 2, 3, 7, 8, 9, 1000003}) {
      std::int64_t next = 0, lo = count, hi = 0;
      for (int c = 0; c < size; ++c) {
        const RingEngine::Range r = RingEngine::ChunkRange(count, size, c);
        EXPECT_EQ(r.offset, next) << size << " " << count << " " << c;
        next += r.count;
        lo = std::min(lo, r.count);
        hi = std::max(hi, r.count);
      }
      EXPECT_EQ(next, count);
      EXPECT_LE(hi - lo, 1);
      // Chunk 0 is a largest one: the ring sizes its segments from it.
      EXPECT_EQ(RingEngine::ChunkRange(count, size, 0).count, hi);
    }
  }
}

TEST(RingChunks, EveryRankOwnsADifferentChunk) {
  for (int size = 1; size <= 9; ++size) {
    std::vector<bool> seen(static_cast<std::size_t>(size), false);
    for (int r = 0; r < size; ++r) {
      const int c = RingEngine::OwnedChunk(r, size);
      ASSERT_GE(c, 0);
      ASSERT_LT(c, size);
      EXPECT_FALSE(seen[static_cast<std::size_t>(c)]);
      seen[static_cast<std::size_t>(c)] = true;
    }
  }
}

// The MPI engine's registry: the knob's choices the MPI engine serves, in
// the knob's order; the Gloo engine serves every choice.
TEST(AlgorithmRegistry, ListsTheMpiChoicesInOrder) {
  const KnobSpec& spec = GetKnobSpec(KnobId::kAllreduceAlgorithm);
  std::vector<std::string_view> mpi, gloo;
  for (std::size_t i = 0; i < spec.choices.size(); ++i) {
    if (spec.Serves(EngineKind::kMpi, i)) mpi.push_back(spec.choices[i]);
    if (spec.Serves(EngineKind::kGloo, i)) gloo.push_back(spec.choices[i]);
  }
  const auto all = MakeAllreduceAlgorithms();
  ASSERT_EQ(all.size(), mpi.size());
  for (std::size_t i = 0; i < all.size(); ++i) {
    EXPECT_EQ(all[i]->name(), mpi[i]);
  }
  EXPECT_EQ(gloo.size(), spec.choices.size());
  EXPECT_EQ(mpi.front(), "native");  // the default, on both engines
}

}  // namespace
}  // namespace hvdtune::internal
