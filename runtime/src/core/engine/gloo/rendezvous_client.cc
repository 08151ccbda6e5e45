#include "core/engine/gloo/rendezvous_client.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <thread>

#include "core/engine/gloo/rendezvous_wire.h"

namespace hvdtune::internal {
namespace rv = rendezvous;

namespace {

std::uint32_t Millis(std::chrono::milliseconds t) {
  return static_cast<std::uint32_t>(
      std::clamp<std::int64_t>(t.count(), 0, UINT32_MAX));
}

// One connection attempt; -1 with *err set on failure.
int Connect(const std::string& address, int port, std::string* err) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const int gai = ::getaddrinfo(address.c_str(), std::to_string(port).c_str(),
                                &hints, &res);
  if (gai != 0) {
    *err = ::gai_strerror(gai);
    return -1;
  }
  const int fd = ::socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd >= 0 && ::connect(fd, res->ai_addr, res->ai_addrlen) == 0) {
    ::freeaddrinfo(res);
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
  }
  *err = std::strerror(errno);
  if (fd >= 0) ::close(fd);
  ::freeaddrinfo(res);
  return -1;
}

}  // namespace

RendezvousClient::RendezvousClient(std::string address, int port,
                                   std::chrono::milliseconds timeout)
    : address_(std::move(address)), port_(port), timeout_(timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout_;
  std::string err;
  auto pause = std::chrono::milliseconds(10);
  while ((fd_ = Connect(address_, port_, &err)) < 0) {
    if (std::chrono::steady_clock::now() >= deadline) {
      Fail("cannot connect within " + std::to_string(timeout_.count()) +
           " ms: " + err);
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(500));
  }
}

RendezvousClient::~RendezvousClient() {
  if (fd_ >= 0) ::close(fd_);
}

void RendezvousClient::Fail(const std::string& what) const {
  throw std::runtime_error("rendezvous store at " + address_ + ":" +
                           std::to_string(port_) + ": " + what);
}

void RendezvousClient::set(const std::string& key,
                           const std::vector<char>& data) {
  std::lock_guard<std::mutex> lock(mu_);
  std::uint8_t status = 0xff;
  if (!rv::SendAll(fd_, &rv::kSet, 1) || !rv::SendString(fd_, key) ||
      !rv::SendString(fd_, std::string(data.begin(), data.end())) ||
      !rv::RecvAll(fd_, &status, 1) || status != rv::kOk) {
    Fail("set '" + key + "' failed (the server is gone)");
  }
}

std::vector<char> RendezvousClient::get(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  std::uint8_t status = 0xff;
  std::string value;
  if (!rv::SendAll(fd_, &rv::kGet, 1) || !rv::SendString(fd_, key) ||
      !rv::SendU32(fd_, Millis(timeout_)) || !rv::RecvAll(fd_, &status, 1) ||
      (status == rv::kOk && !rv::RecvString(fd_, &value))) {
    Fail("get '" + key + "' failed (the server is gone)");
  }
  if (status != rv::kOk) {
    Fail("no '" + key + "' within " + std::to_string(timeout_.count()) +
         " ms (a rank did not arrive)");
  }
  return {value.begin(), value.end()};
}

void RendezvousClient::wait(const std::vector<std::string>& keys) {
  wait(keys, timeout_);
}

void RendezvousClient::wait(const std::vector<std::string>& keys,
                            const std::chrono::milliseconds& timeout) {
  std::lock_guard<std::mutex> lock(mu_);
  bool ok = rv::SendAll(fd_, &rv::kWait, 1) &&
            rv::SendU32(fd_, static_cast<std::uint32_t>(keys.size()));
  for (const std::string& k : keys) ok = ok && rv::SendString(fd_, k);
  std::uint8_t status = 0xff;
  ok = ok && rv::SendU32(fd_, Millis(timeout)) && rv::RecvAll(fd_, &status, 1);
  if (!ok) Fail("wait failed (the server is gone)");
  if (status != rv::kOk) {
    Fail("waited " + std::to_string(timeout.count()) + " ms for " +
         std::to_string(keys.size()) + " key(s), e.g. '" +
         (keys.empty() ? "" : keys.front()) + "' (a rank did not arrive)");
  }
}

std::optional<std::string> RendezvousClient::TryGet(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  std::uint8_t status = 0xff;
  std::string value;
  if (!rv::SendAll(fd_, &rv::kTryGet, 1) || !rv::SendString(fd_, key) ||
      !rv::RecvAll(fd_, &status, 1) ||
      (status == rv::kOk && !rv::RecvString(fd_, &value))) {
    return std::nullopt;
  }
  if (status != rv::kOk) return std::nullopt;
  return value;
}

}  // namespace hvdtune::internal
