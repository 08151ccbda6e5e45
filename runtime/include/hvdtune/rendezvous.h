// The rendezvous key-value store of the Gloo engine (hvdtune::core; built
// with or without Gloo itself): `hvd-tune run --gloo`
// serves it, the ranks meet through it (each publishes its address, reads
// the others'), and the launcher marks ranks it saw die in it so that the
// survivors can name them. Plain TCP on the launcher's address; any process
// may serve it (another launcher embeds a RendezvousServer, or runs
// `hvd-tune rendezvous`).
#pragma once

#include <memory>
#include <optional>
#include <string>

namespace hvdtune {

/// A TCP key-value store: set, get and wait (with timeouts) on byte-string
/// values. Requests from many clients are served concurrently; a get or a
/// wait for a key that is not there yet blocks that client only.
class RendezvousServer {
 public:
  /// Listens on `address` (an IPv4 address or host name; "0.0.0.0" = all)
  /// at `port` (0 = any free port). Throws std::runtime_error naming the
  /// address when it cannot listen.
  RendezvousServer(const std::string& address, int port);
  /// Stops serving (clients see their connection closed).
  ~RendezvousServer();
  RendezvousServer(const RendezvousServer&) = delete;
  RendezvousServer& operator=(const RendezvousServer&) = delete;

  /// The port it listens on.
  int port() const;
  /// Sets `key` as a client's set would (wakes its waiters).
  void Set(const std::string& key, const std::string& value);
  /// The value of `key` if a client (or Set) has set it, else nothing.
  std::optional<std::string> TryGet(const std::string& key) const;

  /// The key under which a launcher marks world rank `rank` lost (its
  /// process died); the value says how.
  static std::string LostRankKey(int rank);

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace hvdtune
