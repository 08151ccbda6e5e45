// Process sets: runtimes over fewer than all ranks (RuntimeOptions::ranks),
// made by their members alone while other sets make theirs beside them. On
// the Gloo engine each set connects its own contexts through the rendezvous
// store (keys named by its ranks); on MPI it makes its own communicators.
// Every collective must see the set's ranks and no others.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "mpi_test_util.h"
#include "test_env.h"

namespace hvdtune {
namespace {

using namespace testing_util;

// This rank's place in `set` (ascending world ranks).
int SetRank(const std::vector<int>& set, int world_rank) {
  return static_cast<int>(std::find(set.begin(), set.end(), world_rank) -
                          set.begin());
}

// Allreduces on both sides of the engines' small-message paths, a
// broadcast from the set's last rank and an allgather of the members' world
// ranks, each checked against the set alone.
void CheckSetCollectives(Runtime& rt, const std::vector<int>& set,
                         const std::string& tag) {
  const int me = WorldRank();
  ASSERT_EQ(rt.size(), static_cast<int>(set.size()));
  ASSERT_EQ(rt.rank(), SetRank(set, me));
  const std::pair<DataType, ReduceOp> kinds[] = {
      {DataType::kFloat32, ReduceOp::kSum}, {DataType::kInt32, ReduceOp::kMax}};
  for (const auto& [dtype, op] : kinds) {
    for (const std::int64_t count : {1, 7, 1000003}) {
      const std::size_t bytes =
          static_cast<std::size_t>(count) * DataTypeSize(dtype);
      std::vector<std::uint8_t> in(bytes), out(bytes, 0xAB);
      FillInput(dtype, in.data(), count, rt.rank(), op);
      const std::int64_t shape[] = {count};
      const std::string name = tag + ".ar." + std::string(DataTypeName(dtype)) +
                               "." + std::to_string(count);
      const Status s =
          rt.Allreduce(name, in.data(), out.data(), shape, dtype, op).Wait();
      ASSERT_TRUE(s.ok()) << s.ToString();
      EXPECT_EQ(CountWrong(dtype, op, rt.size(), out.data(), count), 0) << name;
    }
  }

  const std::int32_t mine = me;
  const std::int64_t one[] = {1};
  Handle gathered = rt.Allgather(tag + ".ranks", &mine, one, DataType::kInt32);
  ASSERT_TRUE(gathered.Wait().ok());
  std::vector<std::int32_t> ranks(set.size(), -1);
  ASSERT_EQ(gathered.output().size(), ranks.size() * sizeof(std::int32_t));
  std::memcpy(ranks.data(), gathered.output().data(), gathered.output().size());
  EXPECT_EQ(std::vector<int>(ranks.begin(), ranks.end()), set);

  // The set's last member sends its world rank to the others.
  const int root = rt.size() - 1;
  std::int64_t value = rt.rank() == root ? 1000 + me : -1;
  const Status b =
      rt.Broadcast(tag + ".bcast", &value, one, DataType::kInt64, root).Wait();
  ASSERT_TRUE(b.ok()) << b.ToString();
  EXPECT_EQ(value, 1000 + set.back());
}

// The even and the odd ranks each make a set of their own at the same time.
TEST(ProcessSets, EvenAndOddRanksEachRunTheirOwnSet) {
  if (WorldSize() < 2) {
    GTEST_SKIP() << "a set of fewer than all ranks needs two ranks";
  }
  std::vector<int> set;
  for (int r = WorldRank() % 2; r < WorldSize(); r += 2) set.push_back(r);
  Runtime rt(RuntimeOptions{.env = MapEnv({}), .ranks = set});
  CheckSetCollectives(rt, set, "parity");
}

// The hierarchical allreduce inside a set: every rank but the last, in
// emulated nodes of two ranks, the last rank alone. At 4 ranks the set
// {0, 1, 2} spans a node of two ranks and a node of one: its local groups
// differ in size and only the node leaders form a cross group.
TEST(ProcessSets, HierarchicalAllreduceInASetOfUnevenNodes) {
  if (WorldSize() < 2) {
    GTEST_SKIP() << "a set of fewer than all ranks needs two ranks";
  }
  const int last = WorldSize() - 1;
  std::vector<int> set;
  if (WorldRank() == last) {
    set = {last};
  } else {
    for (int r = 0; r < last; ++r) set.push_back(r);
  }
  Runtime rt(RuntimeOptions{
      .env = MapEnv({{"HVDTUNE_RANKS_PER_NODE", "2"},
                     {"HVDTUNE_ALLREDUCE_ALGORITHM", "hierarchical"}}),
      .ranks = set});
  EXPECT_EQ(rt.knobs().allreduce_algorithm_name(), "hierarchical");
  const int set_rank = SetRank(set, WorldRank());
  const int nodes = (static_cast<int>(set.size()) + 1) / 2;
  EXPECT_EQ(rt.local_size(),
            std::min(2, static_cast<int>(set.size()) - set_rank / 2 * 2));
  // Cross groups join the ranks of one local rank: every node has a
  // local rank 0, only the full nodes a local rank 1.
  EXPECT_EQ(rt.cross_size(),
            set_rank % 2 == 0 ? nodes : static_cast<int>(set.size()) / 2);
  CheckSetCollectives(rt, set, "hier");
}

}  // namespace
}  // namespace hvdtune
