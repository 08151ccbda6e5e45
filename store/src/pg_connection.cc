#include "pg_connection.h"

#include <poll.h>
#include <sys/socket.h>

#include <charconv>
#include <chrono>
#include <cstring>
#include <limits>

#include "pg_backend.h"

namespace hvdtune::store::internal {
namespace {

struct ConninfoFree {
  void operator()(PQconninfoOption* o) const { PQconninfoFree(o); }
};

}  // namespace

std::string UriPassword(const std::string& uri) {
  char* err = nullptr;
  std::unique_ptr<PQconninfoOption, ConninfoFree> opts(
      PQconninfoParse(uri.c_str(), &err));
  PQfreemem(err);
  if (!opts) return {};
  for (PQconninfoOption* o = opts.get(); o->keyword; ++o) {
    if (std::strcmp(o->keyword, "password") == 0 && o->val) return o->val;
  }
  return {};
}

std::string Scrub(std::string text, const std::string& secret) {
  if (secret.empty()) return text;
  for (std::size_t at = text.find(secret); at != std::string::npos;
       at = text.find(secret, at)) {
    text.replace(at, secret.size(), "***");
    at += 3;
  }
  return text;
}

std::string Trimmed(const char* message) {
  std::string s = message ? message : "";
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  for (char& c : s) {
    if (c == '\n') c = ' ';
  }
  return s;
}

std::int64_t ToInt(const char* s) {
  std::int64_t v = 0;
  std::from_chars(s, s + std::strlen(s), v);
  return v;
}

double ToReal(const char* s) {
  double v = 0;
  std::string_view sv(s);
  // from_chars takes "inf" and "nan" but no sign on them; the server
  // writes Infinity, -Infinity, NaN.
  if (sv == "-Infinity") return -std::numeric_limits<double>::infinity();
  std::from_chars(sv.data(), sv.data() + sv.size(), v);
  return v;
}

std::string PgDisplayName(const std::string& uri) {
  char* err = nullptr;
  std::unique_ptr<PQconninfoOption, ConninfoFree> opts(
      PQconninfoParse(uri.c_str(), &err));
  PQfreemem(err);
  if (!opts) return "postgresql://(invalid URI)";
  std::string user, host, port, db;
  for (PQconninfoOption* o = opts.get(); o->keyword; ++o) {
    if (!o->val) continue;
    const std::string_view k(o->keyword);
    if (k == "user") user = o->val;
    if (k == "host" || (k == "hostaddr" && host.empty())) host = o->val;
    if (k == "port") port = o->val;
    if (k == "dbname") db = o->val;
  }
  std::string out = "postgresql://";
  if (!user.empty()) out += user + "@";
  out += host;
  if (!port.empty()) out += ":" + port;
  out += "/" + db;
  return out;
}

[[noreturn]] void PgConnection::Fail(std::string_view what,
                                     const PGresult* r) const {
  std::string msg = "config store " + name_ + ": " + std::string(what) + ": " +
                    Trimmed(PQerrorMessage(conn_));
  msg = Scrub(std::move(msg), secret_);
  const char* state = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : nullptr;
  const std::string_view code = state ? state : "";
  // Connection exceptions (08), the server shutting down or starting
  // (57P01-57P03), and the transaction rollbacks worth retrying (40).
  if (PQstatus(conn_) != CONNECTION_OK || code.starts_with("08") ||
      code.starts_with("57P") || code.starts_with("40")) {
    throw StoreUnavailable(msg);
  }
  throw StoreError(msg);
}

Result PgConnection::Exec(const char* sql, const Params& params) const {
  const std::vector<const char*> values = params.Pointers();
  if (!PQsendQueryParams(conn_, sql, params.size(), nullptr, values.data(),
                         nullptr, nullptr, 0)) {
    Fail("sending '" + std::string(sql).substr(0, 40) + "'", nullptr);
  }
  Result r = Await(sql);
  const auto status = r ? PQresultStatus(r.get()) : PGRES_FATAL_ERROR;
  if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) {
    Fail("executing '" + std::string(sql).substr(0, 40) + "'", r.get());
  }
  return r;
}

void PgConnection::Script(const char* sql) const {
  if (!PQsendQuery(conn_, sql)) Fail("sending a migration", nullptr);
  Result r = Await(sql);
  if (!r || PQresultStatus(r.get()) != PGRES_COMMAND_OK) {
    Fail("migrating", r.get());
  }
}

Result PgConnection::Await(const char* sql) const {
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms_);
  auto wait = [&](short events) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    pollfd p{PQsocket(conn_), events, 0};
    return left.count() > 0 && poll(&p, 1, static_cast<int>(left.count())) > 0;
  };
  auto timed_out = [&] {
    shutdown(PQsocket(conn_), SHUT_RDWR);
    throw StoreUnavailable("config store " + name_ +
                           ": no answer from the server within " +
                           std::to_string(timeout_ms_ / 1000.0).substr(0, 4) +
                           " s to '" + std::string(sql).substr(0, 40) + "'");
  };
  while (PQflush(conn_) == 1) {
    if (!wait(POLLOUT | POLLIN)) timed_out();
  }
  Result kept;
  while (true) {
    while (PQisBusy(conn_)) {
      if (!wait(POLLIN)) timed_out();
      if (!PQconsumeInput(conn_)) break;
    }
    PGresult* r = PQgetResult(conn_);
    if (r == nullptr) break;
    const auto status = PQresultStatus(r);
    const bool error = status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK;
    const bool kept_error = kept &&
                            PQresultStatus(kept.get()) != PGRES_COMMAND_OK &&
                            PQresultStatus(kept.get()) != PGRES_TUPLES_OK;
    if (kept_error && !error) {
      PQclear(r);
    } else {
      kept.reset(r);
    }
    if (PQstatus(conn_) == CONNECTION_BAD) break;
  }
  return kept;
}

const char* Get(const Result& r, int row, int col) {
  return PQgetvalue(r.get(), row, col);
}
bool IsNull(const Result& r, int row, int col) {
  return PQgetisnull(r.get(), row, col) != 0;
}
KnobValue ValueAt(const Result& r, int row, int col) {
  if (!IsNull(r, row, col)) return ToInt(Get(r, row, col));
  if (!IsNull(r, row, col + 1)) return ToReal(Get(r, row, col + 1));
  return std::string(Get(r, row, col + 2));
}

}  // namespace hvdtune::store::internal
