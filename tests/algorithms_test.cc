// Pure parts of the algorithms: how the ring cuts a buffer into chunks, and
// that the registry lists the knob's choices.
#include <gtest/gtest.h>

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

TEST(AlgorithmRegistry, ListsTheKnobChoicesInOrder) {
  const auto all = MakeAllreduceAlgorithms();
  ASSERT_EQ(all.size(), AllreduceAlgorithms().size());
  for (std::size_t i = 0; i < all.size(); ++i) {
    EXPECT_EQ(all[i]->name(), AllreduceAlgorithms()[i]);
  }
}

}  // namespace
}  // namespace hvdtune::internal
