// The libpq plumbing of the PostgreSQL backend (pg_backend.cc): statement
// parameters in libpq's text format, results, and a connection whose
// errors name the server, never its password, and tell a lost server
// (StoreUnavailable) from a refused statement (StoreError).
#pragma once

#include <libpq-fe.h>

#include <charconv>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "hvdtune/store/store.h"

namespace hvdtune::store::internal {

// The URI's password (empty when none): what messages must never show.
std::string UriPassword(const std::string& uri);
// `text` with every occurrence of `secret` masked.
std::string Scrub(std::string text, const std::string& secret);
// libpq's message on one line, without the trailing newline.
std::string Trimmed(const char* message);

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

std::int64_t ToInt(const char* s);
double ToReal(const char* s);

// The connection's statements: errors name the server and are classified
// (a lost connection is StoreUnavailable).
class PgConnection {
 public:
  PgConnection(PGconn* conn, const std::string& name, const std::string& secret,
               int timeout_ms)
      : conn_(conn), name_(name), secret_(secret), timeout_ms_(timeout_ms) {}

  [[noreturn]] void Fail(std::string_view what, const PGresult* r) const;
  Result Exec(const char* sql, const Params& params = {}) const;
  // Several statements without parameters (migrations).
  void Script(const char* sql) const;

 private:
  // The answer to what was sent: the first error, else the last result.
  // A server that does not answer within the timeout (stopped, or the
  // network partitioned: TCP alone may wait for many minutes) makes the
  // store unavailable, and the connection is shut so that nothing else
  // waits on it.
  Result Await(const char* sql) const;

  PGconn* conn_;
  const std::string& name_;
  std::string secret_;
  int timeout_ms_;
};

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

const char* Get(const Result& r, int row, int col);
bool IsNull(const Result& r, int row, int col);
// A knob value from (int_value, real_value, text_value) at `col`.
KnobValue ValueAt(const Result& r, int row, int col);

}  // namespace hvdtune::store::internal
