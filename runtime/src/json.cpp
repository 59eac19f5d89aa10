// Implementation of the tiny JSON reader used for safetensors headers: a
// recursive-descent parser with a nesting limit, full string escapes
// (including \u surrogate pairs encoded as UTF-8) and precise error offsets.
#include "json.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>

namespace otcrt {
namespace json {

const Value *Value::get(const std::string &key) const {
  if (kind != Object)
    return nullptr;
  for (const auto &member : members)
    if (member.first == key)
      return &member.second;
  return nullptr;
}

namespace {

constexpr int kMaxDepth = 64;

class Parser {
public:
  Parser(const std::string &text, int64_t base) : text_(text), base_(base) {}

  /// Parses the whole input into \p out.
  Status run(Value &out) {
    skipSpace();
    Status s = parseValue(out, 0);
    if (!s)
      return s;
    skipSpace();
    if (pos_ != text_.size())
      return fail("unexpected trailing characters");
    return Status::ok();
  }

private:
  Status fail(const std::string &what) const {
    return Status::error(what + " at byte offset " +
                         std::to_string(base_ + static_cast<int64_t>(pos_)));
  }

  void skipSpace() {
    while (pos_ < text_.size() &&
           (text_[pos_] == ' ' || text_[pos_] == '\t' || text_[pos_] == '\n' ||
            text_[pos_] == '\r'))
      ++pos_;
  }

  bool consumeWord(const char *word) {
    size_t n = 0;
    while (word[n])
      ++n;
    if (text_.compare(pos_, n, word) != 0)
      return false;
    pos_ += n;
    return true;
  }

  Status parseValue(Value &out, int depth) {
    if (depth > kMaxDepth)
      return fail("JSON nested too deeply");
    if (pos_ >= text_.size())
      return fail("unexpected end of JSON");
    char c = text_[pos_];
    if (c == '{')
      return parseObject(out, depth);
    if (c == '[')
      return parseArray(out, depth);
    if (c == '"') {
      out.kind = Value::String;
      return parseString(out.string);
    }
    if (c == 't' && consumeWord("true")) {
      out.kind = Value::Bool;
      out.boolean = true;
      return Status::ok();
    }
    if (c == 'f' && consumeWord("false")) {
      out.kind = Value::Bool;
      out.boolean = false;
      return Status::ok();
    }
    if (c == 'n' && consumeWord("null")) {
      out.kind = Value::Null;
      return Status::ok();
    }
    if (c == '-' || (c >= '0' && c <= '9'))
      return parseNumber(out);
    return fail(std::string("unexpected character '") + c + "'");
  }

  Status parseObject(Value &out, int depth) {
    out.kind = Value::Object;
    ++pos_; // '{'
    skipSpace();
    if (pos_ < text_.size() && text_[pos_] == '}') {
      ++pos_;
      return Status::ok();
    }
    while (true) {
      skipSpace();
      if (pos_ >= text_.size() || text_[pos_] != '"')
        return fail("expected '\"' to start an object key");
      std::string key;
      Status s = parseString(key);
      if (!s)
        return s;
      skipSpace();
      if (pos_ >= text_.size() || text_[pos_] != ':')
        return fail("expected ':' after object key");
      ++pos_;
      skipSpace();
      Value member;
      s = parseValue(member, depth + 1);
      if (!s)
        return s;
      out.members.emplace_back(std::move(key), std::move(member));
      skipSpace();
      if (pos_ < text_.size() && text_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (pos_ < text_.size() && text_[pos_] == '}') {
        ++pos_;
        return Status::ok();
      }
      return fail("expected ',' or '}' in object");
    }
  }

  Status parseArray(Value &out, int depth) {
    out.kind = Value::Array;
    ++pos_; // '['
    skipSpace();
    if (pos_ < text_.size() && text_[pos_] == ']') {
      ++pos_;
      return Status::ok();
    }
    while (true) {
      skipSpace();
      Value element;
      Status s = parseValue(element, depth + 1);
      if (!s)
        return s;
      out.elements.push_back(std::move(element));
      skipSpace();
      if (pos_ < text_.size() && text_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (pos_ < text_.size() && text_[pos_] == ']') {
        ++pos_;
        return Status::ok();
      }
      return fail("expected ',' or ']' in array");
    }
  }

  static void appendUtf8(std::string &out, uint32_t cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }

  bool readHex4(uint32_t &cp) {
    if (pos_ + 4 > text_.size())
      return false;
    cp = 0;
    for (int i = 0; i < 4; ++i) {
      char h = text_[pos_ + i];
      cp <<= 4;
      if (h >= '0' && h <= '9')
        cp |= h - '0';
      else if (h >= 'a' && h <= 'f')
        cp |= h - 'a' + 10;
      else if (h >= 'A' && h <= 'F')
        cp |= h - 'A' + 10;
      else
        return false;
    }
    pos_ += 4;
    return true;
  }

  Status parseString(std::string &out) {
    ++pos_; // opening quote
    while (true) {
      if (pos_ >= text_.size())
        return fail("unterminated string");
      char c = text_[pos_];
      if (c == '"') {
        ++pos_;
        return Status::ok();
      }
      if (static_cast<unsigned char>(c) < 0x20)
        return fail("control character in string");
      if (c != '\\') {
        out += c;
        ++pos_;
        continue;
      }
      ++pos_;
      if (pos_ >= text_.size())
        return fail("unterminated escape sequence");
      char e = text_[pos_++];
      switch (e) {
      case '"': out += '"'; break;
      case '\\': out += '\\'; break;
      case '/': out += '/'; break;
      case 'b': out += '\b'; break;
      case 'f': out += '\f'; break;
      case 'n': out += '\n'; break;
      case 'r': out += '\r'; break;
      case 't': out += '\t'; break;
      case 'u': {
        uint32_t cp;
        if (!readHex4(cp))
          return fail("invalid \\u escape");
        if (cp >= 0xD800 && cp < 0xDC00) {
          uint32_t low;
          if (pos_ + 2 > text_.size() || text_[pos_] != '\\' ||
              text_[pos_ + 1] != 'u')
            return fail("unpaired surrogate in \\u escape");
          pos_ += 2;
          if (!readHex4(low) || low < 0xDC00 || low >= 0xE000)
            return fail("invalid low surrogate in \\u escape");
          cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
        } else if (cp >= 0xDC00 && cp < 0xE000) {
          return fail("unpaired surrogate in \\u escape");
        }
        appendUtf8(out, cp);
        break;
      }
      default:
        --pos_;
        return fail(std::string("invalid escape '\\") + e + "'");
      }
    }
  }

  Status parseNumber(Value &out) {
    size_t start = pos_;
    bool integral = true;
    if (text_[pos_] == '-')
      ++pos_;
    if (pos_ >= text_.size() || !(text_[pos_] >= '0' && text_[pos_] <= '9'))
      return fail("invalid number");
    if (text_[pos_] == '0') {
      ++pos_;
    } else {
      while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9')
        ++pos_;
    }
    if (pos_ < text_.size() && text_[pos_] == '.') {
      integral = false;
      ++pos_;
      if (pos_ >= text_.size() || !(text_[pos_] >= '0' && text_[pos_] <= '9'))
        return fail("invalid number");
      while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9')
        ++pos_;
    }
    if (pos_ < text_.size() && (text_[pos_] == 'e' || text_[pos_] == 'E')) {
      integral = false;
      ++pos_;
      if (pos_ < text_.size() && (text_[pos_] == '+' || text_[pos_] == '-'))
        ++pos_;
      if (pos_ >= text_.size() || !(text_[pos_] >= '0' && text_[pos_] <= '9'))
        return fail("invalid number");
      while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9')
        ++pos_;
    }
    std::string literal = text_.substr(start, pos_ - start);
    out.kind = Value::Number;
    out.number = std::strtod(literal.c_str(), nullptr);
    if (integral) {
      errno = 0;
      long long v = std::strtoll(literal.c_str(), nullptr, 10);
      if (errno == 0) {
        out.isInteger = true;
        out.integer = v;
      }
    }
    return Status::ok();
  }

  const std::string &text_;
  int64_t base_;
  size_t pos_ = 0;
};

} // namespace

Status parse(const std::string &text, Value &out, int64_t baseOffset) {
  out = Value();
  return Parser(text, baseOffset).run(out);
}

void appendQuoted(std::string &out, const std::string &s) {
  out += '"';
  for (unsigned char c : s) {
    switch (c) {
    case '"': out += "\\\""; break;
    case '\\': out += "\\\\"; break;
    case '\n': out += "\\n"; break;
    case '\r': out += "\\r"; break;
    case '\t': out += "\\t"; break;
    case '\b': out += "\\b"; break;
    case '\f': out += "\\f"; break;
    default:
      if (c < 0x20) {
        char buf[8];
        std::snprintf(buf, sizeof(buf), "\\u%04x", c);
        out += buf;
      } else {
        out += static_cast<char>(c);
      }
    }
  }
  out += '"';
}

} // namespace json
} // namespace otcrt
