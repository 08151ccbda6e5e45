// The store's round trips, migrations, listings and merges, run on both
// backends from one parameterised suite: an SQLite file and a database on a
// real PostgreSQL server (skipped, with the reason, where none can run).
#include <gtest/gtest.h>

#include "hvdtune/store/store.h"
#include "store_locations.h"
#include "store_test_util.h"

namespace hvdtune::store {
namespace {

using testing::Locations;
using testing::MakeSample;
using testing::TestHardware;
using testing::TestModel;

class StoreBackendTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (where_.Unavailable()) HVDTUNE_NO_PG_SERVER(where_.skip_reason());
  }
  Locations where_{GetParam()};
};

TEST_P(StoreBackendTest, RoundTripsEveryValueType) {
  const std::string path = where_.Fresh();
  std::int64_t run = 0, hw = 0, model = 0;
  Sample sample = MakeSample(3, 1.5e9);
  sample.values["big_integer"] = std::int64_t{9007199254740993};  // > 2^53
  sample.values["negative"] = std::int64_t{-7};
  sample.values["tiny_float"] = 1e-300;
  sample.values["flag"] = std::int64_t{1};
  sample.values["empty_text"] = std::string();
  {
    Store s({path});
    hw = s.PutFingerprint("hardware", TestHardware());
    model = s.PutFingerprint("model", TestModel());
    EXPECT_EQ(s.PutFingerprint("hardware", TestHardware()), hw);  // idempotent
    run = s.BeginRun(hw, model, "0.1.0", "fresh", 1700000000.5);
    s.AddSamples(run, {MakeSample(1, 1e9), MakeSample(2, 1.2e9), sample});
    s.SetBest(hw, model, {sample.values, 1.5e9, run, 1700000001.0});
    s.EndRun(run, "completed", 1700000002.25);
  }
  Store s({path});  // a new connection reads what the first committed
  const auto samples = s.RunSamples(run);
  ASSERT_EQ(samples.size(), 3u);
  EXPECT_EQ(samples[2].index, 3);
  EXPECT_EQ(samples[2].phase, "exploring");
  EXPECT_EQ(samples[2].score, 1.5e9);
  EXPECT_EQ(samples[2].time, sample.time);
  EXPECT_EQ(samples[2].values, sample.values);
  EXPECT_EQ(std::get<std::int64_t>(samples[2].values.at("big_integer")),
            9007199254740993);
  EXPECT_EQ(std::get<double>(samples[2].values.at("tiny_float")), 1e-300);
  const auto best = s.GetBest(hw, model);
  ASSERT_TRUE(best);
  EXPECT_EQ(best->values, sample.values);
  EXPECT_EQ(best->score, 1.5e9);
  EXPECT_EQ(best->run, run);
  const auto info = s.GetRun(run);
  ASSERT_TRUE(info);
  EXPECT_EQ(info->status, "completed");
  EXPECT_EQ(info->version, "0.1.0");
  EXPECT_EQ(info->source, "fresh");
  EXPECT_EQ(info->started, 1700000000.5);
  EXPECT_EQ(info->ended, 1700000002.25);
  EXPECT_EQ(s.PairSamples(hw, model, 2).size(), 2u);
  EXPECT_EQ(s.PairSamples(hw, model, 2).back().index, 3);  // newest last
  const auto pairs = s.KnownPairs();
  ASSERT_EQ(pairs.size(), 1u);
  EXPECT_EQ(pairs[0].samples, 3);
  EXPECT_EQ(pairs[0].hardware_fp.Text(), TestHardware().Text());
  EXPECT_EQ(pairs[0].model_fp.Get("shapes"),
            "float32:1000,float16:20,float32:7");
}

// A job's start-up lookup (one statement on a server) answers what the
// calls one by one answer.
TEST_P(StoreBackendTest, LookupAnswersWhatTheSingleCallsAnswer) {
  Store s({where_.Fresh()});
  const auto hw = s.PutFingerprint("hardware", TestHardware());
  const auto model = s.PutFingerprint("model", TestModel());
  const auto other = s.PutFingerprint("model", TestModel(2));
  const auto run = s.BeginRun(hw, model, "0.1.0", "fresh", 1);
  std::vector<Sample> samples;
  for (int i = 1; i <= 12; ++i) samples.push_back(MakeSample(i, i * 1e9));
  samples[4].values["extra"] = std::string("only here");
  s.AddSamples(run, samples);
  const auto other_run = s.BeginRun(hw, other, "0.1.0", "fresh", 2);
  s.AddSamples(other_run, {MakeSample(1, 1)});
  s.SetBest(hw, model, {samples[7].values, 8e9, run, 9});

  const PairLookup miss =
      s.Lookup(TestHardware().Hash(), TestModel(3).Hash(), 10);
  EXPECT_EQ(miss.hardware, hw);
  EXPECT_FALSE(miss.model);
  EXPECT_FALSE(miss.best);
  EXPECT_TRUE(miss.samples.empty());

  const PairLookup no_best =
      s.Lookup(TestHardware().Hash(), TestModel(2).Hash(), 10);
  EXPECT_EQ(no_best.model, other);
  EXPECT_FALSE(no_best.best);
  ASSERT_EQ(no_best.samples.size(), 1u);

  const PairLookup hit = s.Lookup(TestHardware().Hash(), TestModel().Hash(), 5);
  EXPECT_EQ(hit.hardware, hw);
  EXPECT_EQ(hit.model, model);
  ASSERT_TRUE(hit.best);
  const auto best = s.GetBest(hw, model);
  EXPECT_EQ(hit.best->values, best->values);
  EXPECT_EQ(hit.best->score, 8e9);
  EXPECT_EQ(hit.best->run, run);
  EXPECT_EQ(hit.best->time, 9);
  const auto newest = s.PairSamples(hw, model, 5);
  ASSERT_EQ(hit.samples.size(), 5u);
  for (std::size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(hit.samples[i].index, newest[i].index);
    EXPECT_EQ(hit.samples[i].phase, newest[i].phase);
    EXPECT_EQ(hit.samples[i].score, newest[i].score);
    EXPECT_EQ(hit.samples[i].time, newest[i].time);
    EXPECT_EQ(hit.samples[i].values, newest[i].values);
    // Every read says which run a sample belongs to.
    EXPECT_EQ(hit.samples[i].run, run);
    EXPECT_EQ(newest[i].run, run);
  }
  EXPECT_EQ(no_best.samples[0].run, other_run);
  EXPECT_EQ(s.RunSamples(other_run).front().run, other_run);
  EXPECT_EQ(hit.samples.front().index, 8);
  EXPECT_EQ(s.Lookup(TestHardware().Hash(), TestModel().Hash(), 20)
                .samples[4]
                .values.at("extra"),
            KnobValue(std::string("only here")));
}

// A write retried after its answer was lost sends the same sample again:
// it is stored once. The key is (run, index, phase, time), what import
// compares too.
TEST_P(StoreBackendTest, TheSameSampleWrittenTwiceIsStoredOnce) {
  const std::string path = where_.Fresh();
  std::int64_t run = 0, other = 0;
  const Sample first = MakeSample(1, 1e9);
  Sample retried = first;
  retried.score = 5e9;  // even with another score: the first stays
  retried.values["extra"] = std::int64_t{3};
  Sample same_index_other_phase = first;
  same_index_other_phase.phase = "frozen";
  Sample same_index_later = first;
  same_index_later.time += 1;
  {
    Store s({path});
    const auto hw = s.PutFingerprint("hardware", TestHardware());
    const auto model = s.PutFingerprint("model", TestModel());
    run = s.BeginRun(hw, model, "0.1.0", "fresh", 1);
    other = s.BeginRun(hw, model, "0.1.0", "fresh", 2);
    s.AddSamples(run, {first});
    s.AddSamples(other, {first});  // another run: another sample
  }
  {
    Store s({path});  // a new connection, as after a reconnect
    s.AddSamples(run, {retried});
    s.AddSamples(run, {retried, MakeSample(2, 2e9), same_index_other_phase,
                       same_index_later});
  }
  Store s({path});
  const auto samples = s.RunSamples(run);
  ASSERT_EQ(samples.size(), 4u);
  EXPECT_EQ(samples[0].score, 1e9);
  EXPECT_EQ(samples[0].values, first.values);
  EXPECT_EQ(s.RunSamples(other).size(), 1u);
  EXPECT_EQ(s.KnownPairs().at(0).samples, 5);
  EXPECT_EQ(s.IntegrityCheck(), "ok");
}

TEST_P(StoreBackendTest, SqlSpecialCharactersAndNonAsciiInEveryStringField) {
  const std::string weird =
      "it's \"quoted\"; DROP TABLE samples; -- %_\\ naïve 日本語 ✓ \t|";
  Fingerprint hw = TestHardware();
  hw.parts.emplace_back("note", weird);
  const Fingerprint model = ModelFingerprint({{weird, 5}});
  Sample s1;
  s1.index = 1;
  s1.phase = weird;
  s1.values[weird] = weird;
  s1.values["x'); DELETE FROM runs; --"] = std::int64_t{1};
  std::int64_t run = 0, h = 0, m = 0;
  const std::string path = where_.Fresh("stø're 'x'.db");
  {
    Store s({path});
    h = s.PutFingerprint(weird, hw);
    m = s.PutFingerprint("model", model);
    run = s.BeginRun(h, m, weird, weird, 1);
    s.AddSamples(run, {s1});
    s.SetBest(h, m, {s1.values, 2, run, 3});
    s.EndRun(run, weird, 4);
  }
  Store s({path});
  EXPECT_EQ(s.FindFingerprint(weird, hw.Hash()), h);
  const auto got = s.RunSamples(run);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].phase, weird);
  EXPECT_EQ(got[0].values, s1.values);
  EXPECT_EQ(s.GetBest(h, m)->values, s1.values);
  EXPECT_EQ(s.GetRun(run)->version, weird);
  EXPECT_EQ(s.GetRun(run)->source, weird);
  EXPECT_EQ(s.GetRun(run)->status, weird);
  EXPECT_EQ(s.IntegrityCheck(), "ok");
}

TEST_P(StoreBackendTest, MigratesFromEachOlderVersion) {
  for (int from = 0; from < kSchemaVersion; ++from) {
    SCOPED_TRACE("from version " + std::to_string(from));
    const std::string path = where_.Fresh("v" + std::to_string(from) + ".db");
    std::int64_t run = 0, hw = 0, model = 0;
    if (from > 0) {
      Store old({path, 2000, from});
      ASSERT_EQ(old.schema_version(), from);
      hw = old.PutFingerprint("hardware", TestHardware());
      model = old.PutFingerprint("model", TestModel());
      // Version 1 has no source column: insert as a version-1 build did.
      ASSERT_EQ(hw, 1);
      ASSERT_EQ(model, 2);
      where_.Exec(path,
                  "INSERT INTO runs(hardware_id, model_id, started, status, "
                  "version) VALUES(1, 2, 5, 'completed', '0.0.9')");
      run = 1;
      Sample frozen = MakeSample(5, 3e9);
      frozen.phase = "frozen";
      Sample better_but_exploring = MakeSample(4, 4e9);
      old.AddSamples(run, {MakeSample(1, 1e9), better_but_exploring, frozen});
      // What an older build stored twice (a write retried after a lost
      // answer): the migration keeps the first of each.
      Sample again = MakeSample(1, 7e9);
      again.values["only_in_the_copy"] = std::int64_t{1};
      old.AddSamples(run, {again, frozen});
      ASSERT_EQ(old.RunSamples(run).size(), 5u);
    } else {
      // A database of version 0 with something unrelated in it.
      where_.Exec(path, "CREATE TABLE unrelated(x INTEGER)");
    }
    Store s({path});
    EXPECT_EQ(s.schema_version(), kSchemaVersion);
    EXPECT_EQ(s.IntegrityCheck(), "ok");
    if (from > 0) {
      const auto samples = s.RunSamples(run);
      ASSERT_EQ(samples.size(), 3u);
      EXPECT_EQ(samples[0].score, 1e9);
      EXPECT_EQ(samples[0].values, MakeSample(1, 1e9).values);
      EXPECT_EQ(samples[2].values, MakeSample(5, 3e9).values);
      // And the key holds from now on.
      s.AddSamples(run, {MakeSample(1, 1e9)});
      EXPECT_EQ(s.RunSamples(run).size(), 3u);
      EXPECT_EQ(s.GetRun(run)->source, "fresh");
    }
    if (from == 1) {
      // Version 2 filled the best table from the best frozen sample.
      const auto best = s.GetBest(hw, model);
      ASSERT_TRUE(best);
      EXPECT_EQ(best->score, 3e9);
      EXPECT_EQ(best->run, run);
      EXPECT_EQ(best->values, MakeSample(5, 3e9).values);
    }
    // And the migrated file takes new runs.
    const auto h = s.PutFingerprint("hardware", TestHardware(2));
    const auto m = s.PutFingerprint("model", TestModel());
    EXPECT_GT(s.BeginRun(h, m, "0.1.0", "fresh", 1), run);
  }
}

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

TEST_P(StoreBackendTest, ListsAndDumpsEveryRow) {
  Store s({where_.Fresh("a.db")});
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

TEST_P(StoreBackendTest, MergeIsLosslessIdempotentAndDryRunWritesNothing) {
  Store a({where_.Fresh("a.db")});
  Fill(a);
  const auto dump = a.Dump();
  Store b({where_.Fresh("b.db")});
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
  // A document that has a sample twice (exported from an older store that
  // stored a retried write twice): once into the store.
  auto twice = dump;
  twice[0].runs[0].info.started = 3000;  // a run the store does not have
  twice[0].runs[0].samples.push_back(twice[0].runs[0].samples[0]);
  twice[0].runs.resize(1);
  const MergeStats fourth = b.Merge(twice, false);
  EXPECT_EQ(fourth.runs_added, 1);
  EXPECT_EQ(fourth.samples_added, 3);
  EXPECT_EQ(fourth.samples_present, 1);
  EXPECT_EQ(b.ListPairs()[0].samples, 10);
}

INSTANTIATE_TEST_SUITE_P(Backends, StoreBackendTest,
                         ::testing::Values("sqlite", "postgresql"),
                         testing::BackendName);

}  // namespace
}  // namespace hvdtune::store
