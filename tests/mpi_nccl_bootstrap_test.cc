// The NCCL backend's bootstrap, the part that needs no GPU: each group's
// rank 0 hands a unique id's worth of bytes to its other members, and the
// ranks agree on every rank's outcome. On the engine of the run: over MPI's
// communicators, or (HVDTUNE_TEST_ENGINE=gloo) over Gloo's contexts and the
// rendezvous store, with no MPI call at all.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "core/backends/nccl/nccl_bootstrap.h"
#include "core/config.h"
#include "hvdtune/config.h"
#include "mpi_test_util.h"
#include "test_env.h"
#if HVDTUNE_HAVE_GLOO
#include "core/engine/gloo/gloo_context.h"
#include "core/engine/gloo/gloo_nccl_bootstrap.h"
#endif

namespace hvdtune {
namespace {

using namespace testing_util;
using internal::NcclBootstrap;
using Group = NcclBootstrap::Group;

// The size of an ncclUniqueId.
constexpr std::size_t kIdBytes = 128;

// The world rank of `group`'s rank 0 in nodes of two consecutive ranks.
int RootOf(Group group, int rank) {
  switch (group) {
    case Group::kLocal:
      return rank / 2 * 2;
    case Group::kCross:
      return rank % 2;
    case Group::kWorld:
      break;
  }
  return 0;
}

void CheckBootstrap(NcclBootstrap& boot) {
  const int me = WorldRank(), size = WorldSize();
  EXPECT_EQ(boot.place(Group::kWorld).rank, me);
  EXPECT_EQ(boot.place(Group::kWorld).size, size);
  EXPECT_EQ(boot.place(Group::kLocal).rank, me % 2);
  EXPECT_EQ(boot.place(Group::kLocal).size, std::min(2, size - me / 2 * 2));
  EXPECT_EQ(boot.place(Group::kCross).rank, me / 2);
  EXPECT_EQ(boot.place(Group::kCross).size,
            me % 2 == 0 ? (size + 1) / 2 : size / 2);

  // Three rounds per group: a later id never reads an earlier one's.
  for (const Group group : {Group::kWorld, Group::kLocal, Group::kCross}) {
    for (int round = 0; round < 3; ++round) {
      const auto mark = [&](int root) {
        return static_cast<char>((root * 7 + round * 3 + 1) & 0x7f);
      };
      std::vector<char> id(kIdBytes, -1);
      if (boot.place(group).rank == 0) {
        std::fill(id.begin(), id.end(), mark(me));
      }
      const Status s = boot.Broadcast(group, id.data(), id.size());
      ASSERT_TRUE(s.ok()) << s.ToString();
      const char want = mark(RootOf(group, me));
      EXPECT_EQ(std::count(id.begin(), id.end(), want),
                static_cast<std::ptrdiff_t>(kIdBytes))
          << "group " << static_cast<int>(group) << " round " << round;
    }
  }

  EXPECT_TRUE(boot.Agree(Status::Ok()).ok());
  // The last rank and, with three ranks or more, rank 1 fail: every rank
  // gets the first one's message.
  const int first = size > 2 ? 1 : size - 1;
  const bool fails = me == size - 1 || (size > 2 && me == 1);
  const Status agreed = boot.Agree(
      fails ? Status::Internal("no device on rank " + std::to_string(me))
            : Status::Ok());
  ASSERT_FALSE(agreed.ok());
  std::string want = "no device on rank " + std::to_string(first);
  if (size > 1) {
    want +=
        " (rank " + std::to_string(first) + " of " + std::to_string(size) + ")";
  }
  EXPECT_EQ(agreed.message(), want);
  EXPECT_TRUE(boot.Agree(Status::Ok()).ok()) << "a later agreement is fresh";

  bool uniform = false;
  ASSERT_TRUE(boot.UniformNodes(&uniform).ok());
  EXPECT_EQ(uniform, size % 2 == 0 || size == 1);
}

TEST(NcclBootstrap, GroupRootsIdsReachTheirMembersAndRanksAgree) {
  if (TestEngine() == EngineKind::kGloo) {
#if HVDTUNE_HAVE_GLOO
    const RuntimeConfig config = ParseConfig(MapEnv({}));
    internal::GlooGroups groups(config.gloo, {}, 0);
    std::vector<int> node_of;
    for (int r = 0; r < WorldSize(); ++r) node_of.push_back(r / 2);
    groups.SplitNodes(node_of);
    internal::GlooNcclBootstrap boot(groups);
    CheckBootstrap(boot);
#endif
    return;
  }
  internal::MpiContext mpi = internal::MpiContext::Create(2);
  CheckBootstrap(*internal::MakeMpiNcclBootstrap(mpi));
  mpi.Free();
}

}  // namespace
}  // namespace hvdtune
