// Regret-vs-samples plots as standalone SVG (no plotting library).
#pragma once

#include <string>
#include <vector>

namespace hvdtune::sim {

struct Series {
  std::string label;
  std::vector<double> x, y;  // y > 0 (log axis); 0 is drawn at the floor
};

struct Panel {
  std::string title;
  std::vector<Series> series;
};

/// Small multiples, `columns` panels per row, log y axis from `y_min` to
/// `y_max`; series share colours across panels.
std::string RenderSvg(const std::string& title,
                      const std::vector<Panel>& panels, int columns,
                      double y_min, double y_max, const std::string& x_label,
                      const std::string& y_label);

}  // namespace hvdtune::sim
