// Creating, mapping and unlinking the shm backend's segment. Its name carries the creator's pid
// and pid namespace (common/segment_names.hpp) so that tpcomm run, and the next creator, can
// remove a segment whose creator died before unlinking it.
#pragma once

#include <cstddef>
#include <string>

namespace tpcomm::transport::shm {

class Segment {
 public:
  Segment() = default;
  ~Segment();
  Segment(const Segment&) = delete;
  Segment& operator=(const Segment&) = delete;

  // Creates and reserves `bytes` (posix_fallocate, so a full /dev/shm is an error now rather
  // than a SIGBUS later); throws kUnavailable saying how much is needed and how to get it.
  void create(const std::string& name, std::size_t bytes, const std::string& workspace_hint);
  // Maps a segment another rank created.
  void open(const std::string& name, std::size_t bytes);
  // Removes the name (the mapping stays valid).
  void unlink();

  void* base() const { return base_; }
  const std::string& name() const { return name_; }

 private:
  void* base_ = nullptr;
  std::size_t bytes_ = 0;
  std::string name_;
  bool linked_ = false;
};

// The refusal when /dev/shm has less free space than a segment needs (exact sizes and what to do).
std::string no_space_message(std::size_t needed, std::size_t free_bytes,
                             const std::string& workspace_hint);

}  // namespace tpcomm::transport::shm
