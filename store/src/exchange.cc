// Listing, dumping and merging whole pairs: what `hvd-tune show`, `export`
// and `import` need. A merge is one BEGIN IMMEDIATE transaction, so a
// failure (or a dry run) leaves the file as it was.
#include <sqlite3.h>

#include <algorithm>
#include <tuple>

#include "hvdtune/store/store.h"
#include "sqlite_backend.h"
#include "sqlite_util.h"

namespace hvdtune::store {
namespace {

using internal::Statement;
using internal::Transaction;

using SampleKey = std::tuple<int, std::string, double>;

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

MergeStats internal::SqliteBackend::Merge(const std::vector<PairRecord>& pairs,
                                          bool dry_run) {
  const std::string& path = options_.path;
  MergeStats stats;
  Transaction tx(db_, path);
  Statement find_run(db_, path,
                     "SELECT id FROM runs WHERE hardware_id = ? AND model_id = "
                     "? AND started = ? ORDER BY id LIMIT 1");
  Statement run_ins(db_, path,
                    "INSERT INTO runs(hardware_id, model_id, started, ended, "
                    "status, version, source) VALUES(?, ?, ?, ?, ?, ?, ?)");
  Statement keys(db_, path,
                 "SELECT idx, phase, time FROM samples WHERE run_id = ?");
  Statement sample_ins(db_, path,
                       "INSERT INTO samples(run_id, idx, phase, score, time) "
                       "VALUES(?, ?, ?, ?, ?) ON CONFLICT DO NOTHING");
  Statement value_ins(db_, path,
                      "INSERT INTO sample_values(sample_id, knob, value) "
                      "VALUES(?, ?, ?)");
  for (const PairRecord& pair : pairs) {
    bool hw_added = false, model_added = false;
    const std::int64_t hw = internal::InsertFingerprint(
        db_, path, "hardware", pair.hardware, &hw_added);
    const std::int64_t model = internal::InsertFingerprint(
        db_, path, "model", pair.model, &model_added);
    ++(hw_added || model_added ? stats.pairs_added : stats.pairs_present);
    std::vector<std::int64_t> run_ids;
    for (const RunRecord& run : pair.runs) {
      find_run.Reset();
      find_run.Bind(1, hw).Bind(2, model).Bind(3, run.info.started);
      std::int64_t id = 0;
      std::vector<SampleKey> present;
      if (find_run.Step()) {
        id = find_run.Int(0);
        ++stats.runs_present;
        keys.Reset();
        keys.Bind(1, id);
        while (keys.Step()) {
          present.emplace_back(static_cast<int>(keys.Int(0)), keys.Text(1),
                               keys.Real(2));
        }
      } else {
        run_ins.Reset();
        run_ins.Bind(1, hw).Bind(2, model).Bind(3, run.info.started);
        if (run.info.ended != 0) run_ins.Bind(4, run.info.ended);
        run_ins.Bind(5, run.info.status).Bind(6, run.info.version);
        run_ins.Bind(7, run.info.source).Run();
        id = sqlite3_last_insert_rowid(db_);
        ++stats.runs_added;
      }
      run_ids.push_back(id);
      for (const Sample& s : run.samples) {
        const SampleKey key{s.index, s.phase, s.time};
        if (std::find(present.begin(), present.end(), key) != present.end()) {
          ++stats.samples_present;
          continue;
        }
        sample_ins.Reset();
        sample_ins.Bind(1, id).Bind(2, s.index).Bind(3, s.phase);
        sample_ins.Bind(4, s.score).Bind(5, s.time).Run();
        if (sqlite3_changes(db_) == 0) {  // twice in the document
          ++stats.samples_present;
          continue;
        }
        const std::int64_t sample_id = sqlite3_last_insert_rowid(db_);
        for (const auto& [knob, value] : s.values) {
          value_ins.Reset();
          value_ins.Bind(1, sample_id).Bind(2, knob).Bind(3, value).Run();
        }
        ++stats.samples_added;
      }
    }
    if (!pair.best) continue;
    const std::optional<Best> current = GetBest(hw, model);
    if (current && current->score >= pair.best->score) {
      ++stats.best_kept;
      continue;
    }
    Best best = *pair.best;
    best.run =
        pair.best_run >= 0 && pair.best_run < static_cast<int>(run_ids.size())
            ? run_ids[static_cast<std::size_t>(pair.best_run)]
            : 0;
    internal::WriteBest(db_, path, hw, model, best);
    ++stats.best_set;
  }
  if (!dry_run) tx.Commit();
  return stats;
}

}  // namespace hvdtune::store
