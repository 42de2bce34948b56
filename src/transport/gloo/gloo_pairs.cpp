// Membership proof and shutdown of Gloo's TCP pairs (gloo_pairs.hpp).
#include "gloo_pairs.hpp"

#include <gloo/transport/unbound_buffer.h>

#include <fmt/format.h>

#include "tpcomm/error.hpp"

namespace tpcomm::transport {
namespace {

// The tag of the membership exchange: odd and far above any call's tags (2 per call).
constexpr std::uint64_t kMemberTag = 0xFFFFFFFFull;

std::string member_key(int rank) {
  return fmt::format("member/{}", rank);
}

}  // namespace

void verify_gloo_members(gloo::Context& context, GlooStoreAdapter& adapter, const Bytes& my_token,
                         std::chrono::milliseconds timeout) {
  const int size = context.size;
  const int me = context.rank;
  Bytes mine = my_token;
  std::vector<Bytes> received(static_cast<std::size_t>(size), Bytes(my_token.size()));
  std::vector<std::unique_ptr<gloo::transport::UnboundBuffer>> sends, recvs;
  for (int peer = 0; peer < size; ++peer) {
    if (peer == me) continue;
    sends.push_back(context.createUnboundBuffer(mine.data(), mine.size()));
    sends.back()->send(peer, kMemberTag);
    recvs.push_back(context.createUnboundBuffer(received[static_cast<std::size_t>(peer)].data(),
                                                my_token.size()));
    recvs.back()->recv(peer, kMemberTag);
  }
  for (auto& r : recvs) r->waitRecv(timeout);
  for (auto& s : sends) s->waitSend(timeout);
  for (int peer = 0; peer < size; ++peer) {
    if (peer == me) continue;
    std::vector<char> expected = adapter.get(member_key(peer));
    const Bytes& got = received[static_cast<std::size_t>(peer)];
    if (expected.size() != got.size() ||
        !std::equal(got.begin(), got.end(),
                    reinterpret_cast<const std::uint8_t*>(expected.data()))) {
      throw Error(ErrorCode::kMismatch,
                  fmt::format("gloo: the connection that rank {} should have made to rank {} did "
                              "not prove its membership (its token is not the one rank {} "
                              "published): a process outside the group connected to a Gloo port",
                              peer, me, peer));
    }
  }
}

void publish_gloo_member_token(GlooStoreAdapter& adapter, int rank, const Bytes& token) {
  adapter.set(member_key(rank), std::vector<char>(token.begin(), token.end()));
}

}  // namespace tpcomm::transport
