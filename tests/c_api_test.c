/* The C API's own suite, compiled as C and run under mpirun: every entry
 * point's bad arguments are refused by the call itself (nothing enqueued),
 * the good paths work, and a handle's error text is there however it was
 * seen to finish.
 *
 *   c_api_test [--hostile N]            the suite (any number of ranks);
 *                                       N iterations of the hostile sweep
 *   c_api_test --expect-init-error S..  hvdtune_init must fail with
 *                                       HVDTUNE_CONFIG_ERROR and a message
 *                                       containing every S (per-rank
 *                                       environments: mpirun MPMD syntax) */
#include <hvdtune/c_api.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int g_rank = -1;
static int g_failures = 0;

#define CHECK(cond, ...)                                                       \
  do {                                                                         \
    if (!(cond)) {                                                             \
      ++g_failures;                                                            \
      fprintf(stderr, "[rank %d] %s:%d: CHECK(%s) failed: ", g_rank, __FILE__, \
              __LINE__, #cond);                                                \
      fprintf(stderr, __VA_ARGS__);                                            \
      fprintf(stderr, "\n");                                                   \
    }                                                                          \
  } while (0)

/* A pointer that is not NULL, to see that a refused call resets *handle. */
static hvdtune_handle* Poisoned(void) { return (hvdtune_handle*)(uintptr_t)8; }

/* A refused call: the code, *handle reset to NULL, and the reason. */
static void ExpectRefused(int rc, int code, const hvdtune_handle* h,
                          const char* why, int line) {
  const char* err = hvdtune_last_error();
  CHECK(rc == code, "line %d: code %d, expected %d (%s)", line, rc, code, err);
  CHECK(h == NULL, "line %d: *handle was not reset to NULL", line);
  CHECK(strstr(err, why) != NULL, "line %d: error '%s' lacks '%s'", line, err,
        why);
}
/* The call runs before *handle is looked at (argument order is unspecified
 * in C, so not inside ExpectRefused's argument list). */
#define REFUSED(call, why)                                          \
  do {                                                              \
    int rc_;                                                        \
    h = Poisoned();                                                 \
    rc_ = (call);                                                   \
    ExpectRefused(rc_, HVDTUNE_INVALID_ARGUMENT, h, why, __LINE__); \
  } while (0)

static int InitErrorMode(int argc, char** argv) {
  const char* r = getenv("OMPI_COMM_WORLD_RANK");
  g_rank = r ? atoi(r) : -1;
  hvdtune_runtime* rt = (hvdtune_runtime*)1;
  char err[1024];
  int i;
  const int rc = hvdtune_init(&rt, err, sizeof err);
  printf("[rank %d] hvdtune_init: %d: %s\n", g_rank, rc, err);
  CHECK(rc == HVDTUNE_CONFIG_ERROR, "init returned %d", rc);
  CHECK(rt == NULL, "*out not NULL after a failed init");
  for (i = 2; i < argc && rc != HVDTUNE_OK; ++i) {
    CHECK(strstr(err, argv[i]) != NULL, "'%s' lacks '%s'", err, argv[i]);
  }
  if (rc == HVDTUNE_OK) hvdtune_destroy(rt);
  return g_failures == 0 ? 0 : 1;
}

static void Lifecycle(void) {
  char err[64] = "untouched";
  hvdtune_runtime* rt = NULL;
  CHECK(hvdtune_init(NULL, err, sizeof err) == HVDTUNE_INVALID_ARGUMENT, "-");
  CHECK(strstr(err, "null") != NULL, "init(NULL) said '%s'", err);
  CHECK(hvdtune_init(NULL, NULL, 0) == HVDTUNE_INVALID_ARGUMENT, "-");
  CHECK(hvdtune_shutdown(NULL) == HVDTUNE_INVALID_ARGUMENT, "-");
  hvdtune_destroy(NULL);
  CHECK(hvdtune_rank(rt) == -1 && hvdtune_size(rt) == -1, "-");
  CHECK(hvdtune_local_rank(rt) == -1 && hvdtune_local_size(rt) == -1, "-");
  CHECK(hvdtune_cross_rank(rt) == -1 && hvdtune_cross_size(rt) == -1, "-");
}

static void HandleEntryPoints(void) {
  const void* data = NULL;
  size_t bytes = 0;
  int64_t shape[2];
  int ndim = 0;
  CHECK(hvdtune_poll(NULL) == -HVDTUNE_INVALID_ARGUMENT, "-");
  CHECK(hvdtune_wait(NULL) == HVDTUNE_INVALID_ARGUMENT, "-");
  CHECK(strcmp(hvdtune_handle_error(NULL), "null handle") == 0, "-");
  CHECK(hvdtune_handle_output(NULL, &data, &bytes, shape, 2, &ndim) ==
            HVDTUNE_INVALID_ARGUMENT,
        "-");
  hvdtune_handle_release(NULL);
}

static void AllreduceArguments(hvdtune_runtime* rt) {
  int64_t in[6] = {1, 2, 3, 4, 5, 6}, out[6];
  const int64_t s3[] = {3}, neg[] = {2, -3};
  const int64_t big1[] = {3, (int64_t)1 << 62};
  const int64_t big2[] = {(int64_t)1 << 32, (int64_t)1 << 32};
  const int64_t big3[] = {(int64_t)1 << 61}; /* elements fit, bytes do not */
  hvdtune_handle* h;
  REFUSED(hvdtune_allreduce(NULL, "a", in, out, 1, s3, 2, 0, &h), "runtime");
  REFUSED(hvdtune_allreduce(rt, NULL, in, out, 1, s3, 2, 0, &h), "name");
  REFUSED(hvdtune_allreduce(rt, "", in, out, 1, s3, 2, 0, &h), "empty");
  REFUSED(hvdtune_allreduce(rt, "a", NULL, out, 1, s3, 2, 0, &h), "null buf");
  REFUSED(hvdtune_allreduce(rt, "a", in, NULL, 1, s3, 2, 0, &h), "null buf");
  REFUSED(hvdtune_allreduce(rt, "a", in, out, 1, s3, -1, 0, &h), "dtype -1");
  REFUSED(hvdtune_allreduce(rt, "a", in, out, 1, s3, 10, 0, &h), "dtype 10");
  REFUSED(hvdtune_allreduce(rt, "a", in, out, 1, s3, 9, 0, &h), "bool");
  /* 261 would wrap to float32 in an 8-bit enum. */
  REFUSED(hvdtune_allreduce(rt, "a", in, out, 1, s3, 261, 0, &h), "dtype 261");
  REFUSED(hvdtune_allreduce(rt, "a", in, out, 1, s3, 2, -1, &h), "op -1");
  REFUSED(hvdtune_allreduce(rt, "a", in, out, 1, s3, 2, 5, &h), "op 5");
  REFUSED(hvdtune_allreduce(rt, "a", in, out, -1, s3, 2, 0, &h), "ndim -1");
  REFUSED(
      hvdtune_allreduce(rt, "a", in, out, HVDTUNE_MAX_NDIM + 1, s3, 2, 0, &h),
      "ndim 65");
  REFUSED(hvdtune_allreduce(rt, "a", in, out, 1, NULL, 2, 0, &h), "null shape");
  REFUSED(hvdtune_allreduce(rt, "a", in, out, 2, neg, 2, 0, &h),
          "negative dimension -3");
  REFUSED(hvdtune_allreduce(rt, "a", in, out, 2, big1, 2, 0, &h), "too large");
  REFUSED(hvdtune_allreduce(rt, "a", in, out, 2, big2, 2, 0, &h), "too large");
  REFUSED(hvdtune_allreduce(rt, "a", in, out, 1, big3, 2, 0, &h), "too large");
  ExpectRefused(hvdtune_allreduce(rt, "a", in, out, 1, s3, 2, 0, NULL),
                HVDTUNE_INVALID_ARGUMENT, NULL, "handle", __LINE__);
}

static void BroadcastArguments(hvdtune_runtime* rt) {
  float buf[4] = {0};
  const int64_t s4[] = {4}, neg[] = {-1};
  const int64_t big[] = {(int64_t)1 << 32, (int64_t)1 << 32};
  const int size = hvdtune_size(rt);
  hvdtune_handle* h;
  REFUSED(hvdtune_broadcast(NULL, "b", buf, 1, s4, 5, 0, &h), "runtime");
  REFUSED(hvdtune_broadcast(rt, NULL, buf, 1, s4, 5, 0, &h), "name");
  REFUSED(hvdtune_broadcast(rt, "", buf, 1, s4, 5, 0, &h), "empty");
  REFUSED(hvdtune_broadcast(rt, "b", NULL, 1, s4, 5, 0, &h), "null buffer");
  REFUSED(hvdtune_broadcast(rt, "b", buf, 1, s4, 10, 0, &h), "dtype 10");
  REFUSED(hvdtune_broadcast(rt, "b", buf, 1, s4, 5, -1, &h), "root -1");
  REFUSED(hvdtune_broadcast(rt, "b", buf, 1, s4, 5, size, &h), "is not a rank");
  REFUSED(hvdtune_broadcast(rt, "b", buf, -2, s4, 5, 0, &h), "ndim -2");
  REFUSED(hvdtune_broadcast(rt, "b", buf, 1, NULL, 5, 0, &h), "null shape");
  REFUSED(hvdtune_broadcast(rt, "b", buf, 1, neg, 5, 0, &h), "negative");
  REFUSED(hvdtune_broadcast(rt, "b", buf, 2, big, 5, 0, &h), "too large");
  ExpectRefused(hvdtune_broadcast(rt, "b", buf, 1, s4, 5, 0, NULL),
                HVDTUNE_INVALID_ARGUMENT, NULL, "handle", __LINE__);
}

static void AllgatherArguments(hvdtune_runtime* rt) {
  double buf[4] = {0};
  const int64_t s4[] = {4}, neg[] = {4, -2};
  const int64_t big[] = {3, (int64_t)1 << 62};
  /* One rank's bytes fit in int64, the gathered result does not. */
  const int64_t half[] = {INT64_MAX / 2 + 1};
  hvdtune_handle* h;
  REFUSED(hvdtune_allgather(NULL, "g", buf, 1, s4, 6, &h), "runtime");
  REFUSED(hvdtune_allgather(rt, NULL, buf, 1, s4, 6, &h), "name");
  REFUSED(hvdtune_allgather(rt, "", buf, 1, s4, 6, &h), "empty");
  REFUSED(hvdtune_allgather(rt, "g", NULL, 1, s4, 6, &h), "null buffer");
  REFUSED(hvdtune_allgather(rt, "g", buf, 1, s4, 70, &h), "dtype 70");
  REFUSED(hvdtune_allgather(rt, "g", buf, 0, NULL, 6, &h), "one dimension");
  REFUSED(hvdtune_allgather(rt, "g", buf, -1, s4, 6, &h), "ndim -1");
  REFUSED(hvdtune_allgather(rt, "g", buf, 1, NULL, 6, &h), "null shape");
  REFUSED(hvdtune_allgather(rt, "g", buf, 2, neg, 6, &h), "negative");
  REFUSED(hvdtune_allgather(rt, "g", buf, 2, big, 6, &h), "too large");
  if (hvdtune_size(rt) > 1) {
    REFUSED(hvdtune_allgather(rt, "g", buf, 1, half, 0, &h), "too large");
  }
  ExpectRefused(hvdtune_allgather(rt, "g", buf, 1, s4, 6, NULL),
                HVDTUNE_INVALID_ARGUMENT, NULL, "handle", __LINE__);
}

static int Wait(hvdtune_handle* h, const char* what) {
  const int rc = hvdtune_wait(h);
  CHECK(rc == HVDTUNE_OK, "%s: %d %s", what, rc, hvdtune_handle_error(h));
  CHECK(strcmp(hvdtune_handle_error(h), "") == 0, "%s", what);
  return rc;
}

/* A refused call must leave nothing behind: before the fix, a NULL handle
 * out-pointer still enqueued the allreduce, which later wrote `out`. */
static void RefusedCallEnqueuesNothing(hvdtune_runtime* rt) {
  int64_t in[3] = {1, 2, 3}, out[3] = {-7, -7, -7}, one = 1, sum = 0;
  const int64_t s3[] = {3};
  hvdtune_handle* h = NULL;
  int64_t* freed = (int64_t*)malloc(3 * sizeof(int64_t));
  CHECK(hvdtune_allreduce(rt, "refused", in, out, 1, s3, 2, 0, NULL) ==
            HVDTUNE_INVALID_ARGUMENT,
        "-");
  /* Under ASan a write into this freed buffer is a heap-use-after-free. */
  CHECK(hvdtune_allreduce(rt, "refused.freed", in, freed, 1, s3, 2, 0, NULL) ==
            HVDTUNE_INVALID_ARGUMENT,
        "-");
  free(freed);
  /* Collectives complete in enqueue order on every rank, so once this one
   * is done, anything enqueued before it would have run. */
  CHECK(hvdtune_allreduce(rt, "refused.after", &one, &sum, 0, NULL, 2, 0, &h) ==
            HVDTUNE_OK,
        "%s", hvdtune_last_error());
  if (h) Wait(h, "refused.after");
  hvdtune_handle_release(h);
  CHECK(sum == hvdtune_size(rt), "scalar sum %lld", (long long)sum);
  CHECK(out[0] == -7 && out[1] == -7 && out[2] == -7,
        "a refused allreduce wrote its output: %lld %lld %lld",
        (long long)out[0], (long long)out[1], (long long)out[2]);
  /* The same name works afterwards. */
  CHECK(
      hvdtune_allreduce(rt, "refused", in, out, 1, s3, 2, 0, &h) == HVDTUNE_OK,
      "%s", hvdtune_last_error());
  if (h) Wait(h, "refused");
  hvdtune_handle_release(h);
  CHECK(out[2] == 3 * hvdtune_size(rt), "out[2] = %lld", (long long)out[2]);
}

static void GoodPaths(hvdtune_runtime* rt) {
  const int size = hvdtune_size(rt), rank = hvdtune_rank(rt);
  int64_t rows = rank + 1, gin[2 * 4], oshape[2] = {0, 0};
  const int64_t gshape[] = {rows, 2}, s4[] = {4}, empty[] = {0, 5};
  float b[4] = {0, 0, 0, 0};
  const void* data = NULL;
  size_t bytes = 0;
  int ndim = 0, i;
  hvdtune_handle* h = NULL;
  CHECK(rank >= 0 && rank < size, "rank %d of %d", rank, size);
  CHECK(hvdtune_local_rank(rt) >= 0 && hvdtune_local_size(rt) >= 1, "-");
  CHECK(hvdtune_cross_rank(rt) >= 0 && hvdtune_cross_size(rt) >= 1, "-");
  /* Empty tensors may have null buffers. */
  CHECK(hvdtune_allreduce(rt, "empty", NULL, NULL, 2, empty, 5, 0, &h) ==
            HVDTUNE_OK,
        "%s", hvdtune_last_error());
  if (h) Wait(h, "empty");
  hvdtune_handle_release(h);
  if (rank == size - 1) {
    for (i = 0; i < 4; ++i) b[i] = (float)(i + 10);
  }
  CHECK(hvdtune_broadcast(rt, "bcast", b, 1, s4, 5, size - 1, &h) == HVDTUNE_OK,
        "%s", hvdtune_last_error());
  if (h) Wait(h, "bcast");
  hvdtune_handle_release(h);
  CHECK(b[0] == 10.0f && b[3] == 13.0f, "broadcast got %g %g", b[0], b[3]);
  for (i = 0; i < 2 * rows; ++i) gin[i] = rank;
  CHECK(hvdtune_allgather(rt, "gather", gin, 2, gshape, 2, &h) == HVDTUNE_OK,
        "%s", hvdtune_last_error());
  if (h) Wait(h, "gather");
  CHECK(hvdtune_handle_output(h, &data, &bytes, NULL, 0, &ndim) == HVDTUNE_OK,
        "-");
  CHECK(hvdtune_handle_output(h, &data, &bytes, NULL, 1, &ndim) ==
            HVDTUNE_INVALID_ARGUMENT,
        "null shape with max_ndim 1");
  CHECK(hvdtune_handle_output(h, &data, &bytes, oshape, -1, &ndim) ==
            HVDTUNE_INVALID_ARGUMENT,
        "max_ndim -1");
  CHECK(hvdtune_handle_output(h, &data, &bytes, oshape, 2, &ndim) == HVDTUNE_OK,
        "-");
  CHECK(ndim == 2 && oshape[0] == (int64_t)size * (size + 1) / 2 &&
            oshape[1] == 2,
        "allgather shape %d {%lld, %lld}", ndim, (long long)oshape[0],
        (long long)oshape[1]);
  CHECK(bytes == (size_t)oshape[0] * 2 * sizeof(int64_t), "bytes %zu", bytes);
  if (data && bytes >= 2 * sizeof(int64_t)) {
    CHECK(((const int64_t*)data)[0] == 0, "first gathered row from rank 0");
  }
  hvdtune_handle_release(h);
}

/* A handle that failed after it was enqueued (shapes differ between ranks):
 * hvdtune_poll() == 1 is enough for its error text. */
/* Barrier, reducescatter, alltoall, the grouped forms and join: results
 * and the refusals of what the calling rank can check. */
static void NewCollectives(hvdtune_runtime* rt) {
  const int rank = hvdtune_rank(rt), size = hvdtune_size(rt);
  hvdtune_handle* h;
  const void* data = NULL;
  size_t bytes = 0;
  int64_t shape[2] = {0, 0}, splits[8];
  int ndim = 0, n = 0, i;
  CHECK(hvdtune_barrier(rt, &h) == HVDTUNE_OK, "%s", hvdtune_last_error());
  if (h) Wait(h, "barrier");
  hvdtune_handle_release(h);

  { /* 2 rows per rank of int32 rows of 2, summed: rank r gets rows 2r, 2r+1
     */
    int32_t in[64];
    const int64_t s2[] = {2 * (int64_t)size, 2};
    for (i = 0; i < 4 * size; ++i) in[i] = i + rank;
    CHECK(hvdtune_reducescatter(rt, "c.rs", in, 2, s2, 1, 0, &h) == HVDTUNE_OK,
          "%s", hvdtune_last_error());
    if (h && Wait(h, "c.rs") == HVDTUNE_OK) {
      CHECK(hvdtune_handle_output(h, &data, &bytes, shape, 2, &ndim) ==
                HVDTUNE_OK,
            "-");
      CHECK(ndim == 2 && shape[0] == 2 && shape[1] == 2 && bytes == 16,
            "reducescatter shape %lld x %lld, %zu bytes", (long long)shape[0],
            (long long)shape[1], bytes);
      for (i = 0; i < 4 && bytes == 16; ++i) {
        const int32_t want = size * (4 * rank + i) + size * (size - 1) / 2;
        CHECK(((const int32_t*)data)[i] == want, "element %d: %d, want %d", i,
              ((const int32_t*)data)[i], want);
      }
    }
    hvdtune_handle_release(h);
    REFUSED(hvdtune_reducescatter(rt, "c.rs", in, 0, NULL, 1, 0, &h),
            "at least one dimension");
    REFUSED(hvdtune_reducescatter(rt, "c.rs", in, 1, s2, 9, 0, &h), "bool");
    REFUSED(hvdtune_reducescatter(rt, "c.rs", in, 1, s2, 1, 5, &h), "op 5");
  }

  { /* Alltoall: rank s sends s + 1 rows of one int64 to every rank. */
    int64_t in[64];
    const int64_t s1[] = {(int64_t)(rank + 1) * size};
    for (i = 0; i < size; ++i) splits[i] = rank + 1;
    for (i = 0; i < (rank + 1) * size; ++i) in[i] = rank;
    CHECK(hvdtune_alltoall(rt, "c.a2a", in, 1, s1, 2, splits, size, &h) ==
              HVDTUNE_OK,
          "%s", hvdtune_last_error());
    if (h && Wait(h, "c.a2a") == HVDTUNE_OK) {
      int64_t got[8];
      CHECK(hvdtune_handle_received_splits(h, got, 8, &n) == HVDTUNE_OK, "-");
      CHECK(n == size, "%d received splits", n);
      for (i = 0; i < n && i < 8; ++i) {
        CHECK(got[i] == i + 1, "from rank %d: %lld rows", i, (long long)got[i]);
      }
      CHECK(hvdtune_handle_output(h, &data, &bytes, shape, 1, &ndim) ==
                HVDTUNE_OK,
            "-");
      CHECK(bytes == (size_t)(size * (size + 1) / 2) * 8, "%zu bytes", bytes);
    }
    hvdtune_handle_release(h);
    REFUSED(hvdtune_alltoall(rt, "c.a2a", in, 1, s1, 2, NULL, 3, &h),
            "null splits");
    splits[0] += 1;
    REFUSED(hvdtune_alltoall(rt, "c.a2a", in, 1, s1, 2, splits, size, &h),
            "add up");
  }

  { /* Grouped allgather and reducescatter of two members. */
    const char* names[] = {"c.g.a", "c.g.b"};
    float a[4] = {1, 1, 1, 1}, b[2] = {2, 2};
    const void* inputs[] = {a, b};
    const int ndims[] = {1, 1}, dtypes[] = {5, 5};
    const int64_t sa[] = {4}, sb[] = {2};
    const int64_t* shapes[] = {sa, sb};
    CHECK(hvdtune_grouped_allgather(rt, "c.gag", 2, names, inputs, ndims,
                                    shapes, dtypes, &h) == HVDTUNE_OK,
          "%s", hvdtune_last_error());
    if (h && Wait(h, "c.gag") == HVDTUNE_OK) {
      CHECK(hvdtune_handle_output_at(h, 1, &data, &bytes, shape, 1, &ndim) ==
                    HVDTUNE_OK &&
                shape[0] == 2 * size,
            "member 1 has %lld rows", (long long)shape[0]);
      CHECK(hvdtune_handle_output_at(h, 2, &data, &bytes, shape, 1, &ndim) ==
                HVDTUNE_INVALID_ARGUMENT,
            "member 2 of 2");
    }
    hvdtune_handle_release(h);
    CHECK(hvdtune_grouped_reducescatter(rt, "c.grs", 2, names, inputs, ndims,
                                        shapes, dtypes, 0, &h) == HVDTUNE_OK,
          "%s", hvdtune_last_error());
    if (h && Wait(h, "c.grs") == HVDTUNE_OK) {
      CHECK(hvdtune_handle_output_at(h, 0, &data, &bytes, shape, 1, &ndim) ==
                HVDTUNE_OK,
            "-");
      CHECK(bytes == 0 || ((const float*)data)[0] == (float)size,
            "grouped reducescatter sum %g",
            bytes ? ((const float*)data)[0] : 0);
    }
    hvdtune_handle_release(h);
    REFUSED(hvdtune_grouped_allgather(rt, "c.gag", 0, names, inputs, ndims,
                                      shapes, dtypes, &h),
            "no tensors");
    REFUSED(hvdtune_grouped_allgather(rt, "c.gag", 2, names, NULL, ndims,
                                      shapes, dtypes, &h),
            "null member array");
    names[1] = "c.g.a";
    REFUSED(hvdtune_grouped_allgather(rt, "c.gag", 2, names, inputs, ndims,
                                      shapes, dtypes, &h),
            "appears twice");
  }

  CHECK(hvdtune_join(rt, &h) == HVDTUNE_OK, "%s", hvdtune_last_error());
  if (h && Wait(h, "join") == HVDTUNE_OK) {
    const int last = hvdtune_handle_last_joined_rank(h);
    CHECK(last >= 0 && last < size, "last joined rank %d", last);
  }
  hvdtune_handle_release(h);
  CHECK(hvdtune_handle_last_joined_rank(NULL) == -1, "-");
  CHECK(hvdtune_start_timeline(rt, "", 0) == HVDTUNE_INVALID_ARGUMENT &&
            strstr(hvdtune_last_error(), "empty") != NULL,
        "empty timeline path: %s", hvdtune_last_error());
  CHECK(hvdtune_start_timeline(rt, NULL, 0) == HVDTUNE_INVALID_ARGUMENT, "-");
  CHECK(hvdtune_stop_timeline(rt) == HVDTUNE_OK, "no timeline to stop");
  CHECK(hvdtune_stop_timeline(NULL) == HVDTUNE_INVALID_ARGUMENT, "-");
}

static void ErrorTextAfterPoll(hvdtune_runtime* rt) {
  const int rank = hvdtune_rank(rt);
  int64_t in[2] = {1, 1}, out[2];
  const int64_t shape[] = {rank == 0 ? 1 : 2};
  hvdtune_handle* h = NULL;
  const char* err;
  const void* data = NULL;
  if (hvdtune_size(rt) < 2) return;
  CHECK(hvdtune_allreduce(rt, "mismatch", in, out, 1, shape, 2, 0, &h) ==
            HVDTUNE_OK,
        "%s", hvdtune_last_error());
  if (!h) return;
  while (hvdtune_poll(h) == 0) {
  }
  err = hvdtune_handle_error(h);
  CHECK(strstr(err, "MISMATCH") != NULL, "after poll: '%s'", err);
  CHECK(
      hvdtune_handle_output(h, &data, NULL, NULL, 0, NULL) == HVDTUNE_MISMATCH,
      "handle_output of a failed handle");
  CHECK(hvdtune_wait(h) == HVDTUNE_MISMATCH, "-");
  CHECK(hvdtune_handle_error(h) == err, "the text moved after wait");
  hvdtune_handle_release(h);
}

/* After shutdown: pending handles fail with their text, new calls are
 * refused at the call. */
static void Shutdown(hvdtune_runtime* rt) {
  int64_t x = 1, y = 0;
  int rc;
  hvdtune_handle *h = NULL, *lonely = NULL;
  if (hvdtune_size(rt) > 1 && hvdtune_rank(rt) == 0) {
    CHECK(hvdtune_allreduce(rt, "lonely", &x, &y, 0, NULL, 2, 0, &lonely) ==
              HVDTUNE_OK,
          "-");
  }
  CHECK(hvdtune_running(rt) == 1 && hvdtune_is_shut_down(rt) == 0,
        "before shutdown");
  CHECK(hvdtune_shutdown(rt) == HVDTUNE_OK, "-");
  CHECK(hvdtune_shutdown(rt) == HVDTUNE_OK, "idempotent");
  CHECK(hvdtune_running(rt) == 0 && hvdtune_is_shut_down(rt) == 1,
        "after shutdown");
  CHECK(hvdtune_running(NULL) == -1 && hvdtune_is_shut_down(NULL) == -1, "-");
  if (lonely) {
    while (hvdtune_poll(lonely) == 0) {
    }
    CHECK(strlen(hvdtune_handle_error(lonely)) > 0, "no text for abort");
    CHECK(hvdtune_wait(lonely) == HVDTUNE_ABORTED, "-");
    hvdtune_handle_release(lonely);
  }
  h = Poisoned();
  rc = hvdtune_allreduce(rt, "late", &x, &y, 0, NULL, 2, 0, &h);
  ExpectRefused(rc, HVDTUNE_ABORTED, h, "shut down", __LINE__);
}

/* Hostile sweep: seeded random arguments, the same on every rank (so what is
 * accepted is collective). The test's own model says whether a call must be
 * refused; accepted ones run and must succeed. Shapes that are valid but
 * larger than the test's buffers are not called (they would read past them,
 * which no check can see). */
static uint64_t g_seed = 0x9E3779B97F4A7C15ull;
static uint64_t Next(void) {
  g_seed ^= g_seed << 13;
  g_seed ^= g_seed >> 7;
  g_seed ^= g_seed << 17;
  return g_seed;
}
static int Pick(int n) { return (int)(Next() % (uint64_t)n); }

enum { kRefused = 0, kFits = 1, kTooBigForTest = 2, kRowsOverflow = 3 };
enum { kCap = 256 };

static int Classify(int ndim, const int64_t* shape, uint64_t elem,
                    uint64_t max_bytes, int64_t* elements) {
  uint64_t n = 1;
  int i, zero = 0;
  for (i = 0; i < ndim; ++i) {
    if (shape[i] < 0) return kRefused;
    if (shape[i] == 0) zero = 1;
  }
  *elements = 0;
  if (zero) return kFits;
  for (i = 0; i < ndim; ++i) {
    if (__builtin_mul_overflow(n, (uint64_t)shape[i], &n)) return kRefused;
  }
  if (__builtin_mul_overflow(n, elem, &n) || n > max_bytes) return kRefused;
  *elements = (int64_t)(n / elem);
  return n <= kCap ? kFits : kTooBigForTest;
}

static void HostileSweep(hvdtune_runtime* rt, int iterations) {
  static const int64_t kDims[] = {0,
                                  1,
                                  2,
                                  3,
                                  5,
                                  -1,
                                  -7,
                                  INT32_MAX,
                                  (int64_t)1 << 32,
                                  (int64_t)1 << 62,
                                  INT64_MAX,
                                  INT64_MIN};
  static const uint64_t kSize[] = {1, 4, 8, 2, 2, 4, 8, 1, 2, 1};
  const int size = hvdtune_size(rt);
  unsigned char in[kCap], out[kCap];
  int64_t shape[4];
  int it, refused = 0, ran = 0, skipped = 0;
  memset(in, 1, sizeof in);
  for (it = 0; it < iterations; ++it) {
    const int kind = Pick(3);
    const int ndim = Pick(12) == 0 ? 65 : Pick(5) - 1;
    const int dtype = Pick(13) - 1, op = Pick(7) - 1;
    const int root = Pick(size + 2) - 1;
    char name[32];
    const char* nm = name;
    const int64_t* sp = Pick(10) == 0 ? NULL : shape;
    const void* ip = Pick(10) == 0 ? NULL : in;
    void* obuf = Pick(10) == 0 ? NULL : out;
    hvdtune_handle* h = Poisoned();
    hvdtune_handle** hp = Pick(12) == 0 ? NULL : &h;
    int expect = kFits, rc, i;
    int64_t elements = 0;
    snprintf(name, sizeof name, "hostile.%d", it);
    if (Pick(12) == 0) nm = Pick(2) ? NULL : "";
    for (i = 0; i < 4; ++i) {
      shape[i] = kDims[Pick((int)(sizeof kDims / sizeof kDims[0]))];
    }
    if (nm == NULL || nm[0] == '\0' || hp == NULL || ndim < 0 ||
        ndim > HVDTUNE_MAX_NDIM || (ndim > 0 && sp == NULL) || dtype < 0 ||
        dtype > 9 || (kind == 0 && (op < 0 || op > 4 || dtype == 9)) ||
        (kind == 1 && (root < 0 || root >= size)) || (kind == 2 && ndim == 0)) {
      expect = kRefused;
    } else {
      expect = Classify(ndim, sp, kSize[dtype],
                        kind == 2 ? (uint64_t)INT64_MAX / (uint64_t)size
                                  : (uint64_t)INT64_MAX,
                        &elements);
      const int null_buffer = kind == 0   ? ip == NULL || obuf == NULL
                              : kind == 1 ? obuf == NULL
                                          : ip == NULL;
      if (expect != kRefused && elements > 0 && null_buffer) expect = kRefused;
      /* Every rank passes the same shape: an allgather of empty rows whose
       * row counts add up past int64 is accepted, then fails everywhere. */
      if (expect == kFits && kind == 2 &&
          (uint64_t)sp[0] > (uint64_t)INT64_MAX / (uint64_t)size) {
        expect = kRowsOverflow;
      }
    }
    if (expect == kTooBigForTest) {
      ++skipped;
      continue;
    }
    if (kind == 0) {
      rc = hvdtune_allreduce(rt, nm, ip, obuf, ndim, sp, dtype, op, hp);
    } else if (kind == 1) {
      rc = hvdtune_broadcast(rt, nm, obuf, ndim, sp, dtype, root, hp);
    } else {
      rc = hvdtune_allgather(rt, nm, ip, ndim, sp, dtype, hp);
    }
    if (expect == kRefused) {
      ++refused;
      CHECK(rc == HVDTUNE_INVALID_ARGUMENT && (hp == NULL || h == NULL),
            "iteration %d kind %d: code %d for a bad call", it, kind, rc);
      if (rc == HVDTUNE_OK && hp != NULL) hvdtune_wait(h);
    } else {
      ++ran;
      CHECK(rc == HVDTUNE_OK, "iteration %d kind %d: %d %s", it, kind, rc,
            hvdtune_last_error());
      if (rc == HVDTUNE_OK) {
        rc = hvdtune_wait(h);
        if (expect == kRowsOverflow) {
          CHECK(rc == HVDTUNE_MISMATCH &&
                    strstr(hvdtune_handle_error(h), "add up") != NULL,
                "iteration %d: wait %d %s", it, rc, hvdtune_handle_error(h));
        } else {
          CHECK(rc == HVDTUNE_OK, "iteration %d: wait %d %s", it, rc,
                hvdtune_handle_error(h));
        }
        hvdtune_handle_release(h);
      }
    }
  }
  if (hvdtune_rank(rt) == 0) {
    printf(
        "hostile sweep: %d calls refused, %d ran, %d skipped (too large "
        "for the test's buffers)\n",
        refused, ran, skipped);
  }
}

int main(int argc, char** argv) {
  hvdtune_runtime* rt = NULL;
  char err[512] = "";
  int rc, iterations = 400;
  if (argc > 1 && strcmp(argv[1], "--expect-init-error") == 0) {
    return InitErrorMode(argc, argv);
  }
  if (argc > 2 && strcmp(argv[1], "--hostile") == 0) iterations = atoi(argv[2]);
  Lifecycle();
  HandleEntryPoints();
  rc = hvdtune_init(&rt, err, sizeof err);
  if (rc != HVDTUNE_OK) {
    fprintf(stderr, "hvdtune_init: %d %s\n", rc, err);
    return 1;
  }
  g_rank = hvdtune_rank(rt);
  AllreduceArguments(rt);
  BroadcastArguments(rt);
  AllgatherArguments(rt);
  RefusedCallEnqueuesNothing(rt);
  GoodPaths(rt);
  NewCollectives(rt);
  ErrorTextAfterPoll(rt);
  HostileSweep(rt, iterations);
  Shutdown(rt);
  hvdtune_destroy(rt);
  printf("[rank %d] c_api_test: %d failures\n", g_rank, g_failures);
  return g_failures == 0 ? 0 : 1;
}
