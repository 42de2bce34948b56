// The sweep of tpcomm bench inside a group: for every size, out-of-place and in-place timings
// (bench_timing.hpp), an optional data check (#wrong, bench_data.hpp), and the same through MPI
// and Gloo for --compare; bench_report.hpp prints and writes the results.
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <iostream>
#include <optional>

#include <fmt/format.h>

#include "bench.hpp"
#include "bench_data.hpp"
#include "bench_exchange.hpp"
#include "bench_mpi.hpp"
#include "bench_norm.hpp"
#include "bench_report.hpp"
#include "bench_timing.hpp"
#include "launcher/cpu_binding.hpp"
#include "runtime/communicator_state.hpp"
#include "runtime/ordered_reduction.hpp"
#include "tpcomm/tpcomm.hpp"

namespace tpcomm::cli {
namespace {

bool is_exchange(Op op) {
  return op == Op::kAllToAll || op == Op::kSendRecv;
}

// The engines of one sweep: tpcomm's communicator, and those --compare asked for.
struct Engines {
  std::shared_ptr<Bootstrap> bs;
  std::unique_ptr<Communicator> comm;
  std::unique_ptr<Communicator> gloo;  // Gloo alone, as PyTorch's users run it
  std::unique_ptr<Communicator> det;   // --compare deterministic: the same options, in the mode
  std::unique_ptr<MpiEngine> mpi;
};

// Options that leave only `keep` (and the fallback engines, which cannot be disabled).
CommunicatorOptions only(Backend keep) {
  CommunicatorOptions o;
  for (const auto& [b, name] : Names<Backend>::table) {
    if (b != keep && b != Backend::kNccl && b != Backend::kGloo) o.disabled.push_back(b);
  }
  return o;
}

// The Gloo baseline: every call runs Gloo's own collective, as in PyTorch's Gloo backend, where
// tpcomm's gloo fallback carries small calls' data in its opening exchange instead.
runtime::Platform plain_gloo_platform() {
  runtime::Platform p = runtime::builtin_platform();
  p.factories[Backend::kGloo] =
      [gloo = p.factories.at(Backend::kGloo)](transport::BackendContext context) {
        context.gloo.inline_small_calls = false;
        return gloo(context);
      };
  return p;
}

Engines start_engines(const BenchArgs& a) {
  Engines e;
  e.bs = bootstrap_from_environment(Deadline::from_env());
  CommunicatorOptions options = a.backend ? only(*a.backend) : CommunicatorOptions{};
  const bool det = a.compare == "deterministic";
  if (det) options.deterministic = false;  // the default mode, whatever TPCOMM_DETERMINISTIC says
  e.comm = Communicator::create(e.bs, options);
  if (det) {
    options.deterministic = true;
    e.det = Communicator::create(e.bs, options);
  }
  if (a.compare.find("gloo") != std::string::npos) {
    e.gloo = runtime::create_communicator(e.bs, only(Backend::kGloo), plain_gloo_platform());
  }
  if (a.compare.find("mpi") != std::string::npos) {
    e.mpi = std::make_unique<MpiEngine>(a.op, a.dtype, a.redop, a.max_bytes);
  }
  return e;
}

// The buffers of one size. In place, the input sits where the operation expects it inside the
// output buffer `ip` (all-gather: this rank's block; reduce-scatter: the output is its block).
struct SizeBuffers {
  std::size_t n_in = 0, n_out = 0, per = 0;  // per: the count a call takes
  BenchBytes in, out, ip;
  std::size_t ip_in = 0, ip_out = 0;      // byte offsets of input and output in `ip`
  std::optional<ExchangeShape> exchange;  // all_to_all and send_recv (no in-place form)
  bool in_place_form = true;              // none for the exchanges and the rooted calls

  SizeBuffers(const BenchArgs& a, std::uint64_t bytes, int rank, int w) {
    const std::size_t es = size_of(a.dtype);
    if (is_exchange(a.op)) {
      exchange = exchange_shape(a.op, a.uneven, bytes, es, a.hidden, rank, w);
      n_in = exchange->in;
      n_out = exchange->out;
      per = a.op == Op::kAllToAll ? n_in / static_cast<std::size_t>(w) : n_in;
      in = exchange_input(n_in, a.dtype, rank);
      out.assign(n_out * es, 0);
      in_place_form = false;
      return;
    }
    std::tie(n_in, n_out) = bench_counts(a.op, bytes, es, w);
    per = a.op == Op::kReduceScatter || a.op == Op::kScatter ? n_out : n_in;
    in_place_form = !is_rooted(a.op);
    in = bench_input(n_in, a.dtype, rank);
    out.assign(n_out * es, 0);
    ip.assign(std::max(n_in, n_out) * es, 0);
    const std::size_t block = static_cast<std::size_t>(rank) * per * es;
    ip_in = a.op == Op::kAllGather ? block : 0;
    ip_out = a.op == Op::kReduceScatter ? block : 0;
    reset_in_place();
  }
  void reset_in_place() {
    std::fill(ip.begin(), ip.end(), 0);
    std::memcpy(ip.data() + ip_in, in.data(), in.size());
  }
};

// send_recv: a message to rank ^ 1 and its answer (the even rank sends first); a last odd rank
// out copies its own.
template <typename Send, typename Recv>
void ping_pong(int rank, int w, const SizeBuffers& b, const void* in, void* out, Send send,
               Recv recv) {
  const int peer = rank ^ 1;
  if (peer >= w) {
    std::memcpy(out, in, b.out.size());
  } else if (rank % 2 == 0) {
    send(in, peer);
    recv(out, peer);
  } else {
    recv(out, peer);
    send(in, peer);
  }
}

void call(const BenchArgs& a, Communicator& c, const SizeBuffers& b, const void* in, void* out) {
  switch (a.op) {
    case Op::kAllReduce:
      return c.all_reduce(in, out, b.per, a.dtype, a.redop);
    case Op::kAllGather:
      return c.all_gather(in, out, b.per, a.dtype);
    case Op::kReduceScatter:
      return c.reduce_scatter(in, out, b.per, a.dtype, a.redop);
    case Op::kAllToAll:
      if (a.uneven) return c.all_to_allv(in, b.exchange->send, out, b.exchange->recv, a.dtype);
      return c.all_to_all(in, out, b.per, a.dtype);
    case Op::kSendRecv:
      return ping_pong(
          c.rank(), c.size(), b, in, out,
          [&](const void* from, int peer) { c.send(from, b.per, a.dtype, peer); },
          [&](void* to, int peer) { c.recv(to, b.per, a.dtype, peer); });
    case Op::kGather:  // rooted calls: root 0
      return c.gather(in, out, b.per, a.dtype, 0);
    case Op::kScatter:
      return c.scatter(in, out, b.per, a.dtype, 0);
    case Op::kReduce:
      return c.reduce(in, out, b.per, a.dtype, a.redop, 0);
    case Op::kAllReduceRmsNorm:  // its own buffers and calls (bench_norm.hpp)
      break;
  }
  throw Error(ErrorCode::kInternal, "tpcomm bench: all_reduce_rmsnorm goes through measure_norm");
}

std::uint64_t wrong_here(const BenchArgs& a, const SizeBuffers& b, const std::uint8_t* out,
                         int rank, int w) {
  if (b.exchange) return count_wrong_exchange(a.op, *b.exchange, a.dtype, out, rank, w);
  // gather and reduce leave no result off the root
  if ((a.op == Op::kGather || a.op == Op::kReduce) && rank != 0) return 0;
  return count_wrong(a.op, a.redop, a.dtype, out, b.n_out, rank, w, b.n_in);
}

// Runs each way once more on fresh buffers and counts wrong elements over every rank.
void check(const BenchArgs& a, Engines& e, SizeBuffers& b, BenchRow& row) {
  const int rank = e.bs->rank();
  const int w = e.bs->size();
  call(a, *e.comm, b, b.in.data(), b.out.data());
  row.wrong_oop = sum_over_ranks(*e.bs, wrong_here(a, b, b.out.data(), rank, w));
  if (e.det) {
    std::fill(b.out.begin(), b.out.end(), 0);
    call(a, *e.det, b, b.in.data(), b.out.data());
    row.wrong_oop += sum_over_ranks(*e.bs, wrong_here(a, b, b.out.data(), rank, w));
  }
  if (!b.in_place_form) return;
  b.reset_in_place();
  call(a, *e.comm, b, b.ip.data() + b.ip_in, b.ip.data() + b.ip_out);
  row.wrong_ip = sum_over_ranks(*e.bs, wrong_here(a, b, b.ip.data() + b.ip_out, rank, w));
}

// Where a staged call's time goes: more out-of-place calls (about 25 ms of them, the same
// number on every rank), each rank's time in every stage over them, averaged over the ranks.
void split_stages(const BenchArgs& a, Engines& e, SizeBuffers& b, BenchRow& row) {
  using Clock = std::chrono::steady_clock;
  if (e.comm->stage_times().empty()) return;
  const int calls =
      static_cast<int>(std::clamp(25'000.0 / std::max(row.time_oop, 1e-3), 20.0, 2000.0));
  const auto before = e.comm->stage_times();
  const auto start = Clock::now();
  for (int i = 0; i < calls; ++i) call(a, *e.comm, b, b.in.data(), b.out.data());
  const auto whole = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start);
  const auto after = e.comm->stage_times();
  const double ns_per_us_call = 1e3 * static_cast<double>(calls) * e.bs->size();
  auto mean_us = [&](std::chrono::nanoseconds mine) {
    return static_cast<double>(sum_over_ranks(*e.bs, static_cast<std::uint64_t>(mine.count()))) /
           ns_per_us_call;
  };
  row.staged_call_us = mean_us(whole);
  for (std::size_t i = 0; i < after.size(); ++i) {
    row.stages_us.emplace_back(after[i].name, mean_us(after[i].total - before[i].total));
  }
}

void mpi_call(const BenchArgs& a, const MpiEngine& mpi, int rank, int w, SizeBuffers& b) {
  if (a.op == Op::kAllToAll && a.uneven) {
    return mpi.all_to_allv(b.in.data(), b.exchange->send, b.out.data(), b.exchange->recv);
  }
  if (a.op == Op::kSendRecv) {
    return ping_pong(
        rank, w, b, b.in.data(), b.out.data(),
        [&](const void* from, int peer) { mpi.send(from, b.per, peer); },
        [&](void* to, int peer) { mpi.recv(to, b.per, peer); });
  }
  mpi.call(a.op, b.in.data(), b.out.data(), b.per);
}

BenchRow measure(const BenchArgs& a, Engines& e, std::uint64_t bytes) {
  if (a.op == Op::kAllReduceRmsNorm) return measure_norm(a, *e.comm, *e.bs, bytes);
  SizeBuffers b(a, bytes, e.bs->rank(), e.bs->size());
  BenchRow row;
  row.bytes = bytes;
  row.count = a.op == Op::kAllReduce ? b.n_in : std::max(b.n_in, b.n_out);
  if (b.exchange) row.count = b.n_in;
  const bool first_row = bytes == a.min_bytes;
  const int warmup = first_row ? std::max(a.warmup, kFirstRowWarmup) : a.warmup;
  const Timing oop =
      time_calls(*e.bs, warmup, a.iters, [&] { call(a, *e.comm, b, b.in.data(), b.out.data()); });
  row.time_oop = oop.best;
  row.spread_oop = oop.spread();
  row.time_ip = !b.in_place_form ? std::nan("") : time_calls(*e.bs, a.warmup, a.iters, [&] {
                                                    call(a, *e.comm, b, b.ip.data() + b.ip_in,
                                                         b.ip.data() + b.ip_out);
                                                  }).best;
  if (a.check) check(a, e, b, row);
  split_stages(a, e, b, row);
  const auto& plan_row = e.comm->plan().ops.at(a.op).row_for(bytes);
  row.path = fmt::format("{}/{}", to_string(plan_row.backend), to_string(plan_row.algorithm));
  if (a.registered) {  // the same input, copied into a registered buffer
    void* reg = e.comm->allocate(std::max<std::size_t>(b.in.size(), 1));
    std::memcpy(reg, b.in.data(), b.in.size());
    row.registered =
        time_calls(*e.bs, warmup, a.iters, [&] { call(a, *e.comm, b, reg, b.out.data()); });
    if (a.check) {
      std::fill(b.out.begin(), b.out.end(), 0);
      call(a, *e.comm, b, reg, b.out.data());
      row.wrong_oop +=
          sum_over_ranks(*e.bs, wrong_here(a, b, b.out.data(), e.bs->rank(), e.bs->size()));
    }
    e.comm->free(reg);
  }
  if (e.det) {
    for (int k = 0; k < kModeRounds; ++k) {
      for (Communicator* c : {e.comm.get(), e.det.get()}) {
        const Timing t =
            time_calls(*e.bs, warmup, a.iters, [&] { call(a, *c, b, b.in.data(), b.out.data()); });
        (c == e.det.get() ? row.deterministic_rounds : row.default_rounds).push_back(t.best);
      }
    }
    const auto& det_row = e.det->plan().ops.at(a.op).row_for(bytes);
    const bool ordered = runtime::takes_ordered_form(e.det->plan(), det_row.backend,
                                                     transport::Call{.op = a.op, .type = a.dtype});
    row.deterministic_path =
        fmt::format("{}/{}{}", to_string(det_row.backend), to_string(det_row.algorithm),
                    ordered ? " (ordered form)" : "");
  }
  if (e.gloo) {
    row.gloo =
        time_calls(*e.bs, warmup, a.iters, [&] { call(a, *e.gloo, b, b.in.data(), b.out.data()); });
  }
  if (e.mpi) {
    row.mpi = time_calls(*e.bs, warmup, a.iters,
                         [&] { mpi_call(a, *e.mpi, e.bs->rank(), e.bs->size(), b); });
  }
  return row;
}

// Every rank's CPUs, in rank order: where the times came from, whoever launched the ranks
// (tpcomm's binding, mpirun's, or none under torchrun).
std::vector<std::string> rank_cpus(Bootstrap& bs) {
  cpu_set_t mine;
  CPU_ZERO(&mine);
  const std::string text =
      sched_getaffinity(0, sizeof(mine), &mine) == 0 ? cpu_list_text(mine) : std::string("?");
  std::vector<std::string> out;
  for (const Bytes& b :
       bs.all_gather(Bytes(text.begin(), text.end()), "bench cpus", Deadline::from_env())) {
    out.emplace_back(b.begin(), b.end());
  }
  return out;
}

}  // namespace

std::vector<std::string> bench_argv(const BenchArgs& a, const std::string& self) {
  std::vector<std::string> v = {self,       "bench",
                                "--op",     std::string(to_string(a.op)),
                                "--dtype",  std::string(to_string(a.dtype)),
                                "--redop",  std::string(to_string(a.redop)),
                                "-b",       std::to_string(a.min_bytes),
                                "-e",       std::to_string(a.max_bytes),
                                "-f",       std::to_string(a.factor),
                                "--iters",  std::to_string(a.iters),
                                "--warmup", std::to_string(a.warmup)};
  if (a.check) v.push_back("--check");
  if (a.uneven) v.insert(v.end(), {"--uneven", "--hidden", std::to_string(a.hidden)});
  if (a.op == Op::kAllReduceRmsNorm) v.insert(v.end(), {"--hidden", std::to_string(a.hidden)});
  if (a.registered) v.push_back("--registered");
  if (a.backend) v.insert(v.end(), {"--backend", std::string(to_string(*a.backend))});
  // For the header and the rows: the launcher sets the links up.
  if (a.node_network.rate_bits) {
    v.insert(v.end(), {"--link-rate", fmt::format("{}bit", *a.node_network.rate_bits)});
  }
  if (a.node_network.loss_percent) {
    v.insert(v.end(), {"--link-loss", fmt::format("{}", *a.node_network.loss_percent)});
  }
  if (!a.compare.empty()) v.insert(v.end(), {"--compare", a.compare});
  if (!a.json.empty()) v.insert(v.end(), {"--json", a.json});
  if (!a.plot.empty()) v.insert(v.end(), {"--plot", a.plot});
  return v;
}

int run_bench_in_group(const BenchArgs& a) {
  Engines e = start_engines(a);
  const int rank = e.bs->rank();
  const int w = e.bs->size();
  const BenchSetting setting{e.comm->plan().nodes, e.comm->plan().digest, rank_cpus(*e.bs),
                             a.node_network.rate_bits, a.node_network.loss_percent};
  if (rank == 0) print_table_header(a, w, setting);
  const bool progress = isatty(2) != 0;  // a progress line for people, not for logs
  std::vector<BenchRow> rows;
  std::uint64_t total_wrong = 0;
  for (std::uint64_t bytes = a.min_bytes; bytes <= a.max_bytes;
       bytes = std::max(bytes + 1, bytes * a.factor)) {
    rows.push_back(measure(a, e, bytes));
    total_wrong += rows.back().wrong_oop + rows.back().wrong_ip;
    if (rank == 0) {
      print_table_row(a, w, rows.back());
      if (progress) std::cerr << fmt::format("\rtpcomm bench: {} of {} B done", bytes, a.max_bytes);
    }
    if (bytes >= a.max_bytes) break;
  }
  if (rank != 0) return 0;
  if (progress) std::cerr << "\n";
  finish_report(a, w, setting, rows, total_wrong);
  return total_wrong == 0 ? 0 : 1;
}

}  // namespace tpcomm::cli
