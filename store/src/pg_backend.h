// The shared backend: a PostgreSQL server reached through libpq. One
// connection per Store; every statement binds its parameters (text format,
// doubles in their shortest exact form, so values round-trip bit for bit).
#pragma once

#include <string>

#include "backend.h"

typedef struct pg_conn PGconn;

namespace hvdtune::store::internal {

class PgConnection;

/// postgresql://USER@HOST:PORT/DB of a libpq URI: never the password, never
/// the query (which may carry one).
std::string PgDisplayName(const std::string& uri);

class PgBackend final : public Backend {
 public:
  /// Connects and migrates. Throws StoreUnavailable when the server cannot
  /// be reached or refuses the login, StoreError otherwise.
  explicit PgBackend(StoreOptions options);
  ~PgBackend() override;

  int schema_version() override;

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
  PairLookup Lookup(const std::string& hardware_hash,
                    const std::string& model_hash, int limit) override;
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
  PgConnection Connection() const;

  StoreOptions options_;
  std::string name_;
  std::string secret_;
  PGconn* conn_ = nullptr;
};

}  // namespace hvdtune::store::internal
