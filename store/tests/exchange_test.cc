// Listing, dumping and merging whole pairs (what hvd-tune's show, export and
// import use), on real SQLite files.
#include <gtest/gtest.h>

#include "hvdtune/store/store.h"
#include "store_test_util.h"

namespace hvdtune::store {
namespace {

using testing::MakeSample;
using testing::ScratchDir;
using testing::TestHardware;

// One pair with two runs of three samples and a best from the second run.
void Fill(Store& s) {
  const auto hw = s.PutFingerprint("hardware", TestHardware());
  const auto model =
      s.PutFingerprint("model", ModelFingerprint({{"float32", 4096}}));
  for (int r = 0; r < 2; ++r) {
    const auto run =
        s.BeginRun(hw, model, "0.1.0", r ? "store" : "fresh", 1000.0 + r);
    s.AddSamples(run, {MakeSample(1, 1e9 + r), MakeSample(2, 2e9 + r),
                       MakeSample(3, 3e9 + r)});
    s.EndRun(run, "completed", 2000.0 + r);
    if (r == 1) s.SetBest(hw, model, {MakeSample(3, 0).values, 3e9, run, 5});
  }
}

TEST(StoreExchangeTest, ListsAndDumpsEveryRow) {
  ScratchDir dir;
  Store s({dir.File("a.db")});
  Fill(s);
  const auto pairs = s.ListPairs();
  ASSERT_EQ(pairs.size(), 1u);
  EXPECT_EQ(pairs[0].runs, 2);
  EXPECT_EQ(pairs[0].samples, 6);
  EXPECT_EQ(pairs[0].first, 1000.0);
  ASSERT_TRUE(pairs[0].best);
  EXPECT_EQ(pairs[0].best->score, 3e9);
  const auto dump = s.Dump();
  ASSERT_EQ(dump.size(), 1u);
  ASSERT_EQ(dump[0].runs.size(), 2u);
  EXPECT_EQ(dump[0].best_run, 1);
  EXPECT_EQ(dump[0].runs[1].info.source, "store");
  EXPECT_EQ(dump[0].runs[1].samples[2].score, 3e9 + 1);
}

TEST(StoreExchangeTest, MergeIsLosslessIdempotentAndDryRunWritesNothing) {
  ScratchDir dir;
  Store a({dir.File("a.db")});
  Fill(a);
  const auto dump = a.Dump();
  Store b({dir.File("b.db")});
  const MergeStats dry = b.Merge(dump, /*dry_run=*/true);
  EXPECT_EQ(dry.runs_added, 2);
  EXPECT_TRUE(b.ListPairs().empty());
  const MergeStats first = b.Merge(dump, false);
  EXPECT_EQ(first.pairs_added, 1);
  EXPECT_EQ(first.samples_added, 6);
  EXPECT_EQ(first.best_set, 1);
  auto again = b.Dump();
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].best_run, 1);
  EXPECT_EQ(again[0].runs[0].samples[1].values,
            dump[0].runs[0].samples[1].values);
  const MergeStats second = b.Merge(dump, false);
  EXPECT_EQ(second.runs_present, 2);
  EXPECT_EQ(second.samples_added, 0);
  EXPECT_EQ(second.best_kept, 1);
  EXPECT_EQ(b.ListPairs()[0].samples, 6);
  // A run that gained samples gets only the new ones; a lower best is kept
  // out, a higher one replaces it.
  auto more = dump;
  more[0].runs[0].samples.push_back(MakeSample(4, 9e9));
  more[0].best->score = 1;
  const MergeStats third = b.Merge(more, false);
  EXPECT_EQ(third.samples_added, 1);
  EXPECT_EQ(third.best_kept, 1);
  EXPECT_EQ(b.ListPairs()[0].samples, 7);
  more[0].best->score = 8e9;
  EXPECT_EQ(b.Merge(more, false).best_set, 1);
  EXPECT_EQ(b.ListPairs()[0].best->score, 8e9);
}

}  // namespace
}  // namespace hvdtune::store
