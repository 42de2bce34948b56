// The data of tpcomm bench's exchanges: all_to_all (equal blocks), all_to_all --uneven (the
// all_to_allv of a mixture-of-experts dispatch: a seeded router sends each token to 2 of 8
// experts, spread evenly over the ranks, a row of `hidden` elements per token and expert) and
// send_recv (rank r and r ^ 1 in turn). Every rank computes every rank's counts, so it knows what
// it receives and from whom, and checks each element against the sender's input.
#pragma once

#include <cstdint>
#include <vector>

#include "bench_data.hpp"
#include "tpcomm/types.hpp"

namespace tpcomm::cli {

// The MoE router's blocks: rows[s][d] tokens-times-experts rank s sends rank d, for `tokens`
// tokens per rank (seed 0, 8 experts, 2 per token: kExperts / kChosen).
constexpr int kExperts = 8;
constexpr int kChosen = 2;
std::vector<std::vector<std::size_t>> moe_rows(std::size_t tokens, int w);

// What one rank sends and receives in one call, in elements.
struct ExchangeShape {
  std::vector<std::size_t> send, recv;  // per peer (all_to_all(v)); send_recv: [peer] only
  std::size_t in = 0, out = 0;          // sums: the buffers' elements
  std::vector<std::size_t> sent_at;     // all_to_all(v): where the block for me starts, per sender
};

// `bytes`: this rank's input (all_to_all), its dispatch if every rank sent `bytes`
// (--uneven: tokens = bytes / (element size x hidden x kChosen), at least 1), or the message.
ExchangeShape exchange_shape(Op op, bool uneven, std::uint64_t bytes, std::size_t es,
                             std::size_t hidden, int rank, int w);

// Rank `rank`'s input of `n` elements (small integers: exact in every type).
BenchBytes exchange_input(std::size_t n, DataType type, int rank);

// Elements of the output that differ from what their senders' inputs hold.
std::uint64_t count_wrong_exchange(Op op, const ExchangeShape& s, DataType type,
                                   const std::uint8_t* out, int rank, int w);

}  // namespace tpcomm::cli
