// hvdtune._core's collectives: the handles Python waits on, the results the
// runtime holds, and each collective's submission.

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "bindings.h"
#include "errors.h"
#include "hvdtune/grouping.h"
#include "hvdtune/runtime.h"
#include "state.h"
#include "tensors.h"

namespace py = pybind11;

namespace hvdtune::python {
namespace {

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

}  // namespace

void BindCollectives(py::module_& m) {
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
  m.def("split_into_groups", [](std::size_t n, int num_groups) {
    return SplitIntoGroups(n, num_groups);
  });
  m.def("pending_orphans", [] { return GetState().orphans.size(); });
}

}  // namespace hvdtune::python
