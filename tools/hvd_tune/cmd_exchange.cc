// hvd-tune export / import: the store as one JSON document and back.
#include <fmt/format.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <sstream>

#include "commands.h"
#include "common.h"
#include "exchange.h"

namespace hvdtune::cli {
namespace {

double Now() {
  return std::chrono::duration<double>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

struct ExportOptions {
  std::string db;
  std::string output;
  std::vector<std::string> fingerprints;
};

int RunExport(const ExportOptions& opt) {
  auto db = OpenStoreForReading(ResolveStorePath(opt.db));
  std::vector<store::PairRecord> pairs = db->Dump();
  if (!opt.fingerprints.empty()) {
    std::vector<std::string> wanted;
    for (const std::string& f : opt.fingerprints) {
      wanted.push_back(PrintableFingerprint(FindPair(*db, f)));
    }
    std::erase_if(pairs, [&](const store::PairRecord& p) {
      return std::find(wanted.begin(), wanted.end(),
                       store::PrintableFingerprint(p.hardware, p.model)) ==
             wanted.end();
    });
  }
  const std::string text = ExportDocument(pairs, Now()).dump(1) + "\n";
  if (opt.output.empty() || opt.output == "-") {
    std::cout << text;
    return kExitOk;
  }
  std::ofstream out(opt.output, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) throw Failure("--output: cannot write '" + opt.output + "'");
  int runs = 0, samples = 0;
  for (const auto& p : pairs) {
    runs += static_cast<int>(p.runs.size());
    for (const auto& r : p.runs) samples += static_cast<int>(r.samples.size());
  }
  std::cerr << fmt::format(
      "exported {} fingerprint(s), {} run(s), {} sample(s) to {}\n",
      pairs.size(), runs, samples, opt.output);
  return kExitOk;
}

struct ImportOptions {
  std::string db;
  std::string input;
  bool dry_run = false;
  bool json = false;
};

int RunImport(const ImportOptions& opt) {
  std::string text;
  if (opt.input == "-") {
    text.assign(std::istreambuf_iterator<char>(std::cin), {});
  } else {
    std::ifstream in(opt.input, std::ios::binary);
    if (!in) throw Failure(opt.input + ": cannot read");
    text.assign(std::istreambuf_iterator<char>(in), {});
  }
  std::vector<store::PairRecord> pairs;
  try {
    pairs = ParseExport(text);
  } catch (const ImportError& e) {
    throw Failure(opt.input + ": " + e.what() + "; nothing imported");
  }
  const std::string path = ResolveStorePath(opt.db);
  store::MergeStats stats;
  try {
    // A dry run against a file that does not exist yet must not create it:
    // it merges into an empty in-memory store instead.
    const bool scratch = opt.dry_run && !store::IsServerLocation(path) &&
                         !std::filesystem::exists(path);
    store::Store db(store::StoreOptions{scratch ? ":memory:" : path});
    stats = db.Merge(pairs, opt.dry_run);
  } catch (const store::StoreError& e) {
    throw Failure(std::string(e.what()) + "; nothing imported");
  }
  if (opt.json) {
    std::cout << Json{{"store", store::DisplayLocation(path)},
                      {"dry_run", opt.dry_run},
                      {"pairs_added", stats.pairs_added},
                      {"pairs_present", stats.pairs_present},
                      {"runs_added", stats.runs_added},
                      {"runs_present", stats.runs_present},
                      {"samples_added", stats.samples_added},
                      {"samples_present", stats.samples_present},
                      {"best_set", stats.best_set},
                      {"best_kept", stats.best_kept}}
                     .dump(2)
              << "\n";
    return kExitOk;
  }
  fmt::print(
      "{} {} into {}: fingerprints {} new, {} known; runs {} added, {} "
      "already there; samples {} added, {} already there; best "
      "configurations {} set, {} kept (the stored one scores at least as "
      "high)\n",
      opt.dry_run ? "would import" : "imported", opt.input,
      store::DisplayLocation(path), stats.pairs_added, stats.pairs_present,
      stats.runs_added, stats.runs_present, stats.samples_added,
      stats.samples_present, stats.best_set, stats.best_kept);
  return kExitOk;
}

}  // namespace

Command AddExportCommand(CLI::App& app) {
  auto opt = std::make_shared<ExportOptions>();
  auto* sub = app.add_subcommand(
      "export",
      "write the store (or some fingerprints) as one JSON document with a "
      "schema version");
  sub->add_option("fingerprint", opt->fingerprints,
                  "only these fingerprints (or unique prefixes)");
  AddDbOption(*sub, opt->db);
  sub->add_option("-o,--output", opt->output,
                  "file to write (default: stdout)");
  return {sub, [opt] { return RunExport(*opt); }};
}

Command AddImportCommand(CLI::App& app) {
  auto opt = std::make_shared<ImportOptions>();
  auto* sub = app.add_subcommand(
      "import",
      "merge an exported JSON document into the store: validated first, "
      "one transaction, nothing already stored is lost");
  sub->add_option("file", opt->input, "the exported document ('-': stdin)")
      ->required();
  AddDbOption(*sub, opt->db);
  sub->add_flag("--dry-run", opt->dry_run,
                "validate and count what would be merged; change nothing");
  sub->add_flag("--json", opt->json, "the counts as JSON");
  return {sub, [opt] { return RunImport(*opt); }};
}

}  // namespace hvdtune::cli
