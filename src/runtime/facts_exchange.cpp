// Facts record codec: a 12-byte header (magic, version, reserved, payload length) and a JSON
// payload decoded with the facts codec.
#include "facts_exchange.hpp"

#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include "common/little_endian.hpp"

#include "tpcomm/error.hpp"
#include "tpcomm/facts_json.hpp"

namespace tpcomm::runtime {
namespace {

using common::get_le;
using common::put_le;

}  // namespace

Bytes encode_record(const RankRecord& r) {
  FactsTable one;
  one.ranks.push_back(r.facts);
  nlohmann::json j;
  j["facts"] = nlohmann::json::parse(encode_facts(one, -1));
  j["boot_id"] = r.boot_id;
  j["comm_id"] = fmt::format("{:016x}", r.comm_id);
  const std::string payload = j.dump();
  Bytes out;
  put_le(out, kRecordMagic, 4);
  put_le(out, kRecordVersion, 2);
  put_le(out, 0, 2);
  put_le(out, payload.size(), 4);
  out.insert(out.end(), payload.begin(), payload.end());
  return out;
}

RankRecord decode_record(const Bytes& bytes, int sender) {
  auto corrupt = [&](const std::string& why) {
    return invalid_input(fmt::format("facts record from rank {} is corrupt: {}", sender, why));
  };
  if (bytes.size() < 12)
    throw corrupt(fmt::format("{} bytes, shorter than its header", bytes.size()));
  if (get_le(bytes.data(), 4) != kRecordMagic) throw corrupt("bad magic number");
  if (auto v = get_le(bytes.data() + 4, 2); v != kRecordVersion) {
    throw corrupt(
        fmt::format("record version {} (this tpcomm speaks {}): are all ranks running "
                    "the same tpcomm?",
                    v, kRecordVersion));
  }
  const auto length = get_le(bytes.data() + 8, 4);
  if (length > kMaxRecordBytes)
    throw corrupt(fmt::format("length {} is above {}", length, kMaxRecordBytes));
  if (length != bytes.size() - 12) {
    throw corrupt(
        fmt::format("header says {} payload bytes, {} arrived", length, bytes.size() - 12));
  }
  try {
    auto j = nlohmann::json::parse(bytes.begin() + 12, bytes.end());
    RankRecord r;
    FactsTable t = decode_facts(j.at("facts").dump());
    if (t.ranks.size() != 1) throw corrupt(fmt::format("{} ranks in one record", t.ranks.size()));
    r.facts = t.ranks.front();
    r.boot_id = j.at("boot_id").get<std::string>();
    r.comm_id = std::stoull(j.at("comm_id").get<std::string>(), nullptr, 16);
    return r;
  } catch (const Error& e) {
    throw corrupt(e.what());
  } catch (const std::exception& e) {
    throw corrupt(e.what());
  }
}

}  // namespace tpcomm::runtime
