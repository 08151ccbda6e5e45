#include "hvdtune/c_api.h"

#include <algorithm>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <new>
#include <span>
#include <string>

#include "argument_checks.h"
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
  if (h == nullptr || max_ndim < 0 || (max_ndim > 0 && shape == nullptr)) {
    return HVDTUNE_INVALID_ARGUMENT;
  }
  if (!h->handle.Poll()) return HVDTUNE_IN_PROGRESS;
  const hvdtune::Status st = h->handle.status();
  if (!st.ok()) return static_cast<int>(st.code());
  const auto& out = h->handle.output();
  const auto& s = h->handle.output_shape();
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
