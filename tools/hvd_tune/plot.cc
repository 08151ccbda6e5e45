#include "plot.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <map>

#include "hvdtune/workloads/svg.h"

namespace hvdtune::cli {
namespace {

constexpr double kWidth = 860, kHeight = 500;
constexpr double kLeft = 80, kRight = 170, kTop = 66, kBottom = 64;
constexpr double kPlotW = kWidth - kLeft - kRight;
constexpr double kPlotH = kHeight - kTop - kBottom;

using svg::Axis;
using svg::Escape;

constexpr svg::Box kPlot{kLeft, kTop, kPlotW, kPlotH};

std::string PhaseColor(const std::string& phase) {
  static const std::map<std::string, std::string> colors = {
      {"warmup", "#7f7f7f"},
      {"exploring", "#1f77b4"},
      {"frozen", "#2ca02c"},
      {"retuning", "#d62728"},
      {"sweep", "#9467bd"}};
  const auto it = colors.find(phase);
  return it == colors.end() ? "#8c564b" : it->second;
}

// Viridis-like ramp for t in [0, 1] (low score dark, high score yellow).
std::string Ramp(double t) {
  static const std::array<std::array<int, 3>, 5> stops = {{{68, 1, 84},
                                                           {59, 82, 139},
                                                           {33, 145, 140},
                                                           {94, 201, 98},
                                                           {253, 231, 37}}};
  t = std::clamp(t, 0.0, 1.0) * (stops.size() - 1);
  const auto i = std::min(static_cast<std::size_t>(t), stops.size() - 2);
  const double f = t - static_cast<double>(i);
  int rgb[3];
  for (int c = 0; c < 3; ++c) {
    rgb[c] = static_cast<int>(
        std::lround(stops[i][c] + f * (stops[i + 1][c] - stops[i][c])));
  }
  return fmt::format("#{:02x}{:02x}{:02x}", rgb[0], rgb[1], rgb[2]);
}

bool Categorical(const KnobSpec& spec) {
  return spec.type == KnobType::kCategorical || spec.type == KnobType::kBool ||
         spec.tune_as == TuneAs::kOnOff;
}

// The value of a knob on its axis: a category index or the number.
double AxisValue(const KnobSpec& spec, double v) {
  if (spec.tune_as == TuneAs::kOnOff) return v > 0 ? 1 : 0;
  return v;
}

Axis KnobAxis(const KnobSpec& spec, const std::vector<PlotSample>& samples) {
  Axis a;
  if (Categorical(spec)) {
    if (spec.type == KnobType::kCategorical) {
      for (auto c : spec.choices) a.categories.emplace_back(c);
    } else if (spec.tune_as == TuneAs::kOnOff) {
      a.categories = {"off", "on"};
    } else {
      a.categories = {"false", "true"};
    }
    return a;
  }
  a.bytes = spec.unit == "bytes";
  a.lo = spec.tune_min;
  a.hi = spec.tune_max;
  for (const PlotSample& s : samples) {
    a.lo = std::min(a.lo, s.knobs.Get(spec.id));
    a.hi = std::max(a.hi, s.knobs.Get(spec.id));
  }
  a.log = spec.scale == KnobScale::kLog && a.lo > 0;
  if (a.hi <= a.lo) a.hi = a.lo + 1;
  if (a.log) {
    a.lo /= 1.25;
    a.hi *= 1.25;
  }
  return a;
}

Axis ScoreAxis(const std::vector<PlotSample>& samples) {
  Axis a;
  a.lo = 0;
  a.hi = 0;
  for (const PlotSample& s : samples) a.hi = std::max(a.hi, s.score / 1e9);
  a.hi = a.hi > 0 ? a.hi * 1.1 : 1;
  return a;
}

std::string Header(const std::string& title, const std::string& subtitle) {
  return svg::Header(kWidth, kHeight, kLeft, title, subtitle);
}

// Frame, ticks and labels of both axes.
std::string Frame(const Axis& x, const Axis& y, const std::string& x_label,
                  const std::string& y_label) {
  return svg::Frame(kPlot, x, y, x_label, y_label, 22);
}

}  // namespace

std::string ProgressSvg(const PlotData& data) {
  const std::vector<PlotSample>& s = data.samples;
  Axis x;
  x.lo = 0.5;
  x.hi = std::max<double>(1, static_cast<double>(s.size())) + 0.5;
  const Axis y = ScoreAxis(s);
  auto px = [&](double n) { return kLeft + x.Unit(n) * kPlotW; };
  auto py = [&](double score) {
    return kTop + (1 - y.Unit(score / 1e9)) * kPlotH;
  };
  std::string out = Header(
      data.title, fmt::format("score of every sample, running best, phases "
                              "({} samples)",
                              s.size()));
  // Phase bands: one per stretch of samples in the same phase.
  std::vector<std::string> legend;
  for (std::size_t i = 0; i < s.size();) {
    std::size_t j = i;
    while (j < s.size() && s[j].phase == s[i].phase) ++j;
    const double x0 = px(s[i].number - 0.5), x1 = px(s[j - 1].number + 0.5);
    out += fmt::format(
        "<rect class=\"phase-band\" x=\"{:.1f}\" y=\"{}\" width=\"{:.1f}\" "
        "height=\"{}\" fill=\"{}\" fill-opacity=\"0.12\"/>\n",
        x0, kTop, x1 - x0, kPlotH, PhaseColor(s[i].phase));
    // A label only where it fits (about 6.5 px per character).
    if (x1 - x0 > 6.5 * static_cast<double>(s[i].phase.size()) + 6) {
      out += fmt::format(
          "<text x=\"{:.1f}\" y=\"{}\" font-size=\"11\" "
          "fill=\"{}\">{}</text>\n",
          x0 + 3, kTop + 13, PhaseColor(s[i].phase), Escape(s[i].phase));
    }
    if (std::find(legend.begin(), legend.end(), s[i].phase) == legend.end()) {
      legend.push_back(s[i].phase);
    }
    i = j;
  }
  out += Frame(x, y, "sample", "score (GB/s reduced per second of step)");
  // Run starts: a dashed line, labelled above the frame where there is room
  // before the next run's label.
  for (std::size_t r = 0; r < data.run_starts.size(); ++r) {
    const auto& [n, label] = data.run_starts[r];
    const double x0 = px(n - 0.5);
    const double room =
        (r + 1 < data.run_starts.size() ? px(data.run_starts[r + 1].first - 0.5)
                                        : kLeft + kPlotW) -
        x0;
    out += fmt::format(
        "<line class=\"run-start\" x1=\"{0:.1f}\" y1=\"{1}\" x2=\"{0:.1f}\" "
        "y2=\"{2}\" stroke=\"#444\" stroke-dasharray=\"4 3\"/>\n",
        x0, kTop - 12, kTop + kPlotH);
    if (room > 6 * static_cast<double>(label.size())) {
      out += fmt::format(
          "<text x=\"{:.1f}\" y=\"{}\" font-size=\"10\" "
          "fill=\"#444\">{}</text>\n",
          x0 + 3, kTop - 4, Escape(label));
    }
  }
  std::string best_line;
  double best = 0;
  for (const PlotSample& p : s) {
    const double before = best;
    best = std::max(best, p.score);
    if (best_line.empty()) {
      best_line = fmt::format("{:.1f},{:.1f}", px(p.number - 0.5), py(best));
    } else if (best != before) {
      best_line += fmt::format(" {:.1f},{:.1f}", px(p.number - 0.5), py(best));
    }
    best_line += fmt::format(" {:.1f},{:.1f}", px(p.number + 0.5), py(best));
  }
  if (!s.empty()) {
    out += fmt::format(
        "<polyline class=\"running-best\" points=\"{}\" fill=\"none\" "
        "stroke=\"#ff7f0e\" stroke-width=\"2\"/>\n",
        best_line);
  }
  for (const PlotSample& p : s) {
    out += fmt::format(
        "<circle class=\"sample\" cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3.5\" "
        "fill=\"{}\"><title>sample {} ({}): {:.3f} GB/s</title></circle>\n",
        px(p.number), py(p.score), PhaseColor(p.phase), p.number,
        Escape(p.phase), p.score / 1e9);
  }
  double ly = kTop + 8;
  const double lx = kLeft + kPlotW + 16;
  out += fmt::format(
      "<line x1=\"{}\" y1=\"{:.1f}\" x2=\"{}\" y2=\"{:.1f}\" "
      "stroke=\"#ff7f0e\" "
      "stroke-width=\"2\"/><text x=\"{}\" y=\"{:.1f}\">running best</text>\n",
      lx, ly, lx + 18, ly, lx + 24, ly + 4);
  for (const std::string& phase : legend) {
    ly += 20;
    out += fmt::format(
        "<circle cx=\"{}\" cy=\"{:.1f}\" r=\"4\" fill=\"{}\"/><text x=\"{}\" "
        "y=\"{:.1f}\">{}</text>\n",
        lx + 9, ly, PhaseColor(phase), lx + 24, ly + 4, Escape(phase));
  }
  return out + "</svg>\n";
}

std::string KnobsSvg(const PlotData& data, KnobId x_id, KnobId y_id) {
  const KnobSpec& xs = GetKnobSpec(x_id);
  const KnobSpec& ys = GetKnobSpec(y_id);
  const std::vector<PlotSample>& s = data.samples;
  const Axis x = KnobAxis(xs, s), y = KnobAxis(ys, s);
  double lo = 0, hi = 0;
  const PlotSample* best = nullptr;
  for (const PlotSample& p : s) {
    if (!best || p.score > best->score) best = &p;
  }
  if (!s.empty()) {
    lo = std::min_element(s.begin(), s.end(), [](auto& a, auto& b) {
           return a.score < b.score;
         })->score;
    hi = best->score;
  }
  std::string out =
      Header(data.title,
             fmt::format("score over {} and {} ({} samples; colour: score)",
                         xs.name, ys.name, s.size()));
  out += Frame(x, y,
               std::string(xs.name) +
                   (xs.unit.empty() ? "" : " (" + std::string(xs.unit) + ")"),
               std::string(ys.name) +
                   (ys.unit.empty() ? "" : " (" + std::string(ys.unit) + ")"));
  // Points sharing a category slot are spread a little (deterministically)
  // so that repeats stay visible.
  auto jitter = [](int n, bool on) {
    return on ? (static_cast<double>((n * 37) % 11) / 10.0 - 0.5) * 0.3 : 0.0;
  };
  auto pos = [&](const PlotSample& p, double& cx, double& cy) {
    const double xv = AxisValue(xs, p.knobs.Get(x_id));
    const double yv = AxisValue(ys, p.knobs.Get(y_id));
    const double jx =
        x.categories.empty() ? 0 : jitter(p.number, true) / x.categories.size();
    const double jy = y.categories.empty() ? 0
                                           : jitter(p.number * 7 + 3, true) /
                                                 y.categories.size();
    cx = kLeft + (x.Unit(xv) + jx) * kPlotW;
    cy = kTop + (1 - y.Unit(yv) - jy) * kPlotH;
  };
  for (const PlotSample& p : s) {
    double cx = 0, cy = 0;
    pos(p, cx, cy);
    const double t = hi > lo ? (p.score - lo) / (hi - lo) : 1;
    out += fmt::format(
        "<circle class=\"sample\" cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"6\" "
        "fill=\"{}\" fill-opacity=\"0.85\" stroke=\"#333\" "
        "stroke-width=\"0.5\"><title>sample {} ({}): {:.3f} GB/s, {}={}, "
        "{}={}</title></circle>\n",
        cx, cy, Ramp(t), p.number, Escape(p.phase), p.score / 1e9, xs.name,
        Escape(p.knobs.FormatValue(x_id)), ys.name,
        Escape(p.knobs.FormatValue(y_id)));
  }
  // The ring sits on the best configuration's own values (no jitter).
  std::optional<KnobSettings> ringed = data.best;
  if (!ringed && best) ringed = best->knobs;
  if (ringed) {
    const double cx = kLeft + x.Unit(AxisValue(xs, ringed->Get(x_id))) * kPlotW;
    const double cy =
        kTop + (1 - y.Unit(AxisValue(ys, ringed->Get(y_id)))) * kPlotH;
    out += fmt::format(
        "<circle class=\"best\" cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"11\" "
        "fill=\"none\" stroke=\"#d62728\" stroke-width=\"2.5\"/>\n",
        cx, cy);
  }
  // Colour bar.
  const double bx = kLeft + kPlotW + 24, bh = kPlotH - 60;
  for (int i = 0; i < 50; ++i) {
    out += fmt::format(
        "<rect x=\"{}\" y=\"{:.1f}\" width=\"16\" height=\"{:.2f}\" "
        "fill=\"{}\"/>\n",
        bx, kTop + bh * (49 - i) / 50.0, bh / 50.0 + 0.5, Ramp(i / 49.0));
  }
  out += fmt::format(
      "<text x=\"{0}\" y=\"{1}\">{2:.3f} GB/s</text>\n"
      "<text x=\"{0}\" y=\"{3:.1f}\">{4:.3f} GB/s</text>\n"
      "<circle cx=\"{5}\" cy=\"{6:.1f}\" r=\"8\" fill=\"none\" "
      "stroke=\"#d62728\" stroke-width=\"2.5\"/>"
      "<text x=\"{0}\" y=\"{7:.1f}\">{8}</text>\n",
      bx + 22, kTop + 10, hi / 1e9, kTop + bh, lo / 1e9, bx + 8, kTop + bh + 30,
      kTop + bh + 34, data.best ? "stored best" : "best sample");
  return out + "</svg>\n";
}

}  // namespace hvdtune::cli
