// A program outside tpcomm, built against the installed tree (find_package or pkg-config) as
// C++17: every rank all-reduces rank-dependent values, broadcasts, splits, and checks each element;
// then it says whether libmpi is mapped in the process (it must be only under mpirun: libtpcomm
// opens its MPI plug-in on demand).
#include <tpcomm/tpcomm.hpp>
#include <tpcomm/version.hpp>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

// Whether the running process maps libmpi (not only whether the binary names it).
bool maps_libmpi() {
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);) {
    if (line.find("/libmpi.so") != std::string::npos) return true;
  }
  return false;
}

int main() {
  try {
    auto comm = tpcomm::Communicator::create(
        tpcomm::bootstrap_from_environment(tpcomm::Deadline::after(std::chrono::seconds(60))));
    const int rank = comm->rank();
    const int size = comm->size();
    std::vector<float> v(4096);
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(rank * 1000 + i % 100);
    comm->all_reduce(v.data(), v.data(), v.size(), tpcomm::DataType::kFloat32,
                     tpcomm::ReduceOp::kSum);
    for (std::size_t i = 0; i < v.size(); ++i) {
      const float want = static_cast<float>(1000 * size * (size - 1) / 2) +
                         static_cast<float>(size) * static_cast<float>(i % 100);
      if (v[i] != want) {
        std::fprintf(stderr, "rank %d: element %zu is %g, expected %g\n", rank, i, v[i], want);
        return 1;
      }
    }
    int token = rank == size - 1 ? 4242 : -1;
    comm->broadcast(&token, 1, tpcomm::DataType::kFloat32, size - 1);
    if (token != 4242) {
      std::fprintf(stderr, "rank %d: broadcast gave %d\n", rank, token);
      return 1;
    }
    auto solo = comm->split(rank, 0);
    if (!solo || solo->size() != 1) return 1;
    comm->barrier();
    std::printf("consumer %s rank %d of %d ok (libmpi mapped: %s)\n", tpcomm::kVersion, rank, size,
                maps_libmpi() ? "yes" : "no");
    return 0;
  } catch (const tpcomm::Error& e) {
    std::fprintf(stderr, "consumer: %s\n", e.what());
    return 2;
  }
}
