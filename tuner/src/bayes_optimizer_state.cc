// BayesianOptimizer's complete state as JSON (ToJson / FromJson) and bytes.
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <type_traits>

#include "hvdtune/tuner/bayes_optimizer.h"

namespace hvdtune::tuner {

namespace {

constexpr const char* kFormat = "hvdtune.tuner.bayes_optimizer";
constexpr int kVersion = 1;

// Every scalar setting, by name: one list drives both writing and reading.
template <typename F>
void VisitSettings(BayesOptSettings& s, F&& f) {
  f("initial_design_size", s.initial_design_size);
  f("latin_hypercube", s.latin_hypercube);
  f("max_evaluations", s.max_evaluations);
  f("stop_ei_threshold", s.stop_ei_threshold);
  f("stop_patience", s.stop_patience);
  f("refit_every_until", s.refit_every_until);
  f("refit_growth", s.refit_growth);
  f("num_anchors", s.num_anchors);
  f("category_probe_period", s.category_probe_period);
  f("category_probe_share", s.category_probe_share);
  f("exploit_from", s.exploit_from);
  f("exploit_ucb_beta", s.exploit_ucb_beta);
  f("acquisition.xi", s.acquisition.xi);
  f("acquisition.xi_noise", s.acquisition.xi_noise);
  f("acquisition.xi_noise_half_variance", s.acquisition.xi_noise_half_variance);
  f("acquisition.ucb_beta", s.acquisition.ucb_beta);
  auto& ao = s.acquisition_optimizer;
  f("acquisition_optimizer.num_random_candidates", ao.num_random_candidates);
  f("acquisition_optimizer.num_anchor_perturbations",
    ao.num_anchor_perturbations);
  f("acquisition_optimizer.perturbation_sd", ao.perturbation_sd);
  f("acquisition_optimizer.num_local_starts", ao.num_local_starts);
  f("acquisition_optimizer.local_max_evals", ao.local_max_evals);
  f("acquisition_optimizer.max_enumerated_combinations",
    ao.max_enumerated_combinations);
  auto& gp = s.gp;
  f("gp.ard", gp.ard);
  f("gp.use_priors", gp.use_priors);
  f("gp.warp_outputs", gp.warp_outputs);
  f("gp.noise_floor", gp.noise_floor);
  f("gp.relative_noise_floor", gp.relative_noise_floor);
  f("gp.restarts", gp.restarts);
  f("gp.max_evals_per_start", gp.max_evals_per_start);
  f("gp.log_lengthscale_prior_mean", gp.log_lengthscale_prior_mean);
  f("gp.log_lengthscale_prior_sd", gp.log_lengthscale_prior_sd);
  f("gp.log_category_weight_prior_mean", gp.log_category_weight_prior_mean);
  f("gp.log_category_weight_prior_sd", gp.log_category_weight_prior_sd);
  f("gp.log_signal_prior_mean", gp.log_signal_prior_mean);
  f("gp.log_signal_prior_sd", gp.log_signal_prior_sd);
  f("gp.log_noise_prior_mean", gp.log_noise_prior_mean);
  f("gp.log_noise_prior_sd", gp.log_noise_prior_sd);
  f("gp.mean_prior_sd", gp.mean_prior_sd);
}

const char* KindName(DimensionKind kind) {
  switch (kind) {
    case DimensionKind::kContinuous:
      return "continuous";
    case DimensionKind::kInteger:
      return "integer";
    case DimensionKind::kCategorical:
      return "categorical";
  }
  return "continuous";
}

DimensionKind KindFromName(const std::string& name) {
  if (name == "continuous") return DimensionKind::kContinuous;
  if (name == "integer") return DimensionKind::kInteger;
  if (name == "categorical") return DimensionKind::kCategorical;
  throw std::invalid_argument("tuner state JSON: unknown dimension kind '" +
                              name + "'");
}

const char* AcquisitionName(AcquisitionKind kind) {
  switch (kind) {
    case AcquisitionKind::kLogExpectedImprovement:
      return "log_ei";
    case AcquisitionKind::kExpectedImprovement:
      return "ei";
    case AcquisitionKind::kUpperConfidenceBound:
      return "ucb";
  }
  return "log_ei";
}

AcquisitionKind AcquisitionFromName(const std::string& name) {
  if (name == "log_ei") return AcquisitionKind::kLogExpectedImprovement;
  if (name == "ei") return AcquisitionKind::kExpectedImprovement;
  if (name == "ucb") return AcquisitionKind::kUpperConfidenceBound;
  throw std::invalid_argument("tuner state JSON: unknown acquisition '" + name +
                              "'");
}

// A finite double for the state (JSON has no NaN or infinity). nlohmann
// writes the shortest text that reads back to the same double, so values
// round-trip bit for bit.
double FiniteNumber(double value) {
  if (!std::isfinite(value)) {
    throw std::invalid_argument("non-finite number in tuner state");
  }
  return value;
}

std::vector<double> FiniteNumbers(const std::vector<double>& values) {
  for (double v : values) FiniteNumber(v);
  return values;
}

// Read access to one JSON value of the state that names what it reads in
// its errors ("observations[3].score: expected a number").
class StateReader {
 public:
  explicit StateReader(const nlohmann::json& value, std::string path = "")
      : value_(value), path_(std::move(path)) {}

  bool Has(const char* key) const {
    return value_.is_object() && value_.contains(key);
  }
  std::size_t size() const { return value_.size(); }

  StateReader Object(const char* key) const {
    return Child(key).Expect(kObject);
  }
  StateReader Array(const char* key) const { return Child(key).Expect(kArray); }
  StateReader Object(std::size_t i) const { return Child(i).Expect(kObject); }
  std::string String(const char* key) const {
    return Child(key).Expect(kString).value_.get<std::string>();
  }
  bool Bool(const char* key) const {
    return Child(key).Expect(kBool).value_.get<bool>();
  }
  double Number(const char* key) const { return Child(key).AsNumber(); }
  int Integer(const char* key) const { return Child(key).AsInteger(); }
  std::vector<double> Numbers(const char* key) const {
    return Child(key).AsNumbers();
  }
  std::vector<double> Numbers(std::size_t i) const {
    return Child(i).AsNumbers();
  }

 private:
  enum Type { kObject, kArray, kString, kBool, kNumber };

  [[noreturn]] void Fail(const std::string& what) const {
    throw std::invalid_argument(
        "tuner state JSON: " + (path_.empty() ? "document" : path_) + ": " +
        what);
  }
  StateReader Child(const char* key) const {
    const std::string path = path_.empty() ? key : path_ + "." + key;
    if (!value_.is_object()) Fail("expected an object");
    const auto it = value_.find(key);
    if (it == value_.end()) {
      throw std::invalid_argument("tuner state JSON: missing member '" + path +
                                  "'");
    }
    return StateReader(*it, path);
  }
  StateReader Child(std::size_t i) const {
    return StateReader(value_.at(i), path_ + "[" + std::to_string(i) + "]");
  }
  StateReader Expect(Type type) const {
    static constexpr const char* kNames[] = {
        "an object", "an array", "a string", "a boolean", "a number"};
    const bool ok = (type == kObject && value_.is_object()) ||
                    (type == kArray && value_.is_array()) ||
                    (type == kString && value_.is_string()) ||
                    (type == kBool && value_.is_boolean()) ||
                    (type == kNumber && value_.is_number());
    if (!ok) {
      Fail(std::string("expected ") + kNames[type] + ", found " +
           value_.type_name());
    }
    return *this;
  }
  double AsNumber() const { return Expect(kNumber).value_.get<double>(); }
  int AsInteger() const {
    const double v = AsNumber();
    if (v != std::floor(v) || v < std::numeric_limits<int>::min() ||
        v > std::numeric_limits<int>::max()) {
      Fail("expected an integer");
    }
    return static_cast<int>(v);
  }
  std::vector<double> AsNumbers() const {
    Expect(kArray);
    std::vector<double> out;
    for (std::size_t i = 0; i < value_.size(); ++i) {
      out.push_back(Child(i).AsNumber());
    }
    return out;
  }

  const nlohmann::json& value_;
  std::string path_;
};

}  // namespace

std::string BayesianOptimizer::ToJson() const {
  // Insertion order keeps the document in the order it is described in.
  nlohmann::ordered_json doc;
  doc["format"] = kFormat;
  doc["version"] = kVersion;
  nlohmann::ordered_json space = nlohmann::ordered_json::array();
  for (const Dimension& d : space_.dimensions()) {
    nlohmann::ordered_json dim;
    dim["name"] = d.name;
    dim["kind"] = KindName(d.kind);
    dim["lower"] = FiniteNumber(d.lower);
    dim["upper"] = FiniteNumber(d.upper);
    dim["log_scale"] = d.log_scale;
    dim["num_categories"] = d.num_categories;
    dim["pinned"] = d.pinned;
    dim["pinned_value"] = FiniteNumber(d.pinned_value);
    space.push_back(std::move(dim));
  }
  doc["space"] = std::move(space);
  nlohmann::ordered_json settings;
  // A string: readers that hold numbers as doubles cannot carry 64 bits.
  settings["seed"] = std::to_string(settings_.seed);
  settings["acquisition.kind"] = AcquisitionName(settings_.acquisition.kind);
  BayesOptSettings copy = settings_;
  VisitSettings(copy, [&](const char* name, auto& value) {
    using T = std::decay_t<decltype(value)>;
    if constexpr (std::is_floating_point_v<T>) {
      settings[name] = FiniteNumber(value);
    } else {
      settings[name] = value;
    }
  });
  doc["settings"] = std::move(settings);
  std::ostringstream rng_text;
  rng_text << rng_;
  doc["rng"] = rng_text.str();
  nlohmann::ordered_json observations = nlohmann::ordered_json::array();
  for (const Observation& o : observations_) {
    nlohmann::ordered_json obs;
    obs["config"] = FiniteNumbers(o.config);
    obs["score"] = FiniteNumber(o.score);
    observations.push_back(std::move(obs));
  }
  doc["observations"] = std::move(observations);
  nlohmann::ordered_json queue = nlohmann::ordered_json::array();
  for (const Config& c : design_queue_) queue.push_back(FiniteNumbers(c));
  doc["design_queue"] = std::move(queue);
  doc["design_generated"] = design_generated_;
  doc["low_ei_rounds"] = low_ei_rounds_;
  doc["last_fit_points"] = last_fit_points_;
  // The measured noise the model was last fitted with (the settings hold
  // the one its next refit takes).
  doc["fitted_relative_noise_floor"] = FiniteNumber(gp_.relative_noise_floor());
  const Eigen::VectorXd& theta = gp_.hyperparameters();
  doc["hyperparameters"] = FiniteNumbers(
      std::vector<double>(theta.data(), theta.data() + theta.size()));
  return doc.dump();
}

BayesianOptimizer BayesianOptimizer::FromJson(const std::string& text) {
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    throw std::invalid_argument(std::string("tuner state JSON: ") + e.what());
  }
  const StateReader state(doc);
  if (state.String("format") != kFormat ||
      state.Integer("version") != kVersion) {
    throw std::invalid_argument(
        "tuner state JSON: unknown format or version (expected '" +
        std::string(kFormat) + "' version " + std::to_string(kVersion) + ")");
  }
  std::vector<Dimension> dims;
  const StateReader space = state.Array("space");
  for (std::size_t i = 0; i < space.size(); ++i) {
    const StateReader v = space.Object(i);
    Dimension d;
    d.name = v.String("name");
    d.kind = KindFromName(v.String("kind"));
    d.lower = v.Number("lower");
    d.upper = v.Number("upper");
    d.log_scale = v.Bool("log_scale");
    d.num_categories = v.Integer("num_categories");
    d.pinned = v.Bool("pinned");
    d.pinned_value = v.Number("pinned_value");
    dims.push_back(d);
  }
  const StateReader s = state.Object("settings");
  BayesOptSettings settings;
  const std::string seed = s.String("seed");
  try {
    if (seed.empty() || seed.find_first_not_of("0123456789") != seed.npos) {
      throw std::invalid_argument(seed);
    }
    settings.seed = std::stoull(seed);
  } catch (const std::logic_error&) {
    throw std::invalid_argument("tuner state JSON: settings.seed '" + seed +
                                "' is not an unsigned 64-bit integer");
  }
  settings.acquisition.kind = AcquisitionFromName(s.String("acquisition.kind"));
  VisitSettings(settings, [&](const char* name, auto& value) {
    // A setting added after a state was written keeps its default.
    if (!s.Has(name)) return;
    using T = std::decay_t<decltype(value)>;
    if constexpr (std::is_same_v<T, bool>) {
      value = s.Bool(name);
    } else if constexpr (std::is_integral_v<T>) {
      value = s.Integer(name);
    } else {
      value = s.Number(name);
    }
  });

  BayesianOptimizer opt(SearchSpace(std::move(dims)), settings);
  std::istringstream rng_text(state.String("rng"));
  rng_text >> opt.rng_;
  if (!rng_text) throw std::invalid_argument("tuner state JSON: bad rng state");
  const StateReader observations = state.Array("observations");
  for (std::size_t i = 0; i < observations.size(); ++i) {
    const StateReader v = observations.Object(i);
    opt.Observe(v.Numbers("config"), v.Number("score"));
  }
  const StateReader queue = state.Array("design_queue");
  for (std::size_t i = 0; i < queue.size(); ++i) {
    opt.design_queue_.push_back(opt.space_.MakeValid(queue.Numbers(i)));
  }
  opt.design_generated_ = state.Bool("design_generated");
  opt.low_ei_rounds_ = state.Integer("low_ei_rounds");
  const int fit_points = state.Integer("last_fit_points");
  const std::vector<double> theta = state.Numbers("hyperparameters");
  if (fit_points < 0 ||
      fit_points > static_cast<int>(opt.observations_.size()) ||
      static_cast<int>(theta.size()) != opt.gp_.num_hyperparameters()) {
    throw std::invalid_argument(
        "tuner state JSON: inconsistent model state (last_fit_points " +
        std::to_string(fit_points) + " of " +
        std::to_string(opt.observations_.size()) + " observations, " +
        std::to_string(theta.size()) + " hyperparameters where the model has " +
        std::to_string(opt.gp_.num_hyperparameters()) + ")");
  }
  // Rebuild the model exactly as it was: factorised at the last refit, with
  // the measured noise of then, later points to be added by the same
  // Cholesky updates. (A state written before the measured noise existed
  // has none: 0.)
  opt.gp_.set_relative_noise_floor(
      state.Has("fitted_relative_noise_floor")
          ? state.Number("fitted_relative_noise_floor")
          : 0.0);
  opt.gp_.SetHyperparameters(
      Eigen::Map<const Eigen::VectorXd>(theta.data(), theta.size()));
  if (fit_points > 0) {
    Eigen::VectorXd y(fit_points);
    for (int i = 0; i < fit_points; ++i) y[i] = opt.observations_[i].score;
    opt.gp_.SetData(opt.UnitMatrix(fit_points), y);
  }
  opt.last_fit_points_ = fit_points;
  opt.model_points_ = fit_points;
  return opt;
}

std::vector<std::uint8_t> BayesianOptimizer::Serialize() const {
  const std::string text = ToJson();
  return {text.begin(), text.end()};
}

BayesianOptimizer BayesianOptimizer::Deserialize(
    const std::vector<std::uint8_t>& bytes) {
  return FromJson(std::string(bytes.begin(), bytes.end()));
}

}  // namespace hvdtune::tuner
