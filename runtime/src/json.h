// A tiny JSON reader and string escaper, just enough for safetensors headers.
// Values are held in a simple tagged tree; numbers keep both an integer and a
// floating-point reading so integral offsets and shapes are exact up to 2^63.
// Parsing never throws: errors come back as a Status with the byte offset.
#ifndef OTCRT_JSON_H
#define OTCRT_JSON_H

#include "otcrt/status.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace otcrt {
namespace json {

/// A parsed JSON value.
struct Value {
  enum Kind { Null, Bool, Number, String, Array, Object };
  Kind kind = Null;
  bool boolean = false;
  bool isInteger = false; ///< Number written without fraction/exponent and in int64 range.
  int64_t integer = 0;
  double number = 0;
  std::string string;
  std::vector<Value> elements;                        ///< Array items.
  std::vector<std::pair<std::string, Value>> members; ///< Object members in order.

  /// Returns the member \p key of an object, or nullptr.
  const Value *get(const std::string &key) const;
};

/// Parses \p text (which must hold exactly one JSON value, surrounded by
/// optional whitespace). On error the message contains "byte offset N"
/// relative to \p baseOffset + position in \p text.
Status parse(const std::string &text, Value &out, int64_t baseOffset = 0);

/// Appends \p s to \p out as a quoted, escaped JSON string.
void appendQuoted(std::string &out, const std::string &s);

} // namespace json
} // namespace otcrt

#endif // OTCRT_JSON_H
