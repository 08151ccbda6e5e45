#include "hvdtune/store_mapping.h"

#include <charconv>
#include <cmath>
#include <cstdint>
#include <exception>
#include <vector>

#include "hvdtune/mpi.h"
#include "hvdtune/types.h"

namespace hvdtune {
namespace {

// The shortest text that reads back as exactly `v`.
std::string ExactText(double v) {
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

}  // namespace

store::KnobValue ToStoredValue(const KnobSpec& spec, double value) {
  switch (spec.type) {
    case KnobType::kInteger:
    case KnobType::kBool:
      return static_cast<std::int64_t>(value);
    case KnobType::kFloat:
      return value;
    case KnobType::kCategorical: {
      const auto i = static_cast<std::size_t>(value);
      return i < spec.choices.size() ? std::string(spec.choices[i])
                                     : std::to_string(i);
    }
  }
  return value;
}

std::optional<double> FromStoredValue(const KnobSpec& spec,
                                      const store::KnobValue& value,
                                      std::string* why) {
  auto fail = [&](const std::string& text) -> std::optional<double> {
    if (why) *why = text;
    return std::nullopt;
  };
  double v = 0;
  if (spec.type == KnobType::kCategorical) {
    const auto* s = std::get_if<std::string>(&value);
    if (!s) return fail("expected one of the choices as text");
    for (std::size_t i = 0; i < spec.choices.size(); ++i) {
      if (spec.choices[i] == *s) return static_cast<double>(i);
    }
    std::string allowed;
    for (auto c : spec.choices) {
      allowed += (allowed.empty() ? "" : ", ") + std::string(c);
    }
    return fail("unknown choice '" + *s + "' (expected one of " + allowed +
                ")");
  }
  if (const auto* i = std::get_if<std::int64_t>(&value)) {
    v = static_cast<double>(*i);
  } else if (const auto* d = std::get_if<double>(&value)) {
    if (spec.type != KnobType::kFloat) return fail("expected an integer");
    v = *d;
  } else {
    return fail("expected a number");
  }
  if (spec.type == KnobType::kBool && v != 0 && v != 1) {
    return fail("expected 0 or 1");
  }
  const bool below =
      spec.type == KnobType::kFloat ? v <= spec.min_value : v < spec.min_value;
  if (!std::isfinite(v) || below || v > spec.max_value) {
    return fail(ExactText(v) + " is outside " +
                (spec.type == KnobType::kFloat ? "(" : "[") +
                ExactText(spec.min_value) + ", " + ExactText(spec.max_value) +
                "]");
  }
  return v;
}

store::KnobValues ToStored(const KnobSettings& values) {
  store::KnobValues out;
  for (const KnobSpec& spec : KnobTable()) {
    out[std::string(spec.name)] = ToStoredValue(spec, values.Get(spec.id));
  }
  return out;
}

std::optional<KnobSettings> FromStored(const store::KnobValues& values,
                                       const KnobSettings& base,
                                       std::string* why) {
  KnobSettings k = base;
  for (const auto& [name, value] : values) {
    const auto id = FindKnob(name);
    if (!id) continue;
    std::string reason;
    const auto v = FromStoredValue(GetKnobSpec(*id), value, &reason);
    if (!v) {
      if (why) *why = name + ": " + reason;
      return std::nullopt;
    }
    k.Set(*id, *v);
  }
  try {
    CheckKnobValues(k);
  } catch (const std::exception& e) {
    if (why) *why = e.what();
    return std::nullopt;
  }
  return k;
}

store::Fingerprint JobHardwareFingerprint(int world_size, int ranks_per_node,
                                          int nodes) {
  store::JobFacts job;
  job.world_size = world_size;
  job.ranks_per_node = ranks_per_node;
  job.nodes = nodes;
  job.mpi_version = MpiLibraryVersion();
  return store::HardwareFingerprint(store::ProbeHost(), job);
}

store::Fingerprint StepModelFingerprint(std::span<const StepTensor> step) {
  std::vector<store::TensorShape> shapes;
  shapes.reserve(step.size());
  for (const StepTensor& t : step) {
    const auto size = static_cast<std::int64_t>(DataTypeSize(t.dtype));
    shapes.push_back({std::string(DataTypeName(t.dtype)),
                      size > 0 ? t.bytes / size : t.bytes});
  }
  return store::ModelFingerprint(shapes);
}

}  // namespace hvdtune
