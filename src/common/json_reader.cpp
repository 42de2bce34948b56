// Strict JSON reading with field paths (see detail/json_reader.hpp).
#include "common/json_reader.hpp"

#include <fmt/format.h>

#include "tpcomm/error.hpp"

namespace tpcomm::common {
namespace {

// Strips nlohmann's "[json.exception.parse_error.101] " prefix: users need the position and cause.
std::string clean_parse_message(std::string_view what) {
  auto close = what.find("] ");
  if (!what.empty() && what.front() == '[' && close != std::string_view::npos) {
    what.remove_prefix(close + 2);
  }
  return std::string(what);
}

}  // namespace

Json parse_json_strict(std::string_view text) {
  // Duplicate keys are silently merged by most parsers; reject them so that a typo such as two
  // "sm" fields in one device is seen. One key set per open object.
  std::vector<std::set<std::string>> open_objects;
  auto callback = [&](int /*depth*/, Json::parse_event_t event, Json& parsed) {
    switch (event) {
      case Json::parse_event_t::object_start:
        open_objects.emplace_back();
        break;
      case Json::parse_event_t::object_end:
        if (!open_objects.empty()) open_objects.pop_back();
        break;
      case Json::parse_event_t::key: {
        const auto& key = parsed.get_ref<const std::string&>();
        if (!open_objects.empty() && !open_objects.back().insert(key).second) {
          throw invalid_input(
              fmt::format("invalid JSON: duplicate key \"{}\" in one object (each field may "
                          "appear once)",
                          key));
        }
        break;
      }
      default:
        break;
    }
    return true;
  };
  // A NUL would end some readers' view of the text early; the rest must not be ignored.
  if (const auto nul = text.find('\0'); nul != std::string_view::npos) {
    throw invalid_input(fmt::format("invalid JSON: a NUL byte at offset {}", nul));
  }
  try {
    return Json::parse(text.begin(), text.end(), callback);
  } catch (const Json::parse_error& e) {
    throw invalid_input("invalid JSON: " + clean_parse_message(e.what()));
  } catch (const Json::out_of_range& e) {  // a number such as 1E400
    throw invalid_input("invalid JSON: " + clean_parse_message(e.what()));
  }
}

std::string describe_json_value(const Json& value) {
  switch (value.type()) {
    case Json::value_t::null:
      return "null";
    case Json::value_t::boolean:
      return value.get<bool>() ? "true" : "false";
    case Json::value_t::string:
      return fmt::format("the string {}", value.dump());
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned:
    case Json::value_t::number_float:
      return fmt::format("the number {}", value.dump());
    case Json::value_t::object:
      return "an object";
    case Json::value_t::array:
      return "an array";
    default:
      return "an unsupported value";
  }
}

std::string child_path(std::string_view parent, std::string_view key) {
  if (parent.empty()) return std::string(key);
  return fmt::format("{}.{}", parent, key);
}

std::string index_path(std::string_view parent, std::size_t index) {
  return fmt::format("{}[{}]", parent, index);
}

void fail_at(std::string_view path, std::string_view message) {
  if (path.empty()) throw invalid_input(fmt::format("document: {}", message));
  throw invalid_input(fmt::format("{}: {}", path, message));
}

void fail_expected(std::string_view path, std::string_view expected, const Json& got) {
  fail_at(path, fmt::format("expected {}, got {}", expected, describe_json_value(got)));
}

ObjectReader::ObjectReader(const Json& value, std::string path)
    : value_(value), path_(std::move(path)) {
  if (!value_.is_object()) fail_expected(path_, "an object", value_);
}

bool ObjectReader::has(std::string_view key) const {
  return value_.contains(key);
}

const Json* ObjectReader::optional(std::string_view key) {
  read_.insert(std::string(key));
  auto it = value_.find(key);
  return it == value_.end() ? nullptr : &*it;
}

const Json& ObjectReader::required(std::string_view key) {
  const Json* found = optional(key);
  if (found == nullptr) fail_at(path_, fmt::format("missing required field \"{}\"", key));
  return *found;
}

void ObjectReader::reject_unknown() const {
  for (const auto& [key, unused] : value_.items()) {
    if (read_.find(key) == read_.end()) {
      fail_at(path_of(key),
              fmt::format("unknown field (allowed here: {})", fmt::join(read_, ", ")));
    }
  }
}

std::int64_t read_integer(const Json& value, std::string_view path, std::int64_t min,
                          std::int64_t max) {
  if (value.is_number_unsigned()) {
    auto u = value.get<std::uint64_t>();
    if (u > static_cast<std::uint64_t>(max) || (min > 0 && u < static_cast<std::uint64_t>(min))) {
      fail_at(path, fmt::format("{} is out of range (expected {} to {})", u, min, max));
    }
    return static_cast<std::int64_t>(u);
  }
  if (!value.is_number_integer()) fail_expected(path, "an integer", value);
  auto n = value.get<std::int64_t>();
  if (n < min || n > max) {
    fail_at(path, fmt::format("{} is out of range (expected {} to {})", n, min, max));
  }
  return n;
}

bool read_bool(const Json& value, std::string_view path) {
  if (!value.is_boolean()) fail_expected(path, "true or false", value);
  return value.get<bool>();
}

std::string read_string(const Json& value, std::string_view path) {
  if (!value.is_string()) fail_expected(path, "a string", value);
  return value.get<std::string>();
}

void require_version(ObjectReader& root, std::string_view key, std::int64_t supported,
                     std::string_view format) {
  auto version = read_integer(root.required(key), key, INT64_MIN, INT64_MAX);
  if (version != supported) {
    fail_at(key, fmt::format("version {} is not supported: this tpcomm reads {} version {}",
                             version, format, supported));
  }
}

std::size_t read_choice(const Json& value, std::string_view path,
                        const std::vector<std::string_view>& choices) {
  auto quoted = [&] {
    std::vector<std::string> q;
    for (auto c : choices) q.push_back(fmt::format("\"{}\"", c));
    return fmt::format("{}", fmt::join(q, ", "));
  };
  if (!value.is_string()) fail_expected(path, fmt::format("one of {}", quoted()), value);
  const auto& text = value.get_ref<const std::string&>();
  for (std::size_t i = 0; i < choices.size(); ++i) {
    if (choices[i] == text) return i;
  }
  fail_at(path, fmt::format("unknown value \"{}\" (expected one of {})", text, quoted()));
}

}  // namespace tpcomm::common
