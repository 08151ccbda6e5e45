// synthetic_train: emulates data-parallel training of a model on real
// buffers. Each step runs the backward pass layer by layer, last layer
// first: real arithmetic of a configurable cost per parameter, then that
// layer's gradient is enqueued for allreduce, so communication overlaps the
// remaining compute as in a real job. A step ends when every gradient is
// reduced. The runtime is configured from HOROVOD_* / HVDTUNE_* like any
// application, so HOROVOD_AUTOTUNE=1 tunes it while it runs.
//
// A "sample" is one training example: a step processes --batch-size samples
// per rank, so samples/s = steps/s x batch size x ranks.
//
// Gradients are small integers stored as float32, so their sums are exact in
// any order: every rank checks one reduced gradient per step against the
// expected values, and any knob change that altered a number aborts the job.

#include <fmt/format.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <numeric>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "bench_common.h"
#include "hvdtune/knobs.h"
#include "hvdtune/mpi.h"
#include "hvdtune/runtime.h"
#include "hvdtune/workloads/builtin.h"
#include "hvdtune/workloads/gradient_set.h"
#include "hvdtune/workloads/synthetic_model.h"

namespace hvdtune::bench {
using workloads::DefaultShapesDir;
using workloads::LoadBuiltinWorkload;
using workloads::LoadShapesFile;
using workloads::ScaleTensors;
using workloads::StepRunner;
using workloads::SyntheticModel;
using workloads::TensorSpec;

namespace {

constexpr std::string_view kProgram = "synthetic_train";

// A JSON number, or null where it is not finite (an unknown bound).
hvdtune::bench::Json Finite(double x) {
  return std::isfinite(x) ? hvdtune::bench::Json(x) : hvdtune::bench::Json();
}

// The mean of (best - sample) / best over the exploration samples.
double ExplorationBelowBest(const AutotuneStatus& s) {
  if (!(s.best_score > 0) || !(s.exploration_mean_score > 0)) return 0;
  return 1 - s.exploration_mean_score / s.best_score;
}

struct Options {
  std::string workload;
  std::string tensors_file;
  std::string shapes_dir;
  double scale = 1.0;
  double flops_per_param = 60;
  std::int64_t batch_size = 32;
  std::int64_t steps = 0;  // 0: warmup + measure
  std::int64_t warmup_steps = 10;
  std::int64_t measure_steps = 50;
  std::int64_t window_steps = 10;
  bool until_frozen = false;
  std::int64_t max_steps = 2000;
  bool allow_grouping = false;
  bool json = false;
  /// Non-empty: the runtime runs on the Gloo engine, its traffic on this
  /// interface (rank 0 serves the rendezvous store beside MPI).
  std::string gloo_iface;
};

struct Window {
  AutotunePhase phase = AutotunePhase::kOff;
  bool measured = false;
  std::int64_t first_step = 0;
  std::vector<double> step_seconds;
};

// The knobs in force, each as its JSON type (a categorical knob by name).
Json KnobsJson(const KnobSettings& knobs) {
  Json json = Json::object();
  for (const KnobSpec& spec : KnobTable()) {
    Json& value = json[std::string(spec.name)];
    switch (spec.type) {
      case KnobType::kCategorical:
        value = knobs.FormatValue(spec.id);
        break;
      case KnobType::kBool:
        value = knobs.Get(spec.id) != 0;
        break;
      case KnobType::kInteger:
        value = static_cast<std::int64_t>(knobs.Get(spec.id));
        break;
      case KnobType::kFloat:
        value = knobs.Get(spec.id);
        break;
    }
  }
  return json;
}

std::vector<TensorSpec> LoadTensors(Options& opt) {
  if (!opt.tensors_file.empty() && !opt.workload.empty()) {
    throw UsageError(
        "--tensors: cannot be combined with --workload (give one of them)");
  }
  std::vector<TensorSpec> tensors;
  if (!opt.tensors_file.empty()) {
    if (!std::filesystem::is_regular_file(opt.tensors_file)) {
      throw UsageError("--tensors: no such file '" + opt.tensors_file + "'");
    }
    tensors = LoadShapesFile(opt.tensors_file);
    opt.workload = opt.tensors_file;
  } else {
    if (opt.workload.empty()) opt.workload = "resnet50";
    tensors = LoadBuiltinWorkload("--workload", opt.workload, opt.shapes_dir);
    for (const TensorSpec& t : tensors) {
      if (t.dtype != DataType::kFloat32) {
        throw UsageError("--workload: '" + opt.workload +
                         "' has float16 tensors; synthetic_train trains "
                         "float32 models (use it with fusion_bench)");
      }
    }
  }
  ScaleTensors(tensors, opt.scale);
  return tensors;
}

void PrintAlgorithms() {
  for (const std::string& name : AllreduceAlgorithmNames()) {
    fmt::print("{}\n", name);
  }
  std::fflush(stdout);
}

void CheckOptions(Options& opt, bool autotune_on) {
  if (opt.until_frozen && opt.steps > 0) {
    throw UsageError(
        "--steps: cannot be combined with --until-frozen (use --max-steps)");
  }
  if (opt.until_frozen && !autotune_on) {
    throw UsageError(
        "--until-frozen: autotuning is off (set HOROVOD_AUTOTUNE=1)");
  }
  if (opt.steps > 0) {
    if (opt.steps <= opt.warmup_steps) {
      throw UsageError("--steps: " + std::to_string(opt.steps) +
                       " leaves nothing to measure after --warmup-steps " +
                       std::to_string(opt.warmup_steps));
    }
    opt.measure_steps = opt.steps - opt.warmup_steps;
  }
}

int Main(MpiSession& mpi, int argc, char** argv) {
  Options opt;
  opt.shapes_dir = DefaultShapesDir();
  CLI::App app(
      "Emulated data-parallel training: per-layer compute overlapped with "
      "gradient allreduce. A sample is one example: a step is --batch-size "
      "samples per rank.",
      std::string(kProgram));
  ConfigureApp(app);
  bool list_algorithms = false;
  app.add_option("--workload", opt.workload,
                 "resnet50, vgg16, bert-base or many-small (1,000 x 4 KiB)")
      ->default_str("resnet50");
  app.add_option("--tensors", opt.tensors_file,
                 "shapes file instead of --workload: 'name dim0 dim1 ...' "
                 "per line, forward order");
  app.add_option("--shapes-dir", opt.shapes_dir,
                 "directory of the models' <model>.txt shape files");
  app.add_option("--scale", opt.scale,
                 "multiply every tensor's element count (at least 1 kept)")
      ->transform(NumberIn(0.0, 1.0, /*min_exclusive=*/true));
  app.add_option("--flops-per-param", opt.flops_per_param,
                 "backward compute per parameter per step (float "
                 "multiply-adds count 2)")
      ->transform(NumberIn(0.0, 1e6, /*min_exclusive=*/false));
  app.add_option("--batch-size", opt.batch_size,
                 "samples per rank per step (only scales samples/s)")
      ->transform(IntIn(1, 1 << 20));
  app.add_option("--steps", opt.steps,
                 "total steps: --warmup-steps, then the rest measured "
                 "(default: warm-up + --measure-steps)")
      ->transform(IntIn(1, 100000000))
      ->default_str("");
  app.add_option("--warmup-steps", opt.warmup_steps,
                 "steps before measuring when not --until-frozen")
      ->transform(IntIn(0, 100000000));
  app.add_option("--measure-steps", opt.measure_steps,
                 "steps measured after warm-up, or after tuning froze")
      ->transform(IntIn(1, 100000000));
  app.add_option("--window-steps", opt.window_steps,
                 "steps per printed throughput window")
      ->transform(IntIn(1, 100000000));
  app.add_flag("--until-frozen", opt.until_frozen,
               "with HOROVOD_AUTOTUNE=1: run until tuning froze (at most "
               "--max-steps), then --measure-steps more");
  app.add_option("--max-steps", opt.max_steps,
                 "with --until-frozen: give up waiting for the freeze after "
                 "this many steps")
      ->transform(IntIn(1, 100000000));
  app.add_flag("--allow-grouping", opt.allow_grouping,
               "let the autotuner tune num_groups (grouped allreduce)");
  app.add_flag("--json", opt.json,
               "print one JSON line at the end (windows go to stderr)");
  app.add_option("--gloo-iface", opt.gloo_iface,
                 "run the runtime on the Gloo engine, its traffic on this "
                 "network interface (lo on one machine, eth0 on the emulated "
                 "cluster); the step loop itself stays on MPI");
  app.add_flag("--list-algorithms", list_algorithms,
               "print the allreduce algorithms of this build, one per line, "
               "and exit (alone, it needs no mpirun)");
  if (!ParseFlags(app, argc, argv, mpi.rank())) return 0;
  if (list_algorithms) {
    if (mpi.rank() == 0) PrintAlgorithms();
    return 0;
  }
  SyntheticModel model(LoadTensors(opt), "grad", opt.flops_per_param,
                       mpi.rank(), mpi.size());
  const std::size_t layers = model.layers();

  // What a Gloo launcher would set, before the runtime reads its
  // environment; the store lives as long as the runtime.
  std::unique_ptr<RendezvousServer> gloo_store;
  if (!opt.gloo_iface.empty()) {
    std::map<std::string, std::string> vars;
    gloo_store = ServeGlooBesideMpi(&vars, opt.gloo_iface);
    for (const auto& [name, value] : vars) {
      setenv(name.c_str(), value.c_str(), 1);
    }
  }
  RuntimeOptions rt_options;
  rt_options.tune_num_groups = opt.allow_grouping;
  Runtime rt(std::move(rt_options));
  StepRunner runner(rt, model);

  // Rank 0 alone knows the tuner's phase, and ranks may see a knob update at
  // different points of their step loop: rank 0 announces both each step so
  // that every rank groups alike and stops together.
  auto agree = [&] {
    int header[2] = {rt.knobs().num_groups(),
                     static_cast<int>(rt.autotune_status().phase)};
    MPI_Bcast(header, 2, MPI_INT, 0, MPI_COMM_WORLD);
    return std::pair{header[0], static_cast<AutotunePhase>(header[1])};
  };
  CheckOptions(opt, agree().second != AutotunePhase::kOff);

  const double samples_per_step =
      static_cast<double>(opt.batch_size) * mpi.size();
  std::FILE* log = opt.json ? stderr : stdout;
  if (mpi.rank() == 0) {
    fmt::print(log,
               "{}: {} x{:g}, {} tensors, {} of gradients per step, {:g} "
               "flops/param, {} ranks x batch {} = {:g} samples per step\n",
               kProgram, opt.workload, opt.scale, layers,
               FormatBytes(model.total_bytes()), opt.flops_per_param,
               mpi.size(), opt.batch_size, samples_per_step);
    std::fflush(log);
  }

  std::vector<Window> windows(1);
  bool measuring = false;
  std::int64_t measured = 0;
  // Rank 0's backward compute per measured step.
  std::vector<double> compute_seconds;
  std::int64_t skip = 0;
  std::int64_t step = 0;
  AutotunePhase phase = AutotunePhase::kOff;
  // Time the cycle thread spent on metering and tuning while measuring, as
  // a fraction of the measured wall time (rank 0, where the tuner runs).
  double measure_start = 0, autotune_seconds_at_start = 0;
  auto close_window = [&] {
    Window& w = windows.back();
    if (!w.step_seconds.empty() && mpi.rank() == 0) {
      const double seconds =
          std::accumulate(w.step_seconds.begin(), w.step_seconds.end(), 0.0);
      // While tuning, the progress: exploration sample n of the budget N.
      std::string progress;
      if (w.phase == AutotunePhase::kExploring ||
          w.phase == AutotunePhase::kRetuning) {
        progress = fmt::format("  sample {}/{}", rt.autotune_status().samples,
                               rt.config().autotune.max_samples);
      }
      fmt::print(log,
                 "steps {:6}-{:<6} {:<9} {:8} samples/s {:10.1f}  step "
                 "{:8.2f} ms (median){}\n",
                 w.first_step, w.first_step + std::ssize(w.step_seconds) - 1,
                 AutotunePhaseName(w.phase), w.measured ? "measured" : "",
                 samples_per_step * std::ssize(w.step_seconds) / seconds,
                 Median(w.step_seconds) * 1e3, progress);
      std::fflush(log);
    }
    windows.push_back({phase, measuring, step, {}});
  };

  while (true) {
    const double t0 = NowSeconds();
    const auto [num_groups, now_phase] = agree();
    if (now_phase != phase) {
      // A phase change (e.g. the freeze) starts a fresh window.
      phase = now_phase;
      close_window();
    }
    if (!measuring) {
      bool start = false;
      if (!opt.until_frozen) {
        start = step >= opt.warmup_steps;
      } else if (phase == AutotunePhase::kFrozen) {
        start = true;
        skip = 1;  // the step that applies the frozen knobs
      } else if (step >= opt.max_steps) {
        start = true;
        if (mpi.rank() == 0) {
          fmt::print(stderr,
                     "{}: warning: tuning did not freeze within --max-steps {} "
                     "(phase {}); measuring anyway\n",
                     kProgram, opt.max_steps, AutotunePhaseName(phase));
        }
      }
      if (start) {
        measuring = true;
        measure_start = NowSeconds();
        autotune_seconds_at_start = rt.stats().autotune_seconds;
        close_window();
      }
    }
    if (measuring && measured == opt.measure_steps) break;

    runner.Run(step, num_groups);
    model.Verify(static_cast<std::size_t>(step) % layers, step);
    rt.MarkStep();
    const double seconds = NowSeconds() - t0;

    ++step;
    if (measuring && skip > 0) {
      --skip;
      close_window();
      continue;
    }
    if (measuring) {
      ++measured;
      compute_seconds.push_back(runner.compute_seconds());
    }
    windows.back().step_seconds.push_back(seconds);
    if (std::ssize(windows.back().step_seconds) == opt.window_steps) {
      close_window();
    }
  }
  close_window();

  // After a freeze, only frozen windows count; otherwise all measured ones.
  const bool any_frozen =
      std::any_of(windows.begin(), windows.end(), [](const Window& w) {
        return w.measured && !w.step_seconds.empty() &&
               w.phase == AutotunePhase::kFrozen;
      });
  std::vector<double> rates;
  std::vector<double> step_seconds;
  for (const Window& w : windows) {
    if (!w.measured || w.step_seconds.empty()) continue;
    if (any_frozen && w.phase != AutotunePhase::kFrozen) continue;
    const double seconds =
        std::accumulate(w.step_seconds.begin(), w.step_seconds.end(), 0.0);
    rates.push_back(samples_per_step * std::ssize(w.step_seconds) / seconds);
    step_seconds.insert(step_seconds.end(), w.step_seconds.begin(),
                        w.step_seconds.end());
  }
  const AutotuneStatus status = rt.autotune_status();
  const KnobSettings knobs = rt.knobs();
  const double autotune_overhead =
      (rt.stats().autotune_seconds - autotune_seconds_at_start) /
      std::max(1e-9, NowSeconds() - measure_start);
  rt.Shutdown();
  if (mpi.rank() != 0) return 0;

  // The tuner scores bytes reduced per second of step; every step reduces
  // the same bytes, so a score converts to samples/s exactly.
  const double per_byte =
      samples_per_step / static_cast<double>(model.total_bytes());
  const double samples_per_sec = Median(rates);
  fmt::print(log,
             "throughput: {:g} samples/s (median of {} windows{}), step {:g} "
             "ms median\nknobs: {}\n",
             samples_per_sec, rates.size(),
             any_frozen ? " after the freeze" : "", Median(step_seconds) * 1e3,
             knobs.ToString());
  if (status.phase != AutotunePhase::kOff) {
    fmt::print(
        log,
        "autotune: {} after {} samples ({}); initial {:g} samples/s, best "
        "{:g} samples/s (tuner's scores); autotune overhead while "
        "measuring {:g}% of wall time\n",
        AutotunePhaseName(status.phase), status.samples, status.source,
        status.default_score * per_byte, status.best_score * per_byte,
        autotune_overhead * 100);
    if (status.phase == AutotunePhase::kFrozen &&
        status.best_estimate.mean > 0 &&
        std::isfinite(status.default_estimate.mean) &&
        std::isfinite(status.gain.low) && std::isfinite(status.gain.high)) {
      // The model's estimates (AutotuneStatus), 95% intervals.
      if (status.kept_initial) {
        fmt::print(log,
                   "autotune estimates: no knob beat the default beyond "
                   "noise; kept at {:g} [{:g}, {:g}] samples/s\n",
                   status.best_estimate.mean * per_byte,
                   status.best_estimate.low * per_byte,
                   status.best_estimate.high * per_byte);
      } else {
        fmt::print(log,
                   "autotune estimates: frozen {:g} [{:g}, {:g}] samples/s, "
                   "initial {:g} [{:g}, {:g}] samples/s, gain {:+.1f}% "
                   "[{:+.1f}, {:+.1f}]\n",
                   status.best_estimate.mean * per_byte,
                   status.best_estimate.low * per_byte,
                   status.best_estimate.high * per_byte,
                   status.default_estimate.mean * per_byte,
                   status.default_estimate.low * per_byte,
                   status.default_estimate.high * per_byte,
                   status.gain.mean * 100, status.gain.low * 100,
                   status.gain.high * 100);
      }
    }
    if (status.exploration_seconds > 0) {
      fmt::print(
          log,
          "cost of tuning: exploring took {:.1f} s of steps, its "
          "samples {:.1f}% below the best on average, and {} {:.1f} "
          "s of training against the initial configuration; {}\n",
          status.exploration_seconds, 100 * ExplorationBelowBest(status),
          status.exploration_loss_seconds > 0 ? "lost" : "gained",
          std::fabs(status.exploration_loss_seconds),
          status.payback_seconds >= 0
              ? fmt::format("won back after {:.1f} s frozen",
                            status.payback_seconds)
              : fmt::format("not won back yet ({:.1f} s frozen won "
                            "{:.1f} s)",
                            status.frozen_seconds, status.frozen_gain_seconds));
    }
  }
  std::fflush(log);
  if (!opt.json) return 0;

  const Json autotune = {
      {"phase", AutotunePhaseName(status.phase)},
      {"samples", status.samples},
      // Where tuning started: "store" (a known best confirmed), "transfer"
      // (similar jobs' samples as priors) or "fresh"; the config store's
      // fingerprint of this job (empty without a store).
      {"source", status.source},
      {"exploration_samples", status.samples},
      {"fingerprint", status.fingerprint},
      {"best_score", status.best_score},
      {"default_score", status.default_score},
      {"best_samples_per_sec", status.best_score * per_byte},
      {"default_samples_per_sec", status.default_score * per_byte},
      // The model's estimates at the freeze (95% intervals; null where
      // unknown) and whether the initial knobs were kept.
      {"best_estimate_samples_per_sec",
       {Finite(status.best_estimate.mean * per_byte),
        Finite(status.best_estimate.low * per_byte),
        Finite(status.best_estimate.high * per_byte)}},
      {"default_estimate_samples_per_sec",
       {Finite(status.default_estimate.mean * per_byte),
        Finite(status.default_estimate.low * per_byte),
        Finite(status.default_estimate.high * per_byte)}},
      {"gain_estimate",
       {Finite(status.gain.mean), Finite(status.gain.low),
        Finite(status.gain.high)}},
      {"kept_initial", status.kept_initial},
      {"overhead_fraction", autotune_overhead},
      // The cost of tuning (seconds of scored steps, against the initial
      // configuration): AutotuneStatus.
      {"exploration_seconds", status.exploration_seconds},
      {"exploration_loss_seconds", status.exploration_loss_seconds},
      {"exploration_below_best", ExplorationBelowBest(status)},
      {"frozen_seconds", status.frozen_seconds},
      {"frozen_gain_seconds", status.frozen_gain_seconds},
      {"payback_seconds", status.payback_seconds},
      {"tuned_knobs", status.tuned_knobs},
  };
  const Json row = {
      {"workload", opt.workload},
      {"ranks", mpi.size()},
      {"batch_size", opt.batch_size},
      {"tensors", layers},
      {"bytes_per_step", model.total_bytes()},
      {"steps", step},
      {"measured_steps", step_seconds.size()},
      {"samples_per_sec", samples_per_sec},
      {"step_time_ms_median", Median(step_seconds) * 1e3},
      {"compute_ms_median", Median(compute_seconds) * 1e3},
      {"config", KnobsJson(knobs)},
      {"autotune", autotune},
  };
  std::cout << JsonLine(row) << "\n" << std::flush;
  return 0;
}

}  // namespace
}  // namespace hvdtune::bench

int main(int argc, char** argv) {
  // Without MPI: the allreduce algorithms this build has, for grid scripts.
  if (argc == 2 && std::string_view(argv[1]) == "--list-algorithms") {
    hvdtune::bench::PrintAlgorithms();
    return 0;
  }
  return hvdtune::bench::RunBenchMain(argc, argv, hvdtune::bench::kProgram,
                                      hvdtune::bench::Main);
}
