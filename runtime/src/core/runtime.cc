#include "hvdtune/runtime.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <stdexcept>
#include <unordered_set>

#include "core/argument_checks.h"
#include "core/backends/nccl/nccl_backend.h"
#include "core/runtime_impl.h"

namespace hvdtune {

namespace internal {

TensorSize SizeOf(std::string_view name, std::span<const std::int64_t> shape,
                  DataType dtype, std::int64_t max_bytes) {
  TensorSize out;
  const int t = static_cast<int>(dtype);
  if (t < 0 || t >= kNumDataTypes) {
    out.error = "unknown dtype " + std::to_string(t) + " for tensor '" +
                std::string(name) + "' (0.." +
                std::to_string(kNumDataTypes - 1) + ")";
    return out;
  }
  for (std::int64_t d : shape) {
    if (d < 0) {
      out.error = "negative dimension " + std::to_string(d) + " in tensor '" +
                  std::string(name) + "'";
      return out;
    }
  }
  // Dimensions multiply in checked arithmetic: {3, 2^62} must not wrap to a
  // small (or zero) count that would pass as a valid tensor.
  const auto elem = static_cast<std::int64_t>(DataTypeSize(dtype));
  std::int64_t n = 1;
  bool zero = false;
  for (std::int64_t d : shape) zero = zero || d == 0;
  if (zero) n = 0;
  std::int64_t bytes = 0;
  bool overflow = false;
  for (std::size_t i = 0; !zero && !overflow && i < shape.size(); ++i) {
    overflow = __builtin_mul_overflow(n, shape[i], &n);
  }
  overflow = overflow || __builtin_mul_overflow(n, elem, &bytes);
  if (overflow || bytes > max_bytes) {
    std::string dims;
    for (std::int64_t d : shape) {
      dims += (dims.empty() ? "" : ", ") + std::to_string(d);
    }
    out.error = "tensor '" + std::string(name) + "' of shape {" + dims +
                "} is too large: " + "its size in bytes does not fit in " +
                std::to_string(max_bytes) + " bytes";
    return out;
  }
  out.elements = n;
  out.bytes = bytes;
  return out;
}

namespace {

constexpr std::int64_t kMaxBytes = std::numeric_limits<std::int64_t>::max();

// Name, dtype, shape and buffer: what every collective shares.
std::string CheckTensor(std::string_view name, const void* data,
                        std::span<const std::int64_t> shape, DataType dtype,
                        std::int64_t max_bytes) {
  if (name.empty()) return "tensor name must not be empty";
  TensorSize size = SizeOf(name, shape, dtype, max_bytes);
  if (!size.error.empty()) return size.error;
  if (size.elements > 0 && data == nullptr) {
    return "null buffer for tensor '" + std::string(name) + "' of " +
           std::to_string(size.elements) + " elements";
  }
  return {};
}

}  // namespace

std::string CheckAllreduceArgs(std::string_view name, const void* input,
                               const void* output,
                               std::span<const std::int64_t> shape,
                               DataType dtype, ReduceOp op) {
  // The input's size check holds for the output (the same shape): only its
  // buffer is left to check.
  std::string err = CheckTensor(name, input, shape, dtype, kMaxBytes);
  if (err.empty() && output == nullptr) {
    err = CheckTensor(name, output, shape, dtype, kMaxBytes);
  }
  const int o = static_cast<int>(op);
  if (err.empty() && (o < 0 || o >= kNumReduceOps)) {
    err = "unknown reduce op " + std::to_string(o) + " for tensor '" +
          std::string(name) + "' (0.." + std::to_string(kNumReduceOps - 1) +
          ")";
  }
  if (err.empty() && dtype == DataType::kBool) {
    err = "bool tensor '" + std::string(name) +
          "' cannot be reduced (broadcast, allgather and alltoall move bool "
          "tensors; reduce an integer type instead)";
  }
  return err;
}

std::string CheckBroadcastArgs(std::string_view name, const void* buffer,
                               std::span<const std::int64_t> shape,
                               DataType dtype, int root, int world_size) {
  std::string err = CheckTensor(name, buffer, shape, dtype, kMaxBytes);
  if (err.empty() && (root < 0 || root >= world_size)) {
    err = "broadcast root " + std::to_string(root) + " of tensor '" +
          std::string(name) + "' is not a rank of 0.." +
          std::to_string(world_size - 1);
  }
  return err;
}

std::string CheckAllgatherArgs(std::string_view name, const void* input,
                               std::span<const std::int64_t> shape,
                               DataType dtype, int world_size) {
  const std::int64_t max = kMaxBytes / std::max(world_size, 1);
  std::string err = CheckTensor(name, input, shape, dtype, max);
  if (err.empty() && shape.empty()) {
    err = "allgather of tensor '" + std::string(name) +
          "' needs at least one dimension";
  }
  return err;
}

std::string CheckReducescatterArgs(std::string_view name, const void* input,
                                   std::span<const std::int64_t> shape,
                                   DataType dtype, ReduceOp op) {
  // The output is the runtime's: only the input's buffer is the caller's.
  std::string err = CheckAllreduceArgs(name, input, input, shape, dtype, op);
  if (err.empty() && shape.empty()) {
    err = "reducescatter of tensor '" + std::string(name) +
          "' needs at least one dimension";
  }
  return err;
}

std::string CheckAlltoallArgs(std::string_view name, const void* input,
                              std::span<const std::int64_t> shape,
                              DataType dtype,
                              std::span<const std::int64_t> splits,
                              int world_size) {
  const std::int64_t max = kMaxBytes / std::max(world_size, 1);
  std::string err = CheckTensor(name, input, shape, dtype, max);
  if (!err.empty()) return err;
  const std::string tensor = "alltoall of tensor '" + std::string(name) + "'";
  if (shape.empty()) return tensor + " needs at least one dimension";
  if (splits.empty()) {
    if (shape[0] % world_size != 0) {
      return tensor + ": without splits the first dimension (" +
             std::to_string(shape[0]) +
             ") must be divisible by the number of ranks (" +
             std::to_string(world_size) + ")";
    }
    return {};
  }
  if (static_cast<int>(splits.size()) != world_size) {
    return tensor + " has " + std::to_string(splits.size()) +
           " splits; it needs one per rank (" + std::to_string(world_size) +
           ")";
  }
  std::int64_t sum = 0;
  for (std::int64_t s : splits) {
    if (s < 0) {
      return tensor + ": negative split " + std::to_string(s);
    }
    if (__builtin_add_overflow(sum, s, &sum)) break;
  }
  if (sum != shape[0]) {
    return tensor + ": the splits add up to " + std::to_string(sum) +
           " rows, not the first dimension " + std::to_string(shape[0]);
  }
  return {};
}

}  // namespace internal

using internal::EntrySpec;
using internal::HandleState;

namespace {

const std::vector<std::uint8_t> kNoOutput;
const std::vector<std::int64_t> kNoShape;
// The barrier's and the join's tensor names: one of each in flight per rank.
constexpr std::string_view kBarrierName = "hvdtune.barrier";
constexpr std::string_view kJoinName = "hvdtune.join";
constexpr std::int64_t kEmptyShape[] = {0};

Handle Failed(Status s) {
  auto state = std::make_shared<HandleState>();
  state->Complete(std::move(s));
  return Handle(state);
}

// A submission of one tensor; the collective-specific fields are set by the
// caller.
EntrySpec Spec(std::string_view name, CollectiveType type, DataType dtype,
               std::span<const std::int64_t> shape, const void* input,
               void* output) {
  EntrySpec spec;
  spec.name = name;
  spec.type = type;
  spec.dtype = dtype;
  spec.shape = shape;
  spec.input = input;
  spec.output = output;
  return spec;
}

}  // namespace

bool Handle::Poll() const {
  if (!state_) return true;
  // Finished: what a caller reads next was written before `done`.
  if (state_->done.load(std::memory_order_acquire)) return true;
  state_->NotifyWaiting();
  return state_->done.load(std::memory_order_acquire);
}

Status Handle::Wait() const {
  if (!state_) return Status::InvalidArgument("empty handle");
  // The common case once completions come in batches: already finished.
  if (state_->done.load(std::memory_order_acquire)) return state_->status;
  state_->NotifyWaiting();
  state_->completion_signal().Wait(state_->waited, state_->done);
  return state_->status;
}

bool Handle::WaitFor(double seconds) const {
  if (!state_) return true;
  if (state_->done.load(std::memory_order_acquire)) return true;
  state_->NotifyWaiting();
  const auto deadline =
      std::chrono::steady_clock::now() +
      std::chrono::duration_cast<std::chrono::steady_clock::duration>(
          std::chrono::duration<double>(seconds));
  return state_->completion_signal().WaitUntil(state_->waited, state_->done,
                                               deadline);
}

Status Handle::status() const {
  if (!state_) return Status::InvalidArgument("empty handle");
  // Unfinished: the status is still the initial one, and the finishing
  // thread may be writing it.
  if (state_->done.load(std::memory_order_acquire)) return state_->status;
  return Status::InProgress();
}

const std::vector<std::uint8_t>& Handle::output() const { return output(0); }

const std::vector<std::int64_t>& Handle::output_shape() const {
  return output_shape(0);
}

std::size_t Handle::num_outputs() const {
  return state_ ? state_->outputs.size() : 0;
}

const std::vector<std::uint8_t>& Handle::output(std::size_t i) const {
  return i < num_outputs() ? state_->outputs[i].bytes : kNoOutput;
}

const std::vector<std::int64_t>& Handle::output_shape(std::size_t i) const {
  return i < num_outputs() ? state_->outputs[i].shape : kNoShape;
}

const std::vector<std::int64_t>& Handle::received_splits() const {
  return num_outputs() > 0 ? state_->outputs[0].received_splits : kNoShape;
}

int Handle::last_joined_rank() const {
  return state_ && state_->done.load(std::memory_order_acquire)
             ? state_->last_joined_rank
             : -1;
}

Runtime::Runtime(RuntimeConfig config, Services services)
    : impl_(std::make_unique<internal::RuntimeImpl>(std::move(config),
                                                    std::move(services))) {}

Runtime::~Runtime() = default;

void Runtime::Shutdown() { impl_->Shutdown(); }
bool Runtime::running() const { return impl_->running(); }
bool Runtime::shut_down() const { return impl_->shut_down(); }
int Runtime::rank() const { return impl_->mpi().rank; }
int Runtime::size() const { return impl_->mpi().size; }
int Runtime::local_rank() const { return impl_->mpi().local_rank; }
int Runtime::local_size() const { return impl_->mpi().local_size; }
int Runtime::cross_rank() const { return impl_->mpi().cross_rank; }
int Runtime::cross_size() const { return impl_->mpi().cross_size; }

bool BuiltWithNccl() { return internal::NcclBuilt(); }
int NcclRuntimeVersion() { return internal::NcclVersionCode(); }

bool Runtime::has_nccl() const { return impl_->nccl() != nullptr; }
std::string Runtime::nccl_unavailable() const {
  return impl_->nccl() != nullptr ? std::string()
                                  : impl_->nccl_unavailable().message();
}
NcclHandles Runtime::nccl_handles() const {
  NcclHandles h;
  if (impl_->nccl() != nullptr) internal::GetNcclHandles(*impl_->nccl(), &h);
  return h;
}

Handle Runtime::Allreduce(std::string_view name, const void* input,
                          void* output, std::span<const std::int64_t> shape,
                          DataType dtype, ReduceOp op) {
  const std::string err =
      internal::CheckAllreduceArgs(name, input, output, shape, dtype, op);
  if (!err.empty()) return Failed(Status::InvalidArgument(err));
  EntrySpec spec =
      Spec(name, CollectiveType::kAllreduce, dtype, shape, input, output);
  spec.op = op;
  return Enqueue(std::span<const EntrySpec>(&spec, 1));
}

Handle Runtime::GroupedAllreduce(std::string group,
                                 std::span<const AllreduceTensor> tensors,
                                 ReduceOp op) {
  std::string err;
  if (group.empty()) err = "group name must not be empty";
  if (err.empty() && tensors.empty()) {
    err = "grouped allreduce '" + group + "' has no tensors";
  }
  const int o = static_cast<int>(op);
  if (err.empty() && (o < 0 || o >= kNumReduceOps)) {
    err =
        "unknown reduce op " + std::to_string(o) + " for group '" + group + "'";
  }
  std::unordered_set<std::string> names;
  for (const AllreduceTensor& t : tensors) {
    if (!err.empty()) break;
    err = internal::CheckAllreduceArgs(t.name, t.input, t.output, t.shape,
                                       t.dtype, op);
    if (err.empty() && !names.insert(t.name).second) {
      err = "tensor '" + t.name + "' appears twice in group '" + group + "'";
    }
  }
  if (!err.empty()) return Failed(Status::InvalidArgument(err));
  std::vector<EntrySpec> specs;
  specs.reserve(tensors.size());
  for (const AllreduceTensor& t : tensors) {
    EntrySpec& spec =
        specs.emplace_back(Spec(t.name, CollectiveType::kAllreduce, t.dtype,
                                t.shape, t.input, t.output));
    spec.op = op;
    spec.group = group;
    spec.group_size = static_cast<std::int32_t>(tensors.size());
  }
  return Enqueue(specs);
}

Handle Runtime::Broadcast(std::string_view name, void* buffer,
                          std::span<const std::int64_t> shape, DataType dtype,
                          int root) {
  const std::string err =
      internal::CheckBroadcastArgs(name, buffer, shape, dtype, root, size());
  if (!err.empty()) return Failed(Status::InvalidArgument(err));
  EntrySpec spec =
      Spec(name, CollectiveType::kBroadcast, dtype, shape, buffer, buffer);
  spec.root = root;
  return Enqueue(std::span<const EntrySpec>(&spec, 1));
}

Handle Runtime::Allgather(std::string_view name, const void* input,
                          std::span<const std::int64_t> shape, DataType dtype) {
  const std::string err =
      internal::CheckAllgatherArgs(name, input, shape, dtype, size());
  if (!err.empty()) return Failed(Status::InvalidArgument(err));
  const EntrySpec spec =
      Spec(name, CollectiveType::kAllgather, dtype, shape, input, nullptr);
  return Enqueue(std::span<const EntrySpec>(&spec, 1));
}

Handle Runtime::Barrier() {
  const EntrySpec spec = Spec(kBarrierName, CollectiveType::kBarrier,
                              DataType::kUInt8, kEmptyShape, nullptr, nullptr);
  return Enqueue(std::span<const EntrySpec>(&spec, 1));
}

Handle Runtime::Join() {
  const EntrySpec spec = Spec(kJoinName, CollectiveType::kJoin,
                              DataType::kUInt8, kEmptyShape, nullptr, nullptr);
  return Enqueue(std::span<const EntrySpec>(&spec, 1));
}

Handle Runtime::Reducescatter(std::string_view name, const void* input,
                              std::span<const std::int64_t> shape,
                              DataType dtype, ReduceOp op, void* output) {
  const std::string err =
      internal::CheckReducescatterArgs(name, input, shape, dtype, op);
  if (!err.empty()) return Failed(Status::InvalidArgument(err));
  EntrySpec spec =
      Spec(name, CollectiveType::kReducescatter, dtype, shape, input, output);
  spec.op = op;
  return Enqueue(std::span<const EntrySpec>(&spec, 1));
}

Handle Runtime::Alltoall(std::string_view name, const void* input,
                         std::span<const std::int64_t> shape, DataType dtype,
                         std::span<const std::int64_t> splits) {
  const std::string err =
      internal::CheckAlltoallArgs(name, input, shape, dtype, splits, size());
  if (!err.empty()) return Failed(Status::InvalidArgument(err));
  EntrySpec spec =
      Spec(name, CollectiveType::kAlltoall, dtype, shape, input, nullptr);
  spec.splits = splits;
  return Enqueue(std::span<const EntrySpec>(&spec, 1));
}

namespace {

// A grouped allgather's or reducescatter's members as submissions; "" or
// the reason they are refused.
std::string GroupSpecs(const std::string& group, CollectiveType type,
                       std::span<const InputTensor> tensors, ReduceOp op,
                       int world_size, std::vector<EntrySpec>* specs) {
  const std::string what(CollectiveTypeName(type));
  if (group.empty()) return "group name must not be empty";
  if (tensors.empty()) {
    return "grouped " + what + " '" + group + "' has no tensors";
  }
  std::unordered_set<std::string> names;
  for (const InputTensor& t : tensors) {
    std::string err = type == CollectiveType::kAllgather
                          ? internal::CheckAllgatherArgs(
                                t.name, t.input, t.shape, t.dtype, world_size)
                          : internal::CheckReducescatterArgs(
                                t.name, t.input, t.shape, t.dtype, op);
    if (!err.empty()) return err;
    if (!names.insert(t.name).second) {
      return "tensor '" + t.name + "' appears twice in group '" + group + "'";
    }
  }
  specs->reserve(tensors.size());
  for (const InputTensor& t : tensors) {
    EntrySpec& spec = specs->emplace_back(
        Spec(t.name, type, t.dtype, t.shape, t.input, nullptr));
    spec.op = op;
    spec.group = group;
    spec.group_size = static_cast<std::int32_t>(tensors.size());
  }
  return {};
}

}  // namespace

Handle Runtime::GroupedReducescatter(std::string group,
                                     std::span<const InputTensor> tensors,
                                     ReduceOp op) {
  std::vector<EntrySpec> specs;
  const std::string err = GroupSpecs(group, CollectiveType::kReducescatter,
                                     tensors, op, size(), &specs);
  if (!err.empty()) return Failed(Status::InvalidArgument(err));
  return Enqueue(specs);
}

Handle Runtime::GroupedAllgather(std::string group,
                                 std::span<const InputTensor> tensors) {
  std::vector<EntrySpec> specs;
  const std::string err = GroupSpecs(group, CollectiveType::kAllgather, tensors,
                                     ReduceOp::kSum, size(), &specs);
  if (!err.empty()) return Failed(Status::InvalidArgument(err));
  return Enqueue(specs);
}

Handle Runtime::Enqueue(std::span<const EntrySpec> specs) {
  return impl_->Enqueue(specs);
}

Status Runtime::StartTimeline(const std::string& path, bool mark_cycles) {
  return impl_->StartTimeline(path, mark_cycles);
}
Status Runtime::StopTimeline() { return impl_->StopTimeline(); }

KnobSettings Runtime::knobs() const { return impl_->knobs(); }
std::array<bool, kNumKnobs> Runtime::pinned_knobs() const {
  return impl_->pinned();
}
std::uint64_t Runtime::RequestKnobUpdate(const KnobSettings& values) {
  return impl_->RequestKnobUpdate(values);
}
std::uint64_t Runtime::knob_version() const { return impl_->knob_version(); }
RuntimeStats Runtime::stats() const { return impl_->stats(); }
void Runtime::MarkStep() { impl_->MarkStep(); }
AutotuneStatus Runtime::autotune_status() const {
  return impl_->autotune_status();
}
const RuntimeConfig& Runtime::config() const { return impl_->config(); }

}  // namespace hvdtune
