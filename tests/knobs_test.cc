#include "hvdtune/knobs.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string_view>
#include <utility>
#include <vector>

#include "hvdtune/config.h"
#include "hvdtune/status.h"
#include "test_env.h"

namespace hvdtune {
namespace {

using testing_util::MapEnv;

std::string ConfigErrorOf(std::map<std::string, std::string> vars) {
  try {
    ParseConfig(MapEnv(std::move(vars)));
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(KnobTable, IdsNamesAndEnvAreUniqueAndDefaultsInRange) {
  std::set<std::string_view> names, envs;
  for (int i = 0; i < kNumKnobs; ++i) {
    const KnobSpec& spec = KnobTable()[i];
    EXPECT_EQ(static_cast<int>(spec.id), i);
    EXPECT_TRUE(names.insert(spec.name).second) << spec.name;
    EXPECT_TRUE(envs.insert(spec.env).second) << spec.env;
    EXPECT_GE(spec.default_value, spec.min_value) << spec.name;
    EXPECT_LE(spec.default_value, spec.max_value) << spec.name;
    EXPECT_GE(spec.tune_min, spec.min_value) << spec.name;
    EXPECT_LE(spec.tune_max, spec.max_value) << spec.name;
    EXPECT_LE(spec.tune_min, spec.tune_max) << spec.name;
    EXPECT_FALSE(spec.description.empty()) << spec.name;
    EXPECT_EQ(FindKnob(spec.name), spec.id);
    if (spec.scale == KnobScale::kLog) {
      EXPECT_GT(spec.tune_min, 0);
    }
  }
  EXPECT_EQ(FindKnob("no_such_knob"), std::nullopt);
}

TEST(KnobTable, HorovodDefaults) {
  const KnobSettings d;
  EXPECT_EQ(d.fusion_threshold_bytes(), 128 * 1024 * 1024);
  EXPECT_DOUBLE_EQ(d.cycle_time_ms(), 1.0);
  EXPECT_EQ(d.cache_capacity(), 1024);
  EXPECT_EQ(d.allreduce_algorithm_name(), "native");
  EXPECT_EQ(d.ToString(),
            "fusion_threshold=134217728 cycle_time=1 cache_capacity=1024 "
            "allreduce_algorithm=native ring_segment_bytes=1048576 "
            "hierarchical_allgather=false num_groups=0 "
            "pipeline_chunk_bytes=4194304 hierarchical_chunk_bytes=0 "
            "cycle_thread_boost=0");
}

TEST(KnobParsing, UnsetVariablesKeepDefaultsAndStayTunable) {
  const KnobConfig c = ParseKnobsFromEnv(MapEnv({}));
  EXPECT_EQ(c.values, KnobSettings());
  for (bool p : c.pinned) EXPECT_FALSE(p);
}

TEST(KnobParsing, SetVariablesArePinned) {
  const KnobConfig c = ParseKnobsFromEnv(MapEnv({
      {"HOROVOD_FUSION_THRESHOLD", "0"},
      {"HOROVOD_CYCLE_TIME", "2.5"},
      {"HVDTUNE_ALLREDUCE_ALGORITHM", "native"},
  }));
  EXPECT_EQ(c.values.fusion_threshold_bytes(), 0);
  EXPECT_DOUBLE_EQ(c.values.cycle_time_ms(), 2.5);
  EXPECT_TRUE(c.pinned[static_cast<int>(KnobId::kFusionThreshold)]);
  EXPECT_TRUE(c.pinned[static_cast<int>(KnobId::kCycleTime)]);
  EXPECT_TRUE(c.pinned[static_cast<int>(KnobId::kAllreduceAlgorithm)]);
  EXPECT_FALSE(c.pinned[static_cast<int>(KnobId::kCacheCapacity)]);
}

TEST(KnobParsing, BadValuesNameVariableValueAndWhatIsAllowed) {
  struct Case {
    const char* var;
    const char* value;
    const char* allowed;
  };
  const Case cases[] = {
      {"HOROVOD_FUSION_THRESHOLD", "abc", "an integer from 0 to"},
      {"HOROVOD_FUSION_THRESHOLD", "-5", "an integer from 0 to"},
      {"HOROVOD_FUSION_THRESHOLD", "1e99", "an integer from 0 to"},
      {"HOROVOD_FUSION_THRESHOLD", "12abc", "an integer"},
      {"HOROVOD_FUSION_THRESHOLD", "", "an integer"},
      {"HOROVOD_FUSION_THRESHOLD", "99999999999999999999999", "an integer"},
      {"HOROVOD_CYCLE_TIME", "0", "greater than 0"},
      {"HOROVOD_CYCLE_TIME", "-1", "greater than 0"},
      {"HOROVOD_CYCLE_TIME", "1e99", "greater than 0"},
      {"HOROVOD_CYCLE_TIME", "nan", "greater than 0"},
      {"HOROVOD_CYCLE_TIME", "fast", "greater than 0"},
      {"HOROVOD_CACHE_CAPACITY", "-1", "an integer from 0"},
      {"HVDTUNE_ALLREDUCE_ALGORITHM", "butterfly", "one of: native"},
      {"HVDTUNE_RANKS_PER_NODE", "0", "an integer from 1"},
      {"HVDTUNE_CYCLE_THREAD_SLICE_US", "50", "100 - 100000"},
      {"HVDTUNE_CYCLE_THREAD_SLICE_US", "-1", "an integer from 0"},
      {"HVDTUNE_CYCLE_THREAD_SLICE_US", "200000", "an integer from 0"},
      {"HVDTUNE_CYCLE_THREAD_BOOST", "-1", "an integer from 0 to 39"},
      {"HVDTUNE_CYCLE_THREAD_BOOST", "40", "an integer from 0 to 39"},
      {"HVDTUNE_CYCLE_THREAD_BOOST", "high", "an integer from 0 to 39"},
  };
  for (const Case& c : cases) {
    const std::string msg = ConfigErrorOf({{c.var, c.value}});
    EXPECT_NE(msg.find(c.var), std::string::npos) << msg;
    EXPECT_NE(msg.find(std::string("'") + c.value + "'"), std::string::npos)
        << msg;
    EXPECT_NE(msg.find(c.allowed), std::string::npos) << msg;
  }
}

TEST(KnobParsing, AcceptsSurroundingBlanksAndFractionalCycleTime) {
  const KnobConfig c = ParseKnobsFromEnv(MapEnv({
      {"HOROVOD_FUSION_THRESHOLD", " 67108864 "},
      {"HOROVOD_CYCLE_TIME", "0.25"},
  }));
  EXPECT_EQ(c.values.fusion_threshold_bytes(), 64 << 20);
  EXPECT_DOUBLE_EQ(c.values.cycle_time_ms(), 0.25);
}

TEST(KnobParsing, BoolSetting) {
  EXPECT_TRUE(ParseBoolSetting("X", "1"));
  EXPECT_TRUE(ParseBoolSetting("X", "true"));
  EXPECT_FALSE(ParseBoolSetting("X", "0"));
  EXPECT_THROW(ParseBoolSetting("X", "yes please"), ConfigError);
}

TEST(KnobSettings, FormatValue) {
  KnobSettings s;
  s.Set(KnobId::kCycleTime, 0.5);
  EXPECT_EQ(s.FormatValue(KnobId::kCycleTime), "0.5");
  EXPECT_EQ(s.FormatValue(KnobId::kFusionThreshold), "134217728");
  EXPECT_EQ(s.FormatValue(KnobId::kAllreduceAlgorithm), "native");
}

}  // namespace
}  // namespace hvdtune

namespace hvdtune {
namespace {

// docs/configuration.md holds the configuration reference generated from the
// knob table and the settings list, between its config-reference markers,
// and must equal it exactly. To regenerate it after changing either:
//   HVDTUNE_UPDATE_DOCS=1 build/tests/unit_tests
//     --gtest_filter=ConfigReference.DocsPageIsGenerated
TEST(ConfigReference, DocsPageIsGenerated) {
  const std::string path = HVDTUNE_SOURCE_DIR "/docs/configuration.md";
  std::ifstream in(path);
  ASSERT_TRUE(in) << "cannot read " << path;
  std::stringstream buf;
  buf << in.rdbuf();
  std::string page = buf.str();
  const std::string begin = "<!-- config-reference:begin -->\n";
  const std::string end = "<!-- config-reference:end -->";
  const std::size_t a = page.find(begin);
  const std::size_t b = page.find(end);
  ASSERT_NE(a, std::string::npos) << path << " has no " << begin;
  ASSERT_NE(b, std::string::npos) << path << " has no " << end;
  const std::string current =
      page.substr(a + begin.size(), b - a - begin.size());
  const std::string generated = ConfigReferenceMarkdown();
  if (current != generated && std::getenv("HVDTUNE_UPDATE_DOCS")) {
    page.replace(a + begin.size(), b - a - begin.size(), generated);
    std::ofstream(path) << page;
    return;
  }
  EXPECT_EQ(current, generated)
      << path << " differs from the knob table and the settings list; "
      << "regenerate it with HVDTUNE_UPDATE_DOCS=1 (see this test)";
}

// The reference documents exactly what ParseConfig reads: every HOROVOD_* /
// HVDTUNE_* variable it asks for is a knob or a listed setting, and every
// knob and listed setting (but those hvdtune sets for Open MPI) is asked for.
TEST(ConfigReference, ListsExactlyTheVariablesParseConfigReads) {
  std::set<std::string> asked;
  // On the Gloo engine, so that its launcher's variables are read too.
  const std::map<std::string, std::string> gloo = {
      {"HOROVOD_GLOO", "1"},
      {"HOROVOD_RANK", "0"},
      {"HOROVOD_SIZE", "2"},
      {"HOROVOD_GLOO_RENDEZVOUS_ADDR", "127.0.0.1"},
      {"HOROVOD_GLOO_RENDEZVOUS_PORT", "1"}};
  const EnvLookup recording =
      [&](std::string_view name) -> std::optional<std::string> {
    asked.insert(std::string(name));
    const auto it = gloo.find(std::string(name));
    if (it != gloo.end()) return it->second;
    return std::nullopt;
  };
  ParseConfig(recording);
  std::set<std::string> read;
  for (const std::string& name : asked) {
    if (name.rfind("HOROVOD_", 0) == 0 || name.rfind("HVDTUNE_", 0) == 0) {
      read.insert(name);
    }
  }
  std::set<std::string> documented;
  for (const KnobSpec& k : KnobTable()) documented.insert(std::string(k.env));
  for (const SettingSpec& s : SettingsTable()) {
    EXPECT_TRUE(documented.insert(std::string(s.env)).second)
        << s.env << " is listed twice";
    // Open MPI's own parameters, and the elastic launcher's (hvd-tune run
    // reads them, not the runtime).
    if (s.section == "Open MPI" || s.section == "Elastic launcher") {
      EXPECT_EQ(read.count(std::string(s.env)), 0u)
          << s.env << " is read by ParseConfig: list it in its own section";
      documented.erase(std::string(s.env));
    }
  }
  EXPECT_EQ(read, documented);
}

TEST(KnobTable, MarkdownHasEveryField) {
  const std::string md = KnobTableMarkdown();
  EXPECT_NE(md.find("| fusion_threshold | `HOROVOD_FUSION_THRESHOLD` | "
                    "integer, bytes | 134217728 (128 MiB) | 0 – 16 GiB | "
                    "1 MiB – 256 MiB, log |"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("| cycle_time | `HOROVOD_CYCLE_TIME` | float, ms | 1 | "
                    "> 0 – 10000 | 0.2 – 50 ms, log |"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("on / off (only with more than one node)"),
            std::string::npos);
  EXPECT_NE(md.find("0 – 16, linear (only when the application groups)"),
            std::string::npos);
  EXPECT_NE(md.find("| pipeline_chunk_bytes |"), std::string::npos);
  EXPECT_NE(md.find("not tuned"), std::string::npos);
}

// HOROVOD_HIERARCHICAL_ALLREDUCE keeps Horovod's meaning and pins the
// algorithm knob; with HVDTUNE_ALLREDUCE_ALGORITHM the two must agree.
TEST(KnobParsing, HorovodHierarchicalAllreducePinsTheAlgorithm) {
  const KnobConfig on =
      ParseKnobsFromEnv(MapEnv({{"HOROVOD_HIERARCHICAL_ALLREDUCE", "1"}}));
  EXPECT_EQ(on.values.allreduce_algorithm_name(), "hierarchical");
  EXPECT_TRUE(on.pinned[static_cast<int>(KnobId::kAllreduceAlgorithm)]);
  const KnobConfig off =
      ParseKnobsFromEnv(MapEnv({{"HOROVOD_HIERARCHICAL_ALLREDUCE", "0"}}));
  EXPECT_EQ(off.values.allreduce_algorithm_name(), "native");
  EXPECT_TRUE(off.pinned[static_cast<int>(KnobId::kAllreduceAlgorithm)]);
  // Agreeing settings are accepted; "not hierarchical" allows ring.
  EXPECT_EQ(ParseKnobsFromEnv(
                MapEnv({{"HOROVOD_HIERARCHICAL_ALLREDUCE", "true"},
                        {"HVDTUNE_ALLREDUCE_ALGORITHM", "hierarchical"}}))
                .values.allreduce_algorithm_name(),
            "hierarchical");
  EXPECT_EQ(ParseKnobsFromEnv(MapEnv({{"HOROVOD_HIERARCHICAL_ALLREDUCE", "0"},
                                      {"HVDTUNE_ALLREDUCE_ALGORITHM", "ring"}}))
                .values.allreduce_algorithm_name(),
            "ring");
  EXPECT_EQ(ParseKnobsFromEnv(MapEnv({{"HVDTUNE_ALLREDUCE_ALGORITHM", "ring"}}))
                .values.allreduce_algorithm_name(),
            "ring");
}

TEST(KnobParsing, HorovodHierarchicalAllreduceConflictNamesBothVariables) {
  for (const auto& [horovod, hvdtune] :
       std::vector<std::pair<std::string, std::string>>{
           {"1", "ring"}, {"1", "native"}, {"0", "hierarchical"}}) {
    const std::string msg =
        ConfigErrorOf({{"HOROVOD_HIERARCHICAL_ALLREDUCE", horovod},
                       {"HVDTUNE_ALLREDUCE_ALGORITHM", hvdtune}});
    EXPECT_NE(msg.find("HOROVOD_HIERARCHICAL_ALLREDUCE=" + horovod),
              std::string::npos)
        << msg;
    EXPECT_NE(msg.find("HVDTUNE_ALLREDUCE_ALGORITHM=" + hvdtune),
              std::string::npos)
        << msg;
  }
  const std::string bad =
      ConfigErrorOf({{"HOROVOD_HIERARCHICAL_ALLREDUCE", "yes"}});
  EXPECT_NE(bad.find("HOROVOD_HIERARCHICAL_ALLREDUCE"), std::string::npos)
      << bad;
  EXPECT_NE(bad.find("'yes'"), std::string::npos) << bad;
}

// The algorithm knob's choices are the registry's, in registry order.
TEST(KnobTable, AlgorithmChoicesComeFromTheRegistry) {
  const KnobSpec& spec = GetKnobSpec(KnobId::kAllreduceAlgorithm);
  const auto registry = AllreduceAlgorithms();
  ASSERT_EQ(spec.choices.size(), registry.size());
  for (std::size_t i = 0; i < registry.size(); ++i) {
    EXPECT_EQ(spec.choices[i], registry[i]);
  }
  EXPECT_EQ(spec.max_value, static_cast<double>(registry.size() - 1));
  EXPECT_EQ(registry.front(), "native");  // the default
}

TEST(KnobTable, StallSettingsParseStrictly) {
  const RuntimeConfig c =
      ParseConfig(MapEnv({{"HOROVOD_STALL_CHECK_TIME_SECONDS", "5"},
                          {"HOROVOD_STALL_SHUTDOWN_TIME_SECONDS", "10"}}));
  EXPECT_EQ(c.settings.stall_check_seconds, 5);
  EXPECT_EQ(c.settings.stall_shutdown_seconds, 10);
  const RuntimeConfig d = ParseConfig(MapEnv({}));
  EXPECT_EQ(d.settings.stall_check_seconds, 60);  // Horovod's default
  EXPECT_EQ(d.settings.stall_shutdown_seconds, 0);
  const std::string bad =
      ConfigErrorOf({{"HOROVOD_STALL_CHECK_TIME_SECONDS", "soon"}});
  EXPECT_NE(bad.find("HOROVOD_STALL_CHECK_TIME_SECONDS"), std::string::npos);
}

}  // namespace
}  // namespace hvdtune
