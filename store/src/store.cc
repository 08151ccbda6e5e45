// Opening a store: location, journal mode, busy timeout and versioned
// migrations (PRAGMA user_version). The queries are in queries.cc.
#include "hvdtune/store/store.h"

#include <sqlite3.h>
#include <sys/statfs.h>

#include <cstdlib>
#include <filesystem>
#include <iterator>

#include "backend.h"
#include "sqlite_backend.h"
#include "sqlite_util.h"

namespace hvdtune::store {
namespace {

using internal::Exec;
using internal::Fail;
using internal::kDropDuplicateSamples;
using internal::Statement;

// Version 1: fingerprints, runs, every sample with its knob values by name.
void MigrateTo1(sqlite3* db, const std::string& path) {
  Exec(db, path, R"sql(
CREATE TABLE fingerprints(
  id INTEGER PRIMARY KEY,
  kind TEXT NOT NULL,
  hash TEXT NOT NULL,
  text TEXT NOT NULL,
  created REAL NOT NULL,
  UNIQUE(kind, hash));
CREATE TABLE runs(
  id INTEGER PRIMARY KEY,
  hardware_id INTEGER NOT NULL REFERENCES fingerprints(id),
  model_id INTEGER NOT NULL REFERENCES fingerprints(id),
  started REAL NOT NULL,
  ended REAL,
  status TEXT NOT NULL,
  version TEXT NOT NULL);
CREATE INDEX runs_pair ON runs(hardware_id, model_id);
CREATE TABLE samples(
  id INTEGER PRIMARY KEY,
  run_id INTEGER NOT NULL REFERENCES runs(id),
  idx INTEGER NOT NULL,
  phase TEXT NOT NULL,
  score REAL NOT NULL,
  time REAL NOT NULL);
CREATE INDEX samples_run ON samples(run_id, idx);
CREATE TABLE sample_values(
  sample_id INTEGER NOT NULL REFERENCES samples(id),
  knob TEXT NOT NULL,
  value,
  PRIMARY KEY(sample_id, knob)) WITHOUT ROWID;
)sql");
}

// Version 2: where a run's starting point came from, and the best
// configuration per (hardware, model), filled from the best frozen sample
// of each pair already stored.
void MigrateTo2(sqlite3* db, const std::string& path) {
  Exec(db, path, R"sql(
ALTER TABLE runs ADD COLUMN source TEXT NOT NULL DEFAULT 'fresh';
CREATE TABLE best(
  hardware_id INTEGER NOT NULL REFERENCES fingerprints(id),
  model_id INTEGER NOT NULL REFERENCES fingerprints(id),
  score REAL NOT NULL,
  run_id INTEGER,
  time REAL NOT NULL,
  PRIMARY KEY(hardware_id, model_id));
CREATE TABLE best_values(
  hardware_id INTEGER NOT NULL,
  model_id INTEGER NOT NULL,
  knob TEXT NOT NULL,
  value,
  PRIMARY KEY(hardware_id, model_id, knob)) WITHOUT ROWID;
)sql");
  Statement pick(db, path, R"sql(
SELECT r.hardware_id, r.model_id, s.id, s.score, r.id, s.time
FROM samples s JOIN runs r ON r.id = s.run_id
WHERE s.phase = 'frozen'
  AND s.id = (SELECT s2.id FROM samples s2 JOIN runs r2 ON r2.id = s2.run_id
              WHERE r2.hardware_id = r.hardware_id AND r2.model_id = r.model_id
                AND s2.phase = 'frozen'
              ORDER BY s2.score DESC, s2.id LIMIT 1))sql");
  Statement best(db, path,
                 "INSERT INTO best(hardware_id, model_id, score, run_id, time) "
                 "VALUES(?, ?, ?, ?, ?)");
  Statement values(
      db, path,
      "INSERT INTO best_values(hardware_id, model_id, knob, value) "
      "SELECT ?, ?, knob, value FROM sample_values WHERE "
      "sample_id = ?");
  while (pick.Step()) {
    best.Reset();
    best.Bind(1, pick.Int(0)).Bind(2, pick.Int(1)).Bind(3, pick.Real(3));
    best.Bind(4, pick.Int(4)).Bind(5, pick.Real(5)).Run();
    values.Reset();
    values.Bind(1, pick.Int(0)).Bind(2, pick.Int(1)).Bind(3, pick.Int(2)).Run();
  }
}

// Version 3: a sample is stored once per (run, index, phase, time), so a
// write retried after a lost answer adds nothing. Duplicates that earlier
// versions stored are removed first, keeping the first written of each.
void MigrateTo3(sqlite3* db, const std::string& path) {
  Exec(db, path, kDropDuplicateSamples);
  Exec(db, path, R"sql(
DROP INDEX samples_run;
CREATE UNIQUE INDEX samples_key ON samples(run_id, idx, phase, time);
)sql");
}

using MigrationStep = void (*)(sqlite3*, const std::string&);
constexpr MigrationStep kMigrations[] = {MigrateTo1, MigrateTo2, MigrateTo3};
static_assert(std::size(kMigrations) ==
              static_cast<std::size_t>(kSchemaVersion));

struct FsName {
  long magic;
  const char* name;
};
// statfs f_type values of file systems shared between hosts.
constexpr FsName kNetworkFs[] = {
    {0x6969, "nfs"},
    {0x0BD00BD0, "lustre"},
    {0x47504653, "gpfs"},
    {static_cast<long>(0xFF534D42), "cifs"},
    {static_cast<long>(0xFE534D42), "smb2"},
    {0x517B, "smb"},
    {0x00C36400, "ceph"},
    {0x19830326, "beegfs"},
    {0x013111A8, "ibrix"},
    {0x5346414F, "afs"},
    {0x6B414653, "afs"},
    {0x7461636f, "ocfs2"},
    {0x01161970, "gfs2"},
};

}  // namespace

std::string DefaultStorePath() {
  if (const char* xdg = std::getenv("XDG_STATE_HOME"); xdg && *xdg) {
    return std::string(xdg) + "/hvdtune/store.db";
  }
  if (const char* home = std::getenv("HOME"); home && *home) {
    return std::string(home) + "/.local/state/hvdtune/store.db";
  }
  return {};
}

std::string NetworkFileSystem(const std::string& path) {
  std::filesystem::path dir = std::filesystem::path(path).parent_path();
  if (dir.empty()) dir = ".";
  struct statfs st {};
  if (statfs(dir.c_str(), &st) != 0) return {};
  for (const FsName& fs : kNetworkFs) {
    if (static_cast<long>(st.f_type) == fs.magic) return fs.name;
  }
  return {};
}

internal::SqliteBackend::SqliteBackend(StoreOptions options)
    : options_(std::move(options)) {
  const std::string& path = options_.path;
  if (path.empty()) throw StoreError("config store: no path given");
  if (!options_.read_only) {
    const auto dir = std::filesystem::path(path).parent_path();
    std::error_code ec;
    if (!dir.empty()) std::filesystem::create_directories(dir, ec);
    if (ec) {
      throw StoreError("config store " + path + ": cannot create directory " +
                       dir.string() + ": " + ec.message());
    }
    network_fs_ = NetworkFileSystem(path);
  }
  const int flags = options_.read_only
                        ? SQLITE_OPEN_READONLY
                        : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
  if (sqlite3_open_v2(path.c_str(), &db_, flags | SQLITE_OPEN_FULLMUTEX,
                      nullptr) != SQLITE_OK) {
    std::string msg = "config store " + path + ": cannot open: " +
                      (db_ ? sqlite3_errmsg(db_) : "out of memory");
    sqlite3_close(db_);
    db_ = nullptr;
    throw StoreError(msg);
  }
  try {
    sqlite3_extended_result_codes(db_, 1);
    sqlite3_busy_timeout(db_, options_.busy_timeout_ms);
    // Reading the version is the first access: a file that is not a
    // database (or is locked exclusively) fails here, before any write.
    const int version = schema_version();
    if (version > kSchemaVersion) {
      throw StoreError(
          "config store " + path + ": schema version " +
          std::to_string(version) + " is newer than this build's (" +
          std::to_string(kSchemaVersion) + "); the file is left untouched");
    }
    if (!options_.read_only) {
      Exec(db_, path,
           network_fs_.empty() ? "PRAGMA journal_mode=WAL"
                               : "PRAGMA journal_mode=DELETE");
      Exec(db_, path, "PRAGMA synchronous=NORMAL");
      Exec(db_, path, "PRAGMA foreign_keys=ON");
      Migrate();
    }
  } catch (...) {
    sqlite3_close(db_);
    db_ = nullptr;
    throw;
  }
}

internal::SqliteBackend::~SqliteBackend() { sqlite3_close(db_); }

int internal::SqliteBackend::schema_version() {
  Statement s(db_, options_.path, "PRAGMA user_version");
  return s.Step() ? static_cast<int>(s.Int(0)) : 0;
}

std::string internal::SqliteBackend::journal_mode() {
  Statement s(db_, options_.path, "PRAGMA journal_mode");
  return s.Step() ? s.Text(0) : std::string();
}

void internal::SqliteBackend::Migrate() {
  if (schema_version() >= options_.target_version) return;
  // One transaction for all steps: a failed migration leaves the file as
  // it was; the version is re-read under the lock (another process may
  // have migrated meanwhile).
  internal::Transaction tx(db_, options_.path);
  const int from = schema_version();
  if (from > kSchemaVersion) {
    throw StoreError("config store " + options_.path + ": schema version " +
                     std::to_string(from) + " is newer than this build's");
  }
  for (int v = from; v < options_.target_version; ++v) {
    kMigrations[v](db_, options_.path);
  }
  Exec(db_, options_.path,
       "PRAGMA user_version=" + std::to_string(options_.target_version));
  tx.Commit();
}

}  // namespace hvdtune::store
