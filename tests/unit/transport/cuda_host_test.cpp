// Host-side checks of the GPU path that need no GPU: the slice / chunk / layout arithmetic the
// kernels share with the host, the step-number rule, the framing of workspace handles passed
// over Unix sockets, NCCL loading, and the errors a machine without a GPU gives.
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <random>
#include <set>
#include <thread>

#include <fmt/format.h>

#include "memfd_files.hpp"

#include "fd_channel_test_group.hpp"
#include "kernels/cuda/multimem_layout.hpp"
#include "raw_handle_set.hpp"
#include "tpcomm/bootstrap.hpp"
#include "tpcomm/communicator.hpp"
#include "tpcomm/error.hpp"
#include "transport/cuda/fd_channel.hpp"
#include "transport/cuda/kernel_names.hpp"

namespace tpcomm::transport::cuda {
namespace {

TEST(CudaLayout, SplitCoversEveryItemOnceWithSizesWithinOne) {
  for (std::size_t n : {0u, 1u, 7u, 16u, 1000u, 65537u}) {
    for (int parts = 1; parts <= kMaxRanks; ++parts) {
      std::size_t next = 0, smallest = n, largest = 0;
      for (int p = 0; p < parts; ++p) {
        const Range r = split(n, parts, p);
        EXPECT_EQ(r.begin, next) << "n=" << n << " parts=" << parts << " part=" << p;
        next = r.end;
        smallest = std::min(smallest, r.size());
        largest = std::max(largest, r.size());
      }
      EXPECT_EQ(next, n);
      EXPECT_LE(largest - smallest, 1u) << "n=" << n << " parts=" << parts;
    }
  }
}

// The kernels' work split (docs/gpu-kernels.md, "custom"): whole 16-byte vectors per block, so that
// a block's slice of an aligned buffer starts aligned; every element exactly once.
TEST(CudaLayout, VectorSplitCoversEveryElementOnceOnVectorBoundaries) {
  for (std::size_t unit : {4u, 8u}) {
    for (std::size_t n : {0u, 1u, 7u, 8u, 9u, 1000u, 4097u, 65537u}) {
      for (int parts : {1, 2, 3, 7, 36, 48}) {
        std::size_t next = 0;
        for (int p = 0; p < parts; ++p) {
          const Range r = split_vectors(n, parts, p, unit);
          EXPECT_EQ(r.begin, next) << "n=" << n << " parts=" << parts << " part=" << p;
          EXPECT_LE(r.begin, r.end);
          if (r.end != n) {
            EXPECT_EQ(r.end % unit, 0u) << "n=" << n << " part=" << p;
          }
          EXPECT_TRUE(r.begin % unit == 0 || r.begin == n);
          next = r.end;
        }
        EXPECT_EQ(next, n) << "n=" << n << " parts=" << parts;
      }
    }
  }
}

TEST(CudaLayout, ChunksAreWholeVectorsThatFitTheBuffer) {
  for (std::size_t es : {2u, 4u}) {
    for (int w : {1, 2, 5, 16}) {
      for (std::size_t bytes : {16u, 4096u, 1000u, 8u << 20}) {
        const std::size_t n = chunk_elements(bytes, es, w);
        EXPECT_EQ(n * es % kVecBytes, 0u);
        EXPECT_GT(n, 0u);
        if (bytes >= kVecBytes * static_cast<std::size_t>(w)) {
          EXPECT_LE(n * es * static_cast<std::size_t>(w), bytes) << es << " " << w << " " << bytes;
        }
      }
    }
  }
  EXPECT_EQ(chunk_count(0, 64), 1u);  // a zero-element call still launches (keeps ranks in step)
  EXPECT_EQ(chunk_count(64, 64), 1u);
  EXPECT_EQ(chunk_count(65, 64), 2u);
}

TEST(CudaLayout, WorkspaceRegionsAreAlignedAndDisjoint) {
  for (std::size_t g : {0u, 2u << 20}) {
    const WorkspaceLayout l = workspace_layout(16u << 20, g);
    const std::size_t pads = sizeof(std::uint64_t) * kPhases * kMaxBlocks * kMaxRanks;
    EXPECT_GE(l.steps_offset, pads);
    EXPECT_GE(l.data_offset, l.steps_offset + 8 * kMaxBlocks);
    EXPECT_EQ(l.data_offset % 4096, 0u);
    EXPECT_GE(l.total_bytes, l.data_offset + (16u << 20));
    if (g != 0) {
      EXPECT_EQ(l.total_bytes % g, 0u);
    }
  }
  std::set<std::size_t> seen;
  for (int ph = 0; ph < kPhases; ++ph) {
    for (int b = 0; b < kMaxBlocks; ++b) {
      for (int r = 0; r < kMaxRanks; ++r) {
        const std::size_t i = pad_index(ph, b, r);
        EXPECT_LT(i, static_cast<std::size_t>(kPhases * kMaxBlocks * kMaxRanks));
        EXPECT_TRUE(seen.insert(i).second);
      }
    }
  }
}

TEST(MultimemLayout, RegionsAreAlignedDisjointAndAMultipleOfTheGranularity) {
  for (std::size_t g : {0u, 2u << 20, 512u << 20}) {
    const MultimemLayout l = multimem_layout(8u << 20, g);
    EXPECT_GE(l.local_offset, sizeof(std::uint64_t) * kPhases * kMaxBlocks);  // after the pads
    EXPECT_GE(l.probe_offset, l.local_offset + 8 * (2 + kPhases * kMaxBlocks));
    EXPECT_EQ(l.probe_offset % kVecBytes, 0u);
    EXPECT_GE(l.data_offset, l.probe_offset + kVecBytes);
    EXPECT_EQ(l.data_offset % 4096, 0u);
    EXPECT_EQ(l.area_bytes % 4096, 0u);
    EXPECT_GE(l.total_bytes, l.data_offset + 2 * l.area_bytes);
    if (g != 0) {
      EXPECT_EQ(l.total_bytes % g, 0u);
    }
  }
}

// What the kernels put in one data area must fit it, for every mode, world and element size
// (whole vectors: a block stride is the byte count rounded up to 16).
TEST(MultimemLayout, EveryStepFitsItsArea) {
  const std::size_t area = multimem_layout(8u << 20, 0).area_bytes;
  auto vec_bytes = [](std::size_t bytes) {
    return (bytes + kVecBytes - 1) / kVecBytes * kVecBytes;
  };
  for (int w : {2, 3, 4, 7, 8, 16}) {
    const std::size_t slot = area / static_cast<std::size_t>(w) / kVecBytes * kVecBytes;
    for (std::size_t es : {2u, 4u}) {
      const std::size_t ar_sum =
          multimem_chunk_elements(area, es, w, false, MultimemMode::kReduceSum);
      EXPECT_LE(2 * vec_bytes(ar_sum * es), area) << w << " " << es;  // input, then sums
      const std::size_t rs_sum =
          multimem_chunk_elements(area, es, w, true, MultimemMode::kReduceSum);
      EXPECT_LE(static_cast<std::size_t>(w) * vec_bytes(rs_sum * es), area);
      const std::size_t gather = multimem_chunk_elements(area, es, w, false, MultimemMode::kGather);
      EXPECT_LE(vec_bytes(gather * es), slot);
      const std::size_t rs_gather =
          multimem_chunk_elements(area, es, w, true, MultimemMode::kGather);
      EXPECT_LE(static_cast<std::size_t>(w) * vec_bytes(rs_gather * es), slot);
      for (std::size_t n : {ar_sum, rs_sum, gather, rs_gather}) {
        EXPECT_GT(n, 0u);
        EXPECT_EQ(n * es % kVecBytes, 0u);  // every step but the last moves whole vectors
      }
    }
  }
}

TEST(CudaLayout, StepNumbersOnlyGrowSoStaleFlagsNeverPass) {
  // A flag left from step s passes waits for s and earlier, never for s + 1: nothing needs a
  // reset between calls or graph replays, and 64 bits do not wrap in practice.
  EXPECT_TRUE(reached(5, 5));
  EXPECT_TRUE(reached(6, 5));
  EXPECT_FALSE(reached(4, 5));
  EXPECT_FALSE(reached(0, 1));
  EXPECT_TRUE(reached(~0ull, ~0ull - 1));
}

TEST(CudaLayout, WorldSizesMapToTheSmallestBucketThatHoldsThem) {
  const int want[] = {0, 2, 2, 4, 4, 8, 8, 8, 8, 16, 16, 16, 16, 16, 16, 16, 16};
  for (int w = 1; w <= kMaxRanks; ++w) EXPECT_EQ(world_bucket(w), want[w]) << w;
}

using test::content_of;
using test::file_with;

struct SocketPair {
  net::Fd a, b;
  SocketPair() {
    int s[2];
    EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, s), 0);
    a = net::Fd(s[0]);
    b = net::Fd(s[1]);
  }
};

TEST(HandleFraming, ADescriptorArrivesWithItsCheckedHeader) {
  SocketPair p;
  net::Fd f = file_with("workspace of rank 3");
  HandleHeader h;
  h.from_rank = 3;
  h.comm_id = 0xabcdef;
  h.bytes = 1 << 20;
  send_handle(p.a.get(), h, f.get(), Deadline::after(std::chrono::seconds(5)));
  ReceivedHandle got =
      receive_handle(p.b.get(), 0xabcdef, Deadline::after(std::chrono::seconds(5)), "rank 3");
  EXPECT_EQ(got.header.from_rank, 3);
  EXPECT_EQ(got.header.bytes, 1u << 20);
  EXPECT_NE(got.fd.get(), f.get());
  EXPECT_EQ(content_of(got.fd.get()), "workspace of rank 3");  // the same file, a new descriptor
}

std::string receive_error(const std::function<void(int)>& send_side, std::uint64_t expect_comm) {
  SocketPair p;
  send_side(p.a.get());
  try {
    receive_handle(p.b.get(), expect_comm, Deadline::after(std::chrono::milliseconds(500)),
                   "rank 1");
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(HandleFraming, ForeignOrBrokenMessagesAreErrorsThatSayWhat) {
  net::Fd f = file_with("x");
  auto with = [&](HandleHeader h) {
    return [&f, h](int s) { send_handle(s, h, f.get(), Deadline::after(std::chrono::seconds(1))); };
  };
  HandleHeader bad_magic;
  bad_magic.magic = 0x12345678;
  EXPECT_NE(receive_error(with(bad_magic), 0).find("bad magic"), std::string::npos);
  HandleHeader bad_version;
  bad_version.version = 9;
  EXPECT_NE(receive_error(with(bad_version), 0).find("version 9"), std::string::npos);
  HandleHeader other_group;
  other_group.comm_id = 7;
  EXPECT_NE(receive_error(with(other_group), 8).find("another group"), std::string::npos);
  EXPECT_NE(receive_error(
                [](int s) {
                  HandleHeader h;
                  ASSERT_EQ(write(s, &h, sizeof(h)), static_cast<ssize_t>(sizeof(h)));
                },
                0)
                .find("carried no descriptor"),
            std::string::npos);
  EXPECT_NE(receive_error([](int s) { ASSERT_EQ(write(s, "short", 5), 5); }, 0)
                .find("5 bytes, expected a 32-byte header"),
            std::string::npos);
  EXPECT_NE(receive_error([](int) {}, 0).find("no workspace handle from rank 1"),
            std::string::npos);
}

TEST(HandleFraming, EveryRankOfANodeGetsEveryPeersDescriptor) {
  constexpr int kWorld = 4;
  auto group = test::make_fd_test_group(kWorld, std::random_device{}());
  std::vector<std::vector<std::string>> seen(kWorld);
  std::vector<std::thread> ranks;
  for (int r = 0; r < kWorld; ++r) {
    ranks.emplace_back([&, r] {
      net::Fd mine = file_with("rank " + std::to_string(r));
      auto fds =
          test::exchange_in(group, r, mine.get(), 4096, Deadline::after(std::chrono::seconds(10)));
      for (int p = 0; p < kWorld; ++p) {
        seen[static_cast<std::size_t>(r)].push_back(
            p == r ? "" : content_of(fds[static_cast<std::size_t>(p)].get()));
      }
    });
  }
  for (auto& t : ranks) t.join();
  for (int r = 0; r < kWorld; ++r) {
    for (int p = 0; p < kWorld; ++p) {
      EXPECT_EQ(seen[static_cast<std::size_t>(r)][static_cast<std::size_t>(p)],
                p == r ? "" : "rank " + std::to_string(p))
          << "rank " << r << " from " << p;
    }
  }
}

// The multicast object's handle goes from rank 0 to the others; a message from another rank
// than the root is refused.
// Graph buffer registration sends every VMM descriptor of a round in one tagged message per pair
// (docs/gpu-graphs.md, "Registering graph buffers in VMM memory"): two rounds back to back on one
// listener never mix, and each descriptor arrives as the sender's i-th of that round.
TEST(HandleFraming, HandleSetsOfConsecutiveRoundsArriveWholeAndInOrder) {
  constexpr int kWorld = 4;
  constexpr int kBuffers = 3;
  auto group = test::make_fd_test_group(kWorld, std::random_device{}());
  std::vector<std::string> wrong(kWorld);
  std::vector<std::thread> ranks;
  for (int r = 0; r < kWorld; ++r) {
    ranks.emplace_back([&, r] {
      HandleMailbox mailbox;
      for (std::uint32_t round = 0; round < 3; ++round) {
        // Rank 3 is slow to receive: the others' next round reaches it while it waits for rank
        // 0's (which is slow to send).
        if (r == 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
        std::vector<net::Fd> files;
        std::vector<int> fds;
        std::vector<std::uint64_t> sizes;
        for (int i = 0; i < kBuffers; ++i) {
          files.push_back(file_with(fmt::format("r{} round{} buf{}", r, round, i)));
          fds.push_back(files.back().get());
          sizes.push_back(1000u * static_cast<unsigned>(r) + static_cast<unsigned>(i));
        }
        std::vector<HandleSet> got =
            exchange_handle_sets(group.auth[static_cast<std::size_t>(r)], round, group.listener(r),
                                 mailbox, fds, sizes, Deadline::after(std::chrono::seconds(10)));
        for (int p = 0; p < kWorld; ++p) {
          if (p == r) continue;
          for (int i = 0; i < kBuffers; ++i) {
            const auto& f = got[static_cast<std::size_t>(p)].fds;
            const std::string want = fmt::format("r{} round{} buf{}", p, round, i);
            if (f.size() != kBuffers || content_of(f[static_cast<std::size_t>(i)].get()) != want ||
                got[static_cast<std::size_t>(p)].sizes[static_cast<std::size_t>(i)] !=
                    1000u * static_cast<unsigned>(p) + static_cast<unsigned>(i)) {
              wrong[static_cast<std::size_t>(r)] += want + " missing or misplaced; ";
            }
          }
        }
      }
    });
  }
  for (auto& t : ranks) t.join();
  for (int r = 0; r < kWorld; ++r)
    EXPECT_EQ(wrong[static_cast<std::size_t>(r)], "") << "rank " << r;
}

// A peer's set of the next round that arrives first waits in the mailbox for its round. Rank 1
// is played by hand: it proves and sends its round-1 set before it takes part in round 0.
TEST(HandleFraming, ASetOfALaterRoundWaitsInTheMailboxForItsRound) {
  const std::uint64_t comm = std::random_device{}();
  auto group = test::make_fd_test_group(2, comm);
  net::Fd round0 = file_with("round 0"), round1 = file_with("round 1"), mine = file_with("r0");
  std::string peer_error;
  std::thread peer([&] {
    const auto deadline = Deadline::after(std::chrono::seconds(5));
    try {
      const HandleHeader early = test::set_header(comm, 1, 1, 1);
      net::Fd s = connect_peer(group.auth[1], 0, early, deadline);
      test::send_raw_set(s.get(), early, {round1.get()}, {11});
      HandleMailbox peer_mailbox;
      exchange_handle_sets(group.auth[1], 0, group.listener(1), peer_mailbox, {round0.get()}, {10},
                           deadline);
      // Round 1 for rank 0's sake: its set must be taken (this rank's went ahead by hand).
      AcceptedPeer next = accept_peer(group.listener(1), group.auth[1], peer_mailbox.pending,
                                      deadline, "rank 0's round 1");
      if (next.header.tag != 1) peer_error = fmt::format("rank 0 proved round {}", next.header.tag);
      // Read its message to the end (rank 0 closes once sent), so that its send does not fail.
      char sink[256];
      while (wait_ready(next.socket.get(), POLLIN, deadline) &&
             recv(next.socket.get(), sink, sizeof(sink), 0) > 0) {
      }
    } catch (const Error& e) {
      peer_error = e.what();
    }
  });
  HandleMailbox mailbox;
  std::vector<HandleSet> first, second;
  std::size_t kept_after_round0 = 0;
  try {
    first = exchange_handle_sets(group.auth[0], 0, group.listener(0), mailbox, {mine.get()}, {1},
                                 Deadline::after(std::chrono::seconds(5)));
    // Received whole (early) or accepted and not yet proven (pending): which one depends on
    // when rank 0 read the proof, both are kept for round 1.
    kept_after_round0 = mailbox.early.size() + mailbox.pending.connections.size();
    second = exchange_handle_sets(group.auth[0], 1, group.listener(0), mailbox, {mine.get()}, {1},
                                  Deadline::after(std::chrono::seconds(5)));
  } catch (const Error& e) {
    ADD_FAILURE() << "rank 0: " << e.what();
  }
  peer.join();
  EXPECT_EQ(peer_error, "");
  EXPECT_EQ(kept_after_round0, 1u) << "round 1 kept for later";
  ASSERT_EQ(first.size(), 2u);
  ASSERT_EQ(first[1].fds.size(), 1u);
  EXPECT_EQ(content_of(first[1].fds[0].get()), "round 0");
  EXPECT_EQ(first[1].sizes[0], 10u);
  ASSERT_EQ(second.size(), 2u);
  ASSERT_EQ(second[1].fds.size(), 1u);
  EXPECT_EQ(content_of(second[1].fds[0].get()), "round 1");
  EXPECT_EQ(second[1].sizes[0], 11u);
  EXPECT_TRUE(mailbox.early.empty());
}

TEST(HandleFraming, AHandleSetOfAnEarlierRoundIsAnErrorNamingBothRounds) {
  auto group = test::make_fd_test_group(2, std::random_device{}());
  net::Fd file = file_with("x");
  std::string error;
  std::thread other([&] {
    HandleMailbox mailbox;
    try {
      exchange_handle_sets(group.auth[1], 6, group.listener(1), mailbox, {file.get()}, {1},
                           Deadline::after(std::chrono::seconds(1)));
    } catch (const Error&) {
    }
  });
  HandleMailbox mailbox;
  try {
    exchange_handle_sets(group.auth[0], 7, group.listener(0), mailbox, {file.get()}, {1},
                         Deadline::after(std::chrono::seconds(5)));
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kMismatch);
    error = e.what();
  }
  other.join();
  EXPECT_NE(error.find("rank 1 sent 1 buffer handles for round 6; this rank is in round 7"),
            std::string::npos)
      << error;
}

TEST(HandleFraming, TheRootsDescriptorReachesEveryRank) {
  constexpr int kWorld = 3;
  auto group = test::make_fd_test_group(kWorld, std::random_device{}());
  std::vector<std::string> seen(kWorld);
  std::vector<std::thread> ranks;
  for (int r = 0; r < kWorld; ++r) {
    ranks.emplace_back([&, r] {
      net::Fd mine = r == 1 ? file_with("multicast of rank 1") : net::Fd();
      net::Fd got = test::broadcast_in(group, r, 1, mine.get(), 4096,
                                       Deadline::after(std::chrono::seconds(10)));
      seen[static_cast<std::size_t>(r)] = got.get() >= 0 ? content_of(got.get()) : "";
    });
  }
  for (auto& t : ranks) t.join();
  EXPECT_EQ(seen, (std::vector<std::string>{"multicast of rank 1", "", "multicast of rank 1"}));

  // Rank 2 sends where only rank 0's handle is expected.
  net::Fd wrong = file_with("not the root");
  std::thread sender([&] {
    try {
      test::broadcast_in(group, 2, 2, wrong.get(), 4096, Deadline::after(std::chrono::seconds(2)));
    } catch (const Error&) {
      // rank 0 refuses the message, and rank 1 is not there to answer
    }
  });
  try {
    test::broadcast_in(group, 0, 1, -1, 4096, Deadline::after(std::chrono::seconds(10)));
    ADD_FAILURE() << "a handle from rank 2 was taken for rank 1's";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kMismatch);
    EXPECT_NE(std::string(e.what()).find("expected the handle of rank 1, got one from rank 2"),
              std::string::npos)
        << e.what();
  }
  sender.join();
}

TEST(HandleFraming, AMissingPeerIsATimeoutNotAHang) {
  const std::uint64_t comm = std::random_device{}();
  auto group = test::make_fd_test_group(2, comm, 1, listener_name(comm, 1));  // nobody listens
  net::Fd mine = file_with("rank 0");
  try {
    test::exchange_in(group, 0, mine.get(), 4096, Deadline::after(std::chrono::milliseconds(300)));
    FAIL() << "expected a timeout";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kTimeout) << e.what();
    EXPECT_NE(std::string(e.what()).find("@tpcomm-fd-"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tpcomm::transport::cuda

namespace tpcomm {
namespace {

// Both ranks as threads; returns each rank's error text ("" when creation succeeded).
std::vector<std::string> create_errors(const CommunicatorOptions& options) {
  auto group = make_thread_group(2);
  std::vector<std::string> errors(2);
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r) {
    ranks.emplace_back([&, r] {
      try {
        auto comm = Communicator::create(group[static_cast<std::size_t>(r)], options);
      } catch (const std::exception& e) {
        errors[static_cast<std::size_t>(r)] = e.what();
      }
    });
  }
  for (auto& t : ranks) t.join();
  return errors;
}

TEST(GpuFallback, ACudaCommunicatorWithoutAGpuSaysWhyOnEveryRank) {
  CommunicatorOptions o;
  o.device = DeviceType::kCuda;
  o.timeout = std::chrono::milliseconds(3000);
  const auto errors = create_errors(o);
  if (errors[0].empty() && errors[1].empty()) {
    GTEST_SKIP() << "this machine has a usable GPU: the no-GPU refusal cannot be exercised here";
  }
  // Every rank fails, each naming itself: either it has no GPU, or it learns from the facts
  // exchange that its peer could not join.
  for (int r = 0; r < 2; ++r) {
    const std::string& e = errors[static_cast<std::size_t>(r)];
    EXPECT_NE(e.find("a CUDA communicator"), std::string::npos) << "rank " << r << ": " << e;
    std::cout << "[ NOTE ] rank " << r << " said: " << e << "\n";
  }
}

TEST(GpuFallback, AStreamOnAHostCommunicatorIsAnError) {
  auto group = make_thread_group(1);
  auto comm = Communicator::create(group[0]);
  float x = 1;
  try {
    comm->all_reduce(&x, &x, 1, DataType::kFloat32, ReduceOp::kSum, nullptr);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidInput);
    EXPECT_NE(std::string(e.what()).find("with a stream on a cpu communicator"), std::string::npos)
        << e.what();
  }
}

// Refused before broadcast makes its device staging buffer, which lives on the communicator's GPU
// (docs/gpu-graphs.md, "Broadcast's device buffer under graphs"): a host communicator has none.
TEST(GpuFallback, ABroadcastWithAStreamOnAHostCommunicatorIsAnError) {
  auto group = make_thread_group(1);
  auto comm = Communicator::create(group[0]);
  float x = 1;
  try {
    comm->broadcast(&x, 1, DataType::kFloat32, 0, nullptr);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidInput) << e.what();
    EXPECT_NE(std::string(e.what()).find("broadcast called with a stream on a cpu communicator"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace tpcomm

#ifdef TPCOMM_HAVE_CUDA
#include "transport/nccl/nccl_library.hpp"

namespace tpcomm::transport {
namespace {

TEST(NcclLoading, TheMachinesNcclLoadsByNameOrSaysWhyNot) {
  try {
    const NcclLibrary& nccl = nccl_library();
    EXPECT_GE(nccl.version, 21400) << nccl_version_text(nccl.version);
    std::cout << "[ NOTE ] loaded NCCL " << nccl_version_text(nccl.version) << " with dlopen\n";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnavailable);
    EXPECT_NE(std::string(e.what()).find("libnccl.so.2"), std::string::npos) << e.what();
    std::cout << "[ NOTE ] NCCL is not on this machine; checked the refusal only: " << e.what()
              << "\n";
  }
}

}  // namespace
}  // namespace tpcomm::transport
#else
TEST(NcclLoading, NeedsACudaBuild) {
  GTEST_SKIP() << "this build has no CUDA backends (TPCOMM_CUDA off or nvcc not found): NCCL's "
                  "loading is not part of it";
}
#endif
