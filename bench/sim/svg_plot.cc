#include "svg_plot.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "hvdtune/workloads/svg.h"

namespace hvdtune::sim {
namespace {

constexpr const char* kColours[] = {"#1f77b4", "#d62728", "#2ca02c",
                                    "#7f7f7f", "#9467bd", "#ff7f0e"};

using svg::Escape;

}  // namespace

std::string RenderSvg(const std::string& title,
                      const std::vector<Panel>& panels, int columns,
                      double y_min, double y_max, const std::string& x_label,
                      const std::string& y_label) {
  const int pw = 260, ph = 190, ml = 48, mr = 10, mt = 24, mb = 34;
  const int rows = (static_cast<int>(panels.size()) + columns - 1) / columns;
  const int width = columns * pw, height = 50 + rows * ph + 30;
  svg::Axis x, y;
  x.lo = 0;
  for (const Panel& p : panels)
    for (const Series& s : p.series)
      for (double v : s.x) x.hi = std::max(x.hi, v);
  y.log = true;
  y.minor_log_ticks = false;
  y.lo = y_min;
  y.hi = y_max;
  std::string out = svg::Header(width, height, 10, title, "", 10);
  for (std::size_t i = 0; i < panels.size(); ++i) {
    const int ox = static_cast<int>(i % columns) * pw;
    const int oy = 30 + static_cast<int>(i / columns) * ph;
    const svg::Box box{
        static_cast<double>(ox + ml), static_cast<double>(oy + mt),
        static_cast<double>(pw - ml - mr), static_cast<double>(ph - mt - mb)};
    // A y at or below the floor is drawn on it.
    auto py = [&](double v) { return box.Y(y, std::clamp(v, y_min, y_max)); };
    out += fmt::format(
        "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" "
        "font-size=\"11\">{}</text>\n",
        box.x + box.w / 2, oy + 16, Escape(panels[i].title));
    out += svg::Frame(box, x, y, x_label, "", 0);
    for (std::size_t s = 0; s < panels[i].series.size(); ++s) {
      const Series& ser = panels[i].series[s];
      std::string pts;
      for (std::size_t k = 0; k < ser.x.size(); ++k) {
        pts += fmt::format("{:.1f},{:.1f} ", box.X(x, ser.x[k]), py(ser.y[k]));
      }
      const char* colour = kColours[s % std::size(kColours)];
      out += fmt::format(
          "<polyline points=\"{}\" fill=\"none\" stroke=\"{}\" "
          "stroke-width=\"1.8\"/>\n",
          pts, colour);
      for (std::size_t k = 0; k < ser.x.size(); ++k) {
        out += fmt::format(
            "<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"2.5\" fill=\"{}\"/>\n",
            box.X(x, ser.x[k]), py(ser.y[k]), colour);
      }
    }
  }
  // Legend and y label.
  if (!panels.empty()) {
    int lx = 60;
    for (std::size_t s = 0; s < panels[0].series.size(); ++s) {
      out += fmt::format(
          "<rect x=\"{}\" y=\"{}\" width=\"12\" height=\"4\" fill=\"{}\"/>"
          "<text x=\"{}\" y=\"{}\">{}</text>\n",
          lx, height - 18, kColours[s % std::size(kColours)], lx + 16,
          height - 13, Escape(panels[0].series[s].label));
      lx += 130;
    }
    out += fmt::format("<text x=\"{}\" y=\"{}\">{}</text>\n", lx + 20,
                       height - 13, Escape(y_label));
  }
  out += "</svg>\n";
  return out;
}

}  // namespace hvdtune::sim
