#include "hvdtune/workloads/svg.h"

#include <fmt/format.h>

#include <cmath>

namespace hvdtune::svg {
namespace {

std::string Bytes(double v) {
  const char* units[] = {"B", "KiB", "MiB", "GiB"};
  int u = 0;
  while (v >= 1024 && u < 3) {
    v /= 1024;
    ++u;
  }
  return fmt::format("{:g} {}", v, units[u]);
}

}  // namespace

std::string Escape(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

double Axis::Unit(double v) const {
  if (!categories.empty()) return (v + 0.5) / categories.size();
  if (log) return (std::log(v) - std::log(lo)) / (std::log(hi) - std::log(lo));
  return (v - lo) / (hi - lo);
}

std::string Axis::Label(double v) const {
  if (!categories.empty()) return categories[static_cast<std::size_t>(v)];
  return bytes ? Bytes(v) : fmt::format("{:g}", v);
}

std::vector<double> Axis::Ticks() const {
  std::vector<double> out;
  if (!categories.empty()) {
    for (std::size_t i = 0; i < categories.size(); ++i) out.push_back(i);
  } else if (log) {
    const double base = bytes ? 4 : 10;
    const std::vector<double> steps = bytes || !minor_log_ticks
                                          ? std::vector<double>{1}
                                          : std::vector<double>{1, 2, 5};
    for (double p = std::pow(base, std::floor(std::log(lo) / std::log(base)));
         p <= hi * 1.0001; p *= base) {
      for (double m : steps) {
        if (p * m >= lo * 0.9999 && p * m <= hi * 1.0001) out.push_back(p * m);
      }
    }
  } else {
    const double raw = (hi - lo) / 5;
    const double mag = std::pow(10, std::floor(std::log10(raw)));
    const double step = raw / mag < 2   ? 2 * mag
                        : raw / mag < 5 ? 5 * mag
                                        : 10 * mag;
    for (double t = std::ceil(lo / step) * step; t <= hi + step * 1e-9;
         t += step) {
      out.push_back(std::abs(t) < step * 1e-9 ? 0 : t);
    }
  }
  return out;
}

std::string Header(double width, double height, double title_x,
                   const std::string& title, const std::string& subtitle,
                   double font_size) {
  std::string out = fmt::format(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" "
      "viewBox=\"0 0 {0} {1}\" font-family=\"DejaVu Sans, Helvetica, Arial, "
      "sans-serif\" font-size=\"{2}\">\n"
      "<rect width=\"{0}\" height=\"{1}\" fill=\"white\"/>\n"
      "<text x=\"{3}\" y=\"24\" font-size=\"16\" "
      "font-weight=\"bold\">{4}</text>\n",
      width, height, font_size, title_x, Escape(title));
  if (!subtitle.empty()) {
    out += fmt::format("<text x=\"{}\" y=\"40\" fill=\"#555\">{}</text>\n",
                       title_x, Escape(subtitle));
  }
  return out;
}

std::string Frame(const Box& box, const Axis& x, const Axis& y,
                  const std::string& x_label, const std::string& y_label,
                  double y_label_x) {
  std::string out = fmt::format(
      "<rect class=\"frame\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" "
      "fill=\"none\" stroke=\"#333\"/>\n",
      box.x, box.y, box.w, box.h);
  for (double t : x.Ticks()) {
    out += fmt::format(
        "<line x1=\"{0:.1f}\" y1=\"{1}\" x2=\"{0:.1f}\" y2=\"{2}\" "
        "stroke=\"#ddd\"/><text x=\"{0:.1f}\" y=\"{3}\" "
        "text-anchor=\"middle\">{4}</text>\n",
        box.X(x, t), box.y, box.y + box.h, box.y + box.h + 14,
        Escape(x.Label(t)));
  }
  for (double t : y.Ticks()) {
    const double py = box.Y(y, t);
    out += fmt::format(
        "<line x1=\"{0}\" y1=\"{1:.1f}\" x2=\"{2}\" y2=\"{1:.1f}\" "
        "stroke=\"#ddd\"/><text x=\"{3}\" y=\"{4:.1f}\" "
        "text-anchor=\"end\">{5}</text>\n",
        box.x, py, box.x + box.w, box.x - 5, py + 4, Escape(y.Label(t)));
  }
  out +=
      fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n",
                  box.x + box.w / 2, box.y + box.h + 30, Escape(x_label));
  if (!y_label.empty()) {
    out += fmt::format(
        "<text transform=\"translate({},{}) rotate(-90)\" "
        "text-anchor=\"middle\">{}</text>\n",
        y_label_x, box.y + box.h / 2, Escape(y_label));
  }
  return out;
}

}  // namespace hvdtune::svg
