#include "hvdtune/store/writer.h"

#include <chrono>

namespace hvdtune::store {

Writer::Writer(std::unique_ptr<Store> store, std::size_t capacity, Warn warn)
    : store_(std::move(store)), capacity_(capacity), warn_(std::move(warn)) {
  thread_ = std::thread(&Writer::Loop, this);
}

Writer::~Writer() { Finish(); }

bool Writer::Push(Op op) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_ || queue_.size() >= capacity_) {
      ++dropped_;
      return false;
    }
    queue_.push_back(std::move(op));
  }
  cv_.notify_one();
  return true;
}

void Writer::Finish(double timeout_seconds) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!thread_.joinable()) return;
  stop_ = true;
  cv_.notify_all();
  // Give queued writes time to land, then abandon what is left (a write in
  // progress still ends within its busy timeout).
  const auto deadline =
      std::chrono::steady_clock::now() +
      std::chrono::duration_cast<std::chrono::steady_clock::duration>(
          std::chrono::duration<double>(timeout_seconds));
  cv_.wait_until(lock, deadline, [&] { return queue_.empty(); });
  abandon_ = true;
  dropped_ += queue_.size();
  queue_.clear();
  cv_.notify_all();
  lock.unlock();
  thread_.join();
}

std::uint64_t Writer::dropped() const {
  std::lock_guard<std::mutex> lock(mu_);
  return dropped_;
}

std::uint64_t Writer::failed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return failed_;
}

std::uint64_t Writer::written() const {
  std::lock_guard<std::mutex> lock(mu_);
  return written_;
}

void Writer::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (abandon_ || (queue_.empty() && stop_)) break;
    Op op = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    std::string error;
    try {
      op(*store_);
    } catch (const std::exception& e) {
      error = e.what();
    }
    lock.lock();
    if (error.empty()) {
      ++written_;
    } else if (failed_++ == 0 && warn_) {
      lock.unlock();
      warn_(error + "; later writes are tried, this one is lost");
      lock.lock();
    }
    cv_.notify_all();
  }
}

}  // namespace hvdtune::store
