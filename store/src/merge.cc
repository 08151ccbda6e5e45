// Merging exported pairs into a store (`hvd-tune import`): one
// implementation for both backends, over the steps each backend provides,
// in one write transaction, so a failure (or a dry run) leaves the store as
// it was.
#include "backend.h"

namespace hvdtune::store::internal {

MergeStats Backend::Merge(const std::vector<PairRecord>& pairs, bool dry_run) {
  MergeStats stats;
  const std::unique_ptr<WriteTransaction> tx = Begin();
  for (const PairRecord& pair : pairs) {
    bool hw_added = false, model_added = false;
    const std::int64_t hw =
        InsertFingerprint("hardware", pair.hardware, &hw_added);
    const std::int64_t model =
        InsertFingerprint("model", pair.model, &model_added);
    ++(hw_added || model_added ? stats.pairs_added : stats.pairs_present);
    std::vector<std::int64_t> run_ids;
    for (const RunRecord& run : pair.runs) {
      // A run is the same run when the pair and the start time are.
      std::optional<std::int64_t> id = FindRun(hw, model, run.info.started);
      if (id) {
        ++stats.runs_present;
      } else {
        id = InsertRun(hw, model, run.info);
        ++stats.runs_added;
      }
      run_ids.push_back(*id);
      // The samples' unique key (index, phase, time) keeps out what the run
      // has already, and a sample twice in the document.
      for (const Sample& s : run.samples) {
        ++(InsertSample(*id, s) ? stats.samples_added : stats.samples_present);
      }
    }
    if (!pair.best) continue;
    const std::optional<double> current = LockBestScore(hw, model);
    if (current && *current >= pair.best->score) {
      ++stats.best_kept;
      continue;
    }
    Best best = *pair.best;
    best.run =
        pair.best_run >= 0 && pair.best_run < static_cast<int>(run_ids.size())
            ? run_ids[static_cast<std::size_t>(pair.best_run)]
            : 0;
    WriteBest(hw, model, best);
    ++stats.best_set;
  }
  if (!dry_run) tx->Commit();
  return stats;
}

}  // namespace hvdtune::store::internal
