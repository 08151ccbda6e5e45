// Cluster simulator: an alpha-beta model of one data-parallel training step
// under the runtime's knobs, on N nodes x G ranks per node.
//
// Reused from the runtime, not copied: the fusion planner (PlanFusion), the
// knob table (KnobSettings, defaults) and the grouping of gradients
// (SplitIntoGroups). What is modelled:
//  - backward timeline: layer i's gradient is ready when its backward
//    compute ends (layers last to first); communication runs on the cycle
//    thread and overlaps the compute of earlier layers;
//  - the cycle loop: a gradient arriving on an idle rank starts a cycle at
//    once; gradients arriving while a cycle runs wait for the next one,
//    cycle_time after that cycle began or when it ends if later; a cycle
//    negotiates what is ready (bit-vector allreduce with the response cache;
//    requests gathered to rank 0 and responses broadcast without it, paid
//    per tensor and per rank), plans fusion with the threshold, and runs
//    each fused buffer in pipeline chunks (copy in, allreduce, copy out);
//  - per algorithm (native, ring, hierarchical) an alpha-beta cost with a
//    reduction cost and the ring's segment pipeline (per-segment overhead,
//    the last segment's reduction not overlapped); `native` is MPI's
//    allreduce on CPU presets and NCCL's (its own cost model, ring or tree,
//    whichever NCCL would pick) on GPU presets;
//  - num_groups: a group of gradients is released only when all its
//    members are ready;
//  - CPU presets: the cycle thread shares the cores with compute, so the
//    CPU of its idle cycles (every cycle_time) slows the backward pass.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hvdtune/knobs.h"
#include "hvdtune/types.h"

namespace hvdtune::sim {

/// Constants of one machine type: links, host costs, device speed. Times in
/// seconds, bandwidths in bytes per second.
struct Preset {
  std::string name;
  std::string description;
  double intra_alpha = 0;    // per message step inside a node
  double intra_bw = 0;       // per rank, one direction
  double inter_alpha = 0;    // per message step across nodes
  double inter_bw = 0;       // per node (all its NICs)
  double reduce_bw = 0;      // reduction arithmetic per rank
  double copy_bw = 0;        // fusion buffer copy (in or out) per rank
  double call_s = 0;         // fixed cost of one backend call
  double segment_s = 0;      // per ring segment (post, progress, wake-up)
  double cycle_s = 0;        // fixed host cost of a cycle with work
  double tensor_s = 0;       // per tensor: enqueue, response, completion
  double cached_s = 0;       // per cached tensor in negotiation (bit, lookup)
  double request_s = 0;      // per tensor per rank, uncached (rank 0 table)
  double compute_scale = 1;  // compute time multiplier vs the GPU reference
  /// CPU time of one idle cycle (wake-up, bit-vector allreduce; waits
  /// yield the core, so this is far below its wall time, cycle_s).
  double idle_cpu_s = 0;
  /// Fraction of that CPU time taken from compute (shared cores); 0 on GPU
  /// machines.
  double cpu_share = 0;
  /// The devices are GPUs: `native` is ncclAllReduce, priced by NCCL's own
  /// cost model (nccl_model.h), not MPI's host algorithms.
  bool gpu = false;
  /// With `gpu`: the GPUs of a node talk over NVLink (else PCIe).
  bool nvlink = false;
};

/// Built-in presets: "nvlink-ib", "pcie-25gbe", "cpu-10gbe" (scale
/// scenarios), "cpu-shm", "cpu-loopback" (this machine: one node in shared
/// memory, emulated nodes over loopback TCP), and "emulated-1gbe",
/// "emulated-10gbe" (this machine's emulated cluster, tools/cluster.sh),
/// calibrated on this machine.
const std::vector<Preset>& Presets();
/// Throws std::invalid_argument naming the preset.
const Preset& FindPreset(const std::string& name);

struct Cluster {
  int nodes = 1;
  int ranks_per_node = 1;
  int world() const { return nodes * ranks_per_node; }
};

/// One gradient, in the order backward produces it.
struct Gradient {
  std::int64_t bytes = 0;
  DataType dtype = DataType::kFloat32;
  double backward_s = 0;  // compute producing it (GPU reference)
};

struct Workload {
  std::string name;
  std::vector<Gradient> gradients;  // backward order
  double forward_s = 0;             // not overlapped (GPU reference)
  int batch_per_rank = 32;
  bool app_groups = false;  // the application groups (num_groups tuned)
  std::int64_t total_bytes() const;
};

/// The workloads of bench/data (resnet50, vgg16, bert-base), many-small,
/// and two built to be hard for a tuner ("narrow", "far-optimum"); the
/// compute times are assumptions documented in docs/simulator.md.
Workload MakeWorkload(const std::string& name, const std::string& shapes_dir);
std::vector<std::string> WorkloadNames();

/// Seconds of one allreduce call of `bytes` with `algorithm` (index in the
/// registry order: native, ring, hierarchical), without fusion copies.
double AllreduceSeconds(const Preset& p, const Cluster& c, int algorithm,
                        double bytes, double segment_bytes);

/// Seconds spent negotiating `tensors` ready tensors in one cycle.
double NegotiationSeconds(const Preset& p, const Cluster& c, int tensors,
                          bool cache_on);

struct StepResult {
  double step_s = 0;
  double samples_per_s = 0;  // whole cluster
  double bytes_per_s = 0;    // gradient bytes per second (tuner's score)
  int cycles = 0;            // cycles with work
  int calls = 0;             // backend calls (fused buffers)
};

/// One noiseless step.
StepResult SimulateStep(const Preset& p, const Cluster& c, const Workload& w,
                        const KnobSettings& knobs);

/// A lone synchronous allreduce of `bytes` (allreduce_bench): the tensor is
/// enqueued right after the previous call completed.
double SingleCallSeconds(const Preset& p, const Cluster& c,
                         const KnobSettings& knobs, double bytes);

}  // namespace hvdtune::sim
