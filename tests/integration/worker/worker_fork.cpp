// The worker's `fork` mode: each rank fork()s after creating its communicator. The child tries a
// call on the inherited communicator (it must be refused naming fork()), drops it and exits the
// ordinary way, through main's return and the static destructors (as Python's sys.exit does).
// The parent waits for the child, then calls on, every element checked: a child that touched the
// parent's group (Gloo's epoll set, shm's lanes and segments, the store connection) shows here.
#include "worker_fork.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

namespace tpcomm::test {
namespace {

float value(int rank, std::size_t i) {
  return static_cast<float>((rank + 1) * 1000 + static_cast<int>(i % 251));
}

// The child's part; its return value becomes main's (the exit status).
int child_part(std::unique_ptr<Communicator> comm, int rank) {
  std::vector<float> v(1000, 1.0f);
  try {
    comm->all_reduce(v.data(), v.data(), v.size(), DataType::kFloat32, ReduceOp::kSum);
    std::printf("rank %d child: the inherited communicator ran a call\n", rank);
    return 20;
  } catch (const Error& e) {
    if (std::string(e.what()).find("fork()") == std::string::npos) {
      std::printf("rank %d child: refused without naming fork(): %s\n", rank, e.what());
      return 21;
    }
  }
  comm.reset();
  std::printf("rank %d child: refused, dropped it, exiting\n", rank);
  return 0;
}

}  // namespace

int run_fork(std::unique_ptr<Communicator>& comm, bool* is_child) {
  const int rank = comm->rank();
  const int size = comm->size();
  std::fflush(stdout);
  const pid_t child = fork();
  if (child < 0) return 22;
  if (child == 0) {
    *is_child = true;
    return child_part(std::move(comm), rank);
  }
  int status = 0;
  if (waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::printf("rank %d: the child ended with status %d\n", rank, status);
    return 23;
  }
  for (int call = 0; call < 3; ++call) {
    std::vector<float> v(70'000);
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = value(rank, i);
    comm->all_reduce(v.data(), v.data(), v.size(), DataType::kFloat32, ReduceOp::kSum);
    for (std::size_t i = 0; i < v.size(); ++i) {
      float sum = 0;
      for (int r = 0; r < size; ++r) sum += value(r, i);
      if (v[i] != sum) {
        std::printf("rank %d: element %zu is %g, expected %g\n", rank, i, v[i], sum);
        return 24;
      }
    }
  }
  std::printf("rank %d: the group works after the child's exit\n", rank);
  return 0;
}

}  // namespace tpcomm::test
