// hvdtune._c10d: the "hvdtune" backend of torch.distributed. A c10d process
// group whose collectives are the runtime's (the one hvdtune._core built for
// this process), so that DDP's buckets are negotiated, fused, tuned and
// measured like any Horovod job's tensors.
//
// Every collective returns at once with a Work that one waiter thread per
// process group completes, in submission order, when the runtime's handle
// finishes (no thread or polling per call). Results the runtime holds
// (allgather, alltoall) are copied into the caller's tensors there, before
// the Work and its future complete.
//
// Names: the runtime matches collectives across ranks by name, and its
// response cache, fusion and autotuner's step detection want a name that
// comes back every step. A process group numbers the calls of each kind
// within a round; a round ends when a tensor (its storage and offset) is
// passed to the same kind of call again, as DDP's buckets are each step, or
// after kMaxRound calls. That depends only on which tensors the program
// passes, the same on every rank of an SPMD program, never on timing; the
// storages are held weakly, so that a freed tensor's address cannot come
// back as "the same tensor".
//
// torch 1.x: the backend is a c10d::ProcessGroup. torch 2.x moved the
// collectives to c10d::Backend (a ProcessGroup holds backends); the
// signatures of the collectives used here are the same. Only the base class
// differs (BackendBase below); this file is compile-tested against torch 1.13.

#include <torch/csrc/api/include/torch/version.h>
#include <torch/csrc/utils/pybind.h>

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>
#if TORCH_VERSION_MAJOR >= 2
#include <torch/csrc/distributed/c10d/Backend.hpp>
#endif

#include <pybind11/pybind11.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "hvdtune/runtime.h"
#include "runtime_ref.h"

namespace py = pybind11;

namespace hvdtune::c10d_backend {
namespace {

#if TORCH_VERSION_MAJOR >= 2
using BackendBase = ::c10d::Backend;
#else
using BackendBase = ::c10d::ProcessGroup;
#endif

using ::c10d::OpType;
using WorkPtr = c10::intrusive_ptr<::c10d::Work>;

constexpr std::size_t kMaxRound = 4096;

// Raised to Python as RuntimeError.
[[noreturn]] void Fail(const std::string& message) {
  C10_THROW_ERROR(Error, "hvdtune: " + message);
}

DataType ToDataType(const at::Tensor& t, const std::string& what) {
  switch (t.scalar_type()) {
    case at::kFloat:
      return DataType::kFloat32;
    case at::kDouble:
      return DataType::kFloat64;
    case at::kHalf:
      return DataType::kFloat16;
    case at::kBFloat16:
      return DataType::kBFloat16;
    case at::kInt:
      return DataType::kInt32;
    case at::kLong:
      return DataType::kInt64;
    case at::kShort:
      return DataType::kInt16;
    case at::kChar:
      return DataType::kInt8;
    case at::kByte:
      return DataType::kUInt8;
    case at::kBool:
      return DataType::kBool;
    default:
      Fail(what + ": dtype " + std::string(c10::toString(t.scalar_type())) +
           " is not supported (float32/64, float16, bfloat16, int8/16/32/64, "
           "uint8, bool are)");
  }
}

ReduceOp ToReduceOp(const ::c10d::ReduceOp& op, const std::string& what) {
  switch (static_cast<::c10d::ReduceOp::RedOpType>(op)) {
    case ::c10d::ReduceOp::SUM:
      return ReduceOp::kSum;
    case ::c10d::ReduceOp::AVG:
      return ReduceOp::kAverage;
    case ::c10d::ReduceOp::MIN:
      return ReduceOp::kMin;
    case ::c10d::ReduceOp::MAX:
      return ReduceOp::kMax;
    case ::c10d::ReduceOp::PRODUCT:
      return ReduceOp::kProduct;
    default:
      Fail(what +
           ": this reduce op is not supported (SUM, AVG, MIN, MAX and "
           "PRODUCT are)");
  }
}

// The tensor the runtime reads or writes: a dense CPU tensor.
void CheckTensor(const at::Tensor& t, const std::string& what) {
  if (!t.defined()) Fail(what + ": an undefined tensor");
  if (!t.device().is_cpu()) {
    Fail(what + ": a tensor on " + t.device().str() +
         "; the hvdtune backend takes CPU tensors");
  }
  if (t.is_sparse()) Fail(what + ": a sparse tensor is not supported");
  if (!t.is_contiguous()) {
    Fail(what + ": a non-contiguous tensor (call .contiguous() first)");
  }
}

std::vector<std::int64_t> Shape(const at::Tensor& t) {
  return std::vector<std::int64_t>(t.sizes().begin(), t.sizes().end());
}

// The shape of `t` as one row of elements.
std::vector<std::int64_t> Flat(const at::Tensor& t) { return {t.numel()}; }

// One collective in flight: the runtime's handle, and what to do with its
// result before the Work completes.
class HvdWork : public ::c10d::Work {
 public:
  HvdWork(int rank, OpType type, std::string what,
          std::vector<at::Tensor> outputs)
      : ::c10d::Work(rank, type),
        what_(std::move(what)),
        outputs_(std::move(outputs)),
        future_(c10::make_intrusive<c10::ivalue::Future>(
            c10::ListType::create(c10::TensorType::get()))) {}

  void Start(Handle handle, std::function<void(const Handle&)> finish,
             std::vector<at::Tensor> keep) {
    handle_ = std::move(handle);
    finish_ = std::move(finish);
    keep_ = std::move(keep);
  }
  const Handle& handle() const { return handle_; }
  const std::string& what() const { return what_; }

  bool isCompleted() override {
    std::lock_guard<std::mutex> lock(mutex_);
    return completed_;
  }
  bool isSuccess() const override {
    std::lock_guard<std::mutex> lock(mutex_);
    return completed_ && !exception_;
  }
  std::vector<at::Tensor> result() override { return outputs_; }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override {
    return future_;
  }

  bool wait(std::chrono::milliseconds timeout) override {
    // Tells the runtime that the application waits (it stops gathering a
    // burst of submissions).
    handle_.Poll();
    std::unique_lock<std::mutex> lock(mutex_);
    if (timeout == ::kNoTimeout) {
      cv_.wait(lock, [&] { return completed_; });
    } else if (!cv_.wait_for(lock, timeout, [&] { return completed_; })) {
      Fail(what_ + ": not finished after " + std::to_string(timeout.count()) +
           " ms (the wait's timeout)");
    }
    if (exception_) std::rethrow_exception(exception_);
    return true;
  }

  // On the waiter thread, once the handle finished.
  void Complete(int rank) {
    std::exception_ptr error;
    const Status status = handle_.status();
    if (!status.ok()) {
      error = std::make_exception_ptr(
          std::runtime_error("hvdtune: " + what_ + " failed on rank " +
                             std::to_string(rank) + ": " + status.message()));
    } else if (finish_) {
      try {
        finish_(handle_);
      } catch (const std::exception& e) {
        error = std::make_exception_ptr(
            std::runtime_error("hvdtune: " + what_ + " on rank " +
                               std::to_string(rank) + ": " + e.what()));
      }
    }
    finish_ = nullptr;
    keep_.clear();
    finish(error);
    if (error) {
      future_->setError(error);
    } else {
      future_->markCompleted(c10::IValue(outputs_));
    }
  }

 private:
  std::string what_;
  std::vector<at::Tensor> outputs_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  Handle handle_;
  std::function<void(const Handle&)> finish_;
  // Inputs (and temporaries) the runtime reads until it finished.
  std::vector<at::Tensor> keep_;
};

// Numbers the calls of one kind within a round (see the file comment).
class RoundNames {
 public:
  std::size_t Next(const at::Tensor& t) {
    const c10::StorageImpl* storage = t.storage().unsafeGetStorageImpl();
    const auto key = std::make_pair(storage, t.storage_offset());
    // A storage that was freed is not "the same tensor" even where the
    // allocator handed its address out again: whether it has is a matter of
    // timing (the waiter thread drops its references when it gets to it),
    // and the names must not depend on timing.
    const auto it = seen_.find(key);
    const bool again = it != seen_.end() && !it->second.expired();
    if (again || next_ >= kMaxRound) {
      seen_.clear();
      next_ = 0;
    }
    seen_.insert_or_assign(key, c10::weak_intrusive_ptr<c10::StorageImpl>(
                                    t.storage().getWeakStorageImpl()));
    return next_++;
  }

 private:
  std::map<std::pair<const c10::StorageImpl*, std::int64_t>,
           c10::weak_intrusive_ptr<c10::StorageImpl>>
      seen_;
  std::size_t next_ = 0;
};

class ProcessGroupHvdtune : public BackendBase {
 public:
  ProcessGroupHvdtune(std::weak_ptr<Runtime> runtime, int rank, int size,
                      std::string prefix)
      : BackendBase(rank, size),
        runtime_(std::move(runtime)),
        prefix_(std::move(prefix)) {
    waiter_ = std::thread([this] { WaitLoop(); });
  }

  ~ProcessGroupHvdtune() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    // The waiter takes the GIL to free a tensor that has a Python object;
    // the thread destroying the group (DDP's Reducer, from Python) may
    // hold it.
    if (Py_IsInitialized() && PyGILState_Check()) {
      py::gil_scoped_release release;
      waiter_.join();
    } else {
      waiter_.join();
    }
  }

  const std::string getBackendName() const override { return "hvdtune"; }

  WorkPtr allreduce(std::vector<at::Tensor>& tensors,
                    const ::c10d::AllreduceOptions& opts) override {
    const at::Tensor& t = One(tensors, "allreduce");
    const ReduceOp op = ToReduceOp(opts.reduceOp, "allreduce");
    return Submit(OpType::ALLREDUCE, "allreduce", t, {t},
                  [&](Runtime& rt, const std::string& name) {
                    return rt.Allreduce(name, t.data_ptr(), t.data_ptr(),
                                        Shape(t), ToDataType(t, name), op);
                  },
                  nullptr, {t});
  }

  WorkPtr allreduce_coalesced(
      std::vector<at::Tensor>& tensors,
      const ::c10d::AllreduceCoalescedOptions& opts) override {
    if (tensors.empty()) Fail("allreduce_coalesced: no tensors");
    const ReduceOp op = ToReduceOp(opts.reduceOp, "allreduce_coalesced");
    for (const at::Tensor& t : tensors) CheckTensor(t, "allreduce_coalesced");
    return Submit(
        OpType::ALLREDUCE_COALESCED, "allreduce_coalesced", tensors[0], tensors,
        [&](Runtime& rt, const std::string& name) {
          std::vector<AllreduceTensor> members;
          for (std::size_t i = 0; i < tensors.size(); ++i) {
            const at::Tensor& t = tensors[i];
            members.push_back({name + "." + std::to_string(i), t.data_ptr(),
                               t.data_ptr(), Shape(t), ToDataType(t, name)});
          }
          return rt.GroupedAllreduce(name, members, op);
        },
        nullptr, tensors);
  }

  WorkPtr broadcast(std::vector<at::Tensor>& tensors,
                    const ::c10d::BroadcastOptions& opts) override {
    const at::Tensor& t = One(tensors, "broadcast");
    const int root = Root(opts.rootRank, "broadcast");
    return Submit(OpType::BROADCAST, "broadcast", t, {t},
                  [&](Runtime& rt, const std::string& name) {
                    return rt.Broadcast(name, t.data_ptr(), Shape(t),
                                        ToDataType(t, name), root);
                  },
                  nullptr, {t});
  }

  WorkPtr reduce(std::vector<at::Tensor>& tensors,
                 const ::c10d::ReduceOptions& opts) override {
    // An allreduce into a copy; the root keeps the result.
    const at::Tensor& t = One(tensors, "reduce");
    const ReduceOp op = ToReduceOp(opts.reduceOp, "reduce");
    const int root = Root(opts.rootRank, "reduce");
    at::Tensor copy = t.clone();
    const bool is_root = root == getRank();
    return Submit(
        OpType::REDUCE, "reduce", t, {t},
        [&](Runtime& rt, const std::string& name) {
          return rt.Allreduce(name, copy.data_ptr(), copy.data_ptr(),
                              Shape(copy), ToDataType(copy, name), op);
        },
        [t, copy, is_root](const Handle&) {
          if (is_root) at::Tensor(t).copy_(copy);
        },
        {t, copy});
  }

  WorkPtr allgather(std::vector<std::vector<at::Tensor>>& outputs,
                    std::vector<at::Tensor>& inputs,
                    const ::c10d::AllgatherOptions&) override {
    const at::Tensor& in = One(inputs, "allgather");
    if (outputs.size() != 1) Fail("allgather: one list of outputs expected");
    std::vector<at::Tensor> outs = outputs[0];
    CheckList(outs, in, "allgather");
    return Submit(
        OpType::ALLGATHER, "allgather", in, outs,
        [&](Runtime& rt, const std::string& name) {
          return rt.Allgather(name, in.data_ptr(), Flat(in),
                              ToDataType(in, name));
        },
        [outs](const Handle& h) { SplitInto(h.output(), outs); }, {in});
  }

  WorkPtr _allgather_base(at::Tensor& output, at::Tensor& input,
                          const ::c10d::AllgatherOptions&) override {
    CheckTensor(input, "_allgather_base input");
    CheckTensor(output, "_allgather_base output");
    CheckSize(output, input.numel() * getSize(), input, "_allgather_base");
    at::Tensor out = output;
    return Submit(
        OpType::_ALLGATHER_BASE, "allgather_base", input, {out},
        [&](Runtime& rt, const std::string& name) {
          return rt.Allgather(name, input.data_ptr(), Flat(input),
                              ToDataType(input, name));
        },
        [out](const Handle& h) { SplitInto(h.output(), {out}); }, {input});
  }

  WorkPtr gather(std::vector<std::vector<at::Tensor>>& outputs,
                 std::vector<at::Tensor>& inputs,
                 const ::c10d::GatherOptions& opts) override {
    const at::Tensor& in = One(inputs, "gather");
    const int root = Root(opts.rootRank, "gather");
    std::vector<at::Tensor> outs;
    if (getRank() == root) {
      if (outputs.size() != 1) Fail("gather: one list of outputs expected");
      outs = outputs[0];
      CheckList(outs, in, "gather");
    } else if (!outputs.empty() && !outputs[0].empty()) {
      Fail("gather: only the root (rank " + std::to_string(root) +
           ") passes outputs");
    }
    return Submit(
        OpType::GATHER, "gather", in, outs,
        [&](Runtime& rt, const std::string& name) {
          return rt.Allgather(name, in.data_ptr(), Flat(in),
                              ToDataType(in, name));
        },
        [outs](const Handle& h) {
          if (!outs.empty()) SplitInto(h.output(), outs);
        },
        {in});
  }

  WorkPtr scatter(std::vector<at::Tensor>& outputs,
                  std::vector<std::vector<at::Tensor>>& inputs,
                  const ::c10d::ScatterOptions& opts) override {
    // A broadcast of the root's inputs, of which each rank keeps its own.
    const at::Tensor& out = One(outputs, "scatter");
    const int root = Root(opts.rootRank, "scatter");
    at::Tensor all = at::empty({getSize() * out.numel()}, out.options());
    if (getRank() == root) {
      if (inputs.size() != 1) Fail("scatter: one list of inputs expected");
      CheckList(inputs[0], out, "scatter");
      for (int r = 0; r < getSize(); ++r) {
        all.narrow(0, r * out.numel(), out.numel())
            .copy_(inputs[0][r].reshape({-1}));
      }
    } else if (!inputs.empty() && !inputs[0].empty()) {
      Fail("scatter: only the root (rank " + std::to_string(root) +
           ") passes inputs");
    }
    const std::int64_t offset = getRank() * out.numel();
    at::Tensor target = out;
    return Submit(
        OpType::SCATTER, "scatter", out, {out},
        [&](Runtime& rt, const std::string& name) {
          return rt.Broadcast(name, all.data_ptr(), Shape(all),
                              ToDataType(all, name), root);
        },
        [target, all, offset](const Handle&) {
          at::Tensor(target).view({-1}).copy_(
              all.narrow(0, offset, target.numel()));
        },
        {all});
  }

  WorkPtr reduce_scatter(std::vector<at::Tensor>& outputs,
                         std::vector<std::vector<at::Tensor>>& inputs,
                         const ::c10d::ReduceScatterOptions& opts) override {
    const at::Tensor& out = One(outputs, "reduce_scatter");
    const ReduceOp op = ToReduceOp(opts.reduceOp, "reduce_scatter");
    if (inputs.size() != 1) Fail("reduce_scatter: one list of inputs expected");
    CheckList(inputs[0], out, "reduce_scatter");
    // The runtime splits rows: one row of out.numel() elements per rank.
    at::Tensor stacked = at::empty({getSize(), out.numel()}, out.options());
    for (int r = 0; r < getSize(); ++r) {
      stacked[r].copy_(inputs[0][r].reshape({-1}));
    }
    at::Tensor target = out;
    return Submit(OpType::REDUCE_SCATTER, "reduce_scatter", out, {out},
                  [&](Runtime& rt, const std::string& name) {
                    return rt.Reducescatter(
                        name, stacked.data_ptr(), Shape(stacked),
                        ToDataType(stacked, name), op, target.data_ptr());
                  },
                  nullptr, {stacked, target});
  }

  WorkPtr _reduce_scatter_base(
      at::Tensor& output, at::Tensor& input,
      const ::c10d::ReduceScatterOptions& opts) override {
    CheckTensor(input, "_reduce_scatter_base input");
    CheckTensor(output, "_reduce_scatter_base output");
    CheckSize(input, output.numel() * getSize(), output,
              "_reduce_scatter_base");
    const ReduceOp op = ToReduceOp(opts.reduceOp, "_reduce_scatter_base");
    at::Tensor target = output;
    const std::vector<std::int64_t> rows = {getSize(), output.numel()};
    return Submit(OpType::_REDUCE_SCATTER_BASE, "reduce_scatter_base", input,
                  {target},
                  [&](Runtime& rt, const std::string& name) {
                    return rt.Reducescatter(name, input.data_ptr(), rows,
                                            ToDataType(input, name), op,
                                            target.data_ptr());
                  },
                  nullptr, {input, target});
  }

  WorkPtr alltoall_base(at::Tensor& output, at::Tensor& input,
                        std::vector<std::int64_t>& output_splits,
                        std::vector<std::int64_t>& input_splits,
                        const ::c10d::AllToAllOptions&) override {
    CheckTensor(input, "alltoall_base input");
    CheckTensor(output, "alltoall_base output");
    if (input.dim() == 0) Fail("alltoall_base: a scalar input");
    if (input.scalar_type() != output.scalar_type()) {
      Fail("alltoall_base: input and output dtypes differ");
    }
    std::vector<std::int64_t> splits = input_splits;
    CheckSplits(splits, input.size(0), "alltoall_base input_split_sizes");
    std::vector<std::int64_t> expected = output_splits;
    if (output.dim() == 0) Fail("alltoall_base: a scalar output");
    CheckSplits(expected, output.size(0), "alltoall_base output_split_sizes");
    at::Tensor target = output;
    return Submit(
        OpType::ALLTOALL_BASE, "alltoall_base", input, {target},
        [&](Runtime& rt, const std::string& name) {
          return rt.Alltoall(name, input.data_ptr(), Shape(input),
                             ToDataType(input, name), splits);
        },
        [target, expected](const Handle& h) {
          if (h.received_splits() != expected) {
            throw std::runtime_error(
                "the rows received from each rank differ from "
                "output_split_sizes");
          }
          SplitInto(h.output(), {target});
        },
        {input, target});
  }

  WorkPtr alltoall(std::vector<at::Tensor>& outputs,
                   std::vector<at::Tensor>& inputs,
                   const ::c10d::AllToAllOptions&) override {
    const auto n = static_cast<std::size_t>(getSize());
    if (inputs.size() != n || outputs.size() != n) {
      Fail("alltoall: " + std::to_string(inputs.size()) + " inputs and " +
           std::to_string(outputs.size()) + " outputs for " +
           std::to_string(n) + " ranks");
    }
    // Flattened and concatenated: rank d gets inputs[d]'s elements.
    std::vector<std::int64_t> splits;
    std::vector<at::Tensor> flat;
    for (std::size_t d = 0; d < n; ++d) {
      CheckTensor(inputs[d], "alltoall input");
      CheckTensor(outputs[d], "alltoall output");
      if (inputs[d].scalar_type() != inputs[0].scalar_type() ||
          outputs[d].scalar_type() != inputs[0].scalar_type()) {
        Fail("alltoall: the tensors' dtypes differ");
      }
      splits.push_back(inputs[d].numel());
      flat.push_back(inputs[d].reshape({-1}));
    }
    at::Tensor all = at::cat(flat);
    std::vector<at::Tensor> outs = outputs;
    return Submit(
        OpType::ALLTOALL, "alltoall", inputs[0], outs,
        [&](Runtime& rt, const std::string& name) {
          return rt.Alltoall(name, all.data_ptr(), Shape(all),
                             ToDataType(all, name), splits);
        },
        [outs](const Handle& h) {
          for (std::size_t r = 0; r < outs.size(); ++r) {
            if (h.received_splits().at(r) != outs[r].numel()) {
              throw std::runtime_error(
                  "rank " + std::to_string(r) + " sent " +
                  std::to_string(h.received_splits().at(r)) +
                  " elements for an output of " +
                  std::to_string(outs[r].numel()));
            }
          }
          SplitInto(h.output(), outs);
        },
        {all});
  }

  WorkPtr barrier(const ::c10d::BarrierOptions&) override {
    at::Tensor none;
    return Submit(OpType::BARRIER, "barrier", none, {},
                  [&](Runtime& rt, const std::string&) { return rt.Barrier(); },
                  nullptr, {});
  }

  WorkPtr send(std::vector<at::Tensor>&, int, int) override {
    Fail(
        "send is not supported: the runtime has collectives only "
        "(point-to-point needs another backend, e.g. a gloo group from "
        "dist.new_group(backend=\"gloo\"))");
  }
  WorkPtr recv(std::vector<at::Tensor>&, int, int) override {
    Fail(
        "recv is not supported: the runtime has collectives only "
        "(point-to-point needs another backend, e.g. a gloo group from "
        "dist.new_group(backend=\"gloo\"))");
  }
  WorkPtr recvAnysource(std::vector<at::Tensor>&, int) override {
    Fail("recvAnysource is not supported (collectives only)");
  }

  std::uint64_t calls() const { return calls_; }

 private:
  using SubmitFn = std::function<Handle(Runtime&, const std::string&)>;

  static const at::Tensor& One(const std::vector<at::Tensor>& tensors,
                               const std::string& what) {
    if (tensors.size() != 1) {
      Fail(what + ": one tensor per call (got " +
           std::to_string(tensors.size()) + ")");
    }
    CheckTensor(tensors[0], what);
    return tensors[0];
  }

  int Root(std::int64_t root, const std::string& what) const {
    if (root < 0 || root >= getSize()) {
      Fail(what + ": root rank " + std::to_string(root) + " outside 0.." +
           std::to_string(getSize() - 1));
    }
    return static_cast<int>(root);
  }

  // `tensors` (one per rank) each like `like`.
  void CheckList(const std::vector<at::Tensor>& tensors, const at::Tensor& like,
                 const std::string& what) const {
    if (tensors.size() != static_cast<std::size_t>(getSize())) {
      Fail(what + ": " + std::to_string(tensors.size()) + " tensors for " +
           std::to_string(getSize()) + " ranks");
    }
    for (const at::Tensor& t : tensors) {
      CheckTensor(t, what);
      if (t.numel() != like.numel() || t.scalar_type() != like.scalar_type()) {
        Fail(what +
             ": every tensor of the list must have the input's size "
             "and dtype");
      }
    }
  }

  static void CheckSize(const at::Tensor& t, std::int64_t numel,
                        const at::Tensor& other, const std::string& what) {
    if (t.numel() != numel || t.scalar_type() != other.scalar_type()) {
      Fail(what + ": the output must have size x the input's elements (" +
           std::to_string(numel) + " here, got " + std::to_string(t.numel()) +
           ") and the same dtype");
    }
  }

  void CheckSplits(std::vector<std::int64_t>& splits, std::int64_t rows,
                   const std::string& what) const {
    if (splits.empty()) {
      if (rows % getSize() != 0) {
        Fail(what + ": " + std::to_string(rows) +
             " rows do not split evenly "
             "over " +
             std::to_string(getSize()) + " ranks");
      }
      splits.assign(getSize(), rows / getSize());
      return;
    }
    std::int64_t sum = 0;
    for (std::int64_t s : splits) sum += s;
    if (splits.size() != static_cast<std::size_t>(getSize()) || sum != rows) {
      Fail(what + ": " + std::to_string(splits.size()) + " splits summing to " +
           std::to_string(sum) + " for " + std::to_string(rows) + " rows and " +
           std::to_string(getSize()) + " ranks");
    }
  }

  // Copies the runtime's result bytes into `outs`, one after the other.
  static void SplitInto(const std::vector<std::uint8_t>& bytes,
                        const std::vector<at::Tensor>& outs) {
    std::size_t offset = 0;
    for (const at::Tensor& t : outs) {
      const std::size_t n = t.numel() * t.element_size();
      if (offset + n > bytes.size()) {
        throw std::runtime_error("the result has " +
                                 std::to_string(bytes.size()) +
                                 " bytes, fewer than the outputs hold");
      }
      std::memcpy(t.data_ptr(), bytes.data() + offset, n);
      offset += n;
    }
    if (offset != bytes.size()) {
      throw std::runtime_error(
          "the result has " + std::to_string(bytes.size()) +
          " bytes, the outputs hold " + std::to_string(offset));
    }
  }

  WorkPtr Submit(OpType type, const std::string& kind, const at::Tensor& key,
                 std::vector<at::Tensor> outputs, const SubmitFn& submit,
                 std::function<void(const Handle&)> finish,
                 std::vector<at::Tensor> keep) {
    const std::shared_ptr<Runtime> rt = runtime_.lock();
    if (!rt || !rt->running()) {
      Fail(kind +
           ": the hvdtune runtime is shut down (hvdtune.shutdown(), or a "
           "rank failed or left)");
    }
    std::size_t index;
    {
      std::lock_guard<std::mutex> lock(mu_);
      RoundNames& names = rounds_[kind];
      index = key.defined() ? names.Next(key) : barriers_++;
    }
    const std::string name = prefix_ + kind + "." + std::to_string(index);
    std::string what = kind + " '" + name + "'";
    if (key.defined()) {
      what += " (" + std::string(c10::toString(key.scalar_type())) + " " +
              c10::str(key.sizes()) + ")";
    }
    auto work =
        c10::make_intrusive<HvdWork>(getRank(), type, what, std::move(outputs));
    Handle handle = submit(*rt, name);
    ++calls_;
    // Refused at submission (bad arguments, a name in flight): raised here.
    const Status early = handle.status();
    if (early.code() == StatusCode::kInvalidArgument) {
      Fail(what + " on rank " + std::to_string(getRank()) + ": " +
           early.message());
    }
    work->Start(std::move(handle), std::move(finish), std::move(keep));
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.push_back(work);
    }
    cv_.notify_one();
    return work;
  }

  // Completes the Works in submission order: the runtime finishes a
  // group's collectives in the order its ranks agreed on, which is mostly
  // the submission order.
  void WaitLoop() {
    for (;;) {
      c10::intrusive_ptr<HvdWork> work;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
        if (queue_.empty()) return;
        work = std::move(queue_.front());
        queue_.pop_front();
      }
      work->handle().Wait();
      work->Complete(getRank());
    }
  }

  std::weak_ptr<Runtime> runtime_;
  const std::string prefix_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<c10::intrusive_ptr<HvdWork>> queue_;
  bool stop_ = false;
  std::map<std::string, RoundNames> rounds_;
  std::size_t barriers_ = 0;
  std::uint64_t calls_ = 0;
  std::thread waiter_;
};

std::weak_ptr<Runtime> FromCapsule(const py::capsule& ref) {
  auto* weak = static_cast<std::weak_ptr<Runtime>*>(
      PyCapsule_GetPointer(ref.ptr(), python::kRuntimeRefCapsule));
  if (weak == nullptr) throw py::error_already_set();
  return *weak;
}

}  // namespace
}  // namespace hvdtune::c10d_backend

PYBIND11_MODULE(_c10d, m) {
  using hvdtune::c10d_backend::BackendBase;
  using hvdtune::c10d_backend::ProcessGroupHvdtune;
  m.doc() =
      "The hvdtune backend of torch.distributed (registered by "
      "hvdtune.torch)";
  m.attr("torch_version") = std::to_string(TORCH_VERSION_MAJOR) + "." +
                            std::to_string(TORCH_VERSION_MINOR);
  py::class_<ProcessGroupHvdtune, BackendBase,
             c10::intrusive_ptr<ProcessGroupHvdtune>>(m, "ProcessGroupHvdtune")
      .def(py::init([](const py::capsule& runtime_ref, int rank, int size,
                       const std::string& prefix) {
             const std::weak_ptr<hvdtune::Runtime> weak =
                 hvdtune::c10d_backend::FromCapsule(runtime_ref);
             const std::shared_ptr<hvdtune::Runtime> rt = weak.lock();
             if (!rt) throw std::runtime_error("hvdtune: no runtime");
             if (rt->rank() != rank || rt->size() != size) {
               throw std::runtime_error(
                   "hvdtune: torch.distributed says rank " +
                   std::to_string(rank) + " of " + std::to_string(size) +
                   ", the hvdtune runtime rank " + std::to_string(rt->rank()) +
                   " of " + std::to_string(rt->size()) +
                   " (start the job with mpirun or hvd-tune run, whose ranks "
                   "the runtime uses, and let init_process_group take them "
                   "from there)");
             }
             return c10::make_intrusive<ProcessGroupHvdtune>(weak, rank, size,
                                                             prefix);
           }),
           py::arg("runtime_ref"), py::arg("rank"), py::arg("size"),
           py::arg("prefix"))
      .def_property_readonly("calls", &ProcessGroupHvdtune::calls,
                             "Collectives submitted so far.");
}
