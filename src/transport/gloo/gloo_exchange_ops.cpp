// Gloo's exchanges and rooted calls (gloo_exchange_ops.hpp), on bytes: every type moves bit for
// bit.
#include "gloo_exchange_ops.hpp"

#include <gloo/allgather.h>
#include <gloo/allgatherv.h>
#include <gloo/alltoall.h>
#include <gloo/alltoallv.h>
#include <gloo/gather.h>
#include <gloo/scatter.h>

#include <cstring>
#include <vector>

#include "transport/common/all_to_allv_counts.hpp"

namespace tpcomm::transport {
namespace {

// Gloo wants a buffer even for no bytes.
std::uint8_t* bytes_at(const void* p) {
  static std::uint8_t none = 0;
  return p != nullptr ? static_cast<std::uint8_t*>(const_cast<void*>(p)) : &none;
}

// Every rank's send counts, then its receive counts, from every rank; checked pair by pair
// (all_to_allv_counts.hpp).
void check_counts(const GlooGroup& g, const Call& c) {
  const auto w = static_cast<std::size_t>(g.size);
  std::vector<std::int64_t> all(2 * w * w);
  std::int64_t* mine = all.data() + static_cast<std::size_t>(g.rank) * 2 * w;
  for (std::size_t r = 0; r < w; ++r) {
    mine[r] = static_cast<std::int64_t>(c.send_counts[r]);
    mine[w + r] = static_cast<std::int64_t>(c.recv_counts[r]);
  }
  gloo::AllgatherOptions opts(g.context);
  opts.setOutput(all.data(), all.size());
  opts.setTag(data_tag(c.sequence));
  opts.setTimeout(g.timeout);
  gloo::allgather(opts);
  check_all_to_allv_counts(all.data(), w, c);
}

}  // namespace

void gloo_all_to_all(const GlooGroup& g, const Call& c) {
  const std::size_t bytes = c.count * size_of(c.type) * static_cast<std::size_t>(g.size);
  if (bytes == 0) return;
  gloo::AlltoallOptions opts(g.context);
  opts.setInput(bytes_at(c.input), bytes);
  opts.setOutput(bytes_at(c.output), bytes);
  opts.setTag(data_tag(c.sequence));
  opts.setTimeout(g.timeout);
  gloo::alltoall(opts);
}

void gloo_all_to_allv(const GlooGroup& g, const Call& c) {
  check_counts(g, c);
  const std::size_t es = size_of(c.type);
  std::vector<std::int64_t> in(static_cast<std::size_t>(g.size));
  std::vector<std::int64_t> out(in.size());
  std::int64_t moved = 0;
  for (std::size_t r = 0; r < in.size(); ++r) {
    in[r] = static_cast<std::int64_t>(c.send_counts[r] * es);
    out[r] = static_cast<std::int64_t>(c.recv_counts[r] * es);
    moved += in[r] + out[r];
  }
  if (moved == 0) return;
  gloo::AlltoallvOptions opts(g.context);
  opts.setInput(bytes_at(c.input), in);
  opts.setOutput(bytes_at(c.output), out);
  opts.setTag(data_tag(c.sequence));
  opts.setTimeout(g.timeout);
  gloo::alltoallv(opts);
}

void gloo_all_gatherv(const GlooGroup& g, const Call& c) {
  if (c.count == 0) return;
  const std::size_t es = size_of(c.type);
  std::vector<std::size_t> bytes(static_cast<std::size_t>(g.size));
  for (std::size_t r = 0; r < bytes.size(); ++r) bytes[r] = c.recv_counts[r] * es;
  gloo::AllgathervOptions opts(g.context);
  opts.setInput(bytes_at(c.input), bytes[static_cast<std::size_t>(g.rank)]);
  opts.setOutput(bytes_at(c.output), bytes);
  opts.setTag(data_tag(c.sequence));
  opts.setTimeout(g.timeout);
  gloo::allgatherv(opts);
}

void gloo_gather(const GlooGroup& g, const Call& c) {
  const std::size_t bytes = c.count * size_of(c.type);
  if (bytes == 0) return;
  gloo::GatherOptions opts(g.context);
  opts.setInput(bytes_at(c.input), bytes);
  if (g.rank == c.root)
    opts.setOutput(bytes_at(c.output), bytes * static_cast<std::size_t>(g.size));
  opts.setRoot(c.root);
  opts.setTag(data_tag(c.sequence));
  opts.setTimeout(g.timeout);
  gloo::gather(opts);
}

void gloo_scatter(const GlooGroup& g, const Call& c) {
  const std::size_t bytes = c.count * size_of(c.type);
  if (bytes == 0) return;
  gloo::ScatterOptions opts(g.context);
  std::vector<std::uint8_t*> blocks;
  if (g.rank == c.root) {
    for (int r = 0; r < g.size; ++r) {
      blocks.push_back(bytes_at(c.input) + static_cast<std::size_t>(r) * bytes);
    }
    opts.setInputs(blocks, bytes);
  }
  opts.setOutput(bytes_at(c.output), bytes);
  opts.setRoot(c.root);
  opts.setTag(data_tag(c.sequence));
  opts.setTimeout(g.timeout);
  gloo::scatter(opts);
}

}  // namespace tpcomm::transport
