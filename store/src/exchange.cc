// Listing whole pairs and the steps of a merge: what `hvd-tune show`,
// `export` and `import` need (the merge itself is merge.cc's, shared with
// the PostgreSQL backend).
#include <sqlite3.h>

#include <memory>

#include "hvdtune/store/store.h"
#include "sqlite_backend.h"
#include "sqlite_util.h"

namespace hvdtune::store {
namespace {

using internal::Statement;
using internal::Transaction;

}  // namespace

std::vector<PairSummary> internal::SqliteBackend::ListPairs() {
  Statement sel(db_, options_.path, R"sql(
SELECT r.hardware_id, r.model_id, h.text, m.text, COUNT(DISTINCT r.id),
       (SELECT COUNT(*) FROM samples s JOIN runs r2 ON r2.id = s.run_id
        WHERE r2.hardware_id = r.hardware_id AND r2.model_id = r.model_id),
       MIN(r.started),
       MAX(MAX(MAX(r.started, COALESCE(r.ended, 0))),
           COALESCE((SELECT MAX(s.time) FROM samples s JOIN runs r3
                     ON r3.id = s.run_id WHERE r3.hardware_id = r.hardware_id
                     AND r3.model_id = r.model_id), 0))
FROM runs r
JOIN fingerprints h ON h.id = r.hardware_id
JOIN fingerprints m ON m.id = r.model_id
GROUP BY r.hardware_id, r.model_id
ORDER BY 8 DESC, r.hardware_id, r.model_id)sql");
  std::vector<PairSummary> out;
  while (sel.Step()) {
    PairSummary p;
    p.hardware = sel.Int(0);
    p.model = sel.Int(1);
    p.hardware_fp = Fingerprint::FromText(sel.Text(2));
    p.model_fp = Fingerprint::FromText(sel.Text(3));
    p.runs = sel.Int(4);
    p.samples = sel.Int(5);
    p.first = sel.Real(6);
    p.last = sel.Real(7);
    out.push_back(std::move(p));
  }
  for (PairSummary& p : out) p.best = GetBest(p.hardware, p.model);
  return out;
}

std::vector<RunInfo> internal::SqliteBackend::PairRuns(std::int64_t hardware,
                                                       std::int64_t model) {
  Statement sel(db_, options_.path,
                "SELECT id FROM runs WHERE hardware_id = ? AND model_id = ? "
                "ORDER BY started, id");
  sel.Bind(1, hardware).Bind(2, model);
  std::vector<RunInfo> out;
  while (sel.Step()) {
    if (auto r = GetRun(sel.Int(0))) out.push_back(std::move(*r));
  }
  return out;
}

namespace internal {
namespace {

class SqliteWrite final : public WriteTransaction {
 public:
  SqliteWrite(sqlite3* db, const std::string& path) : tx_(db, path) {}
  void Commit() override { tx_.Commit(); }

 private:
  Transaction tx_;
};

}  // namespace

// The steps of Backend::Merge (merge.cc). BEGIN IMMEDIATE holds the file's
// write lock until the merge ends, so the best score read is the one
// replaced.
std::unique_ptr<WriteTransaction> SqliteBackend::Begin() {
  return std::make_unique<SqliteWrite>(db_, options_.path);
}

std::int64_t SqliteBackend::InsertFingerprint(const std::string& kind,
                                              const Fingerprint& fp,
                                              bool* added) {
  return internal::InsertFingerprint(db_, options_.path, kind, fp, added);
}

std::optional<std::int64_t> SqliteBackend::FindRun(std::int64_t hardware,
                                                   std::int64_t model,
                                                   double started) {
  Statement sel(db_, options_.path,
                "SELECT id FROM runs WHERE hardware_id = ? AND model_id = ? "
                "AND started = ? ORDER BY id LIMIT 1");
  sel.Bind(1, hardware).Bind(2, model).Bind(3, started);
  if (!sel.Step()) return std::nullopt;
  return sel.Int(0);
}

std::int64_t SqliteBackend::InsertRun(std::int64_t hardware, std::int64_t model,
                                      const RunInfo& run) {
  Statement ins(db_, options_.path,
                "INSERT INTO runs(hardware_id, model_id, started, ended, "
                "status, version, source) VALUES(?, ?, ?, ?, ?, ?, ?)");
  ins.Bind(1, hardware).Bind(2, model).Bind(3, run.started);
  if (run.ended != 0) ins.Bind(4, run.ended);
  ins.Bind(5, run.status).Bind(6, run.version).Bind(7, run.source).Run();
  return sqlite3_last_insert_rowid(db_);
}

std::optional<double> SqliteBackend::LockBestScore(std::int64_t hardware,
                                                   std::int64_t model) {
  const std::optional<Best> current = GetBest(hardware, model);
  if (!current) return std::nullopt;
  return current->score;
}

void SqliteBackend::WriteBest(std::int64_t hardware, std::int64_t model,
                              const Best& best) {
  internal::WriteBest(db_, options_.path, hardware, model, best);
}

}  // namespace internal

}  // namespace hvdtune::store
