#include "hvdtune/runtime.h"

#include <stdexcept>
#include <unordered_set>

#include "runtime_impl.h"

namespace hvdtune {

using internal::HandleState;
using internal::TensorEntry;

namespace {

const std::vector<std::uint8_t> kNoOutput;
const std::vector<std::int64_t> kNoShape;

Handle Failed(Status s) {
  auto state = std::make_shared<HandleState>();
  state->Complete(std::move(s));
  return Handle(state);
}

// Checks the arguments every collective shares; empty string when fine.
std::string CheckTensor(const std::string& name, const void* data,
                        std::span<const std::int64_t> shape, DataType dtype) {
  if (name.empty()) return "tensor name must not be empty";
  if (static_cast<int>(dtype) >= kNumDataTypes) {
    return "unknown dtype " + std::to_string(static_cast<int>(dtype)) +
           " for tensor '" + name + "'";
  }
  std::int64_t n = 1;
  for (std::int64_t d : shape) {
    if (d < 0) {
      return "negative dimension " + std::to_string(d) + " in tensor '" + name +
             "'";
    }
    n *= d;
  }
  if (n > 0 && data == nullptr) {
    return "null buffer for tensor '" + name + "' of " + std::to_string(n) +
           " elements";
  }
  return {};
}

// An entry for one tensor; the collective-specific fields are set by the
// caller.
TensorEntry MakeEntry(std::string name, CollectiveType type, DataType dtype,
                      std::span<const std::int64_t> shape, const void* input,
                      void* output) {
  TensorEntry e;
  e.request.name = std::move(name);
  e.request.type = type;
  e.request.dtype = dtype;
  e.request.shape.assign(shape.begin(), shape.end());
  e.input = input;
  e.output = output;
  return e;
}

}  // namespace

bool Handle::Poll() const {
  if (!state_) return true;
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->done;
}

Status Handle::Wait() const {
  if (!state_) return Status::InvalidArgument("empty handle");
  std::unique_lock<std::mutex> lock(state_->mu);
  state_->cv.wait(lock, [&] { return state_->done; });
  return state_->status;
}

Status Handle::status() const {
  if (!state_) return Status::InvalidArgument("empty handle");
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->status;
}

const std::vector<std::uint8_t>& Handle::output() const {
  return state_ ? state_->output : kNoOutput;
}

const std::vector<std::int64_t>& Handle::output_shape() const {
  return state_ ? state_->output_shape : kNoShape;
}

namespace {

// The environment path: a configuration error is not thrown here but voted
// on at init, so every rank fails together instead of some hanging.
std::unique_ptr<internal::RuntimeImpl> FromEnvironment(RuntimeOptions options) {
  const EnvLookup env = options.env ? options.env : ProcessEnv();
  RuntimeConfig config;
  std::string error;
  try {
    config = ParseConfig(env);
  } catch (const ConfigError& e) {
    error = e.what();
  }
  config.tune_num_groups = options.tune_num_groups;
  Services services = DefaultServices(config);
  for (auto& sink : options.sinks) services.sinks.push_back(std::move(sink));
  services.config_source = std::move(options.config_source);
  return std::make_unique<internal::RuntimeImpl>(
      std::move(config), std::move(services), std::move(error));
}

}  // namespace

Runtime::Runtime(RuntimeOptions options)
    : impl_(FromEnvironment(std::move(options))) {}

Runtime::Runtime(RuntimeConfig config, Services services)
    : impl_(std::make_unique<internal::RuntimeImpl>(std::move(config),
                                                    std::move(services))) {}

Runtime::~Runtime() = default;

void Runtime::Shutdown() { impl_->Shutdown(); }
bool Runtime::running() const { return impl_->running(); }
int Runtime::rank() const { return impl_->mpi().rank; }
int Runtime::size() const { return impl_->mpi().size; }
int Runtime::local_rank() const { return impl_->mpi().local_rank; }
int Runtime::local_size() const { return impl_->mpi().local_size; }
int Runtime::cross_rank() const { return impl_->mpi().cross_rank; }
int Runtime::cross_size() const { return impl_->mpi().cross_size; }

Handle Runtime::Allreduce(std::string name, const void* input, void* output,
                          std::span<const std::int64_t> shape, DataType dtype,
                          ReduceOp op) {
  std::string err = CheckTensor(name, input, shape, dtype);
  if (err.empty()) err = CheckTensor(name, output, shape, dtype);
  if (err.empty() && static_cast<int>(op) >= kNumReduceOps) {
    err = "unknown reduce op for tensor '" + name + "'";
  }
  if (!err.empty()) return Failed(Status::InvalidArgument(err));
  TensorEntry e = MakeEntry(std::move(name), CollectiveType::kAllreduce, dtype,
                            shape, input, output);
  e.request.op = op;
  return EnqueueOne(std::move(e));
}

Handle Runtime::GroupedAllreduce(std::string group,
                                 std::span<const AllreduceTensor> tensors,
                                 ReduceOp op) {
  std::string err;
  if (group.empty()) err = "group name must not be empty";
  if (err.empty() && tensors.empty()) {
    err = "grouped allreduce '" + group + "' has no tensors";
  }
  if (err.empty() && static_cast<int>(op) >= kNumReduceOps) {
    err = "unknown reduce op for group '" + group + "'";
  }
  std::unordered_set<std::string> names;
  for (const AllreduceTensor& t : tensors) {
    if (!err.empty()) break;
    err = CheckTensor(t.name, t.input, t.shape, t.dtype);
    if (err.empty()) err = CheckTensor(t.name, t.output, t.shape, t.dtype);
    if (err.empty() && !names.insert(t.name).second) {
      err = "tensor '" + t.name + "' appears twice in group '" + group + "'";
    }
  }
  if (!err.empty()) return Failed(Status::InvalidArgument(err));
  std::vector<TensorEntry> entries;
  entries.reserve(tensors.size());
  for (const AllreduceTensor& t : tensors) {
    TensorEntry e = MakeEntry(t.name, CollectiveType::kAllreduce, t.dtype,
                              t.shape, t.input, t.output);
    e.request.op = op;
    e.request.group = group;
    e.request.group_size = static_cast<std::int32_t>(tensors.size());
    entries.push_back(std::move(e));
  }
  return impl_->Enqueue(std::move(entries));
}

Handle Runtime::Broadcast(std::string name, void* buffer,
                          std::span<const std::int64_t> shape, DataType dtype,
                          int root) {
  std::string err = CheckTensor(name, buffer, shape, dtype);
  if (err.empty() && (root < 0 || root >= size())) {
    err = "broadcast root " + std::to_string(root) + " of tensor '" + name +
          "' is not a rank of 0.." + std::to_string(size() - 1);
  }
  if (!err.empty()) return Failed(Status::InvalidArgument(err));
  TensorEntry e = MakeEntry(std::move(name), CollectiveType::kBroadcast, dtype,
                            shape, buffer, buffer);
  e.request.root = root;
  return EnqueueOne(std::move(e));
}

Handle Runtime::Allgather(std::string name, const void* input,
                          std::span<const std::int64_t> shape, DataType dtype) {
  std::string err = CheckTensor(name, input, shape, dtype);
  if (err.empty() && shape.empty()) {
    err = "allgather of tensor '" + name + "' needs at least one dimension";
  }
  if (!err.empty()) return Failed(Status::InvalidArgument(err));
  return EnqueueOne(MakeEntry(std::move(name), CollectiveType::kAllgather,
                              dtype, shape, input, nullptr));
}

Handle Runtime::EnqueueOne(internal::TensorEntry entry) {
  std::vector<TensorEntry> one;
  one.push_back(std::move(entry));
  return impl_->Enqueue(std::move(one));
}

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
