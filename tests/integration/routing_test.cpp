// Routing exists once (plan.hpp, route_call): for every op, dtype and size class, the route the
// plan's table gives (read here from the table rows, the integer rule applied by hand),
// Communicator::route, and the route a real call of that size took (counted by stats()) are the
// same. Two ranks on threads: shm, and Gloo alone.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <set>
#include <string>
#include <vector>

#include "thread_ranks.hpp"
#include "tpcomm/communicator.hpp"
#include "tpcomm/tuning.hpp"

namespace tpcomm {
namespace {

using namespace std::chrono_literals;

std::string text(Backend b, Algorithm a) {
  return std::string(to_string(b)) + "/" + std::string(to_string(a));
}

// The sizes (bytes of the larger buffer) at which the table changes rows, and one either side,
// capped so that the calls stay quick; each a multiple of 8 * size so that every dtype and op
// divides.
std::set<std::uint64_t> size_classes(const OpPlan& p, int size) {
  const std::uint64_t unit = 8 * static_cast<std::uint64_t>(size);
  std::set<std::uint64_t> out = {unit, 4096 * unit / 8};
  for (const auto& row : p.table) {
    if (!row.max_bytes || *row.max_bytes > (8u << 20)) continue;
    const std::uint64_t edge = *row.max_bytes / unit * unit;
    for (std::uint64_t b : {edge, edge + unit}) out.insert(std::max(b, unit));
  }
  return out;
}

// The plan's answer, from its rows: the row's backend, or NCCL's default for an integer type on
// a floating-point-only GPU backend.
std::string planned(const Plan& plan, Op op, std::uint64_t bytes, DataType type) {
  const TableRow& row = plan.ops.at(op).row_for(bytes);
  const bool floating_only = row.backend == Backend::kCustom || row.backend == Backend::kMultimem;
  if (floating_only && !is_floating(type)) return text(Backend::kNccl, Algorithm::kNccl);
  return text(row.backend, row.algorithm);
}

// Runs one call of `op` whose larger buffer holds `bytes`; the route stats() counted for it.
std::string taken(Communicator& comm, Op op, std::uint64_t bytes, DataType type) {
  const std::size_t elem = size_of(type);
  const std::size_t n = static_cast<std::size_t>(comm.size());
  std::vector<std::byte> big(bytes), other(bytes), small(bytes / n);
  comm.reset_stats();
  switch (op) {
    case Op::kAllReduce:
      comm.all_reduce(big.data(), big.data(), bytes / elem, type, ReduceOp::kSum);
      break;
    case Op::kAllGather:
      comm.all_gather(small.data(), big.data(), small.size() / elem, type);
      break;
    case Op::kReduceScatter:
      comm.reduce_scatter(big.data(), small.data(), small.size() / elem, type, ReduceOp::kSum);
      break;
    case Op::kAllToAll:
      comm.all_to_all(big.data(), other.data(), small.size() / elem, type);
      break;
    case Op::kGather:
      comm.gather(small.data(), big.data(), small.size() / elem, type, 0);
      break;
    case Op::kScatter:
      comm.scatter(big.data(), small.data(), small.size() / elem, type, 0);
      break;
    case Op::kReduce:
      comm.reduce(big.data(), big.data(), bytes / elem, type, ReduceOp::kSum, 0);
      break;
    case Op::kAllReduceRmsNorm: {  // one row; floating-point types only (the caller skips others)
      RmsNorm norm;
      norm.weight = other.data();
      norm.hidden = bytes / elem;
      comm.all_reduce_rmsnorm(big.data(), big.data(), bytes / elem, type, norm);
      break;
    }
    case Op::kSendRecv:  // rank 0 sends rank 1 the buffer: one route counted on each
      if (comm.rank() == 0) {
        comm.send(big.data(), bytes / elem, type, 1);
      } else {
        comm.recv(big.data(), bytes / elem, type, 0);
      }
      break;
  }
  const auto rows = comm.stats();
  if (rows.size() != 1 || !rows[0].backend) return "not one route counted";
  return text(*rows[0].backend, *rows[0].algorithm);
}

void one_answer(const std::vector<Backend>& disabled) {
  const auto group = make_thread_group(2);
  test::on_ranks(group, [&](int r, std::shared_ptr<Bootstrap> bs) {
    CommunicatorOptions o;
    o.timeout = 20s;
    o.disabled = disabled;
    auto comm = Communicator::create(bs, o);
    int checked = 0;
    for (Op op : kAllOps) {
      for (std::uint64_t bytes : size_classes(comm->plan().ops.at(op), comm->size())) {
        for (const auto& [type, name] : Names<DataType>::table) {
          if (op == Op::kAllReduceRmsNorm && !is_floating(type)) continue;  // refused (call_checks)
          SCOPED_TRACE(std::string(to_string(op)) + " " + std::string(name) + " " +
                       std::to_string(bytes) + " bytes, rank " + std::to_string(r));
          const bool gathers = op == Op::kAllGather || op == Op::kGather;
          const std::uint64_t input = gathers ? bytes / 2 : bytes;
          const TableRow asked = comm->route(op, input, type, comm->plan().mode);
          const std::string want = planned(comm->plan(), op, bytes, type);
          EXPECT_EQ(text(asked.backend, asked.algorithm), want);
          EXPECT_EQ(taken(*comm, op, bytes, type), want);
          ++checked;
        }
      }
    }
    // Two sizes at least, six types; all_reduce_rmsnorm takes the three floating-point ones.
    EXPECT_GE(checked, static_cast<int>(std::size(kAllOps.items)) * 2 * 6 - 2 * 3);
  });
}

TEST(Routing, ThePlanTheCommunicatorAndTheCallsGiveOneAnswerOnShm) {
  one_answer({});
}

TEST(Routing, ThePlanTheCommunicatorAndTheCallsGiveOneAnswerOnGloo) {
  one_answer({Backend::kShm});
}

// On a CUDA plan (no GPU needed: a fixture's facts) integers leave the custom and multimem rows
// for NCCL, floating-point calls stay: route_call against the rows themselves.
TEST(Routing, IntegerCallsLeaveTheFloatingPointOnlyGpuKernelsForNccl) {
  // A plan with custom and multimem rows, built by hand: route_call reads only the table.
  Plan plan;
  plan.device_type = DeviceType::kCuda;
  plan.world_size = 8;
  auto row = [](std::optional<std::uint64_t> max, Backend b, Algorithm a,
                std::optional<int> blocks) {
    TableRow r;
    r.max_bytes = max;
    r.backend = b;
    r.algorithm = a;
    r.blocks = blocks;
    return r;
  };
  OpPlan p;
  p.table = {row(256 * 1024, Backend::kCustom, Algorithm::kOneShot, 36),
             row(64u << 20, Backend::kMultimem, Algorithm::kLdReduce, std::nullopt),
             row(std::nullopt, Backend::kNccl, Algorithm::kNccl, std::nullopt)};
  plan.ops[Op::kAllReduce] = p;
  for (std::uint64_t bytes :
       {std::uint64_t{4096}, std::uint64_t{1} << 20, std::uint64_t{1} << 30}) {
    for (const auto& [type, name] : Names<DataType>::table) {
      SCOPED_TRACE(std::string(name) + " " + std::to_string(bytes));
      const TableRow routed = route_call(plan, Op::kAllReduce, bytes, type);
      EXPECT_EQ(text(routed.backend, routed.algorithm), planned(plan, Op::kAllReduce, bytes, type));
      if (routed.backend == Backend::kNccl) {
        EXPECT_FALSE(routed.blocks.has_value());
      }
    }
  }
  EXPECT_EQ(route_call(plan, Op::kAllReduce, 4096, DataType::kFloat32).blocks, 36);
}

}  // namespace
}  // namespace tpcomm
