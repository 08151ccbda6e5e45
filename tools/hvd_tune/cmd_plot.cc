// hvd-tune plot: pictures from the store or from an autotune CSV log.
#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>

#include "commands.h"
#include "common.h"
#include "hvdtune/status.h"
#include "plot.h"

namespace hvdtune::cli {
namespace {

struct PlotOptions {
  std::string db;
  std::string fingerprint;
  std::int64_t run = 0;
  std::string csv;
  std::string output;
  std::string png;
  std::string kind = "progress";
  std::string x = "fusion_threshold";
  std::string y = "cycle_time";
};

std::vector<std::string> SplitCsvLine(const std::string& line) {
  std::vector<std::string> out;
  std::string field;
  bool quoted = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        field += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        field += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      out.push_back(field);
      field.clear();
    } else if (c != '\r') {
      field += c;
    }
  }
  out.push_back(field);
  return out;
}

// The autotune log (HOROVOD_AUTOTUNE_LOG): score, phase and the knobs by
// their table names.
PlotData FromCsv(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Failure(path + ": cannot read");
  std::string line;
  if (!std::getline(in, line)) throw Failure(path + ": empty file");
  const std::vector<std::string> header = SplitCsvLine(line);
  auto column = [&](const std::string& name) -> int {
    const auto it = std::find(header.begin(), header.end(), name);
    return it == header.end() ? -1 : static_cast<int>(it - header.begin());
  };
  const int score = column("score"), phase = column("phase");
  if (score < 0 || phase < 0) {
    throw Failure(path +
                  ": not an autotune log (no 'score' and 'phase' "
                  "columns)");
  }
  PlotData data;
  data.title = "autotune log " + path;
  int line_no = 1;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.empty()) continue;
    const std::vector<std::string> f = SplitCsvLine(line);
    if (f.size() != header.size()) {
      throw Failure(fmt::format("{}:{}: {} fields, the header has {}", path,
                                line_no, f.size(), header.size()));
    }
    PlotSample s;
    s.number = static_cast<int>(data.samples.size()) + 1;
    s.phase = f[static_cast<std::size_t>(phase)];
    try {
      s.score = std::stod(f[static_cast<std::size_t>(score)]);
      for (const KnobSpec& spec : KnobTable()) {
        const int c = column(std::string(spec.name));
        if (c >= 0) {
          s.knobs.Set(spec.id,
                      ParseKnobValue(spec, f[static_cast<std::size_t>(c)]));
        }
      }
    } catch (const std::exception& e) {
      throw Failure(fmt::format("{}:{}: {}", path, line_no, e.what()));
    }
    data.samples.push_back(std::move(s));
  }
  return data;
}

PlotData FromStore(const PlotOptions& opt) {
  auto db = OpenStoreForReading(ResolveStorePath(opt.db));
  const store::PairSummary pair = FindPair(*db, opt.fingerprint);
  PlotData data;
  data.title = "fingerprint " + PrintableFingerprint(pair);
  bool found = false;
  for (const store::RunInfo& r : db->PairRuns(pair.hardware, pair.model)) {
    if (opt.run != 0 && r.id != opt.run) continue;
    found = true;
    const std::vector<store::Sample> samples = db->RunSamples(r.id);
    if (samples.empty()) continue;
    const int first = static_cast<int>(data.samples.size()) + 1;
    data.run_starts.emplace_back(first,
                                 fmt::format("run {} ({})", r.id, r.source));
    for (const store::Sample& s : samples) {
      PlotSample p;
      p.number = static_cast<int>(data.samples.size()) + 1;
      p.phase = s.phase;
      p.score = s.score;
      p.knobs = FromStored(s.values, KnobSettings()).value_or(KnobSettings());
      data.samples.push_back(std::move(p));
    }
  }
  if (!found) {
    throw Failure(fmt::format("--run: fingerprint {} has no run {}",
                              PrintableFingerprint(pair), opt.run));
  }
  if (opt.run != 0) data.title += fmt::format(", run {}", opt.run);
  if (pair.best) data.best = FromStored(pair.best->values, KnobSettings());
  return data;
}

KnobId KnobFlag(const std::string& flag, const std::string& name) {
  const auto id = FindKnob(name);
  if (!id) throw UsageError(flag + ": unknown knob '" + name + "'");
  return *id;
}

void ToPng(const std::string& svg, const std::string& png) {
  const pid_t pid = fork();
  if (pid == 0) {
    execlp("rsvg-convert", "rsvg-convert", "-o", png.c_str(), svg.c_str(),
           static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 127) {
    throw Failure(
        "--png: rsvg-convert not found (Debian: apt-get install "
        "librsvg2-bin)");
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    throw Failure("--png: rsvg-convert failed to write " + png);
  }
}

int RunPlot(const PlotOptions& opt) {
  if (opt.csv.empty() == opt.fingerprint.empty()) {
    throw UsageError("give a FINGERPRINT (from the store) or --csv FILE");
  }
  if (opt.kind != "progress" && opt.kind != "knobs") {
    throw UsageError("--kind: expected progress or knobs, got '" + opt.kind +
                     "'");
  }
  const KnobId x = KnobFlag("--x", opt.x), y = KnobFlag("--y", opt.y);
  if (x == y && opt.kind == "knobs") {
    throw UsageError("--y: give a knob other than --x's");
  }
  const PlotData data = opt.csv.empty() ? FromStore(opt) : FromCsv(opt.csv);
  if (data.samples.empty()) throw Failure("nothing to plot: no samples");
  const std::string svg =
      opt.kind == "progress" ? ProgressSvg(data) : KnobsSvg(data, x, y);
  std::ofstream out(opt.output, std::ios::trunc);
  out << svg;
  out.close();
  if (!out) throw Failure("--output: cannot write '" + opt.output + "'");
  if (!opt.png.empty()) ToPng(opt.output, opt.png);
  fmt::print("wrote {} ({} samples{})\n", opt.output, data.samples.size(),
             opt.png.empty() ? "" : ", and " + opt.png);
  return kExitOk;
}

}  // namespace

Command AddPlotCommand(CLI::App& app) {
  auto opt = std::make_shared<PlotOptions>();
  auto* sub = app.add_subcommand(
      "plot",
      "draw a tuning run as SVG: the score per sample with the running best "
      "and the phases, or the score over two knobs");
  sub->add_option("fingerprint", opt->fingerprint,
                  "plot this fingerprint's samples from the store");
  AddDbOption(*sub, opt->db);
  sub->add_option("--run", opt->run, "only this run of the fingerprint");
  sub->add_option("--csv", opt->csv,
                  "plot an autotune log (HOROVOD_AUTOTUNE_LOG) instead");
  sub->add_option("-o,--output", opt->output, "SVG file to write")->required();
  sub->add_option("--png", opt->png,
                  "also write a PNG (converted with rsvg-convert)");
  sub->add_option("--kind", opt->kind,
                  "progress (score per sample) or knobs (score over --x and "
                  "--y)");
  sub->add_option("--x", opt->x, "knob on the x axis (--kind knobs)");
  sub->add_option("--y", opt->y, "knob on the y axis (--kind knobs)");
  return {sub, [opt] { return RunPlot(*opt); }};
}

}  // namespace hvdtune::cli
