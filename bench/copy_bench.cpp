// The copies a W = 2 shm all-gather is made of, alone: a rank's own block (memcpy, or streaming
// stores from 4 MiB) and the peer's block read where it lies (process_vm_readv from another
// process, the single_copy algorithm and Open MPI's vader alike). Their sum at one block size is
// the floor of a W = 2 single_copy all-gather of twice that size, which tpcomm bench's table
// sits against (docs/bench.md): no algorithm with one copy per block moves fewer bytes.
#include <benchmark/benchmark.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/cpu/streaming_copy.hpp"
#include "transport/cpu/single_copy.hpp"

namespace {

namespace cpu = tpcomm::transport::cpu;
namespace kernels = tpcomm::kernels::cpu;

constexpr std::size_t kMaxBlock = 16 << 20;

// A child process holding a copy of this process's memory at the same addresses (fork), waiting
// to be read until the parent closes the pipe: the peer of a single-copy read.
class PeerProcess {
 public:
  PeerProcess() {
    if (pipe(pipe_) != 0) return;
    pid_ = fork();
    if (pid_ == 0) {
      close(pipe_[1]);
      char c = 0;
      (void)!read(pipe_[0], &c, 1);  // returns when the parent closes its end
      _exit(0);
    }
    close(pipe_[0]);
  }
  ~PeerProcess() {
    close(pipe_[1]);
    if (pid_ > 0) waitpid(pid_, nullptr, 0);
  }
  int pid() const { return pid_; }

 private:
  int pipe_[2] = {-1, -1};
  int pid_ = -1;
};

std::vector<std::uint8_t>& source() {
  static std::vector<std::uint8_t> block = [] {
    std::vector<std::uint8_t> b(kMaxBlock);
    for (std::size_t i = 0; i < b.size(); ++i) b[i] = static_cast<std::uint8_t>(i * 131 + 7);
    return b;
  }();
  return block;
}

void BM_PeerRead(benchmark::State& state) {
  const auto bytes = static_cast<std::size_t>(state.range(0));
  const auto& block = source();  // before the fork: the child holds the same bytes
  const PeerProcess peer;
  if (peer.pid() <= 0) {
    state.SkipWithError("fork failed");
    return;
  }
  std::vector<std::uint8_t> to(bytes);
  const auto address = reinterpret_cast<std::uint64_t>(block.data());
  cpu::read_peer_memory(1, peer.pid(), address, to.data(), bytes);
  if (std::memcmp(to.data(), block.data(), bytes) != 0) {
    state.SkipWithError("the peer's bytes read back wrong");
    return;
  }
  for (auto _ : state) {
    cpu::read_peer_memory(1, peer.pid(), address, to.data(), bytes);
    benchmark::DoNotOptimize(to.data());
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) *
                          static_cast<std::int64_t>(bytes));
}

// A rank's own block into the output, as the all-gather places it (copy_block).
void BM_OwnBlock(benchmark::State& state) {
  const auto bytes = static_cast<std::size_t>(state.range(0));
  std::vector<std::uint8_t> to(bytes);
  for (auto _ : state) {
    kernels::copy_block(to.data(), source().data(), bytes, true);
    benchmark::DoNotOptimize(to.data());
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) *
                          static_cast<std::int64_t>(bytes));
}

// Block sizes: half of tpcomm bench's all-gather sizes 64 KiB to 16 MiB at W = 2.
void block_sizes(benchmark::internal::Benchmark* b) {
  for (std::int64_t bytes = 32 << 10; bytes <= static_cast<std::int64_t>(8 << 20); bytes *= 4) {
    b->Arg(bytes);
  }
}
BENCHMARK(BM_PeerRead)->Apply(block_sizes);
BENCHMARK(BM_OwnBlock)->Apply(block_sizes);

}  // namespace

BENCHMARK_MAIN();
