#include "core/message.h"

#include <gtest/gtest.h>

#include <stdexcept>

namespace hvdtune::internal {
namespace {

TEST(Messages, RequestsRoundTrip) {
  Request a;
  a.name = "layer1.weight";
  a.type = CollectiveType::kAllgather;
  a.dtype = DataType::kBFloat16;
  a.op = ReduceOp::kMax;
  a.root = 3;
  a.rank = 2;
  a.shape = {7, 0, 5};
  a.group = "g";
  a.group_size = 3;
  Request b;
  b.name = "";
  const auto bytes = SerializeRequests({a, b});
  const auto back = DeserializeRequests(bytes.data(), bytes.size());
  ASSERT_EQ(back.size(), 2u);
  EXPECT_TRUE(back[0].SameSignature(a));
  EXPECT_EQ(back[0].group, "g");
  EXPECT_EQ(back[0].group_size, 3);
  Request other_group = a;
  other_group.group_size = 2;
  EXPECT_FALSE(other_group.SameSignature(a));
  EXPECT_EQ(back[0].rank, 2);
  EXPECT_TRUE(back[1].SameSignature(b));
}

TEST(Messages, ResponsesRoundTrip) {
  Response r;
  r.kind = Response::Kind::kError;
  r.name = "x";
  r.type = CollectiveType::kBroadcast;
  r.first_dims = {1, 2, 3};
  r.error = "mismatched shape";
  const auto bytes = SerializeResponses({r});
  const auto back = DeserializeResponses(bytes.data(), bytes.size());
  ASSERT_EQ(back.size(), 1u);
  EXPECT_EQ(back[0].kind, Response::Kind::kError);
  EXPECT_EQ(back[0].first_dims, r.first_dims);
  EXPECT_EQ(back[0].error, r.error);
}

TEST(Messages, TruncatedOrCorruptInputThrows) {
  Request a;
  a.name = "abc";
  a.shape = {1, 2};
  auto bytes = SerializeRequests({a});
  for (std::size_t n = 0; n < bytes.size(); ++n) {
    EXPECT_THROW(DeserializeRequests(bytes.data(), n), std::runtime_error) << n;
  }
  bytes[8 + 8 + 3] = 99;  // the collective type byte after the name
  EXPECT_THROW(DeserializeRequests(bytes.data(), bytes.size()),
               std::runtime_error);
}

}  // namespace
}  // namespace hvdtune::internal
