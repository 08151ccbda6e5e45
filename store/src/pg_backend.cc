// The PostgreSQL backend. The schema is the SQLite one, table for table and
// column for column, except that a knob value (untyped in SQLite) is three
// typed columns of which exactly one is set: int_value, real_value,
// text_value. The version is the one row of hvdtune_schema.
//
// Concurrency (many jobs, many hosts): every write is one transaction at
// READ COMMITTED, and every row a write depends on is either its own insert
// or taken by an upsert, so no row is lost and no transaction has to be
// retried:
// - fingerprints: INSERT ... ON CONFLICT (kind, hash) DO NOTHING, then a
//   fresh-snapshot SELECT: two jobs inserting one fingerprint share one id.
// - runs, samples and their values: plain inserts with generated ids.
// - best per pair: INSERT ... ON CONFLICT (hardware_id, model_id) DO UPDATE
//   first, which locks the pair's best row until commit; only then are its
//   best_values replaced. Writers of one pair are serialised on that row,
//   so a reader sees one writer's configuration whole (the last to commit
//   wins, as in SQLite); Merge's "higher score wins" reads the score under
//   the same lock (SELECT ... FOR UPDATE).
// - migrations: under a transaction-scoped advisory lock, the version
//   re-read inside it, so concurrent first starts migrate once.
#include "pg_backend.h"

#include <libpq-fe.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <string_view>

namespace hvdtune::store::internal {
namespace {

constexpr std::int64_t kMigrationLock = 0x6876647475;  // "hvdtu"

double Now() {
  return std::chrono::duration<double>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

struct ConninfoFree {
  void operator()(PQconninfoOption* o) const { PQconninfoFree(o); }
};

// The URI's password (empty when none): what messages must never show.
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

// `text` with every occurrence of `secret` masked.
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

struct ResultFree {
  void operator()(PGresult* r) const { PQclear(r); }
};
using Result = std::unique_ptr<PGresult, ResultFree>;

// A Postgres array literal of text elements ({"a","b",NULL}).
class ArrayLiteral {
 public:
  void Add(const std::optional<std::string>& v) {
    out_ += out_.empty() ? "{" : ",";
    if (!v) {
      out_ += "NULL";
      return;
    }
    out_ += '"';
    for (char c : *v) {
      if (c == '"' || c == '\\') out_ += '\\';
      out_ += c;
    }
    out_ += '"';
  }
  std::string Done() const { return out_.empty() ? "{}" : out_ + "}"; }

 private:
  std::string out_;
};

// Parameters in libpq's text format.
class Params {
 public:
  Params& Int(std::int64_t v) { return Put(std::to_string(v)); }
  Params& Real(double v) {
    char buf[64];
    const auto r = std::to_chars(buf, buf + sizeof buf, v);
    return Put(std::string(buf, r.ptr));
  }
  Params& Text(const std::string& v) { return Put(v); }
  Params& Null() {
    values_.emplace_back();
    return *this;
  }
  // A knob value as (int_value, real_value, text_value), one of them set.
  Params& Value(const KnobValue& v) {
    if (const auto* i = std::get_if<std::int64_t>(&v))
      return Int(*i).Null().Null();
    if (const auto* d = std::get_if<double>(&v)) return Null().Real(*d).Null();
    return Null().Null().Text(std::get<std::string>(v));
  }
  // Knob values as four array parameters (knob, int_value, real_value,
  // text_value) for unnest(): one statement inserts them all.
  Params& Arrays(const KnobValues& values) {
    ArrayLiteral knobs, ints, reals, texts;
    for (const auto& [knob, value] : values) {
      Params one;
      one.Value(value);
      knobs.Add(knob);
      ints.Add(one.values_[0]);
      reals.Add(one.values_[1]);
      texts.Add(one.values_[2]);
    }
    return Text(knobs.Done())
        .Text(ints.Done())
        .Text(reals.Done())
        .Text(texts.Done());
  }
  int size() const { return static_cast<int>(values_.size()); }
  std::vector<const char*> Pointers() const {
    std::vector<const char*> out;
    for (const auto& v : values_) out.push_back(v ? v->c_str() : nullptr);
    return out;
  }

 private:
  Params& Put(std::string s) {
    values_.emplace_back(std::move(s));
    return *this;
  }
  std::vector<std::optional<std::string>> values_;
};

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

}  // namespace

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

// The connection's statements: errors name the server and are classified
// (a lost connection is StoreUnavailable).
class PgConnection {
 public:
  PgConnection(PGconn* conn, const std::string& name, const std::string& secret,
               int timeout_ms)
      : conn_(conn), name_(name), secret_(secret), timeout_ms_(timeout_ms) {}

  [[noreturn]] void Fail(std::string_view what, const PGresult* r) const {
    std::string msg = "config store " + name_ + ": " + std::string(what) +
                      ": " + Trimmed(PQerrorMessage(conn_));
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

  Result Exec(const char* sql, const Params& params = {}) const {
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

  // Several statements without parameters (migrations).
  void Script(const char* sql) const {
    if (!PQsendQuery(conn_, sql)) Fail("sending a migration", nullptr);
    Result r = Await(sql);
    if (!r || PQresultStatus(r.get()) != PGRES_COMMAND_OK) {
      Fail("migrating", r.get());
    }
  }

 private:
  // The answer to what was sent: the first error, else the last result.
  // A server that does not answer within the timeout (stopped, or the
  // network partitioned: TCP alone may wait for many minutes) makes the
  // store unavailable, and the connection is shut so that nothing else
  // waits on it.
  Result Await(const char* sql) const {
    const auto deadline = std::chrono::steady_clock::now() +
                          std::chrono::milliseconds(timeout_ms_);
    auto wait = [&](short events) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      pollfd p{PQsocket(conn_), events, 0};
      return left.count() > 0 &&
             poll(&p, 1, static_cast<int>(left.count())) > 0;
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
      const bool error =
          status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK;
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

  PGconn* conn_;
  const std::string& name_;
  std::string secret_;
  int timeout_ms_;
};

namespace {

// BEGIN on construction, ROLLBACK unless Commit() was called.
class PgTransaction {
 public:
  explicit PgTransaction(const PgConnection& c) : c_(c) { c_.Exec("BEGIN"); }
  ~PgTransaction() {
    if (!done_) {
      try {
        c_.Exec("ROLLBACK");
      } catch (const StoreError&) {
        // The connection is gone: the server rolled back already.
      }
    }
  }
  void Commit() {
    done_ = true;
    c_.Exec("COMMIT");
  }
  void Rollback() {
    done_ = true;
    c_.Exec("ROLLBACK");
  }

 private:
  const PgConnection& c_;
  bool done_ = false;
};

const char* Get(const Result& r, int row, int col) {
  return PQgetvalue(r.get(), row, col);
}
bool IsNull(const Result& r, int row, int col) {
  return PQgetisnull(r.get(), row, col) != 0;
}
// A knob value from (int_value, real_value, text_value) at `col`.
KnobValue ValueAt(const Result& r, int row, int col) {
  if (!IsNull(r, row, col)) return ToInt(Get(r, row, col));
  if (!IsNull(r, row, col + 1)) return ToReal(Get(r, row, col + 1));
  return std::string(Get(r, row, col + 2));
}

// Version 1: fingerprints, runs, every sample with its knob values by name.
constexpr const char* kMigrateTo1 = R"sql(
CREATE TABLE fingerprints(
  id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
  kind TEXT NOT NULL,
  hash TEXT NOT NULL,
  text TEXT NOT NULL,
  created DOUBLE PRECISION NOT NULL,
  UNIQUE(kind, hash));
CREATE TABLE runs(
  id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
  hardware_id BIGINT NOT NULL REFERENCES fingerprints(id),
  model_id BIGINT NOT NULL REFERENCES fingerprints(id),
  started DOUBLE PRECISION NOT NULL,
  ended DOUBLE PRECISION,
  status TEXT NOT NULL,
  version TEXT NOT NULL);
CREATE INDEX runs_pair ON runs(hardware_id, model_id);
CREATE TABLE samples(
  id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
  run_id BIGINT NOT NULL REFERENCES runs(id),
  idx INTEGER NOT NULL,
  phase TEXT NOT NULL,
  score DOUBLE PRECISION NOT NULL,
  time DOUBLE PRECISION NOT NULL);
CREATE INDEX samples_run ON samples(run_id, idx);
CREATE TABLE sample_values(
  sample_id BIGINT NOT NULL REFERENCES samples(id),
  knob TEXT NOT NULL,
  int_value BIGINT,
  real_value DOUBLE PRECISION,
  text_value TEXT,
  CHECK (num_nonnulls(int_value, real_value, text_value) = 1),
  PRIMARY KEY(sample_id, knob));
CREATE TABLE hvdtune_schema(version INTEGER NOT NULL);
INSERT INTO hvdtune_schema VALUES(0);
)sql";

// Version 2: where a run's starting point came from, and the best
// configuration per (hardware, model), filled from the best frozen sample
// of each pair already stored.
constexpr const char* kMigrateTo2 = R"sql(
ALTER TABLE runs ADD COLUMN source TEXT NOT NULL DEFAULT 'fresh';
CREATE TABLE best(
  hardware_id BIGINT NOT NULL REFERENCES fingerprints(id),
  model_id BIGINT NOT NULL REFERENCES fingerprints(id),
  score DOUBLE PRECISION NOT NULL,
  run_id BIGINT,
  time DOUBLE PRECISION NOT NULL,
  PRIMARY KEY(hardware_id, model_id));
CREATE TABLE best_values(
  hardware_id BIGINT NOT NULL,
  model_id BIGINT NOT NULL,
  knob TEXT NOT NULL,
  int_value BIGINT,
  real_value DOUBLE PRECISION,
  text_value TEXT,
  CHECK (num_nonnulls(int_value, real_value, text_value) = 1),
  PRIMARY KEY(hardware_id, model_id, knob));
CREATE TEMPORARY TABLE best_pick ON COMMIT DROP AS
SELECT DISTINCT ON (r.hardware_id, r.model_id)
       r.hardware_id, r.model_id, s.id AS sample_id, s.score, r.id AS run_id,
       s.time
FROM samples s JOIN runs r ON r.id = s.run_id
WHERE s.phase = 'frozen'
ORDER BY r.hardware_id, r.model_id, s.score DESC, s.id;
INSERT INTO best(hardware_id, model_id, score, run_id, time)
SELECT hardware_id, model_id, score, run_id, time FROM best_pick;
INSERT INTO best_values(hardware_id, model_id, knob, int_value, real_value,
                        text_value)
SELECT p.hardware_id, p.model_id, v.knob, v.int_value, v.real_value,
       v.text_value
FROM best_pick p JOIN sample_values v ON v.sample_id = p.sample_id;
)sql";

// Version 3: a sample is stored once per (run, index, phase, time), so a
// write retried after a lost answer adds nothing (INSERT ... ON CONFLICT DO
// NOTHING). kDropDuplicateSamples runs first.
constexpr const char* kMigrateTo3 = R"sql(
DROP INDEX samples_run;
CREATE UNIQUE INDEX samples_key ON samples(run_id, idx, phase, time);
)sql";

constexpr const char* kMigrations[] = {kMigrateTo1, kMigrateTo2, kMigrateTo3};
static_assert(std::size(kMigrations) ==
              static_cast<std::size_t>(kSchemaVersion));

int ReadVersion(const PgConnection& c) {
  Result exists = c.Exec("SELECT to_regclass('hvdtune_schema') IS NOT NULL");
  if (std::string_view(Get(exists, 0, 0)) != "t") return 0;
  Result v = c.Exec("SELECT COALESCE(MAX(version), 0) FROM hvdtune_schema");
  return static_cast<int>(ToInt(Get(v, 0, 0)));
}

std::int64_t InsertFingerprintRow(const PgConnection& c,
                                  const std::string& kind,
                                  const Fingerprint& fp, bool* added) {
  const std::string hash = fp.Hash();
  Result ins = c.Exec(
      "INSERT INTO fingerprints(kind, hash, text, created) "
      "VALUES($1, $2, $3, $4) ON CONFLICT (kind, hash) DO NOTHING "
      "RETURNING id",
      Params().Text(kind).Text(hash).Text(fp.Text()).Real(Now()));
  if (added) *added = PQntuples(ins.get()) > 0;
  if (PQntuples(ins.get()) > 0) return ToInt(Get(ins, 0, 0));
  Result sel =
      c.Exec("SELECT id FROM fingerprints WHERE kind = $1 AND hash = $2",
             Params().Text(kind).Text(hash));
  if (PQntuples(sel.get()) == 0) c.Fail("fingerprint vanished", nullptr);
  return ToInt(Get(sel, 0, 0));
}

// Replaces the pair's best configuration (inside the caller's transaction):
// the upsert first, which holds the pair's row lock until commit.
void WriteBestRows(const PgConnection& c, std::int64_t hardware,
                   std::int64_t model, const Best& best) {
  Params p;
  p.Int(hardware).Int(model).Real(best.score);
  if (best.run != 0) {
    p.Int(best.run);
  } else {
    p.Null();
  }
  p.Real(best.time);
  c.Exec(
      "INSERT INTO best(hardware_id, model_id, score, run_id, time) "
      "VALUES($1, $2, $3, $4, $5) ON CONFLICT (hardware_id, model_id) DO "
      "UPDATE SET score = EXCLUDED.score, run_id = EXCLUDED.run_id, "
      "time = EXCLUDED.time",
      p);
  c.Exec("DELETE FROM best_values WHERE hardware_id = $1 AND model_id = $2",
         Params().Int(hardware).Int(model));
  c.Exec(
      "INSERT INTO best_values(hardware_id, model_id, knob, int_value, "
      "real_value, text_value) SELECT $1, $2, k, i, r, t FROM "
      "unnest($3::text[], $4::bigint[], $5::float8[], $6::text[]) AS "
      "v(k, i, r, t)",
      Params().Int(hardware).Int(model).Arrays(best.values));
}

// Inserts one sample and its values in one statement (one round trip);
// false when the run has it already (the unique key of version 3: the same
// index, phase and time), and then nothing is written.
bool InsertSampleRow(const PgConnection& c, std::int64_t run, const Sample& s) {
  Result r = c.Exec(
      "WITH s AS (INSERT INTO samples(run_id, idx, phase, score, time) "
      "VALUES($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING RETURNING id), "
      "v AS (INSERT INTO "
      "sample_values(sample_id, knob, int_value, real_value, text_value) "
      "SELECT s.id, k, i, r, t FROM s, unnest($6::text[], $7::bigint[], "
      "$8::float8[], $9::text[]) AS v(k, i, r, t)) SELECT id FROM s",
      Params()
          .Int(run)
          .Int(s.index)
          .Text(s.phase)
          .Real(s.score)
          .Real(s.time)
          .Arrays(s.values));
  return PQntuples(r.get()) > 0;
}

// Samples from rows (id, idx, phase, score, time, run_id) with their values.
std::vector<Sample> SamplesWithValues(const PgConnection& c,
                                      const Result& rows) {
  std::vector<Sample> out;
  ArrayLiteral ids;
  const int n = PQntuples(rows.get());
  for (int i = 0; i < n; ++i) {
    ids.Add(std::string(Get(rows, i, 0)));
    out.push_back({static_cast<int>(ToInt(Get(rows, i, 1))),
                   Get(rows, i, 2),
                   {},
                   ToReal(Get(rows, i, 3)),
                   ToReal(Get(rows, i, 4)),
                   ToInt(Get(rows, i, 5))});
  }
  if (n == 0) return out;
  Result vals = c.Exec(
      "SELECT o.n, v.knob, v.int_value, v.real_value, v.text_value FROM "
      "unnest($1::bigint[]) WITH ORDINALITY AS o(id, n) JOIN sample_values v "
      "ON v.sample_id = o.id",
      Params().Text(ids.Done()));
  for (int i = 0; i < PQntuples(vals.get()); ++i) {
    const auto at = static_cast<std::size_t>(ToInt(Get(vals, i, 0)) - 1);
    out[at].values[Get(vals, i, 1)] = ValueAt(vals, i, 2);
  }
  return out;
}

RunInfo RunAt(const Result& r, int row) {
  RunInfo info;
  info.id = ToInt(Get(r, row, 0));
  info.hardware = ToInt(Get(r, row, 1));
  info.model = ToInt(Get(r, row, 2));
  info.started = ToReal(Get(r, row, 3));
  info.ended = IsNull(r, row, 4) ? 0 : ToReal(Get(r, row, 4));
  info.status = Get(r, row, 5);
  info.version = Get(r, row, 6);
  info.source = Get(r, row, 7);
  return info;
}

constexpr const char* kRunColumns =
    "SELECT id, hardware_id, model_id, started, ended, status, version, "
    "source FROM runs ";

}  // namespace

PgBackend::PgBackend(StoreOptions options)
    : options_(std::move(options)),
      name_(PgDisplayName(options_.path)),
      secret_(UriPassword(options_.path)) {
  const std::string& secret = secret_;
  // Defaults that the URI or libpq's environment override: a bounded wait
  // for an unreachable server, and a name in pg_stat_activity.
  std::vector<const char*> keys, values;
  if (!std::getenv("PGCONNECT_TIMEOUT")) {
    keys.push_back("connect_timeout");
    values.push_back("5");
  }
  if (!std::getenv("PGAPPNAME")) {
    keys.push_back("application_name");
    values.push_back("hvdtune");
  }
  keys.push_back("dbname");
  values.push_back(options_.path.c_str());
  keys.push_back(nullptr);
  values.push_back(nullptr);
  conn_ = PQconnectdbParams(keys.data(), values.data(), 1);
  if (conn_ == nullptr) {
    throw StoreUnavailable("config store " + name_ + ": out of memory");
  }
  if (PQstatus(conn_) != CONNECTION_OK) {
    std::string msg = Scrub("config store " + name_ + ": cannot connect: " +
                                Trimmed(PQerrorMessage(conn_)),
                            secret);
    PQfinish(conn_);
    conn_ = nullptr;
    throw StoreUnavailable(msg);
  }
  PQsetNoticeProcessor(
      conn_, [](void*, const char*) {}, nullptr);
  try {
    PgConnection c(conn_, name_, secret, options_.server_timeout_ms);
    // No notices on stderr.
    c.Exec("SET client_min_messages = warning");
    // Readers (hvd-tune show, export, doctor) cannot write by mistake.
    if (options_.read_only) {
      c.Exec("SET default_transaction_read_only = on");
    }
    const int version = ReadVersion(c);
    if (version > kSchemaVersion) {
      throw StoreError(
          "config store " + name_ + ": schema version " +
          std::to_string(version) + " is newer than this build's (" +
          std::to_string(kSchemaVersion) + "); the database is left untouched");
    }
    if (!options_.read_only && version < options_.target_version) Migrate();
  } catch (...) {
    PQfinish(conn_);
    conn_ = nullptr;
    throw;
  }
}

PgBackend::~PgBackend() { PQfinish(conn_); }

int PgBackend::schema_version() {
  return ReadVersion(
      PgConnection(conn_, name_, secret_, options_.server_timeout_ms));
}

void PgBackend::Migrate() {
  PgConnection c(conn_, name_, secret_, options_.server_timeout_ms);
  PgTransaction tx(c);
  c.Exec("SELECT pg_advisory_xact_lock($1)", Params().Int(kMigrationLock));
  const int from = ReadVersion(c);
  if (from > kSchemaVersion) {
    throw StoreError("config store " + name_ + ": schema version " +
                     std::to_string(from) + " is newer than this build's");
  }
  for (int v = from; v < options_.target_version; ++v) {
    if (v == 2) c.Script(kDropDuplicateSamples);
    c.Script(kMigrations[v]);
  }
  if (from < options_.target_version) {
    c.Exec("UPDATE hvdtune_schema SET version = $1",
           Params().Int(options_.target_version));
  }
  tx.Commit();
}

std::int64_t PgBackend::PutFingerprint(const std::string& kind,
                                       const Fingerprint& fp) {
  return InsertFingerprintRow(
      PgConnection(conn_, name_, secret_, options_.server_timeout_ms), kind, fp,
      nullptr);
}

std::optional<std::int64_t> PgBackend::FindFingerprint(
    const std::string& kind, const std::string& hash) {
  PgConnection c(conn_, name_, secret_, options_.server_timeout_ms);
  Result r = c.Exec("SELECT id FROM fingerprints WHERE kind = $1 AND hash = $2",
                    Params().Text(kind).Text(hash));
  if (PQntuples(r.get()) == 0) return std::nullopt;
  return ToInt(Get(r, 0, 0));
}

std::int64_t PgBackend::BeginRun(std::int64_t hardware, std::int64_t model,
                                 const std::string& version,
                                 const std::string& source, double started) {
  PgConnection c(conn_, name_, secret_, options_.server_timeout_ms);
  Result r = c.Exec(
      "INSERT INTO runs(hardware_id, model_id, started, status, version, "
      "source) VALUES($1, $2, $3, 'running', $4, $5) RETURNING id",
      Params().Int(hardware).Int(model).Real(started).Text(version).Text(
          source));
  return ToInt(Get(r, 0, 0));
}

void PgBackend::EndRun(std::int64_t run, const std::string& status,
                       double ended) {
  PgConnection(conn_, name_, secret_, options_.server_timeout_ms)
      .Exec("UPDATE runs SET status = $1, ended = $2 WHERE id = $3",
            Params().Text(status).Real(ended).Int(run));
}

std::optional<RunInfo> PgBackend::GetRun(std::int64_t run) {
  PgConnection c(conn_, name_, secret_, options_.server_timeout_ms);
  Result r = c.Exec((std::string(kRunColumns) + "WHERE id = $1").c_str(),
                    Params().Int(run));
  if (PQntuples(r.get()) == 0) return std::nullopt;
  return RunAt(r, 0);
}

void PgBackend::AddSamples(std::int64_t run,
                           const std::vector<Sample>& samples) {
  if (samples.empty()) return;
  PgConnection c(conn_, name_, secret_, options_.server_timeout_ms);
  if (samples.size() == 1) {
    InsertSampleRow(c, run, samples[0]);  // one statement: atomic by itself
    return;
  }
  PgTransaction tx(c);
  for (const Sample& s : samples) InsertSampleRow(c, run, s);
  tx.Commit();
}

std::vector<Sample> PgBackend::RunSamples(std::int64_t run) {
  PgConnection c(conn_, name_, secret_, options_.server_timeout_ms);
  Result rows = c.Exec(
      "SELECT id, idx, phase, score, time, run_id FROM samples WHERE "
      "run_id = $1 ORDER BY idx, id",
      Params().Int(run));
  return SamplesWithValues(c, rows);
}

std::vector<Sample> PgBackend::PairSamples(std::int64_t hardware,
                                           std::int64_t model, int limit) {
  PgConnection c(conn_, name_, secret_, options_.server_timeout_ms);
  Result rows = c.Exec(
      "SELECT * FROM (SELECT s.id, s.idx, s.phase, s.score, s.time, s.run_id "
      "FROM samples s JOIN runs r ON r.id = s.run_id WHERE r.hardware_id = $1 "
      "AND r.model_id = $2 ORDER BY s.id DESC LIMIT $3) newest ORDER BY id",
      Params().Int(hardware).Int(model).Int(limit));
  return SamplesWithValues(c, rows);
}

void PgBackend::SetBest(std::int64_t hardware, std::int64_t model,
                        const Best& best) {
  PgConnection c(conn_, name_, secret_, options_.server_timeout_ms);
  PgTransaction tx(c);
  WriteBestRows(c, hardware, model, best);
  tx.Commit();
}

std::optional<Best> PgBackend::GetBest(std::int64_t hardware,
                                       std::int64_t model) {
  PgConnection c(conn_, name_, secret_, options_.server_timeout_ms);
  // One statement, one snapshot: the row and its values belong together.
  Result r = c.Exec(
      "SELECT b.score, b.run_id, b.time, v.knob, v.int_value, v.real_value, "
      "v.text_value FROM best b LEFT JOIN best_values v ON v.hardware_id = "
      "b.hardware_id AND v.model_id = b.model_id WHERE b.hardware_id = $1 "
      "AND b.model_id = $2",
      Params().Int(hardware).Int(model));
  if (PQntuples(r.get()) == 0) return std::nullopt;
  Best b;
  b.score = ToReal(Get(r, 0, 0));
  b.run = IsNull(r, 0, 1) ? 0 : ToInt(Get(r, 0, 1));
  b.time = ToReal(Get(r, 0, 2));
  for (int i = 0; i < PQntuples(r.get()); ++i) {
    if (!IsNull(r, i, 3)) b.values[Get(r, i, 3)] = ValueAt(r, i, 4);
  }
  return b;
}

// A job's start-up lookup in one statement (one round trip, one
// snapshot): rows tagged by `part`, ordered by part and then by `a`.
//   0: the ids          a = hardware id, b = model id (NULL when unknown)
//   1: the best         a = run id, score, time
//   2: a best value     knob, int/real/text value
//   3: a sample         a = sample id, b = index, text = phase, score, time,
//                       int_value = run id
//   4: a sample value   a = sample id, knob, int/real/text value
constexpr const char* kLookup = R"sql(
WITH h AS (SELECT id FROM fingerprints WHERE kind = 'hardware' AND hash = $1),
m AS (SELECT id FROM fingerprints WHERE kind = 'model' AND hash = $2),
b AS (SELECT b.* FROM best b, h, m
      WHERE b.hardware_id = h.id AND b.model_id = m.id),
s AS (SELECT s.id, s.idx, s.phase, s.score, s.time, s.run_id
      FROM samples s JOIN runs r ON r.id = s.run_id, h, m
      WHERE r.hardware_id = h.id AND r.model_id = m.id
      ORDER BY s.id DESC LIMIT $3)
SELECT 0 AS part, (SELECT id FROM h) AS a, (SELECT id FROM m) AS b,
       NULL::text AS text, NULL::float8 AS score, NULL::float8 AS time,
       NULL::bigint AS int_value, NULL::float8 AS real_value,
       NULL::text AS text_value
UNION ALL
SELECT 1, run_id, NULL, NULL, score, time, NULL, NULL, NULL FROM b
UNION ALL
SELECT 2, NULL, NULL, v.knob, NULL, NULL, v.int_value, v.real_value,
       v.text_value
FROM best_values v JOIN b ON v.hardware_id = b.hardware_id
                         AND v.model_id = b.model_id
UNION ALL
SELECT 3, id, idx, phase, score, time, run_id, NULL, NULL FROM s
UNION ALL
SELECT 4, v.sample_id, NULL, v.knob, NULL, NULL, v.int_value, v.real_value,
       v.text_value
FROM sample_values v JOIN s ON s.id = v.sample_id
ORDER BY 1, 2)sql";

PairLookup PgBackend::Lookup(const std::string& hardware_hash,
                             const std::string& model_hash, int limit) {
  Result r = Connection().Exec(
      kLookup, Params().Text(hardware_hash).Text(model_hash).Int(limit));
  PairLookup out;
  std::vector<std::int64_t> ids;  // of out.samples, ascending
  for (int i = 0; i < PQntuples(r.get()); ++i) {
    switch (ToInt(Get(r, i, 0))) {
      case 0:
        if (!IsNull(r, i, 1)) out.hardware = ToInt(Get(r, i, 1));
        if (!IsNull(r, i, 2)) out.model = ToInt(Get(r, i, 2));
        break;
      case 1:
        out.best.emplace();
        out.best->run = IsNull(r, i, 1) ? 0 : ToInt(Get(r, i, 1));
        out.best->score = ToReal(Get(r, i, 4));
        out.best->time = ToReal(Get(r, i, 5));
        break;
      case 2:
        out.best->values[Get(r, i, 3)] = ValueAt(r, i, 6);
        break;
      case 3:
        ids.push_back(ToInt(Get(r, i, 1)));
        out.samples.push_back({static_cast<int>(ToInt(Get(r, i, 2))),
                               Get(r, i, 3),
                               {},
                               ToReal(Get(r, i, 4)),
                               ToReal(Get(r, i, 5)),
                               ToInt(Get(r, i, 6))});
        break;
      default: {
        const auto at =
            std::lower_bound(ids.begin(), ids.end(), ToInt(Get(r, i, 1)));
        out.samples[static_cast<std::size_t>(at - ids.begin())]
            .values[Get(r, i, 3)] = ValueAt(r, i, 6);
      }
    }
  }
  return out;
}

std::vector<KnownPair> PgBackend::KnownPairs() {
  PgConnection c(conn_, name_, secret_, options_.server_timeout_ms);
  Result r = c.Exec(R"sql(
SELECT r.hardware_id, r.model_id, h.text, m.text, COUNT(s.id)
FROM runs r
JOIN fingerprints h ON h.id = r.hardware_id
JOIN fingerprints m ON m.id = r.model_id
JOIN samples s ON s.run_id = r.id
GROUP BY r.hardware_id, r.model_id, h.text, m.text)sql");
  std::vector<KnownPair> out;
  for (int i = 0; i < PQntuples(r.get()); ++i) {
    out.push_back({ToInt(Get(r, i, 0)), ToInt(Get(r, i, 1)),
                   Fingerprint::FromText(Get(r, i, 2)),
                   Fingerprint::FromText(Get(r, i, 3)), ToInt(Get(r, i, 4))});
  }
  return out;
}

std::vector<PairSummary> PgBackend::ListPairs() {
  PgConnection c(conn_, name_, secret_, options_.server_timeout_ms);
  Result r = c.Exec(R"sql(
SELECT r.hardware_id, r.model_id, h.text, m.text, COUNT(DISTINCT r.id),
       (SELECT COUNT(*) FROM samples s JOIN runs r2 ON r2.id = s.run_id
        WHERE r2.hardware_id = r.hardware_id AND r2.model_id = r.model_id),
       MIN(r.started),
       GREATEST(MAX(GREATEST(r.started, COALESCE(r.ended, 0))),
                COALESCE((SELECT MAX(s.time) FROM samples s JOIN runs r3
                          ON r3.id = s.run_id
                          WHERE r3.hardware_id = r.hardware_id
                            AND r3.model_id = r.model_id), 0))
FROM runs r
JOIN fingerprints h ON h.id = r.hardware_id
JOIN fingerprints m ON m.id = r.model_id
GROUP BY r.hardware_id, r.model_id, h.text, m.text
ORDER BY 8 DESC, r.hardware_id, r.model_id)sql");
  std::vector<PairSummary> out;
  for (int i = 0; i < PQntuples(r.get()); ++i) {
    PairSummary p;
    p.hardware = ToInt(Get(r, i, 0));
    p.model = ToInt(Get(r, i, 1));
    p.hardware_fp = Fingerprint::FromText(Get(r, i, 2));
    p.model_fp = Fingerprint::FromText(Get(r, i, 3));
    p.runs = ToInt(Get(r, i, 4));
    p.samples = ToInt(Get(r, i, 5));
    p.first = ToReal(Get(r, i, 6));
    p.last = ToReal(Get(r, i, 7));
    out.push_back(std::move(p));
  }
  for (PairSummary& p : out) p.best = GetBest(p.hardware, p.model);
  return out;
}

std::vector<RunInfo> PgBackend::PairRuns(std::int64_t hardware,
                                         std::int64_t model) {
  PgConnection c(conn_, name_, secret_, options_.server_timeout_ms);
  Result r = c.Exec((std::string(kRunColumns) +
                     "WHERE hardware_id = $1 AND model_id = $2 ORDER BY "
                     "started, id")
                        .c_str(),
                    Params().Int(hardware).Int(model));
  std::vector<RunInfo> out;
  for (int i = 0; i < PQntuples(r.get()); ++i) out.push_back(RunAt(r, i));
  return out;
}

PgConnection PgBackend::Connection() const {
  return PgConnection(conn_, name_, secret_, options_.server_timeout_ms);
}

namespace {

class PgWrite final : public WriteTransaction {
 public:
  explicit PgWrite(PgConnection c) : c_(c), tx_(c_) {}
  void Commit() override { tx_.Commit(); }

 private:
  PgConnection c_;
  PgTransaction tx_;
};

}  // namespace

// The steps of Backend::Merge (merge.cc).
std::unique_ptr<WriteTransaction> PgBackend::Begin() {
  return std::make_unique<PgWrite>(Connection());
}

std::int64_t PgBackend::InsertFingerprint(const std::string& kind,
                                          const Fingerprint& fp, bool* added) {
  return InsertFingerprintRow(Connection(), kind, fp, added);
}

std::optional<std::int64_t> PgBackend::FindRun(std::int64_t hardware,
                                               std::int64_t model,
                                               double started) {
  Result found = Connection().Exec(
      "SELECT id FROM runs WHERE hardware_id = $1 AND model_id = $2 AND "
      "started = $3 ORDER BY id LIMIT 1",
      Params().Int(hardware).Int(model).Real(started));
  if (PQntuples(found.get()) == 0) return std::nullopt;
  return ToInt(Get(found, 0, 0));
}

std::int64_t PgBackend::InsertRun(std::int64_t hardware, std::int64_t model,
                                  const RunInfo& run) {
  Params p;
  p.Int(hardware).Int(model).Real(run.started);
  if (run.ended != 0) {
    p.Real(run.ended);
  } else {
    p.Null();
  }
  p.Text(run.status).Text(run.version).Text(run.source);
  Result ins = Connection().Exec(
      "INSERT INTO runs(hardware_id, model_id, started, ended, status, "
      "version, source) VALUES($1, $2, $3, $4, $5, $6, $7) RETURNING id",
      p);
  return ToInt(Get(ins, 0, 0));
}

bool PgBackend::InsertSample(std::int64_t run, const Sample& sample) {
  return InsertSampleRow(Connection(), run, sample);
}

// The pair's best row stays locked (FOR UPDATE) until the transaction ends:
// the score compared is the one replaced.
std::optional<double> PgBackend::LockBestScore(std::int64_t hardware,
                                               std::int64_t model) {
  Result current = Connection().Exec(
      "SELECT score FROM best WHERE hardware_id = $1 AND model_id = $2 FOR "
      "UPDATE",
      Params().Int(hardware).Int(model));
  if (PQntuples(current.get()) == 0) return std::nullopt;
  return ToReal(Get(current, 0, 0));
}

void PgBackend::WriteBest(std::int64_t hardware, std::int64_t model,
                          const Best& best) {
  WriteBestRows(Connection(), hardware, model, best);
}

std::string PgBackend::IntegrityCheck() {
  PgConnection c(conn_, name_, secret_, options_.server_timeout_ms);
  // Foreign keys hold the rest; best_values has none to its best row.
  Result r = c.Exec(
      "SELECT COUNT(*) FROM best_values v WHERE NOT EXISTS (SELECT 1 FROM "
      "best b WHERE b.hardware_id = v.hardware_id AND b.model_id = "
      "v.model_id)");
  const std::int64_t orphans = ToInt(Get(r, 0, 0));
  return orphans == 0
             ? std::string("ok")
             : std::to_string(orphans) + " best values without their best row";
}

}  // namespace hvdtune::store::internal
