// The embedded backend: one SQLite file (store.cc opens and migrates it,
// queries.cc and exchange.cc read and write it).
#pragma once

#include <sqlite3.h>

#include "backend.h"

namespace hvdtune::store::internal {

class SqliteBackend final : public Backend {
 public:
  /// Opens (creating the file and its directory when needed) and migrates.
  explicit SqliteBackend(StoreOptions options);
  ~SqliteBackend() override;

  int schema_version() override;
  std::string journal_mode() override;
  std::string network_fs() const override { return network_fs_; }
  sqlite3* sqlite_handle() override { return db_; }

  std::int64_t PutFingerprint(const std::string& kind,
                              const Fingerprint& fp) override;
  std::optional<std::int64_t> FindFingerprint(const std::string& kind,
                                              const std::string& hash) override;
  std::int64_t BeginRun(std::int64_t hardware, std::int64_t model,
                        const std::string& version, const std::string& source,
                        double started) override;
  void EndRun(std::int64_t run, const std::string& status,
              double ended) override;
  std::optional<RunInfo> GetRun(std::int64_t run) override;
  void AddSamples(std::int64_t run,
                  const std::vector<Sample>& samples) override;
  std::vector<Sample> RunSamples(std::int64_t run) override;
  std::vector<Sample> PairSamples(std::int64_t hardware, std::int64_t model,
                                  int limit) override;
  void SetBest(std::int64_t hardware, std::int64_t model,
               const Best& best) override;
  std::optional<Best> GetBest(std::int64_t hardware,
                              std::int64_t model) override;
  std::vector<KnownPair> KnownPairs() override;
  std::vector<PairSummary> ListPairs() override;
  std::vector<RunInfo> PairRuns(std::int64_t hardware,
                                std::int64_t model) override;
  std::string IntegrityCheck() override;

 protected:
  std::unique_ptr<WriteTransaction> Begin() override;
  std::int64_t InsertFingerprint(const std::string& kind, const Fingerprint& fp,
                                 bool* added) override;
  std::optional<std::int64_t> FindRun(std::int64_t hardware, std::int64_t model,
                                      double started) override;
  std::int64_t InsertRun(std::int64_t hardware, std::int64_t model,
                         const RunInfo& run) override;
  bool InsertSample(std::int64_t run, const Sample& sample) override;
  std::optional<double> LockBestScore(std::int64_t hardware,
                                      std::int64_t model) override;
  void WriteBest(std::int64_t hardware, std::int64_t model,
                 const Best& best) override;

 private:
  void Migrate();

  StoreOptions options_;
  sqlite3* db_ = nullptr;
  std::string network_fs_;
};

}  // namespace hvdtune::store::internal
