#pragma once

#include <Eigen/Core>
#include <cstddef>
#include <string>
#include <vector>

namespace hvdtune::tuner {

/// How a dimension of the search space is valued.
enum class DimensionKind {
  kContinuous,   ///< Real value in [lower, upper].
  kInteger,      ///< Integer value in [lower, upper], rounded to nearest.
  kCategorical,  ///< Category index 0 .. num_categories-1 (no order).
};

/// One knob as the tuner sees it: generic, free of runtime types.
struct Dimension {
  std::string name;
  DimensionKind kind = DimensionKind::kContinuous;
  double lower = 0.0;  ///< Continuous/integer lower bound (natural units).
  double upper = 1.0;  ///< Continuous/integer upper bound (natural units).
  /// Map to the unit interval on a log axis (requires lower > 0). Use it for
  /// quantities that matter by ratio: byte sizes, times.
  bool log_scale = false;
  int num_categories = 0;  ///< Categorical only; a bool is 2 categories.
  /// A pinned dimension is never tuned: every suggestion carries
  /// pinned_value (natural units, or category index) for it.
  bool pinned = false;
  double pinned_value = 0.0;

  static Dimension Continuous(std::string name, double lower, double upper,
                              bool log_scale = false);
  static Dimension Integer(std::string name, double lower, double upper,
                           bool log_scale = false);
  static Dimension Categorical(std::string name, int num_categories);
  /// Copy of this dimension pinned to `value`.
  Dimension Pinned(double value) const;
};

/// A configuration in natural units, one entry per dimension of the space
/// (pinned ones included); categorical entries hold the category index.
using Config = std::vector<double>;

/// The search space: an ordered list of dimensions and the mapping between
/// configurations and the model's coordinates ("unit" vectors).
///
/// A unit vector has one entry per free (non-pinned) dimension: first the
/// continuous and integer ones, each in [0, 1] (log-mapped where flagged),
/// then the categorical ones, each holding the category index as a double.
class SearchSpace {
 public:
  SearchSpace() = default;
  /// Validates the dimensions; throws std::invalid_argument naming the
  /// offending dimension on bad bounds, log scale with lower <= 0, fewer
  /// than one category, a pinned value out of range, or a duplicate name.
  explicit SearchSpace(std::vector<Dimension> dimensions);

  /// All dimensions, pinned ones included, in configuration order.
  const std::vector<Dimension>& dimensions() const { return dimensions_; }
  std::size_t size() const { return dimensions_.size(); }
  /// Index of the dimension called `name`; throws std::out_of_range.
  std::size_t IndexOf(const std::string& name) const;

  /// Number of free continuous/integer dimensions (leading unit entries).
  int num_continuous() const { return static_cast<int>(continuous_.size()); }
  /// Number of free categorical dimensions (trailing unit entries).
  int num_categorical() const { return static_cast<int>(categorical_.size()); }
  /// Length of a unit vector.
  int num_free() const { return num_continuous() + num_categorical(); }
  /// Category count of each free categorical dimension, in unit order.
  std::vector<int> CategoryCounts() const;
  /// Configuration index of each unit-vector entry.
  const std::vector<std::size_t>& continuous_indices() const {
    return continuous_;
  }
  const std::vector<std::size_t>& categorical_indices() const {
    return categorical_;
  }

  /// Unit coordinates of a configuration (it is made valid first).
  Eigen::VectorXd ToUnit(const Config& config) const;
  /// Valid configuration for unit coordinates: clamps to [0, 1], rounds
  /// integers and categories, fills pinned values.
  Config FromUnit(const Eigen::VectorXd& unit) const;
  /// Nearest valid configuration: bounds, integer rounding, category
  /// rounding, pinned values. Throws std::invalid_argument on a size
  /// mismatch or a non-finite entry.
  Config MakeValid(const Config& config) const;
  /// True when `config` is already valid (MakeValid would not change it).
  bool IsValid(const Config& config) const;
  /// The default configuration: pinned values, the log/linear midpoint of
  /// ranges, category 0.
  Config Center() const;

 private:
  double ToUnitValue(const Dimension& d, double value) const;
  double FromUnitValue(const Dimension& d, double unit) const;

  std::vector<Dimension> dimensions_;
  std::vector<std::size_t> continuous_;
  std::vector<std::size_t> categorical_;
};

}  // namespace hvdtune::tuner
