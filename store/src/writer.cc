#include "hvdtune/store/writer.h"

#include <algorithm>
#include <chrono>

namespace hvdtune::store {

Writer::Writer(std::unique_ptr<Store> store, std::size_t capacity, Warn warn,
               Options reconnect)
    : store_(std::move(store)),
      capacity_(capacity),
      warn_(std::move(warn)),
      reconnect_(std::move(reconnect)),
      delay_(reconnect_.first_delay_seconds),
      outage_reported_(reconnect_.outage_reported) {
  thread_ = std::thread(&Writer::Loop, this);
}

Writer::~Writer() { Finish(); }

bool Writer::Push(Op op) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_ || queue_.size() >= capacity_) {
      ++dropped_;
      Counted("dropped", 1);
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
  if (!queue_.empty()) Counted("dropped", queue_.size());
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

void Writer::Counted(const char* result, std::uint64_t n) {
  if (reconnect_.count) reconnect_.count(result, n);
}

std::uint64_t Writer::reconnects() const {
  std::lock_guard<std::mutex> lock(mu_);
  return reconnects_;
}

void Writer::TryReopen(std::unique_lock<std::mutex>& lock) {
  lock.unlock();
  std::unique_ptr<Store> store;
  std::string error;
  try {
    store = reconnect_.open();
  } catch (const std::exception& e) {
    error = e.what();
  }
  lock.lock();
  if (store) {
    store_ = std::move(store);
    ++reconnects_;
    delay_ = reconnect_.first_delay_seconds;
    if (outage_reported_ && reconnect_.notice) {
      const std::string msg = "config store " + store_->path() + " is back; " +
                              std::to_string(queue_.size()) +
                              " queued writes follow";
      lock.unlock();
      reconnect_.notice(msg);
      lock.lock();
    }
    outage_reported_ = false;
    return;
  }
  if (!outage_reported_) {
    outage_reported_ = true;
    if (warn_) {
      lock.unlock();
      warn_(error + "; writes are queued (up to " + std::to_string(capacity_) +
            ") and retried");
      lock.lock();
    }
  }
  // Back off, waking early only to give up (Finish).
  cv_.wait_for(lock, std::chrono::duration<double>(delay_),
               [&] { return abandon_; });
  delay_ = std::min(delay_ * 2, reconnect_.max_delay_seconds);
}

void Writer::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (abandon_ || (queue_.empty() && stop_)) break;
    if (!store_) {
      if (reconnect_.open) {
        TryReopen(lock);
      } else {
        failed_ += queue_.size();
        Counted("failed", queue_.size());
        queue_.clear();
      }
      continue;
    }
    Op op = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    std::string error;
    bool unavailable = false;
    try {
      op(*store_);
    } catch (const StoreUnavailable& e) {
      error = e.what();
      unavailable = static_cast<bool>(reconnect_.open);
    } catch (const std::exception& e) {
      error = e.what();
    }
    lock.lock();
    if (unavailable) {
      // Not this write's fault: it goes back to the head of the queue and
      // waits for the store (dropped and counted if the writer gives up).
      store_.reset();
      if (abandon_) {
        ++dropped_;
        Counted("dropped", 1);
      } else {
        queue_.push_front(std::move(op));
      }
      if (!outage_reported_) {
        outage_reported_ = true;
        if (warn_) {
          lock.unlock();
          warn_(error + "; writes are queued (up to " +
                std::to_string(capacity_) + ") and retried");
          lock.lock();
        }
      }
    } else if (error.empty()) {
      ++written_;
      Counted("written", 1);
    } else {
      Counted("failed", 1);
      if (failed_++ == 0 && warn_) {
        lock.unlock();
        warn_(error + "; later writes are tried, this one is lost");
        lock.lock();
      }
    }
    cv_.notify_all();
  }
}

}  // namespace hvdtune::store
