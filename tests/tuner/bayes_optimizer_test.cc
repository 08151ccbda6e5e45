#include "hvdtune/tuner/bayes_optimizer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "test_functions.h"

namespace hvdtune::tuner {
namespace {

namespace tt = testing;

BayesOptSettings Settings(std::uint64_t seed) {
  BayesOptSettings s;
  s.seed = seed;
  s.initial_design_size = 4;
  return s;
}

// Runs `budget` rounds on a minimisation objective (the optimizer maximises
// -f, times 1 +- noise) and returns the noiseless regret of Best().
template <typename F>
double RunRegret(const SearchSpace& space, F f, double optimum,
                 std::uint64_t seed, int budget, double noise = 0) {
  BayesianOptimizer opt(space, Settings(seed));
  std::mt19937_64 rng(seed + 17);
  std::uniform_real_distribution<double> u(1 - noise, 1 + noise);
  for (int i = 0; i < budget; ++i) {
    const Config c = opt.Suggest();
    EXPECT_TRUE(space.IsValid(c));
    opt.Observe(c, -f(c) * (noise > 0 ? u(rng) : 1.0));
  }
  return std::abs(f(opt.Best()->config) - optimum) / std::abs(optimum);
}

// Four categories with different peaks and offsets; the best is category 2
// at (0.8, 0.3) with value 1.
double Mixed(const Config& c) {
  static constexpr double kOffset[4] = {0.0, 0.6, 1.0, 0.75};
  static constexpr double kCentre[4] = {0.2, 0.5, 0.8, 0.4};
  const int k = static_cast<int>(c[2]);
  const double dx = c[0] - kCentre[k], dy = c[1] - 0.3;
  return -(kOffset[k] - 4 * dx * dx - 3 * dy * dy);  // minimised
}

SearchSpace MixedSpace() {
  return SearchSpace({Dimension::Continuous("x", 0, 1),
                      Dimension::Continuous("y", 0, 1),
                      Dimension::Categorical("k", 4)});
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

TEST(BayesianOptimizerTest, SameSeedSameSuggestions) {
  auto run = [](std::uint64_t seed) {
    BayesianOptimizer opt(MixedSpace(), Settings(seed));
    std::vector<Config> out;
    for (int i = 0; i < 14; ++i) {
      out.push_back(opt.Suggest());
      opt.Observe(out.back(), -Mixed(out.back()));
    }
    return out;
  };
  EXPECT_EQ(run(5), run(5));
  EXPECT_NE(run(5), run(6));
}

TEST(BayesianOptimizerTest, ReachesBraninOptimum) {
  std::vector<double> regrets;
  for (std::uint64_t seed : {1, 2, 3}) {
    regrets.push_back(RunRegret(tt::Branin::Space(), tt::Branin::Value,
                                tt::Branin::kOptimum, seed, 40));
  }
  EXPECT_LT(Median(regrets), 0.01);
}

TEST(BayesianOptimizerTest, RefinesANoiseFreeOptimum) {
  // With no noise the fitted noise is only the model's misfit: the EI margin
  // that keeps a noisy search from chasing its noise must not stop this
  // search short of the optimum (median regret about 1.5e-4 at 40 samples;
  // 1e-3 when the margin followed the misfit).
  std::vector<double> regrets;
  for (std::uint64_t seed = 1; seed <= 15; ++seed) {
    regrets.push_back(RunRegret(tt::Branin::Space(), tt::Branin::Value,
                                tt::Branin::kOptimum, seed, 40));
  }
  EXPECT_LT(Median(regrets), 5e-4);
}

TEST(BayesianOptimizerTest, ReachesMixedCategoricalContinuousOptimum) {
  std::vector<double> regrets;
  for (std::uint64_t seed : {1, 2, 3}) {
    regrets.push_back(RunRegret(MixedSpace(), Mixed, -1.0, seed, 30));
  }
  EXPECT_LT(Median(regrets), 0.02);
}

TEST(BayesianOptimizerTest, ConvergesUnderMultiplicativeNoise) {
  // +-5% multiplicative noise on every observation; regret is measured on
  // the noiseless function at Best(), which ranks by posterior mean.
  std::vector<double> branin;
  for (std::uint64_t seed : {1, 2, 3}) {
    branin.push_back(RunRegret(tt::Branin::Space(), tt::Branin::Value,
                               tt::Branin::kOptimum, seed, 40, 0.05));
  }
  EXPECT_LT(Median(branin), 0.05);
}

TEST(BayesianOptimizerTest, NoisyCategoricalConvergesToBestCategory) {
  // A positive, throughput-like score exp(-Mixed) with +-5% multiplicative
  // noise: the best category's peak beats the runner-up's (category 3) by
  // ~28%, while a 0.15 slip in x or y costs under 10%, about twice the noise.
  // Without category probes about half of these runs settle on the
  // runner-up.
  const SearchSpace space = MixedSpace();
  int near_optimum = 0;
  for (std::uint64_t seed = 1; seed <= 6; ++seed) {
    BayesianOptimizer opt(space, Settings(seed));
    std::mt19937_64 rng(seed + 17);
    std::uniform_real_distribution<double> noise(0.95, 1.05);
    for (int i = 0; i < 40; ++i) {
      const Config c = opt.Suggest();
      opt.Observe(c, std::exp(-Mixed(c)) * noise(rng));
    }
    const Config best = opt.Best()->config;
    EXPECT_EQ(best[2], 2) << "seed " << seed;
    if (std::abs(best[0] - 0.8) < 0.15 && std::abs(best[1] - 0.3) < 0.15) {
      ++near_optimum;
    }
  }
  EXPECT_GE(near_optimum, 5);
}

TEST(BayesianOptimizerTest, PinnedKnobsNeverChange) {
  const SearchSpace space(
      {Dimension::Continuous("fusion", 1 << 20, 256 << 20, true),
       Dimension::Continuous("cycle", 0.1, 50, true).Pinned(3.5),
       Dimension::Categorical("algorithm", 3),
       Dimension::Categorical("cache", 2).Pinned(0),
       Dimension::Integer("groups", 1, 8)});
  BayesianOptimizer opt(space, Settings(3));
  opt.SeedDesign({{1 << 22, 10.0, 1, 1, 2.6}});  // pinned values get overridden
  for (int i = 0; i < 25; ++i) {
    const Config c = opt.Suggest();
    ASSERT_TRUE(space.IsValid(c));
    EXPECT_EQ(c[1], 3.5);
    EXPECT_EQ(c[3], 0.0);
    EXPECT_EQ(c[4], std::round(c[4]));
    opt.Observe(c, std::log(c[0]) - std::abs(c[4] - 5) + c[2]);
  }
  EXPECT_EQ(opt.Best()->config[1], 3.5);
}

TEST(BayesianOptimizerTest, RestoredStateSuggestsTheSameNextPoints) {
  BayesianOptimizer original(MixedSpace(), Settings(9));
  // 23 observations: past the every-round refit phase, so the restored
  // model must replay Cholesky updates on top of the last refit.
  for (int i = 0; i < 23; ++i) {
    const Config c = original.Suggest();
    original.Observe(c, -Mixed(c));
  }
  BayesianOptimizer restored =
      BayesianOptimizer::Deserialize(original.Serialize());
  EXPECT_EQ(restored.ToJson(), original.ToJson());
  for (int i = 0; i < 6; ++i) {
    const Config a = original.Suggest(), b = restored.Suggest();
    ASSERT_EQ(a, b) << "round " << i;
    original.Observe(a, -Mixed(a));
    restored.Observe(b, -Mixed(b));
  }
  EXPECT_EQ(restored.Best()->config, original.Best()->config);
}

TEST(BayesianOptimizerTest, MeasuredNoiseIsPartOfTheState) {
  // The measured noise changes with every sample, as the policy hands it
  // on; the model takes it at each refit. A restored optimizer rebuilds
  // the model with the value of its last refit and refits with the latest.
  BayesianOptimizer original(MixedSpace(), Settings(9));
  EXPECT_THROW(original.SetRelativeNoiseFloor(-0.1), std::invalid_argument);
  EXPECT_THROW(original.SetRelativeNoiseFloor(std::nan("")),
               std::invalid_argument);
  for (int i = 0; i < 23; ++i) {
    original.SetRelativeNoiseFloor(0.02 + 0.002 * i);
    const Config c = original.Suggest();
    original.Observe(c, std::exp(-Mixed(c)));
  }
  original.Best();
  EXPECT_GT(original.model().noise_variance_floor(),
            Settings(9).gp.noise_floor);
  BayesianOptimizer restored =
      BayesianOptimizer::Deserialize(original.Serialize());
  EXPECT_EQ(restored.ToJson(), original.ToJson());
  restored.Best();
  EXPECT_EQ(restored.model().noise_variance_floor(),
            original.model().noise_variance_floor());
  for (int i = 0; i < 6; ++i) {
    const Config a = original.Suggest(), b = restored.Suggest();
    ASSERT_EQ(a, b) << "round " << i;
    original.Observe(a, std::exp(-Mixed(a)));
    restored.Observe(b, std::exp(-Mixed(b)));
  }
  EXPECT_EQ(restored.Best()->config, original.Best()->config);
}

TEST(BayesianOptimizerTest, ExploitPhaseIsPartOfTheStateAndStaysValid) {
  BayesOptSettings settings = Settings(4);
  settings.exploit_from = 12;  // the last suggestions maximise UCB
  BayesianOptimizer original(MixedSpace(), settings);
  for (int i = 0; i < 12; ++i) {
    const Config c = original.Suggest();
    original.Observe(c, -Mixed(c));
  }
  const BayesianOptimizer restored =
      BayesianOptimizer::FromJson(original.ToJson());
  EXPECT_EQ(restored.settings().exploit_from, 12);
  EXPECT_EQ(restored.settings().acquisition.xi_noise,
            settings.acquisition.xi_noise);
  BayesianOptimizer copy = restored;
  for (int i = 0; i < 4; ++i) {
    const Config a = original.Suggest(), b = copy.Suggest();
    ASSERT_EQ(a, b) << "round " << i;
    EXPECT_TRUE(MixedSpace().IsValid(a));
    original.Observe(a, -Mixed(a));
    copy.Observe(b, -Mixed(b));
  }
}

TEST(BayesianOptimizerTest, RestoresMidDesignAndRejectsGarbage) {
  BayesianOptimizer original(MixedSpace(), Settings(4));
  original.Observe(original.Suggest(), 1.0);  // 3 design points still queued
  BayesianOptimizer restored = BayesianOptimizer::FromJson(original.ToJson());
  for (int i = 0; i < 5; ++i) {
    const Config a = original.Suggest(), b = restored.Suggest();
    ASSERT_EQ(a, b);
    original.Observe(a, -Mixed(a));
    restored.Observe(b, -Mixed(b));
  }
  EXPECT_THROW(BayesianOptimizer::FromJson("{\"format\":1}"),
               std::invalid_argument);
  EXPECT_THROW(BayesianOptimizer::FromJson("not json"), std::invalid_argument);
}

TEST(BayesianOptimizerTest, StateRoundTripIsBitExact) {
  const SearchSpace space({Dimension::Continuous("x", -1.7976931348623157e308,
                                                 1.7976931348623157e308),
                           Dimension::Continuous("y", 0, 1)});
  BayesianOptimizer original(space, Settings(~0ULL));
  // Doubles that need all 17 digits, denormals, extremes and -0.
  std::vector<double> values = {0.1,
                                1.0 / 3,
                                2.0 / 3,
                                std::nextafter(1.0, 2.0),
                                5e-324,
                                2.2250738585072014e-308,
                                -1.7976931348623157e308,
                                1.7976931348623157e308,
                                -0.0,
                                123456789.12345679,
                                9007199254740993.0,
                                1e23};
  std::mt19937_64 rng(12);
  while (values.size() < 400) {
    const double v = std::bit_cast<double>(rng());
    if (std::isfinite(v)) values.push_back(v);
  }
  for (std::size_t i = 0; i + 1 < values.size(); i += 2) {
    original.Observe({values[i], std::fabs(std::fmod(values[i + 1], 1.0))},
                     values[i + 1]);
  }
  const std::string text = original.ToJson();
  const BayesianOptimizer restored = BayesianOptimizer::FromJson(text);
  ASSERT_EQ(restored.observations().size(), original.observations().size());
  for (std::size_t i = 0; i < original.observations().size(); ++i) {
    const Observation& a = original.observations()[i];
    const Observation& b = restored.observations()[i];
    EXPECT_EQ(std::bit_cast<std::uint64_t>(b.score),
              std::bit_cast<std::uint64_t>(a.score))
        << i;
    for (std::size_t d = 0; d < a.config.size(); ++d) {
      EXPECT_EQ(std::bit_cast<std::uint64_t>(b.config[d]),
                std::bit_cast<std::uint64_t>(a.config[d]))
          << i << "," << d;
    }
  }
  EXPECT_EQ(restored.settings().seed, ~0ULL);
  EXPECT_EQ(restored.ToJson(), text);
}

// `text` with the first `from` replaced by `to` (which must be there).
std::string Edit(std::string text, const std::string& from,
                 const std::string& to) {
  const std::size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

TEST(BayesianOptimizerTest, MalformedStateErrorsSayWhatIsWrong) {
  BayesianOptimizer opt(MixedSpace(), Settings(4));
  opt.Observe({0.5, 0.25, 1}, 2.5);
  const std::string good = opt.ToJson();
  // Readable: named members in a fixed order, numbers as written.
  EXPECT_EQ(good.rfind("{\"format\":\"hvdtune.tuner.bayes_optimizer\","
                       "\"version\":1,\"space\":[{\"name\":\"x\"",
                       0),
            0u)
      << good;
  EXPECT_NE(good.find("\"observations\":[{\"config\":[0.5,0.25,1.0],"
                      "\"score\":2.5}]"),
            std::string::npos)
      << good;
  ASSERT_NO_THROW(BayesianOptimizer::FromJson(good));
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"not json", "parse error"},
      {good + "x", "parse error"},
      {"[1,2]", "document: expected an object"},
      {Edit(good, "\"version\":1", "\"version\":2"), "unknown format"},
      {Edit(good, "\"rng\":", "\"rgn\":"), "missing member 'rng'"},
      {Edit(good, "\"score\":2.5", "\"score\":\"2.5\""),
       "observations[0].score: expected a number, found string"},
      {Edit(good, "\"num_categories\":4", "\"num_categories\":2.5"),
       "space[2].num_categories: expected an integer"},
      {Edit(good, "\"seed\":\"4\"", "\"seed\":\"-4\""), "settings.seed"},
      {Edit(good, "\"design_generated\":", "\"design_generated\":1,\"x\":"),
       "design_generated: expected a boolean, found number"},
      {Edit(good, "\"config\":[0.5,", "\"config\":[null,"),
       "observations[0].config[0]: expected a number, found null"},
      {Edit(good, "\"kind\":\"categorical\"", "\"kind\":\"ordinal\""),
       "unknown dimension kind 'ordinal'"},
  };
  for (const auto& [text, message] : cases) {
    try {
      BayesianOptimizer::FromJson(text);
      ADD_FAILURE() << "accepted: " << text;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos)
          << "'" << e.what() << "' does not say '" << message << "'";
    }
  }
}

TEST(BayesianOptimizerTest, FlatAndDuplicateObservationsStayFinite) {
  BayesianOptimizer opt(MixedSpace(), Settings(1));
  const Config same = {0.5, 0.5, 1};
  for (int i = 0; i < 8; ++i) opt.Observe(same, 3.0);
  for (int i = 0; i < 6; ++i) {
    const Config c = opt.Suggest();
    ASSERT_TRUE(MixedSpace().IsValid(c));
    opt.Observe(c, 3.0);  // flat
  }
  opt.Observe(same, 2.0);  // conflicting duplicate
  const Config c = opt.Suggest();
  EXPECT_TRUE(MixedSpace().IsValid(c));
  EXPECT_TRUE(opt.model().hyperparameters().allFinite());
  ASSERT_TRUE(opt.Best().has_value());
}

TEST(BayesianOptimizerTest, SeededPointsComeFirstThenDesign) {
  BayesOptSettings s = Settings(2);
  s.initial_design_size = 5;
  BayesianOptimizer opt(MixedSpace(), s);
  opt.SeedDesign({{0.1, 0.2, 3}, {0.9, 0.9, 0}});
  EXPECT_EQ(opt.Suggest(), (Config{0.1, 0.2, 3}));
  EXPECT_EQ(opt.Suggest(), (Config{0.9, 0.9, 0}));
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(MixedSpace().IsValid(opt.Suggest()));
}

TEST(BayesianOptimizerTest, StopRules) {
  BayesOptSettings s = Settings(1);
  s.max_evaluations = 6;
  BayesianOptimizer budget(MixedSpace(), s);
  int rounds = 0;
  while (!budget.ShouldStop()) {
    const Config c = budget.Suggest();
    budget.Observe(c, -Mixed(c));
    ++rounds;
  }
  EXPECT_EQ(rounds, 6);

  s = Settings(1);
  s.stop_ei_threshold = 1e-3;
  s.stop_patience = 2;
  BayesianOptimizer converged(MixedSpace(), s);
  for (rounds = 0; rounds < 60 && !converged.ShouldStop(); ++rounds) {
    const Config c = converged.Suggest();
    converged.Observe(c, 1.0 - 1e-6 * c[0]);  // nothing to gain anywhere
  }
  EXPECT_TRUE(converged.ShouldStop());
  EXPECT_LT(rounds, 60);
}

TEST(BayesianOptimizerTest, RejectsBadObservations) {
  BayesianOptimizer opt(MixedSpace(), Settings(1));
  EXPECT_THROW(opt.Observe({0.5, 0.5, 1}, NAN), std::invalid_argument);
  EXPECT_THROW(opt.Observe({0.5, 0.5}, 1.0), std::invalid_argument);
  EXPECT_FALSE(opt.Best().has_value());
}

}  // namespace
}  // namespace hvdtune::tuner
