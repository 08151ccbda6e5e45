#include "hvdtune/knobs.h"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <sstream>
#include <stdexcept>

#include "hvdtune/status.h"

namespace hvdtune {
namespace {

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

KnobSettings::KnobSettings() {
  for (const auto& spec : KnobTable()) Set(spec.id, spec.default_value);
}

std::string_view EngineName(EngineKind kind) {
  return kind == EngineKind::kGloo ? "gloo" : "mpi";
}

std::string_view KnobSettings::allreduce_algorithm_name() const {
  const auto choices = AllreduceAlgorithms();
  const auto i = static_cast<std::size_t>(allreduce_algorithm());
  return i < choices.size() ? choices[i] : std::string_view("unknown");
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
  for (const auto& spec : KnobTable()) {
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
  const auto choices = AllreduceAlgorithms();
  for (std::size_t i = 0; i < choices.size(); ++i) {
    if (choices[i] == name) return static_cast<double>(i);
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
  for (const auto& spec : KnobTable()) {
    const std::optional<std::string> text = env(spec.env);
    if (!text) continue;
    config.values.Set(spec.id, ParseKnobValue(spec, *text));
    config.pinned[static_cast<int>(spec.id)] = true;
  }
  ApplyHierarchicalAllreduce(env, config);
  return config;
}

namespace {

// "16 GiB", "256 KiB", or the plain number when it is not a whole unit.
std::string HumanBytes(double v) {
  static constexpr const char* kUnits[] = {"bytes", "KiB", "MiB", "GiB"};
  int u = 0;
  while (u < 3 && v >= 1024 && std::fmod(v, 1024) == 0) v /= 1024, ++u;
  std::ostringstream os;
  os << v << ' ' << kUnits[u];
  return u == 0 ? std::to_string(static_cast<std::int64_t>(v)) : os.str();
}

std::string Number(const KnobSpec& spec, double v) {
  if (spec.unit == "bytes") return HumanBytes(v);
  if (spec.type == KnobType::kInteger) {
    return std::to_string(static_cast<std::int64_t>(v));
  }
  std::ostringstream os;
  os << v;
  return os.str();
}

std::string TypeText(const KnobSpec& spec) {
  static constexpr const char* kTypes[] = {"integer", "float", "bool",
                                           "categorical"};
  std::string t = kTypes[static_cast<int>(spec.type)];
  if (!spec.unit.empty()) t += ", " + std::string(spec.unit);
  return t;
}

std::string DefaultText(const KnobSpec& spec) {
  if (!spec.default_text.empty()) return std::string(spec.default_text);
  KnobSettings d;
  std::string t = d.FormatValue(spec.id);
  if (spec.unit == "bytes" && spec.default_value >= 1024) {
    t += " (" + HumanBytes(spec.default_value) + ")";
  }
  return t;
}

std::string AcceptedText(const KnobSpec& spec) {
  switch (spec.type) {
    case KnobType::kBool:
      return "0, 1, true, false";
    case KnobType::kCategorical: {
      std::string t;
      for (std::string_view c : spec.choices) {
        if (!t.empty()) t += ", ";
        t += c;
      }
      return t;
    }
    case KnobType::kFloat:
      return "> " + Number(spec, spec.min_value) + " – " +
             Number(spec, spec.max_value);
    case KnobType::kInteger:
      break;
  }
  return Number(spec, spec.min_value) + " – " + Number(spec, spec.max_value);
}

std::string TunedText(const KnobSpec& spec) {
  std::string t;
  switch (spec.tune_as) {
    case TuneAs::kNever:
      return "not tuned";
    case TuneAs::kOnOff:
      t = spec.default_value > 0 ? "on / off"
                                 : "0 / " + Number(spec, spec.tune_max);
      break;
    case TuneAs::kChoice:
      t = spec.type == KnobType::kBool ? "on / off" : "every choice";
      break;
    case TuneAs::kRange:
      t = Number(spec, spec.tune_min) + " – " + Number(spec, spec.tune_max) +
          (spec.unit == "ms" ? " ms" : "") +
          (spec.scale == KnobScale::kLog ? ", log" : ", linear");
      break;
  }
  switch (spec.tune_when) {
    case TuneWhen::kAlways:
      break;
    case TuneWhen::kMultiNode:
      t += " (only with more than one node)";
      break;
    case TuneWhen::kAppGroups:
      t += " (only when the application groups)";
      break;
    case TuneWhen::kMultiNodeRaisablePriority:
      t += " (only with more than one node, where the process may raise a "
           "thread's priority)";
      break;
  }
  return t;
}

}  // namespace

std::string_view DefaultAllreduceAlgorithm(bool shares_node, bool spans_nodes,
                                           EngineKind engine, bool devices) {
  return !devices && shares_node && (spans_nodes || engine == EngineKind::kGloo)
             ? "hierarchical"
             : "native";
}

void CheckKnobValues(const KnobSettings& values) {
  for (const KnobSpec& spec : KnobTable()) {
    const double v = values.Get(spec.id);
    const bool integral = spec.type != KnobType::kFloat;
    const bool below = spec.type == KnobType::kFloat ? v <= spec.min_value
                                                     : v < spec.min_value;
    if (!std::isfinite(v) || below || v > spec.max_value ||
        (integral && v != std::floor(v))) {
      std::ostringstream os;
      os << "knob " << spec.name << " = " << v << " is outside its range ["
         << spec.min_value << ", " << spec.max_value << "]";
      throw ConfigError(os.str());
    }
  }
}

std::string KnobTableMarkdown() {
  std::string out =
      "| knob | variable | type | default | accepted | tuned over | meaning "
      "|\n|---|---|---|---|---|---|---|\n";
  for (const KnobSpec& spec : KnobTable()) {
    out += "| " + std::string(spec.name) + " | `" + std::string(spec.env) +
           "` | " + TypeText(spec) + " | " + DefaultText(spec) + " | " +
           AcceptedText(spec) + " | " + TunedText(spec) + " | " +
           std::string(spec.description) + " |\n";
  }
  return out;
}

}  // namespace hvdtune
