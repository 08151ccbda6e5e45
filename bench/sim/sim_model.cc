#include "sim_model.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>

#include "hvdtune/fusion.h"
#include "hvdtune/grouping.h"
#include "nccl_model.h"

namespace hvdtune::sim {
namespace {

constexpr int kNative = 0, kRing = 1;

double Log2Ceil(int p) { return p <= 1 ? 0.0 : std::ceil(std::log2(p)); }

// MPI's own allreduce: recursive doubling for small messages, Rabenseifner
// (recursive halving reduce-scatter + doubling allgather) for large ones,
// whichever is faster. Ranks are node-major, so the log2(N) steps between
// nodes carry the data of all G ranks of a node through its NICs.
double MpiNativeSeconds(const Preset& p, const Cluster& c, double m) {
  const int n = c.nodes, g = c.ranks_per_node, w = c.world();
  if (w <= 1) return 0;
  const double steps_inter = Log2Ceil(n), steps_intra = Log2Ceil(g);
  const double latency =
      steps_inter * p.inter_alpha + steps_intra * p.intra_alpha;
  const double inter_bw_rank = p.inter_bw / g;
  // Recursive doubling: every step exchanges and reduces all m bytes.
  const double doubling = latency + steps_inter * m / inter_bw_rank +
                          steps_intra * m / p.intra_bw +
                          (steps_inter + steps_intra) * m / p.reduce_bw;
  // Rabenseifner: halving across nodes first (m/2, m/4, ...), then inside.
  const double inter_bytes = n > 1 ? m * (1.0 - 1.0 / n) : 0.0;
  const double intra_bytes = (m / n) * (1.0 - 1.0 / g);
  const double halving =
      2 * latency +
      2 * (inter_bytes / inter_bw_rank + intra_bytes / p.intra_bw) +
      (inter_bytes + intra_bytes) / p.reduce_bw;
  return std::min(doubling, halving);
}

// The library's own allreduce: ncclAllReduce on GPUs, MPI's on CPUs.
double NativeSeconds(const Preset& p, const Cluster& c, double m) {
  if (!p.gpu) return MpiNativeSeconds(p, c, m);
  const NcclTopology t{.nodes = c.nodes,
                       .ranks_per_node = c.ranks_per_node,
                       .intra_bw = p.intra_bw,
                       .inter_bw = p.inter_bw,
                       .nvlink = p.nvlink};
  return NcclAllreduce(t, m).seconds;
}

// The runtime's pipelined ring over `ranks` ranks whose slowest link has
// `alpha` and `bw`: reduce-scatter then allgather, 2 (ranks - 1) steps of
// m / ranks bytes, each sent in segments; a segment's reduction overlaps
// the next segment's transfer, except the last one's.
double RingSeconds(const Preset& p, int ranks, double alpha, double bw,
                   double m, double segment) {
  if (ranks <= 1 || m <= 0) return 0;
  const double chunk = m / ranks;
  const double segments = std::ceil(chunk / segment);
  const double transfer = chunk / bw, reduce = chunk / p.reduce_bw;
  const double rs_step = alpha + std::max(transfer, reduce) +
                         segments * p.segment_s +
                         std::min(segment, chunk) / p.reduce_bw;
  const double ag_step = alpha + transfer + segments * p.segment_s;
  return (ranks - 1) * (rs_step + ag_step);
}

}  // namespace

std::int64_t Workload::total_bytes() const {
  std::int64_t total = 0;
  for (const Gradient& g : gradients) total += g.bytes;
  return total;
}

double AllreduceSeconds(const Preset& p, const Cluster& c, int algorithm,
                        double bytes, double segment_bytes) {
  if (c.world() <= 1) return p.call_s;
  const int n = c.nodes, g = c.ranks_per_node;
  if (algorithm == kNative) return p.call_s + NativeSeconds(p, c, bytes);
  if (algorithm == kRing || n == 1 || g == 1) {
    // One flat ring; across nodes a ring crosses each node boundary once,
    // so the NIC carries one rank's share per step.
    const double alpha = n > 1 ? p.inter_alpha : p.intra_alpha;
    const double bw = n > 1 ? std::min(p.intra_bw, p.inter_bw) : p.intra_bw;
    return p.call_s +
           RingSeconds(p, c.world(), alpha, bw, bytes, segment_bytes);
  }
  // Hierarchical: reduce-scatter inside the node (ring), ring allreduce of
  // each rank's 1/G shard across nodes (the G shards share the NICs),
  // allgather inside the node.
  const double intra_rs =
      RingSeconds(p, g, p.intra_alpha, p.intra_bw, bytes, segment_bytes) / 2;
  const double inter = RingSeconds(p, n, p.inter_alpha, p.inter_bw / g,
                                   bytes / g, segment_bytes);
  return 3 * p.call_s + 2 * intra_rs + inter;
}

double NegotiationSeconds(const Preset& p, const Cluster& c, int tensors,
                          bool cache_on) {
  const int w = c.world();
  const double alpha = c.nodes > 1 ? p.inter_alpha : p.intra_alpha;
  // One bit-vector allreduce per cycle (a tree: 2 log2 P steps).
  double t = p.cycle_s + 2 * Log2Ceil(w) * alpha + tensors * p.cached_s;
  if (!cache_on && tensors > 0) {
    // Gather every rank's requests to rank 0, which checks them, and
    // broadcast the responses: paid per tensor and per rank.
    t += 2 * Log2Ceil(w) * alpha +
         static_cast<double>(tensors) * w * p.request_s;
  }
  return t;
}

namespace {

// Work of one cycle that picked up `items` (sizes and dtypes).
double CycleWork(const Preset& p, const Cluster& c, const KnobSettings& k,
                 const std::vector<internal::FusionItem>& items, int* calls) {
  double t = NegotiationSeconds(p, c, static_cast<int>(items.size()),
                                k.cache_capacity() > 0) +
             items.size() * p.tensor_s;
  const double chunk = static_cast<double>(k.pipeline_chunk_bytes());
  for (const internal::FusionGroup& g :
       internal::PlanFusion(items, k.fusion_threshold_bytes())) {
    const double m = static_cast<double>(g.bytes);
    const double pieces = chunk > 0 ? std::max(1.0, std::ceil(m / chunk)) : 1;
    t += pieces * AllreduceSeconds(p, c, k.allreduce_algorithm(), m / pieces,
                                   static_cast<double>(k.ring_segment_bytes()));
    if (g.members.size() > 1) t += 2 * m / p.copy_bw;  // copy in and out
    *calls += static_cast<int>(pieces);
  }
  return t;
}

}  // namespace

StepResult SimulateStep(const Preset& p, const Cluster& c, const Workload& w,
                        const KnobSettings& k) {
  const double cycle = k.cycle_time_ms() * 1e-3;
  // Between gradients the cycle thread runs an idle cycle every cycle_time
  // (a wake-up and a bit-vector allreduce); where it shares the cores with
  // compute, the CPU those take (not their wall time: waits yield) slows
  // the backward pass.
  const double slowdown = 1 + p.cpu_share * p.idle_cpu_s / cycle;
  const std::size_t n = w.gradients.size();
  std::vector<double> ready(n);
  double t = 0;
  for (std::size_t i = 0; i < n; ++i) {
    t += w.gradients[i].backward_s * p.compute_scale * slowdown;
    ready[i] = t;
  }
  const double backward_end = t;
  if (w.app_groups && k.num_groups() > 0) {
    for (auto [b, e] : SplitIntoGroups(n, k.num_groups())) {
      const double last = ready[e - 1];
      for (std::size_t i = b; i < e; ++i) ready[i] = last;
    }
  }
  StepResult r;
  // The runtime's rule (cycle_loop.cc): a gradient that arrives while
  // nothing of this rank is queued or in flight wakes the cycle thread, and
  // a cycle starts at once; one that arrives while a cycle runs is batched
  // into the next, which starts cycle_time after that cycle began, or when
  // it ends if later.
  double start = 0, end = -INFINITY;
  std::size_t next = 0;
  std::vector<internal::FusionItem> items;
  while (next < n) {
    start = ready[next] >= end ? ready[next] : std::max(end, start + cycle);
    items.clear();
    for (; next < n && ready[next] <= start; ++next) {
      internal::FusionItem item;
      item.dtype = w.gradients[next].dtype;
      item.bytes = w.gradients[next].bytes;
      items.push_back(item);
    }
    end = start + CycleWork(p, c, k, items, &r.calls);
    ++r.cycles;
  }
  r.step_s = w.forward_s * p.compute_scale + std::max(backward_end, end);
  r.samples_per_s = c.world() * w.batch_per_rank / r.step_s;
  r.bytes_per_s = static_cast<double>(w.total_bytes()) / r.step_s;
  return r;
}

double SingleCallSeconds(const Preset& p, const Cluster& c,
                         const KnobSettings& k, double bytes) {
  std::vector<internal::FusionItem> one(1);
  one[0].bytes = static_cast<std::int64_t>(bytes);
  int calls = 0;
  // Enqueued as the previous call completed, on an idle rank: the cycle
  // starts at once, whatever the cycle time.
  return CycleWork(p, c, k, one, &calls);
}

}  // namespace hvdtune::sim
