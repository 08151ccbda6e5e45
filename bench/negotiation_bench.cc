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
//
// --compare-sink instead compares the cache-on runtime without an event sink
// and with one (--sink): a counting sink (the event stream's own cost), the
// metrics sink (HOROVOD_METRICS_PORT=0, endpoint included) or the timeline
// (HOROVOD_TIMELINE), the latter two attached from the environment as users
// get them.

#include <fmt/format.h>
#include <mpi.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "bench_common.h"
#include "hvdtune/runtime.h"
#include "hvdtune/workloads/gradient_set.h"

namespace hvdtune::bench {
using workloads::Collective;
using workloads::GradientSet;
using workloads::TensorSpec;

namespace {

constexpr std::string_view kProgram = "negotiation_bench";

struct Options {
  std::vector<std::int64_t> tensors = {161, 1000};
  std::int64_t elements = 1;
  std::int64_t steps = 20;
  std::int64_t warmup = 3;
  std::int64_t repeats = 5;
  bool json = false;
  /// Compare no event sink with a counting sink (cache on) instead of cache
  /// on with cache off.
  bool compare_sink = false;
  std::string timeline_path = "negotiation_bench_timeline.json";
  /// The sink compared with none: "counting" (the event stream alone),
  /// "metrics" (HOROVOD_METRICS_PORT=0: the Prometheus sink and its
  /// endpoint) or "timeline" (HOROVOD_TIMELINE, rank 0 writes a file).
  std::string sink_kind = "counting";
};

// The cheapest useful sink: counts what the cycle thread reports, to
// measure what the event stream itself costs.
class CountingSink final : public EventSink {
 public:
  void OnCycle(const CycleEvent& e) override {
    cycles_.fetch_add(1, std::memory_order_relaxed);
    bytes_.fetch_add(e.bytes, std::memory_order_relaxed);
  }
  void OnCollective(const CollectiveEvent&) override {
    collectives_.fetch_add(1, std::memory_order_relaxed);
  }
  void OnTensor(const TensorEvent&) override {
    tensors_.fetch_add(1, std::memory_order_relaxed);
  }
  std::int64_t tensors() const { return tensors_.load(); }

 private:
  std::atomic<std::int64_t> cycles_{0}, bytes_{0}, collectives_{0}, tensors_{0};
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

Sample Measure(const Options& opt, GradientSet& set, bool cache, bool sink,
               std::int64_t* capacity) {
  std::map<std::string, std::string> overrides;
  if (!cache) overrides.emplace("HOROVOD_CACHE_CAPACITY", "0");
  // The metrics and timeline sinks come the way users get them: from the
  // environment, through DefaultServices.
  const bool counted = sink && opt.sink_kind == "counting";
  if (sink && opt.sink_kind == "metrics") {
    overrides.emplace("HOROVOD_METRICS_PORT", "0");
  }
  if (sink && opt.sink_kind == "timeline") {
    overrides.emplace("HOROVOD_TIMELINE", opt.timeline_path);
  }
  RuntimeOptions options{EnvWithOverrides(std::move(overrides))};
  auto counting = std::make_shared<CountingSink>();
  if (counted) options.sinks.push_back(counting);
  Runtime runtime(options);
  *capacity = runtime.knobs().cache_capacity();
  set.ClearOutput();
  set.Step(runtime);
  if (const std::string error = set.CheckOutput(); !error.empty()) {
    throw std::runtime_error("wrong allreduce result: " + error);
  }
  for (std::int64_t i = 1; i < opt.warmup; ++i) set.Step(runtime);
  const RuntimeStats before = runtime.stats();
  const double step_seconds = TimeLoop(opt.steps, [&] { set.Step(runtime); });
  const RuntimeStats after = runtime.stats();
  runtime.Shutdown();
  if (counted && counting->tensors() != static_cast<std::int64_t>(set.size()) *
                                            (opt.steps + opt.warmup)) {
    throw std::runtime_error("the counting sink missed tensors");
  }

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
  app.add_flag("--compare-sink", opt.compare_sink,
               "compare the cache-on runtime without an event sink and with "
               "a counting sink attached (the event stream's cost), instead "
               "of cache on and off");
  app.add_option("--sink", opt.sink_kind,
                 "with --compare-sink: the sink compared with none: counting, "
                 "metrics (HOROVOD_METRICS_PORT=0) or timeline "
                 "(HOROVOD_TIMELINE=--timeline-path)")
      ->check(CLI::IsMember({"counting", "metrics", "timeline"}));
  app.add_option("--timeline-path", opt.timeline_path,
                 "the timeline file of --sink timeline (overwritten)");
  if (!ParseFlags(app, argc, argv, mpi.rank())) return 0;

  // [tensor count index][cache off = 0, on = 1] (with --compare-sink:
  // [no sink = 0, counting sink = 1], cache on)
  std::vector<std::array<Samples, 2>> samples(opt.tensors.size());
  for (std::size_t t = 0; t < opt.tensors.size(); ++t) {
    std::vector<TensorSpec> specs;
    for (std::int64_t i = 0; i < opt.tensors[t]; ++i) {
      specs.push_back({IndexedName("t", i), opt.elements});
    }
    GradientSet set("negotiation", std::move(specs), Collective::kAllreduce,
                    mpi.rank(), mpi.size());
    for (std::int64_t r = 0; r < opt.repeats; ++r) {
      for (int k = 0; k < 2; ++k) {
        const bool second = ((k + r) % 2) == 0;
        Samples& out = samples[t][second ? 1 : 0];
        const bool cache = opt.compare_sink || second;
        const bool sink = opt.compare_sink && second;
        const Sample s = Measure(opt, set, cache, sink, &out.cache_capacity);
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
    fmt::print("{:>8} {:>6} {:>9} {:>9} {:>15} {:>12} {:>12} {:>10} {:>9}\n",
               "tensors", "cache", "sink", "capacity", "negot_us/cycle",
               "max_us/cycle", "cycles/step", "step_ms", "hit_rate");
  }
  for (std::size_t t = 0; t < opt.tensors.size(); ++t) {
    for (int c = 1; c >= 0; --c) {
      const Samples& s = samples[t][c];
      const char* cache = c || opt.compare_sink ? "on" : "off";
      const std::string sink = opt.compare_sink && c ? opt.sink_kind : "none";
      if (opt.json) {
        std::cout << JsonLine({{"tensors", opt.tensors[t]},
                               {"cache", cache},
                               {"sink", sink},
                               {"negotiation_us_per_cycle",
                                Median(s.negotiation_us_per_cycle)},
                               {"step_time_ms", Median(s.step_ms)}})
                  << "\n";
      } else {
        fmt::print(
            "{:8} {:>6} {:>9} {:9} {:15.1f} {:12.1f} {:12.2f} {:10.3f} "
            "{:9.3f}\n",
            opt.tensors[t], cache, sink, s.cache_capacity,
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
