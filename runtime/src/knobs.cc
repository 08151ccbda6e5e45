#include "hvdtune/knobs.h"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <sstream>
#include <stdexcept>

#include "hvdtune/status.h"

namespace hvdtune {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;

const std::array<KnobSpec, kNumKnobs> kTable = {{
    {KnobId::kFusionThreshold,
     "fusion_threshold",
     "HOROVOD_FUSION_THRESHOLD",
     KnobType::kInteger,
     KnobScale::kLog,
     128 * kMiB,
     0,
     16384 * kMiB,
     1 * kMiB,
     256 * kMiB,
     true,
     {},
     "bytes",
     "Largest fused allreduce buffer; 0 turns tensor fusion off."},
    {KnobId::kCycleTime,
     "cycle_time",
     "HOROVOD_CYCLE_TIME",
     KnobType::kFloat,
     KnobScale::kLog,
     1.0,
     0.0,
     10000.0,
     0.2,
     50.0,
     true,
     {},
     "ms",
     "Pause between cycles of the background thread (greater than 0)."},
    {KnobId::kCacheCapacity,
     "cache_capacity",
     "HOROVOD_CACHE_CAPACITY",
     KnobType::kInteger,
     KnobScale::kLinear,
     1024,
     0,
     1 << 20,
     0,
     1024,
     true,
     {},
     "entries",
     "Response cache entries; 0 turns the cache off (repeated tensors are "
     "negotiated in full every time). The tuner switches it on or off."},
    {KnobId::kAllreduceAlgorithm, "allreduce_algorithm",
     "HVDTUNE_ALLREDUCE_ALGORITHM", KnobType::kCategorical,
     KnobScale::kCategorical, 0, 0, kAllreduceAlgorithmChoices.size() - 1, 0,
     kAllreduceAlgorithmChoices.size() - 1, true, kAllreduceAlgorithmChoices,
     "",
     "Allreduce algorithm: native = the MPI library's own MPI_Allreduce; "
     "ring = pipelined ring on point-to-point (segment: ring_segment_bytes); "
     "hierarchical = reduce-scatter inside each node, allreduce across "
     "nodes, allgather inside each node. HOROVOD_HIERARCHICAL_ALLREDUCE=1 "
     "pins it to hierarchical, =0 to native."},
    {KnobId::kRingSegmentBytes,
     "ring_segment_bytes",
     "HVDTUNE_RING_SEGMENT_BYTES",
     KnobType::kInteger,
     KnobScale::kLog,
     1 * kMiB,
     4096,
     1024 * kMiB,
     16 * 1024,
     16 * kMiB,
     true,
     {},
     "bytes",
     "Pipeline segment of the ring allreduce: each step's chunk is sent and "
     "reduced in pieces of this size."},
    {KnobId::kHierarchicalAllgather,
     "hierarchical_allgather",
     "HOROVOD_HIERARCHICAL_ALLGATHER",
     KnobType::kBool,
     KnobScale::kCategorical,
     0,
     0,
     1,
     0,
     1,
     true,
     {},
     "",
     "Allgather inside each node first, then across nodes among node "
     "leaders, then broadcast inside each node."},
    {KnobId::kNumGroups,
     "num_groups",
     "HVDTUNE_NUM_GROUPS",
     KnobType::kInteger,
     KnobScale::kLinear,
     0,
     0,
     1024,
     0,
     16,
     true,
     {},
     "groups",
     "How many groups a framework layer splits its gradient list into for "
     "grouped allreduce; 0 = no grouping. Tuned only when the application "
     "says it groups (RuntimeOptions::tune_num_groups)."},
    {KnobId::kPipelineChunkBytes,
     "pipeline_chunk_bytes",
     "HVDTUNE_PIPELINE_CHUNK_BYTES",
     KnobType::kInteger,
     KnobScale::kLog,
     4 * kMiB,
     0,
     16384 * kMiB,
     256 * 1024,
     64 * kMiB,
     false,
     {},
     "bytes",
     "Allreduces (fused or not) run in chunks of this size: copy in, reduce "
     "and copy out chunk by chunk while it is in cache; 0 = one piece."},
}};

std::string Allowed(double lo, double hi, bool lo_exclusive) {
  std::ostringstream os;
  os << (lo_exclusive ? "a number greater than " : "a number from ") << lo;
  os << (lo_exclusive ? " and at most " : " to ") << hi;
  return os.str();
}

[[noreturn]] void Fail(std::string_view var, std::string_view text,
                       const std::string& allowed) {
  std::ostringstream os;
  os << "invalid value '" << text << "' for " << var << ": expected "
     << allowed;
  throw ConfigError(os.str());
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) {
    s.remove_prefix(1);
  }
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) {
    s.remove_suffix(1);
  }
  return s;
}

}  // namespace

const std::array<KnobSpec, kNumKnobs>& KnobTable() { return kTable; }

const KnobSpec& GetKnobSpec(KnobId id) { return kTable[static_cast<int>(id)]; }

std::optional<KnobId> FindKnob(std::string_view name) {
  for (const auto& spec : kTable) {
    if (spec.name == name) return spec.id;
  }
  return std::nullopt;
}

KnobSettings::KnobSettings() {
  for (const auto& spec : kTable) Set(spec.id, spec.default_value);
}

std::string_view KnobSettings::allreduce_algorithm_name() const {
  return kAllreduceAlgorithmChoices.at(allreduce_algorithm());
}

std::string KnobSettings::FormatValue(KnobId id) const {
  const KnobSpec& spec = GetKnobSpec(id);
  const double v = Get(id);
  switch (spec.type) {
    case KnobType::kInteger:
      return std::to_string(static_cast<std::int64_t>(v));
    case KnobType::kBool:
      return v != 0 ? "true" : "false";
    case KnobType::kCategorical: {
      const auto index = static_cast<std::size_t>(v);
      return index < spec.choices.size() ? std::string(spec.choices[index])
                                         : std::to_string(index);
    }
    case KnobType::kFloat: {
      std::ostringstream os;
      os << v;
      return os.str();
    }
  }
  return {};
}

std::string KnobSettings::ToString() const {
  std::string out;
  for (const auto& spec : kTable) {
    if (!out.empty()) out += ' ';
    out += spec.name;
    out += '=';
    out += FormatValue(spec.id);
  }
  return out;
}

EnvLookup ProcessEnv() {
  return [](std::string_view name) -> std::optional<std::string> {
    const char* v = std::getenv(std::string(name).c_str());
    if (v == nullptr) return std::nullopt;
    return std::string(v);
  };
}

std::int64_t ParseIntSetting(std::string_view var, std::string_view text,
                             std::int64_t min_value, std::int64_t max_value) {
  const std::string_view t = Trim(text);
  std::int64_t value = 0;
  const auto [ptr, ec] = std::from_chars(t.data(), t.data() + t.size(), value);
  const std::string allowed = "an integer from " + std::to_string(min_value) +
                              " to " + std::to_string(max_value);
  if (t.empty() || ec != std::errc() || ptr != t.data() + t.size() ||
      value < min_value || value > max_value) {
    Fail(var, text, allowed);
  }
  return value;
}

double ParseFloatSetting(std::string_view var, std::string_view text,
                         double min_value, double max_value,
                         bool min_exclusive) {
  const std::string_view t = Trim(text);
  double value = 0;
  const auto [ptr, ec] = std::from_chars(t.data(), t.data() + t.size(), value);
  if (t.empty() || ec != std::errc() || ptr != t.data() + t.size() ||
      !std::isfinite(value) || value > max_value ||
      (min_exclusive ? value <= min_value : value < min_value)) {
    Fail(var, text, Allowed(min_value, max_value, min_exclusive));
  }
  return value;
}

bool ParseBoolSetting(std::string_view var, std::string_view text) {
  const std::string_view t = Trim(text);
  if (t == "1" || t == "true" || t == "TRUE" || t == "True") return true;
  if (t == "0" || t == "false" || t == "FALSE" || t == "False") return false;
  Fail(var, text, "0, 1, true or false");
}

double ParseKnobValue(const KnobSpec& spec, std::string_view text) {
  switch (spec.type) {
    case KnobType::kInteger:
      return static_cast<double>(ParseIntSetting(
          spec.env, text, static_cast<std::int64_t>(spec.min_value),
          static_cast<std::int64_t>(spec.max_value)));
    case KnobType::kFloat:
      // Every float knob today is a duration or size that must be positive.
      return ParseFloatSetting(spec.env, text, spec.min_value, spec.max_value,
                               /*min_exclusive=*/true);
    case KnobType::kBool:
      return ParseBoolSetting(spec.env, text) ? 1.0 : 0.0;
    case KnobType::kCategorical: {
      const std::string_view t = Trim(text);
      std::string allowed;
      for (std::size_t i = 0; i < spec.choices.size(); ++i) {
        if (spec.choices[i] == t) return static_cast<double>(i);
        if (!allowed.empty()) allowed += ", ";
        allowed += spec.choices[i];
      }
      Fail(spec.env, text, "one of: " + allowed);
    }
  }
  return spec.default_value;
}

namespace {

double AlgorithmIndex(std::string_view name) {
  for (std::size_t i = 0; i < kAllreduceAlgorithmChoices.size(); ++i) {
    if (kAllreduceAlgorithmChoices[i] == name) return static_cast<double>(i);
  }
  throw std::logic_error("unknown allreduce algorithm");
}

// Horovod's HOROVOD_HIERARCHICAL_ALLREDUCE keeps its meaning: 1 pins the
// algorithm knob to hierarchical, 0 to the library's own allreduce (native).
// Set together with HVDTUNE_ALLREDUCE_ALGORITHM, the two must agree: 1 only
// with hierarchical; 0 ("not hierarchical") with native or ring, and then
// the explicit algorithm is used.
void ApplyHierarchicalAllreduce(const EnvLookup& env, KnobConfig& config) {
  constexpr std::string_view kVar = "HOROVOD_HIERARCHICAL_ALLREDUCE";
  const std::optional<std::string> text = env(kVar);
  if (!text) return;
  const bool on = ParseBoolSetting(kVar, *text);
  const KnobSpec& spec = GetKnobSpec(KnobId::kAllreduceAlgorithm);
  const int k = static_cast<int>(KnobId::kAllreduceAlgorithm);
  const double hierarchical = AlgorithmIndex("hierarchical");
  if (config.pinned[k]) {
    const double chosen = config.values.Get(KnobId::kAllreduceAlgorithm);
    if (on != (chosen == hierarchical)) {
      std::ostringstream os;
      os << kVar << "=" << *text << " conflicts with " << spec.env << "="
         << config.values.FormatValue(KnobId::kAllreduceAlgorithm) << ": "
         << kVar << "=1 means " << spec.env << "=hierarchical and " << kVar
         << "=0 any other algorithm; set one of the two, or make them agree";
      throw ConfigError(os.str());
    }
    return;
  }
  config.values.Set(KnobId::kAllreduceAlgorithm,
                    on ? hierarchical : AlgorithmIndex("native"));
  config.pinned[k] = true;
}

}  // namespace

KnobConfig ParseKnobsFromEnv(const EnvLookup& env) {
  KnobConfig config;
  for (const auto& spec : kTable) {
    const std::optional<std::string> text = env(spec.env);
    if (!text) continue;
    config.values.Set(spec.id, ParseKnobValue(spec, *text));
    config.pinned[static_cast<int>(spec.id)] = true;
  }
  ApplyHierarchicalAllreduce(env, config);
  return config;
}

}  // namespace hvdtune
