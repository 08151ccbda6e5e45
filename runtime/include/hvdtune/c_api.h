/* C API over the hvdtune runtime, for bindings. Opaque handles only; every
 * call returns an hvdtune_status code (0 = OK) and never throws.
 *
 * One rule for bad arguments: everything that can be checked on the calling
 * rank alone (null pointers, an empty name, an unknown dtype or op, ndim
 * outside 0..HVDTUNE_MAX_NDIM, a negative dimension, a tensor whose byte
 * size does not fit in int64, a broadcast root that is not a rank, a null
 * buffer for a non-empty tensor) is refused by the call itself with
 * HVDTUNE_INVALID_ARGUMENT, *handle set to NULL (when handle is not NULL)
 * and nothing enqueued; hvdtune_last_error() says why. A call on a runtime
 * that was shut down returns HVDTUNE_ABORTED the same way. What only the
 * ranks together can find (a shape or dtype that differs between ranks, a
 * stalled rank, a shutdown while the operation was pending) is reported by
 * the handle: hvdtune_wait()'s code and hvdtune_handle_error(). */
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

/* The most dimensions a tensor may have. */
#define HVDTUNE_MAX_NDIM 64

/* dtype: 0 uint8, 1 int32, 2 int64, 3 float16, 4 bfloat16, 5 float32,
 * 6 float64, 7 int8, 8 int16, 9 bool (one byte, 0 or 1: broadcast,
 * allgather and alltoall only). op: 0 sum, 1 average, 2 min, 3 max,
 * 4 product. */

/* Creates a runtime from the process environment; collective over
 * MPI_COMM_WORLD. A bad or rank-dependent setting fails on every rank with
 * HVDTUNE_CONFIG_ERROR (none hangs). On failure *out is NULL and the message
 * is copied into err (truncated to err_len - 1 bytes; err may be NULL). */
int hvdtune_init(hvdtune_runtime** out, char* err, size_t err_len);
/* Stops the runtime on every rank; pending handles fail with
 * HVDTUNE_ABORTED. Idempotent. HVDTUNE_INVALID_ARGUMENT for NULL. */
int hvdtune_shutdown(hvdtune_runtime* rt);
/* 1 while the collectives run; 0 once stopped (a shutdown on any rank),
 * -1 for NULL. */
int hvdtune_running(const hvdtune_runtime* rt);
/* 1 once hvdtune_shutdown was called on this rank, 0 before (a shutdown
 * another rank asked for stops the collectives but leaves this rank
 * initialised: keep using the runtime, do not call hvdtune_init again
 * while peers may have exited), -1 for NULL. */
int hvdtune_is_shut_down(const hvdtune_runtime* rt);
/* Shuts down if needed and frees the runtime; NULL is ignored. */
void hvdtune_destroy(hvdtune_runtime* rt);

/* Topology; -1 for a NULL runtime. */
int hvdtune_rank(const hvdtune_runtime* rt);
int hvdtune_size(const hvdtune_runtime* rt);
int hvdtune_local_rank(const hvdtune_runtime* rt);
int hvdtune_local_size(const hvdtune_runtime* rt);
int hvdtune_cross_rank(const hvdtune_runtime* rt);
int hvdtune_cross_size(const hvdtune_runtime* rt);

/* Collectives: shape has ndim entries (it may be NULL only when ndim is 0,
 * a scalar). Buffers must stay valid until the handle finished; on OK,
 * *handle must be released with hvdtune_handle_release. */
int hvdtune_allreduce(hvdtune_runtime* rt, const char* name, const void* input,
                      void* output, int ndim, const int64_t* shape, int dtype,
                      int op, hvdtune_handle** handle);
int hvdtune_broadcast(hvdtune_runtime* rt, const char* name, void* buffer,
                      int ndim, const int64_t* shape, int dtype, int root,
                      hvdtune_handle** handle);
/* ndim >= 1; the first dimension may differ between ranks. The gathered
 * result (one rank's bytes times the world size) must fit in int64. */
int hvdtune_allgather(hvdtune_runtime* rt, const char* name, const void* input,
                      int ndim, const int64_t* shape, int dtype,
                      hvdtune_handle** handle);

/* Runtime::StartTimeline / StopTimeline: rank 0 writes Horovod's timeline
 * to path (replacing and closing one being written) until stopped. The
 * status code; hvdtune_last_error() says why on failure. */
int hvdtune_start_timeline(hvdtune_runtime* rt, const char* path,
                           int mark_cycles);
int hvdtune_stop_timeline(hvdtune_runtime* rt);

/* Completes on every rank once every rank called it. */
int hvdtune_barrier(hvdtune_runtime* rt, hvdtune_handle** handle);
/* This rank has no more data: until every rank joined it takes part in the
 * others' allreduces with neutral elements (see Runtime::Join). The last
 * rank to join: hvdtune_handle_last_joined_rank. */
int hvdtune_join(hvdtune_runtime* rt, hvdtune_handle** handle);
/* ndim >= 1; every rank passes the same shape. Rank r receives shape[0] /
 * size rows, one more for the first shape[0] % size ranks, in
 * hvdtune_handle_output. op as for allreduce (not on bool). */
int hvdtune_reducescatter(hvdtune_runtime* rt, const char* name,
                          const void* input, int ndim, const int64_t* shape,
                          int dtype, int op, hvdtune_handle** handle);
/* ndim >= 1. splits: nsplits == size counts of rows sent to each rank,
 * adding up to shape[0]; or NULL with nsplits 0 for shape[0] / size rows
 * each (shape[0] divisible by size). The rows received are in
 * hvdtune_handle_output, how many came from each rank in
 * hvdtune_handle_received_splits. */
int hvdtune_alltoall(hvdtune_runtime* rt, const char* name, const void* input,
                     int ndim, const int64_t* shape, int dtype,
                     const int64_t* splits, int nsplits,
                     hvdtune_handle** handle);
/* n tensors negotiated and completed as one unit; member i: names[i],
 * inputs[i], ndims[i], shapes[i], dtypes[i]; its result through
 * hvdtune_handle_output_at(h, i, ...). */
int hvdtune_grouped_allgather(hvdtune_runtime* rt, const char* group, int n,
                              const char* const* names,
                              const void* const* inputs, const int* ndims,
                              const int64_t* const* shapes, const int* dtypes,
                              hvdtune_handle** handle);
int hvdtune_grouped_reducescatter(hvdtune_runtime* rt, const char* group, int n,
                                  const char* const* names,
                                  const void* const* inputs, const int* ndims,
                                  const int64_t* const* shapes,
                                  const int* dtypes, int op,
                                  hvdtune_handle** handle);

/* The message of the last call on this thread that failed with
 * HVDTUNE_INVALID_ARGUMENT, HVDTUNE_ABORTED or HVDTUNE_INTERNAL before
 * returning a handle ("" when none). Valid until this thread's next call. */
const char* hvdtune_last_error(void);

/* 1 when done, 0 while in progress, -HVDTUNE_INVALID_ARGUMENT for NULL (so
 * that `while (!hvdtune_poll(h))` ends). */
int hvdtune_poll(const hvdtune_handle* h);
/* Blocks until done; returns the operation's status code. */
int hvdtune_wait(hvdtune_handle* h);
/* The error message of a finished handle, however it was seen to finish
 * (hvdtune_wait or hvdtune_poll): "" when OK or still in progress, "null
 * handle" for NULL. Valid until release. */
const char* hvdtune_handle_error(const hvdtune_handle* h);
/* Allgather result: bytes and shape (ndim entries, at most max_ndim copied;
 * shape may be NULL only when max_ndim is 0). data, bytes and ndim may be
 * NULL. HVDTUNE_IN_PROGRESS while running, the handle's error code when it
 * failed; other collectives give 0 bytes and ndim 0. */
int hvdtune_handle_output(const hvdtune_handle* h, const void** data,
                          size_t* bytes, int64_t* shape, int max_ndim,
                          int* ndim);
/* hvdtune_handle_output for member `index` of a grouped allgather or
 * reducescatter (0 for a single tensor); HVDTUNE_INVALID_ARGUMENT for an
 * index out of range. */
int hvdtune_handle_output_at(const hvdtune_handle* h, int index,
                             const void** data, size_t* bytes, int64_t* shape,
                             int max_ndim, int* ndim);
/* Alltoall: rows received from each rank (at most max copied; n, the
 * number of ranks, may be NULL). Codes as hvdtune_handle_output. */
int hvdtune_handle_received_splits(const hvdtune_handle* h, int64_t* splits,
                                   int max, int* n);
/* Join: the rank that joined last; -1 for NULL, while running, or for
 * another collective. */
int hvdtune_handle_last_joined_rank(const hvdtune_handle* h);
/* Frees a handle (an unfinished operation still completes); NULL is
 * ignored. */
void hvdtune_handle_release(hvdtune_handle* h);

#ifdef __cplusplus
}
#endif

#endif /* HVDTUNE_C_API_H_ */
