// Buffers: Python objects' memory as the runtime sees it.
#include "tensors.h"

#include <optional>
#include <string_view>
#include <utility>

#include "errors.h"

namespace py = pybind11;

namespace hvdtune::python {
namespace {

std::optional<DataType> DtypeFromTorch(const std::string& name) {
  static const std::pair<std::string_view, DataType> kTypes[] = {
      {"torch.float32", DataType::kFloat32},
      {"torch.float64", DataType::kFloat64},
      {"torch.float16", DataType::kFloat16},
      {"torch.bfloat16", DataType::kBFloat16},
      {"torch.int32", DataType::kInt32},
      {"torch.int64", DataType::kInt64},
      {"torch.uint8", DataType::kUInt8},
      {"torch.int8", DataType::kInt8},
      {"torch.int16", DataType::kInt16},
      {"torch.bool", DataType::kBool},
  };
  for (const auto& [text, dtype] : kTypes) {
    if (name == text) return dtype;
  }
  return std::nullopt;
}

// A buffer-protocol format string ("<f", "=q", "e") as a runtime dtype.
std::optional<DataType> DtypeFromFormat(std::string_view format,
                                        Py_ssize_t itemsize) {
  if (!format.empty() &&
      std::string_view("@=<>!").find(format[0]) != std::string_view::npos) {
    if (format[0] == '>' || format[0] == '!') return std::nullopt;
    format.remove_prefix(1);
  }
  if (format.size() != 1) return std::nullopt;
  switch (format[0]) {
    case 'f':
      return DataType::kFloat32;
    case 'd':
      return DataType::kFloat64;
    case 'e':
      return DataType::kFloat16;
    case 'B':
      return DataType::kUInt8;
    case 'b':
      return DataType::kInt8;
    case 'h':
      return itemsize == 2 ? std::optional(DataType::kInt16) : std::nullopt;
    case '?':
      return DataType::kBool;
    case 'i':
    case 'l':
    case 'q':
      if (itemsize == 4) return DataType::kInt32;
      if (itemsize == 8) return DataType::kInt64;
      return std::nullopt;
    default:
      return std::nullopt;
  }
}

bool IsTorchTensor(py::handle obj) {
  return py::hasattr(obj, "data_ptr") && py::hasattr(obj, "is_contiguous") &&
         py::hasattr(obj, "dtype");
}

// `what` names the argument in error messages ("input of allreduce 'x'").
}  // namespace

TensorRef Resolve(py::handle obj, bool writable, const std::string& what) {
  TensorRef ref;
  ref.owner = py::reinterpret_borrow<py::object>(obj);
  if (IsTorchTensor(obj)) {
    const std::string device = py::str(obj.attr("device").attr("type"));
    // CUDA tensors pass their device pointer: the runtime tells device
    // memory from host memory by the pointer and runs it on NCCL
    // (hvdtune.torch stages them through host memory where the runtime has
    // no NCCL backend).
    if (device != "cpu" && device != "cuda") {
      Raise("invalid_argument", what + ": a tensor on device '" + device +
                                    "'; hvdtune.torch takes CPU and CUDA "
                                    "tensors");
    }
    if (!obj.attr("is_contiguous")().cast<bool>()) {
      Raise("invalid_argument", what + ": the tensor is not contiguous");
    }
    const std::string dtype = py::str(obj.attr("dtype"));
    const std::optional<DataType> parsed = DtypeFromTorch(dtype);
    if (!parsed) {
      Raise("invalid_argument",
            what + ": unsupported dtype " + dtype +
                " (supported: bool, uint8, int8, int16, int32, int64, "
                "float16, bfloat16, float32, float64)");
    }
    ref.dtype = *parsed;
    ref.data =
        reinterpret_cast<void*>(obj.attr("data_ptr")().cast<std::uintptr_t>());
    for (py::handle d : obj.attr("shape")) {
      ref.shape.push_back(d.cast<std::int64_t>());
    }
    return ref;
  }
  auto view = std::make_shared<BufferView>();
  const int flags = PyBUF_FORMAT | PyBUF_ND | PyBUF_C_CONTIGUOUS |
                    (writable ? PyBUF_WRITABLE : 0);
  if (PyObject_GetBuffer(obj.ptr(), &view->view, flags) != 0) {
    PyErr_Clear();
    Raise("invalid_argument",
          what + ": expected a C-contiguous" +
              std::string(writable ? ", writable" : "") +
              " numpy array, buffer or torch tensor, got " +
              std::string(py::str(py::type::handle_of(obj).attr("__name__"))));
  }
  view->held = true;
  const char* format = view->view.format ? view->view.format : "B";
  const std::optional<DataType> parsed =
      DtypeFromFormat(format, view->view.itemsize);
  if (!parsed) {
    Raise("invalid_argument",
          what + ": unsupported element format '" + std::string(format) +
              "' (supported: bool, uint8, int8, int16, int32, int64, "
              "float16, float32, float64)");
  }
  ref.dtype = *parsed;
  ref.data = view->view.buf;
  for (int i = 0; i < view->view.ndim; ++i) {
    ref.shape.push_back(view->view.shape[i]);
  }
  ref.view = std::move(view);
  return ref;
}

std::int64_t NumElements(const std::vector<std::int64_t>& shape) {
  std::int64_t n = 1;
  for (std::int64_t d : shape) n *= d;
  return n;
}

void CheckSameLayout(const TensorRef& in, const TensorRef& out,
                     const std::string& what) {
  if (in.dtype != out.dtype ||
      NumElements(in.shape) != NumElements(out.shape)) {
    Raise("invalid_argument",
          what + ": the output (" + std::string(DataTypeName(out.dtype)) +
              ", " + std::to_string(NumElements(out.shape)) +
              " elements) does not match the input (" +
              std::string(DataTypeName(in.dtype)) + ", " +
              std::to_string(NumElements(in.shape)) + " elements)");
  }
}

ReduceOp ParseOp(const std::string& op) {
  const std::optional<ReduceOp> parsed = ParseReduceOp(op);
  if (!parsed) {
    Raise("invalid_argument",
          "unknown reduce op '" + op +
              "' (expected sum, average, min, max or product)");
  }
  return *parsed;
}

}  // namespace hvdtune::python
