// The ranks' side of the rendezvous store (hvdtune/rendezvous.h): a
// gloo::rendezvous::Store over one TCP connection to the server.
#pragma once

#include <gloo/rendezvous/store.h>

#include <chrono>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace hvdtune::internal {

class RendezvousClient final : public gloo::rendezvous::Store {
 public:
  /// Connects to address:port, retrying until `timeout` (the server may
  /// start after the ranks). Every later get or wait gives up after
  /// `timeout` too. Throws std::runtime_error naming the server.
  RendezvousClient(std::string address, int port,
                   std::chrono::milliseconds timeout);
  ~RendezvousClient() override;

  void set(const std::string& key, const std::vector<char>& data) override;
  /// Waits for the key (up to the timeout); throws when it does not come.
  std::vector<char> get(const std::string& key) override;
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override;
  /// The value if the key is there now.
  std::optional<std::string> TryGet(const std::string& key);

 private:
  /// Throws std::runtime_error "rendezvous store at A:P: <what>".
  [[noreturn]] void Fail(const std::string& what) const;

  std::string address_;
  int port_;
  std::chrono::milliseconds timeout_;
  std::mutex mu_;
  int fd_ = -1;
};

}  // namespace hvdtune::internal
