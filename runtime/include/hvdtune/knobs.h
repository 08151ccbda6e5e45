// The knob table: every performance knob of the runtime, declared once.
// Environment parsing, the tuner's search space, what the store keeps, the
// metric labels and the configuration reference (docs/configuration.md) are
// all derived from it.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace hvdtune {

/// Index of a knob in the table. Add a knob = add an id and a table row.
enum class KnobId : int {
  kFusionThreshold = 0,
  kCycleTime,
  kCacheCapacity,
  kAllreduceAlgorithm,
  kRingSegmentBytes,
  kHierarchicalAllgather,
  kNumGroups,
  kPipelineChunkBytes,
  kHierarchicalChunkBytes,
  kCycleThreadBoost,
  kCount,
};
inline constexpr int kNumKnobs = static_cast<int>(KnobId::kCount);

enum class KnobType { kInteger, kFloat, kBool, kCategorical };

/// The engines under the runtime (HOROVOD_GLOO / HOROVOD_CONTROLLER): bit
/// flags, so that a categorical knob can say which engines serve a choice.
enum class EngineKind : std::uint8_t { kMpi = 1, kGloo = 2 };

/// "mpi" or "gloo".
std::string_view EngineName(EngineKind kind);
/// How the tuner sees the knob's axis.
enum class KnobScale { kLinear, kLog, kCategorical };

/// How the tuner moves a knob.
enum class TuneAs {
  /// Not tuned (only the environment sets it).
  kNever,
  /// Over [tune_min, tune_max] on `scale`.
  kRange,
  /// Every choice of a categorical or bool knob.
  kChoice,
  /// Two states: 0 (off) and the configured value (else the default, else
  /// tune_max), e.g. the response cache's capacity.
  kOnOff,
};

/// When a tunable knob is part of the search space.
enum class TuneWhen {
  kAlways,
  /// The layout has more than one node.
  kMultiNode,
  /// The application splits its gradients into groups
  /// (RuntimeOptions::tune_num_groups).
  kAppGroups,
  /// The layout has more than one node and the process may raise a
  /// thread's priority (CAP_SYS_NICE, or an RLIMIT_NICE that allows it).
  kMultiNodeRaisablePriority,
};

/// The allreduce algorithm knob's choices, in registry order (the
/// runtime's algorithm registry, runtime/src/core/algorithms/registry.cc, is
/// the only list).
std::span<const std::string_view> AllreduceAlgorithms();
/// The allreduce algorithm a job starts with when no variable sets it:
/// "native" where the job has GPUs (`devices`: NCCL's own allreduce picks
/// its algorithm by topology, and beats the hierarchical one), else
/// "hierarchical" when some node runs more than one rank (`shares_node`)
/// and either the job spans several nodes or the engine is Gloo (whose
/// hierarchical allreduce reduces through the node's shared memory), else
/// "native".
std::string_view DefaultAllreduceAlgorithm(bool shares_node, bool spans_nodes,
                                           EngineKind engine, bool devices);
/// For each of AllreduceAlgorithms(), the engines that serve it
/// (EngineKind bits).
std::span<const std::uint8_t> AllreduceAlgorithmEngines();

/// One column of Horovod's autotune CSV log that a knob provides.
struct HorovodLogColumn {
  std::string_view name;
  /// The knob's value as Horovod writes that column.
  double (*value)(double knob_value);
};

struct KnobSpec {
  KnobId id;
  /// Stable snake_case name used by the store, metrics, the CLI and the
  /// autotune log.
  std::string_view name;
  /// Environment variable that sets (and pins) the knob.
  std::string_view env;
  KnobType type;
  KnobScale scale = KnobScale::kLinear;
  double default_value = 0;
  /// When set, the default as the reference states it, for a knob whose
  /// default_value is replaced at init (the allreduce algorithm).
  std::string_view default_text = {};
  /// Range accepted from the environment (inclusive; a float knob's minimum
  /// is exclusive).
  double min_value = 0;
  double max_value = 0;
  /// How and when the tuner moves it; [tune_min, tune_max] lies inside
  /// [min_value, max_value].
  TuneAs tune_as = TuneAs::kNever;
  TuneWhen tune_when = TuneWhen::kAlways;
  double tune_min = 0;
  double tune_max = 0;
  /// Names of a categorical knob's values; its value is an index into this.
  std::span<const std::string_view> choices = {};
  /// Per choice, the engines that serve it (EngineKind bits); empty: all.
  std::span<const std::uint8_t> choice_engines = {};
  /// Whether `engine` serves choice `index` of this categorical knob.
  bool Serves(EngineKind engine, std::size_t index) const {
    return index >= choice_engines.size() ||
           (choice_engines[index] & static_cast<std::uint8_t>(engine)) != 0;
  }
  std::string_view unit = {};
  std::string_view description = {};
  /// Horovod's autotune log column this knob fills, if any.
  HorovodLogColumn horovod_log = {};

  bool tunable() const { return tune_as != TuneAs::kNever; }
};

/// All knobs, indexed by KnobId.
const std::array<KnobSpec, kNumKnobs>& KnobTable();
/// The knob table as docs/configuration.md's Markdown table (one row per knob:
/// name, variable, type and unit, default, accepted range, tuned range and
/// scale, meaning).
std::string KnobTableMarkdown();
const KnobSpec& GetKnobSpec(KnobId id);
/// Finds a knob by its `name`; nullopt when unknown.
std::optional<KnobId> FindKnob(std::string_view name);

/// One value per knob, stored as double (integers exactly, categorical and
/// bool as the choice index / 0-1).
class KnobSettings {
 public:
  /// Every knob at its default.
  KnobSettings();

  double Get(KnobId id) const { return values_[static_cast<int>(id)]; }
  void Set(KnobId id, double v) { values_[static_cast<int>(id)] = v; }

  std::int64_t fusion_threshold_bytes() const {
    return static_cast<std::int64_t>(Get(KnobId::kFusionThreshold));
  }
  double cycle_time_ms() const { return Get(KnobId::kCycleTime); }
  std::int64_t cache_capacity() const {
    return static_cast<std::int64_t>(Get(KnobId::kCacheCapacity));
  }
  int allreduce_algorithm() const {
    return static_cast<int>(Get(KnobId::kAllreduceAlgorithm));
  }
  std::string_view allreduce_algorithm_name() const;
  std::int64_t ring_segment_bytes() const {
    return static_cast<std::int64_t>(Get(KnobId::kRingSegmentBytes));
  }
  bool hierarchical_allgather() const {
    return Get(KnobId::kHierarchicalAllgather) != 0;
  }
  int num_groups() const { return static_cast<int>(Get(KnobId::kNumGroups)); }
  std::int64_t pipeline_chunk_bytes() const {
    return static_cast<std::int64_t>(Get(KnobId::kPipelineChunkBytes));
  }
  std::int64_t hierarchical_chunk_bytes() const {
    return static_cast<std::int64_t>(Get(KnobId::kHierarchicalChunkBytes));
  }
  int cycle_thread_boost() const {
    return static_cast<int>(Get(KnobId::kCycleThreadBoost));
  }

  /// Human form of one knob's value: "134217728", "1.5", "native", "true".
  std::string FormatValue(KnobId id) const;
  /// "fusion_threshold=134217728 cycle_time=1 ..." in table order.
  std::string ToString() const;

  bool operator==(const KnobSettings&) const = default;

 private:
  std::array<double, kNumKnobs> values_{};
};

/// Knob values plus which of them the user pinned through the environment
/// (a pinned knob is never tuned). An unpinned allreduce algorithm is
/// replaced at init by the one the job's node layout calls for
/// (docs/configuration.md, "The default allreduce algorithm").
struct KnobConfig {
  KnobSettings values;
  std::array<bool, kNumKnobs> pinned{};
};

/// Throws ConfigError naming the first knob whose value is outside its
/// accepted range (or not an integer where one is required).
void CheckKnobValues(const KnobSettings& values);

/// Looks up an environment variable; nullopt when unset.
using EnvLookup =
    std::function<std::optional<std::string>(std::string_view name)>;
/// The process environment (getenv).
EnvLookup ProcessEnv();

/// Parses one knob's text value strictly. Throws ConfigError naming the
/// variable, the value and what is allowed.
double ParseKnobValue(const KnobSpec& spec, std::string_view text);

/// Reads every knob's variable from `env`; unset ones keep their defaults and
/// stay tunable. Throws ConfigError on the first bad value.
KnobConfig ParseKnobsFromEnv(const EnvLookup& env);

/// Strict integer / float / bool parsers shared by all environment settings.
/// Each throws ConfigError naming `var`, `text` and the allowed range.
std::int64_t ParseIntSetting(std::string_view var, std::string_view text,
                             std::int64_t min_value, std::int64_t max_value);
double ParseFloatSetting(std::string_view var, std::string_view text,
                         double min_value, double max_value,
                         bool min_exclusive);
bool ParseBoolSetting(std::string_view var, std::string_view text);

}  // namespace hvdtune
