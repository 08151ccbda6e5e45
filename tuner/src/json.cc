#include "json.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>

namespace hvdtune::tuner::json {

namespace {

class Parser {
 public:
  explicit Parser(const std::string& text) : text_(text) {}

  Value Document() {
    Value v = Parse();
    SkipSpace();
    if (pos_ != text_.size()) Fail("trailing characters");
    return v;
  }

 private:
  [[noreturn]] void Fail(const std::string& what) const {
    throw std::invalid_argument("tuner state JSON: " + what + " at offset " +
                                std::to_string(pos_));
  }
  void SkipSpace() {
    while (pos_ < text_.size() &&
           (text_[pos_] == ' ' || text_[pos_] == '\n' || text_[pos_] == '\t' ||
            text_[pos_] == '\r')) {
      ++pos_;
    }
  }
  bool Consume(const char* literal) {
    std::size_t n = 0;
    while (literal[n] != '\0') ++n;
    if (text_.compare(pos_, n, literal) != 0) return false;
    pos_ += n;
    return true;
  }
  void Expect(char c) {
    SkipSpace();
    if (pos_ >= text_.size() || text_[pos_] != c) {
      Fail(std::string("expected '") + c + "'");
    }
    ++pos_;
  }

  Value Parse() {
    if (++depth_ > 64) Fail("nesting too deep");
    SkipSpace();
    if (pos_ >= text_.size()) Fail("unexpected end");
    Value v;
    const char c = text_[pos_];
    if (c == '{') {
      v.type = Value::Type::kObject;
      ++pos_;
      SkipSpace();
      if (pos_ < text_.size() && text_[pos_] == '}') {
        ++pos_;
      } else {
        while (true) {
          SkipSpace();
          std::string key = String();
          Expect(':');
          v.object.emplace_back(std::move(key), Parse());
          SkipSpace();
          if (pos_ < text_.size() && text_[pos_] == ',') {
            ++pos_;
            continue;
          }
          Expect('}');
          break;
        }
      }
    } else if (c == '[') {
      v.type = Value::Type::kArray;
      ++pos_;
      SkipSpace();
      if (pos_ < text_.size() && text_[pos_] == ']') {
        ++pos_;
      } else {
        while (true) {
          v.array.push_back(Parse());
          SkipSpace();
          if (pos_ < text_.size() && text_[pos_] == ',') {
            ++pos_;
            continue;
          }
          Expect(']');
          break;
        }
      }
    } else if (c == '"') {
      v.type = Value::Type::kString;
      v.string = String();
    } else if (Consume("true")) {
      v.type = Value::Type::kBool;
      v.boolean = true;
    } else if (Consume("false")) {
      v.type = Value::Type::kBool;
    } else if (Consume("null")) {
      v.type = Value::Type::kNull;
    } else {
      v.type = Value::Type::kNumber;
      const char* begin = text_.c_str() + pos_;
      char* end = nullptr;
      v.number = std::strtod(begin, &end);
      if (end == begin || !std::isfinite(v.number)) Fail("bad number");
      pos_ += static_cast<std::size_t>(end - begin);
    }
    --depth_;
    return v;
  }

  std::string String() {
    if (pos_ >= text_.size() || text_[pos_] != '"') Fail("expected string");
    ++pos_;
    std::string out;
    while (pos_ < text_.size() && text_[pos_] != '"') {
      char c = text_[pos_++];
      if (c == '\\') {
        if (pos_ >= text_.size()) Fail("bad escape");
        const char e = text_[pos_++];
        switch (e) {
          case 'n':
            c = '\n';
            break;
          case 't':
            c = '\t';
            break;
          case 'r':
            c = '\r';
            break;
          case 'b':
            c = '\b';
            break;
          case 'f':
            c = '\f';
            break;
          case 'u': {
            if (pos_ + 4 > text_.size()) Fail("bad escape");
            const unsigned long code =
                std::strtoul(text_.substr(pos_, 4).c_str(), nullptr, 16);
            pos_ += 4;
            if (code > 0x7f) Fail("non-ASCII escape");
            c = static_cast<char>(code);
            break;
          }
          default:
            c = e;
            break;
        }
      }
      out.push_back(c);
    }
    if (pos_ >= text_.size()) Fail("unterminated string");
    ++pos_;
    return out;
  }

  const std::string& text_;
  std::size_t pos_ = 0;
  int depth_ = 0;
};

}  // namespace

const Value& Value::at(const std::string& key) const {
  for (const auto& [k, v] : object) {
    if (k == key) return v;
  }
  throw std::invalid_argument("tuner state JSON: missing member '" + key + "'");
}

bool Value::has(const std::string& key) const {
  for (const auto& member : object) {
    if (member.first == key) return true;
  }
  return false;
}

double Value::AsNumber() const {
  if (type != Type::kNumber)
    throw std::invalid_argument("tuner state JSON: expected number");
  return number;
}

bool Value::AsBool() const {
  if (type != Type::kBool)
    throw std::invalid_argument("tuner state JSON: expected bool");
  return boolean;
}

const std::string& Value::AsString() const {
  if (type != Type::kString)
    throw std::invalid_argument("tuner state JSON: expected string");
  return string;
}

const std::vector<Value>& Value::AsArray() const {
  if (type != Type::kArray)
    throw std::invalid_argument("tuner state JSON: expected array");
  return array;
}

std::vector<double> Value::AsNumbers() const {
  std::vector<double> out;
  for (const Value& v : AsArray()) out.push_back(v.AsNumber());
  return out;
}

Value Parse(const std::string& text) { return Parser(text).Document(); }

std::string Number(double value) {
  if (!std::isfinite(value))
    throw std::invalid_argument("non-finite number in tuner state");
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.17g", value);
  return buf;
}

std::string Quote(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          out += buf;
        } else {
          out.push_back(c);
        }
    }
  }
  return out + "\"";
}

std::string Numbers(const std::vector<double>& values) {
  std::string out = "[";
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out += ",";
    out += Number(values[i]);
  }
  return out + "]";
}

}  // namespace hvdtune::tuner::json
