#include "core/engine/gloo/mesh_allreduce.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>
#include <stdexcept>
#include <string>

#include "core/reduce.h"

namespace hvdtune::internal {
namespace {

// What a message carries: a copy of the receiver's block for the
// reduce-scatter, or the sender's reduced block for the allgather.
constexpr std::uint32_t kScatter = 0x68647273;  // "hdrs"
constexpr std::uint32_t kGather = 0x68647267;   // "hdrg"

struct Header {
  std::uint32_t phase;
  std::uint32_t segment;
};
static_assert(sizeof(Header) == 8);

struct Outgoing {
  Header header;
  const std::uint8_t* data;
  std::size_t len;
  std::size_t done = 0;  // bytes of header and data written
};

// One peer's stream: what is left to write, and the message being read.
struct Stream {
  int fd = -1;
  int peer = -1;
  std::deque<Outgoing> out;
  int receives_left = 0;
  Header header{};
  std::size_t header_got = 0;
  std::uint8_t* dest = nullptr;  // the message's bytes go here once known
  std::size_t need = 0;
  std::size_t got = 0;
};

[[noreturn]] void Fail(const Stream& s, const std::string& what, int err = 0) {
  throw std::runtime_error(
      "the direct allreduce across nodes, with peer " + std::to_string(s.peer) +
      " of the group: " + what +
      (err != 0 ? std::string(": ") + std::strerror(err) : std::string()));
}

}  // namespace

void MeshAllreduce(const SocketMesh& mesh, void* data, std::int64_t count,
                   DataType dtype, ReduceOp op, std::int64_t segment_bytes,
                   std::chrono::milliseconds timeout,
                   std::vector<std::uint8_t>* scratch, int abort_fd) {
  const int n = mesh.size();
  if (count <= 0 || n == 1) return;
  const int me = mesh.rank();
  const auto esize = static_cast<std::int64_t>(DataTypeSize(dtype));
  auto* bytes = static_cast<std::uint8_t*>(data);
  // Block b: count / n elements, the first count % n one more.
  const std::int64_t base = count / n, extra = count % n;
  const auto block_offset = [&](int b) {
    return b * base + std::min<std::int64_t>(b, extra);
  };
  const auto block_count = [&](int b) { return base + (b < extra ? 1 : 0); };
  const std::int64_t seg = std::max<std::int64_t>(1, segment_bytes / esize);
  // Segments of the largest block; a smaller block's last may be empty.
  const std::int64_t segments = (base + (extra > 0 ? 1 : 0) + seg - 1) / seg;
  const auto seg_count = [&](int b, std::int64_t j) {
    return std::clamp<std::int64_t>(block_count(b) - j * seg, 0, seg);
  };
  const auto size_of = [esize](std::int64_t elements) {
    return static_cast<std::size_t>(elements * esize);
  };
  const auto seg_at = [&](int b, std::int64_t j) {
    return bytes + size_of(block_offset(b) + j * seg);
  };
  const std::int64_t mine = block_count(me);
  scratch->resize(size_of((n - 1) * mine));
  // The other ranks in rank order (the reduction's order); the k-th one's
  // copy of this rank's block lands at scratch_at(k, .).
  std::vector<Stream> streams;
  for (int p = 0; p < n; ++p) {
    if (p == me) continue;
    Stream s;
    s.fd = mesh.fd(p);
    s.peer = p;
    for (std::int64_t j = 0; j < segments; ++j) {
      s.receives_left += (seg_count(me, j) > 0) + (seg_count(p, j) > 0);
    }
    streams.push_back(std::move(s));
  }
  const auto scratch_at = [&](std::size_t k, std::int64_t j) {
    return scratch->data() +
           size_of(static_cast<std::int64_t>(k) * mine + j * seg);
  };
  // Every block's segments to its owner, segment by segment; the peers
  // from this rank on, so that not every rank writes to rank 0 first.
  const auto stream_of = [&](int p) -> Stream& {
    return streams[static_cast<std::size_t>(p < me ? p : p - 1)];
  };
  for (std::int64_t j = 0; j < segments; ++j) {
    for (int i = 1; i < n; ++i) {
      const int p = (me + i) % n;
      const std::int64_t len = seg_count(p, j);
      if (len == 0) continue;
      stream_of(p).out.push_back({{kScatter, static_cast<std::uint32_t>(j)},
                                  seg_at(p, j),
                                  size_of(len)});
    }
  }
  // Copies of this rank's segment j in so far.
  std::vector<int> arrived(static_cast<std::size_t>(segments), 0);
  const auto reduced = [&](std::int64_t j) {
    std::uint8_t* result = seg_at(me, j);
    const std::int64_t len = seg_count(me, j);
    for (std::size_t k = 0; k < streams.size(); ++k) {
      ReduceInto(result, scratch_at(k, j), len, dtype, op);
    }
    for (int i = 1; i < n; ++i) {
      stream_of((me + i) % n)
          .out.push_back(
              {{kGather, static_cast<std::uint32_t>(j)}, result, size_of(len)});
    }
  };
  // A header is in: where its bytes go.
  const auto place = [&](Stream& s, std::size_t k) {
    const Header& h = s.header;
    const auto j = static_cast<std::int64_t>(h.segment);
    std::int64_t len = 0;
    if (h.phase == kScatter && j < segments) {
      len = seg_count(me, j);
      s.dest = scratch_at(k, j);
    } else if (h.phase == kGather && j < segments) {
      len = seg_count(s.peer, j);
      s.dest = seg_at(s.peer, j);
    }
    if (len == 0) {
      Fail(s, "a message with header " + std::to_string(h.phase) + "/" +
                  std::to_string(h.segment) +
                  " that this allreduce does not expect (the ranks called "
                  "different collectives)");
    }
    s.need = size_of(len);
    s.got = 0;
  };
  // A message is in.
  const auto received = [&](Stream& s) {
    --s.receives_left;
    s.header_got = 0;
    s.dest = nullptr;
    if (s.header.phase == kScatter) {
      const auto j = static_cast<std::size_t>(s.header.segment);
      if (++arrived[j] == n - 1) reduced(static_cast<std::int64_t>(j));
    }
  };
  const auto read_some = [&](Stream& s, std::size_t k) {
    for (;;) {
      if (s.receives_left == 0) return;
      void* to;
      std::size_t want;
      if (s.dest == nullptr) {
        to = reinterpret_cast<std::uint8_t*>(&s.header) + s.header_got;
        want = sizeof(Header) - s.header_got;
      } else {
        to = s.dest + s.got;
        want = s.need - s.got;
      }
      const ssize_t r = ::recv(s.fd, to, want, 0);
      if (r == 0) Fail(s, "the peer closed the connection");
      if (r < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK) return;
        if (errno == EINTR) continue;
        Fail(s, "recv", errno);
      }
      const auto got = static_cast<std::size_t>(r);
      if (s.dest == nullptr) {
        s.header_got += got;
        if (s.header_got == sizeof(Header)) place(s, k);
      } else {
        s.got += got;
        if (s.got == s.need) received(s);
      }
    }
  };
  const auto write_some = [&](Stream& s) {
    while (!s.out.empty()) {
      Outgoing& o = s.out.front();
      iovec iov[2];
      int parts = 0;
      if (o.done < sizeof(Header)) {
        iov[parts++] = {reinterpret_cast<std::uint8_t*>(&o.header) + o.done,
                        sizeof(Header) - o.done};
      }
      const std::size_t data_done =
          o.done > sizeof(Header) ? o.done - sizeof(Header) : 0;
      iov[parts++] = {const_cast<std::uint8_t*>(o.data) + data_done,
                      o.len - data_done};
      msghdr msg{};
      msg.msg_iov = iov;
      msg.msg_iovlen = static_cast<std::size_t>(parts);
      const ssize_t w = ::sendmsg(s.fd, &msg, MSG_NOSIGNAL);
      if (w < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK) return;
        if (errno == EINTR) continue;
        Fail(s, "send", errno);
      }
      o.done += static_cast<std::size_t>(w);
      if (o.done == sizeof(Header) + o.len) s.out.pop_front();
    }
  };
  // The streams, then the abort descriptor.
  std::vector<pollfd> fds(streams.size() + 1);
  fds.back() = {abort_fd, POLLIN, 0};
  for (;;) {
    bool busy = false;
    for (std::size_t k = 0; k < streams.size(); ++k) {
      const Stream& s = streams[k];
      const short events = static_cast<short>(
          (s.receives_left > 0 ? POLLIN : 0) | (s.out.empty() ? 0 : POLLOUT));
      fds[k] = {events != 0 ? s.fd : -1, events, 0};
      busy = busy || events != 0;
    }
    if (!busy) return;
    const int ready =
        ::poll(fds.data(), fds.size(), static_cast<int>(timeout.count()));
    if (ready < 0) {
      if (errno == EINTR) continue;
      throw std::runtime_error(std::string("the direct allreduce across "
                                           "nodes: poll: ") +
                               std::strerror(errno));
    }
    if (ready == 0) {
      std::string waiting;
      for (const Stream& s : streams) {
        if (s.receives_left > 0 || !s.out.empty()) {
          waiting += (waiting.empty() ? "" : ", ") + std::to_string(s.peer);
        }
      }
      throw std::runtime_error(
          "the direct allreduce across nodes timed out after " +
          std::to_string(timeout.count()) +
          " ms with nothing moving; waiting on peers " + waiting +
          " of the group");
    }
    if (fds.back().revents != 0) {
      throw std::runtime_error(
          "the direct allreduce across nodes was aborted (another step of "
          "the hierarchical allreduce failed)");
    }
    for (std::size_t k = 0; k < streams.size(); ++k) {
      if (fds[k].revents == 0) continue;
      // Reads first: a segment that completes may queue writes.
      if ((fds[k].revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
        read_some(streams[k], k);
      }
      write_some(streams[k]);
    }
  }
}

}  // namespace hvdtune::internal
