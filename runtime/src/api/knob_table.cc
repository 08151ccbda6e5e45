// The knob table: every knob's name, variable, type, range, default and
// how the tuner treats it; the one place a knob is defined.
#include <string>

#include "hvdtune/knobs.h"

namespace hvdtune {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;

double Identity(double v) { return v; }
double IsOn(double v) { return v > 0 ? 1.0 : 0.0; }
double InMiB(double v) { return v / kMiB; }
double IsHierarchical(double v) {
  const auto choices = AllreduceAlgorithms();
  const auto i = static_cast<std::size_t>(v);
  return i < choices.size() && choices[i] == "hierarchical" ? 1.0 : 0.0;
}

// Built on first use: the algorithm choices come from the registry.
std::array<KnobSpec, kNumKnobs> BuildTable() {
  const auto algorithms = AllreduceAlgorithms();
  const double last_algorithm = static_cast<double>(algorithms.size() - 1);
  return {{
      {.id = KnobId::kFusionThreshold,
       .name = "fusion_threshold",
       .env = "HOROVOD_FUSION_THRESHOLD",
       .type = KnobType::kInteger,
       .scale = KnobScale::kLog,
       .default_value = 128 * kMiB,
       .min_value = 0,
       .max_value = 16384 * kMiB,
       .tune_as = TuneAs::kRange,
       .tune_min = 1 * kMiB,
       .tune_max = 256 * kMiB,
       .unit = "bytes",
       .description =
           "Largest fused allreduce buffer; 0 turns tensor fusion off.",
       .horovod_log = {"tensor_fusion_threshold", InMiB}},
      {.id = KnobId::kCycleTime,
       .name = "cycle_time",
       .env = "HOROVOD_CYCLE_TIME",
       .type = KnobType::kFloat,
       .scale = KnobScale::kLog,
       .default_value = 1.0,
       .min_value = 0.0,
       .max_value = 10000.0,
       .tune_as = TuneAs::kRange,
       .tune_min = 0.2,
       .tune_max = 50.0,
       .unit = "ms",
       .description =
           "Longest a tensor waits to be batched with others (greater than "
           "0): a cycle starts this long after the previous one began, or at "
           "once when a tensor arrives while nothing of this rank is queued "
           "or in flight, so a lone collective does not wait for the timer; "
           "a burst of submissions is gathered for at most this long.",
       .horovod_log = {"cycle_time_ms", Identity}},
      {.id = KnobId::kCacheCapacity,
       .name = "cache_capacity",
       .env = "HOROVOD_CACHE_CAPACITY",
       .type = KnobType::kInteger,
       .scale = KnobScale::kLinear,
       .default_value = 1024,
       .min_value = 0,
       .max_value = 1 << 20,
       .tune_as = TuneAs::kOnOff,
       .tune_min = 0,
       .tune_max = 1024,
       .unit = "entries",
       .description =
           "Response cache entries; 0 turns the cache off (repeated tensors "
           "are negotiated in full every time). The tuner switches it "
           "between off and the configured capacity.",
       .horovod_log = {"cache_enabled", IsOn}},
      {.id = KnobId::kAllreduceAlgorithm,
       .name = "allreduce_algorithm",
       .env = "HVDTUNE_ALLREDUCE_ALGORITHM",
       .type = KnobType::kCategorical,
       .scale = KnobScale::kCategorical,
       .default_value = 0,
       .default_text = "by node layout: hierarchical or native",
       .min_value = 0,
       .max_value = last_algorithm,
       .tune_as = TuneAs::kChoice,
       .tune_min = 0,
       .tune_max = last_algorithm,
       .choices = algorithms,
       .choice_engines = AllreduceAlgorithmEngines(),
       .description =
           "Allreduce algorithm, each engine its own (MPI: native, ring, "
           "hierarchical; Gloo: all five): native = the library's own "
           "allreduce (MPI_Allreduce, ncclAllReduce; on Gloo one exchange "
           "round up to 64 KiB, Gloo's default above); ring = pipelined "
           "ring on point-to-point (segment: ring_segment_bytes; "
           "on Gloo, Gloo's ring); hierarchical = across nodes through each "
           "node (MPI: reduce-scatter inside each node, allreduce across "
           "nodes, allgather inside each node; Gloo: the same through each "
           "node's shared memory, a ring per local rank across nodes, where "
           "nodes are even, else reduce to each node's leader, ring among "
           "the leaders, broadcast inside each node); "
           "ring_chunked and halving_doubling = Gloo's algorithms of those "
           "names. Unset, a job without GPUs starts with hierarchical when "
           "some node runs more than one rank and the job spans more than "
           "one node (on Gloo also on one node), else with native; a job "
           "with GPUs starts with native (NCCL's). "
           "HOROVOD_HIERARCHICAL_ALLREDUCE=1 pins it to hierarchical, "
           "=0 to native.",
       .horovod_log = {"hierarchical_allreduce", IsHierarchical}},
      {.id = KnobId::kRingSegmentBytes,
       .name = "ring_segment_bytes",
       .env = "HVDTUNE_RING_SEGMENT_BYTES",
       .type = KnobType::kInteger,
       .scale = KnobScale::kLog,
       .default_value = 1 * kMiB,
       .min_value = 4096,
       .max_value = 1024 * kMiB,
       .tune_as = TuneAs::kRange,
       .tune_min = 16 * 1024,
       .tune_max = 16 * kMiB,
       .unit = "bytes",
       .description =
           "Pipeline segment of the ring allreduce: each step's chunk is "
           "sent and reduced in pieces of this size."},
      {.id = KnobId::kHierarchicalAllgather,
       .name = "hierarchical_allgather",
       .env = "HOROVOD_HIERARCHICAL_ALLGATHER",
       .type = KnobType::kBool,
       .scale = KnobScale::kCategorical,
       .default_value = 0,
       .min_value = 0,
       .max_value = 1,
       .tune_as = TuneAs::kChoice,
       .tune_when = TuneWhen::kMultiNode,
       .tune_min = 0,
       .tune_max = 1,
       .description =
           "Allgather inside each node first, then across nodes among node "
           "leaders, then broadcast inside each node.",
       .horovod_log = {"hierarchical_allgather", Identity}},
      {.id = KnobId::kNumGroups,
       .name = "num_groups",
       .env = "HVDTUNE_NUM_GROUPS",
       .type = KnobType::kInteger,
       .scale = KnobScale::kLinear,
       .default_value = 0,
       .min_value = 0,
       .max_value = 1024,
       .tune_as = TuneAs::kRange,
       .tune_when = TuneWhen::kAppGroups,
       .tune_min = 0,
       .tune_max = 16,
       .unit = "groups",
       .description =
           "How many groups a framework layer splits its gradient list into "
           "for grouped allreduce; 0 = no grouping."},
      {.id = KnobId::kPipelineChunkBytes,
       .name = "pipeline_chunk_bytes",
       .env = "HVDTUNE_PIPELINE_CHUNK_BYTES",
       .type = KnobType::kInteger,
       .scale = KnobScale::kLog,
       .default_value = 4 * kMiB,
       .min_value = 0,
       .max_value = 16384 * kMiB,
       .tune_as = TuneAs::kNever,
       .tune_min = 256 * 1024,
       .tune_max = 64 * kMiB,
       .unit = "bytes",
       .description =
           "Allreduces (fused or not) run in chunks of this size: copy in, "
           "reduce and copy out chunk by chunk while it is in cache; a "
           "reducescatter larger than this runs as one backend reducescatter "
           "per piece of about this size (of every rank's block); 0 = one "
           "piece."},
      {.id = KnobId::kHierarchicalChunkBytes,
       .name = "hierarchical_chunk_bytes",
       .env = "HVDTUNE_HIERARCHICAL_CHUNK_BYTES",
       .type = KnobType::kInteger,
       .scale = KnobScale::kLog,
       .default_value = 0,
       .min_value = 0,
       .max_value = 16384 * kMiB,
       .tune_as = TuneAs::kNever,
       .tune_min = 1 * kMiB,
       .tune_max = 16 * kMiB,
       .unit = "bytes",
       .description =
           "Pipeline piece of the hierarchical allreduce: while one piece "
           "crosses the network between nodes, the next is reduce-scattered "
           "and the previous allgathered inside the node; 0 = one piece (the "
           "three phases one after another; on Gloo's shared-memory path, "
           "pieces of 1 MiB; when set, this between 64 KiB and 4 MiB). Not "
           "tuned: on the emulated cluster of docs/benchmarks.md it measured "
           "no faster than 0."},
      {.id = KnobId::kCycleThreadBoost,
       .name = "cycle_thread_boost",
       .env = "HVDTUNE_CYCLE_THREAD_BOOST",
       .type = KnobType::kInteger,
       .scale = KnobScale::kLinear,
       .default_value = 0,
       .min_value = 0,
       .max_value = 39,
       .tune_as = TuneAs::kOnOff,
       .tune_when = TuneWhen::kMultiNodeRaisablePriority,
       .tune_min = 0,
       .tune_max = 10,
       .unit = "nice levels",
       .description =
           "How many nice levels the cycle thread runs below the one it "
           "started with (a higher priority; at most down to -20); 0 = the "
           "application's. The thread polls while it waits, so a boosted one "
           "takes shared cores from the training threads whenever it can run: "
           "worth it where a slow link between nodes is the limit (emulated "
           "1gbe cluster: 2-4% faster at 10), a loss where compute is (10gbe: "
           "7-15% slower; one node: up to 19%). The tuner switches it between "
           "0 and the configured value (10 when unset) on more than one node, "
           "where the process may raise a thread's priority (root, "
           "CAP_SYS_NICE or RLIMIT_NICE); a refused boost warns once and the "
           "thread keeps its priority."},
  }};
}

}  // namespace

const std::array<KnobSpec, kNumKnobs>& KnobTable() {
  static const std::array<KnobSpec, kNumKnobs> table = BuildTable();
  return table;
}

const KnobSpec& GetKnobSpec(KnobId id) {
  return KnobTable()[static_cast<int>(id)];
}

std::optional<KnobId> FindKnob(std::string_view name) {
  for (const auto& spec : KnobTable()) {
    if (spec.name == name) return spec.id;
  }
  return std::nullopt;
}

}  // namespace hvdtune
