#include "hvdtune/c_api.h"

#include <algorithm>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <new>
#include <span>
#include <string>
#include <vector>

#include "core/argument_checks.h"
#include "hvdtune/runtime.h"

struct hvdtune_runtime {
  std::unique_ptr<hvdtune::Runtime> rt;
};

struct hvdtune_handle {
  hvdtune::Handle handle;
  // Filled once, when the handle is first seen finished (by wait, poll or
  // handle_error), so the pointer handed out stays valid until release.
  mutable std::mutex mu;
  mutable bool error_set = false;
  mutable std::string error;
};

namespace {

// The C API's errno: the reason of this thread's last refused call.
thread_local std::string last_error;

int Refuse(int code, std::string why, hvdtune_handle** handle) {
  if (handle != nullptr) *handle = nullptr;
  last_error = std::move(why);
  return code;
}

// The checks only the C signature needs; "" when fine. The tensor checks
// proper (name, dtype, sizes, buffers, root) are the C++ API's.
std::string CheckCommon(const hvdtune_runtime* rt, const char* name, int ndim,
                        const int64_t* shape, hvdtune_handle** handle) {
  if (rt == nullptr) return "null runtime";
  if (handle == nullptr) return "null handle out-pointer";
  if (name == nullptr) return "null tensor name";
  if (ndim < 0 || ndim > HVDTUNE_MAX_NDIM) {
    return "ndim " + std::to_string(ndim) + " of tensor '" + name +
           "' is not in 0.." + std::to_string(HVDTUNE_MAX_NDIM);
  }
  if (ndim > 0 && shape == nullptr) {
    return "null shape for tensor '" + std::string(name) + "' of " +
           std::to_string(ndim) + " dimensions";
  }
  return {};
}

std::span<const int64_t> Shape(int ndim, const int64_t* shape) {
  if (ndim <= 0) return {};
  return {shape, static_cast<std::size_t>(ndim)};
}

// Runs `enqueue` (which returns an hvdtune::Handle) only after every local
// check passed and the C handle is allocated, so a refused call never
// leaves an operation behind that writes into the caller's buffers.
template <typename Check, typename Enqueue>
int Submit(hvdtune_runtime* rt, const char* name, int ndim,
           const int64_t* shape, hvdtune_handle** handle, Check check,
           Enqueue enqueue) {
  try {
    std::string err = CheckCommon(rt, name, ndim, shape, handle);
    if (err.empty()) err = check(Shape(ndim, shape));
    if (!err.empty()) return Refuse(HVDTUNE_INVALID_ARGUMENT, err, handle);
    if (!rt->rt->running()) {
      return Refuse(
          HVDTUNE_ABORTED,
          "the runtime was shut down (tensor '" + std::string(name) + "')",
          handle);
    }
    auto out = std::make_unique<hvdtune_handle>();
    out->handle = enqueue(Shape(ndim, shape));
    *handle = out.release();
    last_error.clear();
    return HVDTUNE_OK;
  } catch (const std::exception& e) {
    return Refuse(HVDTUNE_INTERNAL, e.what(), handle);
  }
}

// Before the ints become enums: a narrow enum would wrap 261 into a valid
// dtype.
std::string CheckEnums(const char* name, int dtype, int op) {
  if (dtype < 0 || dtype >= hvdtune::kNumDataTypes) {
    return "unknown dtype " + std::to_string(dtype) + " for tensor '" + name +
           "' (0.." + std::to_string(hvdtune::kNumDataTypes - 1) + ")";
  }
  if (op < 0 || op >= hvdtune::kNumReduceOps) {
    return "unknown reduce op " + std::to_string(op) + " for tensor '" + name +
           "' (0.." + std::to_string(hvdtune::kNumReduceOps - 1) + ")";
  }
  return {};
}

const char* ErrorOf(const hvdtune_handle* h) {
  std::lock_guard<std::mutex> lock(h->mu);
  if (!h->error_set && h->handle.Poll()) {
    const hvdtune::Status s = h->handle.status();
    h->error = s.ok() ? "" : s.ToString();
    h->error_set = true;
  }
  return h->error_set ? h->error.c_str() : "";
}

}  // namespace

namespace {

// A grouped submission's members as C++ inputs; "" or why they are refused.
std::string GroupMembers(const char* group, int n, const char* const* names,
                         const void* const* inputs, const int* ndims,
                         const int64_t* const* shapes, const int* dtypes,
                         int op, std::vector<hvdtune::InputTensor>* out) {
  if (group == nullptr) return "null group name";
  if (n <= 0) return "group '" + std::string(group) + "' has no tensors";
  if (names == nullptr || inputs == nullptr || ndims == nullptr ||
      shapes == nullptr || dtypes == nullptr) {
    return "null member array for group '" + std::string(group) + "'";
  }
  for (int i = 0; i < n; ++i) {
    if (names[i] == nullptr) return "null tensor name";
    if (ndims[i] < 0 || ndims[i] > HVDTUNE_MAX_NDIM) {
      return "ndim " + std::to_string(ndims[i]) + " of tensor '" + names[i] +
             "' is not in 0.." + std::to_string(HVDTUNE_MAX_NDIM);
    }
    if (ndims[i] > 0 && shapes[i] == nullptr) {
      return "null shape for tensor '" + std::string(names[i]) + "'";
    }
    std::string err = CheckEnums(names[i], dtypes[i], op);
    if (!err.empty()) return err;
    hvdtune::InputTensor t;
    t.name = names[i];
    t.input = inputs[i];
    t.shape.assign(shapes[i], shapes[i] + ndims[i]);
    t.dtype = static_cast<hvdtune::DataType>(dtypes[i]);
    out->push_back(std::move(t));
  }
  return {};
}

// The grouped calls: members checked here, the rest by the C++ API (whose
// refusals come back on a finished handle and are turned into the C
// API's refusal).
template <typename Enqueue>
int SubmitGroup(hvdtune_runtime* rt, const char* group, int n,
                const char* const* names, const void* const* inputs,
                const int* ndims, const int64_t* const* shapes,
                const int* dtypes, int op, hvdtune_handle** handle,
                Enqueue enqueue) {
  try {
    if (rt == nullptr)
      return Refuse(HVDTUNE_INVALID_ARGUMENT, "null runtime", handle);
    if (handle == nullptr) {
      return Refuse(HVDTUNE_INVALID_ARGUMENT, "null handle out-pointer",
                    handle);
    }
    std::vector<hvdtune::InputTensor> members;
    std::string err = GroupMembers(group, n, names, inputs, ndims, shapes,
                                   dtypes, op, &members);
    if (!err.empty()) return Refuse(HVDTUNE_INVALID_ARGUMENT, err, handle);
    if (!rt->rt->running()) {
      return Refuse(
          HVDTUNE_ABORTED,
          "the runtime was shut down (group '" + std::string(group) + "')",
          handle);
    }
    hvdtune::Handle h = enqueue(std::string(group), members);
    // Arguments the C++ API refuses come back finished with
    // kInvalidArgument before anything was enqueued.
    if (h.Poll() &&
        h.status().code() == hvdtune::StatusCode::kInvalidArgument) {
      return Refuse(HVDTUNE_INVALID_ARGUMENT, h.status().message(), handle);
    }
    auto out = std::make_unique<hvdtune_handle>();
    out->handle = std::move(h);
    *handle = out.release();
    last_error.clear();
    return HVDTUNE_OK;
  } catch (const std::exception& e) {
    return Refuse(HVDTUNE_INTERNAL, e.what(), handle);
  }
}

}  // namespace

extern "C" {

int hvdtune_init(hvdtune_runtime** out, char* err, size_t err_len) {
  std::string why;
  int code = HVDTUNE_CONFIG_ERROR;
  if (out == nullptr) {
    why = "null runtime out-pointer";
    code = HVDTUNE_INVALID_ARGUMENT;
  } else {
    *out = nullptr;
    try {
      auto rt = std::make_unique<hvdtune::Runtime>();
      *out = new hvdtune_runtime{std::move(rt)};
      return HVDTUNE_OK;
    } catch (const std::exception& e) {
      why = e.what();
    }
  }
  if (err != nullptr && err_len > 0) {
    const std::size_t n = std::min(err_len - 1, why.size());
    std::memcpy(err, why.data(), n);
    err[n] = '\0';
  }
  return code;
}

int hvdtune_shutdown(hvdtune_runtime* rt) {
  if (rt == nullptr) return HVDTUNE_INVALID_ARGUMENT;
  try {
    rt->rt->Shutdown();
    return HVDTUNE_OK;
  } catch (const std::exception& e) {
    last_error = e.what();
    return HVDTUNE_INTERNAL;
  }
}

void hvdtune_destroy(hvdtune_runtime* rt) {
  try {
    delete rt;
  } catch (...) {  // a destructor that throws must not cross into C
  }
}

int hvdtune_running(const hvdtune_runtime* rt) {
  return rt ? (rt->rt->running() ? 1 : 0) : -1;
}
int hvdtune_is_shut_down(const hvdtune_runtime* rt) {
  return rt ? (rt->rt->shut_down() ? 1 : 0) : -1;
}
int hvdtune_rank(const hvdtune_runtime* rt) { return rt ? rt->rt->rank() : -1; }
int hvdtune_size(const hvdtune_runtime* rt) { return rt ? rt->rt->size() : -1; }
int hvdtune_local_rank(const hvdtune_runtime* rt) {
  return rt ? rt->rt->local_rank() : -1;
}
int hvdtune_local_size(const hvdtune_runtime* rt) {
  return rt ? rt->rt->local_size() : -1;
}
int hvdtune_cross_rank(const hvdtune_runtime* rt) {
  return rt ? rt->rt->cross_rank() : -1;
}
int hvdtune_cross_size(const hvdtune_runtime* rt) {
  return rt ? rt->rt->cross_size() : -1;
}

int hvdtune_allreduce(hvdtune_runtime* rt, const char* name, const void* input,
                      void* output, int ndim, const int64_t* shape, int dtype,
                      int op, hvdtune_handle** handle) {
  const auto t = static_cast<hvdtune::DataType>(dtype);
  const auto o = static_cast<hvdtune::ReduceOp>(op);
  return Submit(
      rt, name, ndim, shape, handle,
      [&](std::span<const int64_t> s) {
        std::string err = CheckEnums(name, dtype, op);
        if (err.empty()) {
          err = hvdtune::internal::CheckAllreduceArgs(name, input, output, s, t,
                                                      o);
        }
        return err;
      },
      [&](std::span<const int64_t> s) {
        return rt->rt->Allreduce(name, input, output, s, t, o);
      });
}

int hvdtune_broadcast(hvdtune_runtime* rt, const char* name, void* buffer,
                      int ndim, const int64_t* shape, int dtype, int root,
                      hvdtune_handle** handle) {
  const auto t = static_cast<hvdtune::DataType>(dtype);
  return Submit(
      rt, name, ndim, shape, handle,
      [&](std::span<const int64_t> s) {
        std::string err = CheckEnums(name, dtype, 0);
        if (err.empty()) {
          err = hvdtune::internal::CheckBroadcastArgs(name, buffer, s, t, root,
                                                      rt->rt->size());
        }
        return err;
      },
      [&](std::span<const int64_t> s) {
        return rt->rt->Broadcast(name, buffer, s, t, root);
      });
}

int hvdtune_allgather(hvdtune_runtime* rt, const char* name, const void* input,
                      int ndim, const int64_t* shape, int dtype,
                      hvdtune_handle** handle) {
  const auto t = static_cast<hvdtune::DataType>(dtype);
  return Submit(
      rt, name, ndim, shape, handle,
      [&](std::span<const int64_t> s) {
        std::string err = CheckEnums(name, dtype, 0);
        if (err.empty()) {
          err = hvdtune::internal::CheckAllgatherArgs(name, input, s, t,
                                                      rt->rt->size());
        }
        return err;
      },
      [&](std::span<const int64_t> s) {
        return rt->rt->Allgather(name, input, s, t);
      });
}

namespace {

int StatusCodeOf(const hvdtune::Status& s) {
  if (!s.ok()) last_error = s.message();
  return static_cast<int>(s.code());
}

}  // namespace

int hvdtune_start_timeline(hvdtune_runtime* rt, const char* path,
                           int mark_cycles) {
  if (rt == nullptr || path == nullptr) {
    last_error = rt == nullptr ? "null runtime" : "null timeline path";
    return HVDTUNE_INVALID_ARGUMENT;
  }
  try {
    return StatusCodeOf(rt->rt->StartTimeline(path, mark_cycles != 0));
  } catch (const std::exception& e) {
    last_error = e.what();
    return HVDTUNE_INTERNAL;
  }
}

int hvdtune_stop_timeline(hvdtune_runtime* rt) {
  if (rt == nullptr) {
    last_error = "null runtime";
    return HVDTUNE_INVALID_ARGUMENT;
  }
  try {
    return StatusCodeOf(rt->rt->StopTimeline());
  } catch (const std::exception& e) {
    last_error = e.what();
    return HVDTUNE_INTERNAL;
  }
}

int hvdtune_barrier(hvdtune_runtime* rt, hvdtune_handle** handle) {
  return Submit(
      rt, "barrier", 0, nullptr, handle,
      [](std::span<const int64_t>) { return std::string(); },
      [&](std::span<const int64_t>) { return rt->rt->Barrier(); });
}

int hvdtune_join(hvdtune_runtime* rt, hvdtune_handle** handle) {
  return Submit(
      rt, "join", 0, nullptr, handle,
      [](std::span<const int64_t>) { return std::string(); },
      [&](std::span<const int64_t>) { return rt->rt->Join(); });
}

int hvdtune_reducescatter(hvdtune_runtime* rt, const char* name,
                          const void* input, int ndim, const int64_t* shape,
                          int dtype, int op, hvdtune_handle** handle) {
  const auto t = static_cast<hvdtune::DataType>(dtype);
  const auto o = static_cast<hvdtune::ReduceOp>(op);
  return Submit(
      rt, name, ndim, shape, handle,
      [&](std::span<const int64_t> s) {
        std::string err = CheckEnums(name, dtype, op);
        if (err.empty()) {
          err = hvdtune::internal::CheckReducescatterArgs(name, input, s, t, o);
        }
        return err;
      },
      [&](std::span<const int64_t> s) {
        return rt->rt->Reducescatter(name, input, s, t, o);
      });
}

int hvdtune_alltoall(hvdtune_runtime* rt, const char* name, const void* input,
                     int ndim, const int64_t* shape, int dtype,
                     const int64_t* splits, int nsplits,
                     hvdtune_handle** handle) {
  const auto t = static_cast<hvdtune::DataType>(dtype);
  std::span<const int64_t> sp;
  if (splits != nullptr && nsplits > 0) {
    sp = {splits, static_cast<std::size_t>(nsplits)};
  }
  return Submit(
      rt, name, ndim, shape, handle,
      [&](std::span<const int64_t> s) {
        std::string err = CheckEnums(name, dtype, 0);
        if (err.empty() &&
            (nsplits < 0 || (nsplits > 0 && splits == nullptr))) {
          err = "alltoall of tensor '" + std::string(name) +
                "': " + (nsplits < 0 ? "negative nsplits" : "null splits");
        }
        if (err.empty()) {
          err = hvdtune::internal::CheckAlltoallArgs(name, input, s, t, sp,
                                                     rt->rt->size());
        }
        return err;
      },
      [&](std::span<const int64_t> s) {
        return rt->rt->Alltoall(name, input, s, t, sp);
      });
}

int hvdtune_grouped_allgather(hvdtune_runtime* rt, const char* group, int n,
                              const char* const* names,
                              const void* const* inputs, const int* ndims,
                              const int64_t* const* shapes, const int* dtypes,
                              hvdtune_handle** handle) {
  return SubmitGroup(rt, group, n, names, inputs, ndims, shapes, dtypes, 0,
                     handle, [&](std::string g, const auto& members) {
                       return rt->rt->GroupedAllgather(std::move(g), members);
                     });
}

int hvdtune_grouped_reducescatter(hvdtune_runtime* rt, const char* group, int n,
                                  const char* const* names,
                                  const void* const* inputs, const int* ndims,
                                  const int64_t* const* shapes,
                                  const int* dtypes, int op,
                                  hvdtune_handle** handle) {
  return SubmitGroup(rt, group, n, names, inputs, ndims, shapes, dtypes, op,
                     handle, [&](std::string g, const auto& members) {
                       return rt->rt->GroupedReducescatter(
                           std::move(g), members,
                           static_cast<hvdtune::ReduceOp>(op));
                     });
}

const char* hvdtune_last_error(void) { return last_error.c_str(); }

int hvdtune_poll(const hvdtune_handle* h) {
  if (h == nullptr) return -HVDTUNE_INVALID_ARGUMENT;
  return h->handle.Poll() ? 1 : 0;
}

int hvdtune_wait(hvdtune_handle* h) {
  if (h == nullptr) return HVDTUNE_INVALID_ARGUMENT;
  const hvdtune::Status s = h->handle.Wait();
  ErrorOf(h);
  return static_cast<int>(s.code());
}

const char* hvdtune_handle_error(const hvdtune_handle* h) {
  return h == nullptr ? "null handle" : ErrorOf(h);
}

int hvdtune_handle_output(const hvdtune_handle* h, const void** data,
                          size_t* bytes, int64_t* shape, int max_ndim,
                          int* ndim) {
  return hvdtune_handle_output_at(h, 0, data, bytes, shape, max_ndim, ndim);
}

int hvdtune_handle_received_splits(const hvdtune_handle* h, int64_t* splits,
                                   int max, int* n) {
  if (h == nullptr || max < 0 || (max > 0 && splits == nullptr)) {
    return HVDTUNE_INVALID_ARGUMENT;
  }
  if (!h->handle.Poll()) return HVDTUNE_IN_PROGRESS;
  const hvdtune::Status st = h->handle.status();
  if (!st.ok()) return static_cast<int>(st.code());
  const auto& r = h->handle.received_splits();
  if (n) *n = static_cast<int>(r.size());
  for (int i = 0; i < max && i < static_cast<int>(r.size()); ++i) {
    splits[i] = r[static_cast<std::size_t>(i)];
  }
  return HVDTUNE_OK;
}

int hvdtune_handle_last_joined_rank(const hvdtune_handle* h) {
  return h == nullptr ? -1 : h->handle.last_joined_rank();
}

int hvdtune_handle_output_at(const hvdtune_handle* h, int index,
                             const void** data, size_t* bytes, int64_t* shape,
                             int max_ndim, int* ndim) {
  if (h == nullptr || max_ndim < 0 || (max_ndim > 0 && shape == nullptr) ||
      index < 0) {
    return HVDTUNE_INVALID_ARGUMENT;
  }
  if (!h->handle.Poll()) return HVDTUNE_IN_PROGRESS;
  const hvdtune::Status st = h->handle.status();
  if (!st.ok()) return static_cast<int>(st.code());
  const auto i = static_cast<std::size_t>(index);
  if (index > 0 && i >= h->handle.num_outputs()) {
    return HVDTUNE_INVALID_ARGUMENT;
  }
  const auto& out = h->handle.output(i);
  const auto& s = h->handle.output_shape(i);
  if (data) *data = out.data();
  if (bytes) *bytes = out.size();
  if (ndim) *ndim = static_cast<int>(s.size());
  for (int i = 0; i < max_ndim && i < static_cast<int>(s.size()); ++i) {
    shape[i] = s[static_cast<std::size_t>(i)];
  }
  return HVDTUNE_OK;
}

void hvdtune_handle_release(hvdtune_handle* h) { delete h; }

}  // extern "C"
