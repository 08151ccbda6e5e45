#include "core/response_cache.h"

#include <stdexcept>

namespace hvdtune::internal {

ResponseCache::Lookup ResponseCache::Find(const Request& request) const {
  if (request.id != kNoTensorId) {
    // Ids are interned names: the same id is the same name.
    if (request.id >= by_id_.size() || by_id_[request.id] == 0) return {};
    const std::uint32_t bit = by_id_[request.id] - 1;
    return {entries_[bit].request.SameSignatureButName(request)
                ? State::kHit
                : State::kInvalid,
            bit};
  }
  const auto it = by_name_.find(request.name);
  if (it == by_name_.end()) return {};
  const std::uint32_t bit = it->second;
  return {entries_[bit].request.SameSignature(request) ? State::kHit
                                                       : State::kInvalid,
          bit};
}

std::optional<std::uint32_t> ResponseCache::Put(
    const Response& response, const Request& request,
    std::vector<std::uint32_t>* displaced) {
  if (capacity_ == 0) return std::nullopt;
  std::uint32_t bit;
  if (const auto it = by_name_.find(response.name); it != by_name_.end()) {
    bit = it->second;
    if (displaced) displaced->push_back(bit);
    Erase(bit);
  }
  if (!free_.empty()) {
    bit = *free_.begin();
    free_.erase(free_.begin());
  } else if (entries_.size() < capacity_) {
    bit = static_cast<std::uint32_t>(entries_.size());
    entries_.emplace_back();
  } else {
    bit = lru_.back();
    if (displaced) displaced->push_back(bit);
    Erase(bit);
    free_.erase(bit);
  }
  Entry& e = entries_[bit];
  e.response = response;
  e.request = request;
  e.used = true;
  lru_.push_front(bit);
  e.lru = lru_.begin();
  by_name_[response.name] = bit;
  if (request.id != kNoTensorId) {
    if (request.id >= by_id_.size()) by_id_.resize(request.id + 1, 0);
    by_id_[request.id] = bit + 1;
  }
  return bit;
}

void ResponseCache::Erase(std::uint32_t bit) {
  if (!Contains(bit)) return;
  Entry& e = entries_[bit];
  by_name_.erase(e.response.name);
  if (e.request.id != kNoTensorId) by_id_[e.request.id] = 0;
  lru_.erase(e.lru);
  e.used = false;
  e.response = Response();
  e.request = Request();
  free_.insert(bit);
}

void ResponseCache::Touch(std::uint32_t bit) {
  if (!Contains(bit)) return;
  Entry& e = entries_[bit];
  lru_.splice(lru_.begin(), lru_, e.lru);
}

bool ResponseCache::Contains(std::uint32_t bit) const {
  return bit < entries_.size() && entries_[bit].used;
}

const Response& ResponseCache::response(std::uint32_t bit) const {
  if (!Contains(bit)) throw std::out_of_range("response cache bit not in use");
  return entries_[bit].response;
}

const Request& ResponseCache::request(std::uint32_t bit) const {
  if (!Contains(bit)) throw std::out_of_range("response cache bit not in use");
  return entries_[bit].request;
}

}  // namespace hvdtune::internal
