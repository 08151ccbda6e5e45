#include "core/message.h"

#include <cstring>
#include <stdexcept>

namespace hvdtune::internal {

std::int64_t Request::NumElements() const {
  // A zero anywhere makes the tensor empty, whatever the other dimensions
  // (which then need not multiply without overflow: the enqueue checks only
  // non-empty shapes).
  for (std::int64_t d : shape) {
    if (d == 0) return 0;
  }
  std::int64_t n = 1;
  for (std::int64_t d : shape) n *= d;
  return n;
}

bool Request::SameSignature(const Request& o) const {
  return name == o.name && SameSignatureButName(o);
}

bool Request::SameSignatureButName(const Request& o) const {
  return type == o.type && dtype == o.dtype && op == o.op && root == o.root &&
         shape == o.shape && group == o.group && group_size == o.group_size &&
         splits == o.splits && device == o.device;
}

void Writer::Raw(const void* p, std::size_t n) {
  const auto* b = static_cast<const std::uint8_t*>(p);
  bytes_.insert(bytes_.end(), b, b + n);
}

void Writer::Str(const std::string& s) {
  I64(static_cast<std::int64_t>(s.size()));
  Raw(s.data(), s.size());
}

void Writer::I64s(const std::vector<std::int64_t>& v) {
  I64(static_cast<std::int64_t>(v.size()));
  Raw(v.data(), v.size() * sizeof(std::int64_t));
}

void Reader::Raw(void* p, std::size_t n) {
  if (n > size_ - pos_) throw std::runtime_error("truncated message");
  if (n > 0) std::memcpy(p, data_ + pos_, n);  // p may be null when n == 0
  pos_ += n;
}

std::uint8_t Reader::U8() {
  std::uint8_t v;
  Raw(&v, sizeof v);
  return v;
}
std::int32_t Reader::I32() {
  std::int32_t v;
  Raw(&v, sizeof v);
  return v;
}
std::int64_t Reader::I64() {
  std::int64_t v;
  Raw(&v, sizeof v);
  return v;
}
double Reader::F64() {
  double v;
  Raw(&v, sizeof v);
  return v;
}

std::string Reader::Str() {
  const std::int64_t n = I64();
  if (n < 0 || static_cast<std::size_t>(n) > size_ - pos_) {
    throw std::runtime_error("bad string length in message");
  }
  std::string s(reinterpret_cast<const char*>(data_ + pos_),
                static_cast<std::size_t>(n));
  pos_ += static_cast<std::size_t>(n);
  return s;
}

std::vector<std::int64_t> Reader::I64s() {
  const std::int64_t n = I64();
  if (n < 0 || static_cast<std::size_t>(n) > (size_ - pos_) / 8) {
    throw std::runtime_error("bad vector length in message");
  }
  std::vector<std::int64_t> v(static_cast<std::size_t>(n));
  Raw(v.data(), v.size() * sizeof(std::int64_t));
  return v;
}

namespace {

template <typename E>
E CheckedEnum(std::uint8_t v, int count, const char* what) {
  if (v >= count) throw std::runtime_error(std::string("bad ") + what);
  return static_cast<E>(v);
}

}  // namespace

void Serialize(const Request& r, Writer& w) {
  w.Str(r.name);
  w.U8(static_cast<std::uint8_t>(r.type));
  w.U8(static_cast<std::uint8_t>(r.dtype));
  w.U8(static_cast<std::uint8_t>(r.op));
  w.I32(r.root);
  w.I32(r.rank);
  w.I64s(r.shape);
  w.Str(r.group);
  w.I32(r.group_size);
  w.I64s(r.splits);
  w.U8(r.device ? 1 : 0);
  w.F64(r.waited_seconds);
}

Request DeserializeRequest(Reader& rd) {
  Request r;
  r.name = rd.Str();
  r.type = CheckedEnum<CollectiveType>(rd.U8(), kNumCollectiveTypes,
                                       "collective type");
  r.dtype = CheckedEnum<DataType>(rd.U8(), kNumDataTypes, "data type");
  r.op = CheckedEnum<ReduceOp>(rd.U8(), kNumReduceOps, "reduce op");
  r.root = rd.I32();
  r.rank = rd.I32();
  r.shape = rd.I64s();
  r.group = rd.Str();
  r.group_size = rd.I32();
  r.splits = rd.I64s();
  r.device = rd.U8() != 0;
  r.waited_seconds = rd.F64();
  return r;
}

void Serialize(const Response& r, Writer& w) {
  w.U8(static_cast<std::uint8_t>(r.kind));
  w.Str(r.name);
  w.U8(static_cast<std::uint8_t>(r.type));
  w.U8(static_cast<std::uint8_t>(r.dtype));
  w.U8(static_cast<std::uint8_t>(r.op));
  w.I32(r.root);
  w.I64s(r.first_dims);
  w.I64s(r.shape);
  w.U8(r.joined ? 1 : 0);
  w.Str(r.error);
  w.Str(r.group);
  w.I32(r.group_size);
  w.U8(r.device ? 1 : 0);
  w.U8(r.stalled ? 1 : 0);
}

Response DeserializeResponse(Reader& rd) {
  Response r;
  r.kind = CheckedEnum<Response::Kind>(rd.U8(), 2, "response kind");
  r.name = rd.Str();
  r.type = CheckedEnum<CollectiveType>(rd.U8(), kNumCollectiveTypes,
                                       "collective type");
  r.dtype = CheckedEnum<DataType>(rd.U8(), kNumDataTypes, "data type");
  r.op = CheckedEnum<ReduceOp>(rd.U8(), kNumReduceOps, "reduce op");
  r.root = rd.I32();
  r.first_dims = rd.I64s();
  r.shape = rd.I64s();
  r.joined = rd.U8() != 0;
  r.error = rd.Str();
  r.group = rd.Str();
  r.group_size = rd.I32();
  r.device = rd.U8() != 0;
  r.stalled = rd.U8() != 0;
  return r;
}

namespace {

template <typename T>
std::vector<std::uint8_t> SerializeList(const std::vector<T>& v) {
  Writer w;
  w.I64(static_cast<std::int64_t>(v.size()));
  for (const T& x : v) Serialize(x, w);
  return std::move(w.bytes());
}

template <typename T, T (*One)(Reader&)>
std::vector<T> DeserializeList(const std::uint8_t* data, std::size_t size) {
  Reader rd(data, size);
  const std::int64_t n = rd.I64();
  if (n < 0) throw std::runtime_error("bad list length in message");
  std::vector<T> v;
  v.reserve(static_cast<std::size_t>(std::min<std::int64_t>(n, 1 << 20)));
  for (std::int64_t i = 0; i < n; ++i) v.push_back(One(rd));
  if (!rd.done()) throw std::runtime_error("trailing bytes in message");
  return v;
}

}  // namespace

std::vector<std::uint8_t> SerializeRequests(const std::vector<Request>& v) {
  return SerializeList(v);
}
std::vector<Request> DeserializeRequests(const std::uint8_t* data,
                                         std::size_t size) {
  return DeserializeList<Request, DeserializeRequest>(data, size);
}
std::vector<std::uint8_t> SerializeResponses(const std::vector<Response>& v) {
  return SerializeList(v);
}
std::vector<Response> DeserializeResponses(const std::uint8_t* data,
                                           std::size_t size) {
  return DeserializeList<Response, DeserializeResponse>(data, size);
}

void Serialize(const InitVote& v, Writer& w) {
  w.U8(v.ok ? 1 : 0);
  w.Str(v.error);
  w.I32(v.ranks_per_node);
  w.U8(v.fusion_lookahead ? 1 : 0);
  w.U8(v.autotune ? 1 : 0);
  w.F64(v.stall_check_seconds);
  w.F64(v.stall_shutdown_seconds);
  w.I32(kNumKnobs);
  for (int k = 0; k < kNumKnobs; ++k)
    w.F64(v.knobs.Get(static_cast<KnobId>(k)));
}

InitVote DeserializeInitVote(Reader& rd) {
  InitVote v;
  v.ok = rd.U8() != 0;
  v.error = rd.Str();
  v.ranks_per_node = rd.I32();
  v.fusion_lookahead = rd.U8() != 0;
  v.autotune = rd.U8() != 0;
  v.stall_check_seconds = rd.F64();
  v.stall_shutdown_seconds = rd.F64();
  if (rd.I32() != kNumKnobs) throw std::runtime_error("knob count differs");
  for (int k = 0; k < kNumKnobs; ++k)
    v.knobs.Set(static_cast<KnobId>(k), rd.F64());
  if (!rd.done()) throw std::runtime_error("trailing bytes in init vote");
  return v;
}

std::vector<std::uint8_t> Serialize(const KnobUpdate& u) {
  Writer w;
  w.I64(static_cast<std::int64_t>(u.version));
  w.I32(kNumKnobs);
  for (const KnobSpec& spec : KnobTable()) {
    w.Str(std::string(spec.name));
    w.F64(u.values.Get(spec.id));
  }
  return std::move(w.bytes());
}

KnobUpdate DeserializeKnobUpdate(const std::vector<std::uint8_t>& bytes,
                                 const KnobSettings& base) {
  Reader rd(bytes.data(), bytes.size());
  KnobUpdate u;
  u.version = static_cast<std::uint64_t>(rd.I64());
  u.values = base;
  const std::int32_t n = rd.I32();
  if (n < 0 || n > 4096) throw std::runtime_error("bad knob count");
  for (std::int32_t i = 0; i < n; ++i) {
    const std::string name = rd.Str();
    const double value = rd.F64();
    const std::optional<KnobId> id = FindKnob(name);
    if (!id) throw std::runtime_error("unknown knob '" + name + "'");
    u.values.Set(*id, value);
  }
  if (!rd.done()) throw std::runtime_error("trailing bytes in knob update");
  return u;
}

}  // namespace hvdtune::internal
