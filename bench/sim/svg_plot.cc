#include "svg_plot.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "bench_common.h"

namespace hvdtune::sim {
namespace {

constexpr const char* kColours[] = {"#1f77b4", "#d62728", "#2ca02c",
                                    "#7f7f7f", "#9467bd", "#ff7f0e"};

using bench::XmlEscape;

}  // namespace

std::string RenderSvg(const std::string& title,
                      const std::vector<Panel>& panels, int columns,
                      double y_min, double y_max, const std::string& x_label,
                      const std::string& y_label) {
  const int pw = 260, ph = 190, ml = 48, mr = 10, mt = 24, mb = 34;
  const int rows = (static_cast<int>(panels.size()) + columns - 1) / columns;
  const int width = columns * pw, height = 50 + rows * ph + 30;
  double x_max = 1;
  for (const Panel& p : panels)
    for (const Series& s : p.series)
      for (double x : s.x) x_max = std::max(x_max, x);
  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" "
      "font-family=\"sans-serif\" font-size=\"10\">\n"
      "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      "<text x=\"{}\" y=\"18\" font-size=\"14\" "
      "text-anchor=\"middle\">{}</text>\n",
      width, height, width / 2, XmlEscape(title));
  const double ly0 = std::log10(y_min), ly1 = std::log10(y_max);
  for (std::size_t i = 0; i < panels.size(); ++i) {
    const int ox = static_cast<int>(i % columns) * pw;
    const int oy = 30 + static_cast<int>(i / columns) * ph;
    const int x0 = ox + ml, x1 = ox + pw - mr, y0 = oy + ph - mb, y1 = oy + mt;
    auto px = [&](double x) { return x0 + (x1 - x0) * x / x_max; };
    auto py = [&](double y) {
      const double ly = std::clamp(std::log10(std::max(y, y_min)), ly0, ly1);
      return y0 - (y0 - y1) * (ly - ly0) / (ly1 - ly0);
    };
    svg += fmt::format(
        "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" "
        "font-size=\"11\">{}</text>\n"
        "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" "
        "stroke=\"#444\"/>\n",
        (x0 + x1) / 2, oy + 16, XmlEscape(panels[i].title), x0, y1, x1 - x0,
        y0 - y1);
    for (double d = std::ceil(ly0); d <= ly1 + 1e-9; d += 1) {
      const double y = py(std::pow(10, d));
      svg += fmt::format(
          "<line x1=\"{}\" y1=\"{:.1f}\" x2=\"{}\" y2=\"{:.1f}\" "
          "stroke=\"#ddd\"/>"
          "<text x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\">{:g}</text>\n",
          x0, y, x1, y, x0 - 3, y + 3, std::pow(10, d));
    }
    for (double x : {10.0, 20.0, 40.0}) {
      svg += fmt::format(
          "<text x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\">{:g}</text>\n",
          px(x), y0 + 12, x);
    }
    svg += fmt::format(
        "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n",
        (x0 + x1) / 2, y0 + 26, XmlEscape(x_label));
    for (std::size_t s = 0; s < panels[i].series.size(); ++s) {
      const Series& ser = panels[i].series[s];
      std::string pts;
      for (std::size_t k = 0; k < ser.x.size(); ++k) {
        pts += fmt::format("{:.1f},{:.1f} ", px(ser.x[k]), py(ser.y[k]));
      }
      const char* colour = kColours[s % std::size(kColours)];
      svg += fmt::format(
          "<polyline points=\"{}\" fill=\"none\" stroke=\"{}\" "
          "stroke-width=\"1.8\"/>\n",
          pts, colour);
      for (std::size_t k = 0; k < ser.x.size(); ++k) {
        svg += fmt::format(
            "<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"2.5\" fill=\"{}\"/>\n",
            px(ser.x[k]), py(ser.y[k]), colour);
      }
    }
  }
  // Legend and y label.
  if (!panels.empty()) {
    int lx = 60;
    for (std::size_t s = 0; s < panels[0].series.size(); ++s) {
      svg += fmt::format(
          "<rect x=\"{}\" y=\"{}\" width=\"12\" height=\"4\" fill=\"{}\"/>"
          "<text x=\"{}\" y=\"{}\">{}</text>\n",
          lx, height - 18, kColours[s % std::size(kColours)], lx + 16,
          height - 13, XmlEscape(panels[0].series[s].label));
      lx += 130;
    }
    svg += fmt::format("<text x=\"{}\" y=\"{}\">{}</text>\n", lx + 20,
                       height - 13, XmlEscape(y_label));
  }
  svg += "</svg>\n";
  return svg;
}

}  // namespace hvdtune::sim
