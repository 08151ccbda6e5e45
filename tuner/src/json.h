#pragma once

// Minimal JSON reader/writer helpers for the optimizer's state. Internal to
// the tuner library: the state format is ours, so this handles the JSON we
// write plus ordinary whitespace and escapes, and rejects anything else.

#include <string>
#include <utility>
#include <vector>

namespace hvdtune::tuner::json {

struct Value {
  enum class Type { kNull, kBool, kNumber, kString, kArray, kObject };
  Type type = Type::kNull;
  bool boolean = false;
  double number = 0;
  std::string string;
  std::vector<Value> array;
  std::vector<std::pair<std::string, Value>> object;

  /// Member `key` of an object; throws std::invalid_argument if absent.
  const Value& at(const std::string& key) const;
  bool has(const std::string& key) const;
  double AsNumber() const;
  bool AsBool() const;
  const std::string& AsString() const;
  const std::vector<Value>& AsArray() const;
  std::vector<double> AsNumbers() const;
};

/// Parses a complete document; throws std::invalid_argument on bad input.
Value Parse(const std::string& text);

/// Shortest text that reads back as exactly `value` (finite values only).
std::string Number(double value);
/// Quoted, escaped string literal.
std::string Quote(const std::string& text);
/// "[a,b,c]" of numbers.
std::string Numbers(const std::vector<double>& values);

}  // namespace hvdtune::tuner::json
