// The configuration store: per (hardware, model) fingerprint pair, every
// run, every scored autotune sample and the best configuration. Knob values
// are kept by knob name, so a knob added later is a new name, not a schema
// change. Two backends with one schema, one set of versioned migrations and
// the same semantics:
//
// - SQLite (a file path, the embedded default): WAL journal with a busy
//   timeout (the rollback journal on a network file system, where WAL
//   cannot work); every write is one BEGIN IMMEDIATE transaction. Any
//   number of processes of one host may share a file.
// - PostgreSQL (a libpq URI, postgresql://USER@HOST:PORT/DB?..., with
//   libpq's environment, PGPASSFILE and sslmode honoured): a server that
//   the jobs of many hosts share. Every write is one READ COMMITTED
//   transaction; pg_backend.cc says how concurrent writers stay consistent.
//
// Every statement binds its parameters. Failures throw StoreError with a
// message that names the file or the server (never a password); a lost or
// refused connection throws StoreUnavailable, after which the store can be
// opened again. Nothing here is fatal to a job (the caller warns and goes
// on).
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
inline constexpr int kSchemaVersion = 3;

class StoreError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// The server could not be reached, refused the connection or went away:
/// worth trying again later (a StoreError of any other kind is not).
class StoreUnavailable : public StoreError {
 public:
  using StoreError::StoreError;
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
  /// The run it belongs to (its id in this store; 0 in a RunRecord or
  /// before it is stored). Samples of jobs that ran at once interleave.
  std::int64_t run = 0;
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

/// What a job looks up at start (Store::Lookup).
struct PairLookup {
  /// The fingerprints' ids, where stored.
  std::optional<std::int64_t> hardware, model;
  std::optional<Best> best;
  /// The pair's newest samples, oldest first (as PairSamples).
  std::vector<Sample> samples;
};

/// What Merge() did (or, with dry_run, would do).
struct MergeStats {
  int pairs_added = 0, pairs_present = 0;
  int runs_added = 0, runs_present = 0;
  int samples_added = 0, samples_present = 0;
  int best_set = 0, best_kept = 0;
};

struct StoreOptions {
  /// A file path (SQLite) or a postgresql:// or postgres:// URI.
  std::string path;
  /// How long a statement waits for another process's lock.
  int busy_timeout_ms = 2000;
  /// Migrate to this version only (tests build older files this way).
  int target_version = kSchemaVersion;
  /// Open without creating or migrating; no writes.
  bool read_only = false;
  /// PostgreSQL: the longest a statement waits for the server's answer
  /// before the store counts as unavailable (a stopped server or a
  /// partitioned network would otherwise hold a write for minutes).
  int server_timeout_ms = 10000;
};

/// The per-user default: $XDG_STATE_HOME/hvdtune/store.db, else
/// ~/.local/state/hvdtune/store.db; empty when neither is known.
std::string DefaultStorePath();

/// The file system type's name when `path`'s directory is on a network
/// file system (nfs, lustre, gpfs, cifs, ...); empty otherwise.
std::string NetworkFileSystem(const std::string& path);

/// True when `location` names a PostgreSQL server (postgresql:// or
/// postgres://) rather than a file.
bool IsServerLocation(const std::string& location);

/// `location` as messages may show it: a path as it is; a URI as
/// postgresql://USER@HOST:PORT/DB with no password and no query.
std::string DisplayLocation(const std::string& location);

namespace internal {
class Backend;
}

class Store {
 public:
  /// Opens (creating the file and its directory when needed, or connecting
  /// to the server) and migrates to options.target_version. Throws
  /// StoreError: unwritable location, locked, not a database, a schema
  /// newer than this build's; StoreUnavailable: a server that cannot be
  /// reached or refuses the login.
  explicit Store(StoreOptions options);
  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  /// The location as messages show it (DisplayLocation: no password).
  const std::string& path() const { return display_; }
  /// "sqlite" or "postgresql".
  const char* backend() const;
  int schema_version() const;
  /// "wal" or "delete" (SQLite); empty for a server.
  std::string journal_mode() const;
  /// Non-empty when the file is on a network file system (rollback
  /// journal in use).
  std::string network_fs() const;

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

  /// All in one transaction. A sample the run already has (the same
  /// index, phase and time: a write retried after a lost answer) is not
  /// stored again.
  void AddSamples(std::int64_t run, const std::vector<Sample>& samples);
  /// A run's samples in index order.
  std::vector<Sample> RunSamples(std::int64_t run);
  /// The newest `limit` samples of every run of the pair, oldest first.
  std::vector<Sample> PairSamples(std::int64_t hardware, std::int64_t model,
                                  int limit);

  /// A job's start-up lookup by fingerprint hashes: both ids, the pair's
  /// best and its newest `limit` samples, from one snapshot (on a server,
  /// one statement: one round trip).
  PairLookup Lookup(const std::string& hardware_hash,
                    const std::string& model_hash, int limit);

  /// Replaces the pair's best configuration (the last writer wins, whole).
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
  /// transaction is rolled back. Any failure leaves the store unchanged.
  MergeStats Merge(const std::vector<PairRecord>& pairs, bool dry_run);

  /// "ok" when sound (SQLite: PRAGMA integrity_check's first line; a
  /// server: every sample's and best value's row has its parent).
  std::string IntegrityCheck();

  /// The raw SQLite connection (tests); null for a server.
  sqlite3* db();

 private:
  std::string display_;
  std::unique_ptr<internal::Backend> backend_;
};

}  // namespace hvdtune::store
