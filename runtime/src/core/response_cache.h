// Response cache: tensors negotiated before with the same signature are
// agreed on with one bit each instead of a full request/response exchange.
// Every rank applies the same sequence of Put / Erase / Touch calls, so bit
// positions and evictions (least recently used first) agree on all ranks.
#pragma once

#include <cstdint>
#include <list>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/message.h"

namespace hvdtune::internal {

class ResponseCache {
 public:
  explicit ResponseCache(std::size_t capacity) : capacity_(capacity) {}

  enum class State { kMiss, kHit, kInvalid };
  struct Lookup {
    State state = State::kMiss;
    std::uint32_t bit = 0;
  };

  std::size_t capacity() const { return capacity_; }
  std::size_t size() const { return by_name_.size(); }

  /// kHit: the name is cached with this rank's same request signature.
  /// kInvalid: the name is cached with a different signature (the entry
  /// must be erased on every rank before the tensor is negotiated again).
  /// Looks the request up by its local id when it has one (no string
  /// hashing on the steady-state path), by name otherwise.
  Lookup Find(const Request& request) const;

  /// Inserts `response` (with this rank's `request`), replacing an entry of
  /// the same name or evicting the least recently used one when full. Bits
  /// whose previous entry was displaced are appended to `displaced`.
  /// Returns the entry's bit; nothing is stored when capacity is 0.
  std::optional<std::uint32_t> Put(const Response& response,
                                   const Request& request,
                                   std::vector<std::uint32_t>* displaced);
  void Erase(std::uint32_t bit);
  /// Marks the entry as most recently used.
  void Touch(std::uint32_t bit);
  bool Contains(std::uint32_t bit) const;
  const Response& response(std::uint32_t bit) const;
  const Request& request(std::uint32_t bit) const;

 private:
  struct Entry {
    Response response;
    Request request;
    std::list<std::uint32_t>::iterator lru;
    bool used = false;
  };

  std::size_t capacity_;
  std::vector<Entry> entries_;  // index = bit; grows up to capacity_
  std::unordered_map<std::string, std::uint32_t> by_name_;
  /// Local tensor id -> bit + 1 (0 = not cached), for requests with ids.
  std::vector<std::uint32_t> by_id_;
  std::list<std::uint32_t> lru_;  // front = most recently used
  std::set<std::uint32_t> free_;  // erased bits, reused lowest first
};

}  // namespace hvdtune::internal
