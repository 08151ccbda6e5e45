// event_stream_bench: what the event stream costs the cycle thread for one
// cycle of 1,000 tensors (1,000 tensor events, 10 collective events, one
// cycle event), with no sink, a counting sink, and the default sinks plus a
// counting sink. Compare with the cycle time of such a cycle
// (negotiation_bench --tensors 1000: ~1.4 ms per active cycle here).
#include <benchmark/benchmark.h>

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "core/event_bus.h"
#include "hvdtune/services.h"

namespace hvdtune::internal {
namespace {

class CountingSink final : public EventSink {
 public:
  void OnCycle(const CycleEvent& e) override {
    bytes_.fetch_add(e.bytes, std::memory_order_relaxed);
  }
  void OnCollective(const CollectiveEvent& e) override {
    bytes_.fetch_add(e.bytes, std::memory_order_relaxed);
  }
  void OnTensor(const TensorEvent& e) override {
    tensors_.fetch_add(1, std::memory_order_relaxed);
    bytes_.fetch_add(e.bytes, std::memory_order_relaxed);
  }

 private:
  std::atomic<std::int64_t> tensors_{0}, bytes_{0};
};

void OneCycle(EventBus& bus, const std::vector<std::string>& names) {
  // What the cycle loop does: no event nobody wants is built.
  if (!bus.wants(EventKind::kTensor)) return;
  TensorEvent t;
  t.bytes = 4096;
  for (std::size_t i = 0; i < names.size(); ++i) {
    t.name = names[i];
    t.finished = static_cast<double>(i);
    bus.Emit(EventKind::kTensor, &EventSink::OnTensor, t);
    if (i % 100 == 99) {
      CollectiveEvent c;
      c.algorithm = "native";
      c.backend = "mpi";
      c.bytes = 409600;
      c.tensors = 100;
      bus.Emit(EventKind::kCollective, &EventSink::OnCollective, c);
    }
  }
  CycleEvent e;
  e.tensors = static_cast<int>(names.size());
  bus.Emit(EventKind::kCycle, &EventSink::OnCycle, e);
}

void Run(benchmark::State& state, int sinks) {
  std::vector<std::string> names;
  for (int i = 0; i < 1000; ++i) names.push_back("grad." + std::to_string(i));
  EventBus bus;
  if (sinks == 1 || sinks == 2) bus.Attach(std::make_shared<CountingSink>());
  if (sinks >= 2) {
    for (auto& s : DefaultServices(RuntimeConfig{}).sinks) bus.Attach(s);
  }
  for (auto _ : state) OneCycle(bus, names);
  state.counters["ns_per_tensor"] =
      benchmark::Counter(1000, benchmark::Counter::kIsIterationInvariantRate |
                                   benchmark::Counter::kInvert);
}

BENCHMARK_CAPTURE(Run, no_sink, 0);
BENCHMARK_CAPTURE(Run, default_sinks_only, 3);
BENCHMARK_CAPTURE(Run, counting_sink, 1);
BENCHMARK_CAPTURE(Run, default_and_counting_sinks, 2);

}  // namespace
}  // namespace hvdtune::internal

BENCHMARK_MAIN();
