#include "core/fusion_buffer.h"

#include <gtest/gtest.h>

#include <numeric>
#include <vector>

namespace hvdtune::internal {
namespace {

// Stands in for the allreduce: out = 2 * in, and records where each chunk
// was read from and how long it was.
struct Doubler {
  std::vector<const float*> reads;
  std::vector<std::int64_t> counts;

  FusionBuffer::ReduceChunk Fn() {
    return [this](const void* in, void* out, std::int64_t n) {
      const auto* x = static_cast<const float*>(in);
      auto* y = static_cast<float*>(out);
      reads.push_back(x);
      counts.push_back(n);
      for (std::int64_t i = 0; i < n; ++i) y[i] = 2 * x[i];
      return Status::Ok();
    };
  }
};

// Members of `sizes` floats as views of one flat input and output buffer,
// in address order.
std::vector<FusedMember> Views(const std::vector<std::size_t>& sizes,
                               std::vector<float>& in,
                               std::vector<float>& out) {
  std::vector<FusedMember> m;
  std::size_t at = 0;
  for (std::size_t n : sizes) {
    m.push_back({in.data() + at, out.data() + at, n * sizeof(float)});
    at += n;
  }
  return m;
}

std::vector<float> Iota(std::size_t n) {
  std::vector<float> v(n);
  std::iota(v.begin(), v.end(), 1.0f);
  return v;
}

bool Within(const float* p, const std::vector<float>& v) {
  return p >= v.data() && p < v.data() + v.size();
}

TEST(FusionBuffer, ViewsOfOneBufferInAddressOrderAreReducedWhereTheyLie) {
  std::vector<float> in = Iota(100), out(100);
  const auto members = Views({10, 0, 30, 60}, in, out);
  FusionBuffer buffer;
  Doubler d;
  ASSERT_TRUE(buffer.Allreduce(members, sizeof(float), 0, d.Fn()).ok());
  ASSERT_EQ(d.reads.size(), 1u);
  EXPECT_EQ(d.reads[0], in.data());
  EXPECT_EQ(d.counts[0], 100);
  EXPECT_EQ(buffer.capacity(), 0u) << "no copy, no staging buffer";
  for (std::size_t i = 0; i < out.size(); ++i) ASSERT_EQ(out[i], 2 * in[i]);
}

TEST(FusionBuffer, ViewsInReverseOrderAreCopiedInTheGroupsOrder) {
  std::vector<float> in = Iota(100), out(100);
  auto members = Views({10, 30, 60}, in, out);
  std::swap(members[0], members[2]);  // 60, 30, 10: not the address order
  FusionBuffer buffer;
  Doubler d;
  ASSERT_TRUE(buffer.Allreduce(members, sizeof(float), 0, d.Fn()).ok());
  ASSERT_EQ(d.reads.size(), 1u);
  EXPECT_FALSE(Within(d.reads[0], in));
  for (std::size_t i = 0; i < out.size(); ++i) ASSERT_EQ(out[i], 2 * in[i]);
}

TEST(FusionBuffer, OutputsApartMeansCopiesEvenWithInputsTogether) {
  std::vector<float> in = Iota(40), out_a(20), out_b(20);
  const std::vector<FusedMember> members = {
      {in.data(), out_a.data(), 20 * sizeof(float)},
      {in.data() + 20, out_b.data(), 20 * sizeof(float)}};
  FusionBuffer buffer;
  Doubler d;
  ASSERT_TRUE(buffer.Allreduce(members, sizeof(float), 0, d.Fn()).ok());
  EXPECT_FALSE(Within(d.reads[0], in));
  for (std::size_t i = 0; i < 20; ++i) {
    ASSERT_EQ(out_a[i], 2 * in[i]);
    ASSERT_EQ(out_b[i], 2 * in[20 + i]);
  }
}

TEST(FusionBuffer, ChunksInsideARunGoDirectOthersAreCopied) {
  // Two views of one buffer, then a tensor elsewhere, in chunks of 7
  // floats: only the chunk across the gap is copied.
  std::vector<float> in = Iota(30), out(30);
  std::vector<float> lone_in = Iota(12), lone_out(12);
  auto members = Views({13, 17}, in, out);
  members.push_back({lone_in.data(), lone_out.data(), 12 * sizeof(float)});
  FusionBuffer buffer;
  Doubler d;
  ASSERT_TRUE(
      buffer.Allreduce(members, sizeof(float), 7 * sizeof(float), d.Fn()).ok());
  ASSERT_EQ(d.reads.size(), 6u);  // 42 floats in chunks of 7
  for (std::size_t c = 0; c < 4; ++c) {
    EXPECT_EQ(d.reads[c], in.data() + 7 * c) << "chunk " << c;
  }
  EXPECT_FALSE(Within(d.reads[4], in)) << "the chunk across the gap";
  EXPECT_EQ(d.reads[5], lone_in.data() + 5) << "a chunk within one member";
  for (std::size_t i = 0; i < out.size(); ++i) ASSERT_EQ(out[i], 2 * in[i]);
  for (std::size_t i = 0; i < lone_out.size(); ++i) {
    ASSERT_EQ(lone_out[i], 2 * lone_in[i]);
  }
}

TEST(FusionBuffer, InPlaceViewsAreReducedInPlace) {
  std::vector<float> buf = Iota(50);
  const std::vector<float> was = buf;
  const auto members = Views({25, 25}, buf, buf);
  FusionBuffer buffer;
  Doubler d;
  ASSERT_TRUE(buffer.Allreduce(members, sizeof(float), 0, d.Fn()).ok());
  EXPECT_EQ(d.reads[0], buf.data());
  for (std::size_t i = 0; i < buf.size(); ++i) ASSERT_EQ(buf[i], 2 * was[i]);
}

TEST(FusionBuffer, OutputsOverlappingInputsGoThroughTheBuffer) {
  // Each tensor's output is the next one's input: reduced where they lie,
  // the first tensor's result would overwrite the second's input.
  std::vector<float> mem = Iota(30);
  const std::vector<float> was = mem;
  const std::vector<FusedMember> members = {
      {mem.data(), mem.data() + 10, 10 * sizeof(float)},
      {mem.data() + 10, mem.data() + 20, 10 * sizeof(float)}};
  FusionBuffer buffer;
  Doubler d;
  ASSERT_TRUE(buffer.Allreduce(members, sizeof(float), 0, d.Fn()).ok());
  EXPECT_FALSE(Within(d.reads[0], mem));
  for (std::size_t i = 0; i < 20; ++i) ASSERT_EQ(mem[10 + i], 2 * was[i]);
}

}  // namespace
}  // namespace hvdtune::internal
