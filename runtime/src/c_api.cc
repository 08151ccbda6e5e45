#include "hvdtune/c_api.h"

#include <algorithm>
#include <cstring>
#include <exception>
#include <memory>
#include <span>
#include <string>

#include "hvdtune/runtime.h"

struct hvdtune_runtime {
  std::unique_ptr<hvdtune::Runtime> rt;
};

struct hvdtune_handle {
  hvdtune::Handle handle;
  std::string error;
};

namespace {

bool ValidEnums(int dtype, int op) {
  return dtype >= 0 && dtype < hvdtune::kNumDataTypes && op >= 0 &&
         op < hvdtune::kNumReduceOps;
}

int Wrap(hvdtune::Handle h, hvdtune_handle** out) {
  if (out == nullptr) return HVDTUNE_INVALID_ARGUMENT;
  *out = new hvdtune_handle{std::move(h), {}};
  return HVDTUNE_OK;
}

std::span<const int64_t> Shape(int ndim, const int64_t* shape) {
  if (ndim <= 0 || shape == nullptr) return {};
  return {shape, static_cast<std::size_t>(ndim)};
}

}  // namespace

extern "C" {

int hvdtune_init(hvdtune_runtime** out, char* err, size_t err_len) {
  if (out == nullptr) return HVDTUNE_INVALID_ARGUMENT;
  *out = nullptr;
  try {
    auto rt = std::make_unique<hvdtune::Runtime>();
    *out = new hvdtune_runtime{std::move(rt)};
    return HVDTUNE_OK;
  } catch (const std::exception& e) {
    if (err != nullptr && err_len > 0) {
      const std::size_t n = std::min(err_len - 1, std::strlen(e.what()));
      std::memcpy(err, e.what(), n);
      err[n] = '\0';
    }
    return HVDTUNE_CONFIG_ERROR;
  }
}

int hvdtune_shutdown(hvdtune_runtime* rt) {
  if (rt == nullptr) return HVDTUNE_INVALID_ARGUMENT;
  rt->rt->Shutdown();
  return HVDTUNE_OK;
}

void hvdtune_destroy(hvdtune_runtime* rt) { delete rt; }

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
  if (rt == nullptr || name == nullptr || !ValidEnums(dtype, op) || ndim < 0) {
    return HVDTUNE_INVALID_ARGUMENT;
  }
  return Wrap(rt->rt->Allreduce(name, input, output, Shape(ndim, shape),
                                static_cast<hvdtune::DataType>(dtype),
                                static_cast<hvdtune::ReduceOp>(op)),
              handle);
}

int hvdtune_broadcast(hvdtune_runtime* rt, const char* name, void* buffer,
                      int ndim, const int64_t* shape, int dtype, int root,
                      hvdtune_handle** handle) {
  if (rt == nullptr || name == nullptr || !ValidEnums(dtype, 0) || ndim < 0) {
    return HVDTUNE_INVALID_ARGUMENT;
  }
  return Wrap(rt->rt->Broadcast(name, buffer, Shape(ndim, shape),
                                static_cast<hvdtune::DataType>(dtype), root),
              handle);
}

int hvdtune_allgather(hvdtune_runtime* rt, const char* name, const void* input,
                      int ndim, const int64_t* shape, int dtype,
                      hvdtune_handle** handle) {
  if (rt == nullptr || name == nullptr || !ValidEnums(dtype, 0) || ndim < 0) {
    return HVDTUNE_INVALID_ARGUMENT;
  }
  return Wrap(rt->rt->Allgather(name, input, Shape(ndim, shape),
                                static_cast<hvdtune::DataType>(dtype)),
              handle);
}

int hvdtune_poll(const hvdtune_handle* h) {
  return h == nullptr || h->handle.Poll() ? 1 : 0;
}

int hvdtune_wait(hvdtune_handle* h) {
  if (h == nullptr) return HVDTUNE_INVALID_ARGUMENT;
  const hvdtune::Status s = h->handle.Wait();
  h->error = s.ok() ? "" : s.ToString();
  return static_cast<int>(s.code());
}

const char* hvdtune_handle_error(const hvdtune_handle* h) {
  return h == nullptr ? "null handle" : h->error.c_str();
}

int hvdtune_handle_output(const hvdtune_handle* h, const void** data,
                          size_t* bytes, int64_t* shape, int max_ndim,
                          int* ndim) {
  if (h == nullptr || !h->handle.Poll()) return HVDTUNE_INVALID_ARGUMENT;
  const auto& out = h->handle.output();
  const auto& s = h->handle.output_shape();
  if (data) *data = out.data();
  if (bytes) *bytes = out.size();
  if (ndim) *ndim = static_cast<int>(s.size());
  for (int i = 0;
       shape != nullptr && i < max_ndim && i < static_cast<int>(s.size());
       ++i) {
    shape[i] = s[static_cast<std::size_t>(i)];
  }
  return HVDTUNE_OK;
}

void hvdtune_handle_release(hvdtune_handle* h) { delete h; }

}  // extern "C"
