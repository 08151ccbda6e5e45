// What an exploration round freezes on when the best change it found is
// worth about one sample's noise: the refining tail measures the two
// configurations the freeze decides between (the best-scoring one and the
// one with the unsure knobs set back) in turn, and the freeze never takes a
// stand-in the model puts clearly behind the best.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "freeze_surface.h"
#include "hvdtune/tuner/autotune_policy.h"

namespace hvdtune::tuner {
namespace {

using testing_freeze::Initial;
using testing_freeze::Space;
using testing_freeze::Throughput;

struct Tuned {
  Config frozen;
  std::vector<Config> measured;  // every exploration sample, in order
};

// Drives one policy (20 samples of 5 steps) until it freezes; every step's
// throughput is multiplied by lognormal noise of `step_noise`.
Tuned Tune(std::uint64_t seed, double step_noise) {
  Tuned run;
  const double seconds = 0.1;
  const PolicyStatus st = testing_freeze::RunUntilFrozen(
      seed, std::mt19937_64(seed * 7919 + 1), step_noise,
      [&](const Config& c, double noise) {
        return Throughput(c) * noise * 1e9 * seconds;
      },
      [&](const PolicyEvent& e) {
        if (e.kind == PolicyEvent::Kind::kSample &&
            e.phase == Phase::kExploring) {
          run.measured.push_back(e.config);
        }
      });
  EXPECT_EQ(st.phase, Phase::kFrozen) << "seed " << seed;
  run.frozen = st.best;
  return run;
}

TEST(AutotunePolicyFreezeTest, NeverFreezesFarBehindWhatItMeasured) {
  // Over 200 seeds each, at 6% and 15% noise per step, the configuration a
  // round freezes on is within 15% of the best one it measured (noiseless).
  // Measured on these seeds: without the races the worst is 0.846 (15%
  // noise; the model's doubts set knobs back where a few more samples would
  // have kept them), without the guard 0.802 (6%: an unmeasured candidate's
  // nearest stand-in was a poor sample), without either 0.815.
  for (double noise : {0.06, 0.15}) {
    double worst = 1;
    for (std::uint64_t seed = 1; seed <= 200; ++seed) {
      const Tuned run = Tune(seed, noise);
      double best = 0;
      for (const Config& c : run.measured) best = std::max(best, Throughput(c));
      worst = std::min(worst, Throughput(run.frozen) / best);
    }
    EXPECT_GE(worst, 0.85) << "noise " << noise;
  }
}

TEST(AutotunePolicyFreezeTest, TheTailMeasuresTheTwoContendersInTurn) {
  // Where the tail raced two configurations (A B A B as its last samples),
  // the round froze on one of them.
  int races = 0;
  for (std::uint64_t seed = 1; seed <= 20; ++seed) {
    const Tuned run = Tune(seed, 0.06);
    ASSERT_GE(run.measured.size(), 4u);
    const auto tail = run.measured.end() - 4;
    const Config& a = tail[0];
    const Config& b = tail[1];
    if (a == b || tail[2] != a || tail[3] != b) continue;
    ++races;
    EXPECT_TRUE(run.frozen == a || run.frozen == b) << "seed " << seed;
  }
  EXPECT_GE(races, 3);
}

TEST(AutotunePolicyFreezeTest, KeepsAnAlgorithmWorthMoreThanTheNoise) {
  // Only the algorithm matters (algorithm 2 is 16% ahead; the continuous
  // knobs are worth nothing), under 20% noise a step: the freeze sets the
  // knobs that do not matter back and keeps the algorithm. Measured on
  // these seeds: 36 of 40 froze on algorithm 2.
  int kept_algorithm = 0;
  const int seeds = 40;
  for (std::uint64_t seed = 1; seed <= seeds; ++seed) {
    const PolicyStatus st = testing_freeze::RunUntilFrozen(
        seed, std::mt19937_64(seed * 6007 + 5), 0.2,
        [](const Config& c, double noise) {
          return (c[3] == 2 ? 1.16 : 1.0) * noise * 1e8;
        },
        [](const PolicyEvent&) {});
    ASSERT_EQ(st.phase, Phase::kFrozen) << "seed " << seed;
    kept_algorithm += st.best[3] == 2;
  }
  EXPECT_GE(kept_algorithm, 34) << kept_algorithm << " of " << seeds;
}

}  // namespace
}  // namespace hvdtune::tuner
