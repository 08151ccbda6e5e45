// A bandwidth-optimal allreduce on Gloo's transport for the hierarchical
// allreduce's phase across nodes (gloo_hierarchical.h). Gloo's ring starts
// its allgather only after its whole reduce-scatter and announces a
// segment's receive to its sender only when the ring reaches it (a round
// trip through both event-loop threads before the bytes move).
//
// Here the buffer is cut into one block per rank and every block into
// segments. All receives are posted first, so a send need not wait for
// its receiver to ask; every rank sends block b's segments straight to
// rank b (a direct reduce-scatter), and each owner reduces a segment as
// soon as every rank's copy of it is in and sends the result back out at
// once (the allgather of segment j overlaps the reduce-scatter of the
// next). Given a second context over the same ranks, bytes from a lower
// rank to a higher one go through the first and the other way through the
// second, so each socket carries data one way (only Gloo's small
// ready-to-receive notes go against it): a thread writing a segment holds
// that pair's lock, and Gloo's event-loop thread, finding it taken, spins
// on epoll_wait until it is free (docs/benchmarks.md). Results land in
// place: the reduce-scatter's inputs come in through `scratch`, the
// allgather's straight into the buffer.
//
// Every rank gets the bits its block's owner computed: the owner reduces
// its own copy first, then the others' in rank order.
#pragma once

#include <gloo/context.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "hvdtune/types.h"

namespace hvdtune::internal {

/// The contexts a DirectAllreduce runs on: `group` numbers its ranks;
/// `reverse`, when set, connects the same processes (group rank r is
/// reverse rank reverse_rank[r]) and carries the bytes that go from a higher
/// group rank to a lower one.
struct DirectLinks {
  std::shared_ptr<gloo::Context> group;
  std::shared_ptr<gloo::Context> reverse;
  std::vector<int> reverse_rank;
};

/// In-place allreduce of `count` elements at `data` over the ranks of
/// `links.group`, in segments of at most `segment_bytes` (rounded down to
/// whole elements, at least one). `scratch` holds the other ranks' copies
/// of this rank's block (kept between calls). Every wait is bounded by
/// `timeout`. Throws what Gloo throws (the caller guards).
void DirectAllreduce(const DirectLinks& links, void* data, std::int64_t count,
                     DataType dtype, ReduceOp op, std::int64_t segment_bytes,
                     std::chrono::milliseconds timeout,
                     std::vector<std::uint8_t>* scratch);

}  // namespace hvdtune::internal
