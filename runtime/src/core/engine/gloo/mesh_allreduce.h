// A bandwidth-optimal allreduce over a SocketMesh (socket_mesh.h): the
// Gloo engine's hierarchical allreduce runs its phase across nodes on it.
//
// The buffer is cut into one block per rank and every block into segments.
// Every rank sends block b's segments straight to rank b (a direct
// reduce-scatter); each owner reduces a segment as soon as every rank's copy
// of it is in and sends the result back out at once (the allgather of
// segment j overlaps the reduce-scatter of the next). One thread moves
// every byte: it writes and reads whichever sockets poll says are ready,
// and sleeps in poll while none is. Each message is an 8-byte header (which
// phase, which segment) and the segment's bytes, read straight into place:
// the reduce-scatter's inputs into `scratch`, the allgather's into the
// buffer.
//
// Every rank gets the bits its block's owner computed: the owner reduces
// its own copy first, then the others' in rank order.
#pragma once

#include <chrono>
#include <cstdint>
#include <vector>

#include "core/engine/gloo/socket_mesh.h"
#include "hvdtune/types.h"

namespace hvdtune::internal {

/// In-place allreduce of `count` elements at `data` over the ranks of
/// `mesh`, in segments of at most `segment_bytes` (rounded down to whole
/// elements, at least one). `scratch` holds the other ranks' copies of this
/// rank's block (kept between calls). Throws std::runtime_error naming the
/// peer when a connection fails or closes, or when nothing moves for
/// `timeout`, or when `abort_fd` (when not -1) becomes readable; the mesh
/// is unusable afterwards (its streams are mid-message).
void MeshAllreduce(const SocketMesh& mesh, void* data, std::int64_t count,
                   DataType dtype, ReduceOp op, std::int64_t segment_bytes,
                   std::chrono::milliseconds timeout,
                   std::vector<std::uint8_t>* scratch, int abort_fd = -1);

}  // namespace hvdtune::internal
