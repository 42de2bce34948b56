// The fuzz targets, by name: each takes arbitrary bytes and aborts on a bug (fuzz_targets.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace tpcomm::fuzz {

struct Target {
  std::string_view name;
  void (*run)(const std::uint8_t* data, std::size_t size);
};

const std::vector<Target>& targets();
// Stops what the targets started (the store target's server) before the process exits.
void stop_targets();

}  // namespace tpcomm::fuzz
