// The conditions earlier runs of a job froze under (a link speed, a load),
// read back from the config store's samples: no schema of their own.
#pragma once

#include <cstddef>
#include <vector>

#include "hvdtune/store/store.h"

namespace hvdtune::internal {

/// One frozen segment of stored samples: the configuration frozen on and
/// its scores there, oldest first.
struct StoredCondition {
  store::KnobValues values;
  std::vector<double> scores;
};

constexpr std::size_t kMaxStoredConditions = 4;

/// Splits one pair's samples (oldest first, as Store::Lookup returns them)
/// into frozen segments: maximal runs of one run's consecutive samples of
/// phase "frozen" with equal values whose indexes count up by one (an index
/// that does not is a sample that was lost: a new segment). Runs are told
/// apart by Sample::run, so jobs that wrote at once, their samples
/// interleaved, still form their segments.
/// Each segment is a condition. A segment that a re-tune ended (the next
/// sample, index + 1, has phase "retuning") loses its trailing samples that
/// lie beyond 3 spreads (1.4826 x the median absolute deviation of its log
/// scores) from its median on the side the last one moved to: the re-tune
/// was about them, measured under the conditions that followed. Scores
/// that are not positive are left out, and segments left empty. The
/// result: newest first, one per configuration (its newest segment), at
/// most `max`; with `best` given, its condition comes first (its newest
/// segment, or where none is left among the samples, its stored score
/// alone).
std::vector<StoredCondition> SplitStoredConditions(
    const std::vector<store::Sample>& samples, const store::Best* best,
    std::size_t max = kMaxStoredConditions);

}  // namespace hvdtune::internal
