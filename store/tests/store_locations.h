// Fresh store locations for the tests that run on both backends: an SQLite
// file in a scratch directory, or a new database on one PostgreSQL server
// per test process (started on first use).
#pragma once

#include <gtest/gtest.h>
#include <libpq-fe.h>
#include <sqlite3.h>

#include <atomic>
#include <memory>
#include <string>

#include "pg_server.h"
#include "store_test_util.h"

namespace hvdtune::store::testing {

/// The process's server; null (with `reason`) where none can run.
inline PgServer* SharedPgServer(std::string* reason) {
  static std::unique_ptr<PgServer> server;
  static std::string why = PgServer::MissingReason();
  if (!server && why.empty()) {
    try {
      server = std::make_unique<PgServer>();
    } catch (const std::exception& e) {
      why = e.what();
    }
  }
  if (reason) *reason = why;
  return server.get();
}

/// Where a test's stores live, for one backend ("sqlite" or "postgresql").
class Locations {
 public:
  explicit Locations(std::string backend) : backend_(std::move(backend)) {}

  /// True (with the reason in skip_reason()) when the backend cannot run;
  /// the test then ends with HVDTUNE_NO_PG_SERVER(skip_reason()).
  bool Unavailable() {
    if (backend_ != "postgresql") return false;
    return SharedPgServer(&reason_) == nullptr;
  }
  const std::string& skip_reason() const { return reason_; }

  /// A new, empty location (`name` tells files apart; every call on the
  /// server is a new database).
  std::string Fresh(const std::string& name = "store.db") {
    if (backend_ == "sqlite") return dir_.File(name);
    static std::atomic<int> n{0};
    const std::string db =
        "t" + std::to_string(getpid()) + "_" + std::to_string(n++);
    return SharedPgServer(nullptr)->CreateDatabase(db);
  }

  /// Runs raw SQL against a location (what an older build or another tool
  /// would have written); throws on failure.
  void Exec(const std::string& location, const std::string& sql) {
    if (backend_ == "sqlite") {
      sqlite3* db = nullptr;
      sqlite3_open(location.c_str(), &db);
      char* err = nullptr;
      const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err);
      std::string msg = err ? err : "";
      sqlite3_free(err);
      sqlite3_close(db);
      if (rc != SQLITE_OK) throw std::runtime_error(sql + ": " + msg);
      return;
    }
    PGconn* c = PQconnectdb(location.c_str());
    PGresult* r = PQexec(c, sql.c_str());
    const auto st = PQresultStatus(r);
    std::string msg = PQerrorMessage(c);
    PQclear(r);
    PQfinish(c);
    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
      throw std::runtime_error(sql + ": " + msg);
    }
  }

 private:
  std::string backend_;
  std::string reason_;
  ScratchDir dir_;
};

inline std::string BackendName(
    const ::testing::TestParamInfo<std::string>& info) {
  return info.param;
}

}  // namespace hvdtune::store::testing
