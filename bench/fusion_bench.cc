// fusion_bench: one data-parallel step (enqueue every gradient in backward
// order, wait for all) with tensor fusion on, with fusion off
// (HOROVOD_FUSION_THRESHOLD=0), and as one raw MPI_Allreduce of the same
// bytes on the same buffers; for a set that mixes float16 and float32
// (`mixed-precision`), fused with and without the fusion look-ahead
// (HVDTUNE_FUSION_LOOKAHEAD=0 closes the buffer at every dtype change).
// With --collective reducescatter every gradient is reducescattered instead
// (a sharded optimizer), beside one raw MPI_Reduce_scatter_block; with
// --collective alltoall its rows are sent to every rank, beside one raw
// MPI_Alltoall. Every mode's first step is checked element by element.
//
// Gradient sets: model parameter shapes from data/<model>.txt (see
// data/gen_shapes.py), and `many-small`, 1,000 tensors of 4 KiB. Each repeat
// runs the three modes in a rotating order, each with a fresh Runtime
// (raw: none alive), untimed warm-up steps first; the reported step time is
// the median over repeats of the slowest rank's mean step time.

#include <fmt/format.h>
#include <mpi.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "bench_common.h"
#include "hvdtune/runtime.h"
#include "hvdtune/workloads/builtin.h"
#include "hvdtune/workloads/gradient_set.h"

namespace hvdtune::bench {
using workloads::Collective;
using workloads::CollectiveName;
using workloads::DefaultShapesDir;
using workloads::GradientSet;
using workloads::kManySmallElements;
using workloads::LoadBuiltinWorkload;
using workloads::ManySmallTensors;
using workloads::ScaleTensors;
using workloads::TensorSpec;

namespace {

constexpr std::string_view kProgram = "fusion_bench";

enum class Mode { kFused, kUnfused, kRaw, kNoLookahead, kRawCopies };
constexpr std::array<Mode, 5> kModes = {Mode::kFused, Mode::kUnfused,
                                        Mode::kRaw, Mode::kNoLookahead,
                                        Mode::kRawCopies};

std::string_view ModeName(Mode mode) {
  switch (mode) {
    case Mode::kFused:
      return "fused";
    case Mode::kUnfused:
      return "unfused";
    case Mode::kRaw:
      return "mpi_raw";
    case Mode::kNoLookahead:
      return "fused_no_lookahead";
    case Mode::kRawCopies:
      return "mpi_raw_copies";
  }
  return "";
}

struct Options {
  std::string collective_name = "allreduce";
  Collective collective = Collective::kAllreduce;
  std::vector<std::string> workloads = {"resnet50", "many-small",
                                        "mixed-precision"};
  std::vector<std::string> mode_names = {"fused", "unfused", "mpi_raw",
                                         "fused_no_lookahead"};
  std::vector<Mode> modes;
  std::string shapes_dir;
  double scale = 1.0;
  /// How many tensors many-small's 3.9 MiB are split into.
  std::int64_t many_small_count = 1000;
  std::int64_t steps = 10;
  std::int64_t warmup = 2;
  std::int64_t repeats = 5;
  bool json = false;
};

std::vector<TensorSpec> LoadWorkload(const Options& opt,
                                     const std::string& workload) {
  std::vector<TensorSpec> tensors =
      workload == "many-small"
          ? ManySmallTensors("--many-small-count", opt.many_small_count)
          : LoadBuiltinWorkload("--workloads", workload, opt.shapes_dir);
  ScaleTensors(tensors, opt.scale);
  return tensors;
}

struct Result {
  std::string workload;
  std::size_t tensors = 0;
  std::int64_t bytes = 0;
  std::int64_t fusion_threshold = 0;
  std::map<Mode, std::vector<double>> step_seconds;
};

// Times one mode: a fresh Runtime for fused / unfused, none for raw.
double TimeMode(const Options& opt, GradientSet& set, Mode mode,
                Result& result) {
  if (mode == Mode::kRaw) {
    for (std::int64_t i = 0; i < opt.warmup; ++i) set.RawCollective();
    return TimeLoop(opt.steps, [&] { set.RawCollective(); });
  }
  if (mode == Mode::kRawCopies) {
    set.ClearOutput();
    set.RawAllreduceWithCopies();
    if (const std::string error = set.CheckOutput(); !error.empty()) {
      throw std::runtime_error(result.workload +
                               " mpi_raw_copies: wrong result: " + error);
    }
    for (std::int64_t i = 1; i < opt.warmup; ++i) set.RawAllreduceWithCopies();
    return TimeLoop(opt.steps, [&] { set.RawAllreduceWithCopies(); });
  }
  std::map<std::string, std::string> overrides;
  if (mode == Mode::kUnfused)
    overrides.emplace("HOROVOD_FUSION_THRESHOLD", "0");
  if (mode == Mode::kNoLookahead)
    overrides.emplace("HVDTUNE_FUSION_LOOKAHEAD", "0");
  Runtime runtime(RuntimeOptions{EnvWithOverrides(std::move(overrides))});
  if (mode == Mode::kFused) {
    result.fusion_threshold = runtime.knobs().fusion_threshold_bytes();
  }
  // The first step pays full negotiation; check its result, then warm up.
  set.ClearOutput();
  set.Step(runtime);
  if (const std::string error = set.CheckOutput(); !error.empty()) {
    throw std::runtime_error(
        result.workload + " " + std::string(ModeName(mode)) + ": wrong " +
        std::string(CollectiveName(opt.collective)) + " result: " + error);
  }
  for (std::int64_t i = 1; i < opt.warmup; ++i) set.Step(runtime);
  const double seconds = TimeLoop(opt.steps, [&] { set.Step(runtime); });
  runtime.Shutdown();
  return seconds;
}

// Median step time of `mode` in ms; NaN when the mode was not run.
double MedianMs(const Result& r, Mode mode) {
  const auto it = r.step_seconds.find(mode);
  if (it == r.step_seconds.end()) return std::nan("");
  return Median(it->second) * 1e3;
}

std::string Cell(double value, int precision) {
  if (std::isnan(value)) return "-";
  return fmt::format("{:.{}f}", value, precision);
}

void PrintTable(const Options& opt, const std::vector<Result>& results,
                int ranks) {
  const std::string_view raw = opt.collective == Collective::kAllreduce
                                   ? "MPI_Allreduce"
                               : opt.collective == Collective::kReducescatter
                                   ? "MPI_Reduce_scatter_block"
                                   : "MPI_Alltoall";
  fmt::print(
      "# fusion_bench: {} ranks, {}{} (float32; mixed-precision: float16 + "
      "float32), median of {} repeats x {} steps (warm-up {}), scale {:g}\n",
      ranks, CollectiveName(opt.collective),
      opt.collective == Collective::kAlltoall ? "" : " sum", opt.repeats,
      opt.steps, opt.warmup, opt.scale);
  fmt::print(
      "# step = enqueue all (backward order) + wait all; mpi_raw = one {} of "
      "the same bytes; raw_copies = the same with each tensor copied into one "
      "buffer and back out\n",
      raw);
  constexpr std::string_view kRow =
      "{:<15} {:>8} {:>10} {:>10} {:>10} {:>11} {:>11} {:>9} {:>9} {:>11} "
      "{:>10} {:>14}\n";
  fmt::print(kRow, "workload", "tensors", "MiB", "threshold", "fused_ms",
             "unfused_ms", "mpi_raw_ms", "raw/fused", "speedup", "no_la_ms",
             "lookahead", "raw_copies_ms");
  for (const Result& r : results) {
    const double fused = MedianMs(r, Mode::kFused);
    const double unfused = MedianMs(r, Mode::kUnfused);
    const double raw = MedianMs(r, Mode::kRaw);
    const double no_la = MedianMs(r, Mode::kNoLookahead);
    const double copies = MedianMs(r, Mode::kRawCopies);
    fmt::print(kRow, r.workload, r.tensors,
               Cell(static_cast<double>(r.bytes) / (1 << 20), 2),
               FormatBytes(r.fusion_threshold), Cell(fused, 3),
               Cell(unfused, 3), Cell(raw, 3), Cell(raw / fused, 3),
               Cell(unfused / fused, 2), Cell(no_la, 3), Cell(no_la / fused, 2),
               Cell(copies, 3));
  }
  fmt::print(
      "# raw/fused: fused step speed as a fraction of one raw allreduce; "
      "speedup: unfused / fused step time; lookahead: step time without the "
      "fusion look-ahead / with it (mixed-dtype sets only)\n");
  std::fflush(stdout);
}

int Main(MpiSession& mpi, int argc, char** argv) {
  Options opt;
  opt.shapes_dir = DefaultShapesDir();
  CLI::App app(
      "Step time of a gradient set with fusion on, off, and as one raw "
      "MPI_Allreduce.",
      std::string(kProgram));
  ConfigureApp(app);
  app.add_option("--collective", opt.collective_name,
                 "what each gradient goes through: allreduce, reducescatter "
                 "(each rank keeps its share of the rows) or alltoall (rows "
                 "split evenly over the ranks)")
      ->check(CLI::IsMember({"allreduce", "reducescatter", "alltoall"}));
  app.add_option("--workloads", opt.workloads,
                 "gradient sets: resnet50, vgg16, bert-base, many-small, "
                 "mixed-precision (comma-separated)")
      ->delimiter(',');
  app.add_option("--shapes-dir", opt.shapes_dir,
                 "directory of <model>.txt shape files");
  app.add_option("--modes", opt.mode_names,
                 "modes to run: fused, unfused, mpi_raw, fused_no_lookahead, "
                 "mpi_raw_copies (comma-separated; the last is not run "
                 "unless named)")
      ->delimiter(',');
  app.add_option("--scale", opt.scale,
                 "multiply every tensor's element count (at least 1 kept)")
      ->transform(NumberIn(0.0, 1.0, /*min_exclusive=*/true));
  app.add_option("--many-small-count", opt.many_small_count,
                 "many-small: the same 3.9 MiB of float32 in this many "
                 "tensors (1,000 of 4 KiB by default)")
      ->transform(IntIn(1, kManySmallElements));
  app.add_option("--steps", opt.steps, "timed steps per repeat")
      ->transform(IntIn(1, 1000000));
  app.add_option("--warmup", opt.warmup, "untimed steps before each timed loop")
      ->transform(IntIn(1, 1000000));
  app.add_option("--repeats", opt.repeats,
                 "timed loops per mode (median reported)")
      ->transform(IntIn(1, 100000));
  app.add_flag("--json", opt.json,
               "print one JSON object per row instead of the table");
  if (!ParseFlags(app, argc, argv, mpi.rank())) return 0;
  for (Collective c : {Collective::kAllreduce, Collective::kReducescatter,
                       Collective::kAlltoall}) {
    if (CollectiveName(c) == opt.collective_name) opt.collective = c;
  }
  for (const std::string& name : opt.mode_names) {
    const auto mode = std::find_if(kModes.begin(), kModes.end(),
                                   [&](Mode m) { return ModeName(m) == name; });
    if (mode == kModes.end()) {
      throw UsageError("--modes: unknown mode '" + name +
                       "' (expected fused, unfused, mpi_raw, "
                       "fused_no_lookahead or mpi_raw_copies)");
    }
    if (*mode == Mode::kRawCopies && opt.collective != Collective::kAllreduce) {
      throw UsageError(
          "--modes: mpi_raw_copies is an allreduce mode (not "
          "with --collective " +
          opt.collective_name + ")");
    }
    opt.modes.push_back(*mode);
  }
  std::vector<std::vector<TensorSpec>> tensor_sets;
  for (const std::string& workload : opt.workloads) {
    tensor_sets.push_back(LoadWorkload(opt, workload));
  }

  std::vector<Result> results;
  for (std::size_t w = 0; w < opt.workloads.size(); ++w) {
    GradientSet set(opt.workloads[w], std::move(tensor_sets[w]), opt.collective,
                    mpi.rank(), mpi.size());
    Result result;
    result.workload = opt.workloads[w];
    result.tensors = set.size();
    result.bytes = set.total_bytes();
    for (std::int64_t r = 0; r < opt.repeats; ++r) {
      // Rotate the order so that no mode always runs first or last.
      for (std::size_t k = 0; k < opt.modes.size(); ++k) {
        const Mode mode =
            opt.modes[(k + static_cast<std::size_t>(r)) % opt.modes.size()];
        // No raw allreduce of mixed dtypes; without mixed dtypes the
        // look-ahead changes nothing.
        if ((mode == Mode::kRaw || mode == Mode::kRawCopies) &&
            !set.single_dtype()) {
          continue;
        }
        if (mode == Mode::kNoLookahead && set.single_dtype()) continue;
        result.step_seconds[mode].push_back(TimeMode(opt, set, mode, result));
      }
    }
    results.push_back(std::move(result));
  }

  if (mpi.rank() != 0) return 0;
  if (!opt.json) {
    PrintTable(opt, results, mpi.size());
    return 0;
  }
  for (const Result& r : results) {
    for (const auto& [mode, seconds] : r.step_seconds) {
      std::cout << JsonLine({{"collective",
                              std::string(CollectiveName(opt.collective))},
                             {"workload", r.workload},
                             {"mode", ModeName(mode)},
                             {"step_time_ms", Median(seconds) * 1e3}})
                << "\n";
    }
  }
  std::cout << std::flush;
  return 0;
}

}  // namespace
}  // namespace hvdtune::bench

int main(int argc, char** argv) {
  return hvdtune::bench::RunBenchMain(argc, argv, hvdtune::bench::kProgram,
                                      hvdtune::bench::Main);
}
