// Standalone SVG pictures without a plotting library: the pieces that
// `hvd-tune plot` and the cluster simulator's figures share (a document,
// axes with their ticks, a framed plot area, escaping).
#pragma once

#include <string>
#include <vector>

namespace hvdtune::svg {

/// Text for SVG/XML character data and attribute values.
std::string Escape(const std::string& text);

/// One axis: numeric (linear or log) or one slot per category.
struct Axis {
  double lo = 0, hi = 1;
  bool log = false;
  /// Tick labels in bytes (KiB, MiB, ...), log ticks at powers of 4.
  bool bytes = false;
  /// Log ticks at 1, 2 and 5 times each power of ten; false: powers only.
  bool minor_log_ticks = true;
  std::vector<std::string> categories;

  /// `v`'s position along the axis, 0 at lo, 1 at hi (values outside
  /// [lo, hi] fall outside [0, 1]).
  double Unit(double v) const;
  std::string Label(double v) const;
  std::vector<double> Ticks() const;
};

/// A rectangle of the picture, in pixels from the top left.
struct Box {
  double x = 0, y = 0, w = 0, h = 0;
  /// The pixel of an axis position: left to right, bottom to top.
  double X(const Axis& a, double v) const { return x + a.Unit(v) * w; }
  double Y(const Axis& a, double v) const { return y + (1 - a.Unit(v)) * h; }
};

/// The opening of a document `width` x `height` on white, with a title
/// (and a grey subtitle under it when not empty) at `title_x`; end it with
/// "</svg>\n".
std::string Header(double width, double height, double title_x,
                   const std::string& title, const std::string& subtitle,
                   double font_size = 12);

/// The frame of `box` (class "frame"), grid lines and tick labels of both
/// axes, `x_label` under the box and `y_label` (when not empty) rotated at
/// `y_label_x`.
std::string Frame(const Box& box, const Axis& x, const Axis& y,
                  const std::string& x_label, const std::string& y_label,
                  double y_label_x);

}  // namespace hvdtune::svg
