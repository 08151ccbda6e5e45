// What a store backend implements: the same operations, with the same
// semantics, over SQLite (sqlite_backend.h) or a PostgreSQL server
// (pg_backend.h). Store (store.h) chooses one from its location and
// forwards to it.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "hvdtune/store/store.h"

namespace hvdtune::store::internal {

/// Schema version 3 on both backends, before the unique key on samples:
/// every sample stored again under the same (run, index, phase, time) goes,
/// with its values; the first written (lowest id) of each stays.
inline constexpr const char* kDropDuplicateSamples = R"sql(
DELETE FROM sample_values WHERE sample_id IN (
  SELECT s.id FROM samples s WHERE EXISTS (
    SELECT 1 FROM samples k WHERE k.run_id = s.run_id AND k.idx = s.idx
      AND k.phase = s.phase AND k.time = s.time AND k.id < s.id));
DELETE FROM samples WHERE id IN (
  SELECT s.id FROM samples s WHERE EXISTS (
    SELECT 1 FROM samples k WHERE k.run_id = s.run_id AND k.idx = s.idx
      AND k.phase = s.phase AND k.time = s.time AND k.id < s.id));
)sql";

/// A backend's write transaction: rolled back unless committed.
class WriteTransaction {
 public:
  virtual ~WriteTransaction() = default;
  virtual void Commit() = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;

  virtual int schema_version() = 0;
  virtual std::string journal_mode() { return {}; }
  virtual std::string network_fs() const { return {}; }
  virtual sqlite3* sqlite_handle() { return nullptr; }

  virtual std::int64_t PutFingerprint(const std::string& kind,
                                      const Fingerprint& fp) = 0;
  virtual std::optional<std::int64_t> FindFingerprint(
      const std::string& kind, const std::string& hash) = 0;
  virtual std::int64_t BeginRun(std::int64_t hardware, std::int64_t model,
                                const std::string& version,
                                const std::string& source, double started) = 0;
  virtual void EndRun(std::int64_t run, const std::string& status,
                      double ended) = 0;
  virtual std::optional<RunInfo> GetRun(std::int64_t run) = 0;
  virtual void AddSamples(std::int64_t run,
                          const std::vector<Sample>& samples) = 0;
  virtual std::vector<Sample> RunSamples(std::int64_t run) = 0;
  virtual std::vector<Sample> PairSamples(std::int64_t hardware,
                                          std::int64_t model, int limit) = 0;
  /// By default the calls one by one (a local file; no round trips).
  virtual PairLookup Lookup(const std::string& hardware_hash,
                            const std::string& model_hash, int limit);
  virtual void SetBest(std::int64_t hardware, std::int64_t model,
                       const Best& best) = 0;
  virtual std::optional<Best> GetBest(std::int64_t hardware,
                                      std::int64_t model) = 0;
  virtual std::vector<KnownPair> KnownPairs() = 0;
  virtual std::vector<PairSummary> ListPairs() = 0;
  virtual std::vector<RunInfo> PairRuns(std::int64_t hardware,
                                        std::int64_t model) = 0;
  virtual std::string IntegrityCheck() = 0;

  /// Adds `pairs` in one write transaction (merge.cc: one implementation
  /// for both backends, over the steps below).
  MergeStats Merge(const std::vector<PairRecord>& pairs, bool dry_run);

 protected:
  // The steps of a merge, each inside the transaction Begin() opened.
  virtual std::unique_ptr<WriteTransaction> Begin() = 0;
  /// The fingerprint's id, inserted when new (`added` says whether).
  virtual std::int64_t InsertFingerprint(const std::string& kind,
                                         const Fingerprint& fp,
                                         bool* added) = 0;
  /// The first run of the pair that started at `started`.
  virtual std::optional<std::int64_t> FindRun(std::int64_t hardware,
                                              std::int64_t model,
                                              double started) = 0;
  virtual std::int64_t InsertRun(std::int64_t hardware, std::int64_t model,
                                 const RunInfo& run) = 0;
  /// False when the run has the sample already (its unique key: index,
  /// phase, time); nothing is written then.
  virtual bool InsertSample(std::int64_t run, const Sample& sample) = 0;
  /// The pair's best score, its row locked against other writers until the
  /// transaction ends.
  virtual std::optional<double> LockBestScore(std::int64_t hardware,
                                              std::int64_t model) = 0;
  /// Replaces the pair's best configuration.
  virtual void WriteBest(std::int64_t hardware, std::int64_t model,
                         const Best& best) = 0;
};

}  // namespace hvdtune::store::internal
