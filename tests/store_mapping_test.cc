// The one knob <-> stored value mapping and the fingerprint builders that
// the runtime's store sink and hvd-tune share (hvdtune/store_mapping.h).
// cli_sweep (tools/tests) checks end to end that a sweep and a job of the
// same workload store under the same fingerprint.
#include "hvdtune/store_mapping.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "hvdtune/mpi.h"

namespace hvdtune {
namespace {

// A valid configuration other than the defaults: every knob at its upper
// bound where that is still valid, categorical knobs at their last choice.
KnobSettings NonDefault() {
  KnobSettings k;
  for (const KnobSpec& spec : KnobTable()) {
    if (spec.type == KnobType::kCategorical) {
      k.Set(spec.id, static_cast<double>(spec.choices.size() - 1));
    } else {
      KnobSettings trial = k;
      trial.Set(spec.id, spec.max_value);
      try {
        CheckKnobValues(trial);
        k = trial;
      } catch (const std::exception&) {
      }
    }
  }
  return k;
}

TEST(StoreMapping, EveryKnobRoundTripsByName) {
  for (const KnobSettings& k : {KnobSettings(), NonDefault()}) {
    const store::KnobValues stored = ToStored(k);
    EXPECT_EQ(stored.size(), KnobTable().size());
    std::string why;
    const auto back = FromStored(stored, KnobSettings(), &why);
    ASSERT_TRUE(back.has_value()) << why;
    EXPECT_EQ(*back, k) << k.ToString() << " came back as " << back->ToString();
  }
}

TEST(StoreMapping, CategoricalKnobsAreStoredByChoiceName) {
  const KnobSettings k = NonDefault();
  const store::KnobValues stored = ToStored(k);
  for (const KnobSpec& spec : KnobTable()) {
    if (spec.type != KnobType::kCategorical) continue;
    const auto& v = stored.at(std::string(spec.name));
    ASSERT_TRUE(std::holds_alternative<std::string>(v)) << spec.name;
    EXPECT_EQ(std::get<std::string>(v), spec.choices.back());
  }
}

TEST(StoreMapping, UnknownNamesAreIgnoredBadValuesRejectedWithTheReason) {
  store::KnobValues stored = ToStored(KnobSettings());
  stored["a_knob_of_a_later_version"] = std::int64_t{3};
  EXPECT_TRUE(FromStored(stored, KnobSettings()).has_value());

  const KnobSpec& algorithm = GetKnobSpec(KnobId::kAllreduceAlgorithm);
  stored[std::string(algorithm.name)] = std::string("bogus");
  std::string why;
  EXPECT_FALSE(FromStored(stored, KnobSettings(), &why).has_value());
  EXPECT_NE(why.find(algorithm.name), std::string::npos) << why;
  EXPECT_NE(why.find("bogus"), std::string::npos) << why;

  const KnobSpec& cycle = GetKnobSpec(KnobId::kCycleTime);
  stored = ToStored(KnobSettings());
  stored[std::string(cycle.name)] = cycle.max_value * 2;
  EXPECT_FALSE(FromStored(stored, KnobSettings(), &why).has_value());
  EXPECT_NE(why.find("outside"), std::string::npos) << why;
}

TEST(StoreMapping, TheModelIsItsTensorsInCompletionOrder) {
  const std::vector<StepTensor> step = {{DataType::kFloat32, 4000},
                                        {DataType::kFloat16, 64}};
  const std::vector<StepTensor> same_elements = {{DataType::kFloat32, 4000},
                                                 {DataType::kFloat16, 64}};
  const std::vector<StepTensor> reversed = {step[1], step[0]};
  EXPECT_EQ(StepModelFingerprint(step).Hash(),
            StepModelFingerprint(same_elements).Hash());
  EXPECT_NE(StepModelFingerprint(step).Hash(),
            StepModelFingerprint(reversed).Hash());
}

TEST(StoreMapping, HardwareNamesTheLayoutAndTheMpiLibrary) {
  const store::Fingerprint a = JobHardwareFingerprint(4, 2, 2);
  EXPECT_EQ(a.Hash(), JobHardwareFingerprint(4, 2, 2).Hash());
  EXPECT_NE(a.Hash(), JobHardwareFingerprint(4, 4, 1).Hash());
  EXPECT_EQ(a.Get("world_size"), "4");
  EXPECT_EQ(a.Get("mpi"), MpiLibraryVersion());
  EXPECT_FALSE(MpiLibraryVersion().empty());
  EXPECT_EQ(MpiLibraryVersion().find(','), std::string::npos);
}

}  // namespace
}  // namespace hvdtune
