#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <list>
#include <map>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include "core/engine/gloo/rendezvous_wire.h"
#include "hvdtune/rendezvous.h"

namespace hvdtune {
namespace internal::rendezvous {

bool SendAll(int fd, const void* data, std::size_t n) {
  const auto* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t k = ::send(fd, p, n, MSG_NOSIGNAL);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return false;
    p += k;
    n -= static_cast<std::size_t>(k);
  }
  return true;
}

bool RecvAll(int fd, void* data, std::size_t n) {
  auto* p = static_cast<char*>(data);
  while (n > 0) {
    const ssize_t k = ::recv(fd, p, n, 0);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return false;
    p += k;
    n -= static_cast<std::size_t>(k);
  }
  return true;
}

bool SendU32(int fd, std::uint32_t v) { return SendAll(fd, &v, sizeof v); }
bool RecvU32(int fd, std::uint32_t* v) { return RecvAll(fd, v, sizeof *v); }

bool SendString(int fd, const std::string& s) {
  return SendU32(fd, static_cast<std::uint32_t>(s.size())) &&
         SendAll(fd, s.data(), s.size());
}

bool RecvString(int fd, std::string* s) {
  std::uint32_t n = 0;
  if (!RecvU32(fd, &n) || n > kMaxLength) return false;
  s->resize(n);
  return RecvAll(fd, s->data(), n);
}

}  // namespace internal::rendezvous

namespace rv = internal::rendezvous;

class RendezvousServer::Impl {
 public:
  Impl(const std::string& address, int port) {
    addrinfo hints{};
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE;
    addrinfo* res = nullptr;
    const std::string service = std::to_string(port);
    const int gai = ::getaddrinfo(address.empty() ? nullptr : address.c_str(),
                                  service.c_str(), &hints, &res);
    if (gai != 0) {
      throw std::runtime_error("rendezvous server: cannot resolve '" + address +
                               "': " + ::gai_strerror(gai));
    }
    listen_fd_ = ::socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const int one = 1;
    if (listen_fd_ >= 0) {
      ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    }
    const bool ok = listen_fd_ >= 0 &&
                    ::bind(listen_fd_, res->ai_addr, res->ai_addrlen) == 0 &&
                    ::listen(listen_fd_, 1024) == 0;
    const int err = errno;
    ::freeaddrinfo(res);
    if (!ok) {
      if (listen_fd_ >= 0) ::close(listen_fd_);
      throw std::runtime_error("rendezvous server: cannot listen on " +
                               address + ":" + service + ": " +
                               std::strerror(err));
    }
    sockaddr_in bound{};
    socklen_t len = sizeof bound;
    ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&bound), &len);
    port_ = ntohs(bound.sin_port);
    if (::pipe2(wake_, O_CLOEXEC) != 0) {
      ::close(listen_fd_);
      throw std::runtime_error(std::string("rendezvous server: pipe: ") +
                               std::strerror(errno));
    }
    acceptor_ = std::thread([this] { Accept(); });
  }

  ~Impl() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
      // Unblocks the connection threads' reads.
      for (int fd : fds_) ::shutdown(fd, SHUT_RDWR);
    }
    cv_.notify_all();
    const char c = 0;
    static_cast<void>(::write(wake_[1], &c, 1));
    acceptor_.join();
    for (std::thread& t : threads_) t.join();
    ::close(listen_fd_);
    ::close(wake_[0]);
    ::close(wake_[1]);
  }

  int port() const { return port_; }

  void Set(const std::string& key, const std::string& value) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      map_[key] = value;
    }
    cv_.notify_all();
  }

  std::optional<std::string> TryGet(const std::string& key) {
    std::lock_guard<std::mutex> lock(mu_);
    const auto it = map_.find(key);
    if (it == map_.end()) return std::nullopt;
    return it->second;
  }

 private:
  void Accept() {
    for (;;) {
      pollfd p[2] = {{listen_fd_, POLLIN, 0}, {wake_[0], POLLIN, 0}};
      if (::poll(p, 2, -1) < 0) {
        if (errno == EINTR) continue;
        return;
      }
      if (p[1].revents != 0) return;
      const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) continue;
      const int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      std::lock_guard<std::mutex> lock(mu_);
      if (stop_) {
        ::close(fd);
        return;
      }
      fds_.push_back(fd);
      threads_.emplace_back([this, fd] { Serve(fd); });
    }
  }

  // Waits until every key is there; false on timeout or stop.
  bool WaitFor(const std::vector<std::string>& keys, std::uint32_t timeout_ms,
               std::unique_lock<std::mutex>& lock) {
    const auto deadline = std::chrono::steady_clock::now() +
                          std::chrono::milliseconds(timeout_ms);
    return cv_.wait_until(lock, deadline, [&] {
      if (stop_) return true;
      for (const std::string& k : keys) {
        if (map_.find(k) == map_.end()) return false;
      }
      return true;
    }) && !stop_;
  }

  void Serve(int fd) {
    for (;;) {
      char op = 0;
      if (!rv::RecvAll(fd, &op, 1)) break;
      bool ok = true;
      if (op == rv::kSet) {
        std::string key, value;
        ok = rv::RecvString(fd, &key) && rv::RecvString(fd, &value);
        if (ok) Set(key, value);
        ok = ok && rv::SendAll(fd, &rv::kOk, 1);
      } else if (op == rv::kGet || op == rv::kTryGet) {
        std::string key;
        std::uint32_t timeout_ms = 0;
        ok = rv::RecvString(fd, &key) &&
             (op == rv::kTryGet || rv::RecvU32(fd, &timeout_ms));
        if (!ok) break;
        std::string value;
        std::uint8_t status = rv::kOk;
        {
          std::unique_lock<std::mutex> lock(mu_);
          if (op == rv::kGet && !WaitFor({key}, timeout_ms, lock)) {
            status = rv::kTimedOut;
          } else if (auto it = map_.find(key); it != map_.end()) {
            value = it->second;
          } else {
            status = rv::kAbsent;
          }
        }
        ok = rv::SendAll(fd, &status, 1) &&
             (status != rv::kOk || rv::SendString(fd, value));
      } else if (op == rv::kWait) {
        std::uint32_t n = 0;
        ok = rv::RecvU32(fd, &n) && n <= 1u << 20;
        std::vector<std::string> keys(ok ? n : 0);
        for (std::string& k : keys) ok = ok && rv::RecvString(fd, &k);
        std::uint32_t timeout_ms = 0;
        ok = ok && rv::RecvU32(fd, &timeout_ms);
        if (!ok) break;
        std::uint8_t status;
        {
          std::unique_lock<std::mutex> lock(mu_);
          status = WaitFor(keys, timeout_ms, lock) ? rv::kOk : rv::kTimedOut;
        }
        ok = rv::SendAll(fd, &status, 1);
      } else {
        ok = false;  // not a client of ours: drop it
      }
      if (!ok) break;
    }
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = fds_.begin(); it != fds_.end(); ++it) {
      if (*it == fd) {
        fds_.erase(it);
        break;
      }
    }
    ::close(fd);
  }

  int listen_fd_ = -1;
  int port_ = 0;
  int wake_[2] = {-1, -1};
  std::thread acceptor_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::map<std::string, std::string> map_;
  std::vector<int> fds_;
  std::list<std::thread> threads_;
};

RendezvousServer::RendezvousServer(const std::string& address, int port)
    : impl_(std::make_unique<Impl>(address, port)) {}
RendezvousServer::~RendezvousServer() = default;
int RendezvousServer::port() const { return impl_->port(); }
void RendezvousServer::Set(const std::string& key, const std::string& value) {
  impl_->Set(key, value);
}
std::optional<std::string> RendezvousServer::TryGet(
    const std::string& key) const {
  return impl_->TryGet(key);
}
std::string RendezvousServer::LostRankKey(int rank) {
  return "hvdtune/lost/" + std::to_string(rank);
}

}  // namespace hvdtune
