// The worker's exchange and rooted checks (worker_exchanges.hpp).
#include "worker_exchanges.hpp"

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <set>
#include <vector>

namespace tpcomm::test {
namespace {

// Element i of what rank `from` sends rank `to`, in the type's width: distinct for every
// (from, to, i), so a block in the wrong place or a shifted element shows.
std::uint64_t bits(int from, int to, std::size_t i, DataType t) {
  const std::uint64_t v = static_cast<std::uint64_t>(from) * 131 +
                          static_cast<std::uint64_t>(to) * 17 + i * 2654435761u;
  return size_of(t) == 8 ? v * 0x9e3779b97f4a7c15ULL : v & 0xffffu;
}
// A small integer as the type's bits: exact in bfloat16 sums of a few ranks.
std::uint64_t small(std::int64_t v, DataType t) {
  if (t == DataType::kInt64) return static_cast<std::uint64_t>(v);
  const float f = static_cast<float>(v);
  std::uint32_t u = 0;
  std::memcpy(&u, &f, 4);
  return u >> 16;
}
std::int64_t input_value(int r, std::size_t i) {
  return static_cast<std::int64_t>((static_cast<std::size_t>(r) * 5 + i) % 11) - 3;
}

struct Buffer {
  Buffer(std::size_t n, DataType t) : type(t), bytes(n * size_of(t), 0xa5) {}
  void put(std::size_t at, std::uint64_t v) {
    std::memcpy(&bytes[at * size_of(type)], &v, size_of(type));
  }
  std::uint64_t get(std::size_t at) const {
    std::uint64_t v = 0;
    std::memcpy(&v, &bytes[at * size_of(type)], size_of(type));
    return v;
  }
  void* data() { return bytes.data(); }
  DataType type;
  std::vector<std::uint8_t> bytes;
};

struct Checks {
  int rank, failures = 0, count = 0;
  void expect(bool ok, const char* what, int peer, std::size_t i) {
    if (ok) return;
    if (failures++ < 5) {
      std::printf("rank %d: %s: rank %d's element %zu wrong\n", rank, what, peer, i);
    }
  }
};

// Rank s's block for rank d: uneven, some empty.
std::size_t split(int s, int d) {
  static const std::size_t sizes[] = {0, 1, 7, 1000, 0, 30001, 3};
  return sizes[static_cast<std::size_t>(s * 3 + d * 5) % 7];
}

void exchanges(Communicator& comm, DataType t, std::size_t n, Checks& k) {
  const int w = comm.size(), me = comm.rank();
  const auto uw = static_cast<std::size_t>(w);
  Buffer in(n * uw, t), out(n * uw, t);
  for (int d = 0; d < w; ++d)
    for (std::size_t i = 0; i < n; ++i)
      in.put(static_cast<std::size_t>(d) * n + i, bits(me, d, i, t));
  comm.all_to_all(in.data(), out.data(), n, t);
  for (int s = 0; s < w; ++s)
    for (std::size_t i = 0; i < n; ++i)
      k.expect(out.get(static_cast<std::size_t>(s) * n + i) == bits(s, me, i, t), "all_to_all", s,
               i);
  std::vector<std::size_t> sends, receives;
  for (int r = 0; r < w; ++r) {
    sends.push_back(split(me, r));
    receives.push_back(split(r, me));
  }
  std::size_t total_in = 0, total_out = 0;
  for (int r = 0; r < w; ++r) total_in += sends[static_cast<std::size_t>(r)];
  for (int r = 0; r < w; ++r) total_out += receives[static_cast<std::size_t>(r)];
  Buffer vin(total_in, t), vout(total_out, t);
  std::size_t at = 0;
  for (int d = 0; d < w; ++d)
    for (std::size_t i = 0; i < sends[static_cast<std::size_t>(d)]; ++i)
      vin.put(at++, bits(me, d, i, t));
  comm.all_to_allv(vin.data(), sends, vout.data(), receives, t);
  at = 0;
  for (int s = 0; s < w; ++s)
    for (std::size_t i = 0; i < receives[static_cast<std::size_t>(s)]; ++i)
      k.expect(vout.get(at++) == bits(s, me, i, t), "all_to_allv", s, i);
  // all_gatherv and reduce_scatterv: rank r's block split(r, 0) long.
  std::vector<std::size_t> counts, starts{0};
  for (int r = 0; r < w; ++r) {
    counts.push_back(split(r, 0));
    starts.push_back(starts.back() + counts.back());
  }
  const auto um = static_cast<std::size_t>(me);
  Buffer mine(counts[um], t), all(starts.back(), t);
  for (std::size_t i = 0; i < counts[um]; ++i) mine.put(i, bits(me, 0, i, t));
  comm.all_gatherv(mine.data(), all.data(), counts, t);
  for (int r = 0; r < w; ++r)
    for (std::size_t i = 0; i < counts[static_cast<std::size_t>(r)]; ++i)
      k.expect(all.get(starts[static_cast<std::size_t>(r)] + i) == bits(r, 0, i, t), "all_gatherv",
               r, i);
  Buffer whole(starts.back(), t), part(counts[um], t);
  for (std::size_t i = 0; i < starts.back(); ++i) whole.put(i, small(input_value(me, i), t));
  comm.reduce_scatterv(whole.data(), part.data(), counts, t, ReduceOp::kSum);
  for (std::size_t i = 0; i < counts[um]; ++i) {
    std::int64_t want = 0;
    for (int r = 0; r < w; ++r) want += input_value(r, starts[um] + i);
    k.expect(part.get(i) == small(want, t), "reduce_scatterv", me, i);
  }
  k.count += 4;
}

void rooted(Communicator& comm, DataType t, std::size_t n, int root, Checks& k) {
  const int w = comm.size(), me = comm.rank();
  const auto uw = static_cast<std::size_t>(w);
  const bool is_root = me == root;
  Buffer mine(n, t), all(is_root ? n * uw : 0, t);
  for (std::size_t i = 0; i < n; ++i) mine.put(i, bits(me, root, i, t));
  comm.gather(mine.data(), is_root ? all.data() : nullptr, n, t, root);
  for (std::size_t r = 0; is_root && r < uw; ++r)
    for (std::size_t i = 0; i < n; ++i)
      k.expect(all.get(r * n + i) == bits(static_cast<int>(r), root, i, t), "gather",
               static_cast<int>(r), i);
  Buffer whole(is_root ? n * uw : 0, t), part(n, t);
  for (std::size_t r = 0; is_root && r < uw; ++r)
    for (std::size_t i = 0; i < n; ++i) whole.put(r * n + i, bits(root, static_cast<int>(r), i, t));
  comm.scatter(is_root ? whole.data() : nullptr, part.data(), n, t, root);
  for (std::size_t i = 0; i < n; ++i)
    k.expect(part.get(i) == bits(root, me, i, t), "scatter", root, i);
  Buffer values(n, t);
  for (std::size_t i = 0; i < n; ++i) values.put(i, small(input_value(me, i), t));
  comm.reduce(values.data(), is_root ? values.data() : nullptr, n, t, ReduceOp::kSum, root);
  for (std::size_t i = 0; is_root && i < n; ++i) {
    std::int64_t want = 0;
    for (int r = 0; r < w; ++r) want += input_value(r, i);
    k.expect(values.get(i) == small(want, t), "reduce", root, i);
  }
  k.count += 3;
}

}  // namespace

int check_exchange_calls(Communicator& comm, int* checks) {
  Checks k{comm.rank()};
  for (DataType t : {DataType::kBFloat16, DataType::kInt64}) {
    for (std::size_t n : {std::size_t{1}, std::size_t{1001}, std::size_t{40001}}) {
      exchanges(comm, t, n, k);
      // The first and the last rank: on two nodes of consecutive or dealt ranks, two nodes
      // and two local indexes.
      for (int root : {0, comm.size() - 1}) rooted(comm, t, n, root, k);
    }
  }
  *checks += k.count;
  return k.failures;
}

std::string exchange_backends(const Communicator& comm) {
  std::set<std::string> names;
  for (const auto& s : comm.stats()) {
    const Collective c = s.collective;
    const bool exchange = c == Collective::kAllToAll || c == Collective::kAllToAllv ||
                          c == Collective::kAllGatherv || c == Collective::kReduceScatterv ||
                          c == Collective::kGather || c == Collective::kScatter ||
                          c == Collective::kReduce;
    if (!exchange || !s.backend) continue;
    names.insert(std::string(to_string(*s.backend)));
  }
  std::string out;
  for (const auto& name : names) out += (out.empty() ? "" : ",") + name;
  return out.empty() ? "none" : out;
}

}  // namespace tpcomm::test
