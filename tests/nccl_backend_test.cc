// NCCL backend: the factory and pointer checks run everywhere; the
// collectives run where CUDA, NCCL and one GPU per rank exist, and skip with
// the reason (e.g. "no CUDA device: <cuda error text>") elsewhere.
#include "core/backends/nccl/nccl_backend.h"

#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "core/backends/mpi/mpi_backend.h"
#include "core/backends/mpi/mpi_context.h"
#include "core/config.h"
#include "hvdtune/runtime.h"
#include "mpi_test_util.h"
#include "test_env.h"

#if HVDTUNE_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace hvdtune::internal {
namespace {

using testing_util::CountWrong;
using testing_util::FillInput;
using testing_util::InputValue;
using testing_util::Load;

// Whether this process sees a CUDA device; `why` says why not.
bool HaveDevice(std::string* why) {
#if HVDTUNE_HAVE_CUDA
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    cudaGetLastError();
    *why = std::string("no CUDA device: ") + cudaGetErrorString(e);
    return false;
  }
  if (count == 0) *why = "no CUDA device: cudaGetDeviceCount found 0";
  return count > 0;
#else
  *why = "built without CUDA";
  return false;
#endif
}

TEST(NcclFactory, ReturnsBackendOrReason) {
  MpiContext mpi = MpiContext::Create(0);
  Status why = Status::Internal("not set");
  std::unique_ptr<Backend> backend = MakeNcclBackend(mpi, &why);
  std::string no_device;
  if (!HaveDevice(&no_device)) {
    EXPECT_EQ(backend, nullptr);
    EXPECT_FALSE(why.ok());
    EXPECT_FALSE(why.message().empty());
    if (testing_util::WorldRank() == 0) {
      std::printf("[   INFO   ] MakeNcclBackend: %s\n", why.message().c_str());
    }
  } else if (backend == nullptr) {
    // A GPU box can still refuse (e.g. more ranks than GPUs): say why.
    EXPECT_FALSE(why.message().empty());
  } else {
    EXPECT_TRUE(why.ok()) << why.ToString();
    EXPECT_EQ(backend->name(), kNcclBackendName);
  }
  backend.reset();
  mpi.Free();
}

TEST(NcclFactory, HostPointersAreNotDevicePointers) {
  std::vector<float> heap(16, 1.0f);
  int stack = 0;
  EXPECT_FALSE(IsDevicePointer(heap.data()));
  EXPECT_FALSE(IsDevicePointer(&stack));
  EXPECT_FALSE(IsDevicePointer(nullptr));
}

TEST(NcclFactory, HierarchicalNeedsTheNcclBackend) {
  MpiContext mpi = MpiContext::Create(0);
  {
    MpiTypes types;
    MpiBackend host(mpi.data, types);
    float x = 1.0f;
    const Status s = NcclHierarchicalAllreduce(
        host, mpi, types, &x, &x, 1, DataType::kFloat32, ReduceOp::kSum);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
    EXPECT_NE(s.message().find("mpi"), std::string::npos) << s.message();
  }
  mpi.Free();
}

#if HVDTUNE_HAVE_CUDA

// One backend for the whole suite (its creation is collective).
class NcclBackendTest : public testing::Test {
 protected:
  static void SetUpTestSuite() {
    mpi_ = new MpiContext(MpiContext::Create(0));
    types_ = new MpiTypes();
    Status why;
    backend_ = MakeNcclBackend(*mpi_, &why).release();
    reason_ = new std::string(why.message());
  }
  static void TearDownTestSuite() {
    delete backend_;
    backend_ = nullptr;
    delete types_;
    types_ = nullptr;
    mpi_->Free();
    delete mpi_;
    mpi_ = nullptr;
    delete reason_;
    reason_ = nullptr;
  }
  void SetUp() override {
    if (backend_ == nullptr) GTEST_SKIP() << *reason_;
  }

  static MpiContext* mpi_;
  static MpiTypes* types_;
  static Backend* backend_;
  static std::string* reason_;
};

MpiContext* NcclBackendTest::mpi_ = nullptr;
MpiTypes* NcclBackendTest::types_ = nullptr;
Backend* NcclBackendTest::backend_ = nullptr;
std::string* NcclBackendTest::reason_ = nullptr;

// Device memory for one test, copied to and from host vectors.
class DeviceBuffer {
 public:
  explicit DeviceBuffer(std::size_t bytes) : bytes_(bytes) {
    if (bytes_ > 0) {
      EXPECT_EQ(cudaMalloc(&ptr_, bytes_), cudaSuccess);
    }
  }
  ~DeviceBuffer() {
    if (ptr_ != nullptr) cudaFree(ptr_);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* get() const { return ptr_; }
  char* bytes() const { return static_cast<char*>(ptr_); }
  void Upload(const std::vector<std::uint8_t>& host) {
    ASSERT_EQ(host.size(), bytes_);
    if (bytes_ > 0) {
      ASSERT_EQ(cudaMemcpy(ptr_, host.data(), bytes_, cudaMemcpyHostToDevice),
                cudaSuccess);
    }
  }
  std::vector<std::uint8_t> Download() const {
    std::vector<std::uint8_t> host(bytes_);
    if (bytes_ > 0) {
      EXPECT_EQ(cudaMemcpy(host.data(), ptr_, bytes_, cudaMemcpyDeviceToHost),
                cudaSuccess);
    }
    return host;
  }

 private:
  void* ptr_ = nullptr;
  std::size_t bytes_;
};

std::vector<std::uint8_t> Input(DataType dt, std::int64_t count, int rank) {
  std::vector<std::uint8_t> host(static_cast<std::size_t>(count) *
                                 DataTypeSize(dt));
  FillInput(dt, host.data(), count, rank);
  return host;
}

TEST_F(NcclBackendTest, DeviceBuffersAreDevicePointers) {
  DeviceBuffer buf(64);
  EXPECT_TRUE(IsDevicePointer(buf.get()));
}

using AllreduceParam = std::tuple<DataType, ReduceOp, std::int64_t>;

class NcclAllreduceTest : public NcclBackendTest,
                          public testing::WithParamInterface<AllreduceParam> {};

TEST_P(NcclAllreduceTest, MatchesReference) {
  const auto [dt, op, count] = GetParam();
  const std::size_t bytes = static_cast<std::size_t>(count) * DataTypeSize(dt);
  DeviceBuffer in(bytes), out(bytes);
  in.Upload(Input(dt, count, mpi_->rank));
  Status s = backend_->Allreduce(in.get(), out.get(), count, dt, op);
  ASSERT_TRUE(s.ok()) << s.ToString();
  std::vector<std::uint8_t> got = out.Download();
  EXPECT_EQ(CountWrong(dt, op, mpi_->size, got.data(), count), 0);

  // In place, and the hierarchical path, give the same answer.
  s = backend_->Allreduce(in.get(), in.get(), count, dt, op);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(in.Download(), got);
  in.Upload(Input(dt, count, mpi_->rank));
  s = NcclHierarchicalAllreduce(*backend_, *mpi_, *types_, in.get(), out.get(),
                                count, dt, op);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(out.Download(), got);
}

INSTANTIATE_TEST_SUITE_P(
    DtypesOpsCounts, NcclAllreduceTest,
    testing::Combine(testing::Values(DataType::kFloat32, DataType::kFloat16,
                                     DataType::kBFloat16, DataType::kInt32),
                     testing::Values(ReduceOp::kSum, ReduceOp::kMin,
                                     ReduceOp::kMax),
                     testing::Values<std::int64_t>(0, 1, 3, 1031, 1 << 18)));

TEST_F(NcclBackendTest, AverageIntegersTruncateFloatsAreClose) {
  const std::int64_t count = 4099;
  for (DataType dt : {DataType::kInt32, DataType::kUInt8, DataType::kFloat32,
                      DataType::kFloat16}) {
    const std::size_t bytes =
        static_cast<std::size_t>(count) * DataTypeSize(dt);
    DeviceBuffer buf(bytes);
    for (bool hierarchical : {false, true}) {
      buf.Upload(Input(dt, count, mpi_->rank));
      const Status s =
          hierarchical ? NcclHierarchicalAllreduce(*backend_, *mpi_, *types_,
                                                   buf.get(), buf.get(), count,
                                                   dt, ReduceOp::kAverage)
                       : backend_->Allreduce(buf.get(), buf.get(), count, dt,
                                             ReduceOp::kAverage);
      ASSERT_TRUE(s.ok()) << s.ToString();
      const std::vector<std::uint8_t> got = buf.Download();
      // ncclAvg may scale before summing: allow a few ulps of the inputs.
      const double eps = dt == DataType::kFloat16   ? std::ldexp(1.0, -10)
                         : dt == DataType::kFloat32 ? std::ldexp(1.0, -23)
                                                    : 0.0;
      std::int64_t wrong = 0;
      for (std::int64_t i = 0; i < count; ++i) {
        double sum = 0, magnitude = 0;
        for (int r = 0; r < mpi_->size; ++r) {
          sum += InputValue(dt, r, i);
          magnitude += std::fabs(InputValue(dt, r, i));
        }
        const double want = testing_util::IsInteger(dt)
                                ? std::trunc(sum / mpi_->size)
                                : sum / mpi_->size;
        const double got_i = Load(dt, got.data(), i);
        if (std::fabs(got_i - want) > 4 * eps * magnitude && wrong++ < 3) {
          ADD_FAILURE() << DataTypeName(dt) << " average element " << i
                        << (hierarchical ? " (hierarchical)" : "") << ": got "
                        << got_i << ", want " << want;
        }
      }
      EXPECT_EQ(wrong, 0);
    }
  }
}

TEST_F(NcclBackendTest, BroadcastFromEveryRoot) {
  for (int root = 0; root < mpi_->size; ++root) {
    const std::int64_t bytes = 1000 + root;
    std::vector<std::uint8_t> host(static_cast<std::size_t>(bytes));
    for (std::int64_t i = 0; i < bytes; ++i) {
      host[static_cast<std::size_t>(i)] =
          static_cast<std::uint8_t>(mpi_->rank == root ? i * 5 + root : 0xEE);
    }
    DeviceBuffer buf(host.size());
    buf.Upload(host);
    const Status s = backend_->Broadcast(buf.get(), bytes, root);
    ASSERT_TRUE(s.ok()) << s.ToString();
    const std::vector<std::uint8_t> got = buf.Download();
    for (std::int64_t i = 0; i < bytes; ++i) {
      ASSERT_EQ(got[static_cast<std::size_t>(i)],
                static_cast<std::uint8_t>(i * 5 + root))
          << "root " << root << " byte " << i;
    }
  }
}

// Rank r contributes `sizes[r]` bytes of value (r * 37 + i) % 251.
void CheckAllgatherv(Backend& backend, int rank,
                     const std::vector<std::int64_t>& sizes, bool host_out) {
  std::int64_t total = 0;
  for (std::int64_t n : sizes) total += n;
  std::vector<std::uint8_t> mine(
      static_cast<std::size_t>(sizes[static_cast<std::size_t>(rank)]));
  for (std::size_t i = 0; i < mine.size(); ++i) {
    mine[i] = static_cast<std::uint8_t>((rank * 37 + i) % 251);
  }
  DeviceBuffer in(mine.size()), out(static_cast<std::size_t>(total));
  in.Upload(mine);
  std::vector<std::uint8_t> got(static_cast<std::size_t>(total), 0xEE);
  const Status s =
      backend.Allgatherv(in.get(), static_cast<std::int64_t>(mine.size()),
                         host_out ? got.data() : out.get(), sizes);
  ASSERT_TRUE(s.ok()) << s.ToString();
  if (!host_out) got = out.Download();
  std::size_t at = 0;
  for (std::size_t r = 0; r < sizes.size(); ++r) {
    for (std::int64_t i = 0; i < sizes[r]; ++i, ++at) {
      ASSERT_EQ(got[at], static_cast<std::uint8_t>((r * 37 + i) % 251))
          << "rank " << r << " byte " << i << (host_out ? " (host out)" : "");
    }
  }
}

TEST_F(NcclBackendTest, AllgathervUnequalAndEqualSizes) {
  std::vector<std::int64_t> unequal, equal;
  for (int r = 0; r < mpi_->size; ++r) {
    unequal.push_back(r == 1 ? 0 : 100 * (r + 1) + 3 * r + 1);
    equal.push_back(4096);
  }
  for (bool host_out : {false, true}) {
    CheckAllgatherv(*backend_, mpi_->rank, unequal, host_out);
    CheckAllgatherv(*backend_, mpi_->rank, equal, host_out);
  }
}

// Through the public API: a runtime's own NCCL backend takes device buffers
// (told apart by their pointers), and nccl_handles() names its objects.
TEST(NcclRuntime, DeviceBuffersRunOnTheRuntimesBackend) {
  Runtime rt(RuntimeOptions{testing_util::MapEnv({})});
  EXPECT_EQ(rt.has_nccl(), rt.nccl_unavailable().empty());
  if (!rt.has_nccl()) {
    const std::string why = rt.nccl_unavailable();
    rt.Shutdown();
    GTEST_SKIP() << why;
  }
  const NcclHandles h = rt.nccl_handles();
  ASSERT_NE(h.world_comm, nullptr);
  ASSERT_NE(h.stream, nullptr);
  ASSERT_EQ(cudaSetDevice(h.device), cudaSuccess);
  const int rank = rt.rank(), size = rt.size();
  constexpr std::int64_t kCount = 4099;
  std::vector<float> host(kCount);
  for (std::int64_t i = 0; i < kCount; ++i) {
    host[static_cast<std::size_t>(i)] = static_cast<float>(i % 13 + rank);
  }
  float* in = nullptr;
  float* out = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&in), kCount * sizeof(float)),
            cudaSuccess);
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&out), kCount * sizeof(float)),
            cudaSuccess);
  ASSERT_EQ(cudaMemcpy(in, host.data(), kCount * sizeof(float),
                       cudaMemcpyHostToDevice),
            cudaSuccess);
  const std::int64_t shape[] = {kCount};
  Status s = rt.Allreduce("nccl_runtime.sum", in, out, shape,
                          DataType::kFloat32, ReduceOp::kSum)
                 .Wait();
  ASSERT_TRUE(s.ok()) << s.ToString();
  std::vector<float> got(kCount);
  ASSERT_EQ(cudaMemcpy(got.data(), out, kCount * sizeof(float),
                       cudaMemcpyDeviceToHost),
            cudaSuccess);
  int wrong = 0;
  for (std::int64_t i = 0; i < kCount; ++i) {
    const auto want =
        static_cast<float>(size * (i % 13) + size * (size - 1) / 2);
    wrong += got[static_cast<std::size_t>(i)] != want ? 1 : 0;
  }
  EXPECT_EQ(wrong, 0);
  // Broadcast in place from the last rank, then an allgather of device
  // input into the handle's host output.
  s = rt.Broadcast("nccl_runtime.bcast", in, shape, DataType::kFloat32,
                   size - 1)
          .Wait();
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_EQ(cudaMemcpy(got.data(), in, kCount * sizeof(float),
                       cudaMemcpyDeviceToHost),
            cudaSuccess);
  wrong = 0;
  for (std::int64_t i = 0; i < kCount; ++i) {
    wrong += got[static_cast<std::size_t>(i)] !=
                     static_cast<float>(i % 13 + size - 1)
                 ? 1
                 : 0;
  }
  EXPECT_EQ(wrong, 0);
  const std::int64_t row[] = {1};
  const Handle gathered =
      rt.Allgather("nccl_runtime.gather", in, row, DataType::kFloat32);
  s = gathered.Wait();
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_EQ(gathered.output().size(), static_cast<std::size_t>(size) * 4);
  for (int r = 0; r < size; ++r) {
    float v = 0;
    std::memcpy(&v, gathered.output().data() + 4 * r, 4);
    EXPECT_EQ(v, static_cast<float>(size - 1)) << "rank " << r;
  }
  cudaFree(in);
  cudaFree(out);
  rt.Shutdown();
}

#else  // !HVDTUNE_HAVE_CUDA

TEST(NcclBackendTest, Collectives) {
  GTEST_SKIP() << "hvdtune was built without CUDA (HVDTUNE_HAVE_CUDA=0)";
}

#endif  // HVDTUNE_HAVE_CUDA

}  // namespace
}  // namespace hvdtune::internal
