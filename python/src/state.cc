// The process's runtime and the collectives in flight (state.h).

#include "state.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "errors.h"

namespace py = pybind11;

namespace hvdtune::python {

State& GetState() {
  static State* state = new State;
  return *state;
}

Runtime& Rt() {
  State& s = GetState();
  if (!s.runtime) {
    Raise("not_initialized",
          "hvdtune is not initialized (call init() first, or shutdown() "
          "was called on this rank)");
  }
  return *s.runtime;
}

Runtime& Rt(int id) {
  if (id == 0) return Rt();
  State& s = GetState();
  const auto it = s.sets.find(id);
  if (it == s.sets.end()) {
    Raise("invalid_argument",
          "process set " + std::to_string(id) + ": rank " +
              std::to_string(Rt().rank()) +
              " is not in it (or it was removed); only its ranks may call "
              "its collectives");
  }
  return *it->second;
}

void PruneOrphans() {
  auto& orphans = GetState().orphans;
  std::erase_if(orphans, [](const std::shared_ptr<Pending>& p) {
    return p->handle.Poll();
  });
}

std::unique_ptr<PyHandle> MakeHandle(std::shared_ptr<Pending> pending) {
  if (!GetState().orphans.empty()) PruneOrphans();
  // Refused at submission (a name already in flight on this rank, a device
  // tensor without NCCL): the caller hears it at once, as Horovod raises
  // these on the submitting call, not at synchronize.
  if (pending->handle.Poll() &&
      pending->handle.status().code() == StatusCode::kInvalidArgument) {
    RaiseStatus(pending->handle.status());
  }
  return std::make_unique<PyHandle>(std::move(pending));
}

}  // namespace hvdtune::python
