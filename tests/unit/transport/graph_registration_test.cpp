// Host checks of graph buffer registration over VMM memory (docs/gpu-graphs.md, "Registering graph
// buffers in VMM memory"): one descriptor per allocation, not per captured call; a round's
// descriptors in messages of at most kMaxHandleSet, reassembled and checked; imports keyed by round
// and allocation, not by the peer's address; and a fork() child not taken for its parent. The
// descriptor exchange runs through the real channel with memfds standing in for exported VMM
// allocations.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <map>
#include <random>
#include <thread>

#include <fmt/format.h>

#include "fd_channel_test_group.hpp"
#include "memfd_files.hpp"
#include "raw_handle_set.hpp"
#include "tpcomm/error.hpp"
#include "transport/cuda/fd_channel.hpp"
#include "transport/cuda/handle_chunks.hpp"
#include "transport/cuda/process_token.hpp"

namespace tpcomm::transport::cuda {
namespace {

using test::content_of;
using test::file_with;

std::size_t open_descriptors() {
  std::size_t n = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) ++n;
  return n;
}

TEST(GraphRegistration, AThousandBuffersInThreeAllocationsNeedThreeDescriptors) {
  const std::vector<AllocationRange> allocations{
      {0x7f0000000000, 20u << 20}, {0x7f0001400000, 20u << 20}, {0x7f1000000000, 2u << 20}};
  std::vector<AllocationRange> holding;
  for (std::size_t i = 0; i < 1000; ++i) holding.push_back(allocations[(i * 7) % 3]);
  const AllocationGroups g = group_by_allocation(holding);
  ASSERT_EQ(g.allocations.size(), 3u);
  ASSERT_EQ(g.of_buffer.size(), 1000u);
  for (std::size_t i = 0; i < 1000; ++i)
    ASSERT_EQ(g.allocations[g.of_buffer[i]], holding[i]) << "buffer " << i;
  // Same base, another size: another allocation (a remapped chunk of another granularity).
  const AllocationGroups h = group_by_allocation({{0x1000, 4096}, {0x1000, 8192}, {0x1000, 4096}});
  EXPECT_EQ(h.allocations.size(), 2u);
  EXPECT_EQ(h.of_buffer, (std::vector<std::uint32_t>{0, 1, 0}));
}

TEST(GraphRegistration, EachRankSendsTheDistinctAllocationsOfItsSharedBuffersInOrder) {
  const std::vector<std::uint32_t> sent = allocations_to_send({4, 1, 4, 4, 9, 1});
  EXPECT_EQ(sent, (std::vector<std::uint32_t>{1, 4, 9}));
  EXPECT_EQ(position_in(sent, 1), 0u);
  EXPECT_EQ(position_in(sent, 4), 1u);
  EXPECT_EQ(position_in(sent, 9), 2u);
  EXPECT_THROW(position_in(sent, 5), Error);
  EXPECT_TRUE(allocations_to_send({}).empty());
}

TEST(GraphRegistration, ARoundIsSplitIntoMessagesOfAtMostTheLimit) {
  const std::vector<Chunk> c = split_into_chunks(450);
  ASSERT_EQ(c.size(), 3u);
  EXPECT_EQ(c[0].count, 200u);
  EXPECT_EQ(c[1].count, 200u);
  EXPECT_EQ(c[2].count, 50u);
  EXPECT_EQ(split_into_chunks(0).size(), 1u) << "an empty set is still one message";
  EXPECT_EQ(split_into_chunks(0)[0].count, 0u);
  EXPECT_EQ(split_into_chunks(200).size(), 1u);
  EXPECT_EQ(split_into_chunks(201).size(), 2u);
  for (std::size_t total : {1u, 199u, 200u, 201u, 400u, 401u, 4000u}) {
    std::size_t next = 0;
    const auto chunks = split_into_chunks(total);
    for (std::size_t i = 0; i < chunks.size(); ++i) {
      EXPECT_EQ(chunks[i].index, i);
      EXPECT_EQ(chunks[i].chunks, chunks.size());
      EXPECT_EQ(chunks[i].first, next) << "total " << total;
      EXPECT_GE(chunks[i].count, 1u);
      EXPECT_LE(chunks[i].count, kMaxHandleSet);
      next += chunks[i].count;
    }
    EXPECT_EQ(next, total);
  }
}

// The descriptors of message `c` of a set whose descriptor i reads "d<i>".
void add_chunk(ChunkAssembly& a, const Chunk& c) {
  std::vector<net::Fd> fds;
  std::vector<std::uint64_t> sizes;
  for (std::uint32_t k = c.first; k < c.first + c.count; ++k) {
    fds.push_back(file_with(fmt::format("d{}", k)));
    sizes.push_back(1000 + k);
  }
  a.add(c, std::move(fds), std::move(sizes));
}

TEST(GraphRegistration, MessagesInAnyOrderRebuildTheSet) {
  ChunkAssembly a(2, 5, 450);
  const auto chunks = split_into_chunks(450);
  for (std::size_t i : {2u, 0u, 1u}) {
    EXPECT_FALSE(a.complete());
    add_chunk(a, chunks[i]);
  }
  ASSERT_TRUE(a.complete());
  const HandleSet set = a.take();
  ASSERT_EQ(set.fds.size(), 450u);
  for (std::size_t k = 0; k < 450; ++k) {
    ASSERT_EQ(content_of(set.fds[k].get()), fmt::format("d{}", k));
    ASSERT_EQ(set.sizes[k], 1000 + k);
  }
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kMismatch);
    return e.what();
  }
  return "(no error)";
}

TEST(GraphRegistration, AMissingDuplicateOrOutOfRangeMessageIsAnErrorNamingIt) {
  const auto chunks = split_into_chunks(450);
  ChunkAssembly missing(1, 3, 450);
  add_chunk(missing, chunks[0]);
  add_chunk(missing, chunks[2]);
  EXPECT_NE(error_of([&] {
              missing.take();
            }).find("rank 1's buffer handles of round 3 (3 messages): message(s) 1 missing"),
            std::string::npos);

  ChunkAssembly twice(1, 3, 450);
  add_chunk(twice, chunks[1]);
  EXPECT_NE(error_of([&] { add_chunk(twice, chunks[1]); }).find("message 1 twice"),
            std::string::npos);

  ChunkAssembly beyond(1, 3, 450);
  Chunk fourth = chunks[2];
  fourth.index = 3;
  EXPECT_NE(error_of([&] { add_chunk(beyond, fourth); }).find("a message numbered 3 of 3"),
            std::string::npos);

  ChunkAssembly other_total(1, 3, 450);
  Chunk of_four = chunks[0];
  of_four.chunks = 4;
  EXPECT_NE(error_of([&] { add_chunk(other_total, of_four); }).find("a message numbered 0 of 4"),
            std::string::npos);

  EXPECT_NE(error_of([] {
              ChunkAssembly huge(1, 3, std::uint64_t{1} << 40);
            }).find("1099511627776 descriptors, more than any round can hold"),
            std::string::npos);

  ChunkAssembly shifted(1, 3, 450);
  Chunk moved = chunks[1];
  moved.first = 150;
  EXPECT_NE(error_of([&] { add_chunk(shifted, moved); })
                .find("message 1 carries 200 descriptors (200 sizes) from 150, expected 200 "
                      "from 200"),
            std::string::npos);
}

// A round of more than kMaxHandleSet descriptors (450 allocations on one rank, 201 on another, none
// on the third) reaches every peer whole, twice in a row, every descriptor naming the right file;
// nothing stays open once the sets are dropped.
TEST(GraphRegistration, RoundsOfMoreDescriptorsThanOneMessageHoldsArriveWhole) {
  constexpr int kWorld = 3;
  const std::size_t counts[kWorld] = {450, 201, 0};
  auto group = test::make_fd_test_group(kWorld, std::random_device{}());
  const std::size_t open_before = open_descriptors();
  std::vector<std::string> wrong(kWorld);
  std::vector<std::thread> ranks;
  for (int r = 0; r < kWorld; ++r) {
    ranks.emplace_back([&, r] {
      const auto me = static_cast<std::size_t>(r);
      HandleMailbox mailbox;
      for (std::uint32_t round = 0; round < 2; ++round) {
        std::vector<net::Fd> files;
        std::vector<int> fds;
        std::vector<std::uint64_t> sizes;
        for (std::size_t i = 0; i < counts[me]; ++i) {
          files.push_back(file_with(fmt::format("r{} round{} a{}", r, round, i)));
          fds.push_back(files.back().get());
          sizes.push_back(1000000u * static_cast<unsigned>(r) + i);
        }
        try {
          std::vector<HandleSet> got =
              exchange_handle_sets(group.auth[me], round, group.listener(r), mailbox, fds, sizes,
                                   Deadline::after(std::chrono::seconds(20)));
          for (std::size_t p = 0; p < kWorld; ++p) {
            if (p == me) continue;
            const HandleSet& s = got[p];
            if (s.fds.size() != counts[p] || s.sizes.size() != counts[p]) {
              wrong[me] += fmt::format("{} descriptors from rank {}; ", s.fds.size(), p);
              continue;
            }
            for (std::size_t i = 0; i < counts[p]; ++i) {
              const std::string want = fmt::format("r{} round{} a{}", p, round, i);
              if (content_of(s.fds[i].get()) != want ||
                  s.sizes[i] != 1000000u * static_cast<unsigned>(p) + i) {
                wrong[me] += want + " missing or misplaced; ";
              }
            }
          }
        } catch (const std::exception& e) {
          wrong[me] += e.what();
          return;
        }
      }
    });
  }
  for (auto& t : ranks) t.join();
  for (std::size_t r = 0; r < kWorld; ++r) EXPECT_EQ(wrong[r], "") << "rank " << r;
  EXPECT_EQ(open_descriptors(), open_before) << "descriptors left open";
}

// A receiver out of descriptors (its open-file limit) gets the message with its descriptors cut
// off (MSG_CTRUNC): an error that names the limit, not a set with descriptors missing.
TEST(GraphRegistration, DescriptorsCutOffByTheOpenFileLimitAreAnErrorNamingIt) {
  auto group = test::make_fd_test_group(2, std::random_device{}());
  std::vector<net::Fd> files;
  std::vector<int> fds;
  for (int i = 0; i < 150; ++i) {
    files.push_back(file_with(fmt::format("a{}", i)));
    fds.push_back(files.back().get());
  }
  int highest = 0;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd"))
    highest = std::max(highest, std::stoi(e.path().filename().string()));
  rlimit old{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &old), 0);
  rlimit low = old;
  low.rlim_cur = static_cast<rlim_t>(highest + 1 + 8);  // room for the sockets, not for 150 more
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &low), 0);
  std::thread sender([&] {
    HandleMailbox mailbox;
    try {  // its own receive may find no descriptor left either: only the receiver's error counts
      exchange_handle_sets(group.auth[0], 0, group.listener(0), mailbox, fds,
                           std::vector<std::uint64_t>(fds.size(), 4096),
                           Deadline::after(std::chrono::seconds(10)));
    } catch (const Error&) {
    }
  });
  std::string error = "(no error)";
  try {
    HandleMailbox mailbox;
    exchange_handle_sets(group.auth[1], 0, group.listener(1), mailbox, {}, {},
                         Deadline::after(std::chrono::seconds(10)));
  } catch (const Error& e) {
    error = e.what();
  }
  sender.join();
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &old), 0);
  EXPECT_NE(error.find("MSG_CTRUNC"), std::string::npos) << error;
  EXPECT_NE(error.find("ulimit -n"), std::string::npos) << error;
}

// A local stranger connects to rank 0's registration listener before rank 1 does and sends a set
// that claims to be rank 1's of round 0 (right communicator, round and count) with its own memory
// attached. It is a thread of this process, so it passes the credential check (the group's pid, our
// uid): only the proof made with the group's key tells it from rank 1. Its set is never taken: both
// rounds arrive whole from the real ranks, and the stranger got nothing but a nonce to answer.
TEST(GraphRegistration, AStrangersForgedSetIsRefusedAndTheRealRoundsArriveWhole) {
  constexpr int kWorld = 2;
  const std::uint64_t comm = std::random_device{}();
  auto group = test::make_fd_test_group(kWorld, comm);
  net::Fd forged = file_with("memory of a stranger");
  net::Fd stranger =
      connect_abstract(group.listener_name(0), Deadline::after(std::chrono::seconds(5)));
  test::send_raw_set(stranger.get(), test::set_header(comm, 1, 0, 1), {forged.get()}, {4096});
  std::vector<std::string> wrong(kWorld);
  std::vector<std::thread> ranks;
  for (int r = 0; r < kWorld; ++r) {
    ranks.emplace_back([&, r] {
      const auto me = static_cast<std::size_t>(r);
      HandleMailbox mailbox;
      for (std::uint32_t round = 0; round < 2; ++round) {
        net::Fd mine = file_with(fmt::format("r{} round{}", r, round));
        try {
          std::vector<HandleSet> got =
              exchange_handle_sets(group.auth[me], round, group.listener(r), mailbox, {mine.get()},
                                   {100u + me}, Deadline::after(std::chrono::seconds(10)));
          const HandleSet& s = got[1 - me];
          const std::string want = fmt::format("r{} round{}", 1 - r, round);
          if (s.fds.size() != 1 || content_of(s.fds[0].get()) != want || s.sizes[0] != 101u - me) {
            wrong[me] += fmt::format("round {}: {} descriptor(s), the first reads \"{}\"; ", round,
                                     s.fds.size(), s.fds.empty() ? "" : content_of(s.fds[0].get()));
          }
        } catch (const std::exception& e) {
          wrong[me] += e.what();
          return;
        }
      }
    });
  }
  for (auto& t : ranks) t.join();
  for (std::size_t r = 0; r < kWorld; ++r) EXPECT_EQ(wrong[r], "") << "rank " << r;
  std::uint32_t challenge[10] = {};
  EXPECT_EQ(recv(stranger.get(), challenge, sizeof(challenge), MSG_DONTWAIT),
            static_cast<ssize_t>(sizeof(challenge)))
      << "the stranger was sent no nonce to answer";
  EXPECT_EQ(challenge[0], 0x43465054u) << "\"TPFC\": a challenge, nothing else";
}

// Rank 1 registers three buffers of one allocation, then its allocator unmaps that chunk and maps
// new memory at the same address, and the next registration round shares it again. The importer
// must open the new memory, not reuse the first round's mapping.
TEST(GraphRegistration, AnAllocationRemappedAtTheSameAddressIsImportedAgain) {
  std::map<VmmImportKey, std::string> imports;  // key -> what the mapping shows
  int opened = 0;
  auto import = [&](std::uint32_t round, std::uint64_t base, std::uint32_t allocation,
                    const std::string& memory) {
    auto [it, is_new] = imports.try_emplace(vmm_import_key(1, round, base, allocation), memory);
    opened += is_new ? 1 : 0;
    return it->second;
  };
  constexpr std::uint64_t kBase = 0x7f0000000000;
  for (int buffer = 0; buffer < 3; ++buffer) EXPECT_EQ(import(0, kBase, 0, "H1"), "H1");
  EXPECT_EQ(opened, 1) << "one import for the three buffers of one allocation";
  EXPECT_EQ(import(0, kBase + (20u << 20), 1, "H3"), "H3") << "another allocation, same round";
  EXPECT_EQ(import(1, kBase, 0, "H2"), "H2") << "round 1 read the old mapping at the same address";
  EXPECT_EQ(opened, 3);
  EXPECT_NE(vmm_import_key(1, 0, kBase, 0), vmm_import_key(2, 0, kBase, 0)) << "ranks differ";
}

// A fork() child is another process: it must not read its parent's raw addresses.
TEST(GraphRegistration, AForkedChildIsAnotherProcessThanItsParentAndItsSibling) {
  const std::uint64_t parent = this_process();
  std::uint64_t from_thread = 0;
  std::thread([&] { from_thread = this_process(); }).join();
  EXPECT_EQ(from_thread, parent) << "the threads of one process are one process";
  std::vector<std::uint64_t> children;
  for (int child = 0; child < 2; ++child) {
    int p[2];
    ASSERT_EQ(pipe(p), 0);
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      const std::uint64_t mine = this_process();
      _exit(write(p[1], &mine, sizeof(mine)) == sizeof(mine) ? 0 : 1);
    }
    close(p[1]);
    std::uint64_t theirs = 0;
    EXPECT_EQ(read(p[0], &theirs, sizeof(theirs)), static_cast<ssize_t>(sizeof(theirs)));
    close(p[0]);
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    EXPECT_NE(theirs, parent) << "child " << child << " taken for its parent";
    children.push_back(theirs);
  }
  EXPECT_NE(children[0], children[1]) << "two children taken for one process";
  EXPECT_EQ(this_process(), parent) << "the parent's token is stable";
}

}  // namespace
}  // namespace tpcomm::transport::cuda
