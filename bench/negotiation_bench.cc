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
  FlagParser flags(std::string(kProgram),
                   "Per-cycle negotiation cost with and without the response "
                   "cache.");
  flags.AddIntList("tensors", &opt.tensors, 1, 1000000,
                   "tensor counts per step (comma-separated)");
  flags.AddInt("elements", &opt.elements, 1, std::int64_t{1} << 24,
               "float32 elements per tensor");
  flags.AddInt("steps", &opt.steps, 1, 1000000, "timed steps per repeat");
  flags.AddInt("warmup", &opt.warmup, 1, 1000000,
               "untimed steps before each timed loop (the first fills the "
               "cache)");
  flags.AddInt("repeats", &opt.repeats, 1, 100000,
               "timed loops per setting (median reported)");
  flags.AddSwitch("json", &opt.json,
                  "print one JSON object per row instead of the table");
  if (!flags.Parse(argc, argv)) {
    if (mpi.rank() == 0) std::cout << flags.Usage();
    return 0;
  }

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
    std::printf(
        "# negotiation_bench: %d ranks, %lld float32 element(s) per tensor, "
        "median of %lld repeats x %lld steps (warm-up %lld)\n",
        mpi.size(), static_cast<long long>(opt.elements),
        static_cast<long long>(opt.repeats), static_cast<long long>(opt.steps),
        static_cast<long long>(opt.warmup));
    std::printf(
        "# negotiation us/cycle = active negotiation seconds / active cycles, "
        "mean (and max) over ranks\n");
    std::printf("%8s %6s %9s %15s %12s %12s %10s %9s\n", "tensors", "cache",
                "capacity", "negot_us/cycle", "max_us/cycle", "cycles/step",
                "step_ms", "hit_rate");
  }
  for (std::size_t t = 0; t < opt.tensors.size(); ++t) {
    for (int c = 1; c >= 0; --c) {
      const Samples& s = samples[t][c];
      const char* cache = c ? "on" : "off";
      if (opt.json) {
        std::cout << JsonRow()
                         .Add("tensors", opt.tensors[t])
                         .Add("cache", cache)
                         .Add("negotiation_us_per_cycle",
                              Median(s.negotiation_us_per_cycle))
                         .Add("step_time_ms", Median(s.step_ms))
                         .str()
                  << "\n";
      } else {
        std::printf("%8lld %6s %9lld %15.1f %12.1f %12.2f %10.3f %9.3f\n",
                    static_cast<long long>(opt.tensors[t]), cache,
                    static_cast<long long>(s.cache_capacity),
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
