// The PostgreSQL backend's own cases on a real server: what a URI shows,
// refused logins, an unreachable server, a schema newer than this build or
// not ours, 16 concurrent writer processes, and the writer thread across a
// server killed and restarted.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "hvdtune/store/store.h"
#include "hvdtune/store/writer.h"
#include "store_locations.h"

namespace hvdtune::store {
namespace {

using testing::Locations;
using testing::MakeSample;
using testing::PgServer;
using testing::SharedPgServer;
using testing::TestHardware;

class StorePgTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (where_.Unavailable()) HVDTUNE_NO_PG_SERVER(where_.skip_reason());
    server_ = SharedPgServer(nullptr);
  }
  // A URI's one-row, one-column answer.
  std::string One(const std::string& uri, const std::string& sql) {
    PGconn* c = PQconnectdb(uri.c_str());
    PGresult* r = PQexec(c, sql.c_str());
    std::string out = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r)
                          ? PQgetvalue(r, 0, 0)
                          : "error: " + std::string(PQerrorMessage(c));
    PQclear(r);
    PQfinish(c);
    return out;
  }
  Locations where_{"postgresql"};
  PgServer* server_ = nullptr;
};

TEST(StorePgLocationTest, DisplayedLocationNeverHasThePassword) {
  EXPECT_EQ(DisplayLocation("postgresql://job:pw@db.example:5433/tune?"
                            "sslmode=require&password=other"),
            "postgresql://job@db.example:5433/tune");
  EXPECT_EQ(DisplayLocation("/var/lib/x/store.db"), "/var/lib/x/store.db");
  EXPECT_TRUE(IsServerLocation("postgres://h/db"));
  EXPECT_FALSE(IsServerLocation("postgresql.db"));
}

TEST_F(StorePgTest, RefusedLoginIsUnavailableNamesTheServerNotThePassword) {
  const std::string uri = where_.Fresh();
  { Store s({uri}); }
  const std::string db = uri.substr(uri.rfind('/') + 1);
  const std::string bad = server_->Uri(db, "postgres", "wrong-Pa55word");
  try {
    Store s({bad});
    FAIL() << "a wrong password was accepted";
  } catch (const StoreUnavailable& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("postgresql://postgres@127.0.0.1:" +
                        std::to_string(server_->port()) + "/" + db),
              std::string::npos)
        << what;
    EXPECT_NE(what.find("password authentication failed"), std::string::npos)
        << what;
    EXPECT_EQ(what.find("wrong-Pa55word"), std::string::npos) << what;
    EXPECT_EQ(what.find(PgServer::kPassword), std::string::npos) << what;
  }
}

TEST_F(StorePgTest, UnreachableServerIsUnavailableWithinTheConnectTimeout) {
  const auto start = std::chrono::steady_clock::now();
  // Port 1 on loopback: nothing listens (connection refused at once).
  EXPECT_THROW(Store({"postgresql://job:pw@127.0.0.1:1/x"}), StoreUnavailable);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(6));
}

TEST_F(StorePgTest, NewerSchemaIsRefusedAndLeftAsItWas) {
  const std::string uri = where_.Fresh();
  { Store s({uri}); }
  where_.Exec(uri, "UPDATE hvdtune_schema SET version = 99");
  try {
    Store s({uri});
    FAIL() << "a newer schema was opened";
  } catch (const StoreUnavailable&) {
    FAIL() << "a newer schema is not worth retrying";
  } catch (const StoreError& e) {
    EXPECT_NE(std::string(e.what()).find("schema version 99 is newer"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(One(uri, "SELECT version FROM hvdtune_schema"), "99");
}

TEST_F(StorePgTest, UnexpectedSchemaFailsWholeAndChangesNothing) {
  const std::string uri = where_.Fresh();
  // Somebody else's table of the same name, and no version table.
  where_.Exec(uri, "CREATE TABLE runs(whatever TEXT)");
  EXPECT_THROW(Store({uri}), StoreError);
  EXPECT_EQ(One(uri,
                "SELECT to_regclass('hvdtune_schema') IS NULL AND "
                "to_regclass('fingerprints') IS NULL"),
            "t");
}

// 16 processes, each its own connection: every sample lands, fingerprints
// are shared, and the pair's best is always one writer's whole
// configuration.
TEST_F(StorePgTest, SixteenProcessesWriteWithoutLossAndOneBestWins) {
  const std::string uri = where_.Fresh();
  { Store s({uri}); }
  constexpr int kProcs = 16, kSamples = 25;
  std::vector<pid_t> pids;
  for (int p = 0; p < kProcs; ++p) {
    const pid_t pid = fork();
    if (pid == 0) {
      int rc = 1;
      try {
        Store s({uri});
        const auto hw = s.PutFingerprint("hardware", TestHardware(p % 3 + 1));
        const auto model =
            s.PutFingerprint("model", ModelFingerprint({{"float32", 100}}));
        const auto shared_hw = s.PutFingerprint("hardware", TestHardware(1));
        const auto run = s.BeginRun(hw, model, "0.1.0", "fresh", p);
        for (int i = 1; i <= kSamples; ++i) {
          s.AddSamples(run, {MakeSample(i, p * 1000.0 + i)});
          KnobValues v{{"writer", std::int64_t{p}},
                       {"copy", std::int64_t{p}},
                       {"text", "w" + std::to_string(p)}};
          s.SetBest(shared_hw, model, {v, 1.0 * p, run, 1.0 * i});
        }
        s.EndRun(run, "completed", 1);
        rc = 0;
      } catch (const std::exception& e) {
        std::fprintf(stderr, "child %d: %s\n", p, e.what());
      }
      _exit(rc);
    }
    pids.push_back(pid);
  }
  for (pid_t pid : pids) {
    int status = 0;
    waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  Store s({uri});
  EXPECT_EQ(s.IntegrityCheck(), "ok");
  EXPECT_EQ(One(uri, "SELECT COUNT(*) FROM samples"),
            std::to_string(kProcs * kSamples));
  EXPECT_EQ(One(uri, "SELECT COUNT(*) FROM sample_values"),
            std::to_string(kProcs * kSamples * 3));
  EXPECT_EQ(One(uri, "SELECT COUNT(*) FROM runs WHERE status = 'completed'"),
            std::to_string(kProcs));
  EXPECT_EQ(One(uri, "SELECT COUNT(*) FROM fingerprints"), "4");
  const auto hw = s.FindFingerprint("hardware", TestHardware(1).Hash());
  const auto model =
      s.FindFingerprint("model", ModelFingerprint({{"float32", 100}}).Hash());
  ASSERT_TRUE(hw && model);
  const auto best = s.GetBest(*hw, *model);
  ASSERT_TRUE(best);
  ASSERT_EQ(best->values.size(), 3u);
  const auto writer = std::get<std::int64_t>(best->values.at("writer"));
  EXPECT_EQ(std::get<std::int64_t>(best->values.at("copy")), writer);
  EXPECT_EQ(std::get<std::string>(best->values.at("text")),
            "w" + std::to_string(writer));
  EXPECT_EQ(best->score, 1.0 * writer);
  EXPECT_EQ(best->time, kSamples);
}

// The roles docs/config-store.md documents: an owner migrates; a job's
// role records and reads but cannot change the schema (and says so when it
// would have to migrate); a reader only reads.
TEST_F(StorePgTest, LeastPrivilegeRolesDoWhatTheDocsSay) {
  const std::string uri = where_.Fresh();
  const std::string db = uri.substr(uri.rfind('/') + 1);
  const std::string suffix = db;  // roles are per cluster: one set per test
  const std::string job = "job_" + suffix, reader = "reader_" + suffix;
  where_.Exec(uri, "CREATE ROLE " + job + " LOGIN PASSWORD 'job-pw'");
  where_.Exec(uri, "CREATE ROLE " + reader + " LOGIN PASSWORD 'reader-pw'");
  where_.Exec(uri,
              "GRANT CONNECT ON DATABASE " + db + " TO " + job + ", " + reader);
  // Before the owner migrated: the job's role cannot create the tables.
  try {
    Store s({server_->Uri(db, job, "job-pw")});
    FAIL() << "a job role migrated";
  } catch (const StoreUnavailable& e) {
    FAIL() << "not worth retrying: " << e.what();
  } catch (const StoreError& e) {
    EXPECT_NE(std::string(e.what()).find("permission denied"),
              std::string::npos)
        << e.what();
  }
  { Store owner({uri}); }  // the owner migrates
  where_.Exec(
      uri, "GRANT USAGE ON SCHEMA public TO " + job + ", " + reader + ";" +
               "GRANT SELECT ON hvdtune_schema TO " + job + ";" +
               "GRANT SELECT, INSERT ON fingerprints, samples, "
               "sample_values TO " +
               job + ";" + "GRANT SELECT, INSERT, UPDATE ON runs, best TO " +
               job + ";" + "GRANT SELECT, INSERT, DELETE ON best_values TO " +
               job + ";" + "GRANT SELECT ON ALL TABLES IN SCHEMA public TO " +
               reader);
  std::int64_t hw = 0, model = 0;
  {
    Store s({server_->Uri(db, job, "job-pw")});
    hw = s.PutFingerprint("hardware", TestHardware());
    model = s.PutFingerprint("model", testing::TestModel());
    const auto run = s.BeginRun(hw, model, "0.1.0", "fresh", 1);
    s.AddSamples(run, {MakeSample(1, 1), MakeSample(2, 2)});
    s.SetBest(hw, model, {MakeSample(2, 2).values, 2, run, 3});
    s.SetBest(hw, model, {MakeSample(1, 1).values, 1, run, 4});
    s.EndRun(run, "completed", 5);
    ASSERT_EQ(s.Dump().size(), 1u);
    // What `hvd-tune import` does, with the same role.
    EXPECT_EQ(s.Merge(s.Dump(), false).samples_present, 2);
    EXPECT_THROW(
        where_.Exec(server_->Uri(db, job, "job-pw"), "DROP TABLE samples"),
        std::runtime_error);
  }
  StoreOptions read_only{server_->Uri(db, reader, "reader-pw")};
  read_only.read_only = true;
  Store r(read_only);
  EXPECT_EQ(r.GetBest(hw, model)->score, 1);
  EXPECT_EQ(r.ListPairs().size(), 1u);
  EXPECT_THROW(r.PutFingerprint("hardware", TestHardware(8)), StoreError);
}

// Every SQL query of the fleet dashboard (dashboard/hvdtune_fleet.json)
// runs, as the documented read-only role, against a store that jobs wrote,
// and returns rows; the gain over the default is what the samples say.
TEST_F(StorePgTest, FleetDashboardQueriesRunAsTheReaderRole) {
  const std::string uri = where_.Fresh();
  const std::string db = uri.substr(uri.rfind('/') + 1);
  {
    Store s({uri});
    const auto hw = s.PutFingerprint("hardware", TestHardware());
    const auto model = s.PutFingerprint("model", testing::TestModel());
    const double now = 1.7e9;
    const auto run = s.BeginRun(hw, model, "0.1.0", "fresh", now);
    Sample warm1 = MakeSample(1, 1e9), warm2 = MakeSample(2, 1e9);
    warm1.phase = warm2.phase = "warmup";
    Sample best = MakeSample(3, 2e9);
    best.phase = "frozen";
    s.AddSamples(run, {warm1, warm2, MakeSample(3, 1.5e9), best});
    s.SetBest(hw, model, {best.values, 2e9, run, now + 10});
    s.EndRun(run, "completed", now + 20);
    const auto second = s.BeginRun(hw, model, "0.1.0", "store", now + 30);
    Sample confirm = best;  // a warm start's warm-up runs the stored best
    confirm.phase = "warmup";
    s.AddSamples(second, {confirm, best});
    s.EndRun(second, "completed", now + 40);
  }
  const std::string reader = "dash_" + db;
  where_.Exec(uri, "CREATE ROLE " + reader + " LOGIN PASSWORD 'dash-pw';" +
                       "GRANT CONNECT ON DATABASE " + db + " TO " + reader +
                       ";" + "GRANT USAGE ON SCHEMA public TO " + reader + ";" +
                       "GRANT SELECT ON ALL TABLES IN SCHEMA public TO " +
                       reader);
  std::ifstream in(std::string(HVDTUNE_SOURCE_DIR) +
                   "/dashboard/hvdtune_fleet.json");
  const nlohmann::json dash = nlohmann::json::parse(in);
  PGconn* c = PQconnectdb(server_->Uri(db, reader, "dash-pw").c_str());
  ASSERT_EQ(PQstatus(c), CONNECTION_OK) << PQerrorMessage(c);
  int queries = 0;
  for (const auto& panel : dash.at("panels")) {
    EXPECT_EQ(panel.at("datasource").at("type"),
              "grafana-postgresql-datasource");
    for (const auto& target : panel.at("targets")) {
      std::string sql = target.at("rawSql");
      // Grafana's macros, as it expands them for a range of all time.
      for (const auto& [macro, value] :
           {std::pair{"$__unixEpochFrom()", "0"},
            std::pair{"$__unixEpochTo()", "4102444800"}}) {
        for (auto at = sql.find(macro); at != std::string::npos;
             at = sql.find(macro)) {
          sql.replace(at, std::string(macro).size(), value);
        }
      }
      ASSERT_EQ(sql.find("$__"), std::string::npos) << sql;
      PGresult* r = PQexec(c, sql.c_str());
      ++queries;
      EXPECT_EQ(PQresultStatus(r), PGRES_TUPLES_OK)
          << panel.at("title") << ": " << PQerrorMessage(c);
      EXPECT_GE(PQntuples(r), 1) << panel.at("title");
      const int gain = PQfnumber(r, "gain");
      if (gain >= 0 && PQntuples(r) > 0) {
        EXPECT_DOUBLE_EQ(std::stod(PQgetvalue(r, 0, gain)), 1.0);
        const std::string config =
            PQgetvalue(r, 0, PQfnumber(r, "best_configuration"));
        EXPECT_NE(config.find("allreduce_algorithm=ring"), std::string::npos)
            << config;
      }
      const int samples = PQfnumber(r, "samples");
      if (std::string(panel.at("title")) == "Store contents") {
        EXPECT_EQ(std::string(PQgetvalue(r, 0, samples)), "6");
      }
      PQclear(r);
    }
  }
  PQfinish(c);
  EXPECT_EQ(queries, 5);
}

// The writer thread across an outage: the server killed mid-job and
// restarted; then killed for good. Each outage warns once, naming the
// server and never the password; every write is written or dropped, and
// counted.
TEST_F(StorePgTest, WriterReconnectsAfterAKillAndCountsWhatItDrops) {
  const std::string uri = where_.Fresh();
  std::int64_t run = 0;
  {
    Store s({uri});
    const auto hw = s.PutFingerprint("hardware", TestHardware());
    const auto model = s.PutFingerprint("model", testing::TestModel());
    run = s.BeginRun(hw, model, "0.1.0", "fresh", 1);
  }
  struct Restart {  // the shared server runs again whatever happens here
    PgServer* server;
    ~Restart() {
      if (!server->running()) server->Start();
    }
  } restart{server_};
  std::mutex mu;
  std::vector<std::string> warnings, notices;
  std::atomic<std::uint64_t> counted_written{0}, counted_dropped{0};
  WriterOptions options;
  options.open = [uri] { return std::make_unique<Store>(StoreOptions{uri}); };
  options.first_delay_seconds = 0.05;
  options.max_delay_seconds = 0.2;
  options.notice = [&](const std::string& w) {
    std::lock_guard<std::mutex> lock(mu);
    notices.push_back(w);
  };
  options.count = [&](const char* result, std::uint64_t n) {
    if (std::string_view(result) == "written") counted_written += n;
    if (std::string_view(result) == "dropped") counted_dropped += n;
  };
  auto writer = std::make_unique<Writer>(
      std::make_unique<Store>(StoreOptions{uri}), 100000,
      [&](const std::string& w) {
        std::lock_guard<std::mutex> lock(mu);
        warnings.push_back(w);
      },
      options);
  auto push = [&](int from, int to) {
    for (int i = from; i < to; ++i) {
      writer->Push(
          [run, i](Store& s) { s.AddSamples(run, {MakeSample(i, i)}); });
    }
  };
  push(0, 200);
  while (writer->written() < 50) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  server_->Kill();
  push(200, 400);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  server_->Start();
  writer->Finish(30);
  EXPECT_EQ(writer->written(), 400u);
  EXPECT_EQ(writer->dropped(), 0u);
  EXPECT_GE(writer->reconnects(), 1u);
  EXPECT_EQ(counted_written.load(), 400u);
  {
    Store s({uri});
    std::set<int> present;
    for (const Sample& x : s.RunSamples(run)) present.insert(x.index);
    EXPECT_EQ(present.size(), 400u) << "rows lost across the restart";
    EXPECT_EQ(s.RunSamples(run).size(), 400u);
  }
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find(DisplayLocation(uri)), std::string::npos)
      << warnings[0];
  EXPECT_EQ(warnings[0].find(PgServer::kPassword), std::string::npos);
  ASSERT_EQ(notices.size(), 1u);
  EXPECT_NE(notices[0].find("is back"), std::string::npos) << notices[0];

  // Killed for good: what was queued is dropped at Finish, and counted.
  warnings.clear();
  counted_dropped = 0;
  counted_written = 0;
  writer = std::make_unique<Writer>(
      std::make_unique<Store>(StoreOptions{uri}), 100000,
      [&](const std::string& w) {
        std::lock_guard<std::mutex> lock(mu);
        warnings.push_back(w);
      },
      options);
  push(1000, 1100);
  while (writer->written() < 100) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  server_->Kill();
  push(1100, 1150);
  writer->Finish(1);
  EXPECT_EQ(writer->written(), 100u);
  EXPECT_EQ(writer->dropped(), 50u);
  EXPECT_EQ(counted_dropped.load(), 50u);
  EXPECT_EQ(warnings.size(), 1u);
  server_->Start();
  Store s({uri});
  EXPECT_EQ(s.RunSamples(run).size(), 500u);
}

// A write that reached the server and committed, but whose answer was lost
// (the client gave the silent connection up): the writer writes it again
// once the server answers, and the sample is stored once. Written counts
// each sample once; one warning for the outage.
TEST_F(StorePgTest, AWriteRetriedAfterItsAnswerWasLostIsStoredOnce) {
  const std::string uri = where_.Fresh();
  std::int64_t run = 0;
  {
    Store s({uri});
    run = s.BeginRun(s.PutFingerprint("hardware", TestHardware()),
                     s.PutFingerprint("model", testing::TestModel()), "0.1.0",
                     "fresh", 1);
  }
  // The first sample inserted commits 1.5 s late: after the client, which
  // waits 0.5 s for an answer, has given its connection up.
  where_.Exec(uri, R"sql(
CREATE TABLE slow_once(x INTEGER);
INSERT INTO slow_once VALUES(1);
CREATE FUNCTION slow_once() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM slow_once;
  IF FOUND THEN PERFORM pg_sleep(1.5); END IF;
  RETURN NULL;
END $$;
CREATE TRIGGER slow_once AFTER INSERT ON samples FOR EACH ROW
  EXECUTE FUNCTION slow_once();
)sql");
  StoreOptions options{uri};
  options.server_timeout_ms = 500;
  std::mutex mu;
  std::vector<std::string> warnings, notices;
  std::atomic<std::uint64_t> counted_written{0};
  WriterOptions reconnect;
  // The server answers again once the lost write has committed (seen from
  // another connection), so that the retry meets the committed row.
  reconnect.open = [&, options] {
    while (One(uri, "SELECT COUNT(*) FROM slow_once") != "0") {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return std::make_unique<Store>(options);
  };
  reconnect.notice = [&](const std::string& w) {
    std::lock_guard<std::mutex> lock(mu);
    notices.push_back(w);
  };
  reconnect.count = [&](const char* result, std::uint64_t n) {
    if (std::string_view(result) == "written") counted_written += n;
  };
  Writer writer(
      std::make_unique<Store>(options), 1000,
      [&](const std::string& w) {
        std::lock_guard<std::mutex> lock(mu);
        warnings.push_back(w);
      },
      reconnect);
  for (int i = 1; i <= 20; ++i) {
    writer.Push([run, i](Store& s) { s.AddSamples(run, {MakeSample(i, i)}); });
  }
  writer.Finish(30);
  EXPECT_EQ(writer.written(), 20u);
  EXPECT_EQ(counted_written.load(), 20u);
  EXPECT_EQ(writer.dropped(), 0u);
  EXPECT_EQ(writer.failed(), 0u);
  EXPECT_EQ(writer.reconnects(), 1u);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("no answer from the server"), std::string::npos)
      << warnings[0];
  EXPECT_EQ(notices.size(), 1u);
  Store s({uri});
  const auto samples = s.RunSamples(run);
  ASSERT_EQ(samples.size(), 20u) << "the retried write was stored twice";
  for (int i = 0; i < 20; ++i) EXPECT_EQ(samples[i].index, i + 1);
  EXPECT_EQ(One(uri, "SELECT COUNT(*) FROM sample_values"), "60");
}

// A server that stops answering (SIGSTOP: what a network partition looks
// like to the client, the connection neither closes nor answers) and comes
// back: the writer gives up on the silent connection after the timeout,
// warns once, queues, and writes everything once the server answers again.
TEST_F(StorePgTest, WriterSurvivesAServerThatStopsAnsweringAndComesBack) {
  const std::string uri = where_.Fresh() + "?connect_timeout=2";
  std::int64_t run = 0;
  {
    Store s({uri});
    run = s.BeginRun(s.PutFingerprint("hardware", TestHardware()),
                     s.PutFingerprint("model", testing::TestModel()), "0.1.0",
                     "fresh", 1);
  }
  struct Resume {  // the shared server answers again whatever happens here
    PgServer* server;
    ~Resume() { server->Resume(); }
  } resume{server_};
  StoreOptions options{uri};
  options.server_timeout_ms = 500;
  std::atomic<int> warnings{0};
  WriterOptions reconnect;
  reconnect.open = [options] { return std::make_unique<Store>(options); };
  reconnect.first_delay_seconds = 0.05;
  reconnect.max_delay_seconds = 0.2;
  Writer writer(
      std::make_unique<Store>(options), 100000,
      [&](const std::string& w) {
        ++warnings;
        EXPECT_NE(w.find("postgresql://postgres@"), std::string::npos) << w;
      },
      reconnect);
  for (int i = 0; i < 300; ++i) {
    if (i == 100) {
      while (writer.written() < 50) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
      server_->Pause();
    }
    writer.Push([run, i](Store& s) { s.AddSamples(run, {MakeSample(i, i)}); });
  }
  const auto paused = std::chrono::steady_clock::now();
  while (warnings.load() == 0 &&
         std::chrono::steady_clock::now() - paused < std::chrono::seconds(5)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(warnings.load(), 1) << "the silent server was not noticed";
  server_->Resume();
  writer.Finish(30);
  EXPECT_EQ(writer.written(), 300u);
  EXPECT_EQ(writer.dropped(), 0u);
  EXPECT_EQ(warnings.load(), 1);
  Store s({uri});
  std::set<int> present;
  for (const Sample& x : s.RunSamples(run)) present.insert(x.index);
  EXPECT_EQ(present.size(), 300u) << "rows lost across the partition";
  EXPECT_EQ(s.RunSamples(run).size(), 300u) << "a retried write stored twice";
}

}  // namespace
}  // namespace hvdtune::store
