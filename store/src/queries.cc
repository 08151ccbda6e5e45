// The store's reads and writes. Every statement binds its parameters;
// every write is one BEGIN IMMEDIATE transaction.
#include <sqlite3.h>

#include <algorithm>
#include <chrono>

#include "hvdtune/store/store.h"
#include "sqlite_backend.h"
#include "sqlite_util.h"

namespace hvdtune::store {
namespace {

using internal::Statement;
using internal::Transaction;

// A sample the run already has (version 3's unique key: the same index,
// phase and time) is left as it is.
constexpr const char* kInsertSample =
    "INSERT INTO samples(run_id, idx, phase, score, time) "
    "VALUES(?, ?, ?, ?, ?) ON CONFLICT DO NOTHING";

double Now() {
  return std::chrono::duration<double>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

namespace internal {

std::int64_t InsertFingerprint(sqlite3* db, const std::string& path,
                               const std::string& kind, const Fingerprint& fp,
                               bool* added) {
  const std::string hash = fp.Hash();
  Statement ins(db, path,
                "INSERT OR IGNORE INTO fingerprints(kind, hash, text, created) "
                "VALUES(?, ?, ?, ?)");
  ins.Bind(1, kind).Bind(2, hash).Bind(3, fp.Text()).Bind(4, Now()).Run();
  if (added) *added = sqlite3_changes(db) > 0;
  Statement sel(db, path,
                "SELECT id FROM fingerprints WHERE kind = ? AND hash = ?");
  sel.Bind(1, kind).Bind(2, hash);
  if (!sel.Step()) Fail(db, path, "fingerprint vanished");
  return sel.Int(0);
}

}  // namespace internal

std::int64_t internal::SqliteBackend::PutFingerprint(const std::string& kind,
                                                     const Fingerprint& fp) {
  Transaction tx(db_, options_.path);
  const std::int64_t id =
      internal::InsertFingerprint(db_, options_.path, kind, fp, nullptr);
  tx.Commit();
  return id;
}

std::optional<std::int64_t> internal::SqliteBackend::FindFingerprint(
    const std::string& kind, const std::string& hash) {
  Statement sel(db_, options_.path,
                "SELECT id FROM fingerprints WHERE kind = ? AND hash = ?");
  sel.Bind(1, kind).Bind(2, hash);
  if (!sel.Step()) return std::nullopt;
  return sel.Int(0);
}

std::int64_t internal::SqliteBackend::BeginRun(std::int64_t hardware,
                                               std::int64_t model,
                                               const std::string& version,
                                               const std::string& source,
                                               double started) {
  Transaction tx(db_, options_.path);
  Statement ins(db_, options_.path,
                "INSERT INTO runs(hardware_id, model_id, started, status, "
                "version, source) VALUES(?, ?, ?, 'running', ?, ?)");
  ins.Bind(1, hardware).Bind(2, model).Bind(3, started).Bind(4, version);
  ins.Bind(5, source).Run();
  const std::int64_t id = sqlite3_last_insert_rowid(db_);
  tx.Commit();
  return id;
}

void internal::SqliteBackend::EndRun(std::int64_t run,
                                     const std::string& status, double ended) {
  Transaction tx(db_, options_.path);
  Statement up(db_, options_.path,
               "UPDATE runs SET status = ?, ended = ? WHERE id = ?");
  up.Bind(1, status).Bind(2, ended).Bind(3, run).Run();
  tx.Commit();
}

std::optional<RunInfo> internal::SqliteBackend::GetRun(std::int64_t run) {
  Statement sel(db_, options_.path,
                "SELECT id, hardware_id, model_id, started, ended, status, "
                "version, source FROM runs WHERE id = ?");
  sel.Bind(1, run);
  if (!sel.Step()) return std::nullopt;
  RunInfo r;
  r.id = sel.Int(0);
  r.hardware = sel.Int(1);
  r.model = sel.Int(2);
  r.started = sel.Real(3);
  r.ended = sel.IsNull(4) ? 0 : sel.Real(4);
  r.status = sel.Text(5);
  r.version = sel.Text(6);
  r.source = sel.Text(7);
  return r;
}

bool internal::SqliteBackend::InsertSample(std::int64_t run, const Sample& s) {
  Statement ins(db_, options_.path, kInsertSample);
  ins.Bind(1, run).Bind(2, s.index).Bind(3, s.phase).Bind(4, s.score);
  ins.Bind(5, s.time).Run();
  if (sqlite3_changes(db_) == 0) return false;  // the run has it already
  const std::int64_t id = sqlite3_last_insert_rowid(db_);
  Statement val(db_, options_.path,
                "INSERT INTO sample_values(sample_id, knob, value) "
                "VALUES(?, ?, ?)");
  for (const auto& [knob, value] : s.values) {
    val.Reset();
    val.Bind(1, id).Bind(2, knob).Bind(3, value).Run();
  }
  return true;
}

void internal::SqliteBackend::AddSamples(std::int64_t run,
                                         const std::vector<Sample>& samples) {
  if (samples.empty()) return;
  Transaction tx(db_, options_.path);
  for (const Sample& s : samples) InsertSample(run, s);
  tx.Commit();
}

namespace {

// Fills the values of samples whose ids are given, in order.
void LoadValues(sqlite3* db, const std::string& path,
                const std::vector<std::int64_t>& ids,
                std::vector<Sample>& out) {
  Statement val(db, path,
                "SELECT knob, value FROM sample_values WHERE sample_id = ?");
  for (std::size_t i = 0; i < ids.size(); ++i) {
    val.Reset();
    val.Bind(1, ids[i]);
    while (val.Step()) out[i].values[val.Text(0)] = val.Value(1);
  }
}

}  // namespace

std::vector<Sample> internal::SqliteBackend::RunSamples(std::int64_t run) {
  Statement sel(db_, options_.path,
                "SELECT id, idx, phase, score, time FROM samples WHERE "
                "run_id = ? ORDER BY idx, id");
  sel.Bind(1, run);
  std::vector<Sample> out;
  std::vector<std::int64_t> ids;
  while (sel.Step()) {
    ids.push_back(sel.Int(0));
    out.push_back({static_cast<int>(sel.Int(1)),
                   sel.Text(2),
                   {},
                   sel.Real(3),
                   sel.Real(4),
                   run});
  }
  LoadValues(db_, options_.path, ids, out);
  return out;
}

std::vector<Sample> internal::SqliteBackend::PairSamples(std::int64_t hardware,
                                                         std::int64_t model,
                                                         int limit) {
  Statement sel(db_, options_.path,
                "SELECT s.id, s.idx, s.phase, s.score, s.time, s.run_id FROM "
                "samples s JOIN runs r ON r.id = s.run_id WHERE r.hardware_id "
                "= ? AND r.model_id = ? ORDER BY s.id DESC LIMIT ?");
  sel.Bind(1, hardware).Bind(2, model).Bind(3, limit);
  std::vector<Sample> out;
  std::vector<std::int64_t> ids;
  while (sel.Step()) {
    ids.push_back(sel.Int(0));
    out.push_back({static_cast<int>(sel.Int(1)),
                   sel.Text(2),
                   {},
                   sel.Real(3),
                   sel.Real(4),
                   sel.Int(5)});
  }
  std::reverse(ids.begin(), ids.end());
  std::reverse(out.begin(), out.end());
  LoadValues(db_, options_.path, ids, out);
  return out;
}

namespace internal {

void WriteBest(sqlite3* db, const std::string& path, std::int64_t hardware,
               std::int64_t model, const Best& best) {
  Statement up(db, path,
               "INSERT OR REPLACE INTO best(hardware_id, model_id, score, "
               "run_id, time) VALUES(?, ?, ?, ?, ?)");
  up.Bind(1, hardware).Bind(2, model).Bind(3, best.score);
  if (best.run != 0) up.Bind(4, best.run);
  up.Bind(5, best.time).Run();
  Statement del(
      db, path,
      "DELETE FROM best_values WHERE hardware_id = ? AND model_id = ?");
  del.Bind(1, hardware).Bind(2, model).Run();
  Statement ins(db, path,
                "INSERT INTO best_values(hardware_id, model_id, knob, value) "
                "VALUES(?, ?, ?, ?)");
  for (const auto& [knob, value] : best.values) {
    ins.Reset();
    ins.Bind(1, hardware).Bind(2, model).Bind(3, knob).Bind(4, value).Run();
  }
}

}  // namespace internal

void internal::SqliteBackend::SetBest(std::int64_t hardware, std::int64_t model,
                                      const Best& best) {
  Transaction tx(db_, options_.path);
  internal::WriteBest(db_, options_.path, hardware, model, best);
  tx.Commit();
}

std::optional<Best> internal::SqliteBackend::GetBest(std::int64_t hardware,
                                                     std::int64_t model) {
  Statement sel(db_, options_.path,
                "SELECT score, run_id, time FROM best WHERE hardware_id = ? "
                "AND model_id = ?");
  sel.Bind(1, hardware).Bind(2, model);
  if (!sel.Step()) return std::nullopt;
  Best b;
  b.score = sel.Real(0);
  b.run = sel.IsNull(1) ? 0 : sel.Int(1);
  b.time = sel.Real(2);
  Statement val(db_, options_.path,
                "SELECT knob, value FROM best_values WHERE hardware_id = ? "
                "AND model_id = ?");
  val.Bind(1, hardware).Bind(2, model);
  while (val.Step()) b.values[val.Text(0)] = val.Value(1);
  return b;
}

std::vector<KnownPair> internal::SqliteBackend::KnownPairs() {
  Statement sel(db_, options_.path, R"sql(
SELECT r.hardware_id, r.model_id, h.text, m.text, COUNT(s.id)
FROM runs r
JOIN fingerprints h ON h.id = r.hardware_id
JOIN fingerprints m ON m.id = r.model_id
JOIN samples s ON s.run_id = r.id
GROUP BY r.hardware_id, r.model_id)sql");
  std::vector<KnownPair> out;
  while (sel.Step()) {
    out.push_back({sel.Int(0), sel.Int(1), Fingerprint::FromText(sel.Text(2)),
                   Fingerprint::FromText(sel.Text(3)), sel.Int(4)});
  }
  return out;
}

std::string internal::SqliteBackend::IntegrityCheck() {
  Statement sel(db_, options_.path, "PRAGMA integrity_check");
  return sel.Step() ? sel.Text(0) : std::string("no answer");
}

}  // namespace hvdtune::store
