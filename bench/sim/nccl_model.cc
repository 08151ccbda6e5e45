#include "nccl_model.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace hvdtune::sim {
namespace {

constexpr double kUs = 1e-6, kGBps = 1e9;

int Index(NcclProto p) { return static_cast<int>(p); }
int Index(NcclAlgo a) { return static_cast<int>(a); }

// NCCL's published constants (src/graph/tuning.cc, A100 / x86 class), by
// [algorithm: tree, ring][protocol: LL, LL128, Simple], in microseconds.
// Fixed cost of a call:
constexpr double kBaseUs[2][3] = {{6.8, 14.0, 8.4}, {6.6, 14.0, 8.4}};
// Per step on each kind of hop:
constexpr double kNvlinkUs[2][3] = {{0.6, 1.25, 4.0}, {0.6, 1.9, 3.4}};
constexpr double kPcieUs[2][3] = {{1.0, 1.9, 4.0}, {1.0, 2.5, 5.7}};
constexpr double kNetUs[2][3] = {{5.0, 8.5, 14.0}, {2.7, 4.0, 14.0}};
// Posting a network operation, per step of a ring that spans nodes (three
// times that with Simple).
constexpr double kNetOverheadUs = 1.0;
// LL's ceiling (it carries 4 bytes of data per 8-byte line), GB/s: one
// node (the GPU's), two nodes, more (the CPU's, Intel class).
double LlMaxBandwidth(int nodes) {
  return (nodes == 1 ? 87.7 : nodes == 2 ? 39.0 : 20.4) * kGBps;
}

int Log2Floor(int n) {
  int l = 0;
  while (n > 1) {
    n >>= 1;
    ++l;
  }
  return l;
}

// Latency of one hop inside a node for `a`/`p`. A ring that spans nodes
// pays at least the network post overhead on every step.
double IntraHopUs(const NcclTopology& t, NcclAlgo a, NcclProto p) {
  double us = (t.nvlink ? kNvlinkUs : kPcieUs)[Index(a)][Index(p)];
  if (a == NcclAlgo::kRing && t.nodes > 1) {
    const double overhead =
        p == NcclProto::kSimple ? 3 * kNetOverheadUs : kNetOverheadUs;
    us = std::max(us, overhead);
  }
  return us;
}

double InterHopUs(const NcclTopology& t, NcclAlgo a, NcclProto p) {
  // With one GPU a node every step is a network step: NCCL takes the tree's
  // network latency for both.
  const NcclAlgo as = t.ranks_per_node == 1 ? NcclAlgo::kTree : a;
  return kNetUs[Index(as)][Index(p)];
}

double LatencySeconds(const NcclTopology& t, NcclAlgo a, NcclProto p,
                      double bytes) {
  const int ranks = t.nodes * t.ranks_per_node;
  const double intra = IntraHopUs(t, a, p);
  const double inter = t.nodes > 1 ? InterHopUs(t, a, p) : intra;
  double us = kBaseUs[Index(a)][Index(p)];
  if (a == NcclAlgo::kRing) {
    // 2 (ranks - 1) steps; 2 (nodes - 1) of them cross the network.
    const int steps = 2 * (ranks - 1);
    const int net_steps = 2 * (t.nodes - 1);
    us += (steps - net_steps) * intra + net_steps * inter;
    // NCCL's "plateau" of a multi-node Simple ring (SM80 and newer), once
    // every rank's share is 64 bytes or more (one channel assumed).
    if (t.nodes > 1 && p == NcclProto::kSimple && bytes / ranks >= 64) {
      us *= 1.4;
    }
  } else {
    // Up and down: a chain of ranks_per_node inside the node, log2(nodes)
    // levels of the binary trees across.
    us += 2 * ((t.ranks_per_node - 1) * intra + Log2Floor(t.nodes) * inter);
  }
  return us * kUs;
}

}  // namespace

double NcclBusBandwidth(const NcclTopology& t, NcclAlgo a, NcclProto p) {
  if (p == NcclProto::kLL128 && !t.nvlink) return 0;
  // A ring or tree channel crosses every node boundary once: the slower of
  // a GPU's link in the node and the node's NICs bounds it.
  const double link =
      t.nodes > 1 ? (t.ranks_per_node > 1 ? std::min(t.intra_bw, t.inter_bw)
                                          : t.inter_bw)
                  : t.intra_bw;
  const double ll_max = LlMaxBandwidth(t.nodes);
  if (a == NcclAlgo::kRing) {
    switch (p) {
      case NcclProto::kLL:
        return std::min(ll_max, 0.5 * link);
      case NcclProto::kLL128:
        return 0.92 * link;
      case NcclProto::kSimple:
        return link;
    }
  }
  const double tree = 0.92 * link;
  switch (p) {
    case NcclProto::kLL:
      return std::min(ll_max, tree / 3.8);
    case NcclProto::kLL128:
      return tree * (t.nodes == 1 ? 7.0 / 9.0 : 120.0 / 128.0);
    case NcclProto::kSimple:
      return tree;
  }
  return 0;
}

double NcclAllreduceSeconds(const NcclTopology& t, NcclAlgo a, NcclProto p,
                            double bytes) {
  const int ranks = t.nodes * t.ranks_per_node;
  if (ranks <= 1) return 0;
  const double bus = NcclBusBandwidth(t, a, p);
  if (!(bus > 0)) return std::numeric_limits<double>::infinity();
  // Bus to algorithm bandwidth: a ring moves 2 (ranks - 1) / ranks of the
  // buffer over each link, a tree the buffer up and down.
  const double alg =
      a == NcclAlgo::kRing ? bus * ranks / (2.0 * (ranks - 1)) : bus / 2;
  return LatencySeconds(t, a, p, bytes) + bytes / alg;
}

NcclChoice NcclAllreduce(const NcclTopology& t, double bytes) {
  NcclChoice best;
  best.seconds = std::numeric_limits<double>::infinity();
  for (NcclAlgo a : {NcclAlgo::kTree, NcclAlgo::kRing}) {
    for (NcclProto p :
         {NcclProto::kLL, NcclProto::kLL128, NcclProto::kSimple}) {
      const double s = NcclAllreduceSeconds(t, a, p, bytes);
      if (s < best.seconds) best = {a, p, s};
    }
  }
  return best;
}

}  // namespace hvdtune::sim
