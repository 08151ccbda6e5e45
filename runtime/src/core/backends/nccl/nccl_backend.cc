#include "core/backends/nccl/nccl_backend.h"

#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <string>
#include <string_view>
#include <thread>

#include "core/backends/nccl/nccl_backend_cuda.h"
#include "core/backends/nccl/nccl_bootstrap.h"
#include "core/reduce.h"

namespace hvdtune::internal {
namespace {

bool IsInteger(DataType dtype) {
  return dtype == DataType::kUInt8 || dtype == DataType::kInt32 ||
         dtype == DataType::kInt64 || dtype == DataType::kInt8 ||
         dtype == DataType::kInt16 || dtype == DataType::kBool;
}

// NCCL's version code for 2.30.0, the first that lets several ranks of one
// communicator share a device.
constexpr int kNcclMultiRankGpuVersion = 23000;

bool MultiRankGpuAllowed() {
  const char* env = std::getenv("NCCL_MULTI_RANK_GPU_ENABLE");
  return env != nullptr && std::string_view(env) == "1" &&
         NcclVersionCode() >= kNcclMultiRankGpuVersion;
}

// One rank's CUDA side: a device for this local rank and a stream on it.
Status OpenDevice(const NcclBootstrap::Place& local, int* device,
                  cudaStream_t* stream) {
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    cudaGetLastError();  // Clears the error so later CUDA calls start clean.
    return Status::Internal(std::string("no CUDA device: ") +
                            cudaGetErrorString(e));
  }
  if (count <= 0) {
    return Status::Internal("no CUDA device: cudaGetDeviceCount found 0");
  }
  // NCCL before 2.30 refuses two ranks of one communicator on the same
  // device; from 2.30 it allows them when NCCL_MULTI_RANK_GPU_ENABLE=1.
  if (local.size > count && !MultiRankGpuAllowed()) {
    return Status::Internal(
        std::to_string(local.size) + " ranks on this node but " +
        std::to_string(count) +
        " CUDA device(s); NCCL needs one per rank (or NCCL >= 2.30 with "
        "NCCL_MULTI_RANK_GPU_ENABLE=1; this is NCCL " +
        std::to_string(NcclVersionCode()) + ")");
  }
  *device = local.rank % count;
  e = cudaSetDevice(*device);
  if (e != cudaSuccess) return CudaError("cudaSetDevice", e);
  e = cudaStreamCreateWithFlags(stream, cudaStreamNonBlocking);
  if (e != cudaSuccess) return CudaError("cudaStreamCreateWithFlags", e);
  return Status::Ok();
}

// An NCCL communicator over the ranks of `group`: its rank 0 makes the
// unique id and broadcasts it through the engine's bootstrap (with its
// result, so a failure there is seen by all).
Status InitComm(NcclBootstrap& bootstrap, NcclBootstrap::Group group,
                ncclComm_t* out) {
  const NcclBootstrap::Place me = bootstrap.place(group);
  struct {
    int result;
    ncclUniqueId id;
  } boot;
  std::memset(&boot, 0, sizeof boot);
  if (me.rank == 0) boot.result = ncclGetUniqueId(&boot.id);
  const Status sent = bootstrap.Broadcast(group, &boot, sizeof boot);
  if (!sent.ok()) return sent;
  if (boot.result != ncclSuccess) {
    return NcclError("ncclGetUniqueId", static_cast<ncclResult_t>(boot.result));
  }
  const ncclResult_t r = ncclCommInitRank(out, me.size, boot.id, me.rank);
  if (r != ncclSuccess) {
    *out = nullptr;
    return NcclError("ncclCommInitRank", r);
  }
  return Status::Ok();
}

// Grows a kept buffer (device or pinned host) to at least `bytes`.
Status GrowScratch(void** buffer, std::size_t* capacity, std::size_t bytes,
                   void** ptr, cudaError_t (*allocate)(void**, std::size_t),
                   cudaError_t (*release)(void*), const char* call) {
  if (bytes > *capacity) {
    if (*buffer != nullptr) release(*buffer);
    *buffer = nullptr;
    *capacity = 0;
    const cudaError_t e = allocate(buffer, bytes);
    if (e != cudaSuccess) {
      *buffer = nullptr;
      return CudaError(call, e);
    }
    *capacity = bytes;
  }
  *ptr = *buffer;
  return Status::Ok();
}

void DestroyComm(ncclComm_t comm) {
  if (comm == nullptr) return;
  ncclResult_t async = ncclSuccess;
  // A communicator in error cannot finalize cleanly; abort it instead.
  if (ncclCommGetAsyncError(comm, &async) != ncclSuccess ||
      async != ncclSuccess || ncclCommFinalize(comm) != ncclSuccess) {
    ncclCommAbort(comm);
    return;
  }
  ncclCommDestroy(comm);
}

}  // namespace

Status CudaError(const char* call, cudaError_t code) {
  return Status::Internal(std::string(call) +
                          " failed: " + cudaGetErrorString(code));
}

Status NcclError(const char* call, ncclResult_t code) {
  std::string text = std::string(call) + " failed: " + ncclGetErrorString(code);
  const char* last = ncclGetLastError(nullptr);
  if (last != nullptr && *last != '\0') text += std::string(": ") + last;
  return Status::Internal(text);
}

ncclRedOp_t NcclReduceOp(ReduceOp op, DataType dtype) {
  switch (op) {
    case ReduceOp::kMin:
      return ncclMin;
    case ReduceOp::kMax:
      return ncclMax;
    case ReduceOp::kProduct:
      return ncclProd;
    case ReduceOp::kAverage:
      // Integers are summed here and divided on the host (see Allreduce).
      return IsInteger(dtype) ? ncclSum : ncclAvg;
    case ReduceOp::kSum:
      break;
  }
  return ncclSum;
}

ncclDataType_t NcclType(DataType dtype) {
  switch (dtype) {
    case DataType::kUInt8:
      return ncclUint8;
    case DataType::kInt32:
      return ncclInt32;
    case DataType::kInt64:
      return ncclInt64;
    case DataType::kFloat16:
      return ncclFloat16;
    case DataType::kBFloat16:
      return ncclBfloat16;
    case DataType::kFloat32:
      return ncclFloat32;
    case DataType::kInt8:
      return ncclInt8;
    case DataType::kBool:
      return ncclUint8;
    case DataType::kInt16:  // NCCL has no 16-bit integers (Allreduce refuses)
    case DataType::kFloat64:
      break;
  }
  return ncclFloat64;
}

std::unique_ptr<Backend> MakeNcclBackend(NcclBootstrap& boot, Status* why_not) {
  using Group = NcclBootstrap::Group;
  // Not make_unique: the constructor is private to the factory.
  std::unique_ptr<NcclBackend> b(new NcclBackend());
  const NcclBootstrap::Place world = boot.place(Group::kWorld);
  b->rank_ = world.rank;
  b->size_ = world.size;
  Status s = boot.Agree(
      OpenDevice(boot.place(Group::kLocal), &b->device_, &b->stream_));
  if (s.ok()) s = boot.Agree(InitComm(boot, Group::kWorld, &b->world_));
  if (s.ok()) s = boot.Agree(InitComm(boot, Group::kLocal, &b->local_));
  if (s.ok()) s = boot.Agree(InitComm(boot, Group::kCross, &b->cross_));
  // Hierarchical shards line up across nodes only if nodes are equal.
  if (s.ok()) s = boot.UniformNodes(&b->uniform_nodes_);
  if (!s.ok()) {
    // Peers may be missing from a half-made communicator: abort, never
    // finalize (which would wait for them).
    for (ncclComm_t* comm : {&b->world_, &b->local_, &b->cross_}) {
      if (*comm != nullptr) ncclCommAbort(*comm);
      *comm = nullptr;
    }
    if (why_not != nullptr) *why_not = s;
    return nullptr;
  }
  if (why_not != nullptr) *why_not = Status::Ok();
  return b;
}

void GetNcclHandles(Backend& backend, NcclHandles* out) {
  auto* nccl = dynamic_cast<NcclBackend*>(&backend);
  if (nccl == nullptr || out == nullptr) return;
  out->world_comm = nccl->world();
  out->stream = nccl->stream();
  out->device = nccl->device();
}

bool NcclBuilt() { return true; }

int NcclVersionCode() {
  int version = 0;
  if (ncclGetVersion(&version) != ncclSuccess) return 0;
  return version;
}

bool HaveCudaDevice() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return count > 0;
}

bool IsDevicePointer(const void* ptr) {
  if (ptr == nullptr) return false;
  cudaPointerAttributes attributes{};
  if (cudaPointerGetAttributes(&attributes, ptr) != cudaSuccess) {
    cudaGetLastError();  // No driver or no device: not a device pointer.
    return false;
  }
  return attributes.type == cudaMemoryTypeDevice ||
         attributes.type == cudaMemoryTypeManaged;
}

NcclBackend::~NcclBackend() {
  if (device_ >= 0) cudaSetDevice(device_);
  // Every rank destroys its communicators in the same order.
  DestroyComm(cross_);
  DestroyComm(local_);
  DestroyComm(world_);
  if (device_scratch_ != nullptr) cudaFree(device_scratch_);
  if (host_scratch_ != nullptr) cudaFreeHost(host_scratch_);
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

Status NcclBackend::Activate() const {
  const cudaError_t e = cudaSetDevice(device_);
  if (e != cudaSuccess) return CudaError("cudaSetDevice", e);
  return Status::Ok();
}

Status NcclBackend::Synchronize(const char* what) const {
  // Polls instead of cudaStreamSynchronize so that a peer's failure, which
  // NCCL reports as an asynchronous error, ends the wait instead of hanging.
  for (;;) {
    const cudaError_t e = cudaStreamQuery(stream_);
    if (e == cudaSuccess) return Status::Ok();
    if (e != cudaErrorNotReady) {
      return CudaError((std::string("stream of ") + what).c_str(), e);
    }
    for (ncclComm_t comm : {world_, local_, cross_}) {
      ncclResult_t async = ncclSuccess;
      if (comm == nullptr) continue;
      const ncclResult_t r = ncclCommGetAsyncError(comm, &async);
      if (r != ncclSuccess) return NcclError("ncclCommGetAsyncError", r);
      if (async != ncclSuccess) return NcclError(what, async);
    }
    std::this_thread::yield();
  }
}

Status NcclBackend::DeviceScratch(std::size_t bytes, void** ptr) {
  return GrowScratch(&device_scratch_, &device_scratch_bytes_, bytes, ptr,
                     cudaMalloc, cudaFree, "cudaMalloc");
}

Status NcclBackend::HostScratch(std::size_t bytes, void** ptr) {
  return GrowScratch(&host_scratch_, &host_scratch_bytes_, bytes, ptr,
                     cudaMallocHost, cudaFreeHost, "cudaMallocHost");
}

Status NcclBackend::DivideOnHost(void* device_buffer, std::int64_t count,
                                 DataType dtype, int divisor) {
  const std::size_t bytes =
      static_cast<std::size_t>(count) * DataTypeSize(dtype);
  void* host = nullptr;
  Status s = HostScratch(bytes, &host);
  if (!s.ok()) return s;
  cudaError_t e = cudaMemcpyAsync(host, device_buffer, bytes,
                                  cudaMemcpyDeviceToHost, stream_);
  if (e != cudaSuccess) return CudaError("cudaMemcpyAsync", e);
  s = Synchronize("cudaMemcpyAsync");
  if (!s.ok()) return s;
  DivideBy(host, count, dtype, divisor);
  e = cudaMemcpyAsync(device_buffer, host, bytes, cudaMemcpyHostToDevice,
                      stream_);
  if (e != cudaSuccess) return CudaError("cudaMemcpyAsync", e);
  return Synchronize("cudaMemcpyAsync");
}

Status NcclBackend::Allreduce(const void* in, void* out, std::int64_t count,
                              DataType dtype, ReduceOp op) {
  if (count < 0) return Status::InvalidArgument("negative allreduce count");
  if (count == 0) return Status::Ok();
  if (dtype == DataType::kInt16) {
    return Status::InvalidArgument(
        "NCCL cannot reduce int16 tensors: reduce them in host memory");
  }
  Status s = Activate();
  if (!s.ok()) return s;
  const ncclResult_t r =
      ncclAllReduce(in, out, static_cast<std::size_t>(count), NcclType(dtype),
                    NcclReduceOp(op, dtype), world_, stream_);
  if (r != ncclSuccess) return NcclError("ncclAllReduce", r);
  s = Synchronize("ncclAllReduce");
  if (s.ok() && op == ReduceOp::kAverage && IsInteger(dtype) && size_ > 1) {
    s = DivideOnHost(out, count, dtype, size_);
  }
  return s;
}

Status NcclBackend::Broadcast(void* buffer, std::int64_t bytes, int root) {
  if (bytes < 0) return Status::InvalidArgument("negative broadcast size");
  if (root < 0 || root >= size_) {
    return Status::InvalidArgument("broadcast root " + std::to_string(root) +
                                   " out of range");
  }
  if (bytes == 0) return Status::Ok();
  const Status s = Activate();
  if (!s.ok()) return s;
  const ncclResult_t r =
      ncclBroadcast(buffer, buffer, static_cast<std::size_t>(bytes), ncclUint8,
                    root, world_, stream_);
  if (r != ncclSuccess) return NcclError("ncclBroadcast", r);
  return Synchronize("ncclBroadcast");
}

Status NcclBackend::Allgatherv(
    const void* in, std::int64_t bytes, void* out,
    const std::vector<std::int64_t>& bytes_per_rank) {
  if (bytes_per_rank.size() != static_cast<std::size_t>(size_)) {
    return Status::InvalidArgument("allgather needs one size per rank");
  }
  if (bytes != bytes_per_rank[static_cast<std::size_t>(rank_)]) {
    return Status::InvalidArgument(
        "allgather input size disagrees with "
        "this rank's entry in bytes_per_rank");
  }
  std::vector<std::size_t> offsets(bytes_per_rank.size());
  std::size_t total = 0;
  bool equal = true;
  for (std::size_t r = 0; r < bytes_per_rank.size(); ++r) {
    if (bytes_per_rank[r] < 0) {
      return Status::InvalidArgument("negative allgather size");
    }
    offsets[r] = total;
    total += static_cast<std::size_t>(bytes_per_rank[r]);
    equal = equal && bytes_per_rank[r] == bytes_per_rank[0];
  }
  if (total == 0) return Status::Ok();
  Status s = Activate();
  if (!s.ok()) return s;
  char* dst = static_cast<char*>(out);
  const bool staged = !IsDevicePointer(out);
  if (staged) {
    void* scratch = nullptr;
    s = DeviceScratch(total, &scratch);
    if (!s.ok()) return s;
    dst = static_cast<char*>(scratch);
  }
  if (equal) {
    const ncclResult_t r = ncclAllGather(
        in, dst, static_cast<std::size_t>(bytes), ncclUint8, world_, stream_);
    if (r != ncclSuccess) return NcclError("ncclAllGather", r);
  } else {
    // Unequal sizes: each rank broadcasts its part; grouped so that NCCL
    // runs them together instead of one after another.
    ncclResult_t r = ncclGroupStart();
    if (r != ncclSuccess) return NcclError("ncclGroupStart", r);
    ncclResult_t first = ncclSuccess;
    for (int root = 0; root < size_ && first == ncclSuccess; ++root) {
      const std::size_t n = static_cast<std::size_t>(bytes_per_rank[root]);
      if (n == 0) continue;
      char* part = dst + offsets[static_cast<std::size_t>(root)];
      first = ncclBroadcast(root == rank_ ? in : part, part, n, ncclUint8, root,
                            world_, stream_);
    }
    // The group must be closed even when a call inside it failed.
    r = ncclGroupEnd();
    if (first != ncclSuccess) return NcclError("ncclBroadcast", first);
    if (r != ncclSuccess) return NcclError("ncclGroupEnd", r);
  }
  if (staged) {
    const cudaError_t e =
        cudaMemcpyAsync(out, dst, total, cudaMemcpyDeviceToHost, stream_);
    if (e != cudaSuccess) return CudaError("cudaMemcpyAsync", e);
  }
  return Synchronize(equal ? "ncclAllGather" : "ncclBroadcast");
}

}  // namespace hvdtune::internal
