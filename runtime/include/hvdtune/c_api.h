/* C API over the hvdtune runtime, for bindings. Opaque handles only; every
 * call returns an hvdtune_status code (0 = OK) and never throws. */
#ifndef HVDTUNE_C_API_H_
#define HVDTUNE_C_API_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct hvdtune_runtime hvdtune_runtime;
typedef struct hvdtune_handle hvdtune_handle;

/* Codes match hvdtune::StatusCode; HVDTUNE_CONFIG_ERROR is init-only. */
enum {
  HVDTUNE_OK = 0,
  HVDTUNE_IN_PROGRESS = 1,
  HVDTUNE_INVALID_ARGUMENT = 2,
  HVDTUNE_MISMATCH = 3,
  HVDTUNE_ABORTED = 4,
  HVDTUNE_INTERNAL = 5,
  HVDTUNE_CONFIG_ERROR = 6,
  HVDTUNE_STALLED = 7,
};

/* dtype: 0 uint8, 1 int32, 2 int64, 3 float16, 4 bfloat16, 5 float32,
 * 6 float64. op: 0 sum, 1 average, 2 min, 3 max. */

/* Creates a runtime from the process environment. On failure *out is NULL
 * and the message is copied into err (if err_len > 0). */
int hvdtune_init(hvdtune_runtime** out, char* err, size_t err_len);
/* Stops the runtime on every rank; pending handles fail. Idempotent. */
int hvdtune_shutdown(hvdtune_runtime* rt);
/* Shuts down if needed and frees the runtime. */
void hvdtune_destroy(hvdtune_runtime* rt);

int hvdtune_rank(const hvdtune_runtime* rt);
int hvdtune_size(const hvdtune_runtime* rt);
int hvdtune_local_rank(const hvdtune_runtime* rt);
int hvdtune_local_size(const hvdtune_runtime* rt);
int hvdtune_cross_rank(const hvdtune_runtime* rt);
int hvdtune_cross_size(const hvdtune_runtime* rt);

int hvdtune_allreduce(hvdtune_runtime* rt, const char* name, const void* input,
                      void* output, int ndim, const int64_t* shape, int dtype,
                      int op, hvdtune_handle** handle);
int hvdtune_broadcast(hvdtune_runtime* rt, const char* name, void* buffer,
                      int ndim, const int64_t* shape, int dtype, int root,
                      hvdtune_handle** handle);
int hvdtune_allgather(hvdtune_runtime* rt, const char* name, const void* input,
                      int ndim, const int64_t* shape, int dtype,
                      hvdtune_handle** handle);

/* 1 when done, 0 while in progress. */
int hvdtune_poll(const hvdtune_handle* h);
/* Blocks until done; returns the operation's status code. */
int hvdtune_wait(hvdtune_handle* h);
/* The error message of a finished handle ("" when OK). Valid until release. */
const char* hvdtune_handle_error(const hvdtune_handle* h);
/* Allgather result: bytes and shape (ndim entries, at most max_ndim copied). */
int hvdtune_handle_output(const hvdtune_handle* h, const void** data,
                          size_t* bytes, int64_t* shape, int max_ndim,
                          int* ndim);
void hvdtune_handle_release(hvdtune_handle* h);

#ifdef __cplusplus
}
#endif

#endif /* HVDTUNE_C_API_H_ */
