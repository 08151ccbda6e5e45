// hvd-tune sweep: offline tuning under mpirun. Every rank trains the
// synthetic model (hvdtune/workloads/synthetic_model.h, what
// synthetic_train runs); rank 0 plans the configurations, puts each in
// force with the runtime's versioned knob update, scores it as the online
// autotuner does (bytes reduced per second, the median of a sample's steps)
// and writes every sample and the best configuration to the store under the
// job's fingerprint, computed from the tensors as the runtime saw them
// complete.
#include <fmt/format.h>
#include <mpi.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <iostream>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_set>

#include "commands.h"
#include "common.h"
#include "fingerprint_util.h"
#include "hvdtune/config.h"
#include "hvdtune/runtime.h"
#include "hvdtune/services.h"
#include "hvdtune/workloads/mpi_session.h"
#include "hvdtune/workloads/synthetic_model.h"
#include "sweep_plan.h"
#include "sweep_report.h"

namespace hvdtune::cli {
namespace {

constexpr const char* kVersion = HVDTUNE_VERSION;

struct SweepOptions {
  std::string workload;
  std::string tensors;
  double scale = 1.0;
  double flops_per_param = 60;
  int batch_size = 32;
  std::string strategy = "grid";
  int budget = 0;
  int repeats = 3;
  int steps_per_sample = 0;  // 0: HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE
  int warmup_steps = 1;
  int confirm_top = 3;
  int confirm_rounds = 5;
  std::vector<std::string> grid;
  std::uint64_t seed = 1;
  std::string db;
  bool no_store = false;
  std::string csv;
  bool json = false;
  int top = 15;
};

double WallClock() {
  return std::chrono::duration<double>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Rank 0: the first step's tensors as they complete, which is what the
// runtime's config store fingerprints (up to the first repeated name).
class StepShapes final : public EventSink {
 public:
  explicit StepShapes(std::size_t tensors) : expected_(tensors) {}
  EventMask interests() const override { return EventBit(EventKind::kTensor); }
  void OnTensor(const TensorEvent& e) override {
    if (e.status != StatusCode::kOk) return;
    std::lock_guard<std::mutex> lock(mu_);
    if (done_) return;
    if (!names_.insert(std::string(e.name)).second) {
      done_ = true;
      return;
    }
    const auto size = static_cast<std::int64_t>(DataTypeSize(e.dtype));
    shapes_.push_back({std::string(DataTypeName(e.dtype)),
                       size > 0 ? e.bytes / size : e.bytes});
    done_ = shapes_.size() == expected_;
  }
  std::vector<store::TensorShape> shapes() const {
    std::lock_guard<std::mutex> lock(mu_);
    return shapes_;
  }

 private:
  std::size_t expected_;
  mutable std::mutex mu_;
  bool done_ = false;
  std::unordered_set<std::string> names_;
  std::vector<store::TensorShape> shapes_;
};

// Rank 0's store writes; every failure is fatal to the sweep (its purpose
// is the store), reported once with the file's name.
class SweepStore {
 public:
  explicit SweepStore(const std::string& path)
      : db_(store::StoreOptions{path}) {}
  void Begin(const store::Fingerprint& hw, const store::Fingerprint& model) {
    hw_ = db_.PutFingerprint("hardware", hw);
    model_ = db_.PutFingerprint("model", model);
    run_ = db_.BeginRun(hw_, model_, kVersion, "sweep", WallClock());
  }
  void Add(const store::Sample& s) { db_.AddSamples(run_, {s}); }
  void End(const KnobSettings& best, double score) {
    db_.SetBest(hw_, model_, {ToStored(best), score, run_, WallClock()});
    db_.EndRun(run_, "completed", WallClock());
  }
  const std::string& path() const { return db_.path(); }

 private:
  store::Store db_;
  std::int64_t hw_ = 0, model_ = 0, run_ = 0;
};

// Rank 0 tells every rank, before each step, whether to go on.
bool AgreeContinue(bool go) {
  int flag = go ? 1 : 0;
  MPI_Bcast(&flag, 1, MPI_INT, 0, MPI_COMM_WORLD);
  return flag != 0;
}

// The same outcome on every rank: rank 0's error (if any) becomes
// everyone's, so no rank waits for a peer that gave up.
void AgreeOk(int rank, const std::string& error, bool usage) {
  int code = error.empty() ? 0 : usage ? 2 : 1;
  MPI_Bcast(&code, 1, MPI_INT, 0, MPI_COMM_WORLD);
  if (code == 0) return;
  const std::string text = rank == 0 ? error : "rank 0 failed";
  if (code == 2) throw UsageError(text);
  throw Failure(text);
}

Strategy ParseStrategy(const std::string& s) {
  if (s == "grid") return Strategy::kGrid;
  if (s == "random") return Strategy::kRandom;
  if (s == "lhs") return Strategy::kLhs;
  if (s == "bayes") return Strategy::kBayes;
  throw UsageError("--strategy: unknown strategy '" + s +
                   "' (expected grid, random, lhs or bayes)");
}

// Whether this process may lower its nice value by the boost's tuning range,
// as a tuned job checks before it puts the boost in its space. Tries, then
// puts the value back (raising it needs no privilege).
bool CanBoost() {
  errno = 0;
  const int now = getpriority(PRIO_PROCESS, 0);
  if (errno != 0) return false;
  const int levels =
      static_cast<int>(GetKnobSpec(KnobId::kCycleThreadBoost).tune_max);
  const int target = std::max(-20, now - levels);
  if (target == now || setpriority(PRIO_PROCESS, 0, target) != 0) return false;
  setpriority(PRIO_PROCESS, 0, now);
  return true;
}

int RunSweep(const SweepOptions& opt, int argc, char** argv) {
  // Everything a usage error can come from is checked before MPI starts,
  // identically on every rank.
  const Strategy strategy = ParseStrategy(opt.strategy);
  if (!opt.grid.empty() && strategy != Strategy::kGrid) {
    throw UsageError("--grid: only with --strategy grid");
  }
  std::vector<workloads::TensorSpec> tensors =
      LoadWorkload(opt.workload, opt.tensors, opt.scale);
  RuntimeConfig config = ParseConfig(ProcessEnv());
  if (config.autotune.enabled && LauncherRank() == 0) {
    fmt::print(stderr,
               "hvd-tune sweep: HOROVOD_AUTOTUNE=1 ignored: the sweep "
               "chooses the knobs itself\n");
  }
  config.autotune.enabled = false;
  std::vector<GridAxis> axes;
  for (const std::string& g : opt.grid) {
    axes.push_back(ParseGridAxis(g, config.knobs));
  }
  const int steps_per_sample = opt.steps_per_sample > 0
                                   ? opt.steps_per_sample
                                   : config.autotune.steps_per_sample;
  const std::string store_path = opt.no_store ? "" : ResolveStorePath(opt.db);

  int mpi_argc = argc;
  char** mpi_argv = argv;
  workloads::MpiSession mpi(&mpi_argc, &mpi_argv);
  const int rank = mpi.rank();

  auto shapes = std::make_shared<StepShapes>(tensors.size());
  Services services = DefaultServices(config);
  if (rank == 0) services.sinks.push_back(shapes);
  Runtime rt(config, std::move(services));

  // Rank 0 opens the store and plans; both may fail, for every rank.
  std::unique_ptr<SweepStore> db;
  std::unique_ptr<SweepPlan> plan;
  std::string error;
  bool usage = false;
  if (rank == 0) {
    try {
      if (!store_path.empty()) db = std::make_unique<SweepStore>(store_path);
      PlanSettings ps;
      ps.strategy = strategy;
      ps.budget = opt.budget;
      ps.repeats = opt.repeats;
      ps.seed = opt.seed;
      ps.multi_node = rt.cross_size() > 1;
      ps.priority_raisable = CanBoost();
      ps.grid = axes;
      plan = MakePlan(ps, config.knobs);
    } catch (const UsageError& e) {
      error = e.what();
      usage = true;
    } catch (const std::exception& e) {
      error = e.what();
    }
  }
  AgreeOk(rank, error, usage);

  workloads::SyntheticModel model(tensors, "grad", opt.flops_per_param, rank,
                                  mpi.size());
  workloads::StepRunner runner(rt, model);
  std::int64_t step = 0;
  // One step; rank 0's wall time from its start (after the agreement) to
  // the step mark.
  auto run_step = [&] {
    const double t0 = workloads::NowSeconds();
    runner.Run(step, 0);
    model.Verify(static_cast<std::size_t>(step) % model.layers(), step);
    rt.MarkStep();
    ++step;
    return workloads::NowSeconds() - t0;
  };

  // The first step (initial knobs) shows the model as the runtime sees it.
  AgreeContinue(true);
  run_step();
  SweepResult result;
  if (rank == 0) {
    const store::Fingerprint hw =
        ThisHardware(rt.size(), rt.local_size(), rt.cross_size());
    const store::Fingerprint model_fp =
        store::ModelFingerprint(shapes->shapes());
    result.fingerprint = store::PrintableFingerprint(hw, model_fp);
    try {
      if (db) db->Begin(hw, model_fp);
    } catch (const std::exception& e) {
      error = e.what();
    }
  }
  AgreeOk(rank, error, false);

  const auto start = std::chrono::steady_clock::now();
  if (rank == 0) {
    result.workload = opt.tensors.empty()
                          ? (opt.workload.empty() ? "many-small" : opt.workload)
                          : opt.tensors;
    result.strategy = opt.strategy;
    result.ranks = rt.size();
    result.bytes_per_step = model.total_bytes();
    result.samples_per_step = static_cast<double>(opt.batch_size) * rt.size();
    result.repeats = opt.repeats;
    result.confirm_rounds = opt.confirm_rounds;
    result.steps_per_sample = steps_per_sample;
    if (db) result.store_path = db->path();
    const double bytes = static_cast<double>(model.total_bytes());
    const int confirm_visits = opt.confirm_top * opt.confirm_rounds;
    Progress progress(plan->total_visits() + confirm_visits,
                      StdoutIsTerminal() && !opt.json);
    std::vector<PointResult> points;
    double best = 0;
    int visits = 0;
    // One sample: the knobs in force on every rank, warm-up steps, then the
    // median throughput of the sample's steps.
    auto visit = [&](const KnobSettings& knobs, const char* phase) {
      if (!(rt.knobs() == knobs)) {
        const std::uint64_t version = rt.RequestKnobUpdate(knobs);
        while (rt.knob_version() < version) {
          AgreeContinue(true);
          run_step();
        }
      }
      for (int w = 0; w < opt.warmup_steps; ++w) {
        AgreeContinue(true);
        run_step();
      }
      std::vector<double> rates;
      for (int s = 0; s < steps_per_sample; ++s) {
        AgreeContinue(true);
        rates.push_back(bytes / run_step());
      }
      const double score = workloads::Median(rates);
      best = std::max(best, score);
      ++visits;
      if (db) db->Add({visits, phase, ToStored(knobs), score, WallClock()});
      if (!opt.json) {
        progress.Sample(visits, KnobsText(knobs, VariedKnobs(plan->points())),
                        score, best);
      }
      return score;
    };
    try {
      while (const auto i = plan->Next()) {
        if (points.size() <= *i) points.resize(*i + 1);
        points[*i].knobs = plan->points()[*i];
        const double score = visit(points[*i].knobs, "sweep");
        plan->Observe(*i, score);
        points[*i].scores.push_back(score);
      }
      // The best of many noisy medians is biased upwards: the leaders are
      // measured again, round after round in alternating order, and the
      // confirmation decides.
      RankPoints(points);
      const std::size_t top = std::min<std::size_t>(
          points.size() > 1 ? static_cast<std::size_t>(opt.confirm_top) : 0,
          points.size());
      for (int round = 0; round < opt.confirm_rounds && top > 0; ++round) {
        for (std::size_t k = 0; k < top; ++k) {
          PointResult& p = points[round % 2 ? top - 1 - k : k];
          p.confirm.push_back(visit(p.knobs, "confirm"));
        }
      }
    } catch (const std::exception& e) {
      error = e.what();
    }
    AgreeContinue(false);
    if (!opt.json) progress.Finish();
    result.varied = VariedKnobs(plan->points());
    result.points = std::move(points);
    RankPoints(result.points);
  } else {
    try {
      while (AgreeContinue(true)) run_step();
    } catch (const std::exception& e) {
      // Rank 0 would wait for this rank forever.
      fmt::print(stderr, "hvd-tune sweep: rank {}: {}\n", rank, e.what());
      MPI_Abort(MPI_COMM_WORLD, kExitFailure);
    }
  }
  rt.Shutdown();
  if (rank != 0) return kExitOk;
  if (!error.empty()) throw Failure(error);
  result.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  if (db && !result.points.empty()) {
    const PointResult& best = result.points.front();
    db->End(best.knobs, best.confirm.empty() ? best.median : best.confirmed);
  }
  if (!opt.csv.empty()) WriteCsv(result, opt.csv);
  if (opt.json) {
    std::cout << SweepJson(result).dump(2) << "\n";
  } else {
    PrintTable(result, opt.top);
  }
  return kExitOk;
}

}  // namespace

Command AddSweepCommand(CLI::App& app, int argc, char** argv) {
  auto opt = std::make_shared<SweepOptions>();
  auto* sub = app.add_subcommand(
      "sweep",
      "measure configurations offline on a synthetic workload or your "
      "tensor list (run it under mpirun) and store the best under the job's "
      "fingerprint, so the next job with that fingerprint starts tuned");
  sub->add_option("--workload", opt->workload,
                  "resnet50, vgg16, bert-base or many-small (1,000 x 4 KiB)")
      ->default_str("many-small");
  sub->add_option("--tensors", opt->tensors,
                  "tensor-list file instead of --workload: 'name dim0 dim1 "
                  "...' per line, forward order");
  sub->add_option("--scale", opt->scale,
                  "multiply every tensor's element count (at least 1 kept)")
      ->check(CLI::Range(1e-9, 1.0));
  sub->add_option(
         "--flops-per-param", opt->flops_per_param,
         "backward compute per parameter per step (as synthetic_train)")
      ->check(CLI::Range(0.0, 1e6));
  sub->add_option("--batch-size", opt->batch_size,
                  "samples per rank per step (only for samples/s)")
      ->check(CLI::Range(1, 1 << 20));
  sub->add_option("--strategy", opt->strategy,
                  "grid (default grid or --grid axes), random (points of the "
                  "tuner's search space), lhs (a space-filling Latin "
                  "hypercube of it: every tuned knob, each combination of "
                  "the categorical ones in turn) or bayes (the tuner's "
                  "optimizer)");
  sub->add_option("--budget", opt->budget,
                  "configurations to measure (default: the whole grid; 20 "
                  "for random, lhs and bayes; lhs measures the initial knobs "
                  "on top)")
      ->check(CLI::Range(1, 100000));
  sub->add_option("--repeats", opt->repeats, "samples per configuration")
      ->check(CLI::Range(1, 1000));
  sub->add_option("--steps-per-sample", opt->steps_per_sample,
                  "steps per sample; its score is their median (default: "
                  "HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE, 10)")
      ->check(CLI::Range(1, 100000));
  sub->add_option("--warmup-steps", opt->warmup_steps,
                  "steps not scored after a configuration is in force")
      ->check(CLI::Range(0, 100000));
  sub->add_option("--grid", opt->grid,
                  "a grid axis KNOB=V1,V2,... (repeat for more axes; "
                  "replaces the default grid), e.g. fusion_threshold=1M,64M")
      ->allow_extra_args(false);
  sub->add_option("--confirm-top", opt->confirm_top,
                  "configurations measured again at the end (0: none)")
      ->check(CLI::Range(0, 1000));
  sub->add_option("--confirm-rounds", opt->confirm_rounds,
                  "rounds of that confirmation; its median ranks them")
      ->check(CLI::Range(0, 1000));
  sub->add_option("--seed", opt->seed, "seed of the order and the optimizer");
  AddDbOption(*sub, opt->db);
  sub->add_flag("--no-store", opt->no_store, "do not write the store");
  sub->add_option("--csv", opt->csv, "write the ranked configurations as CSV");
  sub->add_flag("--json", opt->json,
                "print the result as JSON (no progress, no table)");
  sub->add_option("--top", opt->top, "rows of the ranked table")
      ->check(CLI::Range(1, 100000));
  return {sub, [opt, argc, argv] { return RunSweep(*opt, argc, argv); }};
}

}  // namespace hvdtune::cli
