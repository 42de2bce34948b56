// Tuning file codec (docs/tuning.md): strict decoding with field paths, canonical encoding.
#include <fmt/format.h>

#include "common/json_reader.hpp"
#include "tpcomm/error.hpp"
#include "tpcomm/tuning.hpp"

namespace tpcomm {
namespace {

using common::fail_at;
using common::Json;
using common::ObjectReader;

constexpr int kTuningVersion = 1;

std::string names_of(const std::vector<Backend>& backends) {
  std::vector<std::string_view> names;
  for (Backend b : backends) {
    if (b != Backend::kLocal) names.push_back(to_string(b));
  }
  return fmt::format("{}", fmt::join(names, ", "));
}

Candidate read_candidate(const Json& value, const std::string& path, DeviceType device, Op op) {
  ObjectReader r(value, path);
  Candidate c;
  std::string name = common::read_string(r.required("backend"), r.path_of("backend"));
  auto backend = from_string<Backend>(name);
  const auto& allowed = backends_of(device);
  if (!backend || std::find(allowed.begin(), allowed.end(), *backend) == allowed.end() ||
      *backend == Backend::kLocal) {
    fail_at(r.path_of("backend"), fmt::format("\"{}\" is not a backend of {} groups (one of: {})",
                                              name, to_string(device), names_of(allowed)));
  }
  c.backend = *backend;
  const auto& algorithms = algorithms_of(c.backend, op);
  if (const Json* v = r.optional("algorithm")) {
    std::vector<std::string_view> names;
    for (Algorithm a : algorithms) names.push_back(to_string(a));
    c.algorithm = algorithms[common::read_choice(*v, r.path_of("algorithm"), names)];
  } else {
    c.algorithm = algorithms.front();
  }
  if (const Json* v = r.optional("blocks")) {
    if (!takes_blocks(c.backend)) {
      fail_at(r.path_of("blocks"),
              fmt::format("backend {} takes no block count (only custom and multimem do)", name));
    }
    c.blocks = static_cast<int>(common::read_integer(*v, r.path_of("blocks"), 1, 1024));
  }
  if (const Json* v = r.optional("step_bytes")) {
    if (!takes_step(c.backend)) {
      fail_at(r.path_of("step_bytes"),
              fmt::format("backend {} takes no step size (only shm does)", name));
    }
    c.step_bytes = static_cast<std::uint64_t>(
        common::read_integer(*v, r.path_of("step_bytes"), static_cast<std::int64_t>(kMinStepBytes),
                             static_cast<std::int64_t>(kMaxStepBytes)));
    if (*c.step_bytes % 64 != 0) {
      fail_at(r.path_of("step_bytes"),
              fmt::format("{} is not a multiple of 64 bytes (a cache line)", *c.step_bytes));
    }
  }
  r.reject_unknown();
  return c;
}

std::vector<TuningRow> read_rows(const Json& value, const std::string& path, DeviceType device,
                                 Op op) {
  if (!value.is_array() || value.empty()) {
    common::fail_expected(path, "a non-empty array of size ranges", value);
  }
  std::vector<TuningRow> rows;
  for (std::size_t i = 0; i < value.size(); ++i) {
    const std::string row_path = common::index_path(path, i);
    ObjectReader r(value[i], row_path);
    TuningRow row;
    const Json& max = r.required("max_bytes");
    const bool last = i + 1 == value.size();
    if (max.is_null()) {
      if (!last) {
        fail_at(r.path_of("max_bytes"), "null (no limit) is only allowed in the last range");
      }
    } else {
      row.max_bytes = static_cast<std::uint64_t>(
          common::read_integer(max, r.path_of("max_bytes"), 0, INT64_MAX));
      if (!rows.empty() && *row.max_bytes <= *rows.back().max_bytes) {
        fail_at(r.path_of("max_bytes"),
                fmt::format("{} is not above the previous range's {}: ranges must grow",
                            *row.max_bytes, *rows.back().max_bytes));
      }
      if (last) {
        fail_at(r.path_of("max_bytes"),
                "the last range must have max_bytes null so that every size is covered");
      }
    }
    const Json& use = r.required("use");
    if (!use.is_array() || use.empty()) {
      common::fail_expected(r.path_of("use"), "a non-empty array of backends to try", use);
    }
    for (std::size_t k = 0; k < use.size(); ++k) {
      row.use.push_back(
          read_candidate(use[k], common::index_path(r.path_of("use"), k), device, op));
    }
    r.reject_unknown();
    rows.push_back(std::move(row));
  }
  return rows;
}

std::string key_text(const TuningKey& k) {
  std::string text(to_string(k.device));
  if (k.sm) text += fmt::format(" sm {}", *k.sm);
  text += fmt::format(" world size {}", k.world_size);
  text += k.mode ? fmt::format(" {}", to_string(*k.mode)) : std::string(" (both modes)");
  return text;
}

TuningEntry read_entry(const Json& value, const std::string& path) {
  ObjectReader r(value, path);
  TuningEntry e;
  e.key.device = common::read_enum<DeviceType>(r.required("device"), r.path_of("device"));
  if (e.key.device == DeviceType::kCuda) {
    e.key.sm = static_cast<int>(common::read_integer(r.required("sm"), r.path_of("sm"), 10, 999));
  } else if (r.has("sm")) {
    fail_at(r.path_of("sm"), "cpu entries take no sm");
  }
  e.key.world_size = static_cast<int>(
      common::read_integer(r.required("world_size"), r.path_of("world_size"), 2, kMaxRanks));
  if (const Json* v = r.optional("mode")) {
    e.key.mode = common::read_enum<Mode>(*v, r.path_of("mode"));
  }
  if (const Json* v = r.optional("comment")) common::read_string(*v, r.path_of("comment"));
  if (const Json* v = r.optional("team_min_bytes")) {
    if (e.key.device != DeviceType::kCpu) {
      fail_at(r.path_of("team_min_bytes"), "only cpu entries take team_min_bytes");
    }
    e.team_min_bytes = static_cast<std::uint64_t>(
        common::read_integer(*v, r.path_of("team_min_bytes"), 0, std::int64_t{1} << 40));
  }
  ObjectReader ops(r.required("ops"), r.path_of("ops"));
  for (Op op : kAllOps) {
    if (const Json* v = ops.optional(to_string(op))) {
      e.ops[op] = read_rows(*v, ops.path_of(to_string(op)), e.key.device, op);
    }
  }
  ops.reject_unknown();
  if (e.ops.empty())
    fail_at(r.path_of("ops"),
            fmt::format("no operation given ({})", fmt::join(tpcomm::names_of<Op>(), ", ")));
  r.reject_unknown();
  return e;
}

}  // namespace

Tuning decode_tuning(std::string_view json_text, std::string source) {
  Json doc = common::parse_json_strict(json_text);
  if (!doc.is_object()) {
    common::fail_expected("", "an object with \"tpcomm_tuning\": 1 and \"entries\"", doc);
  }
  ObjectReader root(doc, "");
  common::require_version(root, "tpcomm_tuning", kTuningVersion, "tuning");
  if (const Json* v = root.optional("comment")) common::read_string(*v, "comment");
  const Json& entries = root.required("entries");
  if (!entries.is_array()) common::fail_expected("entries", "an array of entries", entries);
  Tuning t;
  t.source = std::move(source);
  for (std::size_t i = 0; i < entries.size(); ++i) {
    TuningEntry e = read_entry(entries[i], common::index_path("entries", i));
    for (std::size_t k = 0; k < t.entries.size(); ++k) {
      if (t.entries[k].key == e.key) {
        fail_at(common::index_path("entries", i),
                fmt::format("same key ({}) as entries[{}]: each key may appear once",
                            key_text(e.key), k));
      }
    }
    t.entries.push_back(std::move(e));
  }
  root.reject_unknown();
  return t;
}

std::string encode_tuning(const Tuning& tuning, int indent) {
  using OrderedJson = nlohmann::ordered_json;
  OrderedJson doc;
  doc["tpcomm_tuning"] = kTuningVersion;
  doc["comment"] = fmt::format("tuning tables ({})", tuning.source);
  OrderedJson entries = OrderedJson::array();
  for (const auto& e : tuning.entries) {
    OrderedJson je;
    je["device"] = to_string(e.key.device);
    if (e.key.sm) je["sm"] = *e.key.sm;
    je["world_size"] = e.key.world_size;
    if (e.key.mode) je["mode"] = to_string(*e.key.mode);
    if (e.team_min_bytes) je["team_min_bytes"] = *e.team_min_bytes;
    OrderedJson ops;
    for (const auto& [op, rows] : e.ops) {
      OrderedJson jrows = OrderedJson::array();
      for (const auto& row : rows) {
        OrderedJson jr;
        jr["max_bytes"] = row.max_bytes ? OrderedJson(*row.max_bytes) : OrderedJson(nullptr);
        OrderedJson use = OrderedJson::array();
        for (const auto& c : row.use) {
          OrderedJson jc;
          jc["backend"] = to_string(c.backend);
          jc["algorithm"] = to_string(c.algorithm);
          if (c.blocks) jc["blocks"] = *c.blocks;
          if (c.step_bytes) jc["step_bytes"] = *c.step_bytes;
          use.push_back(jc);
        }
        jr["use"] = use;
        jrows.push_back(jr);
      }
      ops[std::string(to_string(op))] = jrows;
    }
    je["ops"] = ops;
    entries.push_back(je);
  }
  doc["entries"] = entries;
  return doc.dump(indent) + "\n";
}

}  // namespace tpcomm
