// What ranks tell each other during negotiation: requests (this tensor is
// ready here) and responses (run this, or fail it with this error).
// Serialised explicitly, field by field; never a raw struct copy.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hvdtune/knobs.h"
#include "hvdtune/types.h"

namespace hvdtune::internal {

/// A tensor name's local id: interned once per rank when the name is first
/// enqueued, so the steady-state path indexes arrays instead of hashing
/// strings. Never sent: other ranks number names differently.
using TensorId = std::uint32_t;
inline constexpr TensorId kNoTensorId = ~TensorId{0};

struct Request {
  std::string name;
  CollectiveType type = CollectiveType::kAllreduce;
  DataType dtype = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
  std::int32_t root = 0;
  std::int32_t rank = 0;
  std::vector<std::int64_t> shape;
  /// Grouped collectives: the group's name and member count (0 = no group).
  std::string group;
  std::int32_t group_size = 0;
  /// Alltoall: rows this rank sends to each rank (empty: an even split).
  std::vector<std::int64_t> splits;
  /// The buffers are CUDA device memory (NCCL backend).
  bool device = false;
  /// Seconds this rank had already waited for the tensor to be ready
  /// everywhere when it sent this request (a cached tensor that stalled is
  /// renegotiated in full; the stall check counts from its enqueue).
  double waited_seconds = 0;
  /// This rank's runtime clock at enqueue (never sent).
  double enqueued = 0;
  /// This rank's id of `name` (never sent).
  TensorId id = kNoTensorId;

  std::int64_t NumElements() const;
  /// True when everything but the sending rank is the same.
  bool SameSignature(const Request& other) const;
  /// The same, for requests known to share the name (the same id).
  bool SameSignatureButName(const Request& other) const;
};

struct Response {
  enum class Kind : std::uint8_t { kRun = 0, kError = 1 };
  Kind kind = Kind::kRun;
  std::string name;
  CollectiveType type = CollectiveType::kAllreduce;
  DataType dtype = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
  std::int32_t root = 0;
  /// Allgather: every rank's first dimension, in rank order. Reducescatter:
  /// the rows each rank receives. Alltoall: the rows rank s sends to rank d
  /// at s * size + d. Join: empty.
  std::vector<std::int64_t> first_dims;
  /// Negotiated while some ranks had joined (never cached). For an
  /// allreduce, `shape` lets them take part with neutral elements.
  std::vector<std::int64_t> shape;
  bool joined = false;
  std::string error;
  std::string group;
  std::int32_t group_size = 0;
  bool device = false;
  /// An error response for a tensor that stalled past the shutdown time:
  /// ranks that have not submitted it ignore it.
  bool stalled = false;
  /// The receiving rank's id of the tensor, set by its controller (never
  /// sent). Responses of cached tensors carry it without their name.
  TensorId id = kNoTensorId;
};

class Writer {
 public:
  void U8(std::uint8_t v) { bytes_.push_back(v); }
  void I32(std::int32_t v) { Raw(&v, sizeof v); }
  void I64(std::int64_t v) { Raw(&v, sizeof v); }
  void F64(double v) { Raw(&v, sizeof v); }
  void Str(const std::string& s);
  void I64s(const std::vector<std::int64_t>& v);
  std::vector<std::uint8_t>& bytes() { return bytes_; }

 private:
  void Raw(const void* p, std::size_t n);
  std::vector<std::uint8_t> bytes_;
};

/// Bounds-checked reader; throws std::runtime_error on truncated input.
class Reader {
 public:
  Reader(const std::uint8_t* data, std::size_t size)
      : data_(data), size_(size) {}
  std::uint8_t U8();
  std::int32_t I32();
  std::int64_t I64();
  double F64();
  std::string Str();
  std::vector<std::int64_t> I64s();
  bool done() const { return pos_ == size_; }

 private:
  void Raw(void* p, std::size_t n);
  const std::uint8_t* data_;
  std::size_t size_;
  std::size_t pos_ = 0;
};

void Serialize(const Request& r, Writer& w);
Request DeserializeRequest(Reader& r);
void Serialize(const Response& r, Writer& w);
Response DeserializeResponse(Reader& r);

/// What every rank must agree on at init, exchanged on the world
/// communicator before anything that depends on it (the node split) runs.
struct InitVote {
  bool ok = true;
  /// This rank's configuration error, when !ok.
  std::string error;
  std::int32_t ranks_per_node = 0;
  bool fusion_lookahead = true;
  bool autotune = false;
  double stall_check_seconds = 0;
  double stall_shutdown_seconds = 0;
  KnobSettings knobs;
};
void Serialize(const InitVote& v, Writer& w);
InitVote DeserializeInitVote(Reader& r);

/// New knob values from rank 0, by knob name, applied by every rank at the
/// same cycle.
struct KnobUpdate {
  std::uint64_t version = 0;
  KnobSettings values;
};
std::vector<std::uint8_t> Serialize(const KnobUpdate& u);
/// Knobs the message does not name keep their value in `base`. Throws
/// std::runtime_error on a malformed message or an unknown knob.
KnobUpdate DeserializeKnobUpdate(const std::vector<std::uint8_t>& bytes,
                                 const KnobSettings& base);

std::vector<std::uint8_t> SerializeRequests(const std::vector<Request>& v);
std::vector<Request> DeserializeRequests(const std::uint8_t* data,
                                         std::size_t size);
std::vector<std::uint8_t> SerializeResponses(const std::vector<Response>& v);
std::vector<Response> DeserializeResponses(const std::uint8_t* data,
                                           std::size_t size);

}  // namespace hvdtune::internal
