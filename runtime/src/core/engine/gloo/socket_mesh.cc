#include "core/engine/gloo/socket_mesh.h"

#include <fcntl.h>
#include <gloo/allgather.h>
#include <gloo/transport/pair.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>

namespace hvdtune::internal {
namespace {

using Clock = std::chrono::steady_clock;

[[noreturn]] void Fail(const std::string& what, int err = 0) {
  throw std::runtime_error(
      "the direct connections across nodes: " + what +
      (err != 0 ? std::string(": ") + std::strerror(err) : std::string()));
}

// Milliseconds left until `deadline` (0 once past), for poll.
int MsLeft(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - Clock::now());
  return left.count() > 0 ? static_cast<int>(left.count()) : 0;
}

// Waits for `events` on `fd` until `deadline`; false on a timeout.
bool WaitFor(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    const int n = ::poll(&p, 1, MsLeft(deadline));
    if (n > 0) return true;
    if (n == 0) return false;
    if (errno != EINTR) Fail("poll", errno);
  }
}

void SetNonBlocking(int fd) {
  const int flags = ::fcntl(fd, F_GETFL, 0);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) {
    Fail("fcntl", errno);
  }
}

// All `len` bytes of a non-blocking socket, bounded by `deadline`.
void ReadAll(int fd, void* buf, std::size_t len, Clock::time_point deadline,
             const std::string& what) {
  auto* p = static_cast<char*>(buf);
  while (len > 0) {
    const ssize_t n = ::recv(fd, p, len, 0);
    if (n > 0) {
      p += n;
      len -= static_cast<std::size_t>(n);
    } else if (n == 0) {
      Fail(what + ": the peer closed the connection");
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      if (!WaitFor(fd, POLLIN, deadline)) Fail(what + ": timed out");
    } else if (errno != EINTR) {
      Fail(what, errno);
    }
  }
}

void WriteAll(int fd, const void* buf, std::size_t len,
              Clock::time_point deadline, const std::string& what) {
  const auto* p = static_cast<const char*>(buf);
  while (len > 0) {
    const ssize_t n = ::send(fd, p, len, MSG_NOSIGNAL);
    if (n >= 0) {
      p += n;
      len -= static_cast<std::size_t>(n);
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      if (!WaitFor(fd, POLLOUT, deadline)) Fail(what + ": timed out");
    } else if (errno != EINTR) {
      Fail(what, errno);
    }
  }
}

// A TCP socket of `family`, non-blocking, closed on exec.
int NewSocket(int family) {
  const int fd = ::socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) Fail("socket", errno);
  SetNonBlocking(fd);
  return fd;
}

void Close(int fd) {
  if (fd >= 0) ::close(fd);
}

// The listening address of this rank's Gloo device (the one its peers
// connect to), with the port set to 0.
sockaddr_storage GlooDeviceAddress(const std::shared_ptr<gloo::Context>& ctx) {
  for (int p = 0; p < ctx->size; ++p) {
    if (p == ctx->rank) continue;
    // Gloo's TCP address serializes as the listener's sockaddr_storage and
    // a sequence number (gloo/transport/tcp/address.h).
    const std::vector<char> raw = ctx->getPair(p)->address().bytes();
    if (raw.size() != sizeof(sockaddr_storage) + sizeof(ssize_t)) {
      Fail("the Gloo context is not on the TCP transport");
    }
    sockaddr_storage ss{};
    std::memcpy(&ss, raw.data(), sizeof ss);
    if (ss.ss_family == AF_INET) {
      reinterpret_cast<sockaddr_in*>(&ss)->sin_port = 0;
    } else if (ss.ss_family == AF_INET6) {
      reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port = 0;
    } else {
      Fail("the Gloo device listens on neither IPv4 nor IPv6");
    }
    return ss;
  }
  Fail("a group of one rank has no peers");
}

socklen_t AddressLength(const sockaddr_storage& ss) {
  return ss.ss_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
}

}  // namespace

SocketMesh::SocketMesh(const std::shared_ptr<gloo::Context>& ctx,
                       std::chrono::milliseconds timeout)
    : rank_(ctx->rank),
      size_(ctx->size),
      fds_(static_cast<std::size_t>(ctx->size), -1) {
  if (size_ == 1) return;
  const auto deadline = Clock::now() + timeout;
  sockaddr_storage self = GlooDeviceAddress(ctx);
  const int listener = NewSocket(self.ss_family);
  try {
    if (::bind(listener, reinterpret_cast<const sockaddr*>(&self),
               AddressLength(self)) != 0) {
      Fail("bind", errno);
    }
    if (::listen(listener, size_) != 0) Fail("listen", errno);
    socklen_t len = sizeof self;
    if (::getsockname(listener, reinterpret_cast<sockaddr*>(&self), &len) !=
        0) {
      Fail("getsockname", errno);
    }
    std::vector<sockaddr_storage> all(static_cast<std::size_t>(size_));
    gloo::AllgatherOptions opts(ctx);
    opts.setInput(&self, 1);
    opts.setOutput(all.data(), all.size());
    opts.setTimeout(timeout);
    gloo::allgather(opts);
    // Up: connect, then say who this is.
    for (int p = rank_ + 1; p < size_; ++p) {
      const auto& to = all[static_cast<std::size_t>(p)];
      const int fd = NewSocket(to.ss_family);
      fds_[static_cast<std::size_t>(p)] = fd;
      const std::string what = "connecting to rank " + std::to_string(p);
      if (::connect(fd, reinterpret_cast<const sockaddr*>(&to),
                    AddressLength(to)) != 0) {
        if (errno != EINPROGRESS) Fail(what, errno);
        if (!WaitFor(fd, POLLOUT, deadline)) Fail(what + ": timed out");
        int err = 0;
        socklen_t elen = sizeof err;
        ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen);
        if (err != 0) Fail(what, err);
      }
      const std::int32_t me = rank_;
      WriteAll(fd, &me, sizeof me, deadline, what);
    }
    // Down: accept, and learn who connected.
    for (int accepted = 0; accepted < rank_; ++accepted) {
      int fd = -1;
      while (fd < 0) {
        fd = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
        if (fd >= 0) break;
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
          if (!WaitFor(listener, POLLIN, deadline)) {
            Fail("waiting for the ranks below " + std::to_string(rank_) +
                 " to connect: timed out");
          }
        } else if (errno != EINTR && errno != ECONNABORTED) {
          Fail("accept", errno);
        }
      }
      SetNonBlocking(fd);
      std::int32_t who = -1;
      try {
        ReadAll(fd, &who, sizeof who, deadline, "reading a peer's rank");
      } catch (...) {
        Close(fd);
        throw;
      }
      if (who < 0 || who >= rank_ || fds_[static_cast<std::size_t>(who)] >= 0) {
        Close(fd);
        Fail("a connection announced rank " + std::to_string(who) +
             ", not a rank below " + std::to_string(rank_) + " still missing");
      }
      fds_[static_cast<std::size_t>(who)] = fd;
    }
    const int one = 1;
    for (int fd : fds_) {
      if (fd >= 0) ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    }
  } catch (...) {
    Close(listener);
    for (int fd : fds_) Close(fd);
    throw;
  }
  Close(listener);
}

SocketMesh::~SocketMesh() {
  for (int fd : fds_) Close(fd);
}

}  // namespace hvdtune::internal
