// hvdtune._core: the runtime's collectives on Python buffers (numpy arrays,
// anything with the buffer protocol) and torch CPU and CUDA tensors, without
// copies.
//
// One Runtime per process, built by the environment-driven path
// (Runtime(RuntimeOptions{}) = ParseConfig + DefaultServices), so
// HOROVOD_AUTOTUNE, the config store, metrics and the timeline behave as in
// a C++ application. The pure-Python packages hvdtune and hvdtune.torch sit
// on top of this module.

#include <mpi.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "errors.h"
#include "hvdtune/grouping.h"
#include "hvdtune/mpi.h"
#include "hvdtune/rendezvous.h"
#include "hvdtune/runtime.h"
#include "runtime_ref.h"
#include "tensors.h"

namespace py = pybind11;

namespace hvdtune::python {
namespace {

// ---------------------------------------------------------------------------
// The process's runtime and the collectives in flight.

struct Pending;

struct State {
  // Shared with the torch.distributed backend (hvdtune._c10d), which holds
  // weak references (RuntimeRef) and so never outlives a shut-down runtime.
  std::shared_ptr<Runtime> runtime;
  // The process sets this rank is in, by id (0 is the whole job, above):
  // one runtime each over its ranks, negotiating and fusing on its own.
  std::map<int, std::shared_ptr<Runtime>> sets;
  // Buffers of handles that Python dropped before they completed: kept
  // until the runtime is done with them.
  std::vector<std::shared_ptr<Pending>> orphans;
};

// Never destroyed: C++ static destructors run after MPI_Finalize (an atexit
// handler registered later), and Python's atexit shuts the runtime down.
State& GetState() {
  static State* state = new State;
  return *state;
}

// The runtime, also after another rank shut it down: ranks, sizes and
// status stay readable, and collectives fail with code "aborted".
Runtime& Rt() {
  State& s = GetState();
  if (!s.runtime) {
    Raise("not_initialized",
          "hvdtune is not initialized (call init() first, or shutdown() "
          "was called on this rank)");
  }
  return *s.runtime;
}

// The runtime of process set `id` (0: the whole job).
Runtime& Rt(int id) {
  if (id == 0) return Rt();
  State& s = GetState();
  const auto it = s.sets.find(id);
  if (it == s.sets.end()) {
    Raise("invalid_argument",
          "process set " + std::to_string(id) + ": rank " +
              std::to_string(Rt().rank()) +
              " is not in it (or it was removed); only its ranks may call "
              "its collectives");
  }
  return *it->second;
}

// What a collective keeps alive until it completes.
struct Pending {
  Handle handle;
  std::vector<TensorRef> refs;
  // Collectives whose results are the runtime's buffers (allgather,
  // reducescatter, alltoall, grouped forms): each member's dtype.
  std::vector<DataType> output_dtypes;
};

void PruneOrphans() {
  auto& orphans = GetState().orphans;
  std::erase_if(orphans, [](const std::shared_ptr<Pending>& p) {
    return p->handle.Poll();
  });
}

// The Python-visible handle. Dropping it before completion hands its
// buffers to the orphan list instead of freeing them under the runtime.
class PyHandle {
 public:
  explicit PyHandle(std::shared_ptr<Pending> pending)
      : pending_(std::move(pending)) {}
  PyHandle(const PyHandle&) = delete;
  PyHandle& operator=(const PyHandle&) = delete;
  ~PyHandle() {
    if (pending_ && !pending_->handle.Poll()) {
      GetState().orphans.push_back(std::move(pending_));
    }
  }

  bool Poll() const { return pending_->handle.Poll(); }

  // Waits in slices with the GIL released, so other Python threads run and
  // Ctrl-C raises KeyboardInterrupt instead of waiting forever.
  void Wait() {
    const Handle& h = pending_->handle;
    if (!h.Poll()) {
      for (;;) {
        bool done = false;
        {
          py::gil_scoped_release release;
          done = h.WaitFor(0.1);
        }
        if (done) break;
        if (PyErr_CheckSignals() != 0) throw py::error_already_set();
      }
    }
    RaiseStatus(h.status());
  }

  const Handle& handle() const { return pending_->handle; }
  const std::vector<DataType>& output_dtypes() const {
    return pending_->output_dtypes;
  }

 private:
  std::shared_ptr<Pending> pending_;
};

// A result the runtime holds (member `index` of an allgather,
// reducescatter or alltoall) as a buffer that numpy and torch can view
// without a copy; it keeps the handle's state (and so the bytes) alive.
class GatherResult {
 public:
  GatherResult(Handle handle, DataType dtype, std::size_t index)
      : handle_(std::move(handle)), dtype_(dtype), index_(index) {}

  py::buffer_info Info() const {
    const std::vector<std::uint8_t>& bytes = handle_.output(index_);
    const std::vector<std::int64_t>& shape = handle_.output_shape(index_);
    const auto itemsize = static_cast<py::ssize_t>(DataTypeSize(dtype_));
    std::vector<py::ssize_t> dims(shape.begin(), shape.end());
    std::vector<py::ssize_t> strides(dims.size());
    py::ssize_t stride = itemsize;
    for (std::size_t i = dims.size(); i-- > 0;) {
      strides[i] = stride;
      stride *= dims[i];
    }
    // Never written again by the runtime once the handle completed.
    void* data = const_cast<std::uint8_t*>(bytes.data());
    return py::buffer_info(data, itemsize, Format(),
                           static_cast<py::ssize_t>(dims.size()), dims,
                           strides);
  }
  DataType dtype() const { return dtype_; }

 private:
  std::string Format() const {
    switch (dtype_) {
      case DataType::kUInt8:
        return "B";
      case DataType::kInt8:
        return "b";
      case DataType::kInt16:
        return "h";
      case DataType::kBool:
        return "?";
      case DataType::kInt32:
        return "i";
      case DataType::kInt64:
        return "q";
      case DataType::kFloat16:
        return "e";
      case DataType::kBFloat16:
        return "H";  // raw bits; hvdtune.torch views them as bfloat16
      case DataType::kFloat32:
        return "f";
      case DataType::kFloat64:
        return "d";
    }
    return "B";
  }

  Handle handle_;
  DataType dtype_;
  std::size_t index_;
};

std::unique_ptr<PyHandle> MakeHandle(std::shared_ptr<Pending> pending) {
  if (!GetState().orphans.empty()) PruneOrphans();
  // Refused at submission (a name already in flight on this rank, a device
  // tensor without NCCL): the caller hears it at once, as Horovod raises
  // these on the submitting call, not at synchronize.
  if (pending->handle.Poll() &&
      pending->handle.status().code() == StatusCode::kInvalidArgument) {
    RaiseStatus(pending->handle.status());
  }
  return std::make_unique<PyHandle>(std::move(pending));
}

// ---------------------------------------------------------------------------
// Module functions.

// Destroys the runtime without the GIL: its teardown (the engine's
// connections to peers that may be gone) can take up to the engine's
// timeout, and the Python threads of the process (the elastic heartbeat
// among them) must run meanwhile. The runtime holds no Python object.
void DropRuntime(State& s) {
  std::shared_ptr<Runtime> old = std::move(s.runtime);
  py::gil_scoped_release release;
  old.reset();
}

void Init(bool tune_num_groups) {
  State& s = GetState();
  // Initialised until this rank shuts down, as in Horovod: a peer that shut
  // down and exited stops the runtime but does not uninitialise this rank,
  // and building a new Runtime (collective) would wait for it forever.
  if (s.runtime && !s.runtime->shut_down()) return;
  DropRuntime(s);
  RuntimeOptions options;
  options.tune_num_groups = tune_num_groups;
  try {
    // MPI init and the ranks' configuration agreement block; let other
    // Python threads run meanwhile.
    py::gil_scoped_release release;
    s.runtime = std::make_shared<Runtime>(std::move(options));
  } catch (const ConfigError& e) {
    Raise("config", e.what());
  } catch (const std::exception& e) {
    Raise("internal", std::string("init failed: ") + e.what());
  }
}

// The environment of a process set's runtime: the job's, without the
// autotuner, metrics and timeline, which belong to the whole job's runtime
// (a set runs the job's configured knob values).
EnvLookup ProcessSetEnv() {
  return [env = ProcessEnv()](std::string_view name) {
    for (std::string_view part : {"AUTOTUNE", "METRICS", "TIMELINE"}) {
      if (name.find(part) != std::string_view::npos) {
        return std::optional<std::string>();
      }
    }
    return env(name);
  };
}

// Collective over `ranks` (ascending ranks of the job); every rank of the
// job calls it with the same id and ranks, and the others keep nothing.
void AddProcessSet(int id, const std::vector<int>& ranks) {
  State& s = GetState();
  Runtime& world = Rt();
  if (id <= 0 || s.sets.count(id) != 0) {
    Raise("invalid_argument",
          "process set id " + std::to_string(id) + " is taken or invalid");
  }
  if (std::find(ranks.begin(), ranks.end(), world.rank()) == ranks.end()) {
    return;
  }
  RuntimeOptions options;
  options.env = ProcessSetEnv();
  options.ranks = ranks;
  try {
    py::gil_scoped_release release;
    s.sets[id] = std::make_shared<Runtime>(std::move(options));
  } catch (const ConfigError& e) {
    Raise("config", e.what());
  } catch (const std::exception& e) {
    Raise("internal", std::string("process set: ") + e.what());
  }
}

// Every rank of the set calls it; pending collectives of the set fail.
bool RemoveProcessSet(int id) {
  State& s = GetState();
  const auto it = s.sets.find(id);
  if (it == s.sets.end()) return false;
  {
    py::gil_scoped_release release;
    it->second->Shutdown();
  }
  s.sets.erase(it);
  PruneOrphans();
  return true;
}

void Shutdown() {
  State& s = GetState();
  while (!s.sets.empty()) RemoveProcessSet(s.sets.begin()->first);
  if (s.runtime) {
    {
      py::gil_scoped_release release;
      s.runtime->Shutdown();
    }
    DropRuntime(s);
  }
  // Every pending handle failed with kAborted: nothing uses the buffers.
  PruneOrphans();
}

std::unique_ptr<PyHandle> AllreduceAsync(const std::string& name,
                                         py::handle input, py::handle output,
                                         const std::string& op,
                                         int process_set) {
  Runtime& rt = Rt(process_set);
  const ReduceOp reduce = ParseOp(op);
  auto pending = std::make_shared<Pending>();
  TensorRef in = Resolve(input, false, "input of allreduce '" + name + "'");
  TensorRef out =
      input.is(output)
          ? in
          : Resolve(output, true, "output of allreduce '" + name + "'");
  CheckSameLayout(in, out, "allreduce '" + name + "'");
  pending->handle =
      rt.Allreduce(name, in.data, out.data, in.shape, in.dtype, reduce);
  pending->refs.push_back(std::move(in));
  pending->refs.push_back(std::move(out));
  return MakeHandle(std::move(pending));
}

std::unique_ptr<PyHandle> GroupedAllreduceAsync(
    const std::string& group, const std::vector<std::string>& names,
    const py::sequence& inputs, const py::sequence& outputs,
    const std::string& op, int process_set) {
  Runtime& rt = Rt(process_set);
  const ReduceOp reduce = ParseOp(op);
  const std::size_t n = names.size();
  if (static_cast<std::size_t>(py::len(inputs)) != n ||
      static_cast<std::size_t>(py::len(outputs)) != n) {
    Raise("invalid_argument",
          "grouped allreduce '" + group + "': " + std::to_string(n) +
              " names, " + std::to_string(py::len(inputs)) + " inputs and " +
              std::to_string(py::len(outputs)) + " outputs");
  }
  auto pending = std::make_shared<Pending>();
  std::vector<AllreduceTensor> tensors(n);
  for (std::size_t i = 0; i < n; ++i) {
    const std::string what =
        "grouped allreduce '" + group + "' member '" + names[i] + "'";
    py::handle in_obj = inputs[i];
    py::handle out_obj = outputs[i];
    TensorRef in = Resolve(in_obj, false, "input of " + what);
    TensorRef out =
        in_obj.is(out_obj) ? in : Resolve(out_obj, true, "output of " + what);
    CheckSameLayout(in, out, what);
    tensors[i] =
        AllreduceTensor{names[i], in.data, out.data, in.shape, in.dtype};
    pending->refs.push_back(std::move(in));
    pending->refs.push_back(std::move(out));
  }
  pending->handle = rt.GroupedAllreduce(group, tensors, reduce);
  return MakeHandle(std::move(pending));
}

std::unique_ptr<PyHandle> BroadcastAsync(const std::string& name,
                                         py::handle buffer, int root,
                                         int process_set) {
  Runtime& rt = Rt(process_set);
  auto pending = std::make_shared<Pending>();
  TensorRef buf = Resolve(buffer, true, "buffer of broadcast '" + name + "'");
  pending->handle = rt.Broadcast(name, buf.data, buf.shape, buf.dtype, root);
  pending->refs.push_back(std::move(buf));
  return MakeHandle(std::move(pending));
}

TensorRef ResolveRows(py::handle obj, const std::string& what) {
  TensorRef in = Resolve(obj, false, what);
  if (in.shape.empty()) {
    Raise("invalid_argument", what +
                                  ": a scalar; it needs at least one "
                                  "dimension");
  }
  return in;
}

// A collective of one input whose result the runtime holds; `submit`
// enqueues it.
template <typename Submit>
std::unique_ptr<PyHandle> OneInputAsync(py::handle input,
                                        const std::string& what,
                                        Submit submit) {
  auto pending = std::make_shared<Pending>();
  TensorRef in = ResolveRows(input, what);
  pending->handle = submit(in);
  pending->output_dtypes.push_back(in.dtype);
  pending->refs.push_back(std::move(in));
  return MakeHandle(std::move(pending));
}

std::unique_ptr<PyHandle> AllgatherAsync(const std::string& name,
                                         py::handle input, int process_set) {
  Runtime& rt = Rt(process_set);
  return OneInputAsync(input, "input of allgather '" + name + "'",
                       [&](const TensorRef& in) {
                         return rt.Allgather(name, in.data, in.shape, in.dtype);
                       });
}

std::unique_ptr<PyHandle> ReducescatterAsync(const std::string& name,
                                             py::handle input,
                                             const std::string& op,
                                             int process_set) {
  Runtime& rt = Rt(process_set);
  const ReduceOp reduce = ParseOp(op);
  return OneInputAsync(
      input, "input of reducescatter '" + name + "'", [&](const TensorRef& in) {
        return rt.Reducescatter(name, in.data, in.shape, in.dtype, reduce);
      });
}

// The members of a grouped allgather or reducescatter.
std::vector<InputTensor> GroupInputs(const std::string& kind,
                                     const std::string& group,
                                     const std::vector<std::string>& names,
                                     const py::sequence& inputs,
                                     Pending& pending) {
  if (static_cast<std::size_t>(py::len(inputs)) != names.size()) {
    Raise("invalid_argument",
          kind + " '" + group + "': " + std::to_string(names.size()) +
              " names and " + std::to_string(py::len(inputs)) + " inputs");
  }
  std::vector<InputTensor> tensors(names.size());
  for (std::size_t i = 0; i < names.size(); ++i) {
    py::handle obj = inputs[i];
    TensorRef in = ResolveRows(
        obj, "input of " + kind + " '" + group + "' member '" + names[i] + "'");
    tensors[i] = InputTensor{names[i], in.data, in.shape, in.dtype};
    pending.output_dtypes.push_back(in.dtype);
    pending.refs.push_back(std::move(in));
  }
  return tensors;
}

std::unique_ptr<PyHandle> GroupedAllgatherAsync(
    const std::string& group, const std::vector<std::string>& names,
    const py::sequence& inputs, int process_set) {
  Runtime& rt = Rt(process_set);
  auto pending = std::make_shared<Pending>();
  std::vector<InputTensor> tensors =
      GroupInputs("grouped allgather", group, names, inputs, *pending);
  pending->handle = rt.GroupedAllgather(group, tensors);
  return MakeHandle(std::move(pending));
}

std::unique_ptr<PyHandle> GroupedReducescatterAsync(
    const std::string& group, const std::vector<std::string>& names,
    const py::sequence& inputs, const std::string& op, int process_set) {
  Runtime& rt = Rt(process_set);
  const ReduceOp reduce = ParseOp(op);
  auto pending = std::make_shared<Pending>();
  std::vector<InputTensor> tensors =
      GroupInputs("grouped reducescatter", group, names, inputs, *pending);
  pending->handle = rt.GroupedReducescatter(group, tensors, reduce);
  return MakeHandle(std::move(pending));
}

std::unique_ptr<PyHandle> AlltoallAsync(const std::string& name,
                                        py::handle input,
                                        const std::vector<std::int64_t>& splits,
                                        int process_set) {
  Runtime& rt = Rt(process_set);
  return OneInputAsync(
      input, "input of alltoall '" + name + "'", [&](const TensorRef& in) {
        return rt.Alltoall(name, in.data, in.shape, in.dtype, splits);
      });
}

std::unique_ptr<PyHandle> BarrierAsync(int process_set) {
  auto pending = std::make_shared<Pending>();
  pending->handle = Rt(process_set).Barrier();
  return MakeHandle(std::move(pending));
}

std::unique_ptr<PyHandle> JoinAsync() {
  auto pending = std::make_shared<Pending>();
  pending->handle = Rt().Join();
  return MakeHandle(std::move(pending));
}

// A weak reference to the runtime of process set `id` (0: the whole job)
// for another extension module of this build (hvdtune._c10d): a capsule
// named kRuntimeRefCapsule holding a std::weak_ptr<Runtime>.
py::capsule RuntimeRef(int id) {
  Rt(id);  // raises when there is none
  State& s = GetState();
  const std::shared_ptr<Runtime>& rt = id == 0 ? s.runtime : s.sets.at(id);
  auto* ref = new std::weak_ptr<Runtime>(rt);
  return py::capsule(ref, kRuntimeRefCapsule, [](PyObject* capsule) {
    delete static_cast<std::weak_ptr<Runtime>*>(
        PyCapsule_GetPointer(capsule, kRuntimeRefCapsule));
  });
}

GatherResult GatherOutput(const PyHandle& h, std::size_t index) {
  if (index >= h.output_dtypes().size()) {
    Raise("invalid_argument",
          h.output_dtypes().empty()
              ? std::string("output(): this collective's results are the "
                            "caller's tensors")
              : "output(" + std::to_string(index) + "): it has " +
                    std::to_string(h.output_dtypes().size()) + " outputs");
  }
  if (!h.Poll()) Raise("invalid_argument", "output(): still in progress");
  RaiseStatus(h.handle().status());
  return GatherResult(h.handle(), h.output_dtypes()[index], index);
}

py::dict KnobsDict(const KnobSettings& values) {
  py::dict d;
  for (const KnobSpec& spec : KnobTable()) {
    d[py::str(std::string(spec.name))] = values.FormatValue(spec.id);
  }
  return d;
}

py::dict AutotuneStatusDict() {
  const AutotuneStatus st = Rt().autotune_status();
  py::dict d;
  d["phase"] = std::string(AutotunePhaseName(st.phase));
  d["samples"] = st.samples;
  d["default_score"] = st.default_score;
  d["best_score"] = st.best_score;
  d["best"] = KnobsDict(st.best);
  // The model's estimates once frozen (NaN where unknown).
  auto estimate = [](const ScoreEstimate& e) {
    py::dict x;
    x["mean"] = e.mean;
    x["low"] = e.low;
    x["high"] = e.high;
    x["samples"] = e.samples;
    return x;
  };
  d["best_estimate"] = estimate(st.best_estimate);
  d["default_estimate"] = estimate(st.default_estimate);
  d["gain"] = estimate(st.gain);
  d["kept_initial"] = st.kept_initial;
  d["tuned_knobs"] = st.tuned_knobs;
  d["source"] = st.source;
  d["fingerprint"] = st.fingerprint;
  return d;
}

py::dict StatsDict() {
  const RuntimeStats st = Rt().stats();
  py::dict d;
  d["cycles"] = st.cycles;
  d["active_cycles"] = st.active_cycles;
  d["negotiation_seconds"] = st.negotiation_seconds;
  d["cache_hits"] = st.cache_hits;
  d["cache_misses"] = st.cache_misses;
  d["tensors_completed"] = st.tensors_completed;
  d["collective_calls"] = st.collective_calls;
  d["bytes_allreduced"] = st.bytes_allreduced;
  d["knob_version"] = st.knob_version;
  d["autotune_seconds"] = st.autotune_seconds;
  return d;
}

// Raw MPI on MPI_COMM_WORLD, for benchmarks that put the runtime beside
// plain MPI_Allreduce on the same buffers through the same binding. MPI must
// be up (init() brings it up, and it stays up after shutdown()).
void RequireMpi(const char* what) {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (!initialized || finalized) {
    Raise("not_initialized",
          std::string(what) + ": MPI is not initialized (call init() once)");
  }
}

void MpiAllreduceSum(py::handle input, py::handle output) {
  RequireMpi("mpi_allreduce_sum");
  TensorRef in = Resolve(input, false, "input of mpi_allreduce_sum");
  TensorRef out = Resolve(output, true, "output of mpi_allreduce_sum");
  CheckSameLayout(in, out, "mpi_allreduce_sum");
  const MPI_Datatype type = hvdtune::NativeMpiType(in.dtype);
  if (type == MPI_DATATYPE_NULL) {
    Raise("invalid_argument", "mpi_allreduce_sum: MPI has no type for " +
                                  std::string(DataTypeName(in.dtype)));
  }
  const std::int64_t count = NumElements(in.shape);
  int rc = MPI_SUCCESS;
  {
    py::gil_scoped_release release;
    rc = MPI_Allreduce(in.data, out.data, static_cast<int>(count), type,
                       MPI_SUM, MPI_COMM_WORLD);
  }
  if (rc != MPI_SUCCESS) Raise("internal", "MPI_Allreduce failed");
}

double MpiMax(double value) {
  RequireMpi("mpi_max");
  double result = 0;
  py::gil_scoped_release release;
  MPI_Allreduce(&value, &result, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return result;
}

// Whether MPI runs with MPI_THREAD_MULTIPLE (what the runtime asks for).
bool MpiThreadsSupported() {
  RequireMpi("mpi_threads_supported");
  int provided = 0;
  MPI_Query_thread(&provided);
  return provided == MPI_THREAD_MULTIPLE;
}

void MpiBarrier() {
  RequireMpi("mpi_barrier");
  py::gil_scoped_release release;
  MPI_Barrier(MPI_COMM_WORLD);
}

// Ends every rank of the job at once (an uncaught exception on one rank
// must not leave the others waiting for it).
void Abort(int code) {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);
}

}  // namespace

void DefineModule(py::module_& m) {
  m.doc() = "hvdtune runtime binding (use the hvdtune package)";
  m.attr("HvdtuneError") = CreateErrorType();
  m.attr("InvalidArgumentError") = InvalidArgumentErrorType();

  py::class_<PyHandle>(m, "Handle", py::dynamic_attr())
      .def("poll", &PyHandle::Poll, "True once the collective finished.")
      .def("wait", &PyHandle::Wait,
           "Waits (GIL released); raises HvdtuneError if it failed.")
      .def("output", &GatherOutput, py::arg("index") = 0,
           "Result `index` of an allgather, reducescatter or alltoall (a "
           "buffer; see output_shape_of).")
      .def_property_readonly(
          "output_shape",
          [](const PyHandle& h) { return h.handle().output_shape(); })
      .def(
          "output_shape_of",
          [](const PyHandle& h, std::size_t index) {
            return h.handle().output_shape(index);
          },
          py::arg("index"))
      .def_property_readonly(
          "num_outputs",
          [](const PyHandle& h) { return h.output_dtypes().size(); })
      .def_property_readonly(
          "received_splits",
          [](const PyHandle& h) { return h.handle().received_splits(); },
          "Alltoall: the rows received from each rank.")
      .def_property_readonly(
          "last_joined_rank",
          [](const PyHandle& h) { return h.handle().last_joined_rank(); },
          "Join: the rank that joined last.");
  py::class_<GatherResult>(m, "GatherResult", py::buffer_protocol())
      .def_buffer(&GatherResult::Info);

  m.def("init", &Init, py::arg("tune_num_groups") = false);
  m.def("shutdown", &Shutdown);
  m.def("is_initialized", [] {
    State& s = GetState();
    return s.runtime != nullptr && !s.runtime->shut_down();
  });
  m.def(
      "nccl_built", [] { return BuiltWithNccl(); },
      "Whether this build has the NCCL backend.");
  m.def(
      "nccl_version", [] { return NcclRuntimeVersion(); },
      "The loaded NCCL's version code (22803 for 2.28.3); 0 without.");
  m.def(
      "has_nccl", [](int process_set) { return Rt(process_set).has_nccl(); },
      py::arg("process_set") = 0,
      "Whether the runtime (of a process set) runs CUDA buffers on NCCL.");
  m.def(
      "nccl_unavailable",
      [](int process_set) { return Rt(process_set).nccl_unavailable(); },
      py::arg("process_set") = 0, "Why has_nccl() is false.");
  m.def("rank", [] { return Rt().rank(); });
  m.def("size", [] { return Rt().size(); });
  m.def("local_rank", [] { return Rt().local_rank(); });
  m.def("local_size", [] { return Rt().local_size(); });
  m.def("cross_rank", [] { return Rt().cross_rank(); });
  m.def("cross_size", [] { return Rt().cross_size(); });
  m.def("allreduce_async", &AllreduceAsync, py::arg("name"), py::arg("input"),
        py::arg("output"), py::arg("op"), py::arg("process_set") = 0);
  m.def("grouped_allreduce_async", &GroupedAllreduceAsync, py::arg("group"),
        py::arg("names"), py::arg("inputs"), py::arg("outputs"), py::arg("op"),
        py::arg("process_set") = 0);
  m.def("broadcast_async", &BroadcastAsync, py::arg("name"), py::arg("buffer"),
        py::arg("root"), py::arg("process_set") = 0);
  m.def("allgather_async", &AllgatherAsync, py::arg("name"), py::arg("input"),
        py::arg("process_set") = 0);
  m.def("grouped_allgather_async", &GroupedAllgatherAsync, py::arg("group"),
        py::arg("names"), py::arg("inputs"), py::arg("process_set") = 0);
  m.def("reducescatter_async", &ReducescatterAsync, py::arg("name"),
        py::arg("input"), py::arg("op"), py::arg("process_set") = 0);
  m.def("grouped_reducescatter_async", &GroupedReducescatterAsync,
        py::arg("group"), py::arg("names"), py::arg("inputs"), py::arg("op"),
        py::arg("process_set") = 0);
  m.def("alltoall_async", &AlltoallAsync, py::arg("name"), py::arg("input"),
        py::arg("splits"), py::arg("process_set") = 0);
  m.def("barrier_async", &BarrierAsync, py::arg("process_set") = 0);
  m.def("add_process_set", &AddProcessSet, py::arg("id"), py::arg("ranks"),
        "Collective over the job: builds set `id`'s runtime on its ranks.");
  m.def("remove_process_set", &RemoveProcessSet, py::arg("id"),
        "Shuts set `id`'s runtime down; false when this rank has none.");
  m.def("join_async", &JoinAsync);
  m.def(
      "reduce_ops",
      [] {
        std::vector<std::string> ops;
        for (const char* name : {"average", "sum", "min", "max", "product"}) {
          if (ParseReduceOp(name)) ops.emplace_back(name);
        }
        return ops;
      },
      "The reduce ops the runtime accepts, by name.");
  m.def(
      "start_timeline",
      [](const std::string& path, bool mark_cycles) {
        RaiseStatus(Rt().StartTimeline(path, mark_cycles));
      },
      py::arg("path"), py::arg("mark_cycles") = false,
      "Starts writing the timeline to `path` (rank 0 writes).");
  m.def(
      "stop_timeline", [] { RaiseStatus(Rt().StopTimeline()); },
      "Stops and closes the timeline being written.");
  m.def("mark_step", [] { Rt().MarkStep(); });
  m.def("autotune_status", &AutotuneStatusDict);
  m.def("knobs", [] { return KnobsDict(Rt().knobs()); });
  m.def("stats", &StatsDict);
  m.def("split_into_groups", [](std::size_t n, int num_groups) {
    return SplitIntoGroups(n, num_groups);
  });
  m.def("abort", &Abort, py::arg("code") = 1);
  m.def("mpi_allreduce_sum", &MpiAllreduceSum, py::arg("input"),
        py::arg("output"), "Raw MPI_Allreduce (sum) on MPI_COMM_WORLD.");
  m.def("mpi_max", &MpiMax, "Largest `value` over the ranks (raw MPI).");
  m.def("mpi_barrier", &MpiBarrier, "MPI_Barrier on MPI_COMM_WORLD.");
  m.def(
      "engine", [] { return std::string(EngineName(Rt().engine())); },
      "The engine the runtime runs on: 'mpi' or 'gloo' (init() first).");
  m.def("gloo_built", &GlooBuilt,
        "Whether this build has the Gloo engine (HOROVOD_GLOO=1).");
  m.def("mpi_threads_supported", &MpiThreadsSupported,
        "True when MPI was initialised with MPI_THREAD_MULTIPLE.");
  m.def("runtime_ref", &RuntimeRef, py::arg("process_set") = 0,
        "A weak reference to the runtime (a capsule), for hvdtune._c10d.");
  m.def("pending_orphans", [] { return GetState().orphans.size(); });
  // The Gloo engine's rendezvous store, served by a launcher that is not
  // hvd-tune run --gloo (the torch.distributed backend under torchrun).
  py::class_<RendezvousServer>(m, "RendezvousServer",
                               "The Gloo engine's rendezvous key-value store "
                               "(hvdtune/rendezvous.h), served by this "
                               "process while the object lives.")
      .def(py::init<const std::string&, int>(), py::arg("address"),
           py::arg("port") = 0,
           "Listens on address:port (0: a free port); raises naming the "
           "address when it cannot.")
      .def_property_readonly("port", &RendezvousServer::port)
      .def(
          "set",
          [](RendezvousServer& s, const std::string& key,
             const std::string& value) { s.Set(key, value); },
          py::arg("key"), py::arg("value"))
      .def_static("lost_rank_key", &RendezvousServer::LostRankKey,
                  py::arg("rank"),
                  "The key under which a launcher marks a rank lost (the "
                  "survivors' errors name it).");
}

}  // namespace hvdtune::python

PYBIND11_MODULE(_core, m) { hvdtune::python::DefineModule(m); }
