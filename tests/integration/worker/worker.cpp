// A rank program for the process-level tests, run under `tpcomm run`. Modes:
//   correctness   every collective x dtype x op x size x in/out of place on random data,
//                 against a reference computed in double; bitwise equality across ranks; the
//                 exchanges and rooted calls (worker_exchanges.hpp)
//   loop N COUNT  N all-reduces of COUNT floats (TEST_OP=all_to_all: all_to_alls of COUNT
//                 floats per peer); TEST_KILL_RANK / TEST_STOP_RANK with TEST_AFTER make one
//                 rank SIGKILL / SIGSTOP itself after that many calls
//   deterministic deterministic mode's property checks (worker_deterministic.hpp)
//   mismatch KIND rank 1 calls with another count, dtype or op (run with TPCOMM_CHECK=1)
//   random N      N all-reduces of random small sizes, types and ops, each checked
//   slow_peer MS  rank 1 starts its second all-reduce MS ms after rank 0 does; rank 0 prints
//                 how long it waited and how much CPU its thread spent waiting
//   create        create the communicator, print the plan, exit
//   leak_and_die  create a /dev/shm segment named like tpcomm's, then SIGKILL itself
//   after_file P  see worker_network.hpp (with the TEST_SIGNAL_EVERY_US and
//                 TEST_OPTION_TIMEOUT_MS knobs)
//   fork          fork a child that is refused a call and exits normally; the group calls on
// TEST_SKIP_RANK=r: rank r exits at once, never joining. TEST_LATE_RANK=r: rank r joins the
// bootstrap, then sleeps TEST_LATE_SECONDS (30) instead of creating the communicator. Errors print
// "rank R: ERROR ..." with the wall-clock time in ms and exit 1 (3 for a mismatch).
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "kernels/cpu/convert.hpp"
#include "tpcomm/tpcomm.hpp"
#include "worker_deterministic.hpp"
#include "worker_exchanges.hpp"
#include "worker_fork.hpp"
#include "worker_integers.hpp"
#include "worker_network.hpp"

namespace {

using tpcomm::DataType;
using tpcomm::Op;
using tpcomm::ReduceOp;

long long wall_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v ? std::atoi(v) : fallback;
}

std::uint64_t mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Rank r's element i of test case `c`, already rounded to the element type.
float input_value(int c, int r, std::size_t i, DataType t) {
  const std::uint64_t h =
      mix((static_cast<std::uint64_t>(c) << 48) ^ (static_cast<std::uint64_t>(r) << 36) ^ i);
  float v = static_cast<float>(static_cast<double>(h >> 11) / 9007199254740992.0 * 2.0 - 1.0);
  std::uint16_t bits[1];
  tpcomm::from_float(&v, t, 1, t == DataType::kFloat32 ? static_cast<void*>(&v) : bits);
  if (t != DataType::kFloat32) tpcomm::to_float(bits, t, 1, &v);
  return v;
}

std::vector<std::uint8_t> make_buffer(int c, int r, std::size_t count, DataType t,
                                      std::size_t offset = 0) {
  std::vector<float> f(count);
  for (std::size_t i = 0; i < count; ++i) f[i] = input_value(c, r, offset + i, t);
  std::vector<std::uint8_t> out(count * tpcomm::size_of(t));
  tpcomm::from_float(f.data(), t, count, out.data());
  return out;
}

double unit_roundoff(DataType t) {
  return t == DataType::kFloat32 ? 1.2e-7 : t == DataType::kFloat16 ? 9.8e-4 : 7.9e-3;
}

std::uint64_t fnv(const std::uint8_t* p, std::size_t n) {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (std::size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ULL;
  return h;
}

struct Checker {
  int rank;
  int failures = 0;
  int checks = 0;
  void fail(const std::string& what) {
    if (failures++ < 10) std::printf("rank %d: WRONG %s\n", rank, what.c_str());
  }
};

// Compares reduced values with the double-precision reference of case c.
void check_reduced(Checker& k, const std::string& name, int c, int w, ReduceOp op, DataType t,
                   const std::uint8_t* out, std::size_t count, std::size_t offset) {
  std::vector<float> got(count);
  tpcomm::to_float(out, t, count, got.data());
  for (std::size_t i = 0; i < count; ++i) {
    double ref = 0, mag = 0;
    for (int r = 0; r < w; ++r) {
      double x = input_value(c, r, offset + i, t);
      if (r == 0 || op == ReduceOp::kSum || op == ReduceOp::kAvg) {
        ref = (r == 0) ? x : ref + x;
      } else {
        ref = op == ReduceOp::kMax ? std::max(ref, x) : std::min(ref, x);
      }
      mag += std::fabs(x);
    }
    if (op == ReduceOp::kAvg) {
      ref /= w;
      mag /= w;
    }
    const bool exact = op == ReduceOp::kMax || op == ReduceOp::kMin;
    const double tol = exact ? 0 : unit_roundoff(t) * std::fabs(ref) + 1e-6 * w * mag + 1e-30;
    if (!(std::fabs(got[i] - ref) <= tol)) {
      k.fail(name + " element " + std::to_string(i) + ": got " + std::to_string(got[i]) +
             ", reference " + std::to_string(ref));
      return;
    }
  }
}

// "hier_mpi" or "shm,gloo": the backends of the three collectives' tables, each once, in order.
std::string backends_in_tables(const tpcomm::Communicator& comm) {
  std::string out;
  for (const auto& [op, p] : comm.plan().ops) {
    // The three collectives the correctness mode checks (hier stages no other op).
    if (op != Op::kAllReduce && op != Op::kAllGather && op != Op::kReduceScatter) continue;
    for (const auto& row : p.table) {
      const std::string name(tpcomm::to_string(row.backend));
      if (("," + out + ",").find("," + name + ",") == std::string::npos)
        out += (out.empty() ? "" : ",") + name;
    }
  }
  return out;
}

int run_correctness(tpcomm::Communicator& comm, tpcomm::Bootstrap& bs) {
  const int rank = comm.rank();
  const int w = comm.size();
  std::vector<std::size_t> sizes = {0, 1, 7, 4095, 65537, 786433};
  Checker k{rank};
  std::vector<std::uint64_t> hashes;
  int c = 0;
  for (DataType t : {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16}) {
    const std::size_t es = tpcomm::size_of(t);
    for (std::size_t n : sizes) {
      // The largest case keeps every buffer at a few MiB: per-rank blocks of reduce_scatter and
      // all_gather shrink with the world size.
      const std::size_t block =
          n == sizes.back() ? std::max<std::size_t>(1, n / static_cast<std::size_t>(w)) : n;
      for (bool in_place : {false, true}) {
        // all_reduce and reduce_scatter with every op
        for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kMin, ReduceOp::kAvg}) {
          ++c;
          const std::string tag = std::string(tpcomm::to_string(t)) + " n=" + std::to_string(n) +
                                  (in_place ? " in-place " : " ") +
                                  std::string(tpcomm::to_string(op));
          auto in = make_buffer(c, rank, n, t);
          std::vector<std::uint8_t> out(n * es);
          comm.all_reduce(in.data(), in_place ? in.data() : out.data(), n, t, op);
          const auto* result = in_place ? in.data() : out.data();
          check_reduced(k, "all_reduce " + tag, c, w, op, t, result, n, 0);
          hashes.push_back(fnv(result, n * es));
          ++k.checks;

          ++c;
          auto full = make_buffer(c, rank, block * static_cast<std::size_t>(w), t);
          std::vector<std::uint8_t> mine(block * es);
          void* dst =
              in_place ? full.data() + static_cast<std::size_t>(rank) * block * es : mine.data();
          comm.reduce_scatter(full.data(), dst, block, t, op);
          check_reduced(k, "reduce_scatter " + tag, c, w, op, t, static_cast<std::uint8_t*>(dst),
                        block, static_cast<std::size_t>(rank) * block);
          ++k.checks;
        }
        ++c;
        auto piece = make_buffer(c, rank, block, t);
        std::vector<std::uint8_t> gathered(block * es * static_cast<std::size_t>(w));
        const void* src = piece.data();
        if (in_place && block > 0) {
          std::memcpy(gathered.data() + static_cast<std::size_t>(rank) * block * es, piece.data(),
                      block * es);
          src = gathered.data() + static_cast<std::size_t>(rank) * block * es;
        }
        comm.all_gather(src, gathered.data(), block, t);
        for (int r = 0; r < w; ++r) {
          auto expect = make_buffer(c, r, block, t);
          if (block > 0 &&
              std::memcmp(expect.data(), gathered.data() + static_cast<std::size_t>(r) * block * es,
                          block * es) != 0) {
            k.fail("all_gather " + std::string(tpcomm::to_string(t)) +
                   " n=" + std::to_string(block) + (in_place ? " in-place" : "") +
                   ": block of rank " + std::to_string(r) + " differs");
          }
        }
        hashes.push_back(fnv(gathered.data(), gathered.size()));
        ++k.checks;
      }
    }
  }
  k.failures += tpcomm::test::check_integer_calls(comm, hashes, &k.checks);
  // Counted apart: the tests expect the collectives' number of checks at every world size.
  int exchange_checks = 0;
  k.failures += tpcomm::test::check_exchange_calls(comm, &exchange_checks);
  // Bitwise identity across ranks: every rank's result hashes must agree.
  tpcomm::Bytes mine(reinterpret_cast<const std::uint8_t*>(hashes.data()),
                     reinterpret_cast<const std::uint8_t*>(hashes.data() + hashes.size()));
  auto all = bs.all_gather(mine, "result hashes", tpcomm::Deadline::from_env());
  for (int r = 0; r < w; ++r) {
    if (all[static_cast<std::size_t>(r)] != mine)
      k.fail("results differ bitwise from rank " + std::to_string(r));
  }
  const std::uint64_t results = fnv(mine.data(), mine.size());
  std::printf(
      "rank %d: %d checks, %d failed; nodes=%d host=%s digest=%s results=%016llx backends=%s "
      "exchanges=%s exchange_checks=%d\n",
      rank, k.checks, k.failures, comm.plan().nodes,
      comm.facts().ranks[static_cast<std::size_t>(rank)].host.c_str(), comm.plan().digest.c_str(),
      static_cast<unsigned long long>(results), backends_in_tables(comm).c_str(),
      tpcomm::test::exchange_backends(comm).c_str(), exchange_checks);
  return k.failures == 0 ? 0 : 1;
}

int run_loop(tpcomm::Communicator& comm, int iterations, std::size_t count) {
  const int rank = comm.rank();
  const int victim_kill = env_int("TEST_KILL_RANK", -1);
  const int victim_stop = env_int("TEST_STOP_RANK", -1);
  const int after = env_int("TEST_AFTER", 20);
  std::vector<float> data(count, 1.0f);
  // TEST_REGISTERED=1: the input in a registered buffer (read in place by the peers), out of
  // place, since in-place one-shot copies anyway.
  float* in = data.data();
  std::vector<float> out(count);
  if (env_int("TEST_REGISTERED", 0) == 1) {
    in = static_cast<float*>(comm.allocate(count * sizeof(float)));
    std::fill(in, in + count, 1.0f);
  }
  float* result = in == data.data() ? data.data() : out.data();
  const char* op = std::getenv("TEST_OP");
  const bool exchange = op != nullptr && std::string(op) == "all_to_all";
  std::vector<float> blocks(exchange ? count * static_cast<std::size_t>(comm.size()) : 0, 1.0f);
  std::vector<float> received(blocks.size());
  std::printf("rank %d: looping\n", rank);  // what a test waits for before it signals
  std::fflush(stdout);
  for (int i = 0; i < iterations; ++i) {
    if (i == after && (rank == victim_kill || rank == victim_stop)) {
      std::printf("rank %d: %s itself (pid %d) at %lld\n", rank,
                  rank == victim_kill ? "killing" : "stopping", static_cast<int>(getpid()),
                  wall_ms());
      std::fflush(stdout);
      raise(rank == victim_kill ? SIGKILL : SIGSTOP);
    }
    if (exchange) {
      comm.all_to_all(blocks.data(), received.data(), count, DataType::kFloat32);
    } else {
      comm.all_reduce(in, result, count, DataType::kFloat32, ReduceOp::kAvg);
    }
  }
  std::printf("rank %d: loop of %d done\n", rank, iterations);
  return 0;
}

// `iterations` back-to-back calls of random small sizes, types and ops (the same sequence on
// every rank), each checked against the double reference.
int run_random(tpcomm::Communicator& comm, int iterations) {
  const int w = comm.size();
  Checker k{comm.rank()};
  for (int i = 0; i < iterations; ++i) {
    const std::uint64_t h = mix(static_cast<std::uint64_t>(i) * 7919);
    const std::size_t n = h % 5000;
    const DataType t = static_cast<DataType>((h >> 20) % 3);
    const ReduceOp op = static_cast<ReduceOp>((h >> 24) % 4);
    const int c = 100000 + i;
    auto in = make_buffer(c, comm.rank(), n, t);
    comm.all_reduce(in.data(), in.data(), n, t, op);
    check_reduced(k, "random call " + std::to_string(i), c, w, op, t, in.data(), n, 0);
  }
  std::printf("rank %d: %d random calls, %d failed\n", comm.rank(), iterations, k.failures);
  return k.failures == 0 ? 0 : 1;
}

int run_slow_peer(tpcomm::Communicator& comm, int late_ms) {
  const int rank = comm.rank();
  std::vector<float> data(1024);
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<float>(rank + 1) * i;
  comm.all_reduce(data.data(), data.data(), data.size(), DataType::kFloat32, ReduceOp::kSum);
  if (rank == 1) std::this_thread::sleep_for(std::chrono::milliseconds(late_ms));
  auto thread_cpu_ms = [] {
    timespec t{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return static_cast<double>(t.tv_sec) * 1e3 + static_cast<double>(t.tv_nsec) / 1e6;
  };
  const double cpu0 = thread_cpu_ms();
  const long long wall0 = wall_ms();
  comm.all_reduce(data.data(), data.data(), data.size(), DataType::kFloat32, ReduceOp::kSum);
  const double cpu = thread_cpu_ms() - cpu0;
  const long long wall = wall_ms() - wall0;
  // Twice summed over W ranks: W * (1 + ... + W) * i.
  const int w = comm.size();
  int wrong = 0;
  for (std::size_t i = 0; i < data.size(); ++i) {
    wrong += data[i] != static_cast<float>(w * w * (w + 1) / 2) * static_cast<float>(i);
  }
  std::printf("rank %d: waited %lld ms, %.1f ms of CPU, %d wrong\n", rank, wall, cpu, wrong);
  return wrong == 0 ? 0 : 1;
}

int run_mismatch(tpcomm::Communicator& comm, const std::string& kind) {
  std::vector<float> data(1 << 20, 1.0f);
  comm.all_reduce(data.data(), data.data(), 1024, DataType::kFloat32, ReduceOp::kSum);
  // count_by_one: the upper half of the ranks (a whole simulated node) calls one element less;
  // count_large: rank 1 calls a size whose data Gloo would not carry in its opening exchange.
  const bool odd = kind == "count_by_one" ? comm.rank() >= comm.size() / 2 : comm.rank() == 1;
  std::size_t count = 1024;
  if (odd && kind == "count") count = 2048;
  if (odd && kind == "count_by_one") count = 1023;
  if (odd && kind == "count_large") count = data.size();
  DataType t = odd && kind == "dtype" ? DataType::kBFloat16 : DataType::kFloat32;
  ReduceOp op = odd && kind == "op" ? ReduceOp::kMax : ReduceOp::kSum;
  comm.all_reduce(data.data(), data.data(), count, t, op);
  std::printf("rank %d: the mismatched call was not detected\n", comm.rank());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "create";
  if (mode == "leak_and_die") {
    // A segment named the way tpcomm names its own, then death before unlinking it.
    const std::string name = "/tpcomm-test-" + std::to_string(getpid()) + "-leak";
    int fd = shm_open(name.c_str(), O_CREAT | O_RDWR, 0600);
    std::printf("rank %s: created %s\n", std::getenv("RANK"), name.c_str());
    std::fflush(stdout);
    if (fd >= 0) raise(SIGKILL);
    return 1;
  }
  const int rank = env_int("RANK", env_int("OMPI_COMM_WORLD_RANK", 0));
  if (env_int("TEST_SKIP_RANK", -1) == rank) {
    std::printf("rank %d: not starting (TEST_SKIP_RANK)\n", rank);
    return 0;
  }
  tpcomm::test::worker_prelude(rank, mode == "after_file");  // TEST_SIGNAL_EVERY_US
  try {
    auto bs = tpcomm::bootstrap_from_environment(tpcomm::Deadline::from_env());
    if (env_int("TEST_LATE_RANK", -1) == rank) {
      // Joined the bootstrap (under mpirun: MPI_Init, which waits for every process) but never
      // creates the communicator.
      std::printf("rank %d: late (TEST_LATE_RANK)\n", rank);
      std::fflush(stdout);
      std::this_thread::sleep_for(std::chrono::seconds(env_int("TEST_LATE_SECONDS", 30)));
      return 0;
    }
    auto comm = tpcomm::Communicator::create(bs, tpcomm::test::options_from_env());
    if (mode == "correctness") return run_correctness(*comm, *bs);
    if (mode == "deterministic") return tpcomm::test::run_deterministic(*comm);
    if (mode == "loop") {
      return run_loop(*comm, argc > 2 ? std::atoi(argv[2]) : 1000,
                      argc > 3 ? static_cast<std::size_t>(std::atol(argv[3])) : 262144);
    }
    if (mode == "mismatch") return run_mismatch(*comm, argc > 2 ? argv[2] : "count");
    if (mode == "after_file") return tpcomm::test::run_after_file(*comm, argc > 2 ? argv[2] : "");
    if (mode == "until_lost")
      return tpcomm::test::run_until_lost(*comm, argc > 2 ? std::atoi(argv[2]) : 1000);
    if (mode == "random") return run_random(*comm, argc > 2 ? std::atoi(argv[2]) : 1000);
    if (mode == "fork") {
      bool is_child = false;
      return tpcomm::test::run_fork(comm, &is_child);
    }
    if (mode == "slow_peer") return run_slow_peer(*comm, argc > 2 ? std::atoi(argv[2]) : 400);
    const auto& rejected = comm->plan().ops.at(Op::kAllReduce).rejected;
    for (auto b : {tpcomm::Backend::kShm, tpcomm::Backend::kHier}) {
      if (auto it = rejected.find(b); it != rejected.end()) {
        std::printf("rank %d: %s refused: %s\n", rank, std::string(tpcomm::to_string(b)).c_str(),
                    it->second.c_str());
      }
    }
    std::printf("rank %d: created, nodes=%d digest=%s\n", rank, comm->plan().nodes,
                comm->plan().digest.c_str());
    return 0;
  } catch (const tpcomm::Error& e) {
    std::printf("rank %d: ERROR (%s) at %lld: %s\n", rank, tpcomm::to_string(e.code()), wall_ms(),
                e.what());
    return e.code() == tpcomm::ErrorCode::kMismatch ? 3 : 1;
  }
}
