// The data of tpcomm bench's exchanges (bench_exchange.hpp).
#include "bench_exchange.hpp"

#include <algorithm>
#include <cmath>

#include "tpcomm/convert.hpp"

namespace tpcomm::cli {
namespace {

float value_of(int rank, std::size_t i) {
  return static_cast<float>((rank * 5 + static_cast<int>(i % 13)) % 64);
}

// A small linear congruential generator: the router's choices, the same on every rank and run.
struct Lcg {
  std::uint64_t state;
  std::uint64_t next() {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return state >> 33;
  }
};

}  // namespace

std::vector<std::vector<std::size_t>> moe_rows(std::size_t tokens, int w) {
  const auto uw = static_cast<std::size_t>(w);
  std::vector<std::vector<std::size_t>> rows(uw, std::vector<std::size_t>(uw, 0));
  Lcg rng{0};  // seed 0
  for (std::size_t s = 0; s < uw; ++s) {
    for (std::size_t t = 0; t < tokens; ++t) {
      const int first = static_cast<int>(rng.next() % kExperts);
      int second = static_cast<int>(rng.next() % (kExperts - 1));
      if (second >= first) ++second;  // two different experts
      for (int e : {first, second}) {
        // Experts spread evenly over the ranks (expert e on rank e * w / kExperts).
        ++rows[s][static_cast<std::size_t>(e * w / kExperts)];
      }
    }
  }
  return rows;
}

ExchangeShape exchange_shape(Op op, bool uneven, std::uint64_t bytes, std::size_t es,
                             std::size_t hidden, int rank, int w) {
  const auto uw = static_cast<std::size_t>(w);
  const auto me = static_cast<std::size_t>(rank);
  ExchangeShape s;
  if (op == Op::kSendRecv) {
    s.in = s.out = bytes / es;
    return s;
  }
  std::vector<std::vector<std::size_t>> elements(uw, std::vector<std::size_t>(uw));
  if (uneven) {
    const std::size_t tokens = std::max<std::size_t>(1, bytes / (es * hidden * kChosen));
    const auto rows = moe_rows(tokens, w);
    for (std::size_t a = 0; a < uw; ++a) {
      for (std::size_t b = 0; b < uw; ++b) elements[a][b] = rows[a][b] * hidden;
    }
  } else {
    for (auto& row : elements) std::fill(row.begin(), row.end(), bytes / es / uw);
  }
  for (std::size_t p = 0; p < uw; ++p) {
    s.send.push_back(elements[me][p]);
    s.recv.push_back(elements[p][me]);
    // Where sender p's block for this rank starts in p's input.
    std::size_t at = 0;
    for (std::size_t q = 0; q < me; ++q) at += elements[p][q];
    s.sent_at.push_back(at);
  }
  for (std::size_t p = 0; p < uw; ++p) {
    s.in += s.send[p];
    s.out += s.recv[p];
  }
  return s;
}

BenchBytes exchange_input(std::size_t n, DataType type, int rank) {
  std::vector<float> values(n);
  for (std::size_t i = 0; i < n; ++i) values[i] = value_of(rank, i);
  BenchBytes buf(n * size_of(type));
  from_float(values.data(), type, n, buf.data());
  return buf;
}

std::uint64_t count_wrong_exchange(Op op, const ExchangeShape& s, DataType type,
                                   const std::uint8_t* out, int rank, int w) {
  std::vector<float> got(s.out);
  to_float(out, type, s.out, got.data());
  std::uint64_t wrong = 0;
  if (op == Op::kSendRecv) {
    const int peer = (rank ^ 1) < w ? rank ^ 1 : rank;  // an odd rank out keeps its own
    for (std::size_t i = 0; i < s.out; ++i) wrong += got[i] != value_of(peer, i);
    return wrong;
  }
  std::size_t at = 0;
  for (int p = 0; p < w; ++p) {
    const auto up = static_cast<std::size_t>(p);
    for (std::size_t i = 0; i < s.recv[up]; ++i) {
      wrong += got[at + i] != value_of(p, s.sent_at[up] + i);
    }
    at += s.recv[up];
  }
  return wrong;
}

}  // namespace tpcomm::cli
