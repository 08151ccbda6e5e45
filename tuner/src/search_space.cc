#include "hvdtune/tuner/search_space.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <stdexcept>

namespace hvdtune::tuner {

Dimension Dimension::Continuous(std::string name, double lower, double upper,
                                bool log_scale) {
  Dimension d;
  d.name = std::move(name);
  d.kind = DimensionKind::kContinuous;
  d.lower = lower;
  d.upper = upper;
  d.log_scale = log_scale;
  return d;
}

Dimension Dimension::Integer(std::string name, double lower, double upper,
                             bool log_scale) {
  Dimension d = Continuous(std::move(name), lower, upper, log_scale);
  d.kind = DimensionKind::kInteger;
  return d;
}

Dimension Dimension::Categorical(std::string name, int num_categories) {
  Dimension d;
  d.name = std::move(name);
  d.kind = DimensionKind::kCategorical;
  d.lower = 0;
  d.upper = num_categories - 1;
  d.num_categories = num_categories;
  return d;
}

Dimension Dimension::Pinned(double value) const {
  Dimension d = *this;
  d.pinned = true;
  d.pinned_value = value;
  return d;
}

namespace {

double SnapValue(const Dimension& d, double value) {
  switch (d.kind) {
    case DimensionKind::kContinuous:
      return std::clamp(value, d.lower, d.upper);
    case DimensionKind::kInteger:
      return std::clamp(std::round(value), std::ceil(d.lower),
                        std::floor(d.upper));
    case DimensionKind::kCategorical:
      return std::clamp(std::round(value), 0.0,
                        static_cast<double>(d.num_categories - 1));
  }
  return value;
}

}  // namespace

SearchSpace::SearchSpace(std::vector<Dimension> dimensions)
    : dimensions_(std::move(dimensions)) {
  std::set<std::string> names;
  for (std::size_t i = 0; i < dimensions_.size(); ++i) {
    const Dimension& d = dimensions_[i];
    const std::string where = "search space dimension '" + d.name + "': ";
    if (!names.insert(d.name).second) {
      throw std::invalid_argument(where + "duplicate name");
    }
    if (d.kind == DimensionKind::kCategorical) {
      if (d.num_categories < 1) {
        throw std::invalid_argument(where + "needs at least one category");
      }
    } else {
      if (!std::isfinite(d.lower) || !std::isfinite(d.upper) ||
          !(d.lower <= d.upper)) {
        throw std::invalid_argument(where +
                                    "bounds must be finite, lower <= upper");
      }
      if (d.log_scale && !(d.lower > 0)) {
        throw std::invalid_argument(where + "log scale needs lower > 0");
      }
      if (d.kind == DimensionKind::kInteger &&
          std::ceil(d.lower) > std::floor(d.upper)) {
        throw std::invalid_argument(where + "no integer within bounds");
      }
    }
    if (d.pinned) {
      if (!std::isfinite(d.pinned_value) ||
          SnapValue(d, d.pinned_value) != d.pinned_value) {
        throw std::invalid_argument(where + "pinned value out of range");
      }
      continue;
    }
    (d.kind == DimensionKind::kCategorical ? categorical_ : continuous_)
        .push_back(i);
  }
}

std::size_t SearchSpace::IndexOf(const std::string& name) const {
  for (std::size_t i = 0; i < dimensions_.size(); ++i) {
    if (dimensions_[i].name == name) return i;
  }
  throw std::out_of_range("no search space dimension named '" + name + "'");
}

std::vector<int> SearchSpace::CategoryCounts() const {
  std::vector<int> counts;
  for (std::size_t i : categorical_) {
    counts.push_back(dimensions_[i].num_categories);
  }
  return counts;
}

double SearchSpace::ToUnitValue(const Dimension& d, double value) const {
  if (d.upper == d.lower) return 0.5;
  if (d.log_scale) {
    return (std::log(value) - std::log(d.lower)) /
           (std::log(d.upper) - std::log(d.lower));
  }
  return (value - d.lower) / (d.upper - d.lower);
}

double SearchSpace::FromUnitValue(const Dimension& d, double unit) const {
  unit = std::clamp(unit, 0.0, 1.0);
  double value;
  if (d.log_scale) {
    value = std::exp(std::log(d.lower) +
                     unit * (std::log(d.upper) - std::log(d.lower)));
  } else {
    value = d.lower + unit * (d.upper - d.lower);
  }
  return SnapValue(d, value);
}

Eigen::VectorXd SearchSpace::ToUnit(const Config& config) const {
  const Config valid = MakeValid(config);
  Eigen::VectorXd unit(num_free());
  int k = 0;
  for (std::size_t i : continuous_) {
    unit[k++] = ToUnitValue(dimensions_[i], valid[i]);
  }
  for (std::size_t i : categorical_) unit[k++] = valid[i];
  return unit;
}

Config SearchSpace::FromUnit(const Eigen::VectorXd& unit) const {
  if (unit.size() != num_free()) {
    throw std::invalid_argument("unit vector has the wrong size");
  }
  Config config(dimensions_.size());
  for (std::size_t i = 0; i < dimensions_.size(); ++i) {
    if (dimensions_[i].pinned) config[i] = dimensions_[i].pinned_value;
  }
  int k = 0;
  for (std::size_t i : continuous_) {
    double u = unit[k++];
    if (!std::isfinite(u)) u = 0.5;
    config[i] = FromUnitValue(dimensions_[i], u);
  }
  for (std::size_t i : categorical_) {
    double u = unit[k++];
    if (!std::isfinite(u)) u = 0;
    config[i] = SnapValue(dimensions_[i], u);
  }
  return config;
}

Config SearchSpace::MakeValid(const Config& config) const {
  if (config.size() != dimensions_.size()) {
    throw std::invalid_argument(
        "configuration has " + std::to_string(config.size()) +
        " values, the search space has " + std::to_string(dimensions_.size()));
  }
  Config valid(config.size());
  for (std::size_t i = 0; i < config.size(); ++i) {
    const Dimension& d = dimensions_[i];
    if (d.pinned) {
      valid[i] = d.pinned_value;
      continue;
    }
    if (!std::isfinite(config[i])) {
      throw std::invalid_argument("configuration value for '" + d.name +
                                  "' is not finite");
    }
    valid[i] = SnapValue(d, config[i]);
  }
  return valid;
}

bool SearchSpace::IsValid(const Config& config) const {
  if (config.size() != dimensions_.size()) return false;
  for (double v : config) {
    if (!std::isfinite(v)) return false;
  }
  return MakeValid(config) == config;
}

Config SearchSpace::Center() const {
  Eigen::VectorXd unit = Eigen::VectorXd::Constant(num_free(), 0.5);
  unit.tail(num_categorical()).setZero();
  return FromUnit(unit);
}

}  // namespace hvdtune::tuner
