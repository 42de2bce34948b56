// Point-to-point messages on shm and on Gloo: every element of messages of 0 to 4 MiB (larger than
// shm's mailbox ring) around a ring of three; both ranks of every pair sending first and then
// waiting for their sends (torch's batch_isend_irecv), at every size, without deadlock; several
// messages between one pair in flight, matched in order; the statistics; collectives between
// messages stay in step. A mismatched tag or count is kMismatch on the receiver and fails the
// sender too; a peer out of range, the rank itself or a negative tag are refused before anything
// moves; a receive nobody sends times out naming the peer.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "thread_ranks.hpp"
#include "tpcomm/communicator.hpp"
#include "tpcomm/error.hpp"

namespace tpcomm {
namespace {

using namespace std::chrono_literals;

// Element i of message `m` from rank `from` to rank `to`.
float value(int from, int to, int m, std::size_t i) {
  return static_cast<float>((i * 7 + static_cast<std::size_t>(from) * 1000003 +
                             static_cast<std::size_t>(to) * 10007 +
                             static_cast<std::size_t>(m) * 101) %
                            16777213);
}

std::vector<float> message(int from, int to, int m, std::size_t n) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = value(from, to, m, i);
  return v;
}

int wrong(const std::vector<float>& got, int from, int to, int m) {
  int bad = 0;
  for (std::size_t i = 0; i < got.size(); ++i) bad += got[i] != value(from, to, m, i);
  return bad;
}

std::unique_ptr<Communicator> make(std::shared_ptr<Bootstrap> bs, bool gloo,
                                   std::chrono::milliseconds timeout = 60s) {
  CommunicatorOptions o;
  o.timeout = timeout;
  if (gloo) o.disabled = {Backend::kShm};
  auto comm = Communicator::create(bs, o);
  EXPECT_EQ(comm->plan().ops.at(Op::kSendRecv).table.front().backend,
            gloo ? Backend::kGloo : Backend::kShm);
  return comm;
}

constexpr std::size_t kSizes[] = {0, 1, 1000, 8192, 70001, 1 << 20};

TEST(PeerMessages, EveryElementAroundARingAndBothSidesSendingFirst) {
  for (bool gloo : {false, true}) {
    test::on_ranks(make_thread_group(3), [&](int r, std::shared_ptr<Bootstrap> bs) {
      auto comm = make(bs, gloo);
      const int next = (r + 1) % 3, prev = (r + 2) % 3;
      int m = 0;
      for (std::size_t n : kSizes) {
        // A ring: blocking receive on rank 0 last, so the others' sends wait for it.
        const auto out = message(r, next, m, n);
        std::vector<float> in(n, -1.0f);
        if (r == 0) {
          comm->send(out.data(), n, DataType::kFloat32, next, 5);
          comm->recv(in.data(), n, DataType::kFloat32, prev, 5);
        } else {
          comm->recv(in.data(), n, DataType::kFloat32, prev, 5);
          comm->send(out.data(), n, DataType::kFloat32, next, 5);
        }
        EXPECT_EQ(wrong(in, prev, r, m), 0) << (gloo ? "gloo" : "shm") << " ring n=" << n;
        ++m;
        // Every rank sends to both others first, then waits for its sends, then its receives.
        std::vector<std::vector<float>> outs, ins;
        std::vector<Communicator::Request> sends, receives;
        for (int p : {next, prev}) outs.push_back(message(r, p, m, n));
        for (int k = 0; k < 2; ++k) {
          sends.push_back(
              comm->isend(outs[k].data(), n, DataType::kFloat32, k == 0 ? next : prev, 9));
        }
        for (int p : {prev, next}) {
          ins.emplace_back(n, -1.0f);
          receives.push_back(comm->irecv(ins.back().data(), n, DataType::kFloat32, p, 9));
        }
        for (auto s : sends) comm->wait(s);
        for (auto q : receives) comm->wait(q);
        EXPECT_EQ(wrong(ins[0], prev, r, m), 0) << "both first n=" << n;
        EXPECT_EQ(wrong(ins[1], next, r, m), 0) << "both first n=" << n;
        ++m;
      }
      // Three messages between one pair in flight, waited for in reverse: matched in order.
      if (r < 2) {
        const int peer = 1 - r;
        std::vector<std::vector<float>> got(3, std::vector<float>(5000));
        std::vector<Communicator::Request> reqs;
        std::vector<std::vector<float>> sent;
        for (int k = 0; k < 3; ++k) sent.push_back(message(r, peer, 100 + k, 5000));
        for (int k = 0; k < 3; ++k) {
          reqs.push_back(comm->isend(sent[k].data(), 5000, DataType::kFloat32, peer));
          reqs.push_back(comm->irecv(got[k].data(), 5000, DataType::kFloat32, peer));
        }
        for (auto it = reqs.rbegin(); it != reqs.rend(); ++it) comm->wait(*it);
        for (int k = 0; k < 3; ++k) EXPECT_EQ(wrong(got[k], peer, r, 100 + k), 0) << k;
      }
      // A collective after all of it: the calls' numbering is untouched by the messages.
      float one = 1.0f;
      comm->all_reduce(&one, &one, 1, DataType::kFloat32, ReduceOp::kSum);
      EXPECT_EQ(one, 3.0f);
      std::uint64_t sends = 0, receives = 0;
      for (const auto& s : comm->stats()) {
        if (s.collective == Collective::kSend) sends += s.calls;
        if (s.collective == Collective::kRecv) receives += s.calls;
      }
      const std::uint64_t pair = r < 2 ? 3 : 0;
      EXPECT_EQ(sends, std::size(kSizes) * 3 + pair);
      EXPECT_EQ(receives, std::size(kSizes) * 3 + pair);
    });
  }
}

// Sends read in place (shm, 16 KiB and more), each completing on the receiver's acknowledgement
// at whatever point of the sender's idle wait it arrives (a wait once took an acknowledgement
// that arrived at its periodic peer check for a lost message), and one whose receiver comes late.
TEST(PeerMessages, LargeSendsCompleteOnTheReceiversAcknowledgement) {
  for (bool gloo : {false, true}) {
    test::on_ranks(make_thread_group(2), [&](int r, std::shared_ptr<Bootstrap> bs) {
      auto comm = make(bs, gloo);
      const std::size_t n = 4096;
      const int messages = gloo ? 50 : 3000;
      int bad = 0;
      std::vector<float> buf(n);
      for (int m = 0; m < messages; ++m) {
        if (r == 0) {
          for (std::size_t i = 0; i < n; ++i) buf[i] = value(0, 1, m, i);
          comm->send(buf.data(), n, DataType::kFloat32, 1);
        } else {
          // Receives 0-60 us late, so that acknowledgements land all over the sender's wait.
          const auto late =
              std::chrono::steady_clock::now() + std::chrono::microseconds(m * 7919 % 61);
          while (std::chrono::steady_clock::now() < late) {
          }
          if (m == messages - 1) std::this_thread::sleep_for(std::chrono::milliseconds(30));
          comm->recv(buf.data(), n, DataType::kFloat32, 0);
          bad += wrong(buf, 0, 1, m);
        }
      }
      EXPECT_EQ(bad, 0) << (gloo ? "gloo" : "shm");
    });
  }
}

TEST(PeerMessages, AMismatchedTagOrCountFailsBothRanks) {
  for (bool gloo : {false, true}) {
    for (bool count : {false, true}) {
      const auto errors =
          test::errors_on_ranks(make_thread_group(2), [&](int r, std::shared_ptr<Bootstrap> bs) {
            auto comm = make(bs, gloo, 10s);
            std::vector<float> buf(8, 1.0f);
            if (r == 0) {
              comm->send(buf.data(), 8, DataType::kFloat32, 1, 3);
              float x = 0;  // the failure reaches rank 0 here at the latest
              comm->all_reduce(&x, &x, 1, DataType::kFloat32, ReduceOp::kSum);
            } else {
              comm->recv(buf.data(), count ? 7 : 8, DataType::kFloat32, 0, count ? 3 : 4);
            }
          });
      const std::string tag = fmt::format("{} {}", gloo ? "gloo" : "shm", count ? "count" : "tag");
      EXPECT_NE(errors[1].find("rank 0 sent send(float32 x 8, tag 3) as its message 1 to rank 1, "
                               "but rank 1 receives recv(float32 x " +
                               std::string(count ? "7, tag 3" : "8, tag 4")),
                std::string::npos)
          << tag << ": " << errors[1];
      EXPECT_NE(errors[0], "") << tag;
    }
  }
}

TEST(PeerMessages, BadPeersAndTagsAreRefusedAndAnUnsentMessageTimesOut) {
  test::on_ranks(make_thread_group(2), [&](int r, std::shared_ptr<Bootstrap> bs) {
    auto comm = make(bs, false, 1500ms);
    float x = 0;
    auto refused = [&](auto call, const std::string& want) {
      try {
        call();
        ADD_FAILURE() << "accepted: " << want;
      } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::kInvalidInput);
        EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
      }
    };
    refused([&] { comm->send(&x, 1, DataType::kFloat32, 2); }, "not a rank of this group of 2");
    refused([&] { comm->send(&x, 1, DataType::kFloat32, r); }, "go to another rank");
    refused([&] { comm->recv(&x, 1, DataType::kFloat32, 1 - r, -1); }, "tag -1 is negative");
    refused([&] { comm->wait(12345); }, "request 12345 is not a message started");
    if (r == 0) std::this_thread::sleep_for(2500ms);  // closing would end rank 1's wait early
    if (r == 1) {
      try {
        comm->recv(&x, 1, DataType::kFloat32, 0);
        ADD_FAILURE() << "a receive nobody sends returned";
      } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::kTimeout);
        EXPECT_NE(std::string(e.what()).find("recv(float32 x 1, tag 0) from rank 0"),
                  std::string::npos)
            << e.what();
      }
    }
  });
}

}  // namespace
}  // namespace tpcomm
