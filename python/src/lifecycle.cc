// hvdtune._core's runtime lifecycle: init, shutdown and process sets (a
// runtime each), what one asks of the runtime (ranks, engine, NCCL), and the
// handles other modules and launchers use (runtime_ref, RendezvousServer).

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "bindings.h"
#include "errors.h"
#include "hvdtune/rendezvous.h"
#include "hvdtune/runtime.h"
#include "runtime_ref.h"
#include "state.h"

namespace py = pybind11;

namespace hvdtune::python {
namespace {

// Destroys the runtime without the GIL: its teardown (the engine's
// connections to peers that may be gone) can take up to the engine's
// timeout, and the Python threads of the process (the elastic heartbeat
// among them) must run meanwhile. The runtime holds no Python object.
void DropRuntime(State& s) {
  std::shared_ptr<Runtime> old = std::move(s.runtime);
  py::gil_scoped_release release;
  old.reset();
}

void Init(bool tune_num_groups) {
  State& s = GetState();
  // Initialised until this rank shuts down, as in Horovod: a peer that shut
  // down and exited stops the runtime but does not uninitialise this rank,
  // and building a new Runtime (collective) would wait for it forever.
  if (s.runtime && !s.runtime->shut_down()) return;
  DropRuntime(s);
  RuntimeOptions options;
  options.tune_num_groups = tune_num_groups;
  try {
    // MPI init and the ranks' configuration agreement block; let other
    // Python threads run meanwhile.
    py::gil_scoped_release release;
    s.runtime = std::make_shared<Runtime>(std::move(options));
  } catch (const ConfigError& e) {
    Raise("config", e.what());
  } catch (const std::exception& e) {
    Raise("internal", std::string("init failed: ") + e.what());
  }
}

// The environment of a process set's runtime: the job's, without the
// autotuner, metrics and timeline, which belong to the whole job's runtime
// (a set runs the job's configured knob values).
EnvLookup ProcessSetEnv() {
  return [env = ProcessEnv()](std::string_view name) {
    for (std::string_view part : {"AUTOTUNE", "METRICS", "TIMELINE"}) {
      if (name.find(part) != std::string_view::npos) {
        return std::optional<std::string>();
      }
    }
    return env(name);
  };
}

// Collective over `ranks` (ascending ranks of the job); every rank of the
// job calls it with the same id and ranks, and the others keep nothing.
void AddProcessSet(int id, const std::vector<int>& ranks) {
  State& s = GetState();
  Runtime& world = Rt();
  if (id <= 0 || s.sets.count(id) != 0) {
    Raise("invalid_argument",
          "process set id " + std::to_string(id) + " is taken or invalid");
  }
  if (std::find(ranks.begin(), ranks.end(), world.rank()) == ranks.end()) {
    return;
  }
  RuntimeOptions options;
  options.env = ProcessSetEnv();
  options.ranks = ranks;
  try {
    py::gil_scoped_release release;
    s.sets[id] = std::make_shared<Runtime>(std::move(options));
  } catch (const ConfigError& e) {
    Raise("config", e.what());
  } catch (const std::exception& e) {
    Raise("internal", std::string("process set: ") + e.what());
  }
}

// Every rank of the set calls it; pending collectives of the set fail.
bool RemoveProcessSet(int id) {
  State& s = GetState();
  const auto it = s.sets.find(id);
  if (it == s.sets.end()) return false;
  {
    py::gil_scoped_release release;
    it->second->Shutdown();
  }
  s.sets.erase(it);
  PruneOrphans();
  return true;
}

void Shutdown() {
  State& s = GetState();
  while (!s.sets.empty()) RemoveProcessSet(s.sets.begin()->first);
  if (s.runtime) {
    {
      py::gil_scoped_release release;
      s.runtime->Shutdown();
    }
    DropRuntime(s);
  }
  // Every pending handle failed with kAborted: nothing uses the buffers.
  PruneOrphans();
}

// A weak reference to the runtime of process set `id` (0: the whole job)
// for another extension module of this build (hvdtune._c10d): a capsule
// named kRuntimeRefCapsule holding a std::weak_ptr<Runtime>.
py::capsule RuntimeRef(int id) {
  Rt(id);  // raises when there is none
  State& s = GetState();
  const std::shared_ptr<Runtime>& rt = id == 0 ? s.runtime : s.sets.at(id);
  auto* ref = new std::weak_ptr<Runtime>(rt);
  return py::capsule(ref, kRuntimeRefCapsule, [](PyObject* capsule) {
    delete static_cast<std::weak_ptr<Runtime>*>(
        PyCapsule_GetPointer(capsule, kRuntimeRefCapsule));
  });
}

}  // namespace

void BindLifecycle(py::module_& m) {
  m.def("init", &Init, py::arg("tune_num_groups") = false);
  m.def("shutdown", &Shutdown);
  m.def("is_initialized", [] {
    State& s = GetState();
    return s.runtime != nullptr && !s.runtime->shut_down();
  });
  m.def(
      "nccl_built", [] { return BuiltWithNccl(); },
      "Whether this build has the NCCL backend.");
  m.def(
      "nccl_version", [] { return NcclRuntimeVersion(); },
      "The loaded NCCL's version code (22803 for 2.28.3); 0 without.");
  m.def(
      "has_nccl", [](int process_set) { return Rt(process_set).has_nccl(); },
      py::arg("process_set") = 0,
      "Whether the runtime (of a process set) runs CUDA buffers on NCCL.");
  m.def(
      "nccl_unavailable",
      [](int process_set) { return Rt(process_set).nccl_unavailable(); },
      py::arg("process_set") = 0, "Why has_nccl() is false.");
  m.def("rank", [] { return Rt().rank(); });
  m.def("size", [] { return Rt().size(); });
  m.def("local_rank", [] { return Rt().local_rank(); });
  m.def("local_size", [] { return Rt().local_size(); });
  m.def("cross_rank", [] { return Rt().cross_rank(); });
  m.def("cross_size", [] { return Rt().cross_size(); });
  m.def("add_process_set", &AddProcessSet, py::arg("id"), py::arg("ranks"),
        "Collective over the job: builds set `id`'s runtime on its ranks.");
  m.def("remove_process_set", &RemoveProcessSet, py::arg("id"),
        "Shuts set `id`'s runtime down; false when this rank has none.");
  m.def(
      "engine", [] { return std::string(EngineName(Rt().engine())); },
      "The engine the runtime runs on: 'mpi' or 'gloo' (init() first).");
  m.def("gloo_built", &GlooBuilt,
        "Whether this build has the Gloo engine (HOROVOD_GLOO=1).");
  m.def("runtime_ref", &RuntimeRef, py::arg("process_set") = 0,
        "A weak reference to the runtime (a capsule), for hvdtune._c10d.");
  // The Gloo engine's rendezvous store, served by a launcher that is not
  // hvd-tune run --gloo (the torch.distributed backend under torchrun).
  py::class_<RendezvousServer>(m, "RendezvousServer",
                               "The Gloo engine's rendezvous key-value store "
                               "(hvdtune/rendezvous.h), served by this "
                               "process while the object lives.")
      .def(py::init<const std::string&, int>(), py::arg("address"),
           py::arg("port") = 0,
           "Listens on address:port (0: a free port); raises naming the "
           "address when it cannot.")
      .def_property_readonly("port", &RendezvousServer::port)
      .def(
          "set",
          [](RendezvousServer& s, const std::string& key,
             const std::string& value) { s.Set(key, value); },
          py::arg("key"), py::arg("value"))
      .def_static("lost_rank_key", &RendezvousServer::LostRankKey,
                  py::arg("rank"),
                  "The key under which a launcher marks a rank lost (the "
                  "survivors' errors name it).");
}

}  // namespace hvdtune::python
