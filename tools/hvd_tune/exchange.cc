#include "exchange.h"

#include <cmath>
#include <initializer_list>
#include <limits>

namespace hvdtune::cli {
namespace {

Json FingerprintJson(const store::Fingerprint& fp) {
  Json out = Json::object();
  for (const auto& [key, value] : fp.parts) out[key] = value;
  return out;
}

Json SampleJson(const store::Sample& s) {
  return {{"index", s.index},
          {"phase", s.phase},
          {"score", s.score},
          {"time", s.time},
          {"knobs", StoredJson(s.values)}};
}

// Reads one document with paths in every error message.
class Reader {
 public:
  [[noreturn]] static void Fail(const std::string& path,
                                const std::string& what) {
    throw ImportError((path.empty() ? std::string("document") : path) + ": " +
                      what);
  }

  static std::string TypeName(const Json& v) {
    if (v.is_number_integer()) return "an integer";
    if (v.is_number()) return "a number";
    return std::string("a") + (v.is_object() ? "n " : " ") + v.type_name();
  }

  static const Json& Field(const Json& obj, const std::string& path,
                           const char* name) {
    const auto it = obj.find(name);
    if (it == obj.end()) Fail(Join(path, name), "missing");
    return *it;
  }

  static void OnlyFields(const Json& obj, const std::string& path,
                         std::initializer_list<const char*> names) {
    for (const auto& [key, value] : obj.items()) {
      bool known = false;
      for (const char* n : names) known = known || key == n;
      if (!known) Fail(Join(path, key), "unknown field");
    }
  }

  static std::string Join(const std::string& path, const std::string& key) {
    return path.empty() ? key : path + "." + key;
  }
  static std::string Index(const std::string& path, std::size_t i) {
    return path + "[" + std::to_string(i) + "]";
  }

  static const Json& Object(const Json& v, const std::string& path) {
    if (!v.is_object()) Fail(path, "expected an object, got " + TypeName(v));
    return v;
  }
  static const Json& Array(const Json& v, const std::string& path) {
    if (!v.is_array()) Fail(path, "expected an array, got " + TypeName(v));
    return v;
  }
  static std::string String(const Json& v, const std::string& path) {
    if (!v.is_string()) Fail(path, "expected a string, got " + TypeName(v));
    return v.get<std::string>();
  }
  static double Number(const Json& v, const std::string& path) {
    if (!v.is_number()) Fail(path, "expected a number, got " + TypeName(v));
    const double d = v.get<double>();
    if (!std::isfinite(d)) Fail(path, "expected a finite number");
    return d;
  }
  static std::int64_t Integer(const Json& v, const std::string& path) {
    if (v.is_number_unsigned()) {
      if (v.get<std::uint64_t>() >
          static_cast<std::uint64_t>(
              std::numeric_limits<std::int64_t>::max())) {
        Fail(path, "integer too large");
      }
      return static_cast<std::int64_t>(v.get<std::uint64_t>());
    }
    if (!v.is_number_integer()) {
      Fail(path, "expected an integer, got " + TypeName(v));
    }
    return v.get<std::int64_t>();
  }

  static store::Fingerprint Parts(const Json& v, const std::string& path) {
    store::Fingerprint fp;
    for (const auto& [key, value] : Object(v, path).items()) {
      if (key.empty() || key.find_first_of("=\n") != std::string::npos) {
        Fail(path, "bad part name '" + key + "'");
      }
      std::string text = String(value, Join(path, key));
      if (text.find('\n') != std::string::npos) {
        Fail(Join(path, key), "a line break is not allowed");
      }
      fp.parts.emplace_back(key, std::move(text));
    }
    if (fp.parts.empty()) Fail(path, "no parts");
    return fp;
  }

  static store::KnobValues Knobs(const Json& v, const std::string& path) {
    store::KnobValues out;
    for (const auto& [name, value] : Object(v, path).items()) {
      const std::string at = Join(path, name);
      const auto id = FindKnob(name);
      if (!id) Fail(at, "unknown knob '" + name + "'");
      const KnobSpec& spec = GetKnobSpec(*id);
      store::KnobValue stored;
      switch (spec.type) {
        case KnobType::kInteger:
          stored = Integer(value, at);
          break;
        case KnobType::kBool:
          if (value.is_boolean()) {
            stored = std::int64_t{value.get<bool>() ? 1 : 0};
          } else {
            if (!value.is_number_integer()) {
              Fail(at, "expected true or false, got " + TypeName(value));
            }
            stored = Integer(value, at);
          }
          break;
        case KnobType::kFloat:
          stored = Number(value, at);
          break;
        case KnobType::kCategorical:
          stored = String(value, at);
          break;
      }
      std::string why;
      if (!FromStoredValue(spec, stored, &why)) Fail(at, why);
      out[name] = std::move(stored);
    }
    return out;
  }

  static store::Sample SampleOf(const Json& v, const std::string& path) {
    Object(v, path);
    OnlyFields(v, path, {"index", "phase", "score", "time", "knobs"});
    store::Sample s;
    const std::int64_t index =
        Integer(Field(v, path, "index"), path + ".index");
    if (index < 0 || index > std::numeric_limits<int>::max()) {
      Fail(path + ".index", "out of range");
    }
    s.index = static_cast<int>(index);
    s.phase = String(Field(v, path, "phase"), path + ".phase");
    s.score = Number(Field(v, path, "score"), path + ".score");
    s.time = Number(Field(v, path, "time"), path + ".time");
    s.values = Knobs(Field(v, path, "knobs"), path + ".knobs");
    return s;
  }

  static store::RunRecord RunOf(const Json& v, const std::string& path) {
    Object(v, path);
    OnlyFields(v, path,
               {"started", "ended", "status", "version", "source", "samples"});
    store::RunRecord r;
    r.info.started = Number(Field(v, path, "started"), path + ".started");
    const Json& ended = Field(v, path, "ended");
    r.info.ended = ended.is_null() ? 0 : Number(ended, path + ".ended");
    r.info.status = String(Field(v, path, "status"), path + ".status");
    r.info.version = String(Field(v, path, "version"), path + ".version");
    r.info.source = String(Field(v, path, "source"), path + ".source");
    const std::string at = path + ".samples";
    const Json& samples = Array(Field(v, path, "samples"), at);
    for (std::size_t i = 0; i < samples.size(); ++i) {
      r.samples.push_back(SampleOf(samples[i], Index(at, i)));
    }
    return r;
  }

  static store::PairRecord PairOf(const Json& v, const std::string& path) {
    Object(v, path);
    OnlyFields(v, path, {"fingerprint", "hardware", "model", "best", "runs"});
    store::PairRecord p;
    p.hardware = Parts(Field(v, path, "hardware"), path + ".hardware");
    p.model = Parts(Field(v, path, "model"), path + ".model");
    const std::string given =
        String(Field(v, path, "fingerprint"), path + ".fingerprint");
    const std::string computed =
        store::PrintableFingerprint(p.hardware, p.model);
    if (given != computed) {
      Fail(path + ".fingerprint", "'" + given +
                                      "' does not match its hardware and "
                                      "model parts (they hash to '" +
                                      computed + "')");
    }
    const std::string runs_at = path + ".runs";
    const Json& runs = Array(Field(v, path, "runs"), runs_at);
    for (std::size_t i = 0; i < runs.size(); ++i) {
      p.runs.push_back(RunOf(runs[i], Index(runs_at, i)));
    }
    const Json& best = Field(v, path, "best");
    if (best.is_null()) return p;
    const std::string at = path + ".best";
    Object(best, at);
    OnlyFields(best, at, {"score", "time", "run", "knobs"});
    store::Best b;
    b.score = Number(Field(best, at, "score"), at + ".score");
    b.time = Number(Field(best, at, "time"), at + ".time");
    b.values = Knobs(Field(best, at, "knobs"), at + ".knobs");
    const Json& run = Field(best, at, "run");
    if (!run.is_null()) {
      const std::int64_t i = Integer(run, at + ".run");
      if (i < 0 || i >= static_cast<std::int64_t>(p.runs.size())) {
        Fail(at + ".run", "no run " + std::to_string(i) + " in this pair (" +
                              std::to_string(p.runs.size()) + " runs)");
      }
      p.best_run = static_cast<int>(i);
    }
    p.best = std::move(b);
    return p;
  }
};

}  // namespace

Json ExportDocument(const std::vector<store::PairRecord>& pairs,
                    double exported_at) {
  Json doc = {{"format", kExportFormat},
              {"schema_version", kExportSchemaVersion},
              {"exported", exported_at},
              {"pairs", Json::array()}};
  for (const store::PairRecord& p : pairs) {
    Json pair = {
        {"fingerprint", store::PrintableFingerprint(p.hardware, p.model)},
        {"hardware", FingerprintJson(p.hardware)},
        {"model", FingerprintJson(p.model)},
        {"best", nullptr},
        {"runs", Json::array()}};
    if (p.best) {
      pair["best"] = {{"score", p.best->score},
                      {"time", p.best->time},
                      {"run", p.best_run >= 0 ? Json(p.best_run) : Json()},
                      {"knobs", StoredJson(p.best->values)}};
    }
    for (const store::RunRecord& r : p.runs) {
      Json run = {{"started", r.info.started},
                  {"ended", r.info.ended != 0 ? Json(r.info.ended) : Json()},
                  {"status", r.info.status},
                  {"version", r.info.version},
                  {"source", r.info.source},
                  {"samples", Json::array()}};
      for (const store::Sample& s : r.samples) {
        run["samples"].push_back(SampleJson(s));
      }
      pair["runs"].push_back(std::move(run));
    }
    doc["pairs"].push_back(std::move(pair));
  }
  return doc;
}

std::vector<store::PairRecord> ParseExport(std::string_view text) {
  Json doc;
  try {
    doc = Json::parse(text.begin(), text.end());
  } catch (const Json::exception& e) {
    // parse_error, and out_of_range for a number that overflows a double.
    throw ImportError(std::string("not valid JSON: ") + e.what());
  }
  Reader::Object(doc, "");
  Reader::OnlyFields(doc, "",
                     {"format", "schema_version", "exported", "pairs"});
  const std::string format =
      Reader::String(Reader::Field(doc, "", "format"), "format");
  if (format != kExportFormat) {
    Reader::Fail("format", "expected \"" + std::string(kExportFormat) +
                               "\", got \"" + format + "\"");
  }
  const std::int64_t version = Reader::Integer(
      Reader::Field(doc, "", "schema_version"), "schema_version");
  if (version > kExportSchemaVersion) {
    Reader::Fail("schema_version", std::to_string(version) +
                                       " is newer than this build's (" +
                                       std::to_string(kExportSchemaVersion) +
                                       "); import it with a newer hvd-tune");
  }
  if (version < 1) {
    Reader::Fail("schema_version", std::to_string(version) + " is not valid");
  }
  if (doc.contains("exported")) Reader::Number(doc["exported"], "exported");
  const Json& pairs = Reader::Array(Reader::Field(doc, "", "pairs"), "pairs");
  std::vector<store::PairRecord> out;
  for (std::size_t i = 0; i < pairs.size(); ++i) {
    out.push_back(Reader::PairOf(pairs[i], Reader::Index("pairs", i)));
  }
  return out;
}

}  // namespace hvdtune::cli
