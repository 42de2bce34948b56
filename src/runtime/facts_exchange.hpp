// What each rank sends in the facts exchange: its facts and boot id, in a versioned,
// length-prefixed, size-checked record. A record that does not decode is an error
// naming the sender.
#pragma once

#include <cstdint>
#include <string>

#include "tpcomm/facts.hpp"
#include "tpcomm/store.hpp"

namespace tpcomm::runtime {

constexpr std::uint32_t kRecordMagic = 0x52465054;  // "TPFR"
// Also the version of what ranks exchange after it (shm's lane headers, Gloo's messages): ranks
// of builds that would not understand each other's calls fail at creation, naming the version,
// instead of timing out in their first call. 2: every Gloo call opens with the exchange of
// transport/gloo/gloo_opening_exchange.hpp. 3: the facts may say `mpi`, and the hier_mpi backend
// exists.
constexpr std::uint16_t kRecordVersion = 3;
constexpr std::size_t kMaxRecordBytes = std::size_t{64} * 1024;

struct RankRecord {
  RankFacts facts;
  std::string boot_id;
  std::string probe_name;     // shared-memory segment this rank created for the node probe
  std::string probe_token;    // what the segment holds
  std::uint64_t comm_id = 0;  // rank 0's choice: names this communicator's store keys
};

Bytes encode_record(const RankRecord& record);
// Throws kInvalidInput "facts record from rank N is corrupt: ...".
RankRecord decode_record(const Bytes& bytes, int sender);

}  // namespace tpcomm::runtime
