#include "sqlite_util.h"

namespace hvdtune::store::internal {

void Fail(sqlite3* db, const std::string& path, std::string_view what) {
  std::string msg = "config store " + path + ": " + std::string(what);
  if (db != nullptr) {
    msg += ": ";
    msg += sqlite3_errmsg(db);
    const int code = sqlite3_extended_errcode(db);
    msg += " (" + std::string(sqlite3_errstr(code)) + ")";
  }
  throw StoreError(msg);
}

Statement::Statement(sqlite3* db, const std::string& path, std::string_view sql)
    : db_(db), path_(path) {
  if (sqlite3_prepare_v2(db, sql.data(), static_cast<int>(sql.size()), &stmt_,
                         nullptr) != SQLITE_OK) {
    Fail(db, path, "preparing '" + std::string(sql.substr(0, 40)) + "'");
  }
}

Statement::~Statement() { sqlite3_finalize(stmt_); }

Statement& Statement::Bind(int i, std::int64_t v) {
  sqlite3_bind_int64(stmt_, i, v);
  return *this;
}

Statement& Statement::Bind(int i, double v) {
  sqlite3_bind_double(stmt_, i, v);
  return *this;
}

Statement& Statement::Bind(int i, const std::string& v) {
  sqlite3_bind_text(stmt_, i, v.data(), static_cast<int>(v.size()),
                    SQLITE_TRANSIENT);
  return *this;
}

Statement& Statement::Bind(int i, const KnobValue& v) {
  std::visit([&](const auto& x) { Bind(i, x); }, v);
  return *this;
}

bool Statement::Step() {
  const int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  Fail(db_, path_,
       "executing '" + std::string(sqlite3_sql(stmt_)).substr(0, 40) + "'");
}

void Statement::Run() {
  while (Step()) {
  }
}

void Statement::Reset() {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
}

std::int64_t Statement::Int(int col) const {
  return sqlite3_column_int64(stmt_, col);
}

double Statement::Real(int col) const {
  return sqlite3_column_double(stmt_, col);
}

std::string Statement::Text(int col) const {
  const auto* p = sqlite3_column_text(stmt_, col);
  const int n = sqlite3_column_bytes(stmt_, col);
  return p == nullptr ? std::string()
                      : std::string(reinterpret_cast<const char*>(p), n);
}

KnobValue Statement::Value(int col) const {
  switch (sqlite3_column_type(stmt_, col)) {
    case SQLITE_INTEGER:
      return Int(col);
    case SQLITE_FLOAT:
      return Real(col);
    default:
      return Text(col);
  }
}

bool Statement::IsNull(int col) const {
  return sqlite3_column_type(stmt_, col) == SQLITE_NULL;
}

void Exec(sqlite3* db, const std::string& path, const std::string& sql) {
  char* err = nullptr;
  if (sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
    sqlite3_free(err);
    Fail(db, path, "executing '" + sql.substr(0, 40) + "'");
  }
}

Transaction::Transaction(sqlite3* db, const std::string& path)
    : db_(db), path_(path) {
  Exec(db, path, "BEGIN IMMEDIATE");
}

Transaction::~Transaction() {
  if (!done_) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
}

void Transaction::Commit() {
  Exec(db_, path_, "COMMIT");
  done_ = true;
}

}  // namespace hvdtune::store::internal
