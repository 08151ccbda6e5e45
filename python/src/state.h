// The process's runtime and the collectives in flight: what every part of
// hvdtune._core (bindings.h) shares.
#pragma once

#include <pybind11/pybind11.h>

#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "errors.h"
#include "hvdtune/runtime.h"
#include "tensors.h"

namespace hvdtune::python {

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
State& GetState();

// The runtime, also after another rank shut it down: ranks, sizes and
// status stay readable, and collectives fail with code "aborted".
Runtime& Rt();

// The runtime of process set `id` (0: the whole job).
Runtime& Rt(int id);

// What a collective keeps alive until it completes.
struct Pending {
  Handle handle;
  std::vector<TensorRef> refs;
  // Collectives whose results are the runtime's buffers (allgather,
  // reducescatter, alltoall, grouped forms): each member's dtype.
  std::vector<DataType> output_dtypes;
};

// Drops the orphans whose collectives completed.
void PruneOrphans();

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
          pybind11::gil_scoped_release release;
          done = h.WaitFor(0.1);
        }
        if (done) break;
        if (PyErr_CheckSignals() != 0) throw pybind11::error_already_set();
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

// The handle of a submitted collective; raises at once when the runtime
// refused it at submission.
std::unique_ptr<PyHandle> MakeHandle(std::shared_ptr<Pending> pending);

}  // namespace hvdtune::python
