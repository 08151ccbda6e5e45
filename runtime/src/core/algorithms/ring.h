// Ring allreduce on MPI point-to-point: a reduce-scatter followed by an
// allgather around the ring rank -> rank + 1, segmented and pipelined.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <vector>

#include "core/algorithms/algorithm.h"

namespace hvdtune::internal {

/// The ring machinery on any communicator, shared by the ring and the
/// hierarchical algorithms. It owns the scratch buffer and request arrays,
/// grown on demand and kept between calls.
///
/// The buffer is cut into `size` chunks (chunk c = ChunkRange(count, size,
/// c)); each chunk into the same number of segments of at most
/// `segment_bytes`. One transfer unit is (step, segment): in the
/// reduce-scatter step s rank r sends chunk r - s and receives, then reduces,
/// chunk r - s - 1; in the allgather step s it sends chunk r + 1 - s and
/// receives chunk r - s. The unit sent at step s + 1 is the one received at
/// step s, so a segment travels on as soon as it arrived: there is no barrier
/// between steps and up to kPipelineDepth receives and sends are in flight
/// while a segment is being reduced.
class RingEngine {
 public:
  enum Phases : int { kReduceScatter = 1, kAllgather = 2, kBoth = 3 };

  struct Range {
    std::int64_t offset;  // elements
    std::int64_t count;
  };
  /// Chunk c of `count` elements over `size` ranks: the first count % size
  /// chunks have one element more (chunks may be empty when count < size).
  static Range ChunkRange(std::int64_t count, int size, int c);
  /// The chunk that `rank` holds fully reduced after the reduce-scatter.
  static int OwnedChunk(int rank, int size) { return (rank + 1) % size; }

  /// Runs the given phases on `comm`. kBoth: out = reduction of every rank's
  /// in (in may equal out). kReduceScatter: afterwards out's
  /// OwnedChunk(rank) holds that chunk's reduction; the other chunks of out
  /// hold partial results. kAllgather: out's OwnedChunk(rank) is sent to
  /// every rank, the other chunks are overwritten (in must equal out).
  /// Collective over comm; every rank passes the same count, dtype and op.
  Status Run(MPI_Comm comm, const void* in, void* out, std::int64_t count,
             DataType dtype, ReduceOp op, std::int64_t segment_bytes,
             Phases phases);

  /// Run() in two halves, so that one thread can drive several rings (on
  /// different communicators) at once: Start() sets the phases up and posts
  /// nothing, Progress() advances without waiting (or, with `block`, to the
  /// end) and sets *done once the phases completed. One operation per
  /// engine at a time; the buffers must stay valid until it is done. After
  /// an error, or Cancel(), nothing is left in flight and the engine is idle.
  Status Start(MPI_Comm comm, const void* in, void* out, std::int64_t count,
               DataType dtype, ReduceOp op, std::int64_t segment_bytes,
               Phases phases);
  Status Progress(bool block, bool* done);
  /// Abandons the operation in progress (after another ring failed).
  void Cancel();

  /// Receives and sends in flight per direction.
  static constexpr int kPipelineDepth = 4;

 private:
  Range Segment(int c, std::int64_t k) const;
  int SendChunk(std::int64_t t) const;
  int RecvChunk(std::int64_t t) const;
  std::int64_t Hazard(std::int64_t w) const;
  std::uint8_t* RecvTarget(std::int64_t w, const Range& seg);
  int PostSend(std::int64_t v);
  int PostRecv(std::int64_t w);
  Status Fail(const char* call, int rc);

  std::vector<std::uint8_t> scratch_;
  std::vector<MPI_Request> sends_;
  std::vector<MPI_Request> recvs_;

  // The operation in progress (see Start()).
  bool active_ = false;
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0;
  int size_ = 1;
  int left_ = 0;
  int right_ = 0;
  const std::uint8_t* src_ = nullptr;
  std::uint8_t* dst_ = nullptr;
  std::int64_t count_ = 0;
  std::int64_t esize_ = 1;
  DataType dtype_ = DataType::kFloat32;
  ReduceOp op_ = ReduceOp::kSum;
  bool rs_ = false;
  bool direct_ = false;
  std::int64_t rs_steps_ = 0;
  std::int64_t nseg_ = 1;
  std::int64_t seg_elems_ = 0;
  std::int64_t units_ = 0;
  std::int64_t slot_bytes_ = 0;
  std::int64_t sent_ = 0;    // sends posted: units [0, sent_)
  std::int64_t posted_ = 0;  // receives posted: units [0, posted_)
  std::int64_t next_ = 0;    // the unit whose receive completes next
};

/// Ring allreduce over the runtime's data communicator; the segment size is
/// the ring_segment_bytes knob. Bit-identical results on every rank: each
/// chunk is reduced once, by one rank, and then copied to the others.
class RingAllreduce final : public AllreduceAlgorithm {
 public:
  std::string_view name() const override { return "ring"; }
  Status Run(const AlgorithmContext& ctx, const void* in, void* out,
             std::int64_t count, DataType dtype, ReduceOp op) override;

 private:
  RingEngine ring_;
};

}  // namespace hvdtune::internal
