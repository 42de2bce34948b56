// The sweep of tpcomm bench inside a group: for every size, out-of-place and in-place timings
// (the slowest rank's best batch mean over --iters after --warmup), an optional data check
// (#wrong), and the same through MPI and Gloo for --compare.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "bench.hpp"
#include "bench_plot.hpp"
#include "tpcomm/tpcomm.hpp"

#ifdef TPCOMM_HAVE_MPI
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#endif

namespace tpcomm::cli {
namespace {

using Clock = std::chrono::steady_clock;

// The bus-bandwidth factor of nccl-tests.
double bus_factor(Op op, int w) {
  return op == Op::kAllReduce ? 2.0 * (w - 1) / w : static_cast<double>(w - 1) / w;
}

// Small integers: exact in every type and in every sum, so the check is exact.
float value_of(int rank, std::size_t i) {
  return static_cast<float>((rank + 1) * ((i % 7) + 1) % 16);
}

struct Buffers {
  std::vector<std::uint8_t> in, out;
};

// Elements of input and output per rank for a call whose largest buffer is `bytes`.
std::pair<std::size_t, std::size_t> counts(Op op, std::uint64_t bytes, std::size_t es, int w) {
  const std::size_t total = bytes / es;
  if (op == Op::kAllReduce) return {total, total};
  const std::size_t per = total / static_cast<std::size_t>(w);
  return op == Op::kAllGather ? std::make_pair(per, per * static_cast<std::size_t>(w))
                              : std::make_pair(per * static_cast<std::size_t>(w), per);
}

void fill(std::vector<std::uint8_t>& buf, std::size_t n, DataType t, int rank) {
  std::vector<float> f(n);
  for (std::size_t i = 0; i < n; ++i) f[i] = value_of(rank, i);
  buf.resize(n * size_of(t));
  const std::size_t es = size_of(t);
  if (t == DataType::kFloat32) {
    std::memcpy(buf.data(), f.data(), n * es);
    return;
  }
  for (std::size_t i = 0; i < n; ++i) {
    std::uint32_t bits;
    std::memcpy(&bits, &f[i], 4);
    std::uint16_t h;
    if (t == DataType::kBFloat16) {
      h = static_cast<std::uint16_t>(bits >> 16);  // exact for these small integers
    } else {
      _Float16 x = static_cast<_Float16>(f[i]);
      std::memcpy(&h, &x, 2);
    }
    std::memcpy(buf.data() + i * es, &h, 2);
  }
}

float read_value(const std::uint8_t* p, DataType t) {
  if (t == DataType::kFloat32) {
    float f;
    std::memcpy(&f, p, 4);
    return f;
  }
  std::uint16_t h;
  std::memcpy(&h, p, 2);
  if (t == DataType::kBFloat16) {
    std::uint32_t bits = static_cast<std::uint32_t>(h) << 16;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
  }
  _Float16 x;
  std::memcpy(&x, &h, 2);
  return static_cast<float>(x);
}

// Elements of this rank's result that differ from the exact answer.
std::uint64_t count_wrong(Op op, ReduceOp redop, DataType t, const std::uint8_t* out,
                          std::size_t n_out, int rank, int w, std::size_t n_in_per_rank) {
  std::uint64_t wrong = 0;
  const std::size_t es = size_of(t);
  for (std::size_t i = 0; i < n_out; ++i) {
    double expect = 0;
    if (op == Op::kAllGather) {
      expect = value_of(static_cast<int>(i / n_in_per_rank), i % n_in_per_rank);
    } else {
      const std::size_t idx =
          op == Op::kReduceScatter ? static_cast<std::size_t>(rank) * n_out + i : i;
      for (int r = 0; r < w; ++r) {
        const double v = value_of(r, idx);
        if (r == 0) {
          expect = v;
        } else if (redop == ReduceOp::kMax) {
          expect = std::max(expect, v);
        } else if (redop == ReduceOp::kMin) {
          expect = std::min(expect, v);
        } else {
          expect += v;
        }
      }
      if (redop == ReduceOp::kAvg) expect /= w;
    }
    const double got = read_value(out + i * es, t);
    const double tol = t == DataType::kFloat32 ? 1e-5 : t == DataType::kFloat16 ? 1e-3 : 8e-3;
    if (std::fabs(got - expect) > tol * std::max(1.0, std::fabs(expect))) ++wrong;
  }
  return wrong;
}

// The largest value over ranks.
double max_over_ranks(Bootstrap& bs, double mine_value, const char* what) {
  Bytes mine(sizeof(double));
  std::memcpy(mine.data(), &mine_value, sizeof(double));
  double largest = 0;
  for (const auto& b : bs.all_gather(mine, what, Deadline::from_env())) {
    double v;
    std::memcpy(&v, b.data(), sizeof(double));
    largest = std::max(largest, v);
  }
  return largest;
}

// With --iters 0 (the default) every size runs as many calls as fit in this much time: a few
// calls of a microsecond each measure the machine's noise (one preemption is tens of
// microseconds), not the collective.
constexpr double kAutoTimeUs = 25'000;
constexpr int kAutoMinIters = 21;  // at least 7 per batch
constexpr int kAutoMaxIters = 100'000;
constexpr int kFirstRowWarmup = 1000;
constexpr int kBatches = 3;

// The slowest rank's best batch mean per call, in microseconds. The warm-up is timed too, and with
// iters == 0 its slowest rank's mean sets the number of timed calls, the same on every rank.
double time_calls(Bootstrap& bs, int warmup, int iters, const std::function<void()>& call) {
  const auto w0 = Clock::now();
  for (int i = 0; i < warmup; ++i) call();
  if (iters == 0) {
    const double warm_us =
        warmup > 0 ? std::chrono::duration<double, std::micro>(Clock::now() - w0).count() / warmup
                   : kAutoTimeUs / kAutoMinIters;
    const double slowest = max_over_ranks(bs, warm_us, "bench calibration");
    iters = static_cast<int>(std::clamp(kAutoTimeUs / std::max(slowest, 1e-3),
                                        double{kAutoMinIters}, double{kAutoMaxIters}));
  }
  // Three batches, each started together; the best batch mean counts, so one preemption by a
  // neighbour on a shared machine does not decide a row (the same for every engine).
  double us = 0;
  for (int batch = 0; batch < kBatches; ++batch) {
    bs.barrier("bench", Deadline::from_env());
    const int n = std::max(1, iters / kBatches);
    const auto t0 = Clock::now();
    for (int i = 0; i < n; ++i) call();
    const double mean = std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / n;
    us = batch == 0 ? mean : std::min(us, mean);
  }
  return max_over_ranks(bs, us, "bench times");
}

std::uint64_t sum_over_ranks(Bootstrap& bs, std::uint64_t mine_value) {
  Bytes mine(8);
  std::memcpy(mine.data(), &mine_value, 8);
  std::uint64_t total = 0;
  for (const auto& b : bs.all_gather(mine, "bench check", Deadline::from_env())) {
    std::uint64_t v;
    std::memcpy(&v, b.data(), 8);
    total += v;
  }
  return total;
}

// Disables every backend but `keep` (and the fallback) for communicators created next.
void force_backend(const std::string& keep) {
  std::vector<std::string> off;
  for (const char* b : {"local", "shm", "hier", "custom", "multimem"}) {
    if (keep != b) off.emplace_back(b);
  }
  setenv("TPCOMM_DISABLE", fmt::format("{}", fmt::join(off, ",")).c_str(), 1);
}

#ifdef TPCOMM_HAVE_MPI
void bf16_sum(void* in, void* inout, int* len, MPI_Datatype*) {
  auto* a = static_cast<std::uint16_t*>(in);
  auto* b = static_cast<std::uint16_t*>(inout);
  for (int i = 0; i < *len; ++i) {
    float x = read_value(reinterpret_cast<std::uint8_t*>(a + i), DataType::kBFloat16);
    float y = read_value(reinterpret_cast<std::uint8_t*>(b + i), DataType::kBFloat16);
    float s = x + y;
    std::uint32_t bits;
    std::memcpy(&bits, &s, 4);
    bits += 0x7fffu + ((bits >> 16) & 1u);
    b[i] = static_cast<std::uint16_t>(bits >> 16);
  }
}
#endif

struct Row {
  std::uint64_t bytes = 0;
  std::size_t count = 0;
  double time_oop = 0, time_ip = 0;
  std::uint64_t wrong_oop = 0, wrong_ip = 0;
  std::string path;
  std::optional<double> mpi, gloo;
};

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
  if (a.backend) v.insert(v.end(), {"--backend", std::string(to_string(*a.backend))});
  if (!a.compare.empty()) v.insert(v.end(), {"--compare", a.compare});
  if (!a.json.empty()) v.insert(v.end(), {"--json", a.json});
  if (!a.plot.empty()) v.insert(v.end(), {"--plot", a.plot});
  return v;
}

int run_bench_in_group(const BenchArgs& a) {
  const Op op = a.op;
  const DataType type = a.dtype;
  const ReduceOp redop = a.redop;
  const bool with_mpi = a.compare.find("mpi") != std::string::npos;
  const bool with_gloo = a.compare.find("gloo") != std::string::npos;
  auto bs = bootstrap_from_environment(Deadline::from_env());
  const int rank = bs->rank();
  const int w = bs->size();
  if (a.backend) force_backend(std::string(to_string(*a.backend)));
  auto comm = Communicator::create(bs);
  std::unique_ptr<Communicator> gloo;
  if (with_gloo) {
    force_backend("gloo");
    gloo = Communicator::create(bs);
  }
#ifndef TPCOMM_HAVE_MPI
  if (with_mpi)
    throw Error(ErrorCode::kUnavailable, "--compare mpi: this tpcomm was built without Open MPI");
#else
  MPI_Datatype mpi_type = type == DataType::kFloat32 ? MPI_FLOAT : MPI_UINT16_T;
  MPI_Op mpi_op = MPI_SUM;
  if (with_mpi) {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized)
      throw Error(ErrorCode::kUnavailable, "--compare mpi needs the ranks started by mpirun");
    if (type == DataType::kBFloat16 && redop == ReduceOp::kSum) MPI_Op_create(bf16_sum, 1, &mpi_op);
    if (type != DataType::kFloat32 && !(type == DataType::kBFloat16 && redop == ReduceOp::kSum)) {
      throw invalid_input(
          "--compare mpi: float16, and bfloat16 other than sum, have no MPI reduction here");
    }
    if (redop == ReduceOp::kMax) mpi_op = MPI_MAX;
    if (redop == ReduceOp::kMin) mpi_op = MPI_MIN;
  }
#endif
  const std::size_t es = size_of(type);
  std::vector<Row> rows;
  if (rank == 0) {
    std::cout << fmt::format("# tpcomm bench: {} {} {} on {} ranks ({} node{}), plan {}\n",
                             to_string(a.op), to_string(a.dtype), to_string(a.redop), w,
                             comm->plan().nodes, comm->plan().nodes == 1 ? "" : "s",
                             comm->plan().digest);
    std::cout << fmt::format(
        "# {:>10} {:>12} {:>9} {:>6} {:>5}   {:>9} {:>7} {:>7} {:>6}   {:>9} {:>7} {:>7} {:>6}  "
        "{}\n",
        "size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time",
        "algbw", "busbw", "#wrong", "backend/algorithm");
    std::cout << fmt::format(
        "# {:>10} {:>12} {:>9} {:>6} {:>5}   {:>9} {:>7} {:>7} {:>6}   {:>9} {:>7} {:>7} {:>6}\n",
        "(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)",
        "");
  }
  std::uint64_t total_wrong = 0;
  double busbw_sum = 0;
  const bool progress = isatty(2) != 0;  // a progress line for people, not for logs
  for (std::uint64_t bytes = a.min_bytes; bytes <= a.max_bytes;
       bytes = std::max(bytes + 1, bytes * a.factor)) {
    auto [n_in, n_out] = counts(op, bytes, es, w);
    Row row;
    row.bytes = bytes;
    row.count = op == Op::kAllReduce ? n_in : std::max(n_in, n_out);
    Buffers b;
    fill(b.in, n_in, type, rank);
    b.out.assign(n_out * es, 0);
    const std::size_t per = op == Op::kAllReduce ? n_in : (op == Op::kAllGather ? n_in : n_out);
    auto call = [&](Communicator& c, const void* in, void* out) {
      if (op == Op::kAllReduce) c.all_reduce(in, out, per, type, redop);
      if (op == Op::kAllGather) c.all_gather(in, out, per, type);
      if (op == Op::kReduceScatter) c.reduce_scatter(in, out, per, type, redop);
    };
    // The first row would also measure the group settling in (ranks just started, the scheduler
    // still placing them): it gets a long warm-up, as does MPI's.
    const bool first_row = bytes == a.min_bytes;
    const int warmup = first_row ? std::max(a.warmup, kFirstRowWarmup) : a.warmup;
    row.time_oop =
        time_calls(*bs, warmup, a.iters, [&] { call(*comm, b.in.data(), b.out.data()); });
    // In place: the input sits where the operation expects it in the output buffer.
    std::vector<std::uint8_t> ip(std::max(n_in, n_out) * es);
    auto ip_call = [&] {
      if (op == Op::kAllReduce) {
        call(*comm, ip.data(), ip.data());
      } else if (op == Op::kAllGather) {
        call(*comm, ip.data() + static_cast<std::size_t>(rank) * per * es, ip.data());
      } else {
        call(*comm, ip.data(), ip.data() + static_cast<std::size_t>(rank) * per * es);
      }
    };
    std::memcpy(ip.data() + (op == Op::kAllGather ? static_cast<std::size_t>(rank) * per * es : 0),
                b.in.data(), b.in.size());
    row.time_ip = time_calls(*bs, a.warmup, a.iters, ip_call);
    if (a.check) {
      call(*comm, b.in.data(), b.out.data());
      row.wrong_oop =
          sum_over_ranks(*bs, count_wrong(op, redop, type, b.out.data(), n_out, rank, w, n_in));
      std::fill(ip.begin(), ip.end(), 0);
      std::memcpy(
          ip.data() + (op == Op::kAllGather ? static_cast<std::size_t>(rank) * per * es : 0),
          b.in.data(), b.in.size());
      ip_call();
      const std::uint8_t* ip_out = op == Op::kReduceScatter
                                       ? ip.data() + static_cast<std::size_t>(rank) * per * es
                                       : ip.data();
      row.wrong_ip =
          sum_over_ranks(*bs, count_wrong(op, redop, type, ip_out, n_out, rank, w, n_in));
      total_wrong += row.wrong_oop + row.wrong_ip;
    }
    const auto& prow = comm->plan().ops.at(op).row_for(bytes);
    row.path = fmt::format("{}/{}", to_string(prow.backend), to_string(prow.algorithm));
    if (gloo)
      row.gloo =
          time_calls(*bs, a.warmup, a.iters, [&] { call(*gloo, b.in.data(), b.out.data()); });
#ifdef TPCOMM_HAVE_MPI
    if (with_mpi) {
      row.mpi = time_calls(*bs, warmup, a.iters, [&] {
        if (op == Op::kAllReduce) {
          MPI_Allreduce(b.in.data(), b.out.data(), static_cast<int>(per), mpi_type, mpi_op,
                        MPI_COMM_WORLD);
        } else if (op == Op::kAllGather) {
          MPI_Allgather(b.in.data(), static_cast<int>(per), mpi_type, b.out.data(),
                        static_cast<int>(per), mpi_type, MPI_COMM_WORLD);
        } else {
          MPI_Reduce_scatter_block(b.in.data(), b.out.data(), static_cast<int>(per), mpi_type,
                                   mpi_op, MPI_COMM_WORLD);
        }
      });
    }
#endif
    const double algbw = static_cast<double>(bytes) / row.time_oop / 1e3;
    const double algbw_ip = static_cast<double>(bytes) / row.time_ip / 1e3;
    busbw_sum += algbw * bus_factor(op, w);
    if (rank == 0) {
      auto wrong = [&](std::uint64_t v) {
        return a.check ? std::to_string(v) : std::string("N/A");
      };
      std::cout << fmt::format(
                       "  {:>10} {:>12} {:>9} {:>6} {:>5}   {:>9.2f} {:>7.2f} {:>7.2f} {:>6}   "
                       "{:>9.2f} {:>7.2f} {:>7.2f} {:>6}  {}\n",
                       bytes, row.count, to_string(a.dtype), to_string(a.redop), -1, row.time_oop,
                       algbw, algbw * bus_factor(op, w), wrong(row.wrong_oop), row.time_ip,
                       algbw_ip, algbw_ip * bus_factor(op, w), wrong(row.wrong_ip), row.path)
                << std::flush;
      if (progress)
        std::cerr << fmt::format("\rtpcomm bench: {} of {} B done", bytes, a.max_bytes)
                  << std::flush;
    }
    rows.push_back(row);
    if (bytes >= a.max_bytes) break;
  }
  if (rank != 0) return 0;
  if (progress) std::cerr << "\n";
  const std::size_t n = rows.empty() ? 1 : rows.size();
  std::cout << fmt::format("# Out of bounds values : {} {}\n", total_wrong,
                           total_wrong == 0 ? "OK" : "FAILED");
  std::cout << fmt::format("# Avg bus bandwidth    : {:.3f}\n", busbw_sum / static_cast<double>(n));
  if (with_mpi || with_gloo) {
    std::cout << fmt::format(
        "#\n# Same sweep, same data, out of place: time (us) and bus bandwidth (GB/s) per "
        "engine\n");
    std::cout << fmt::format("# {:>10}   {:>9} {:>7}   {:>9} {:>7} {:>8}   {:>9} {:>7} {:>8}\n",
                             "size", "tpcomm", "busbw", "mpi", "busbw", "speed-up", "gloo", "busbw",
                             "speed-up");
    for (const auto& r : rows) {
      auto bw = [&](double us) {
        return static_cast<double>(r.bytes) / us / 1e3 * bus_factor(op, w);
      };
      auto col = [&](const std::optional<double>& t) {
        return t ? fmt::format("{:>9.2f} {:>7.2f} {:>7.2f}x", *t, bw(*t), *t / r.time_oop)
                 : fmt::format("{:>9} {:>7} {:>8}", "-", "-", "-");
      };
      std::cout << fmt::format("  {:>10}   {:>9.2f} {:>7.2f}   {}   {}\n", r.bytes, r.time_oop,
                               bw(r.time_oop), col(r.mpi), col(r.gloo));
    }
  }
  if (!a.plot.empty()) {
    std::vector<PlotSeries> series(1);
    series[0].engine = "tpcomm";
    if (with_mpi) series.push_back({"Open MPI", {}, {}, {}});
    if (with_gloo) series.push_back({"Gloo", {}, {}, {}});
    for (const auto& r : rows) {
      auto add = [&](PlotSeries& s, double us) {
        s.bytes.push_back(static_cast<double>(r.bytes));
        s.time_us.push_back(us);
        s.busbw.push_back(static_cast<double>(r.bytes) / us / 1e3 * bus_factor(op, w));
      };
      add(series[0], r.time_oop);
      std::size_t next = 1;
      if (with_mpi && r.mpi) add(series[next], *r.mpi);
      if (with_mpi) ++next;
      if (with_gloo && r.gloo) add(series[next], *r.gloo);
    }
    write_plot(a.plot, fmt::format("{} {} on {} ranks", to_string(a.op), to_string(a.dtype), w),
               series);
    std::cout << fmt::format("# plot written to {}\n", a.plot);
  }
  if (!a.json.empty()) {
    nlohmann::json j = nlohmann::json::array();
    for (const auto& r : rows) {
      nlohmann::json o = {
          {"op", to_string(a.op)},
          {"type", to_string(a.dtype)},
          {"redop", to_string(a.redop)},
          {"ranks", w},
          {"bytes", r.bytes},
          {"count", r.count},
          {"time_us", r.time_oop},
          {"time_in_place_us", r.time_ip},
          {"algbw_gbs", static_cast<double>(r.bytes) / r.time_oop / 1e3},
          {"busbw_gbs", static_cast<double>(r.bytes) / r.time_oop / 1e3 * bus_factor(op, w)},
          {"wrong", r.wrong_oop + r.wrong_ip},
          {"backend_algorithm", r.path}};
      if (r.mpi) o["mpi_time_us"] = *r.mpi;
      if (r.gloo) o["gloo_time_us"] = *r.gloo;
      j.push_back(o);
    }
    std::ofstream(a.json) << j.dump(2) << "\n";
  }
  return total_wrong == 0 ? 0 : 1;
}

}  // namespace tpcomm::cli
