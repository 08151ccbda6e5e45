// The Gloo engine's allreduce algorithms, values of the allreduce_algorithm
// knob on this engine (names.h says which engine serves which): native =
// Gloo's own choice; ring = Gloo's pipelined ring, segments of
// ring_segment_bytes; ring_chunked and halving_doubling = Gloo's algorithms
// of those names: thin adapters, Gloo does the work; hierarchical = the
// runtime's own over the node groups (gloo_hierarchical.h: shared memory
// inside each node, a ring per local rank across nodes).
#pragma once

#include <memory>
#include <vector>

#include "core/engine/engine.h"
#include "core/engine/gloo/gloo_backend.h"

namespace hvdtune::internal {

/// One instance per knob choice (null where Gloo serves none). With a
/// device backend (NCCL), `native` has a device version: its allreduce.
std::vector<std::unique_ptr<EngineAllreduce>> MakeGlooAllreduceAlgorithms(
    GlooBackend& world, GlooBackend& local, GlooBackend& cross,
    Backend* device);

}  // namespace hvdtune::internal
