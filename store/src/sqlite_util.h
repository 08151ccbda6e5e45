// Small RAII helpers over the SQLite C API: prepared statements with bound
// parameters, transactions, errors that name the file.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "hvdtune/store/store.h"

namespace hvdtune::store::internal {

[[noreturn]] void Fail(sqlite3* db, const std::string& path,
                       std::string_view what);

class Statement {
 public:
  Statement(sqlite3* db, const std::string& path, std::string_view sql);
  ~Statement();
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  Statement& Bind(int i, std::int64_t v);
  Statement& Bind(int i, int v) {
    return Bind(i, static_cast<std::int64_t>(v));
  }
  Statement& Bind(int i, double v);
  Statement& Bind(int i, const std::string& v);
  Statement& Bind(int i, const KnobValue& v);
  /// True while a row is available.
  bool Step();
  /// Steps to completion (statements without result rows).
  void Run();
  void Reset();

  std::int64_t Int(int col) const;
  double Real(int col) const;
  std::string Text(int col) const;
  KnobValue Value(int col) const;
  bool IsNull(int col) const;

 private:
  sqlite3* db_;
  const std::string& path_;
  sqlite3_stmt* stmt_ = nullptr;
};

/// Runs `sql` (no parameters; schema statements and pragmas).
void Exec(sqlite3* db, const std::string& path, const std::string& sql);

/// BEGIN IMMEDIATE on construction; ROLLBACK unless Commit() was called.
class Transaction {
 public:
  Transaction(sqlite3* db, const std::string& path);
  ~Transaction();
  void Commit();

 private:
  sqlite3* db_;
  const std::string& path_;
  bool done_ = false;
};

/// The fingerprint's row id, inserted when new (inside the caller's
/// transaction); `added` (may be null) says whether it was.
std::int64_t InsertFingerprint(sqlite3* db, const std::string& path,
                               const std::string& kind, const Fingerprint& fp,
                               bool* added);
/// Replaces the pair's best configuration (inside the caller's
/// transaction).
void WriteBest(sqlite3* db, const std::string& path, std::int64_t hardware,
               std::int64_t model, const Best& best);

}  // namespace hvdtune::store::internal
