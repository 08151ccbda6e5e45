// hvd-tune knobs, show and best: reading the knob table and the store;
// hvd-tune store init: creating or migrating a store's schema.
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <memory>

#include "commands.h"
#include "common.h"
#include "fingerprint_util.h"
#include "hvdtune/config.h"

namespace hvdtune::cli {
namespace {

std::string Part(const store::Fingerprint& fp, const char* key) {
  const std::string v = fp.Get(key);
  return v.empty() ? "?" : v;
}

// "4 ranks (2 nodes), Intel(R) Xeon(R) ...".
std::string HardwareSummary(const store::Fingerprint& hw) {
  std::string out = Part(hw, "world_size") + " ranks";
  if (hw.Get("nodes") != "1") out += " (" + Part(hw, "nodes") + " nodes)";
  out += ", " + Part(hw, "cpu_model");
  if (!hw.Get("gpu_model").empty()) {
    out += ", " + hw.Get("gpu_count") + "x " + hw.Get("gpu_model");
  }
  return out;
}

std::string ModelSummary(const store::Fingerprint& model) {
  return Part(model, "tensors") + " tensors, " + Part(model, "elements") +
         " elements";
}

Json FingerprintJson(const store::Fingerprint& fp) {
  Json out = Json::object();
  for (const auto& [k, v] : fp.parts) out[k] = v;
  return out;
}

bool Matches(const store::Fingerprint& fp, const std::string& filter) {
  if (filter.empty()) return true;
  if (fp.Hash().starts_with(filter)) return true;
  return std::any_of(fp.parts.begin(), fp.parts.end(), [&](const auto& kv) {
    return kv.second.find(filter) != std::string::npos;
  });
}

std::string StoredKnobsText(const store::KnobValues& values) {
  std::string out;
  const Json json = StoredJson(values);
  for (const auto& [name, value] : json.items()) {
    if (!out.empty()) out += ' ';
    out += name + "=" +
           (value.is_string() ? value.get<std::string>() : value.dump());
  }
  return out;
}

struct ShowOptions {
  std::string db;
  std::string fingerprint;
  std::string hardware;
  std::string model;
  bool json = false;
};

int ShowAll(store::Store& db, const ShowOptions& opt) {
  Json rows = Json::array();
  for (const store::PairSummary& p : db.ListPairs()) {
    if (!Matches(p.hardware_fp, opt.hardware) ||
        !Matches(p.model_fp, opt.model)) {
      continue;
    }
    Json row = {{"fingerprint", PrintableFingerprint(p)},
                {"hardware", HardwareSummary(p.hardware_fp)},
                {"model", ModelSummary(p.model_fp)},
                {"runs", p.runs},
                {"samples", p.samples},
                {"first", p.first},
                {"last", p.last},
                {"best_score", p.best ? Json(p.best->score) : Json()},
                {"best", p.best ? StoredJson(p.best->values) : Json()}};
    rows.push_back(std::move(row));
  }
  if (opt.json) {
    std::cout << Json{{"store", db.path()}, {"pairs", rows}}.dump(2) << "\n";
    return kExitOk;
  }
  if (rows.empty()) {
    fmt::print(
        "config store {}: nothing stored{}\n", db.path(),
        opt.hardware.empty() && opt.model.empty() ? "" : " that matches");
    return kExitOk;
  }
  fmt::print("config store {}: {} fingerprint(s)\n\n", db.path(), rows.size());
  for (const Json& r : rows) {
    fmt::print("{}  {} run(s), {} sample(s), {} .. {}\n",
               r["fingerprint"].get<std::string>(), r["runs"].get<int>(),
               r["samples"].get<int>(), FormatTime(r["first"].get<double>()),
               FormatTime(r["last"].get<double>()));
    fmt::print("  hardware: {}\n  model:    {}\n",
               r["hardware"].get<std::string>(), r["model"].get<std::string>());
    if (r["best_score"].is_null()) {
      fmt::print("  best:     none yet\n\n");
      continue;
    }
    std::string knobs;
    for (const auto& [k, v] : r["best"].items()) {
      knobs +=
          " " + k + "=" + (v.is_string() ? v.get<std::string>() : v.dump());
    }
    fmt::print("  best:     {}:{}\n\n",
               FormatRate(r["best_score"].get<double>()), knobs);
  }
  return kExitOk;
}

int ShowOne(store::Store& db, const ShowOptions& opt) {
  const store::PairSummary pair = FindPair(db, opt.fingerprint);
  Json runs = Json::array();
  for (const store::RunInfo& r : db.PairRuns(pair.hardware, pair.model)) {
    Json samples = Json::array();
    for (const store::Sample& s : db.RunSamples(r.id)) {
      samples.push_back({{"index", s.index},
                         {"phase", s.phase},
                         {"score", s.score},
                         {"time", s.time},
                         {"knobs", StoredJson(s.values)}});
    }
    runs.push_back({{"id", r.id},
                    {"source", r.source},
                    {"status", r.status},
                    {"version", r.version},
                    {"started", r.started},
                    {"ended", r.ended != 0 ? Json(r.ended) : Json()},
                    {"samples", samples}});
  }
  if (opt.json) {
    Json best;
    if (pair.best) {
      best = {{"score", pair.best->score},
              {"run", pair.best->run},
              {"time", pair.best->time},
              {"knobs", StoredJson(pair.best->values)}};
    }
    std::cout << Json{{"fingerprint", PrintableFingerprint(pair)},
                      {"hardware", FingerprintJson(pair.hardware_fp)},
                      {"model", FingerprintJson(pair.model_fp)},
                      {"best", best},
                      {"runs", runs}}
                     .dump(2)
              << "\n";
    return kExitOk;
  }
  fmt::print("fingerprint {}\n", PrintableFingerprint(pair));
  for (const auto& [k, v] : pair.hardware_fp.parts) {
    fmt::print("  hardware {:<15} {}\n", k, v);
  }
  for (const auto& [k, v] : pair.model_fp.parts) {
    fmt::print("  model    {:<15} {}\n", k,
               v.size() > 60 ? v.substr(0, 57) + "..." : v);
  }
  if (pair.best) {
    fmt::print("best: {} (run {}, {}): {}\n", FormatRate(pair.best->score),
               pair.best->run, FormatTime(pair.best->time),
               StoredKnobsText(pair.best->values));
  }
  for (const Json& r : runs) {
    fmt::print(
        "\nrun {}: {}, {}, {} .. {}, hvdtune {}, {} samples\n",
        r["id"].get<std::int64_t>(), r["source"].get<std::string>(),
        r["status"].get<std::string>(), FormatTime(r["started"].get<double>()),
        r["ended"].is_null() ? "-" : FormatTime(r["ended"].get<double>()),
        r["version"].get<std::string>(), r["samples"].size());
    for (const Json& s : r["samples"]) {
      std::string knobs;
      for (const auto& [k, v] : s["knobs"].items()) {
        knobs +=
            " " + k + "=" + (v.is_string() ? v.get<std::string>() : v.dump());
      }
      fmt::print("  {:>4} {:<9} {:>14}{}\n", s["index"].get<int>(),
                 s["phase"].get<std::string>(),
                 FormatRate(s["score"].get<double>()), knobs);
    }
  }
  return kExitOk;
}

struct BestOptions {
  std::string db;
  std::string fingerprint;
  std::string workload;
  std::string tensors;
  double scale = 1.0;
  int np = 0;
  bool json = false;
};

int RunBest(const BestOptions& opt) {
  const bool by_workload = !opt.workload.empty() || !opt.tensors.empty();
  if (opt.fingerprint.empty() && !by_workload) {
    throw UsageError(
        "give a FINGERPRINT or --workload NAME (or --tensors FILE)");
  }
  if (!opt.fingerprint.empty() && by_workload) {
    throw UsageError(
        "FINGERPRINT: give either a fingerprint or --workload / "
        "--tensors, not both");
  }
  auto db = OpenStoreForReading(ResolveStorePath(opt.db));
  store::PairSummary pair;
  if (!opt.fingerprint.empty()) {
    pair = FindPair(*db, opt.fingerprint);
  } else {
    pair = FindWorkloadPair(*db, opt.workload, opt.tensors, opt.scale, opt.np);
  }
  if (!pair.best) {
    throw Failure("fingerprint " + PrintableFingerprint(pair) +
                  " has no best configuration yet in " + db->path());
  }
  const auto knobs = FromStored(pair.best->values, KnobSettings());
  if (!knobs) {
    throw Failure("the best configuration of " + PrintableFingerprint(pair) +
                  " has a value this build does not accept");
  }
  Json env = Json::object();
  for (const KnobSpec& spec : KnobTable()) {
    if (pair.best->values.count(std::string(spec.name)) == 0) continue;
    env[std::string(spec.env)] = EnvText(spec, knobs->Get(spec.id));
  }
  if (opt.json) {
    std::cout << Json{{"fingerprint", PrintableFingerprint(pair)},
                      {"score", pair.best->score},
                      {"env", env}}
                     .dump(2)
              << "\n";
    return kExitOk;
  }
  fmt::print("# hvd-tune best: {} ({}, {})\n", PrintableFingerprint(pair),
             FormatRate(pair.best->score), FormatTime(pair.best->time));
  for (const auto& [var, value] : env.items()) {
    fmt::print("export {}={}\n", var, value.get<std::string>());
  }
  return kExitOk;
}

}  // namespace

Command AddKnobsCommand(CLI::App& app) {
  auto* sub = app.add_subcommand(
      "knobs",
      "print the knob table (the single declaration the runtime, "
      "the tuner, the store and the docs use)");
  auto json = std::make_shared<bool>(false);
  auto markdown = std::make_shared<bool>(false);
  auto* j = sub->add_flag("--json", *json, "one JSON object per knob");
  sub->add_flag("--markdown", *markdown,
                "the configuration reference in Markdown: the knob table "
                "and every other setting (docs/configuration.md)")
      ->excludes(j);
  return {
      sub, [json, markdown] {
        if (*markdown) {
          std::cout << ConfigReferenceMarkdown();
          return kExitOk;
        }
        Json rows = Json::array();
        for (const KnobSpec& s : KnobTable()) {
          Json choices = Json::array();
          for (auto c : s.choices) choices.push_back(std::string(c));
          rows.push_back({{"name", s.name},
                          {"env", s.env},
                          {"type", s.type == KnobType::kInteger ? "integer"
                                   : s.type == KnobType::kFloat ? "float"
                                   : s.type == KnobType::kBool  ? "bool"
                                                               : "categorical"},
                          {"unit", s.unit},
                          {"default", KnobJson(s, s.default_value)},
                          {"min", s.min_value},
                          {"max", s.max_value},
                          {"choices", choices},
                          {"tunable", s.tunable()},
                          {"tune_min", s.tune_min},
                          {"tune_max", s.tune_max},
                          {"log_scale", s.scale == KnobScale::kLog},
                          {"description", s.description}});
        }
        if (*json) {
          std::cout << rows.dump(2) << "\n";
          return kExitOk;
        }
        for (const Json& r : rows) {
          fmt::print("{:<24} {:<32} default {:<12} {}\n",
                     r["name"].get<std::string>(), r["env"].get<std::string>(),
                     r["default"].is_string() ? r["default"].get<std::string>()
                                              : r["default"].dump(),
                     r["tunable"].get<bool>() ? "tuned" : "not tuned");
        }
        return kExitOk;
      }};
}

Command AddShowCommand(CLI::App& app) {
  auto opt = std::make_shared<ShowOptions>();
  auto* sub = app.add_subcommand(
      "show",
      "list the store's fingerprints with their best configurations, or "
      "every run and sample of one FINGERPRINT");
  sub->add_option("fingerprint", opt->fingerprint,
                  "hardware-model fingerprint (or a unique prefix)");
  AddDbOption(*sub, opt->db);
  sub->add_option("--hardware", opt->hardware,
                  "only hardware whose hash starts with, or a part contains, "
                  "this text (e.g. a CPU name, 'world_size=4' does not work: "
                  "give '4')");
  sub->add_option("--model", opt->model,
                  "only models whose hash starts with, or a part contains, "
                  "this text");
  sub->add_flag("--json", opt->json, "JSON instead of text");
  return {sub, [opt] {
            auto db = OpenStoreForReading(ResolveStorePath(opt->db));
            return opt->fingerprint.empty() ? ShowAll(*db, *opt)
                                            : ShowOne(*db, *opt);
          }};
}

Command AddBestCommand(CLI::App& app) {
  auto opt = std::make_shared<BestOptions>();
  auto* sub = app.add_subcommand(
      "best",
      "print `export HOROVOD_...=...` lines of the best configuration, "
      "ready to eval in a job script");
  sub->add_option("fingerprint", opt->fingerprint,
                  "hardware-model fingerprint (or a unique prefix)");
  AddDbOption(*sub, opt->db);
  sub->add_option("--workload", opt->workload,
                  "instead of a fingerprint: this synthetic workload on this "
                  "machine (resnet50, vgg16, bert-base, many-small)");
  sub->add_option("--tensors", opt->tensors,
                  "instead of a fingerprint: this tensor-list file on this "
                  "machine");
  sub->add_option("--scale", opt->scale, "the workload's --scale")
      ->check(CLI::Range(1e-9, 1.0));
  sub->add_option("-n,--np", opt->np,
                  "with --workload: the job's number of ranks (needed when "
                  "the store has several)")
      ->check(CLI::Range(1, 1 << 20));
  sub->add_flag("--json", opt->json, "JSON instead of shell lines");
  return {sub, [opt] { return RunBest(*opt); }};
}

namespace {

// Creates the store's schema, or migrates an older one to this build's;
// does nothing to one already current. Says which it was.
int RunStoreInit(const std::string& db_flag) {
  const std::string path = ResolveStorePath(db_flag);
  const bool server = store::IsServerLocation(path);
  int before = 0;
  bool existed = server;
  if (!server) existed = std::filesystem::exists(path);
  try {
    if (existed) {
      store::StoreOptions peek{path};
      peek.read_only = true;
      before = store::Store(peek).schema_version();
    }
    store::Store db({path});
    const int after = db.schema_version();
    const std::string where =
        "config store " + db.path() + " (" + db.backend() + ")";
    if (before == after) {
      fmt::print("{}: schema version {} is current; nothing to do\n", where,
                 after);
    } else if (before == 0) {
      fmt::print("{}: created schema version {}\n", where, after);
    } else {
      fmt::print("{}: migrated schema version {} to {}\n", where, before,
                 after);
    }
  } catch (const store::StoreError& e) {
    throw Failure(e.what());
  }
  return kExitOk;
}

}  // namespace

Command AddStoreCommand(CLI::App& app) {
  auto db = std::make_shared<std::string>();
  auto* sub = app.add_subcommand("store", "manage a config store");
  sub->require_subcommand(1);
  auto* init = sub->add_subcommand(
      "init",
      "create the store's tables (an SQLite file, or a PostgreSQL database "
      "that exists), or migrate an older schema to this build's; safe to "
      "repeat");
  AddDbOption(*init, *db);
  return {sub, [db] { return RunStoreInit(*db); }};
}

}  // namespace hvdtune::cli
