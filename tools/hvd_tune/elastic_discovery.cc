#include "elastic_discovery.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <sstream>
#include <thread>

#include "common.h"
#include "elastic_world.h"
#include "gloo_launcher.h"

namespace hvdtune::cli {

Hosts ParseDiscoveryOutput(const std::string& text, int default_slots) {
  Hosts out;
  std::set<std::string> seen;
  std::stringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    // Surrounding blanks and empty lines are not hosts.
    const auto b = line.find_first_not_of(" \t\r");
    if (b == std::string::npos) continue;
    line = line.substr(b, line.find_last_not_of(" \t\r") - b + 1);
    const auto colon = line.find(':');
    const std::string name = line.substr(0, colon);
    int slots = default_slots;
    if (colon != std::string::npos) {
      const std::string count = line.substr(colon + 1);
      char* end = nullptr;
      const long n = std::strtol(count.c_str(), &end, 10);
      slots = count.empty() || *end != '\0' || n < 1 || n > 1 << 20
                  ? 0
                  : static_cast<int>(n);
    }
    if (name.empty() || slots < 1 ||
        name.find_first_of(" \t") != std::string::npos) {
      throw Failure("--host-discovery-script printed '" + line +
                    "' (expected host or host:slots, slots >= 1)");
    }
    if (seen.insert(name).second) out.emplace_back(name, slots);
  }
  return out;
}

std::string JoinHosts(const Hosts& hosts, const std::string& none) {
  std::string list;
  for (const auto& [h, n] : hosts) {
    list += (list.empty() ? "" : ",") + h + ":" + std::to_string(n);
  }
  return list.empty() ? none : list;
}

HostDiscovery::HostDiscovery(std::string script, int default_slots)
    : script_(std::move(script)), default_slots_(default_slots) {}

HostDiscovery::~HostDiscovery() { Stop(); }

const Hosts& HostDiscovery::RunOnce() {
  Start();
  for (;;) {
    Drain();
    int status = 0;
    const pid_t r = waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      Drain();
      ::close(fd_);
      fd_ = -1;
      pid_ = -1;
      if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
        throw Failure("--host-discovery-script " + script_ + " " +
                      Describe(status));
      }
      hosts_ = ParseDiscoveryOutput(out_, default_slots_);
      next_ = Clock::now() + std::chrono::seconds(1);
      return hosts_;
    }
    if (r < 0 && errno != EINTR) {
      throw Failure(std::string("waitpid: ") + std::strerror(errno));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

void HostDiscovery::Start() {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    throw Failure(std::string("pipe: ") + std::strerror(errno));
  }
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = fork();
  if (pid < 0) throw Failure(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    ::dup2(fds[1], 1);
    execl("/bin/sh", "sh", "-c", script_.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  ::close(fds[1]);
  ::fcntl(fds[0], F_SETFL, ::fcntl(fds[0], F_GETFL) | O_NONBLOCK);
  pid_ = pid;
  fd_ = fds[0];
  out_.clear();
  started_ = Clock::now();
}

void HostDiscovery::Drain() {
  char buf[4096];
  ssize_t k;
  while ((k = ::read(fd_, buf, sizeof buf)) > 0) {
    out_.append(buf, static_cast<std::size_t>(k));
  }
}

void HostDiscovery::Poll() {
  if (pid_ < 0) {
    if (Clock::now() >= next_) Start();
    return;
  }
  Drain();
  // A script that hangs is stopped; the hosts stay as they were.
  if (Clock::now() - started_ > std::chrono::seconds(30)) {
    ::kill(pid_, SIGKILL);
  }
}

void HostDiscovery::Ended(int status) {
  Drain();
  ::close(fd_);
  fd_ = -1;
  pid_ = -1;
  next_ = Clock::now() + std::chrono::seconds(1);
  if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
    ElasticLog("--host-discovery-script " + Describe(status) +
               "; the hosts stay as they were");
    return;
  }
  try {
    Hosts hosts = ParseDiscoveryOutput(out_, default_slots_);
    if (hosts != hosts_) {
      ElasticLog("discovered hosts: " + JoinHosts(hosts, "(none)"));
    }
    hosts_ = std::move(hosts);
  } catch (const Failure& f) {
    ElasticLog(std::string(f.what()) + "; the hosts stay as they were");
  }
}

void HostDiscovery::Stop() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  while (waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
  }
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  pid_ = -1;
}

}  // namespace hvdtune::cli
