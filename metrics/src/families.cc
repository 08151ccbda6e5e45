#include "families.h"

#include <cmath>

namespace hvdtune::metrics::internal {
namespace {

using prometheus::BuildCounter;
using prometheus::BuildGauge;
using prometheus::BuildHistogram;
using prometheus::Histogram;

constexpr std::array<CollectiveType, kNumOps> kOps = [] {
  std::array<CollectiveType, kNumOps> ops{};
  for (int i = 0; i < kNumOps; ++i) ops[i] = static_cast<CollectiveType>(i);
  return ops;
}();

// Powers of two times `first`, `n` boundaries.
Histogram::BucketBoundaries Exponential(double first, int n) {
  Histogram::BucketBoundaries b;
  for (int i = 0; i < n; ++i) b.push_back(first * std::ldexp(1.0, i));
  return b;
}

// An elastic job's world and this process's resets by cause (every cause
// present from the start, so that rates and increases see the first one).
void AddElastic(prometheus::Registry& r, const prometheus::Labels& rank,
                const ElasticInfo& e) {
  BuildGauge()
      .Name("hvdtune_elastic_world")
      .Help(
          "The version of the elastic world this rank runs in (0 first, "
          "one more per reset; -1: not an elastic job)")
      .Labels(rank)
      .Register(r)
      .Add({})
      .Set(e.world);
  auto& resets = BuildCounter()
                     .Name("hvdtune_elastic_resets_total")
                     .Help(
                         "Elastic resets this rank's process went through, "
                         "by cause (rank_lost, host_unreachable, "
                         "hosts_added, hosts_removed, hosts_changed)")
                     .Labels(rank)
                     .Register(r);
  auto& last = BuildGauge()
                   .Name("hvdtune_elastic_last_reset")
                   .Help(
                       "1 for the cause of the reset into the current world, "
                       "0 for the others (all 0 before the first reset)")
                   .Labels(rank)
                   .Register(r);
  for (std::string_view cause : kElasticResetCauses) {
    const std::string c(cause);
    double n = 0;
    for (const auto& [name, count] : e.resets) {
      if (name == c) n = count;
    }
    resets.Add({{"cause", c}}).Increment(n);
    last.Add({{"cause", c}}).Set(e.last_reset == c ? 1 : 0);
  }
}

}  // namespace

Families::Families(prometheus::Registry& r, const RuntimeInfo& info) {
  const prometheus::Labels rank = {{"rank", std::to_string(info.rank)}};
  bytes_family = &BuildCounter()
                      .Name("hvdtune_collective_bytes_total")
                      .Help(
                          "Bytes carried by backend calls (a fused buffer "
                          "counts once), by collective and algorithm")
                      .Labels(rank)
                      .Register(r);
  operations_family = &BuildCounter()
                           .Name("hvdtune_collective_operations_total")
                           .Help("Backend calls, by collective and algorithm")
                           .Labels(rank)
                           .Register(r);
  for (CollectiveType op : kOps) {
    std::vector<std::string_view> names = {"native"};
    if (op == CollectiveType::kAllreduce) {
      names.assign(AllreduceAlgorithms().begin(), AllreduceAlgorithms().end());
    } else if (op == CollectiveType::kAllgather) {
      names.push_back("hierarchical");
    }
    for (std::string_view n : names) Algorithm(op, n);
  }
  auto& latency = BuildHistogram()
                      .Name("hvdtune_collective_latency_seconds")
                      .Help("Duration of one backend call, by collective")
                      .Labels(rank)
                      .Register(r);
  auto& tensors_family =
      BuildCounter()
          .Name("hvdtune_tensors_total")
          .Help(
              "Tensors finished (successfully or not), by collective and "
              "dtype")
          .Labels(rank)
          .Register(r);
  auto& tensor_bytes_family =
      BuildCounter()
          .Name("hvdtune_tensor_bytes_total")
          .Help("Bytes of the tensors finished, by collective and dtype")
          .Labels(rank)
          .Register(r);
  for (CollectiveType op : kOps) {
    const auto o = static_cast<int>(op);
    const std::string name(CollectiveTypeName(op));
    collective_latency[o] = &latency.Add({{"op", name}}, Exponential(1e-5, 22));
    for (int d = 0; d < kNumDataTypes; ++d) {
      const std::string dtype(DataTypeName(static_cast<DataType>(d)));
      tensors[o][d] = &tensors_family.Add({{"op", name}, {"dtype", dtype}});
      tensor_bytes[o][d] =
          &tensor_bytes_family.Add({{"op", name}, {"dtype", dtype}});
    }
  }

  cycles = &BuildCounter()
                .Name("hvdtune_cycles_total")
                .Help("Cycles of the background thread, idle ones included")
                .Labels(rank)
                .Register(r)
                .Add({});
  active_cycles = &BuildCounter()
                       .Name("hvdtune_active_cycles_total")
                       .Help("Cycles that negotiated or ran tensors")
                       .Labels(rank)
                       .Register(r)
                       .Add({});
  cycle_duration = &BuildHistogram()
                        .Name("hvdtune_cycle_duration_seconds")
                        .Help("Duration of an active cycle")
                        .Labels(rank)
                        .Register(r)
                        .Add({}, Exponential(1e-5, 22));
  negotiation_duration =
      &BuildHistogram()
           .Name("hvdtune_negotiation_duration_seconds")
           .Help("Time an active cycle spent agreeing on ready tensors")
           .Labels(rank)
           .Register(r)
           .Add({}, Exponential(1e-6, 24));
  cycle_tensors = &BuildHistogram()
                       .Name("hvdtune_cycle_tensors")
                       .Help("Tensors run in an active cycle")
                       .Labels(rank)
                       .Register(r)
                       .Add({}, Exponential(1, 14));
  fusion_fill = &BuildGauge()
                     .Name("hvdtune_fusion_fill_ratio")
                     .Help(
                         "Fused bytes of the last cycle that fused, over the "
                         "fusion threshold (0-1)")
                     .Labels(rank)
                     .Register(r)
                     .Add({});
  fused_bytes = &BuildCounter()
                     .Name("hvdtune_fused_bytes_total")
                     .Help(
                         "Allreduce bytes that went through the fusion "
                         "buffer")
                     .Labels(rank)
                     .Register(r)
                     .Add({});
  cache_hits = &BuildCounter()
                    .Name("hvdtune_response_cache_hits_total")
                    .Help("Tensors agreed on through the response cache")
                    .Labels(rank)
                    .Register(r)
                    .Add({});
  cache_misses = &BuildCounter()
                      .Name("hvdtune_response_cache_misses_total")
                      .Help("Tensors that needed full negotiation")
                      .Labels(rank)
                      .Register(r)
                      .Add({});
  throughput = &BuildGauge()
                    .Name("hvdtune_throughput_bytes_per_second")
                    .Help(
                        "Bytes carried by backend calls per second over "
                        "the last window of at least one second")
                    .Labels(rank)
                    .Register(r)
                    .Add({});

  auto& knob = BuildGauge()
                   .Name("hvdtune_knob_value")
                   .Help(
                       "Current value of every knob (categorical knobs: "
                       "the index of the choice; bools 0/1)")
                   .Labels(rank)
                   .Register(r);
  auto& choice = BuildGauge()
                     .Name("hvdtune_knob_choice")
                     .Help(
                         "1 for the current choice of a categorical or "
                         "bool knob, 0 for the others")
                     .Labels(rank)
                     .Register(r);
  for (const KnobSpec& spec : KnobTable()) {
    const auto k = static_cast<int>(spec.id);
    const std::string name(spec.name);
    knob_value[k] = &knob.Add({{"knob", name}});
    if (spec.type == KnobType::kCategorical) {
      for (std::string_view c : spec.choices) {
        knob_choice[k].push_back(
            &choice.Add({{"knob", name}, {"choice", std::string(c)}}));
      }
    } else if (spec.type == KnobType::kBool) {
      knob_choice[k].push_back(
          &choice.Add({{"knob", name}, {"choice", "false"}}));
      knob_choice[k].push_back(
          &choice.Add({{"knob", name}, {"choice", "true"}}));
    }
  }
  knob_changes = &BuildCounter()
                      .Name("hvdtune_knob_changes_total")
                      .Help("Knob updates applied by every rank")
                      .Labels(rank)
                      .Register(r)
                      .Add({});

  auto& phase_family = BuildGauge()
                           .Name("hvdtune_autotune_phase")
                           .Help(
                               "1 for the autotuner's current phase, 0 for "
                               "the others (rank 0 tunes)")
                           .Labels(rank)
                           .Register(r);
  for (int p = 0; p < kNumPhases; ++p) {
    phase[p] = &phase_family.Add(
        {{"phase",
          std::string(AutotunePhaseName(static_cast<AutotunePhase>(p)))}});
  }
  phase[0]->Set(1);
  samples = &BuildCounter()
                 .Name("hvdtune_autotune_samples_total")
                 .Help("Samples the autotuner scored, warm-up included")
                 .Labels(rank)
                 .Register(r)
                 .Add({});
  retunes = &BuildCounter()
                 .Name("hvdtune_autotune_retunes_total")
                 .Help(
                     "Times tuning re-opened after a frozen configuration "
                     "degraded")
                 .Labels(rank)
                 .Register(r)
                 .Add({});
  auto score = [&](const char* name, const char* help) {
    return &BuildGauge().Name(name).Help(help).Labels(rank).Register(r).Add({});
  };
  last_score = score("hvdtune_autotune_score_bytes_per_second",
                     "Score of the last autotune sample (bytes reduced per "
                     "second, median of its steps)");
  best_score = score("hvdtune_autotune_best_score_bytes_per_second",
                     "Best score observed so far");
  initial_score = score("hvdtune_autotune_initial_score_bytes_per_second",
                        "Score of the initial knobs (last warm-up sample; "
                        "the model's estimate once frozen)");
  auto estimate = [&](const char* name, const char* help,
                      std::array<prometheus::Gauge*, 3>& out) {
    auto& family = BuildGauge().Name(name).Help(help).Labels(rank).Register(r);
    const char* bounds[] = {"mean", "low", "high"};
    for (int b = 0; b < 3; ++b) out[b] = &family.Add({{"bound", bounds[b]}});
  };
  estimate("hvdtune_autotune_frozen_estimate_bytes_per_second",
           "The model's estimate of the frozen configuration's score at the "
           "last freeze: posterior mean and 95% interval (bound)",
           frozen_estimate);
  estimate("hvdtune_autotune_initial_estimate_bytes_per_second",
           "The model's estimate of the initial configuration's score at the "
           "last freeze (bound: mean, low, high)",
           initial_estimate);
  estimate("hvdtune_autotune_gain_estimate_ratio",
           "Estimated gain of the frozen configuration over the initial one "
           "(0.05: 5% faster) at the last freeze (bound: mean, low, high)",
           gain_estimate);

  auto& error_family = BuildCounter()
                           .Name("hvdtune_errors_total")
                           .Help("Errors, by kind")
                           .Labels(rank)
                           .Register(r);
  for (int k = 0; k < kNumErrorKinds; ++k) {
    errors[k] = &error_family.Add(
        {{"kind",
          std::string(ErrorKindName(static_cast<ErrorEvent::Kind>(k)))}});
  }
  auto& stall_family =
      BuildCounter()
          .Name("hvdtune_stalls_total")
          .Help(
              "Stalled tensors reported by rank 0: warning (past "
              "HOROVOD_STALL_CHECK_TIME_SECONDS) or shutdown (failed)")
          .Labels(rank)
          .Register(r);
  stall_warnings = &stall_family.Add({{"kind", "warning"}});
  stall_shutdowns = &stall_family.Add({{"kind", "shutdown"}});
  auto& store_family = BuildCounter()
                           .Name("hvdtune_store_lookups_total")
                           .Help("Configuration store lookups, by result")
                           .Labels(rank)
                           .Register(r);
  for (int i = 0; i < 4; ++i) {
    const auto result = static_cast<StoreLookupEvent::Result>(i);
    store_lookups[i] = &store_family.Add(
        {{"result", std::string(StoreLookupResultName(result))}});
  }
  auto& writes_family =
      BuildCounter()
          .Name("hvdtune_store_writes_total")
          .Help(
              "Configuration store writes of rank 0, by result: written, "
              "dropped (queue full, server away, shutdown) or failed")
          .Labels(rank)
          .Register(r);
  store_writes[0] = &writes_family.Add({{"result", "written"}});
  store_writes[1] = &writes_family.Add({{"result", "dropped"}});
  store_writes[2] = &writes_family.Add({{"result", "failed"}});

  backend_wait =
      &BuildGauge()
           .Name("hvdtune_backend_wait_seconds")
           .Help(
               "How long the collective now executing has been inside MPI "
               "or NCCL waiting for the other ranks (0: none is "
               "executing); sampled every 0.25 s while stall handling is "
               "on. A value that keeps growing is a stall")
           .Labels(rank)
           .Register(r)
           .Add({});
  unreachable_ranks =
      &BuildGauge()
           .Name("hvdtune_unreachable_ranks")
           .Help(
               "Ranks that did not answer this rank when it asked during "
               "the current stall (asked past HOROVOD_STALL_CHECK_TIME_"
               "SECONDS or HOROVOD_STALL_SHUTDOWN_TIME_SECONDS); 0 when "
               "nothing is stalled")
           .Labels(rank)
           .Register(r)
           .Add({});

  BuildGauge()
      .Name("hvdtune_build_info")
      .Help("Always 1; the labels say what this rank runs")
      .Labels(rank)
      .Register(r)
      .Add({{"version", HVDTUNE_VERSION_STRING},
            {"backend", HVDTUNE_BACKENDS},
            {"mpi_version",
             info.mpi_version.empty() ? "unknown" : info.mpi_version},
            {"nccl_version", HVDTUNE_NCCL_VERSION}})
      .Set(1);
  BuildGauge()
      .Name("hvdtune_ranks")
      .Help("Ranks in the job (in an elastic job: in the current world)")
      .Labels(rank)
      .Register(r)
      .Add({})
      .Set(info.size);
  AddElastic(r, rank, info.elastic);
  SetKnobs(*this, info.knobs);
}

AlgorithmChildren& Families::Algorithm(CollectiveType op,
                                       std::string_view name) {
  auto& list = algorithms[static_cast<int>(op)];
  for (AlgorithmChildren& a : list) {
    if (a.algorithm == name) return a;
  }
  const prometheus::Labels labels = {
      {"op", std::string(CollectiveTypeName(op))},
      {"algorithm", std::string(name)}};
  list.push_back({std::string(name), &bytes_family->Add(labels),
                  &operations_family->Add(labels)});
  return list.back();
}

void SetKnobs(Families& f, const KnobSettings& values) {
  for (int k = 0; k < kNumKnobs; ++k) {
    const double v = values.Get(static_cast<KnobId>(k));
    f.knob_value[k]->Set(v);
    auto& choices = f.knob_choice[k];
    for (std::size_t c = 0; c < choices.size(); ++c) {
      choices[c]->Set(static_cast<double>(c) == v ? 1 : 0);
    }
  }
}

}  // namespace hvdtune::metrics::internal
