// negotiation_bench: what agreeing on ready tensors costs per cycle, with the
// response cache (HOROVOD_CACHE_CAPACITY as set, default 1024) and without
// it (HOROVOD_CACHE_CAPACITY=0).
//
// A step enqueues N tiny tensors (default one float32 each, so the data
// moved is negligible and negotiation dominates) and waits for all. The
// per-cycle cost is the runtime's own counter: active negotiation seconds /
// active cycles over the timed steps (warm-up excluded), averaged over ranks
// (a rank's figure includes waiting for later ranks to join the exchange, so
// the table also shows the largest), median over repeats. Each repeat runs
// cache on and off in a rotating order, each with a fresh Runtime.

#include <fmt/format.h>
#include <mpi.h>

#include <array>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "bench_common.h"
#include "gradient_set.h"
#include "hvdtune/runtime.h"

namespace hvdtune::bench {
namespace {

constexpr std::string_view kProgram = "negotiation_bench";

struct Options {
  std::vector<std::int64_t> tensors = {161, 1000};
  std::int64_t elements = 1;
  std::int64_t steps = 20;
  std::int64_t warmup = 3;
  std::int64_t repeats = 5;
  bool json = false;
};

struct Samples {
  std::vector<double> negotiation_us_per_cycle;
  std::vector<double> max_negotiation_us_per_cycle;
  std::vector<double> step_ms;
  std::vector<double> active_cycles_per_step;
  std::vector<double> cache_hit_fraction;
  std::int64_t cache_capacity = 0;
};

struct Sample {
  double negotiation_us_per_cycle;
  double max_negotiation_us_per_cycle;
  double step_ms;
  double active_cycles_per_step;
  double cache_hit_fraction;
};

Sample Measure(const Options& opt, GradientSet& set, bool cache,
               std::int64_t* capacity, int ranks) {
  std::map<std::string, std::string> overrides;
  if (!cache) overrides.emplace("HOROVOD_CACHE_CAPACITY", "0");
  Runtime runtime(RuntimeOptions{EnvWithOverrides(std::move(overrides))});
  *capacity = runtime.knobs().cache_capacity();
  set.ClearOutput();
  set.Step(runtime);
  if (!set.CheckOutput(ranks)) {
    throw std::runtime_error("wrong allreduce result");
  }
  for (std::int64_t i = 1; i < opt.warmup; ++i) set.Step(runtime);
  const RuntimeStats before = runtime.stats();
  const double step_seconds = TimeLoop(opt.steps, [&] { set.Step(runtime); });
  const RuntimeStats after = runtime.stats();
  runtime.Shutdown();

  const double cycles =
      static_cast<double>(after.active_cycles - before.active_cycles);
  const double negotiation =
      after.active_negotiation_seconds - before.active_negotiation_seconds;
  const double hits = static_cast<double>(after.cache_hits - before.cache_hits);
  const double misses =
      static_cast<double>(after.cache_misses - before.cache_misses);
  Sample s;
  const double per_cycle_us = cycles > 0 ? negotiation / cycles * 1e6 : 0.0;
  s.negotiation_us_per_cycle = MeanAcrossRanks(per_cycle_us);
  s.max_negotiation_us_per_cycle = MaxAcrossRanks(per_cycle_us);
  s.step_ms = step_seconds * 1e3;
  s.active_cycles_per_step =
      MaxAcrossRanks(cycles / static_cast<double>(opt.steps));
  s.cache_hit_fraction = hits + misses > 0 ? hits / (hits + misses) : 0.0;
  return s;
}

int Main(MpiSession& mpi, int argc, char** argv) {
  Options opt;
  CLI::App app(
      "Per-cycle negotiation cost with and without the response cache.",
      std::string(kProgram));
  ConfigureApp(app);
  app.add_option("--tensors", opt.tensors,
                 "tensor counts per step (comma-separated)")
      ->delimiter(',')
      ->transform(IntIn(1, 1000000));
  app.add_option("--elements", opt.elements, "float32 elements per tensor")
      ->transform(IntIn(1, std::int64_t{1} << 24));
  app.add_option("--steps", opt.steps, "timed steps per repeat")
      ->transform(IntIn(1, 1000000));
  app.add_option("--warmup", opt.warmup,
                 "untimed steps before each timed loop (the first fills the "
                 "cache)")
      ->transform(IntIn(1, 1000000));
  app.add_option("--repeats", opt.repeats,
                 "timed loops per setting (median reported)")
      ->transform(IntIn(1, 100000));
  app.add_flag("--json", opt.json,
               "print one JSON object per row instead of the table");
  if (!ParseFlags(app, argc, argv, mpi.rank())) return 0;

  // [tensor count index][cache off = 0, on = 1]
  std::vector<std::array<Samples, 2>> samples(opt.tensors.size());
  for (std::size_t t = 0; t < opt.tensors.size(); ++t) {
    std::vector<TensorSpec> specs;
    for (std::int64_t i = 0; i < opt.tensors[t]; ++i) {
      specs.push_back({IndexedName("t", i), opt.elements});
    }
    GradientSet set("negotiation", std::move(specs));
    for (std::int64_t r = 0; r < opt.repeats; ++r) {
      for (int k = 0; k < 2; ++k) {
        const bool cache = ((k + r) % 2) == 0;
        Samples& out = samples[t][cache ? 1 : 0];
        const Sample s =
            Measure(opt, set, cache, &out.cache_capacity, mpi.size());
        out.negotiation_us_per_cycle.push_back(s.negotiation_us_per_cycle);
        out.max_negotiation_us_per_cycle.push_back(
            s.max_negotiation_us_per_cycle);
        out.step_ms.push_back(s.step_ms);
        out.active_cycles_per_step.push_back(s.active_cycles_per_step);
        out.cache_hit_fraction.push_back(s.cache_hit_fraction);
      }
    }
  }

  if (mpi.rank() != 0) return 0;
  if (!opt.json) {
    fmt::print(
        "# negotiation_bench: {} ranks, {} float32 element(s) per tensor, "
        "median of {} repeats x {} steps (warm-up {})\n",
        mpi.size(), opt.elements, opt.repeats, opt.steps, opt.warmup);
    fmt::print(
        "# negotiation us/cycle = active negotiation seconds / active cycles, "
        "mean (and max) over ranks\n");
    fmt::print("{:>8} {:>6} {:>9} {:>15} {:>12} {:>12} {:>10} {:>9}\n",
               "tensors", "cache", "capacity", "negot_us/cycle", "max_us/cycle",
               "cycles/step", "step_ms", "hit_rate");
  }
  for (std::size_t t = 0; t < opt.tensors.size(); ++t) {
    for (int c = 1; c >= 0; --c) {
      const Samples& s = samples[t][c];
      const char* cache = c ? "on" : "off";
      if (opt.json) {
        std::cout << JsonLine({{"tensors", opt.tensors[t]},
                               {"cache", cache},
                               {"negotiation_us_per_cycle",
                                Median(s.negotiation_us_per_cycle)},
                               {"step_time_ms", Median(s.step_ms)}})
                  << "\n";
      } else {
        fmt::print(
            "{:8} {:>6} {:9} {:15.1f} {:12.1f} {:12.2f} {:10.3f} {:9.3f}\n",
            opt.tensors[t], cache, s.cache_capacity,
            Median(s.negotiation_us_per_cycle),
            Median(s.max_negotiation_us_per_cycle),
            Median(s.active_cycles_per_step), Median(s.step_ms),
            Median(s.cache_hit_fraction));
      }
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
