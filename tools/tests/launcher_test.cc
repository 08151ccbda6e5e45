// hvd-tune run's launcher: what reaches mpirun's command line, what is
// printed of a store location, and the Prometheus targets it lists.
#include "launcher.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "common.h"

namespace hvdtune::cli {
namespace {

bool Has(const std::vector<std::string>& argv, const std::string& word) {
  return std::find(argv.begin(), argv.end(), word) != argv.end();
}

bool Mentions(const std::vector<std::string>& argv, const std::string& text) {
  return std::any_of(argv.begin(), argv.end(), [&](const std::string& a) {
    return a.find(text) != std::string::npos;
  });
}

LaunchOptions Job(int np) {
  LaunchOptions opt;
  opt.np = np;
  opt.command = {"./train"};
  return opt;
}

TEST(RedactedLocation, ReplacesEveryPasswordAndNothingElse) {
  EXPECT_EQ(RedactedLocation("postgresql://u:s3cret@db:5432/x?sslmode=require"),
            "postgresql://u:***@db:5432/x?sslmode=require");
  EXPECT_EQ(RedactedLocation("postgres://u:p%40ss@db/x"),
            "postgres://u:***@db/x");
  EXPECT_EQ(
      RedactedLocation("postgresql://u@db/x?password=pw&connect_timeout=2"),
      "postgresql://u@db/x?password=***&connect_timeout=2");
  EXPECT_EQ(RedactedLocation("postgresql://u:a@db/x?password=b"),
            "postgresql://u:***@db/x?password=***");
  EXPECT_EQ(RedactedLocation("postgresql://u@db:5432/x"),
            "postgresql://u@db:5432/x");
  EXPECT_EQ(RedactedLocation("postgresql://db:5432/x"),
            "postgresql://db:5432/x");
  EXPECT_EQ(RedactedLocation("/home/u/store.db"), "/home/u/store.db");
  EXPECT_EQ(RedactedLocation("/tmp/a:b@c/store.db"), "/tmp/a:b@c/store.db");
}

TEST(MaskPasswordArguments, OverwritesThePasswordInPlace) {
  std::string a0 = "hvd-tune", a1 = "--db=postgresql://u:topsecret@h/x",
              a2 = "postgres://v:other@h/y?password=third", a3 = "plain";
  std::vector<char*> argv = {a0.data(), a1.data(), a2.data(), a3.data()};
  MaskPasswordArguments(4, argv.data());
  EXPECT_STREQ(argv[1], "--db=postgresql://u:*********@h/x");
  EXPECT_STREQ(argv[2], "postgres://v:*****@h/y?password=*****");
  EXPECT_STREQ(argv[3], "plain");
}

TEST(BuildLaunch, TheStoreLocationGoesByNameNeverOnTheCommandLine) {
  LaunchHost host;
  host.environ = {"HVDTUNE_ALLREDUCE_ALGORITHM=ring", "PATH=/bin"};
  LaunchOptions opt = Job(2);
  opt.autotune = true;
  opt.db = "postgresql://job:pw-from-flag@db:5432/hvdtune";
  const Launch l = BuildLaunch(opt, host);
  EXPECT_TRUE(Has(l.argv, "HOROVOD_AUTOTUNE_DB"));
  EXPECT_TRUE(Has(l.argv, "HVDTUNE_ALLREDUCE_ALGORITHM"));  // by name too
  EXPECT_TRUE(Has(l.argv, "HOROVOD_AUTOTUNE=1"));
  EXPECT_FALSE(Mentions(l.argv, "pw-from-flag"));
  ASSERT_EQ(l.environment.size(), 1u);
  EXPECT_EQ(l.environment[0].first, "HOROVOD_AUTOTUNE_DB");
  EXPECT_EQ(l.environment[0].second, opt.db);
  const std::string shown = DisplayCommand(l);
  EXPECT_EQ(shown.find("pw-from-flag"), std::string::npos) << shown;
  EXPECT_NE(shown.find("HOROVOD_AUTOTUNE_DB='postgresql://job:***@db:5432/"),
            std::string::npos)
      << shown;

  // From the environment: by name, nothing to set, nothing printed of it.
  host.environ.push_back("HOROVOD_AUTOTUNE_DB=postgresql://job:pw-env@db/x");
  const Launch e = BuildLaunch(Job(2), host);
  EXPECT_TRUE(Has(e.argv, "HOROVOD_AUTOTUNE_DB"));
  EXPECT_FALSE(Mentions(e.argv, "pw-env"));
  EXPECT_TRUE(e.environment.empty());
  EXPECT_EQ(DisplayCommand(e).find("pw-env"), std::string::npos);
}

TEST(BuildLaunch, PrometheusTargetsListEveryRankByHost) {
  LaunchHost host;
  host.hostname = "here";
  LaunchOptions opt = Job(3);
  opt.metrics_port = 9400;
  opt.prometheus_targets = "/tmp/t.json";
  Launch l = BuildLaunch(opt, host);
  EXPECT_EQ(l.targets,
            (std::vector<std::string>{"127.0.0.1:9400", "127.0.0.1:9401",
                                      "127.0.0.1:9402"}));
  const Json doc = Json::parse(l.targets_text);
  ASSERT_EQ(doc.size(), 1u);
  EXPECT_EQ(doc[0]["labels"]["node"], "127.0.0.1");

  host.environ = {"HVDTUNE_METRICS_ADDRESS=0.0.0.0"};
  EXPECT_EQ(BuildLaunch(opt, host).targets.front(), "here:9400");
  opt.np = 3;
  opt.hosts = "a:2,b:2";
  l = BuildLaunch(opt, host);
  EXPECT_EQ(l.targets,
            (std::vector<std::string>{"a:9400", "a:9401", "b:9400"}));
  EXPECT_EQ(Json::parse(l.targets_text).size(), 2u);

  host.environ = {"HVDTUNE_METRICS_ADDRESS=::1"};
  opt.hosts.clear();
  EXPECT_EQ(BuildLaunch(opt, host).targets.front(), "[::1]:9400");
}

TEST(BuildLaunch, PrometheusTargetsThatCannotBeKnownAreRefused) {
  LaunchHost host;
  LaunchOptions opt = Job(4);
  opt.prometheus_targets = "/tmp/t.json";
  EXPECT_THROW(BuildLaunch(opt, host), UsageError);  // no port
  opt.metrics_port = 0;
  EXPECT_THROW(BuildLaunch(opt, host), UsageError);  // any free port
  opt.metrics_port = 9400;
  opt.fake_nodes = 2;
  EXPECT_THROW(BuildLaunch(opt, host), UsageError);
  opt.fake_nodes = 0;
  opt.hosts = "a:2,b:2";
  EXPECT_THROW(BuildLaunch(opt, host), UsageError);  // binds 127.0.0.1
  host.environ = {"HVDTUNE_METRICS_ADDRESS=0.0.0.0"};
  opt.np = 5;
  EXPECT_THROW(BuildLaunch(opt, host), UsageError);  // more ranks than slots
  opt.np = 4;
  EXPECT_NO_THROW(BuildLaunch(opt, host));
}

}  // namespace
}  // namespace hvdtune::cli
