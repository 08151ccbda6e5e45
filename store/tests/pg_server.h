// A throwaway PostgreSQL server for tests and benchmarks: Debian's
// binaries (/usr/lib/postgresql/15/bin, or $HVDTUNE_PG_BIN), initdb into a
// fresh directory under /tmp, the server on a free loopback port with its
// Unix socket in that directory, all of it removed afterwards. PostgreSQL
// refuses to run as root: run as root (CI), the directory is handed to the
// unprivileged `postgres` account and the server runs as that user. Logins
// over TCP need a password (scram-sha-256), so tests can exercise refused
// credentials; the superuser is `postgres` with password kPassword.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <grp.h>
#include <libpq-fe.h>
#include <netinet/in.h>
#include <pwd.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

// Ends a GoogleTest test that needs a PostgreSQL server none could start
// (`reason`): a failure where one is required (PostgresRequired()), else a skip
// whose text CTest reports as skipped.
#define HVDTUNE_NO_PG_SERVER(reason)                                      \
  do {                                                                    \
    if (::hvdtune::store::testing::PostgresRequired()) {                  \
      FAIL() << ::hvdtune::store::testing::NoServerFailure(reason);       \
    }                                                                     \
    GTEST_SKIP() << ::hvdtune::store::testing::kNoServerSkip << (reason); \
  } while (0)

namespace hvdtune::store::testing {

/// True where PostgreSQL must run (HVDTUNE_REQUIRE_POSTGRES=1: tools/test.sh
/// and CI set it): a test that cannot start a server then fails instead of
/// skipping.
inline bool PostgresRequired() {
  const char* v = std::getenv("HVDTUNE_REQUIRE_POSTGRES");
  return v != nullptr && std::string(v) == "1";
}

/// How a test that cannot start a server says so. The skip text is what
/// CTest's SKIP_REGULAR_EXPRESSION of those tests matches, so that they show
/// as "Skipped" with the reason; the failure text must never match it.
inline constexpr const char* kNoServerSkip = "skipped, no PostgreSQL server: ";
inline std::string NoServerFailure(const std::string& reason) {
  return "PostgreSQL is required here (HVDTUNE_REQUIRE_POSTGRES=1) but no "
         "server could start: " +
         reason;
}

class PgServer {
 public:
  static constexpr const char* kPassword = "s3cret-pw";

  /// Where the server binaries are.
  static std::string BinDir() {
    const char* env = std::getenv("HVDTUNE_PG_BIN");
    return env && *env ? env : "/usr/lib/postgresql/15/bin";
  }

  /// Why no server can be started here (empty: it can).
  static std::string MissingReason() {
    for (const char* tool : {"initdb", "postgres"}) {
      if (access((BinDir() + "/" + tool).c_str(), X_OK) != 0) {
        return "PostgreSQL server binaries not found (" + BinDir() + "/" +
               tool + "; Debian package postgresql-15)";
      }
    }
    if (geteuid() == 0 && getpwnam("postgres") == nullptr) {
      return "running as root and no unprivileged 'postgres' account to run "
             "the server as";
    }
    return {};
  }

  /// initdb and start. `settings`: extra -c NAME=VALUE for the server.
  explicit PgServer(std::vector<std::string> settings = {})
      : settings_(std::move(settings)) {
    char tmpl[] = "/tmp/hvdtune_pg_XXXXXX";
    if (mkdtemp(tmpl) == nullptr) throw std::runtime_error("mkdtemp failed");
    dir_ = tmpl;
    if (geteuid() == 0) {
      const passwd* pw = getpwnam("postgres");
      if (pw == nullptr) throw std::runtime_error(MissingReason());
      uid_ = pw->pw_uid;
      gid_ = pw->pw_gid;
      if (chown(dir_.c_str(), uid_, gid_) != 0) {
        throw std::runtime_error("chown " + dir_ + " failed");
      }
    }
    const std::string pwfile = dir_ + "/pw";
    std::ofstream(pwfile) << kPassword << "\n";
    if (uid_ != 0 && chown(pwfile.c_str(), uid_, gid_) != 0) {
      throw std::runtime_error("chown " + pwfile + " failed");
    }
    const int rc =
        RunAs({BinDir() + "/initdb", "-D", data(), "-U", "postgres",
               "--auth-local=trust", "--auth-host=scram-sha-256",
               "--pwfile=" + pwfile, "-N", "-E", "UTF8", "--locale=C"},
              /*wait=*/true);
    if (rc != 0) {
      throw std::runtime_error("initdb failed (" + std::to_string(rc) +
                               "): " + Log());
    }
    port_ = FreePort();
    Start();
  }

  ~PgServer() {
    Stop();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  PgServer(const PgServer&) = delete;
  PgServer& operator=(const PgServer&) = delete;

  int port() const { return port_; }
  const std::string& dir() const { return dir_; }
  std::string data() const { return dir_ + "/data"; }

  /// A URI for `db` over TCP as `user` with `password` (empty: none).
  std::string Uri(const std::string& db, const std::string& user = "postgres",
                  const std::string& password = kPassword) const {
    return "postgresql://" + user + (password.empty() ? "" : ":" + password) +
           "@127.0.0.1:" + std::to_string(port_) + "/" + db;
  }

  /// Runs `sql` as the superuser in `db` over the Unix socket; throws with
  /// the server's message.
  void Sql(const std::string& db, const std::string& sql) const {
    const std::string conninfo = "host=" + dir_ +
                                 " port=" + std::to_string(port_) +
                                 " user=postgres dbname=" + db;
    PGconn* c = PQconnectdb(conninfo.c_str());
    std::string error;
    if (PQstatus(c) != CONNECTION_OK) {
      error = PQerrorMessage(c);
    } else {
      PGresult* r = PQexec(c, sql.c_str());
      const auto st = PQresultStatus(r);
      if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
        error = PQerrorMessage(c);
      }
      PQclear(r);
    }
    PQfinish(c);
    if (!error.empty()) throw std::runtime_error(sql + ": " + error);
  }

  /// A new empty database; returns its URI (superuser).
  std::string CreateDatabase(const std::string& db) const {
    Sql("postgres", "CREATE DATABASE \"" + db + "\"");
    return Uri(db);
  }

  /// Starts the server on the same port and data; returns when it accepts
  /// connections.
  void Start() {
    std::vector<std::string> args = {BinDir() + "/postgres",
                                     "-D",
                                     data(),
                                     "-p",
                                     std::to_string(port_),
                                     "-k",
                                     dir_,
                                     "-c",
                                     "listen_addresses=127.0.0.1",
                                     "-c",
                                     "fsync=off",
                                     "-c",
                                     "max_connections=200",
                                     "-c",
                                     "shared_buffers=64MB"};
    for (const std::string& s : settings_) {
      args.push_back("-c");
      args.push_back(s);
    }
    pid_ = RunAs(args, /*wait=*/false);
    const std::string ping = "host=127.0.0.1 port=" + std::to_string(port_) +
                             " dbname=postgres connect_timeout=2";
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (PQping(ping.c_str()) != PQPING_OK) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        throw std::runtime_error("postgres exited at start: " + Log());
      }
      if (std::chrono::steady_clock::now() > deadline) {
        throw std::runtime_error("postgres did not start in 60 s: " + Log());
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }

  /// SIGKILL to the server and every backend (a crash, a power cut).
  void Kill() {
    if (pid_ <= 0) return;
    Signal(SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

  /// SIGSTOP / SIGCONT to the server and every backend: a server that
  /// stops answering, as behind a network partition, and comes back.
  void Pause() { Signal(SIGSTOP); }
  void Resume() { Signal(SIGCONT); }

  /// Fast shutdown (clients disconnected).
  void Stop() {
    if (pid_ <= 0) return;
    kill(pid_, SIGINT);
    for (int i = 0; i < 300; ++i) {
      if (waitpid(pid_, nullptr, WNOHANG) == pid_) {
        pid_ = -1;
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    Kill();
  }

  bool running() const { return pid_ > 0; }

  /// The server's log so far (initdb's output included).
  std::string Log() const {
    std::ifstream in(dir_ + "/log");
    return {std::istreambuf_iterator<char>(in),
            std::istreambuf_iterator<char>()};
  }

 private:
  // `sig` to the postmaster and its children (each backend is a session of
  // its own, so the postmaster's process group is not enough).
  void Signal(int sig) const {
    if (pid_ <= 0) return;
    std::vector<pid_t> pids = {pid_};
    for (const auto& e : std::filesystem::directory_iterator("/proc")) {
      const std::string name = e.path().filename();
      if (name.find_first_not_of("0123456789") != std::string::npos) continue;
      std::ifstream stat(e.path() / "stat");
      std::string line;
      std::getline(stat, line);
      // pid (comm) state ppid ...: comm may hold spaces, ppid follows ')'.
      const auto close = line.rfind(')');
      if (close == std::string::npos) continue;
      std::istringstream rest(line.substr(close + 1));
      std::string state;
      pid_t ppid = 0;
      rest >> state >> ppid;
      if (ppid == pid_) pids.push_back(std::stoi(name));
    }
    // Children first, so that the postmaster never sees one of them go.
    for (auto it = pids.rbegin(); it != pids.rend(); ++it) kill(*it, sig);
  }

  static int FreePort() {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
        getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
      close(fd);
      throw std::runtime_error("no free loopback port");
    }
    close(fd);
    return ntohs(a.sin_port);
  }

  // Runs `args` as the server's user in its own process group, output
  // appended to the log; waits for it (returns the exit code) or returns
  // its pid.
  int RunAs(const std::vector<std::string>& args, bool wait) const {
    const std::string log = dir_ + "/log";
    const pid_t pid = fork();
    if (pid < 0) throw std::runtime_error("fork failed");
    if (pid == 0) {
      setsid();
      const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      if (fd >= 0) {
        dup2(fd, 1);
        dup2(fd, 2);
        close(fd);
      }
      if (uid_ != 0) {
        if (setgroups(0, nullptr) != 0 || setgid(gid_) != 0 ||
            setuid(uid_) != 0) {
          _exit(126);
        }
      }
      if (chdir(dir_.c_str()) != 0) _exit(126);
      std::vector<char*> argv;
      for (const std::string& a : args) {
        argv.push_back(const_cast<char*>(a.c_str()));
      }
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
    if (!wait) return pid;
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

  std::vector<std::string> settings_;
  std::string dir_;
  uid_t uid_ = 0;
  gid_t gid_ = 0;
  int port_ = 0;
  pid_t pid_ = -1;
};

}  // namespace hvdtune::store::testing
