// Creating, mapping and unlinking the shm backend's segment. Its name carries the creator's pid
// and pid namespace (common/segment_names.hpp) so that tpcomm run, and the next creator, can
// remove a segment whose creator died before unlinking it.
#pragma once

#include <cstddef>
#include <string>

namespace tpcomm::transport::shm {

// Where the pages of a segment come from: the creator reserves only what it owns (`own_bytes`
// from the start), every other rank reserves its own range once it has opened the segment, and
// nobody touches the rest before the range's owner has reserved it. A tmpfs page lives on the
// NUMA node of the CPU that allocates it, so each rank's lane, which that rank writes and the
// others read, sits on its writer's node; when the creator allocated everything, every lane sat
// on rank 0's node and a rank on the other socket wrote each step across the interconnect.
class Segment {
 public:
  Segment() = default;
  ~Segment();
  Segment(const Segment&) = delete;
  Segment& operator=(const Segment&) = delete;

  // Creates a segment of `bytes` and reserves its first `own_bytes` (posix_fallocate); /dev/shm
  // must have room for all of `bytes`, or kUnavailable says how much is needed and how to get it.
  void create(const std::string& name, std::size_t bytes, std::size_t own_bytes,
              const std::string& workspace_hint);
  // Maps a segment another rank created.
  void open(const std::string& name, std::size_t bytes);
  // Reserves [offset, offset + length): pages allocated now, by this process, so a full /dev/shm
  // is an error here (kUnavailable) rather than a SIGBUS later.
  void reserve(std::size_t offset, std::size_t length, const std::string& workspace_hint);
  // Maps every page in this process (once every range is reserved), so that no call pays a page
  // fault on its first touch of a lane.
  void populate();
  // Removes the name (the mapping stays valid).
  void unlink();

  void* base() const { return base_; }
  const std::string& name() const { return name_; }

 private:
  void map(int fd, std::size_t bytes);
  void close_fd();

  void* base_ = nullptr;
  std::size_t bytes_ = 0;
  std::string name_;
  bool linked_ = false;
  int fd_ = -1;  // kept until populate(), for reserve()
};

// The refusal when /dev/shm has less free space than a segment needs (exact sizes and what to do).
std::string no_space_message(std::size_t needed, std::size_t free_bytes,
                             const std::string& workspace_hint);

}  // namespace tpcomm::transport::shm
