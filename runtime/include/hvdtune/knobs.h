// The knob table: every performance knob of the runtime, declared once.
// Environment parsing, the tuner's search space, what the store keeps, the
// metric labels and the README's table are all derived from it.
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
  kCount,
};
inline constexpr int kNumKnobs = static_cast<int>(KnobId::kCount);

enum class KnobType { kInteger, kFloat, kBool, kCategorical };
/// How the tuner should see the knob's axis.
enum class KnobScale { kLinear, kLog, kCategorical };

/// The allreduce algorithm knob's choices, in the order of its categorical
/// index. The runtime's algorithm registry names the same strings.
/// native = the backend library's own allreduce; ring = hvdtune's pipelined
/// ring on point-to-point; hierarchical = inside nodes, then across them.
inline constexpr std::array<std::string_view, 3> kAllreduceAlgorithmChoices = {
    "native", "ring", "hierarchical"};

struct KnobSpec {
  KnobId id;
  /// Stable snake_case name used by the store, metrics and the CLI.
  std::string_view name;
  /// Environment variable that sets (and pins) the knob.
  std::string_view env;
  KnobType type;
  KnobScale scale;
  double default_value;
  /// Range accepted from the environment (inclusive).
  double min_value;
  double max_value;
  /// Range the tuner explores (inclusive); inside [min_value, max_value].
  double tune_min;
  double tune_max;
  bool tunable;
  /// Names of a categorical knob's values; its value is an index into this.
  std::span<const std::string_view> choices;
  std::string_view unit;
  std::string_view description;
};

/// All knobs, indexed by KnobId.
const std::array<KnobSpec, kNumKnobs>& KnobTable();
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

  /// Human form of one knob's value: "134217728", "1.5", "native", "true".
  std::string FormatValue(KnobId id) const;
  /// "fusion_threshold=134217728 cycle_time=1 ..." in table order.
  std::string ToString() const;

  bool operator==(const KnobSettings&) const = default;

 private:
  std::array<double, kNumKnobs> values_{};
};

/// Knob values plus which of them the user pinned through the environment
/// (a pinned knob is never tuned).
struct KnobConfig {
  KnobSettings values;
  std::array<bool, kNumKnobs> pinned{};
};

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
