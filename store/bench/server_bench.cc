// Many jobs, one PostgreSQL store: N job processes start at once (or, with
// --start-spread S, one every S / N seconds, as a scheduler launches them),
// each does
// what rank 0 of an autotuned job does against the store (connect, look its
// fingerprint up: Store::Lookup, the ids, the best and the newest 200
// samples; then record its fingerprints and run) and writes M samples one at a
// time, as the writer thread does. Reports the median and p99 of the connection
// (the login), of the start-up lookup once connected, and of a sample write,
// and checks that every row arrived. Also reports how many jobs ran at once
// at the peak (their connect-to-last-write spans overlapping).
//
//   store_server_bench [--jobs 64] [--samples 1000] [--start-spread S]
//                      [--db URI] [--json]
//
// Without --db it starts a throwaway server (store/tests/pg_server.h) with
// durable settings (fsync on) on loopback. Exit status 1 when a row is lost.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "hvdtune/store/store.h"
#include "pg_server.h"

namespace {

using hvdtune::store::Fingerprint;
using hvdtune::store::Sample;
using hvdtune::store::Store;
using hvdtune::store::StoreOptions;
using Clock = std::chrono::steady_clock;

double Ms(Clock::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

Fingerprint JobHardware(int job) {
  hvdtune::store::HostFacts host;
  host.cpu_model = "Bench CPU";
  host.cpu_cores = 64;
  hvdtune::store::JobFacts facts;
  facts.world_size = 8 * (1 + job % 4);  // a few jobs share a fingerprint
  facts.ranks_per_node = 8;
  facts.mpi_version = "Open MPI v4.1.4";
  return hvdtune::store::HardwareFingerprint(host, facts);
}

Sample BenchSample(int index) {
  Sample s;
  s.index = index;
  s.phase = "exploring";
  s.score = 1e9 + index;
  s.time = 1.7e9 + index;
  s.values["fusion_threshold"] = std::int64_t{64} << 20;
  s.values["cycle_time"] = 1.0 + index * 0.001;
  s.values["cache_capacity"] = std::int64_t{1024};
  s.values["hierarchical_allreduce"] = std::int64_t{0};
  s.values["allreduce_algorithm"] = std::string("ring");
  return s;
}

// One job: its timings (ms) written to `fd`: when it began and ended (since
// `origin`), connection, lookup, then every write.
int Job(const std::string& uri, int job, int samples, int fd,
        Clock::time_point origin) {
  std::vector<double> t = {Ms(Clock::now() - origin), 0};
  auto start = Clock::now();
  Store s({uri});
  t.push_back(Ms(Clock::now() - start));
  start = Clock::now();
  const Fingerprint hw = JobHardware(job);
  const Fingerprint model = hvdtune::store::ModelFingerprint(
      {{"float32", 25557032}, {"float32", 1000}});
  s.Lookup(hw.Hash(), model.Hash(), 200);
  t.push_back(Ms(Clock::now() - start));
  const auto hw_id = s.PutFingerprint("hardware", hw);
  const auto model_id = s.PutFingerprint("model", model);
  const auto run = s.BeginRun(hw_id, model_id, "bench", "fresh", job);
  for (int i = 1; i <= samples; ++i) {
    const Sample x = BenchSample(i);
    const auto w = Clock::now();
    s.AddSamples(run, {x});
    t.push_back(Ms(Clock::now() - w));
  }
  s.EndRun(run, "completed", job + 1.0);
  t[1] = Ms(Clock::now() - origin);
  const auto bytes = static_cast<ssize_t>(t.size() * sizeof(double));
  return write(fd, t.data(), static_cast<std::size_t>(bytes)) == bytes ? 0 : 1;
}

double Quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const auto i =
      static_cast<std::size_t>(q * static_cast<double>(v.size() - 1));
  return v[i];
}

}  // namespace

int main(int argc, char** argv) {
  int jobs = 64, samples = 1000;
  double spread = 0;
  std::string uri;
  bool json = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s: missing value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--jobs") {
      jobs = std::atoi(value().c_str());
    } else if (a == "--samples") {
      samples = std::atoi(value().c_str());
    } else if (a == "--start-spread") {
      spread = std::atof(value().c_str());
    } else if (a == "--db") {
      uri = value();
    } else if (a == "--json") {
      json = true;
    } else {
      std::fprintf(stderr,
                   "%s: unknown flag (--jobs N --samples M --start-spread S "
                   "--db URI --json)\n",
                   a.c_str());
      return 2;
    }
  }
  if (jobs < 1 || jobs > 180 || samples < 1 || !(spread >= 0) ||
      spread > 3600) {
    std::fprintf(stderr,
                 "--jobs must be 1-180, --samples at least 1 and "
                 "--start-spread 0-3600 seconds\n");
    return 2;
  }
  std::unique_ptr<hvdtune::store::testing::PgServer> server;
  if (uri.empty()) {
    namespace pgt = hvdtune::store::testing;
    std::string why = pgt::PgServer::MissingReason();
    if (why.empty()) {
      try {
        server = std::make_unique<pgt::PgServer>(
            std::vector<std::string>{"fsync=on"});
        uri = server->CreateDatabase("bench");
      } catch (const std::exception& e) {
        why = e.what();
      }
    }
    // Exit 77 is CTest's SKIP_RETURN_CODE; where PostgreSQL is required
    // (HVDTUNE_REQUIRE_POSTGRES=1) a server that cannot start fails.
    if (!why.empty() && pgt::PostgresRequired()) {
      std::fprintf(stderr, "%s\n", pgt::NoServerFailure(why).c_str());
      return 1;
    }
    if (!why.empty()) {
      std::fprintf(stderr, "%s%s\n", pgt::kNoServerSkip, why.c_str());
      return 77;
    }
  }
  { Store s({uri}); }  // migrated once; the jobs race on rows only

  std::vector<pid_t> pids;
  std::vector<int> fds;
  const auto start = Clock::now();
  for (int j = 0; j < jobs; ++j) {
    int p[2];
    if (pipe(p) != 0) return 1;
    const pid_t pid = fork();
    if (pid == 0) {
      close(p[0]);
      int rc = 1;
      try {
        std::this_thread::sleep_until(
            start + std::chrono::duration_cast<Clock::duration>(
                        std::chrono::duration<double>(spread * j / jobs)));
        rc = Job(uri, j, samples, p[1], start);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "job %d: %s\n", j, e.what());
      }
      _exit(rc);
    }
    close(p[1]);
    pids.push_back(pid);
    fds.push_back(p[0]);
  }
  std::vector<double> connects, lookups, writes;
  std::vector<std::pair<double, int>> spans;  // (time, +1 start / -1 end)
  int failed = 0;
  for (int j = 0; j < jobs; ++j) {
    std::vector<double> t(static_cast<std::size_t>(samples) + 4);
    char* at = reinterpret_cast<char*>(t.data());
    std::size_t left = t.size() * sizeof(double);
    while (left > 0) {
      const ssize_t n = read(fds[static_cast<std::size_t>(j)], at, left);
      if (n <= 0) break;
      at += n;
      left -= static_cast<std::size_t>(n);
    }
    close(fds[static_cast<std::size_t>(j)]);
    int status = 0;
    waitpid(pids[static_cast<std::size_t>(j)], &status, 0);
    if (left != 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      ++failed;
      continue;
    }
    spans.emplace_back(t[0], 1);
    spans.emplace_back(t[1], -1);
    connects.push_back(t[2]);
    lookups.push_back(t[3]);
    writes.insert(writes.end(), t.begin() + 4, t.end());
  }
  std::sort(spans.begin(), spans.end());  // an end before a start at a tie
  int running = 0, peak = 0;
  for (const auto& [time, delta] : spans) {
    running += delta;
    peak = std::max(peak, running);
  }
  const double wall = Ms(Clock::now() - start) / 1000;

  // Every row: samples and their values, runs completed.
  Store s({uri});
  std::int64_t rows = 0, values = 0, completed = 0;
  for (const auto& pair : s.ListPairs()) {
    for (const auto& run : s.PairRuns(pair.hardware, pair.model)) {
      if (run.version != "bench") continue;
      completed += run.status == "completed";
      for (const auto& x : s.RunSamples(run.id)) {
        ++rows;
        values += static_cast<std::int64_t>(x.values.size());
      }
    }
  }
  const std::int64_t want = static_cast<std::int64_t>(jobs) * samples;
  const std::int64_t lost = want - rows;
  if (json) {
    std::printf(
        "{\"jobs\": %d, \"samples_per_job\": %d, \"rows\": %lld, "
        "\"lost\": %lld, \"values\": %lld, \"runs_completed\": %lld, "
        "\"failed_jobs\": %d, \"start_spread_seconds\": %g, "
        "\"peak_concurrent_jobs\": %d, \"wall_seconds\": %.2f, "
        "\"connect_ms\": {\"median\": %.2f, \"p99\": %.2f}, "
        "\"lookup_ms\": {\"median\": %.2f, \"p99\": %.2f}, "
        "\"write_ms\": {\"median\": %.3f, \"p99\": %.3f}}\n",
        jobs, samples, static_cast<long long>(rows),
        static_cast<long long>(lost), static_cast<long long>(values),
        static_cast<long long>(completed), failed, spread, peak, wall,
        Quantile(connects, 0.5), Quantile(connects, 0.99),
        Quantile(lookups, 0.5), Quantile(lookups, 0.99), Quantile(writes, 0.5),
        Quantile(writes, 0.99));
  } else {
    std::printf(
        "%d jobs x %d samples into %s in %.1f s: %lld rows, %lld lost, %d "
        "jobs failed, %d at once at the peak (started over %g s)\n"
        "connection (login): median %.2f ms, p99 %.2f ms\n"
        "start-up lookup: median %.2f ms, p99 %.2f ms\n"
        "sample write: median %.3f ms, p99 %.3f ms\n",
        jobs, samples, s.path().c_str(), wall, static_cast<long long>(rows),
        static_cast<long long>(lost), failed, peak, spread,
        Quantile(connects, 0.5), Quantile(connects, 0.99),
        Quantile(lookups, 0.5), Quantile(lookups, 0.99), Quantile(writes, 0.5),
        Quantile(writes, 0.99));
  }
  return lost == 0 && failed == 0 && values == rows * 5 && completed == jobs
             ? 0
             : 1;
}
