// The typed registry of every environment variable tpcomm reads (listed by `tpcomm env`). Code
// reads the environment only through these accessors, so `tpcomm env` can list all of them and a
// bad value is an error that names the variable.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tpcomm {

enum class EnvKind { kString, kPath, kInteger, kFlag, kChoice, kList };

struct EnvVar {
  std::string_view name;
  EnvKind kind;
  std::string_view default_value;  // empty: unset means "not given"
  std::string_view meaning;
  std::vector<std::string_view> choices;  // kChoice: allowed values; kList: allowed items
  std::int64_t min_value = 0;             // kInteger: inclusive bounds
  std::int64_t max_value = INT64_MAX;
  bool launch = false;  // set by a launcher (torchrun, mpirun), not by the user
  bool secret = false;  // never printed (`tpcomm env` says only that it is set)
};

// All variables, tpcomm's own first, then the launch environment.
const std::vector<EnvVar>& env_registry();

// The registry entry; throws kInternal for a name that is not registered (a bug).
const EnvVar& env_var(std::string_view name);

// Checks a value against its entry. Returns an empty string when valid, otherwise what is wrong.
std::string env_value_problem(const EnvVar& var, std::string_view value);

// Raw value, or nullopt when unset or empty.
std::optional<std::string> env_raw(std::string_view name);

// Typed accessors: the value, or the registered default; throw kInvalidInput naming the variable
// when the value is invalid.
std::string env_string(std::string_view name);
std::int64_t env_integer(std::string_view name);
bool env_flag(std::string_view name);
std::vector<std::string> env_list(std::string_view name);

// Splits "a, b,c" into {"a","b","c"} (empty items dropped).
std::vector<std::string> split_list(std::string_view text);

}  // namespace tpcomm
