// Facts file codec (docs/facts.md): strict decoding with field paths, canonical encoding.
#include "tpcomm/facts_json.hpp"

#include <cctype>

#include <fmt/format.h>

#include "common/json_reader.hpp"
#include "tpcomm/error.hpp"

namespace tpcomm {
namespace {

using common::fail_at;
using common::Json;
using common::ObjectReader;

// Fields that only make sense for one device type: named in the error when misplaced.
const std::vector<std::string_view> kCudaOnlyFields = {"sm",  "nvlink_island", "p2p",   "multicast",
                                                       "vmm", "fabric_handle", "fabric"};
const std::vector<std::string_view> kCpuOnlyFields = {"isa"};

// Accepts 32 hex digits, with or without dashes; stores them lower-case as written.
std::string read_cluster_uuid(const Json& value, const std::string& path) {
  std::string text = common::read_string(value, path);
  int digits = 0;
  for (char& c : text) {
    if (std::isxdigit(static_cast<unsigned char>(c))) {
      c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      ++digits;
    } else if (c != '-') {
      fail_at(path, fmt::format("\"{}\" is not a uuid (32 hex digits, dashes allowed)", text));
    }
  }
  if (digits != 32) {
    fail_at(path,
            fmt::format("\"{}\" is not a uuid: it has {} hex digits, expected 32", text, digits));
  }
  return text;
}

std::optional<FabricInfo> read_fabric(const Json& value, const std::string& path) {
  if (value.is_null()) return std::nullopt;
  ObjectReader r(value, path);
  FabricInfo f;
  f.state = common::read_enum<FabricState>(r.required("state"), r.path_of("state"));
  if (const Json* v = r.optional("cluster_uuid"); v && !v->is_null()) {
    f.cluster_uuid = read_cluster_uuid(*v, r.path_of("cluster_uuid"));
  }
  if (const Json* v = r.optional("clique_id"); v && !v->is_null()) {
    f.clique_id = common::read_integer(*v, r.path_of("clique_id"), 0, UINT32_MAX);
  }
  r.reject_unknown();
  return f;
}

void reject_fields_of_other_type(const ObjectReader& r, DeviceType type) {
  const auto& foreign = type == DeviceType::kCuda ? kCpuOnlyFields : kCudaOnlyFields;
  for (auto key : foreign) {
    if (r.has(key)) {
      fail_at(r.path_of(key), fmt::format("not a field of a {} device", to_string(type)));
    }
  }
}

DeviceFacts read_device(const Json& value, const std::string& path) {
  ObjectReader r(value, path);
  DeviceFacts d;
  d.type = common::read_enum<DeviceType>(r.required("type"), r.path_of("type"));
  reject_fields_of_other_type(r, d.type);
  auto read_int = [&](std::string_view key, std::int64_t min, std::int64_t max) {
    return static_cast<int>(common::read_integer(r.required(key), r.path_of(key), min, max));
  };
  if (d.type == DeviceType::kCuda) {
    d.index = read_int("index", 0, 1023);
    d.sm = read_int("sm", 10, 999);
    if (const Json* v = r.optional("nvlink_island"); v && !v->is_null()) {
      d.nvlink_island =
          static_cast<int>(common::read_integer(*v, r.path_of("nvlink_island"), 0, 1'000'000));
    }
    d.p2p = common::read_bool(r.required("p2p"), r.path_of("p2p"));
    d.multicast = common::read_bool(r.required("multicast"), r.path_of("multicast"));
    d.vmm = common::read_bool(r.required("vmm"), r.path_of("vmm"));
    d.fabric_handle = common::read_bool(r.required("fabric_handle"), r.path_of("fabric_handle"));
    if (const Json* v = r.optional("fabric")) d.fabric = read_fabric(*v, r.path_of("fabric"));
  } else {
    if (const Json* v = r.optional("index")) {
      d.index = static_cast<int>(common::read_integer(*v, r.path_of("index"), 0, 1'000'000));
    }
    if (const Json* v = r.optional("isa")) {
      if (!v->is_array()) common::fail_expected(r.path_of("isa"), "an array of strings", *v);
      for (std::size_t i = 0; i < v->size(); ++i) {
        d.isa.push_back(common::read_string((*v)[i], common::index_path(r.path_of("isa"), i)));
      }
    }
  }
  if (const Json* v = r.optional("numa"); v && !v->is_null()) {
    d.numa = static_cast<int>(common::read_integer(*v, r.path_of("numa"), 0, 4095));
  }
  r.reject_unknown();
  return d;
}

struct RankEntry {
  RankFacts rank;
  int repeat = 1;
};

RankEntry read_rank_entry(const Json& value, const std::string& path, int ranks_so_far) {
  ObjectReader r(value, path);
  RankEntry e;
  if (const Json* v = r.optional("repeat")) {
    // Bounded before anything is allocated: `repeat: 1000000000` is an error, not 10^9 ranks.
    auto n = common::read_integer(*v, r.path_of("repeat"), 1, kMaxRanks);
    if (n > kMaxRanks - ranks_so_far) {
      fail_at(r.path_of("repeat"),
              fmt::format("{} would make the group {} ranks, more than the limit of {}", n,
                          n + ranks_so_far, kMaxRanks));
    }
    e.repeat = static_cast<int>(n);
  }
  e.rank.host = common::read_string(r.required("host"), r.path_of("host"));
  if (e.rank.host.empty() || e.rank.host.size() > 255) {
    fail_at(r.path_of("host"), "expected a host name of 1 to 255 characters");
  }
  e.rank.device = read_device(r.required("device"), r.path_of("device"));
  if (const Json* v = r.optional("allocator")) {
    e.rank.allocator = common::read_enum<Allocator>(*v, r.path_of("allocator"));
  }
  if (const Json* v = r.optional("mpi")) {
    e.rank.mpi = common::read_string(*v, r.path_of("mpi"));
    if (e.rank.mpi->empty() || e.rank.mpi->size() > 255) {
      fail_at(r.path_of("mpi"), "expected the MPI library's name, 1 to 255 characters");
    }
  }
  if (const Json* v = r.optional("comment")) {
    e.rank.comment = common::read_string(*v, r.path_of("comment"));
  }
  r.reject_unknown();
  return e;
}

}  // namespace

FactsTable decode_facts(std::string_view json_text) {
  Json doc = common::parse_json_strict(json_text);
  if (!doc.is_object()) {
    common::fail_expected("", "an object with \"tpcomm_facts\": 1 and \"ranks\"", doc);
  }
  ObjectReader root(doc, "");
  // The version first: a newer document probably has fields this version does not know.
  common::require_version(root, "tpcomm_facts", kFactsVersion, "facts");
  FactsTable table;
  if (const Json* v = root.optional("comment")) table.comment = common::read_string(*v, "comment");
  const Json& ranks = root.required("ranks");
  if (!ranks.is_array()) common::fail_expected("ranks", "an array of rank entries", ranks);
  if (ranks.empty()) fail_at("ranks", "empty: a group needs at least one rank");
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    // Bounded before decoding the entry: planning time grows with the square of the ranks.
    if (table.ranks.size() >= static_cast<std::size_t>(kMaxRanks)) {
      fail_at(common::index_path("ranks", i),
              fmt::format("the group already has {} ranks, the most a facts document may describe",
                          kMaxRanks));
    }
    RankEntry e = read_rank_entry(ranks[i], common::index_path("ranks", i),
                                  static_cast<int>(table.ranks.size()));
    for (int k = 0; k < e.repeat; ++k) {
      RankFacts copy = e.rank;
      if (copy.device.index) copy.device.index = *copy.device.index + k;
      table.ranks.push_back(std::move(copy));
    }
  }
  root.reject_unknown();
  return table;
}

namespace {

using OrderedJson = nlohmann::ordered_json;

OrderedJson encode_device(const DeviceFacts& d) {
  OrderedJson j;
  j["type"] = to_string(d.type);
  if (d.index) j["index"] = *d.index;
  if (d.type == DeviceType::kCuda) {
    j["sm"] = *d.sm;
    j["nvlink_island"] = d.nvlink_island ? OrderedJson(*d.nvlink_island) : OrderedJson(nullptr);
    j["p2p"] = d.p2p;
    j["multicast"] = d.multicast;
    j["vmm"] = d.vmm;
    j["fabric_handle"] = d.fabric_handle;
    if (d.fabric) {
      OrderedJson f;
      f["state"] = to_string(d.fabric->state);
      if (d.fabric->cluster_uuid) f["cluster_uuid"] = *d.fabric->cluster_uuid;
      if (d.fabric->clique_id) f["clique_id"] = *d.fabric->clique_id;
      j["fabric"] = f;
    } else {
      j["fabric"] = nullptr;
    }
  } else if (!d.isa.empty()) {
    j["isa"] = d.isa;
  }
  if (d.numa) j["numa"] = *d.numa;
  return j;
}

// True when `next` is `prev` with the device index one higher (or both without index).
bool continues_run(const RankFacts& prev, const RankFacts& next) {
  RankFacts shifted = prev;
  if (shifted.device.index) shifted.device.index = *shifted.device.index + 1;
  return shifted == next;
}

}  // namespace

std::string encode_facts(const FactsTable& table, int indent) {
  OrderedJson doc;
  doc["tpcomm_facts"] = kFactsVersion;
  if (table.comment) doc["comment"] = *table.comment;
  OrderedJson ranks = OrderedJson::array();
  for (std::size_t i = 0; i < table.ranks.size();) {
    std::size_t run = 1;
    while (i + run < table.ranks.size() &&
           continues_run(table.ranks[i + run - 1], table.ranks[i + run])) {
      ++run;
    }
    const RankFacts& r = table.ranks[i];
    OrderedJson entry;
    if (run > 1) entry["repeat"] = run;
    entry["host"] = r.host;
    entry["device"] = encode_device(r.device);
    entry["allocator"] = to_string(r.allocator);
    if (r.mpi) entry["mpi"] = *r.mpi;
    if (r.comment) entry["comment"] = *r.comment;
    ranks.push_back(entry);
    i += run;
  }
  doc["ranks"] = ranks;
  return doc.dump(indent) + "\n";
}

}  // namespace tpcomm
