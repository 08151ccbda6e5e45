// The config store on real SQLite files: round trips of every value type,
// fingerprints, migrations from each older schema, WAL, special characters.
#include "hvdtune/store/store.h"

#include <gtest/gtest.h>
#include <sqlite3.h>

#include "store_test_util.h"

namespace hvdtune::store {
namespace {

using testing::MakeSample;
using testing::ScratchDir;
using testing::TestHardware;

Fingerprint TestModel(std::int64_t scale = 1) {
  return ModelFingerprint({{"float32", 1000 * scale},
                           {"float16", 20 * scale},
                           {"float32", 7 * scale}});
}

TEST(StoreTest, CreatesDirectoryAndUsesWal) {
  ScratchDir dir;
  const std::string path = dir.File("a/b/store.db");
  Store s({path});
  EXPECT_TRUE(std::filesystem::exists(path));
  EXPECT_EQ(s.schema_version(), kSchemaVersion);
  EXPECT_EQ(s.journal_mode(), "wal");
  EXPECT_EQ(s.network_fs(), "");
  EXPECT_EQ(s.IntegrityCheck(), "ok");
}

TEST(StoreTest, RoundTripsEveryValueType) {
  ScratchDir dir;
  const std::string path = dir.File("store.db");
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

TEST(StoreTest, SqlSpecialCharactersAndNonAsciiInEveryStringField) {
  ScratchDir dir;
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
  const std::string path = dir.File("stø're 'x'.db");
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

TEST(FingerprintTest, StablePrintableAndParsedBack) {
  const Fingerprint a = TestHardware();
  EXPECT_EQ(a.Hash(), TestHardware().Hash());
  EXPECT_EQ(a.Hash().size(), 16u);
  EXPECT_NE(a.Hash(), TestHardware(8).Hash());
  EXPECT_EQ(Fingerprint::FromText(a.Text()).Text(), a.Text());
  EXPECT_EQ(a.Get("world_size"), "4");
  EXPECT_EQ(a.Get("mpi"), "Open MPI v4.1.4");
  const std::string p = PrintableFingerprint(a, TestModel());
  EXPECT_EQ(p, a.Hash() + "-" + TestModel().Hash());
  // The model list keeps order: the same tensors in another order differ.
  EXPECT_NE(ModelFingerprint({{"float32", 1}, {"float16", 2}}).Hash(),
            ModelFingerprint({{"float16", 2}, {"float32", 1}}).Hash());
  EXPECT_EQ(TestModel().Get("tensors"), "3");
  EXPECT_EQ(TestModel().Get("elements"), "1027");
}

TEST(FingerprintTest, ProbesThisHost) {
  const HostFacts h = ProbeHost();
  EXPECT_GT(h.cpu_cores, 0);
  EXPECT_FALSE(h.cpu_model.empty());
}

TEST(FingerprintTest, Similarity) {
  EXPECT_EQ(HardwareSimilarity(TestHardware(), TestHardware()), 1.0);
  EXPECT_EQ(HardwareSimilarity(TestHardware(4), TestHardware(8)), 0.5);
  Fingerprint other_lib = TestHardware();
  other_lib.parts[7].second = "Open MPI v5.0.0";
  ASSERT_EQ(other_lib.parts[7].first, "mpi");
  EXPECT_EQ(HardwareSimilarity(TestHardware(), other_lib), 0.0);
  EXPECT_EQ(ModelSimilarity(TestModel(), TestModel()), 1.0);
  // The same layers at twice the scale: similar.
  EXPECT_DOUBLE_EQ(ModelSimilarity(TestModel(), TestModel(2)), 0.75);
  // Another layer list: below the transfer threshold.
  EXPECT_LT(ModelSimilarity(TestModel(), ModelFingerprint({{"float32", 1027}})),
            0.5);
}

TEST(StoreMigrationTest, FromEachOlderVersion) {
  for (int from = 0; from < kSchemaVersion; ++from) {
    SCOPED_TRACE("from version " + std::to_string(from));
    ScratchDir dir;
    const std::string path = dir.File("store.db");
    std::int64_t run = 0, hw = 0, model = 0;
    if (from > 0) {
      Store old({path, 2000, from});
      ASSERT_EQ(old.schema_version(), from);
      hw = old.PutFingerprint("hardware", TestHardware());
      model = old.PutFingerprint("model", TestModel());
      // Version 1 has no source column: insert as a version-1 build did.
      ASSERT_EQ(sqlite3_exec(old.db(),
                             "INSERT INTO runs(hardware_id, model_id, started, "
                             "status, version) VALUES(1, 2, 5, 'completed', "
                             "'0.0.9')",
                             nullptr, nullptr, nullptr),
                SQLITE_OK);
      run = sqlite3_last_insert_rowid(old.db());
      Sample frozen = MakeSample(5, 3e9);
      frozen.phase = "frozen";
      Sample better_but_exploring = MakeSample(4, 4e9);
      old.AddSamples(run, {MakeSample(1, 1e9), better_but_exploring, frozen});
    } else {
      sqlite3* db = nullptr;  // an empty SQLite file (version 0)
      ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
      ASSERT_EQ(sqlite3_exec(db, "CREATE TABLE unrelated(x)", nullptr, nullptr,
                             nullptr),
                SQLITE_OK);
      sqlite3_close(db);
    }
    Store s({path});
    EXPECT_EQ(s.schema_version(), kSchemaVersion);
    EXPECT_EQ(s.IntegrityCheck(), "ok");
    if (from > 0) {
      EXPECT_EQ(s.RunSamples(run).size(), 3u);
      EXPECT_EQ(s.GetRun(run)->source, "fresh");
      // The migration filled the best table from the best frozen sample.
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

}  // namespace
}  // namespace hvdtune::store
