// Buffers: what a Python object's memory (a numpy array, anything with the
// buffer protocol, a torch CPU tensor) looks like to the runtime.
#pragma once

#include <pybind11/pybind11.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "hvdtune/types.h"

namespace hvdtune::python {

// A Py_buffer held until the collective that reads or writes it finished.
struct BufferView {
  Py_buffer view{};
  bool held = false;
  BufferView() = default;
  BufferView(const BufferView&) = delete;
  BufferView& operator=(const BufferView&) = delete;
  ~BufferView() {
    if (held) PyBuffer_Release(&view);
  }
};

struct TensorRef {
  void* data = nullptr;
  std::vector<std::int64_t> shape;
  DataType dtype = DataType::kFloat32;
  // Keeps the memory alive while the runtime uses it.
  pybind11::object owner;
  std::shared_ptr<BufferView> view;
};

/// The memory of `obj`, held until the returned reference goes; raises
/// HvdtuneError("invalid_argument") naming `what` for anything the runtime
/// cannot use (another device, not contiguous, an unknown dtype, read-only
/// where `writable`).
TensorRef Resolve(pybind11::handle obj, bool writable, const std::string& what);

std::int64_t NumElements(const std::vector<std::int64_t>& shape);

/// Raises unless `out` has the dtype and element count of `in`.
void CheckSameLayout(const TensorRef& in, const TensorRef& out,
                     const std::string& what);

/// "sum", "average", "min", "max"; raises for anything else.
ReduceOp ParseOp(const std::string& op);

}  // namespace hvdtune::python
