#include "core/response_cache.h"

#include <gtest/gtest.h>

namespace hvdtune::internal {
namespace {

Request Req(const std::string& name, std::int64_t n = 4) {
  Request r;
  r.name = name;
  r.shape = {n};
  return r;
}

// (Built with append: GCC 12 warns falsely on "literal" + std::string.)
std::string Name(int i) { return std::string("t").append(std::to_string(i)); }

Response Resp(const std::string& name) {
  Response r;
  r.name = name;
  return r;
}

std::uint32_t PutOne(ResponseCache& c, const std::string& name,
                     std::vector<std::uint32_t>* displaced = nullptr) {
  return *c.Put(Resp(name), Req(name), displaced);
}

TEST(ResponseCache, HitMissAndInvalid) {
  ResponseCache c(8);
  EXPECT_EQ(c.Find(Req("a")).state, ResponseCache::State::kMiss);
  const std::uint32_t bit = PutOne(c, "a");
  const auto hit = c.Find(Req("a"));
  EXPECT_EQ(hit.state, ResponseCache::State::kHit);
  EXPECT_EQ(hit.bit, bit);
  EXPECT_EQ(c.response(bit).name, "a");
  // Same name, another shape: the entry is stale.
  EXPECT_EQ(c.Find(Req("a", 5)).state, ResponseCache::State::kInvalid);
  Request other_dtype = Req("a");
  other_dtype.dtype = DataType::kFloat16;
  EXPECT_EQ(c.Find(other_dtype).state, ResponseCache::State::kInvalid);
}

TEST(ResponseCache, EvictsLeastRecentlyUsed) {
  ResponseCache c(3);
  const std::uint32_t a = PutOne(c, "a");
  PutOne(c, "b");
  PutOne(c, "c");
  c.Touch(a);  // b is now the oldest
  std::vector<std::uint32_t> displaced;
  const std::uint32_t d = PutOne(c, "d", &displaced);
  ASSERT_EQ(displaced.size(), 1u);
  EXPECT_EQ(c.Find(Req("b")).state, ResponseCache::State::kMiss);
  EXPECT_EQ(c.Find(Req("a")).state, ResponseCache::State::kHit);
  EXPECT_EQ(c.Find(Req("c")).state, ResponseCache::State::kHit);
  EXPECT_EQ(c.Find(Req("d")).bit, d);
  EXPECT_EQ(displaced[0], d);  // d took b's bit
  EXPECT_EQ(c.size(), 3u);
}

TEST(ResponseCache, EraseFreesLowestBitFirst) {
  ResponseCache c(4);
  for (const char* n : {"a", "b", "c", "d"}) PutOne(c, n);
  const std::uint32_t b = c.Find(Req("b")).bit;
  const std::uint32_t d = c.Find(Req("d")).bit;
  c.Erase(d);
  c.Erase(b);
  EXPECT_FALSE(c.Contains(b));
  EXPECT_EQ(PutOne(c, "e"), std::min(b, d));
  EXPECT_EQ(PutOne(c, "f"), std::max(b, d));
}

TEST(ResponseCache, PutSameNameReplaces) {
  ResponseCache c(4);
  PutOne(c, "a");
  std::vector<std::uint32_t> displaced;
  Request bigger = Req("a", 9);
  c.Put(Resp("a"), bigger, &displaced);
  EXPECT_EQ(displaced.size(), 1u);
  EXPECT_EQ(c.size(), 1u);
  EXPECT_EQ(c.Find(bigger).state, ResponseCache::State::kHit);
}

TEST(ResponseCache, CapacityZeroStoresNothing) {
  ResponseCache c(0);
  EXPECT_FALSE(c.Put(Resp("a"), Req("a"), nullptr).has_value());
  EXPECT_EQ(c.Find(Req("a")).state, ResponseCache::State::kMiss);
}

TEST(ResponseCache, SameOperationsGiveSameBits) {
  // Two caches fed the same sequence (as two ranks are) agree on every bit.
  ResponseCache x(16), y(16);
  for (int i = 0; i < 200; ++i) {
    const std::string name = Name((i * 7) % 37);
    if (i % 5 == 0) {
      const auto fx = x.Find(Req(name));
      if (fx.state != ResponseCache::State::kMiss) {
        x.Erase(fx.bit);
        y.Erase(fx.bit);
      }
    }
    const auto bx = x.Put(Resp(name), Req(name), nullptr);
    const auto by = y.Put(Resp(name), Req(name), nullptr);
    ASSERT_EQ(bx, by);
    if (i % 3 == 0) {
      x.Touch(*bx);
      y.Touch(*by);
    }
  }
  for (int i = 0; i < 37; ++i) {
    const std::string name = Name(i);
    EXPECT_EQ(x.Find(Req(name)).state, y.Find(Req(name)).state);
    EXPECT_EQ(x.Find(Req(name)).bit, y.Find(Req(name)).bit);
  }
}

}  // namespace
}  // namespace hvdtune::internal
