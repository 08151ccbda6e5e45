// NCCL's allreduce (ncclAllReduce) as NCCL's own tuner prices it: an
// alpha-beta cost per algorithm (ring; tree = a double binary tree across
// the nodes with a chain inside each) and protocol (LL, LL128, Simple),
// with the latency and bandwidth factors NCCL publishes in
// src/graph/tuning.cc, and the fastest of them picked per call, as NCCL
// does. What `native` is on a GPU cluster (docs/simulator.md).
#pragma once

namespace hvdtune::sim {

enum class NcclAlgo { kTree, kRing };
enum class NcclProto { kLL, kLL128, kSimple };

/// The machine as NCCL's model sees it.
struct NcclTopology {
  int nodes = 1;
  int ranks_per_node = 1;
  /// Bytes/s one GPU moves to its neighbour inside a node, all channels.
  double intra_bw = 0;
  /// Bytes/s one node moves across the network, all its NICs.
  double inter_bw = 0;
  /// Inside a node GPUs talk over NVLink (else PCIe): the hardware
  /// latencies, and LL128, which NCCL enables only on NVLink.
  bool nvlink = false;
};

/// Seconds of one ncclAllReduce of `bytes` with `algo` and `proto`:
/// latency + bytes / algbw. Infinity where NCCL would not use the pair
/// (LL128 without NVLink).
double NcclAllreduceSeconds(const NcclTopology& t, NcclAlgo algo,
                            NcclProto proto, double bytes);

/// The bus bandwidth NCCL's model gives `algo`/`proto` (bytes/s); algbw is
/// busbw * ranks / (2 (ranks - 1)) for the ring and busbw / 2 for the tree.
double NcclBusBandwidth(const NcclTopology& t, NcclAlgo algo, NcclProto proto);

struct NcclChoice {
  NcclAlgo algo = NcclAlgo::kRing;
  NcclProto proto = NcclProto::kSimple;
  double seconds = 0;
};

/// The fastest algorithm and protocol for `bytes`: what NCCL's tuner picks.
NcclChoice NcclAllreduce(const NcclTopology& t, double bytes);

}  // namespace hvdtune::sim
