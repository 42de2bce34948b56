// The MPI comparison engine of tpcomm bench (bench_mpi.hpp).
#include "bench_mpi.hpp"

#include <climits>
#include <vector>

#include <fmt/format.h>

#include "tpcomm/convert.hpp"
#include "tpcomm/error.hpp"

#ifdef TPCOMM_HAVE_MPI
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#endif

namespace tpcomm::cli {

std::optional<Error> mpi_refusal(Op op, DataType type, ReduceOp redop, std::uint64_t max_bytes) {
#ifndef TPCOMM_HAVE_MPI
  (void)op, (void)type, (void)redop, (void)max_bytes;
  return Error(ErrorCode::kUnavailable, "--compare mpi: this tpcomm was built without Open MPI");
#else
  // An all-gather moves bytes: any type goes as 16- or 32-bit words.
  const bool reduces = tpcomm::reduces(op);
  if (reduces && type == DataType::kFloat16) {
    return invalid_input(
        "--compare mpi: MPI has no float16 reduction (all_gather compares any type)");
  }
  if (reduces && type == DataType::kBFloat16 && redop != ReduceOp::kSum) {
    return invalid_input(fmt::format(
        "--compare mpi: bfloat16 {} has no MPI reduction here (sum has one)", to_string(redop)));
  }
  // The largest buffer's elements (an all-gather's output holds every rank's): a bound on one
  // rank's count whatever the group size.
  if (max_bytes / size_of(type) > static_cast<std::uint64_t>(INT_MAX)) {
    return invalid_input(
        fmt::format("--compare mpi: {} bytes of {} are more elements than an MPI count (an int) "
                    "holds",
                    max_bytes, to_string(type)));
  }
  return std::nullopt;
#endif
}

#ifdef TPCOMM_HAVE_MPI

namespace {

// MPI has no bf16 sum: a user op that widens, adds in fp32 and rounds as tpcomm does.
// NOLINTNEXTLINE(readability-non-const-parameter): MPI_User_function's signature
void bf16_sum(void* in, void* inout, int* len, MPI_Datatype*) {
  const auto n = static_cast<std::size_t>(*len);
  std::vector<float> a(n), b(n);
  to_float(in, DataType::kBFloat16, n, a.data());
  to_float(inout, DataType::kBFloat16, n, b.data());
  for (std::size_t i = 0; i < n; ++i) b[i] += a[i];
  from_float(b.data(), DataType::kBFloat16, n, inout);
}

// Half-precision types travel as 16-bit words (an all-gather moves bytes; the bf16 sum is ours).
MPI_Datatype mpi_type(DataType type) {
  switch (type) {
    case DataType::kFloat16:
    case DataType::kBFloat16:
      return MPI_UINT16_T;
    case DataType::kInt32:
      return MPI_INT32_T;
    case DataType::kInt64:
      return MPI_INT64_T;
    case DataType::kUInt8:
      return MPI_UINT8_T;
    case DataType::kFloat32:
      break;
  }
  return MPI_FLOAT;
}

}  // namespace

struct MpiEngine::Impl {
  MPI_Datatype type = MPI_FLOAT;
  MPI_Op op = MPI_SUM;
  bool own_op = false;
};

MpiEngine::MpiEngine(Op op, DataType type, ReduceOp redop, std::uint64_t max_bytes)
    : impl_(std::make_unique<Impl>()) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized)
    throw Error(ErrorCode::kUnavailable, "--compare mpi needs the ranks started by mpirun");
  if (auto why = mpi_refusal(op, type, redop, max_bytes)) throw *why;
  // Open MPI sets its connections up on first use: a barrier now, so that its set-up does not
  // run beside the first row's timings (tpcomm's first row took 100 times longer without it).
  MPI_Barrier(MPI_COMM_WORLD);
  impl_->type = mpi_type(type);
  const bool bf16_sum_op = reduces(op) && type == DataType::kBFloat16 && redop == ReduceOp::kSum;
  if (bf16_sum_op) {
    MPI_Op_create(bf16_sum, 1, &impl_->op);
    impl_->own_op = true;
  } else if (redop == ReduceOp::kMax) {
    impl_->op = MPI_MAX;
  } else if (redop == ReduceOp::kMin) {
    impl_->op = MPI_MIN;
  }
}

MpiEngine::~MpiEngine() {
  if (impl_->own_op) MPI_Op_free(&impl_->op);
}

void MpiEngine::call(Op op, const void* in, void* out, std::size_t per) const {
  const int n = static_cast<int>(per);
  if (op == Op::kAllReduce) {
    MPI_Allreduce(in, out, n, impl_->type, impl_->op, MPI_COMM_WORLD);
  } else if (op == Op::kAllGather) {
    MPI_Allgather(in, n, impl_->type, out, n, impl_->type, MPI_COMM_WORLD);
  } else if (op == Op::kAllToAll) {
    MPI_Alltoall(in, n, impl_->type, out, n, impl_->type, MPI_COMM_WORLD);
  } else if (op == Op::kGather) {  // root 0, as tpcomm bench's
    MPI_Gather(in, n, impl_->type, out, n, impl_->type, 0, MPI_COMM_WORLD);
  } else if (op == Op::kScatter) {
    MPI_Scatter(in, n, impl_->type, out, n, impl_->type, 0, MPI_COMM_WORLD);
  } else if (op == Op::kReduce) {
    MPI_Reduce(in, out, n, impl_->type, impl_->op, 0, MPI_COMM_WORLD);
  } else {
    MPI_Reduce_scatter_block(in, out, n, impl_->type, impl_->op, MPI_COMM_WORLD);
  }
}

void MpiEngine::all_to_allv(const void* in, const std::vector<std::size_t>& send, void* out,
                            const std::vector<std::size_t>& recv) const {
  std::vector<int> sc, sd, rc, rd;
  int s_at = 0, r_at = 0;
  for (std::size_t p = 0; p < send.size(); ++p) {
    sc.push_back(static_cast<int>(send[p]));
    sd.push_back(s_at);
    s_at += sc.back();
    rc.push_back(static_cast<int>(recv[p]));
    rd.push_back(r_at);
    r_at += rc.back();
  }
  MPI_Alltoallv(in, sc.data(), sd.data(), impl_->type, out, rc.data(), rd.data(), impl_->type,
                MPI_COMM_WORLD);
}

void MpiEngine::send(const void* in, std::size_t count, int peer) const {
  MPI_Send(in, static_cast<int>(count), impl_->type, peer, 0, MPI_COMM_WORLD);
}

void MpiEngine::recv(void* out, std::size_t count, int peer) const {
  MPI_Recv(out, static_cast<int>(count), impl_->type, peer, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
}

#else

struct MpiEngine::Impl {};

MpiEngine::MpiEngine(Op op, DataType type, ReduceOp redop, std::uint64_t max_bytes) {
  throw *mpi_refusal(op, type, redop, max_bytes);
}
MpiEngine::~MpiEngine() = default;
void MpiEngine::call(Op, const void*, void*, std::size_t) const {}
void MpiEngine::all_to_allv(const void*, const std::vector<std::size_t>&, void*,
                            const std::vector<std::size_t>&) const {}
void MpiEngine::send(const void*, std::size_t, int) const {}
void MpiEngine::recv(void*, std::size_t, int) const {}

#endif

}  // namespace tpcomm::cli
