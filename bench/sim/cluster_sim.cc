// cluster_sim: the cluster simulator's command line.
//   --simulate   step time and throughput of one configuration
//   --calibrate  predicted vs measured on this machine (--fit refits first)
//   (default)    tuner at scale: regret of each optimizer per scenario
// See docs/simulator.md.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <cmath>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>

#include "bench_common.h"
#include "calibration.h"
#include "hvdtune/workloads/builtin.h"
#include "scale.h"
#include "svg_plot.h"

namespace hs = hvdtune::sim;
using hvdtune::KnobSettings;

namespace {

double Quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  const double pos = q * (v.size() - 1);
  const std::size_t lo = static_cast<std::size_t>(std::floor(pos));
  const std::size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (pos - lo) * (v[hi] - v[lo]);
}

// The median of figures that may be +inf ("never"): +inf when the upper of
// the middle two is.
double MedianOrNever(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  if (std::isinf(v[v.size() / 2])) return INFINITY;
  return Quantile(v, 0.5);
}

// fn(0) .. fn(n - 1) on `jobs` threads (this one included), each index
// once, in no particular order.
template <typename Fn>
void ParallelFor(std::size_t n, int jobs, const Fn& fn) {
  std::atomic<std::size_t> next{0};
  auto worker = [&] {
    for (std::size_t i; (i = next++) < n;) fn(i);
  };
  std::vector<std::thread> threads;
  for (int j = 1; j < jobs; ++j) threads.emplace_back(worker);
  worker();
  for (auto& t : threads) t.join();
}

void PrintCalibration(const std::vector<hs::CalibrationRow>& rows) {
  fmt::print(
      "| bench | size / workload | algorithm | measured ms | predicted ms | "
      "error |\n");
  fmt::print("|---|---|---|---|---|---|\n");
  int within = 0;
  std::vector<double> errors;
  for (const auto& r : rows) {
    fmt::print("| {} | {} | {} | {:.3g} | {:.3g} | {:+.0f}% |\n", r.bench,
               r.workload, r.algorithm, r.measured_s * 1e3, r.predicted_s * 1e3,
               r.error() * 100);
    within += std::abs(r.error()) <= 0.25;
    errors.push_back(std::abs(r.error()));
  }
  fmt::print(
      "\n{} of {} rows within 25%; median |error| {:.1f}%, max {:.1f}%\n",
      within, rows.size(), Quantile(errors, 0.5) * 100,
      *std::max_element(errors.begin(), errors.end()) * 100);
}

void PrintSummary(const char* what, const hs::ErrorSummary& e) {
  fmt::print("{}: {} of {} within 25%; median |error| {:.1f}%, max {:.1f}%\n",
             what, e.within_25, e.rows, e.median * 100, e.max * 100);
}

// Prediction on rows the fit did not see: the emulated cluster's constants
// refitted from an unfitted start without the rows they predict.
void PrintHeldOut(const std::string& shapes) {
  fmt::print(
      "\nHeld out, leave one workload out (per link: fitted on the other two "
      "workloads' 6 rows, predicting the third's 3):\n\n");
  std::vector<hs::CalibrationRow> all;
  for (const std::string& link : hs::EmulatedLinks()) {
    const auto rows = hs::HeldOutWorkloads(link, shapes);
    fmt::print("{}:\n\n", link);
    PrintCalibration(rows);
    fmt::print("\n");
    all.insert(all.end(), rows.begin(), rows.end());
  }
  PrintSummary("leave one workload out, both links", hs::SummariseErrors(all));
  fmt::print(
      "\nHeld out, across links (fitted on one link's 9 rows; segment and "
      "per-tensor costs carried over, bandwidth = the other link's nominal "
      "rate):\n\n");
  std::vector<hs::CalibrationRow> cross;
  for (const std::string& fit_link : hs::EmulatedLinks()) {
    for (const std::string& link : hs::EmulatedLinks()) {
      if (link == fit_link) continue;
      const auto rows = hs::HeldOutLink(fit_link, link, shapes);
      fmt::print("{} predicted from {}:\n\n", link, fit_link);
      PrintCalibration(rows);
      fmt::print("\n");
      cross.insert(cross.end(), rows.begin(), rows.end());
    }
  }
  PrintSummary("across links, both directions", hs::SummariseErrors(cross));
  all.insert(all.end(), cross.begin(), cross.end());
  PrintSummary("every held-out row", hs::SummariseErrors(all));
}

int RunCalibrate(bool fit, const std::string& shapes) {
  hs::Preset shm = hs::FindPreset("cpu-shm"),
             loop = hs::FindPreset("cpu-loopback");
  if (fit) {
    hs::FitPresets(shm, loop, shapes);
    fmt::print("fitted constants (cpu-shm; cpu-loopback shares them):\n");
    fmt::print(
        "  intra_alpha {:.3g} s, intra_bw {:.3g} B/s, reduce_bw {:.3g} B/s, "
        "copy_bw {:.3g} B/s\n  call_s {:.3g}, segment_s {:.3g}, cycle_s "
        "{:.3g}, "
        "tensor_s {:.3g}, cached_s {:.3g}, request_s {:.3g}\n"
        "  loopback inter_alpha {:.3g} s, inter_bw {:.3g} B/s\n\n",
        shm.intra_alpha, shm.intra_bw, shm.reduce_bw, shm.copy_bw, shm.call_s,
        shm.segment_s, shm.cycle_s, shm.tensor_s, shm.cached_s, shm.request_s,
        loop.inter_alpha, loop.inter_bw);
  }
  PrintCalibration(hs::Calibrate(shm, loop, shapes));
  for (const std::string& link : hs::EmulatedLinks()) {
    hs::Preset p = hs::FindPreset(hs::EmulatedPresetName(link));
    if (fit) {
      hs::FitLink(p, link, shapes);
      fmt::print(
          "\nfitted {}: inter_bw {:.3g} B/s, segment_s {:.3g}, tensor_s "
          "{:.3g} (inter_alpha {:.3g} s held)\n",
          p.name, p.inter_bw, p.segment_s, p.tensor_s, p.inter_alpha);
    }
    fmt::print("\n{} against the emulated cluster on {}:\n\n", p.name, link);
    PrintCalibration(hs::CalibrateCluster(p, link, shapes));
  }
  PrintHeldOut(shapes);
  return 0;
}

int RunSimulate(const std::string& preset, int nodes, int rpn,
                const std::string& workload,
                const std::vector<std::string>& sets, const std::string& shapes,
                bool json) {
  KnobSettings k;
  for (const std::string& s : sets) {
    const auto eq = s.find('=');
    const auto id = hvdtune::FindKnob(s.substr(0, eq));
    if (eq == std::string::npos || !id) {
      throw hvdtune::bench::UsageError("--set: expected knob=value, got '" + s +
                                       "'");
    }
    k.Set(*id,
          hvdtune::ParseKnobValue(hvdtune::GetKnobSpec(*id), s.substr(eq + 1)));
  }
  const hs::Workload w = hs::MakeWorkload(workload, shapes);
  const hs::StepResult r =
      hs::SimulateStep(hs::FindPreset(preset), {nodes, rpn}, w, k);
  if (json) {
    std::cout << nlohmann::json{{"preset", preset},
                                {"nodes", nodes},
                                {"ranks_per_node", rpn},
                                {"workload", workload},
                                {"knobs", k.ToString()},
                                {"step_ms", r.step_s * 1e3},
                                {"samples_per_sec", r.samples_per_s},
                                {"cycles", r.cycles},
                                {"calls", r.calls}}
                     .dump()
              << "\n";
  } else {
    fmt::print(
        "{} on {} x {} ({}), {}\n  step {:.3f} ms, {:.1f} samples/s, "
        "{} cycles with work, {} backend calls\n",
        workload, nodes, rpn, preset, k.ToString(), r.step_s * 1e3,
        r.samples_per_s, r.cycles, r.calls);
  }
  return 0;
}

struct ScaleOptions {
  int seeds = 30;
  /// The scale table's seeds are first_seed .. first_seed + seeds - 1: a
  /// second set checks that a result is not one set's luck.
  int first_seed = 0;
  /// How every optimizer's sample is measured (Problem::set_steps_per_sample,
  /// set_sample_precision): by default as the runtime measures one.
  int steps_per_sample =
      hvdtune::tuner::AutotunePolicySettings{}.steps_per_sample;
  double sample_precision =
      hvdtune::tuner::AutotunePolicySettings{}.sample_precision;
  int jobs = 1;
  bool json = false;
  std::vector<std::string> scenarios, optimizers;
  /// GP model options of hvdtune's runs (hs::ModelOptionNames()).
  std::vector<std::string> model;
  std::string svg;
};

// How the scale table's samples are measured, for its heading.
std::string SampleRuleText(const ScaleOptions& o) {
  if (o.sample_precision > 0) {
    return fmt::format(
        "; a sample is at least {} steps, more until its median is within "
        "{:g}%",
        o.steps_per_sample, 100 * o.sample_precision);
  }
  return o.steps_per_sample == 1
             ? std::string("; a sample is one step")
             : fmt::format("; a sample is {} steps", o.steps_per_sample);
}

// hvdtune's cost of tuning per scenario, medians over seeds of its
// kCostBudget-sample runs (noiseless scores, hs::CostOf).
template <typename Task>
void PrintTuningCost(const ScaleOptions& o,
                     const std::vector<hs::Problem>& problems,
                     const std::vector<std::string>& optimizers,
                     const std::vector<double>& fstar,
                     const std::vector<Task>& tasks) {
  const auto it = std::find(optimizers.begin(), optimizers.end(), "hvdtune");
  if (it == optimizers.end()) return;
  const std::size_t a = it - optimizers.begin();
  const int budget = hs::kCostBudget;
  if (!o.json) {
    fmt::print(
        "\nhvdtune's cost of tuning at {0} samples, median over seeds "
        "(noiseless scores): explore cost = mean over the exploration "
        "samples of (f* - f(x)) / f*; gain = f(frozen) / f(default); loss = "
        "sum over them of seconds x (1 - f(x) / f(default)); payback = loss "
        "/ (gain - 1) seconds of training after the freeze (never: gain <= 1 "
        "with loss > 0)\n\n"
        "| scenario | best / default | explore cost @{0} | gain @{0} | "
        "loss @{0} (s) | payback @{0} (s) | never paid back |\n"
        "|---|---|---|---|---|---|---|\n",
        budget);
  }
  auto seconds = [](double s) {
    return std::isinf(s) ? std::string("never") : fmt::format("{:.2f}", s);
  };
  for (std::size_t p = 0; p < problems.size(); ++p) {
    std::vector<double> cost, gain, loss, payback;
    int never = 0;
    for (const Task& t : tasks) {
      if (t.problem != p || t.optimizer != a) continue;
      const hs::TuningCost c = hs::CostOf(t.exploration, fstar[p]);
      cost.push_back(c.explore_cost);
      gain.push_back(c.gain);
      loss.push_back(c.loss_seconds);
      payback.push_back(c.payback_seconds);
      never += std::isinf(c.payback_seconds);
    }
    const hs::Problem& pr = problems[p];
    const std::string& name = pr.scenario().name;
    const double med_payback = MedianOrNever(payback);
    if (o.json) {
      nlohmann::ordered_json row{{"scenario", name},
                                 {"optimizer", "hvdtune"},
                                 {"samples", budget},
                                 {"median_explore_cost", Quantile(cost, 0.5)},
                                 {"median_gain", Quantile(gain, 0.5)},
                                 {"median_loss_seconds", Quantile(loss, 0.5)},
                                 {"median_payback_seconds", nullptr},
                                 {"never_paid_back", never},
                                 {"seeds", o.seeds}};
      if (!std::isinf(med_payback)) row["median_payback_seconds"] = med_payback;
      std::cout << row.dump() << "\n";
    } else {
      fmt::print(
          "| {} | {:.3f}x | {:.4f} | {:.4f}x | {:.3f} | {} | {} / {} |\n", name,
          fstar[p] / pr.Score(pr.default_config()), Quantile(cost, 0.5),
          Quantile(gain, 0.5), Quantile(loss, 0.5), seconds(med_payback), never,
          cost.size());
    }
  }
  std::cout.flush();
}

int RunScale(const ScaleOptions& o, const std::string& shapes) {
  std::vector<hs::Scenario> scenarios;
  for (const hs::Scenario& s : hs::DefaultScenarios()) {
    if (o.scenarios.empty() || std::find(o.scenarios.begin(), o.scenarios.end(),
                                         s.name) != o.scenarios.end())
      scenarios.push_back(s);
  }
  if (scenarios.empty())
    throw hvdtune::bench::UsageError("--scenarios: no such scenario");
  const std::vector<std::string> optimizers =
      o.optimizers.empty() ? hs::OptimizerNames() : o.optimizers;
  std::vector<hs::Problem> problems;
  for (const auto& s : scenarios) {
    problems.emplace_back(s, shapes);
    problems.back().set_model_options(o.model);
    problems.back().set_steps_per_sample(o.steps_per_sample);
    problems.back().set_sample_precision(o.sample_precision);
  }
  // Tasks: (problem, optimizer, seed) -> incumbents; the optimum per problem.
  struct Task {
    std::size_t problem, optimizer;
    int seed;
    hs::Incumbents result;
    hs::Exploration exploration;  // hvdtune's run at kCostBudget samples
  };
  std::vector<Task> tasks;
  for (std::size_t p = 0; p < problems.size(); ++p)
    for (std::size_t a = 0; a < optimizers.size(); ++a)
      for (int s = 0; s < o.seeds; ++s)
        tasks.push_back({p, a, o.first_seed + s, {}, {}});
  std::vector<hvdtune::tuner::Config> optimum(problems.size());
  // The optima and the tuning runs in one pool: neither needs the other.
  ParallelFor(problems.size() + tasks.size(), o.jobs, [&](std::size_t i) {
    if (i < problems.size()) {
      optimum[i] = problems[i].SearchOptimum();
      return;
    }
    Task& t = tasks[i - problems.size()];
    t.result = hs::RunOptimizer(optimizers[t.optimizer], problems[t.problem],
                                1000 + t.seed, &t.exploration);
  });

  std::vector<hs::Panel> panels;
  std::vector<double> fstar(problems.size());
  if (!o.json) {
    fmt::print(
        "{} seeds{}{}; regret (f* - f(x)) / f* of the incumbent, median / "
        "p90\n",
        o.seeds,
        o.first_seed == 0 ? std::string()
                          : fmt::format(" from seed {}", o.first_seed),
        SampleRuleText(o));
  }
  for (std::size_t p = 0; p < problems.size(); ++p) {
    const hs::Problem& pr = problems[p];
    // f*: the searched optimum, or anything an optimizer found that is better.
    double best = pr.Score(optimum[p]);
    for (const Task& t : tasks)
      if (t.problem == p)
        for (const auto& c : t.result) best = std::max(best, pr.Score(c));
    fstar[p] = best;
    const double def = pr.Score(pr.default_config());
    const hs::Scenario& sc = pr.scenario();
    if (!o.json) {
      fmt::print(
          "\n{}: {} x {} = {} ranks, {}, {}, noise {:.0f}%; best/default "
          "{:.3f}x, "
          "{:.1f}% of the space within 3% of best\n  best: {}\n",
          sc.name, sc.cluster.nodes, sc.cluster.ranks_per_node,
          sc.cluster.world(), sc.preset, sc.workload, sc.noise * 100,
          best / def, 100 * pr.GoodFraction(best, 0.03, 2000),
          pr.Knobs(optimum[p]).ToString());
    }
    hs::Panel panel{fmt::format("{} ({:.2f}x)", sc.name, best / def), {}};
    for (std::size_t a = 0; a < optimizers.size(); ++a) {
      hs::Series series{optimizers[a], {}, {}};
      std::string line = fmt::format("  {:<14}", optimizers[a]);
      for (std::size_t k = 0; k < std::size(hs::kCheckpoints); ++k) {
        std::vector<double> r;
        for (const Task& t : tasks)
          if (t.problem == p && t.optimizer == a)
            r.push_back(std::max(0.0, (best - pr.Score(t.result[k])) / best));
        const double med = Quantile(r, 0.5), p90 = Quantile(r, 0.9);
        series.x.push_back(hs::kCheckpoints[k]);
        series.y.push_back(med);
        if (o.json) {
          std::cout << nlohmann::ordered_json{{"scenario", sc.name},
                                              {"optimizer", optimizers[a]},
                                              {"samples", hs::kCheckpoints[k]},
                                              {"median_regret", med},
                                              {"p90_regret", p90}}
                           .dump()
                    << "\n";
        } else {
          line += fmt::format("  @{}: {:.4f} / {:.4f}", hs::kCheckpoints[k],
                              med, p90);
        }
      }
      if (!o.json) fmt::print("{}\n", line);
      panel.series.push_back(series);
    }
    panels.push_back(panel);
    std::cout.flush();
  }
  PrintTuningCost(o, problems, optimizers, fstar, tasks);
  if (!o.svg.empty()) {
    std::ofstream out(o.svg);
    out << hs::RenderSvg(
        fmt::format("Median regret vs samples ({} seeds; best/default "
                    "speed-up in brackets)",
                    o.seeds),
        panels, 4, 1e-4, 1.0, "samples", "median regret (log)");
    if (!out) throw std::runtime_error("cannot write " + o.svg);
  }
  return 0;
}

// Transfer: every scenario on more than one node as the source job, the
// same workload and preset on twice the nodes as the target (a new
// fingerprint: another world size). Per seed, the source tunes once and
// its samples become the target's priors; the target then tunes with and
// without them (same seed), and each run counts the samples until one
// lies within 5% of the target's best.
int RunTransfer(const ScaleOptions& o, const std::string& shapes) {
  constexpr int kSourceBudget = 20, kTargetBudget = 40;
  constexpr double kGoal = 0.95;
  std::vector<hs::Problem> sources, targets;
  for (const hs::Scenario& s : hs::DefaultScenarios()) {
    if (s.cluster.nodes < 2) continue;  // one node has no hierarchical knob
    if (!o.scenarios.empty() &&
        std::find(o.scenarios.begin(), o.scenarios.end(), s.name) ==
            o.scenarios.end())
      continue;
    hs::Scenario t = s;
    t.cluster.nodes *= 2;
    sources.emplace_back(s, shapes);
    targets.emplace_back(t, shapes);
  }
  if (sources.empty())
    throw hvdtune::bench::UsageError(
        "--scenarios: no such scenario on more than one node");
  struct Task {
    std::size_t problem;
    int seed;
    int with = 0, without = 0;
  };
  std::vector<Task> tasks;
  for (std::size_t p = 0; p < sources.size(); ++p)
    for (int s = 0; s < o.seeds; ++s) tasks.push_back({p, s});
  std::vector<double> goal(sources.size());
  // The goals first (every task needs its problem's), then the tasks.
  ParallelFor(goal.size(), o.jobs, [&](std::size_t i) {
    goal[i] = kGoal * targets[i].Score(targets[i].SearchOptimum());
  });
  ParallelFor(tasks.size(), o.jobs, [&](std::size_t i) {
    Task& t = tasks[i];
    const auto priors =
        hs::SourceSamples(sources[t.problem], 5000 + t.seed, kSourceBudget);
    t.with = hs::SamplesToReach(targets[t.problem], 1000 + t.seed,
                                kTargetBudget, priors, goal[t.problem]);
    t.without = hs::SamplesToReach(targets[t.problem], 1000 + t.seed,
                                   kTargetBudget, {}, goal[t.problem]);
  });
  if (!o.json) {
    fmt::print(
        "transfer to twice the nodes, {} seeds: samples (warm-up included) "
        "until one is within {:.0f}% of the target's best; the source tuned "
        "{} samples, the target has {}; median / p90, not reached = {}\n\n"
        "| scenario | target ranks | best/default | with transfer | fresh | "
        "reached (transfer / fresh) |\n|---|---|---|---|---|---|\n",
        o.seeds, (1 - kGoal) * 100, kSourceBudget, kTargetBudget,
        kTargetBudget + 1);
  }
  for (std::size_t p = 0; p < sources.size(); ++p) {
    std::vector<double> with, without;
    int with_reached = 0, without_reached = 0;
    for (const Task& t : tasks) {
      if (t.problem != p) continue;
      with.push_back(t.with ? t.with : kTargetBudget + 1);
      without.push_back(t.without ? t.without : kTargetBudget + 1);
      with_reached += t.with > 0;
      without_reached += t.without > 0;
    }
    const hs::Scenario& sc = sources[p].scenario();
    const int world = targets[p].scenario().cluster.world();
    const double gap =
        goal[p] / kGoal / targets[p].Score(targets[p].default_config());
    if (o.json) {
      for (int m = 0; m < 2; ++m) {
        const auto& v = m ? without : with;
        std::cout
            << nlohmann::ordered_json{{"scenario", sc.name},
                                      {"source_world", sc.cluster.world()},
                                      {"target_world", world},
                                      {"mode", m ? "fresh" : "transfer"},
                                      {"median_samples", Quantile(v, 0.5)},
                                      {"p90_samples", Quantile(v, 0.9)},
                                      {"reached",
                                       m ? without_reached : with_reached},
                                      {"seeds", o.seeds}}
                   .dump()
            << "\n";
      }
    } else {
      fmt::print(
          "| {} | {} | {:.2f}x | {:g} / {:g} | {:g} / {:g} | {} / {} |\n",
          sc.name, world, gap, Quantile(with, 0.5), Quantile(with, 0.9),
          Quantile(without, 0.5), Quantile(without, 0.9), with_reached,
          without_reached);
    }
    std::cout.flush();
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "cluster_sim: alpha-beta cluster simulator and tuner-at-scale benchmark"};
  hvdtune::bench::ConfigureApp(app);
  bool calibrate = false, fit = false, simulate = false, transfer = false;
  ScaleOptions o;
  std::string preset = "nvlink-ib", workload = "resnet50",
              shapes = hvdtune::workloads::DefaultShapesDir();
  int nodes = 1, rpn = 8;
  std::vector<std::string> sets;
  app.add_flag("--calibrate", calibrate,
               "predicted vs measured on this machine");
  app.add_flag("--fit", fit, "with --calibrate: refit the CPU constants first");
  app.add_flag("--simulate", simulate, "one configuration's step time");
  app.add_flag("--transfer", transfer,
               "samples to 95% of best with a similar job's samples as "
               "priors vs fresh (scenarios on twice the nodes)");
  app.add_option("--preset", preset, "--simulate: network preset");
  app.add_option("--nodes", nodes, "--simulate: nodes")
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--ranks-per-node", rpn, "--simulate: ranks per node")
      ->check(CLI::Range(1, 1024));
  app.add_option("--workload", workload, "--simulate: workload");
  app.add_option("--set", sets, "--simulate: knob=value (knob table names)");
  app.add_option("--seeds", o.seeds, "seeds per scenario")
      ->check(CLI::Range(1, 10000));
  app.add_option("--first-seed", o.first_seed,
                 "the scale table's first seed (seeds are consecutive)")
      ->check(CLI::Range(0, 1000000));
  CLI::Option* steps_flag =
      app.add_option("--steps-per-sample", o.steps_per_sample,
                     "the scale table: steps one sample of every optimizer "
                     "takes at least (the runtime's default; a sample's "
                     "score is their median)")
          ->check(CLI::Range(1, 1000));
  CLI::Option* precision_flag =
      app.add_option("--sample-precision", o.sample_precision,
                     "the scale table: more steps a sample until its median "
                     "is this precise (95% half-width, relative), as the "
                     "runtime's samples; 0: fixed length")
          ->check(CLI::Range(0.0, 1.0));
  app.add_option("--jobs", o.jobs, "worker threads (default 1)")
      ->check(CLI::Range(1, 256));
  app.add_option("--scenarios", o.scenarios, "only these scenarios")
      ->delimiter(',');
  app.add_option("--optimizers", o.optimizers, "only these optimizers")
      ->delimiter(',');
  app.add_option("--model", o.model,
                 "hvdtune's GP with these options: effects, scales, log "
                 "(docs/simulator.md)")
      ->delimiter(',');
  app.add_option("--svg", o.svg, "write the regret plot here");
  app.add_option("--shapes-dir", shapes, "model shape files");
  app.add_flag("--json", o.json, "JSON rows");
  try {
    if (!hvdtune::bench::ParseFlags(app, argc, argv, 0)) return 0;
    if (calibrate) return RunCalibrate(fit, shapes);
    if (simulate)
      return RunSimulate(preset, nodes, rpn, workload, sets, shapes, o.json);
    for (const auto& name : o.optimizers) {
      const auto& all = hs::OptimizerNames();
      if (std::find(all.begin(), all.end(), name) == all.end())
        throw hvdtune::bench::UsageError("--optimizers: unknown optimizer '" +
                                         name + "'");
    }
    try {
      hs::ApplyModelOptions(o.model, nullptr);
    } catch (const std::invalid_argument& e) {
      throw hvdtune::bench::UsageError(std::string("--model: ") + e.what());
    }
    if (transfer && !o.model.empty())
      throw hvdtune::bench::UsageError("--model: not with --transfer");
    if (transfer && (steps_flag->count() || precision_flag->count()))
      throw hvdtune::bench::UsageError(
          "--steps-per-sample, --sample-precision: not with --transfer");
    if (transfer) return RunTransfer(o, shapes);
    return RunScale(o, shapes);
  } catch (const hvdtune::bench::UsageError& e) {
    std::cerr << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "cluster_sim: " << e.what() << "\n";
    return 1;
  }
}
