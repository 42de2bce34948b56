// The worker's integer checks (worker_integers.hpp).
#include "worker_integers.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>

namespace tpcomm::test {
namespace {

// Rank r's element i: near INT32_MAX, so that any two ranks' sum wraps.
std::int32_t i32(int r, std::size_t i) {
  return static_cast<std::int32_t>(0x7fffff00u - static_cast<std::uint32_t>(i) * 7u +
                                   static_cast<std::uint32_t>(r) * 1000003u);
}
std::int64_t i64(int r, std::size_t i) {
  return static_cast<std::int64_t>((i * 31 + static_cast<std::size_t>(r) * 17) % 101) - 50 +
         (r % 2 == 1 ? (std::int64_t{1} << 40) : 0);
}
std::uint8_t u8(int r, std::size_t i) {
  return static_cast<std::uint8_t>(i * 7 + static_cast<std::size_t>(r) * 50);
}

std::uint64_t hash(const void* data, std::size_t bytes) {
  std::uint64_t h = 1469598103934665603ull;
  for (std::size_t i = 0; i < bytes; ++i) {
    h = (h ^ static_cast<const std::uint8_t*>(data)[i]) * 1099511628211ull;
  }
  return h;
}

struct Count {
  int rank;
  int failures = 0;
  void fail(const std::string& what, std::size_t i) {
    if (failures++ < 10) std::printf("rank %d: WRONG %s at element %zu\n", rank, what.c_str(), i);
  }
};

}  // namespace

int check_integer_calls(Communicator& comm, std::vector<std::uint64_t>& hashes, int* checks) {
  const int w = comm.size();
  const int me = comm.rank();
  Count k{me};
  for (std::size_t n : {std::size_t{4099}, std::size_t{65537}}) {
    std::vector<std::int32_t> a(n);
    std::vector<std::int64_t> hi(n), lo(n);
    std::vector<std::uint8_t> b(n), bmax(n), bmin(n);
    for (std::size_t i = 0; i < n; ++i) {
      a[i] = i32(me, i);
      hi[i] = lo[i] = i64(me, i);
      b[i] = bmax[i] = bmin[i] = u8(me, i);
    }
    comm.all_reduce(a.data(), a.data(), n, DataType::kInt32, ReduceOp::kSum);
    comm.all_reduce(hi.data(), hi.data(), n, DataType::kInt64, ReduceOp::kMax);
    comm.all_reduce(lo.data(), lo.data(), n, DataType::kInt64, ReduceOp::kMin);
    comm.all_reduce(b.data(), b.data(), n, DataType::kUInt8, ReduceOp::kSum);
    comm.all_reduce(bmax.data(), bmax.data(), n, DataType::kUInt8, ReduceOp::kMax);
    comm.all_reduce(bmin.data(), bmin.data(), n, DataType::kUInt8, ReduceOp::kMin);
    for (std::size_t i = 0; i < n; ++i) {
      std::uint32_t sum = 0;
      std::uint8_t sum8 = 0;
      std::int64_t max = i64(0, i), min = i64(0, i);
      std::uint8_t max8 = u8(0, i), min8 = u8(0, i);
      for (int r = 0; r < w; ++r) {
        sum += static_cast<std::uint32_t>(i32(r, i));
        sum8 = static_cast<std::uint8_t>(sum8 + u8(r, i));
        max = std::max(max, i64(r, i));
        min = std::min(min, i64(r, i));
        max8 = std::max(max8, u8(r, i));  // unsigned: 200 is above 100
        min8 = std::min(min8, u8(r, i));
      }
      if (a[i] != static_cast<std::int32_t>(sum)) k.fail("int32 sum (wrapping)", i);
      if (hi[i] != max) k.fail("int64 max", i);
      if (lo[i] != min) k.fail("int64 min", i);
      if (b[i] != sum8) k.fail("uint8 sum (wrapping)", i);
      if (bmax[i] != max8) k.fail("uint8 max", i);
      if (bmin[i] != min8) k.fail("uint8 min", i);
    }
    for (std::uint64_t v : {hash(a.data(), n * 4), hash(hi.data(), n * 8), hash(b.data(), n)})
      hashes.push_back(v);
    *checks += 6;
  }
  const std::size_t block = 1029;
  std::vector<std::int32_t> full(block * static_cast<std::size_t>(w)), mine(block);
  for (std::size_t j = 0; j < full.size(); ++j) full[j] = i32(me, j);
  comm.reduce_scatter(full.data(), mine.data(), block, DataType::kInt32, ReduceOp::kSum);
  for (std::size_t i = 0; i < block; ++i) {
    std::uint32_t sum = 0;
    for (int r = 0; r < w; ++r) {
      sum += static_cast<std::uint32_t>(i32(r, static_cast<std::size_t>(me) * block + i));
    }
    if (mine[i] != static_cast<std::int32_t>(sum)) k.fail("int32 reduce_scatter sum", i);
  }
  std::vector<std::int64_t> piece(block), gathered(block * static_cast<std::size_t>(w));
  for (std::size_t i = 0; i < block; ++i) piece[i] = i64(me, i) * 1000 + me;
  comm.all_gather(piece.data(), gathered.data(), block, DataType::kInt64);
  for (std::size_t j = 0; j < gathered.size(); ++j) {
    const int r = static_cast<int>(j / block);
    if (gathered[j] != i64(r, j % block) * 1000 + r) k.fail("int64 all_gather", j);
  }
  hashes.push_back(hash(gathered.data(), gathered.size() * 8));
  *checks += 2;
  return k.failures;
}

}  // namespace tpcomm::test
