// The elastic launcher's bookkeeping without processes: discovery output,
// the composition of the next world, ranks' placement, hosts changes and
// the world's text in the store.
#include "elastic_world.h"

#include <gtest/gtest.h>

#include "common.h"
#include "elastic_discovery.h"

namespace hvdtune::cli {
namespace {

Worker Running(const std::string& id, const std::string& host, int rank) {
  Worker w;
  w.id = id;
  w.host = host;
  w.rank = rank;
  return w;
}

std::string Ids(const std::vector<Member>& members) {
  std::string out;
  for (const Member& m : members) {
    out += (out.empty() ? "" : " ") + (m.fresh ? "new@" + m.host : m.id);
  }
  return out;
}

TEST(ElasticDiscovery, ParsesHostsAndSlots) {
  const Hosts hosts = ParseDiscoveryOutput(" a:2\n\nb\r\na:5\n c:1 \n", 3);
  EXPECT_EQ(hosts, (Hosts{{"a", 2}, {"b", 3}, {"c", 1}}));
  EXPECT_EQ(JoinHosts(hosts), "a:2,b:3,c:1");
  EXPECT_EQ(JoinHosts({}, "none"), "none");
  for (const char* bad : {"a:0\n", "a:x\n", "a b\n", ":2\n", "a:\n"}) {
    EXPECT_THROW(ParseDiscoveryOutput(bad, 1), Failure) << bad;
  }
}

TEST(ElasticWorld, SurvivorsFirstThenNewRanksOnFreeSlots) {
  std::map<pid_t, Worker> workers = {{10, Running("w0", "a", 0)},
                                     {11, Running("w1", "a", 1)},
                                     {12, Running("w2", "b", 2)},
                                     {13, Running("w3", "b", 3)}};
  workers[12].retired = true;  // b's rank 2 failed
  Blacklist blacklist({});
  const Hosts hosts = {{"c", 2}, {"a", 2}, {"b", 2}};
  // Rank order kept, grouped by host (survivors' hosts first); new ranks
  // fill the free slots in the order the script printed the hosts.
  EXPECT_EQ(Ids(ComposeWorld(workers, hosts, blacklist, 2, 8)),
            "w0 w1 w3 new@b new@c new@c");
  EXPECT_EQ(Ids(ComposeWorld(workers, hosts, blacklist, 2, 4)),
            "w0 w1 w3 new@c");
  // A blacklisted host gets no ranks, and its running ones are left out.
  blacklist.Add("b", "a test");
  EXPECT_FALSE(blacklist.Usable("b"));
  EXPECT_EQ(Ids(ComposeWorld(workers, hosts, blacklist, 2, 8)),
            "w0 w1 new@c new@c");
  // Fewer than --min-np: no world.
  EXPECT_TRUE(ComposeWorld(workers, {{"a", 2}}, blacklist, 3, 8).empty());
}

TEST(ElasticWorld, CooldownLetsAHostBack) {
  Blacklist blacklist({0, 0});
  blacklist.Add("a", "a test");
  EXPECT_TRUE(blacklist.Usable("a"));
  Blacklist forever({});
  forever.Add("a", "a test");
  EXPECT_FALSE(forever.Usable("a"));
}

TEST(ElasticWorld, PlacesRanksOnNodes) {
  const std::vector<Member> members = {
      {"w0", "a", false}, {"w1", "a", false}, {"w2", "b", false}};
  const std::vector<Placement> p = PlaceWorld(members);
  ASSERT_EQ(p.size(), 3u);
  EXPECT_EQ(p[1].rank, 1);
  EXPECT_EQ(p[1].local_rank, 1);
  EXPECT_EQ(p[1].local_size, 2);
  EXPECT_EQ(p[1].cross_size, 1);  // only a has a local rank 1
  EXPECT_EQ(p[2].local_rank, 0);
  EXPECT_EQ(p[2].cross_rank, 1);
  EXPECT_EQ(p[2].cross_size, 2);
  EXPECT_EQ(WorldLayout(members), "a:2,b:1");
  EXPECT_EQ(WorldText(3, 1, ResetCause::kHostUnreachable, members, p),
            "world 3 updates 1 cause host_unreachable\n"
            "w0 0 3 0 2 0 2 a\n"
            "w1 1 3 1 2 0 1 a\n"
            "w2 2 3 0 1 1 2 b\n");
}

TEST(ElasticWorld, HostsChangeNamesItsKind) {
  const std::map<pid_t, Worker> workers = {{10, Running("w0", "a", 0)},
                                           {11, Running("w1", "b", 1)}};
  const Blacklist none({});
  EXPECT_EQ(HostsChange(workers, {{"a", 1}, {"b", 1}}, none, true),
            std::nullopt);
  EXPECT_EQ(HostsChange(workers, {{"a", 1}, {"b", 1}, {"c", 1}}, none, true),
            ResetCause::kHostsAdded);
  // At --max-np a new host changes nothing.
  EXPECT_EQ(HostsChange(workers, {{"a", 1}, {"b", 1}, {"c", 1}}, none, false),
            std::nullopt);
  EXPECT_EQ(HostsChange(workers, {{"a", 1}}, none, true),
            ResetCause::kHostsRemoved);
  EXPECT_EQ(HostsChange(workers, {{"a", 1}, {"c", 1}}, none, true),
            ResetCause::kHostsChanged);
  EXPECT_STREQ(ResetCauseName(ResetCause::kHostsChanged), "hosts_changed");
}

TEST(ElasticWorld, ChecksTheFlags) {
  ElasticOptions e;
  EXPECT_EQ(CheckElasticOptions(4, e), std::make_pair(4, 1 << 20));
  e.min_np = 2;
  e.max_np = 3;
  EXPECT_THROW(CheckElasticOptions(4, e), UsageError);  // -np above max
  e.max_np = 8;
  EXPECT_EQ(CheckElasticOptions(4, e), std::make_pair(2, 8));
  e.cooldown_range = {5, 1};
  EXPECT_THROW(CheckElasticOptions(4, e), UsageError);
  e.cooldown_range = {1, 5};
  e.slots = 0;
  EXPECT_THROW(CheckElasticOptions(4, e), UsageError);
  e.slots = 1;
  e.start_timeout = 0;
  EXPECT_THROW(CheckElasticOptions(4, e), UsageError);
  e.start_timeout = 3;
  EXPECT_EQ(CheckElasticOptions(4, e), std::make_pair(2, 8));
}

}  // namespace
}  // namespace hvdtune::cli
