// The config store on real SQLite files: WAL, fingerprints. Round trips,
// special characters and migrations run on both backends
// (store_backends_test.cc).
#include "hvdtune/store/store.h"

#include <gtest/gtest.h>

#include "store_test_util.h"

namespace hvdtune::store {
namespace {

using testing::ScratchDir;
using testing::TestHardware;
using testing::TestModel;

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

}  // namespace
}  // namespace hvdtune::store
