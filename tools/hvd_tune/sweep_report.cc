#include "sweep_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>

namespace hvdtune::cli {
namespace {

double MedianOf(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

std::string Duration(double seconds) {
  const int s = static_cast<int>(seconds + 0.5);
  return s >= 60 ? fmt::format("{}m{:02}s", s / 60, s % 60)
                 : fmt::format("{}s", s);
}

std::string CsvField(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

}  // namespace

void RankPoints(std::vector<PointResult>& points) {
  for (PointResult& p : points) {
    p.median = MedianOf(p.scores);
    const auto [lo, hi] = std::minmax_element(p.scores.begin(), p.scores.end());
    p.spread = p.scores.empty() || p.median <= 0 ? 0 : (*hi - *lo) / p.median;
    p.confirmed = MedianOf(p.confirm);
  }
  std::erase_if(points, [](const PointResult& p) { return p.scores.empty(); });
  std::stable_sort(points.begin(), points.end(),
                   [](const PointResult& a, const PointResult& b) {
                     if (a.confirm.empty() != b.confirm.empty()) {
                       return !a.confirm.empty();
                     }
                     return a.confirm.empty() ? a.median > b.median
                                              : a.confirmed > b.confirmed;
                   });
}

std::string KnobsText(const KnobSettings& k, const std::vector<KnobId>& ids) {
  std::string out;
  for (KnobId id : ids) {
    if (!out.empty()) out += ' ';
    out += std::string(GetKnobSpec(id).name) + "=" + k.FormatValue(id);
  }
  return out;
}

Progress::Progress(int total, bool tty)
    : total_(total), tty_(tty), start_(std::chrono::steady_clock::now()) {}

void Progress::Sample(int done, const std::string& knobs, double score,
                      double best) {
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_)
          .count();
  const double eta = done > 0 ? elapsed / done * (total_ - done) : 0;
  if (tty_) {
    constexpr int kWidth = 30;
    const int filled = total_ > 0 ? kWidth * done / total_ : kWidth;
    fmt::print("\r[{}{}] {}/{}  {} elapsed, ETA {}  best {}   ",
               std::string(static_cast<std::size_t>(filled), '#'),
               std::string(static_cast<std::size_t>(kWidth - filled), '.'),
               done, total_, Duration(elapsed), Duration(eta),
               FormatRate(best));
  } else {
    fmt::print("sample {}/{} {}: {} (best {}, ETA {})\n", done, total_, knobs,
               FormatRate(score), FormatRate(best), Duration(eta));
  }
  std::fflush(stdout);
}

void Progress::Finish() {
  if (tty_) fmt::print("\n");
  std::fflush(stdout);
}

void PrintTable(const SweepResult& r, int top) {
  const double per_byte =
      r.bytes_per_step > 0 ? r.samples_per_step / r.bytes_per_step : 0;
  const bool confirmed_any =
      std::any_of(r.points.begin(), r.points.end(),
                  [](const PointResult& p) { return !p.confirm.empty(); });
  fmt::print(
      "\n{} sweep of {} on {} ranks: {} configurations x {} repeats of {} "
      "steps{}, in {}\n",
      r.strategy, r.workload, r.ranks, r.points.size(), r.repeats,
      r.steps_per_sample,
      confirmed_any ? fmt::format(", the leaders confirmed over {} more rounds",
                                  r.confirm_rounds)
                    : std::string(),
      Duration(r.seconds));
  std::string header = fmt::format("{:>4}", "rank");
  for (KnobId id : r.varied) {
    header += fmt::format("  {:>20}", GetKnobSpec(id).name);
  }
  header += fmt::format("  {:>8}  {:>10}  {:>7}  {:>3}  {:>9}", "GB/s",
                        "samples/s", "spread", "n", "confirmed");
  fmt::print("{}\n", header);
  const int rows = std::min(top, static_cast<int>(r.points.size()));
  for (int i = 0; i < rows; ++i) {
    const PointResult& p = r.points[static_cast<std::size_t>(i)];
    std::string line = fmt::format("{:>4}", i + 1);
    for (KnobId id : r.varied) {
      line += fmt::format("  {:>20}", p.knobs.FormatValue(id));
    }
    line += fmt::format(
        "  {:>8.3f}  {:>10.1f}  {:>6.1f}%  {:>3}  {:>9}", p.median / 1e9,
        p.median * per_byte, p.spread * 100, p.scores.size(),
        p.confirm.empty() ? std::string("-")
                          : fmt::format("{:.3f}", p.confirmed / 1e9));
    fmt::print("{}\n", line);
  }
  if (rows < static_cast<int>(r.points.size())) {
    fmt::print("  ... {} more (--top, --csv or --json for all)\n",
               r.points.size() - static_cast<std::size_t>(rows));
  }
  if (r.points.empty()) return;
  const PointResult& best = r.points.front();
  const bool confirmed = !best.confirm.empty();
  fmt::print("\nbest: {} ({:.1f} samples/s, median of {} {})\n  {}\n",
             FormatRate(confirmed ? best.confirmed : best.median),
             (confirmed ? best.confirmed : best.median) * per_byte,
             confirmed ? best.confirm.size() : best.scores.size(),
             confirmed ? "confirmation rounds" : "samples",
             best.knobs.ToString());
  fmt::print("fingerprint: {}\n", r.fingerprint);
  if (!r.store_path.empty()) {
    fmt::print(
        "stored in {}: a job with this fingerprint starts from this "
        "configuration;\n  eval \"$(hvd-tune best --db {} {})\" pins it\n",
        r.store_path, r.store_path, r.fingerprint);
  }
  std::fflush(stdout);
}

void WriteCsv(const SweepResult& r, const std::string& path) {
  std::ofstream out(path, std::ios::trunc);
  out << "rank";
  for (const KnobSpec& spec : KnobTable()) out << "," << spec.name;
  out << ",score,score_min,score_max,spread,samples,confirmed\n";
  int rank = 0;
  for (const PointResult& p : r.points) {
    out << ++rank;
    for (const KnobSpec& spec : KnobTable()) {
      out << "," << CsvField(EnvText(spec, p.knobs.Get(spec.id)));
    }
    const auto [lo, hi] = std::minmax_element(p.scores.begin(), p.scores.end());
    out << "," << ExactNumber(p.median) << "," << ExactNumber(*lo) << ","
        << ExactNumber(*hi) << "," << ExactNumber(p.spread) << ","
        << p.scores.size() << ","
        << (p.confirm.empty() ? "" : ExactNumber(p.confirmed)) << "\n";
  }
  out.close();
  if (!out) throw Failure("--csv: cannot write '" + path + "'");
}

Json SweepJson(const SweepResult& r) {
  Json points = Json::array();
  for (const PointResult& p : r.points) {
    points.push_back(
        {{"knobs", KnobsJson(p.knobs)},
         {"score", p.median},
         {"spread", p.spread},
         {"scores", p.scores},
         {"confirmed", p.confirm.empty() ? Json() : Json(p.confirmed)},
         {"confirm_scores", p.confirm}});
  }
  Json varied = Json::array();
  for (KnobId id : r.varied) varied.push_back(GetKnobSpec(id).name);
  return {{"workload", r.workload},
          {"strategy", r.strategy},
          {"ranks", r.ranks},
          {"fingerprint", r.fingerprint},
          {"store", r.store_path.empty() ? Json() : Json(r.store_path)},
          {"bytes_per_step", r.bytes_per_step},
          {"samples_per_step", r.samples_per_step},
          {"repeats", r.repeats},
          {"confirm_rounds", r.confirm_rounds},
          {"steps_per_sample", r.steps_per_sample},
          {"seconds", r.seconds},
          {"varied", varied},
          {"best", r.points.empty() ? Json() : points.front()},
          {"points", points}};
}

}  // namespace hvdtune::cli
