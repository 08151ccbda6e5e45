#include "core/engine/gloo/gloo_allreduce.h"

#include <gloo/allreduce_halving_doubling.h>
#include <gloo/allreduce_ring_chunked.h>

#include <climits>
#include <cstring>

#include "api/algorithms/names.h"
#include "core/engine/gloo/gloo_hierarchical.h"
#include "core/engine/gloo/gloo_reduce.h"

namespace hvdtune::internal {
namespace {

class Native final : public EngineAllreduce {
 public:
  Native(GlooBackend& world, Backend* device)
      : world_(world), device_(device) {}
  std::string_view name() const override { return "native"; }
  Status Run(const KnobSettings&, const void* in, void* out, std::int64_t count,
             DataType dtype, ReduceOp op) override {
    return world_.Allreduce(in, out, count, dtype, op);
  }
  bool has_device_version() const override { return device_ != nullptr; }
  Status RunDevice(const KnobSettings& knobs, const void* in, void* out,
                   std::int64_t count, DataType dtype, ReduceOp op) override {
    if (device_ == nullptr) {
      return EngineAllreduce::RunDevice(knobs, in, out, count, dtype, op);
    }
    return device_->Allreduce(in, out, count, dtype, op);
  }

 private:
  GlooBackend& world_;
  Backend* device_;
};

class Ring final : public EngineAllreduce {
 public:
  explicit Ring(GlooBackend& world) : world_(world) {}
  std::string_view name() const override { return "ring"; }
  Status Run(const KnobSettings& knobs, const void* in, void* out,
             std::int64_t count, DataType dtype, ReduceOp op) override {
    return world_.RingAllreduce(in, out, count, dtype, op,
                                knobs.ring_segment_bytes());
  }

 private:
  GlooBackend& world_;
};

// Gloo's algorithm classes (one object per call: they bind their buffers
// when made), in place on `out`, in pieces their int counts can hold.
template <template <typename> class Algo>
class Classic final : public EngineAllreduce {
 public:
  Classic(GlooBackend& world, std::string_view name)
      : world_(world), name_(name) {}
  std::string_view name() const override { return name_; }
  Status Run(const KnobSettings&, const void* in, void* out, std::int64_t count,
             DataType dtype, ReduceOp op) override {
    const std::size_t esize = DataTypeSize(dtype);
    if (count <= 0) return Status::Ok();
    if (in != out) {
      std::memcpy(out, in, static_cast<std::size_t>(count) * esize);
    }
    const auto& ctx = world_.context();
    if (ctx == nullptr || ctx->size == 1) return Status::Ok();
    return world_.groups().Guard(name_.data(), [&] {
      world_.SizeSendBuffersForBoundAlgorithms();
      WithStorageType(esize, [&](auto t) {
        using T = decltype(t);
        const gloo::ReductionFunction<T>* fn =
            GlooReductionFunction<T>(dtype, op);
        constexpr std::int64_t kMaxPiece = INT_MAX / 2;
        for (std::int64_t done = 0; done < count;) {
          const std::int64_t n = std::min(count - done, kMaxPiece);
          std::vector<T*> ptrs{static_cast<T*>(out) + done};
          Algo<T> algorithm(ctx, ptrs, static_cast<int>(n), fn);
          algorithm.run();
          done += n;
        }
      });
    });
  }

 private:
  GlooBackend& world_;
  std::string_view name_;
};

}  // namespace

std::vector<std::unique_ptr<EngineAllreduce>> MakeGlooAllreduceAlgorithms(
    GlooBackend& world, GlooBackend& local, GlooBackend& cross,
    Backend* device) {
  std::vector<std::unique_ptr<EngineAllreduce>> all;
  for (std::string_view name : kAllreduceAlgorithmNames) {
    std::unique_ptr<EngineAllreduce> a;
    if (name == "native") a = std::make_unique<Native>(world, device);
    if (name == "ring") a = std::make_unique<Ring>(world);
    if (name == "ring_chunked") {
      a = std::make_unique<Classic<gloo::AllreduceRingChunked>>(world, name);
    }
    if (name == "halving_doubling") {
      a = std::make_unique<Classic<gloo::AllreduceHalvingDoubling>>(world,
                                                                    name);
    }
    if (name == "hierarchical") {
      a = std::make_unique<GlooHierarchical>(world, local, cross);
    }
    all.push_back(std::move(a));
  }
  return all;
}

}  // namespace hvdtune::internal
