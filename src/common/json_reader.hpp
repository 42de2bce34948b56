// Strict JSON reading with field paths, shared by the facts and tuning codecs: every error names
// the path of the offending field and what was found there.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "tpcomm/types.hpp"

namespace tpcomm::common {

using Json = nlohmann::json;

// Parses text; syntax errors and duplicate keys become kInvalidInput errors with line and column.
Json parse_json_strict(std::string_view text);

// 'the string "90"', 'the number 90.5', 'null', 'an object', 'an array', 'true'.
std::string describe_json_value(const Json& value);

// Joins a parent path and a key: ("", "ranks") -> "ranks", ("ranks[0]", "host") -> "ranks[0].host".
std::string child_path(std::string_view parent, std::string_view key);
std::string index_path(std::string_view parent, std::size_t index);

// Reads the fields of one JSON object and remembers which keys were read, so that anything else
// can be rejected as an unknown field.
class ObjectReader {
 public:
  ObjectReader(const Json& value, std::string path);

  const Json* optional(std::string_view key);  // nullptr when absent
  const Json& required(std::string_view key);  // throws naming the missing field
  bool has(std::string_view key) const;
  std::string path_of(std::string_view key) const { return child_path(path_, key); }
  const std::string& path() const { return path_; }
  // Throws for the first key that was not read, listing the allowed ones.
  void reject_unknown() const;

 private:
  const Json& value_;
  std::string path_;
  std::set<std::string, std::less<>> read_;
};

[[noreturn]] void fail_at(std::string_view path, std::string_view message);
[[noreturn]] void fail_expected(std::string_view path, std::string_view expected, const Json& got);

std::int64_t read_integer(const Json& value, std::string_view path, std::int64_t min,
                          std::int64_t max);
bool read_bool(const Json& value, std::string_view path);
std::string read_string(const Json& value, std::string_view path);
// Reads the format version at `key` of the root object and refuses any other than `supported`.
// `format` names the format in the message ("facts", "tuning").
void require_version(ObjectReader& root, std::string_view key, std::int64_t supported,
                     std::string_view format);
// Returns the index of the value in `choices`.
std::size_t read_choice(const Json& value, std::string_view path,
                        const std::vector<std::string_view>& choices);

// Reads one value of a vocabulary enum by its name (types.hpp: Names<E>).
template <typename E>
E read_enum(const Json& value, std::string_view path) {
  return Names<E>::table[read_choice(value, path, names_of<E>())].value;
}

}  // namespace tpcomm::common
