// What a sweep found, and how rank 0 shows it: the progress line while it
// runs, then the ranked table, CSV and JSON.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "common.h"
#include "hvdtune/knobs.h"

namespace hvdtune::cli {

struct PointResult {
  KnobSettings knobs;
  /// One score per visit (bytes reduced per second: median of the visit's
  /// step throughputs, as the online autotuner scores a sample).
  std::vector<double> scores;
  double median = 0;
  /// (max - min) / median of the scores.
  double spread = 0;
  /// Scores of the confirmation rounds (the leaders only) and their median.
  std::vector<double> confirm;
  double confirmed = 0;
};

struct SweepResult {
  std::string workload;
  std::string strategy;
  std::string fingerprint;
  std::string store_path;  // empty: not stored
  int ranks = 0;
  std::int64_t bytes_per_step = 0;
  /// Training samples per step (batch size x ranks), for samples/s.
  double samples_per_step = 0;
  int repeats = 0;
  int confirm_rounds = 0;
  int steps_per_sample = 0;
  double seconds = 0;
  /// Best first.
  std::vector<PointResult> points;
  /// The knobs that differ between points (the table's columns).
  std::vector<KnobId> varied;
};

/// Fills medians and spread and sorts best first: confirmed points by their
/// confirmation median, then the others by their median.
void RankPoints(std::vector<PointResult>& points);

/// Rank 0's progress: a bar with the ETA on a terminal, a plain line per
/// sample otherwise.
class Progress {
 public:
  Progress(int total, bool tty);
  void Sample(int done, const std::string& knobs, double score, double best);
  void Finish();

 private:
  int total_;
  bool tty_;
  std::chrono::steady_clock::time_point start_;
};

void PrintTable(const SweepResult& r, int top);
void WriteCsv(const SweepResult& r, const std::string& path);
Json SweepJson(const SweepResult& r);

/// "fusion_threshold=16777216 cycle_time=0.5" for the given knobs.
std::string KnobsText(const KnobSettings& k, const std::vector<KnobId>& ids);

}  // namespace hvdtune::cli
