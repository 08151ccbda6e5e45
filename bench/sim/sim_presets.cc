// Presets and workloads of the cluster simulator. Where each number comes
// from is in docs/simulator.md ("Calibration").
#include <algorithm>
#include <stdexcept>

#include "hvdtune/workloads/builtin.h"
#include "sim_model.h"

namespace hvdtune::sim {

const std::vector<Preset>& Presets() {
  static const std::vector<Preset> kPresets = [] {
    // This machine, fitted by `cluster_sim --calibrate --fit` to the
    // measurements of docs/simulator.md's Calibration section (4 ranks on 2
    // cores, shared memory).
    Preset shm;
    shm.name = "cpu-shm";
    shm.description =
        "this machine: 4 ranks on 2 cores, Open MPI shared memory";
    shm.intra_alpha = 0;  // fitted to 0: call_s absorbs it
    shm.intra_bw = 3.43e9;
    shm.reduce_bw = 4.26e9;  // not fitted (calibration.cc)
    shm.copy_bw = 33.7e9;
    shm.call_s = 58.4e-6;
    shm.segment_s = 31.1e-6;
    shm.cycle_s = 89.7e-6;
    shm.tensor_s = 8.18e-6;
    shm.cached_s = 0.749e-6;
    shm.request_s = 0.610e-6;
    shm.compute_scale = 20;
    // Not fitted: synthetic_train's compute at 0.2 ms and 20 ms cycle
    // times is equal within its noise (docs/simulator.md, Calibration), so an
    // idle cycle takes at most a few microseconds of CPU from it.
    shm.idle_cpu_s = 5e-6;
    shm.cpu_share = 1;
    shm.inter_alpha = shm.intra_alpha;
    shm.inter_bw = shm.intra_bw;

    Preset loop = shm;  // 2 emulated nodes x 2 ranks: TCP over loopback
    loop.name = "cpu-loopback";
    loop.description = "this machine: emulated nodes, TCP over loopback";
    loop.inter_alpha = 21.4e-6;
    loop.inter_bw = 2.41e9;

    // 2 emulated nodes x 2 ranks (tools/cluster.sh): network namespaces
    // joined by tbf-shaped veth links. cpu-shm's host costs but three, fitted
    // by `cluster_sim --calibrate --fit` to training steps measured on the
    // cluster (docs/simulator.md, "The emulated cluster"): the link's
    // bandwidth; the cost of a ring segment, which is a TCP send and receive
    // there (31 us in shared memory); and the per-tensor cost, fitted to 0:
    // the model charges it to the cycle, but most of it (enqueue, completion)
    // runs on the application's threads, which on the cluster wait on the
    // link. The TCP latency is the loopback fit's: a veth pair and a bridge
    // add microseconds that the steps cannot resolve.
    Preset emu1 = shm;
    emu1.name = "emulated-1gbe";
    emu1.description = "this machine: 2 emulated nodes on 1gbe links";
    emu1.inter_alpha = loop.inter_alpha;
    emu1.inter_bw = 1.35e8;
    emu1.segment_s = 1.22e-3;
    emu1.tensor_s = 0;
    Preset emu10 = emu1;
    emu10.name = "emulated-10gbe";
    emu10.description = "this machine: 2 emulated nodes on 10gbe links";
    emu10.inter_bw = 5.27e8;
    emu10.segment_s = 0.579e-3;

    Preset cpu = shm;  // CPU cluster: this machine's host costs, 10 GbE
    cpu.name = "cpu-10gbe";
    cpu.description = "CPU nodes (this machine's host costs) + 10 GbE";
    cpu.inter_alpha = 40e-6;
    cpu.inter_bw = 1.15e9;

    Preset nv;
    nv.name = "nvlink-ib";
    nv.description =
        "8 GPUs/node on NVLink (A100 class) + 8x200 Gb/s InfiniBand";
    nv.intra_alpha = 3.4e-6;
    nv.intra_bw = 230e9;
    nv.inter_alpha = 6e-6;
    nv.inter_bw = 185e9;
    nv.reduce_bw = 500e9;
    nv.copy_bw = 700e9;
    nv.call_s = 10e-6;
    nv.segment_s = 2e-6;
    nv.cycle_s = 20e-6;
    nv.tensor_s = 3e-6;
    nv.cached_s = 0.3e-6;
    nv.request_s = 0.1e-6;
    nv.compute_scale = 1;
    nv.gpu = true;
    nv.nvlink = true;

    Preset pcie = nv;
    pcie.name = "pcie-25gbe";
    pcie.description =
        "GPUs on PCIe gen3 (no NVLink) + one 25 GbE NIC per node";
    pcie.intra_alpha = 5e-6;
    pcie.intra_bw = 12e9;
    pcie.inter_alpha = 20e-6;
    pcie.inter_bw = 2.8e9;
    pcie.reduce_bw = 300e9;
    pcie.copy_bw = 300e9;
    pcie.compute_scale = 1.5;
    pcie.nvlink = false;
    return std::vector<Preset>{nv, pcie, cpu, shm, loop, emu1, emu10};
  }();
  return kPresets;
}

const Preset& FindPreset(const std::string& name) {
  for (const Preset& p : Presets()) {
    if (p.name == name) return p;
  }
  throw std::invalid_argument("unknown preset '" + name + "'");
}

namespace {

// Reference compute per step on one GPU (A100 class, batch per rank as
// given): forward, backward. Assumptions, stated in docs/simulator.md.
struct Compute {
  const char* name;
  double forward_s, backward_s;
  int batch;
};
constexpr Compute kCompute[] = {
    {"resnet50", 0.010, 0.020, 64},  {"vgg16", 0.025, 0.050, 64},
    {"bert-base", 0.015, 0.030, 32}, {"many-small", 0.002, 0.005, 32},
    {"narrow", 0.004, 0.008, 32},    {"far-optimum", 0.003, 0.012, 32},
};

// Backward compute of each gradient: half split evenly over the layers,
// half by parameter bytes.
void SpreadCompute(Workload& w, double backward_s) {
  const double total = static_cast<double>(w.total_bytes());
  const double n = static_cast<double>(w.gradients.size());
  for (Gradient& g : w.gradients) {
    g.backward_s = backward_s * (0.5 / n + 0.5 * g.bytes / total);
  }
}

Gradient Float32(std::int64_t bytes) {
  Gradient g;
  g.bytes = bytes;
  return g;
}

}  // namespace

std::vector<std::string> WorkloadNames() {
  std::vector<std::string> names;
  for (const Compute& c : kCompute) names.emplace_back(c.name);
  return names;
}

Workload MakeWorkload(const std::string& name, const std::string& shapes_dir) {
  const Compute* compute = nullptr;
  for (const Compute& c : kCompute) {
    if (name == c.name) compute = &c;
  }
  if (compute == nullptr) {
    throw std::invalid_argument("unknown workload '" + name + "'");
  }
  Workload w;
  w.name = name;
  w.forward_s = compute->forward_s;
  w.batch_per_rank = compute->batch;
  if (name == "narrow") {
    // A recurrent language model: a few very large gradients (embedding
    // and softmax, 2 x 128 MiB) and 24 LSTM weights of 8 MiB; the
    // communication is bandwidth bound and the allreduce algorithm and
    // ring segment have to match the network.
    w.gradients.push_back(Float32(128 << 20));
    for (int i = 0; i < 24; ++i) w.gradients.push_back(Float32(8 << 20));
    w.gradients.push_back(Float32(128 << 20));
  } else if (name == "far-optimum") {
    // Many small gradients (400 x 16 KiB, a deep narrow network) that the
    // application groups: grouping and the cycle time trade latency for
    // fewer, larger messages.
    for (int i = 0; i < 400; ++i) w.gradients.push_back(Float32(16 << 10));
    w.app_groups = true;
  } else {
    const auto specs =
        workloads::LoadBuiltinWorkload("--workload", name, shapes_dir);
    // Backward produces the gradients last layer first.
    for (auto it = specs.rbegin(); it != specs.rend(); ++it) {
      Gradient g = Float32(it->count *
                           static_cast<std::int64_t>(DataTypeSize(it->dtype)));
      g.dtype = it->dtype;
      w.gradients.push_back(g);
    }
  }
  SpreadCompute(w, compute->backward_s);
  return w;
}

}  // namespace hvdtune::sim
