// The configuration store: one SQLite file that keeps, per (hardware,
// model) fingerprint pair, every run, every scored autotune sample and the
// best configuration. Knob values are kept by knob name, so a knob added
// later is a new name, not a schema change.
//
// Concurrency: WAL journal with a busy timeout (the rollback journal on a
// network file system, where WAL cannot work); every write is one BEGIN
// IMMEDIATE transaction with bound parameters. Any number of processes may
// share a file. Failures throw StoreError with a message that names the
// file; nothing here is fatal to a job (the caller warns and goes on).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <variant>
#include <vector>

#include "hvdtune/store/fingerprint.h"

struct sqlite3;

namespace hvdtune::store {

/// Schema version this build writes (PRAGMA user_version).
inline constexpr int kSchemaVersion = 2;

class StoreError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A knob value as stored: integers (and bools) as INTEGER, floats as REAL,
/// categorical choices by name as TEXT.
using KnobValue = std::variant<std::int64_t, double, std::string>;
using KnobValues = std::map<std::string, KnobValue>;

struct Sample {
  /// 1-based over its run.
  int index = 0;
  /// "warmup", "exploring", "frozen", "retuning".
  std::string phase;
  KnobValues values;
  double score = 0;
  /// Seconds since the Unix epoch.
  double time = 0;
};

struct Best {
  KnobValues values;
  double score = 0;
  std::int64_t run = 0;
  double time = 0;
};

struct RunInfo {
  std::int64_t id = 0;
  std::int64_t hardware = 0, model = 0;
  double started = 0, ended = 0;
  /// "running", "completed", ...
  std::string status;
  std::string version;
  /// "fresh", "store", "transfer".
  std::string source;
};

/// A (hardware, model) pair that has samples, for similarity searches.
struct KnownPair {
  std::int64_t hardware = 0, model = 0;
  Fingerprint hardware_fp, model_fp;
  std::int64_t samples = 0;
};

/// A (hardware, model) pair as listings show it.
struct PairSummary {
  std::int64_t hardware = 0, model = 0;
  Fingerprint hardware_fp, model_fp;
  std::int64_t runs = 0, samples = 0;
  /// Earliest run start and latest run start, end or sample time (seconds
  /// since the Unix epoch).
  double first = 0, last = 0;
  std::optional<Best> best;
};

/// One run with its samples, as exported and imported (ids are the
/// store's own and are not carried over).
struct RunRecord {
  RunInfo info;
  std::vector<Sample> samples;
};

/// Everything the store keeps about one (hardware, model) pair.
struct PairRecord {
  Fingerprint hardware, model;
  std::vector<RunRecord> runs;
  std::optional<Best> best;
  /// Index into `runs` of the run that found `best` (-1: none); replaces
  /// Best::run, which is a row id of one particular file.
  int best_run = -1;
};

/// What Merge() did (or, with dry_run, would do).
struct MergeStats {
  int pairs_added = 0, pairs_present = 0;
  int runs_added = 0, runs_present = 0;
  int samples_added = 0, samples_present = 0;
  int best_set = 0, best_kept = 0;
};

struct StoreOptions {
  std::string path;
  /// How long a statement waits for another process's lock.
  int busy_timeout_ms = 2000;
  /// Migrate to this version only (tests build older files this way).
  int target_version = kSchemaVersion;
  /// Open without creating or migrating; no writes.
  bool read_only = false;
};

/// The per-user default: $XDG_STATE_HOME/hvdtune/store.db, else
/// ~/.local/state/hvdtune/store.db; empty when neither is known.
std::string DefaultStorePath();

/// The file system type's name when `path`'s directory is on a network
/// file system (nfs, lustre, gpfs, cifs, ...); empty otherwise.
std::string NetworkFileSystem(const std::string& path);

class Store {
 public:
  /// Opens (creating the file and its directory when needed) and migrates
  /// to options.target_version. Throws StoreError: unwritable location,
  /// locked, not a database, a schema newer than this build's.
  explicit Store(StoreOptions options);
  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  const std::string& path() const { return options_.path; }
  int schema_version() const;
  /// "wal" or "delete".
  std::string journal_mode() const;
  /// Non-empty when the file is on a network file system (rollback
  /// journal in use).
  const std::string& network_fs() const { return network_fs_; }

  /// The fingerprint's row id, inserted when new. `kind`: "hardware" or
  /// "model".
  std::int64_t PutFingerprint(const std::string& kind, const Fingerprint& fp);
  std::optional<std::int64_t> FindFingerprint(const std::string& kind,
                                              const std::string& hash);

  std::int64_t BeginRun(std::int64_t hardware, std::int64_t model,
                        const std::string& version, const std::string& source,
                        double started);
  void EndRun(std::int64_t run, const std::string& status, double ended);
  std::optional<RunInfo> GetRun(std::int64_t run);

  /// All in one transaction.
  void AddSamples(std::int64_t run, const std::vector<Sample>& samples);
  /// A run's samples in index order.
  std::vector<Sample> RunSamples(std::int64_t run);
  /// The newest `limit` samples of every run of the pair, oldest first.
  std::vector<Sample> PairSamples(std::int64_t hardware, std::int64_t model,
                                  int limit);

  void SetBest(std::int64_t hardware, std::int64_t model, const Best& best);
  std::optional<Best> GetBest(std::int64_t hardware, std::int64_t model);

  std::vector<KnownPair> KnownPairs();

  /// Every pair that has a run, newest activity first.
  std::vector<PairSummary> ListPairs();
  /// The pair's runs, oldest first.
  std::vector<RunInfo> PairRuns(std::int64_t hardware, std::int64_t model);
  /// Every pair with all its runs, samples and best configuration.
  std::vector<PairRecord> Dump();
  /// Adds `pairs` in one transaction, losing nothing already stored: a run
  /// already present (same pair and start time) gets only the samples it
  /// lacks (by index, phase and time); a best configuration replaces the
  /// stored one only when its score is higher. With `dry_run` the
  /// transaction is rolled back. Any failure leaves the file unchanged.
  MergeStats Merge(const std::vector<PairRecord>& pairs, bool dry_run);

  /// PRAGMA integrity_check's first line ("ok" when sound).
  std::string IntegrityCheck();

  /// The raw connection (tests).
  sqlite3* db() { return db_; }

 private:
  void Migrate();

  StoreOptions options_;
  sqlite3* db_ = nullptr;
  std::string network_fs_;
};

}  // namespace hvdtune::store
