// The worker's `deterministic` mode (worker_deterministic.hpp).
#include "worker_deterministic.hpp"

#include <cstdio>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "support/typed_values.hpp"

namespace tpcomm::test {

int run_deterministic(Communicator& comm) {
  const std::size_t n = 70001;
  const int world = comm.size(), r = comm.rank();
  const auto w = static_cast<std::size_t>(world);
  std::mt19937_64 g(11);  // the same slices on every rank
  int checks = 0, wrong = 0;
  auto expect = [&](const char* what, DataType t, std::size_t a, std::size_t b, bool same) {
    ++checks;
    if (same) return;
    if (++wrong <= 5) {
      std::printf("rank %d: %s %s [%zu, %zu) is not the rank-order sum\n", r, what,
                  std::string(to_string(t)).c_str(), a, b);
    }
  };
  for (DataType t : {DataType::kFloat32, DataType::kBFloat16, DataType::kFloat16}) {
    const std::size_t es = size_of(t);
    for (int k = 0; k < 8; ++k) {
      std::size_t a = k == 0 ? 0 : g() % n, b = k == 0 ? n - 1 : g() % n;
      if (a > b) std::swap(a, b);
      const std::size_t len = b + 1 - a;
      std::vector<std::uint8_t> out(len * es);
      const auto x = order_values(t, r, a, len);
      comm.all_reduce(x.data(), out.data(), len, t, ReduceOp::kSum);
      expect("all_reduce", t, a, b + 1, out == rank_order_sums(t, world, a, len));
      // Block q of this rank's input is elements [q n + a, q n + b] of its vector.
      std::vector<std::uint8_t> in;
      for (std::size_t q = 0; q < w; ++q) {
        const auto block = order_values(t, r, q * n + a, len);
        in.insert(in.end(), block.begin(), block.end());
      }
      comm.reduce_scatter(in.data(), out.data(), len, t, ReduceOp::kSum);
      expect("reduce_scatter", t, a, b + 1,
             out == rank_order_sums(t, world, static_cast<std::size_t>(r) * n + a, len));
    }
  }
  std::set<std::string> backends;
  for (const RouteStats& s : comm.stats()) {
    if (s.backend && s.calls > 0) backends.insert(std::string(to_string(*s.backend)));
  }
  std::string used;
  for (const auto& b : backends) used += (used.empty() ? "" : ",") + b;
  std::printf("rank %d: deterministic: %d checks, %d wrong, backends=%s\n", r, checks, wrong,
              used.c_str());
  return wrong == 0 ? 0 : 1;
}

}  // namespace tpcomm::test
