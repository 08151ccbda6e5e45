// The benches' command-line validators, JSON rows and thread floor worker,
// without MPI.

#include "bench_common.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <limits>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "hvdtune/workloads/builtin.h"
#include "thread_handoff.h"

namespace hvdtune::bench {
using workloads::kManySmallElements;
using workloads::LoadBuiltinWorkload;
using workloads::ManySmallTensors;
using workloads::TensorSpec;

namespace {

// Parses `args` (after the program name) with `app`; returns the
// UsageError's message, or "" when parsing succeeded.
std::string Parse(CLI::App& app, std::vector<std::string> args) {
  std::vector<char*> argv = {const_cast<char*>("bench")};
  for (std::string& a : args) argv.push_back(a.data());
  try {
    // Rank 1: --help would not print.
    ParseFlags(app, static_cast<int>(argv.size()), argv.data(), 1);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

TEST(ByteCount, AcceptsSuffixesInPowersOf1024) {
  std::int64_t bytes = 0;
  CLI::App app;
  ConfigureApp(app);
  app.add_option("--min-bytes", bytes)
      ->transform(ByteCount(1, std::int64_t{1} << 34));
  const std::vector<std::pair<std::string, std::int64_t>> cases = {
      {"4096", 4096},  {"4K", 4096},        {"4k", 4096}, {"16M", 16 << 20},
      {"1G", 1 << 30}, {"16G", 16LL << 30}, {"010", 10},  {"1", 1}};
  for (const auto& [text, want] : cases) {
    EXPECT_EQ(Parse(app, {"--min-bytes", text}), "") << text;
    EXPECT_EQ(bytes, want) << text;
  }
}

TEST(ByteCount, RejectionNamesTheFlagAndTheValue) {
  std::int64_t bytes = 0;
  CLI::App app;
  ConfigureApp(app);
  app.add_option("--min-bytes", bytes)
      ->transform(ByteCount(1, std::int64_t{1} << 34));
  for (const std::string text :
       {"4Q", "K", "-4K", "1.5G", "4 K", "0x10", "99999999999999999999"}) {
    EXPECT_NE(Parse(app, {"--min-bytes=" + text})
                  .find("--min-bytes: invalid value '" + text + "'"),
              std::string::npos)
        << text;
  }
  EXPECT_EQ(Parse(app, {"--min-bytes", "4Q"}),
            "--min-bytes: invalid value '4Q' (expected a byte count such as "
            "4096, 4K, 16M or 1G)");
  EXPECT_EQ(Parse(app, {"--min-bytes", "0"}),
            "--min-bytes: invalid value '0' (expected 1 B to 16 GiB)");
  EXPECT_EQ(Parse(app, {"--min-bytes", "17G"}),
            "--min-bytes: invalid value '17G' (expected 1 B to 16 GiB)");
  // 2^64 / 1024^3 + 1: the product would overflow.
  EXPECT_EQ(Parse(app, {"--min-bytes", "17179869185G"}),
            "--min-bytes: invalid value '17179869185G' (expected 1 B to 16 "
            "GiB)");
}

TEST(IntIn, ReadsDecimalAndChecksRange) {
  std::int64_t steps = 0;
  std::vector<std::int64_t> tensors;
  CLI::App app;
  ConfigureApp(app);
  app.add_option("--steps", steps)->transform(IntIn(1, 100));
  app.add_option("--tensors", tensors)->delimiter(',')->transform(IntIn(1, 9));
  EXPECT_EQ(Parse(app, {"--steps", "010"}), "");
  EXPECT_EQ(steps, 10);  // not octal
  EXPECT_EQ(Parse(app, {"--steps", "3", "--steps=4"}), "");
  EXPECT_EQ(steps, 4);  // the last one wins
  EXPECT_EQ(Parse(app, {"--steps", "0"}),
            "--steps: invalid value '0' (expected an integer in [1, 100])");
  EXPECT_EQ(Parse(app, {"--steps", "5x"}),
            "--steps: invalid value '5x' (expected an integer in [1, 100])");
  EXPECT_EQ(Parse(app, {"--steps", "0x10"}),
            "--steps: invalid value '0x10' (expected an integer in [1, 100])");
  EXPECT_EQ(Parse(app, {"--tensors", "1,2,3"}), "");
  EXPECT_EQ(tensors, (std::vector<std::int64_t>{1, 2, 3}));
  EXPECT_EQ(Parse(app, {"--tensors", "1,x"}),
            "--tensors: invalid value 'x' (expected an integer in [1, 9])");
}

TEST(NumberIn, RejectsNonFiniteAndHonoursAnExclusiveMinimum) {
  double scale = 0;
  CLI::App app;
  ConfigureApp(app);
  app.add_option("--scale", scale)->transform(NumberIn(0.0, 1.0, true));
  EXPECT_EQ(Parse(app, {"--scale", "0.25"}), "");
  EXPECT_EQ(scale, 0.25);
  EXPECT_EQ(Parse(app, {"--scale", "1e-3"}), "");
  EXPECT_EQ(scale, 1e-3);
  for (const std::string text : {"0", "nan", "inf", "1.5", "-0.5", "x"}) {
    EXPECT_EQ(
        Parse(app, {"--scale", text}),
        "--scale: invalid value '" + text + "' (expected a number in (0, 1])")
        << text;
  }
}

TEST(AllreduceAlgorithm, UnknownNameListsThisBuildsAlgorithms) {
  const std::vector<std::string> names = AllreduceAlgorithmNames();
  ASSERT_FALSE(names.empty());
  EXPECT_EQ(names.front(), "native");
  std::vector<std::string> algorithms;
  CLI::App app;
  ConfigureApp(app);
  app.add_option("--algorithms", algorithms)
      ->delimiter(',')
      ->check(AllreduceAlgorithm());
  EXPECT_EQ(Parse(app, {"--algorithms", names.back()}), "");
  EXPECT_EQ(algorithms, std::vector<std::string>{names.back()});
  std::string listed;
  for (const std::string& name : names) listed += " " + name;
  EXPECT_EQ(Parse(app, {"--algorithms", "native,bogus"}),
            "--algorithms: unknown allreduce algorithm 'bogus' (this build "
            "has:" +
                listed + ")");
}

TEST(ParseFlags, HelpUnknownFlagsAndSwitches) {
  bool json = false;
  CLI::App app;
  ConfigureApp(app);
  app.add_flag("--json", json);
  std::vector<char*> help = {const_cast<char*>("bench"),
                             const_cast<char*>("--help")};
  EXPECT_FALSE(ParseFlags(app, 2, help.data(), 1));
  EXPECT_NE(Parse(app, {"--bogus"}).find("--bogus"), std::string::npos);
  EXPECT_NE(Parse(app, {"--json=0"}), "");  // a switch takes no value
  EXPECT_EQ(Parse(app, {"--json"}), "");
  EXPECT_TRUE(json);
}

TEST(JsonLine, KeepsKeyOrderAndTypes) {
  const Json row = {{"workload", "resnet50"},
                    {"bytes", std::int64_t{4096}},
                    {"ok", true},
                    {"names", std::vector<std::string>{"a", "b"}},
                    {"config", {{"z", 1}, {"a", 2}}}};
  EXPECT_EQ(JsonLine(row), R"({"workload":"resnet50","bytes":4096,"ok":true,)"
                           R"("names":["a","b"],"config":{"z":1,"a":2}})");
}

TEST(JsonLine, NumbersKeepSixSignificantDigitsAndNonFiniteIsNull) {
  const Json row = {{"a", 1234.56789},
                    {"b", 0.000123456789},
                    {"c", 2.0},
                    {"d", std::numeric_limits<double>::quiet_NaN()},
                    {"e", std::numeric_limits<double>::infinity()},
                    {"f", std::int64_t{1} << 40},
                    {"g", {{"h", 1.0 / 3.0}}}};
  EXPECT_EQ(JsonLine(row),
            R"({"a":1234.57,"b":0.000123457,"c":2.0,"d":null,"e":null,)"
            R"("f":1099511627776,"g":{"h":0.333333}})");
}

TEST(JsonLine, AnyStringGivesValidJson) {
  const std::vector<std::string> texts = {
      "quote \" backslash \\ slash /",
      "tab\tnewline\ncarriage\rbell\a nul" + std::string(1, '\0') + "end",
      "\x01\x1f\x7f",
      "noël 形状 🙂",
      "/data/odd \"shapes\" \\ file.txt",
  };
  for (const std::string& text : texts) {
    const std::string line = JsonLine({{"workload", text}});
    for (const char c : line) {
      EXPECT_GE(static_cast<unsigned char>(c), 0x20) << line;
    }
    const nlohmann::json parsed = nlohmann::json::parse(line);
    EXPECT_EQ(parsed.at("workload").get<std::string>(), text);
  }
  // Bytes that are not UTF-8 (a Latin-1 file name) become U+FFFD.
  const std::string line = JsonLine({{"workload", "caf\xe9.txt"}});
  EXPECT_EQ(nlohmann::json::parse(line).at("workload").get<std::string>(),
            "caf\xef\xbf\xbd.txt");
}

// fusion_bench --many-small-count: the same elements in any count of
// tensors, as evenly as they split, with distinct names.
TEST(ManySmall, SplitsTheSameElementsIntoAnyCountOfTensors) {
  const std::vector<TensorSpec> standard = ManySmallTensors("--n", 1000);
  ASSERT_EQ(standard.size(), 1000u);
  for (const TensorSpec& t : standard) EXPECT_EQ(t.count, 1024);
  EXPECT_EQ(LoadBuiltinWorkload("--w", "many-small", "").size(), 1000u);
  for (const std::int64_t count : {1, 7, 100, 999}) {
    const std::vector<TensorSpec> tensors = ManySmallTensors("--n", count);
    ASSERT_EQ(tensors.size(), static_cast<std::size_t>(count));
    std::int64_t total = 0, least = tensors[0].count, most = least;
    std::set<std::string> names;
    for (const TensorSpec& t : tensors) {
      total += t.count;
      least = std::min(least, t.count);
      most = std::max(most, t.count);
      names.insert(t.name);
    }
    EXPECT_EQ(total, kManySmallElements) << count;
    EXPECT_LE(most - least, 1) << count;
    EXPECT_EQ(names.size(), tensors.size()) << count;
  }
  try {
    ManySmallTensors("--many-small-count", 0);
    ADD_FAILURE() << "0 tensors accepted";
  } catch (const UsageError& e) {
    EXPECT_EQ(std::string(e.what()),
              "--many-small-count: 0 tensors (expected 1 to 1024000)");
  }
}

// The thread floor's worker: each Call() runs the work once, on the
// worker's thread, and returns only after it has finished.
TEST(ThreadHandoff, RunsEachCallOnceOnItsThreadAndWaitsForIt) {
  std::atomic<int> runs{0};
  std::atomic<bool> on_caller{false};
  const std::thread::id caller = std::this_thread::get_id();
  {
    ThreadHandoff worker([&] {
      if (std::this_thread::get_id() == caller) on_caller = true;
      std::this_thread::sleep_for(std::chrono::microseconds(200));
      runs.fetch_add(1);
    });
    for (int i = 1; i <= 50; ++i) {
      worker.Call();
      ASSERT_EQ(runs.load(), i);
    }
  }
  EXPECT_EQ(runs.load(), 50);
  EXPECT_FALSE(on_caller.load());
}

}  // namespace
}  // namespace hvdtune::bench
