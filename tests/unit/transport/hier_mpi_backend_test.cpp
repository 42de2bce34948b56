// hier_mpi's lane (transport/hier_mpi/hier_mpi_backend.hpp) over a fake MPI plug-in: what it hands
// MPI for each op, that it copies MPI's result out only once the request completes, and its failure
// paths, which real MPI cannot be made to show on demand: a peer that never takes part (a
// timeout within the call's deadline), an abort from another thread (within milliseconds), a
// peer's mismatched call (named), and a lane that gave up refusing every later call while the
// abandoned request's buffers stay valid for MPI to write.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "tpcomm/error.hpp"
#include "transport/common/call_identity.hpp"
#include "transport/hier_mpi/hier_mpi_backend.hpp"

namespace tpcomm::transport {
namespace {

// The fake world: this rank is lane rank 0 of 2, and lane rank 1 calls with the same data.
struct Fake {
  bool data_completes = true;
  bool peer_mismatch = false;
  int split_color = -1, split_key = -1, freed = 0;
  std::string kind;  // the last data collective started
  int count = -1, type = -1, op = -1;
  const void* in = nullptr;
  void* out = nullptr;
};
Fake fake;
int world_comm = 0, lane_comm = 0;

struct Request {
  bool completes = true;
  std::function<void()> finish;  // what MPI writes when the request completes
};

int start(void** request, bool completes, std::function<void()> finish) {
  *request = new Request{completes, std::move(finish)};
  return 0;
}

int test_request(void* request, int* done) {
  auto* r = static_cast<Request*>(request);
  *done = r->completes ? 1 : 0;
  if (*done) {
    r->finish();
    delete r;
  }
  return 0;
}

int split(void*, int color, int key, void** out, int* rank, int* size) {
  fake.split_color = color;
  fake.split_key = key;
  *out = &lane_comm;
  *rank = 0;
  *size = 2;
  return 0;
}

void free_comm(void*) {
  ++fake.freed;
}

void record(const char* kind, const void* in, void* out, int count, int type, int op) {
  fake.kind = kind;
  fake.in = in;
  fake.out = out;
  fake.count = count;
  fake.type = type;
  fake.op = op;
}

// Both lane ranks hold the same floats: their sum is twice the input.
int iallreduce(void*, const void* in, void* out, int count, int type, int op, void** request) {
  record("allreduce", in, out, count, type, op);
  return start(request, fake.data_completes, [=] {
    for (int i = 0; i < count && type == TPCOMM_MPI_FLOAT; ++i)
      static_cast<float*>(out)[i] = 2 * static_cast<const float*>(in)[i];
  });
}

// Identities (32 bytes) or data: lane rank 1's block is ours, or our identity with count + 1.
int iallgather(void*, const void* in, void* out, int count, int type, void** request) {
  const bool identities = count == static_cast<int>(sizeof(CallIdentity)) && fake.kind.empty();
  if (!identities) record("allgather", in, out, count, type, -1);
  return start(request, identities || fake.data_completes, [=] {
    auto* o = static_cast<std::uint8_t*>(out);
    std::memcpy(o, in, static_cast<std::size_t>(count));
    std::memcpy(o + count, in, static_cast<std::size_t>(count));
    if (identities && fake.peer_mismatch) reinterpret_cast<CallIdentity*>(o + count)->count += 1;
  });
}

int ireduce_scatter_block(void*, const void* in, void* out, int count, int type, int op,
                          void** request) {
  record("reduce_scatter", in, out, count, type, op);
  return start(request, fake.data_completes, [] {});
}

// The calls of version 3: what each was handed, and what "MPI" writes on completion (lane rank
// 1 sends the same as this rank).
struct Blocks {
  std::vector<int> send_counts, send_displs, recv_counts, recv_displs;
  int root = -1;
};
Blocks handed;
std::vector<int> copy(const int* v) {
  return v == nullptr ? std::vector<int>{} : std::vector<int>(v, v + 2);
}

// Rank r's block for this rank is its block for rank 0 (both ranks send alike).
int ialltoallv(void*, const void* in, const int* sc, const int* sd, void* out, const int* rc,
               const int* rd, int type, void** request) {
  record("alltoallv", in, out, -1, type, -1);
  handed = {copy(sc), copy(sd), copy(rc), copy(rd), -1};
  return start(request, fake.data_completes, [=] {
    for (int r = 0; r < 2; ++r) {
      std::memcpy(static_cast<std::uint8_t*>(out) + rd[r], in, static_cast<std::size_t>(rc[r]));
    }
  });
}

int iallgatherv(void*, const void* in, int count, void* out, const int* counts, const int* displs,
                int type, void** request) {
  record("allgatherv", in, out, count, type, -1);
  handed = {{}, {}, copy(counts), copy(displs), -1};
  return start(request, fake.data_completes, [=] {
    for (int r = 0; r < 2; ++r) {
      std::memset(static_cast<std::uint8_t*>(out) + displs[r], 0x10 + r,
                  static_cast<std::size_t>(counts[r]));
    }
  });
}

int ireduce_scatter(void*, const void* in, void* out, const int* counts, int type, int op,
                    void** request) {
  record("reduce_scatterv", in, out, -1, type, op);
  handed = {{}, {}, copy(counts), {}, -1};
  return start(request, fake.data_completes, [] {});
}

int rooted(const char* kind, const void* in, void* out, int count, int type, int op, int root,
           void** request) {
  record(kind, in, out, count, type, op);
  handed = {{}, {}, {}, {}, root};
  return start(request, fake.data_completes, [] {});
}
int ireduce(void*, const void* in, void* out, int count, int type, int op, int root, void** req) {
  return rooted("reduce", in, out, count, type, op, root, req);
}
int igather(void*, const void* in, void* out, int count, int type, int root, void** req) {
  return rooted("gather", in, out, count, type, -1, root, req);
}
int iscatter(void*, const void* in, void* out, int count, int type, int root, void** req) {
  return rooted("scatter", in, out, count, type, -1, root, req);
}

const TpcommMpiApi kFakeApi = [] {
  TpcommMpiApi api{};
  api.version = TPCOMM_MPI_API_VERSION;
  api.test = test_request;
  api.split = split;
  api.free_comm = free_comm;
  api.iallreduce = iallreduce;
  api.iallgather = iallgather;
  api.ireduce_scatter_block = ireduce_scatter_block;
  api.ialltoallv = ialltoallv;
  api.iallgatherv = iallgatherv;
  api.ireduce_scatter = ireduce_scatter;
  api.ireduce = ireduce;
  api.igather = igather;
  api.iscatter = iscatter;
  return api;
}();

std::unique_ptr<CollectiveBackend> lane(std::chrono::milliseconds timeout) {
  fake = Fake{};
  BackendContext ctx;
  ctx.rank = 0;
  ctx.size = 2;
  ctx.timeout = timeout;
  auto backend = make_mpi_lane(ctx, {&kFakeApi, &world_comm, 0, 4, "fake MPI"}, 1, 0);
  backend->run_setup_step(0, Deadline::after(timeout));
  return backend;
}

// The identities' all-gather is started first: the data collective is the last one recorded.
void run(CollectiveBackend& b, Op op, const void* in, void* out, std::size_t count, DataType t,
         ReduceOp r = ReduceOp::kSum) {
  fake.kind.clear();
  b.run({.op = op, .input = in, .output = out, .count = count, .type = t, .reduce = r});
}

TEST(MpiLane, EachOpHandsMpiItsOwnCopyAndReturnsWhatMpiWroteOnCompletion) {
  auto b = lane(std::chrono::milliseconds(5000));
  EXPECT_EQ(fake.split_color, 1);
  EXPECT_EQ(fake.split_key, 0);
  std::vector<float> in(16), out(16, -1);
  for (std::size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>(i) + 0.5f;
  run(*b, Op::kAllReduce, in.data(), out.data(), 16, DataType::kFloat32);
  EXPECT_EQ(fake.kind, "allreduce");
  EXPECT_NE(fake.in, in.data()) << "MPI must get the lane's own copy";
  EXPECT_EQ(fake.count, 16);
  EXPECT_EQ(fake.type, TPCOMM_MPI_FLOAT);
  EXPECT_EQ(fake.op, TPCOMM_MPI_SUM);
  for (std::size_t i = 0; i < out.size(); ++i) EXPECT_EQ(out[i], 2 * in[i]) << i;

  std::vector<std::int32_t> ints(7, 3);
  run(*b, Op::kAllReduce, ints.data(), ints.data(), 7, DataType::kInt32, ReduceOp::kMax);
  EXPECT_EQ(fake.type, TPCOMM_MPI_INT32);
  EXPECT_EQ(fake.op, TPCOMM_MPI_MAX);

  std::vector<std::uint16_t> halves = {1, 2, 3, 4, 5}, gathered(10, 0);
  run(*b, Op::kAllGather, halves.data(), gathered.data(), 5, DataType::kBFloat16);
  EXPECT_EQ(fake.kind, "allgather");
  EXPECT_EQ(fake.count, 10) << "an all-gather moves bytes";
  EXPECT_EQ(fake.type, TPCOMM_MPI_BYTE);
  for (std::size_t i = 0; i < gathered.size(); ++i) EXPECT_EQ(gathered[i], halves[i % 5]) << i;

  std::vector<std::int64_t> blocks(6, 1), mine(3, 0);
  run(*b, Op::kReduceScatter, blocks.data(), mine.data(), 3, DataType::kInt64, ReduceOp::kMin);
  EXPECT_EQ(fake.kind, "reduce_scatter");
  EXPECT_EQ(fake.count, 3);
  EXPECT_EQ(fake.type, TPCOMM_MPI_INT64);
  EXPECT_EQ(fake.op, TPCOMM_MPI_MIN);
  b.reset();
  EXPECT_EQ(fake.freed, 1) << "a healthy lane frees its communicator";
}

// all_to_all(v), all_gatherv and reduce_scatterv in MPI's units (bytes, or the reduction's
// elements), their displacements, and the rooted calls' roots; an output only where MPI writes
// one.
TEST(MpiLane, TheExchangesAndRootedCallsHandMpiCountsDisplacementsAndRoots) {
  auto b = lane(std::chrono::milliseconds(5000));
  std::vector<std::uint16_t> in = {1, 2, 3, 4, 5}, out(6, 0);
  const std::size_t sends[] = {2, 3}, receives[] = {2, 4};
  fake.kind.clear();
  b->run({.op = Op::kAllToAll,
          .input = in.data(),
          .output = out.data(),
          .type = DataType::kBFloat16,
          .send_counts = sends,
          .recv_counts = receives});
  EXPECT_EQ(fake.kind, "alltoallv");
  EXPECT_EQ(fake.type, TPCOMM_MPI_BYTE);
  EXPECT_EQ(handed.send_counts, (std::vector<int>{4, 6}));
  EXPECT_EQ(handed.send_displs, (std::vector<int>{0, 4}));
  EXPECT_EQ(handed.recv_counts, (std::vector<int>{4, 8}));
  EXPECT_EQ(handed.recv_displs, (std::vector<int>{0, 4}));
  EXPECT_EQ(out, (std::vector<std::uint16_t>{1, 2, 1, 2, 3, 4})) << "block 1 holds 4 elements";

  fake.kind.clear();
  b->run({.op = Op::kAllToAll,
          .input = in.data(),
          .output = out.data(),
          .count = 2,
          .type = DataType::kBFloat16});
  EXPECT_EQ(handed.send_counts, (std::vector<int>{4, 4})) << "all_to_all: equal blocks";
  EXPECT_EQ(handed.recv_displs, (std::vector<int>{0, 4}));

  const std::size_t counts[] = {1, 3};
  std::vector<std::int32_t> gathered(4, 0);
  fake.kind.clear();
  b->run({.op = Op::kAllGather,
          .input = in.data(),
          .output = gathered.data(),
          .count = 4,
          .type = DataType::kInt32,
          .recv_counts = counts,
          .counts_digest = 7});
  EXPECT_EQ(fake.kind, "allgatherv");
  EXPECT_EQ(fake.count, 4) << "this rank's block, in bytes";
  EXPECT_EQ(handed.recv_counts, (std::vector<int>{4, 12}));
  EXPECT_EQ(handed.recv_displs, (std::vector<int>{0, 4}));
  EXPECT_EQ(gathered[0], 0x10101010);
  EXPECT_EQ(gathered[3], 0x11111111);

  std::vector<float> whole(4, 1.0f), part(1, 0.0f);
  fake.kind.clear();
  b->run({.op = Op::kReduceScatter,
          .input = whole.data(),
          .output = part.data(),
          .count = 4,
          .type = DataType::kFloat32,
          .reduce = ReduceOp::kMax,
          .recv_counts = counts,
          .counts_digest = 7});
  EXPECT_EQ(fake.kind, "reduce_scatterv");
  EXPECT_EQ(handed.recv_counts, (std::vector<int>{1, 3})) << "a reduction counts elements";
  EXPECT_EQ(fake.op, TPCOMM_MPI_MAX);

  for (Op op : {Op::kGather, Op::kScatter, Op::kReduce}) {
    std::vector<float> data(8, 1.0f);
    fake.kind.clear();
    // Lane rank 1 is the root: this rank passes no output (gather, reduce) or input (scatter).
    b->run({.op = op,
            .input = op == Op::kScatter ? nullptr : data.data(),
            .output = op == Op::kScatter ? data.data() : nullptr,
            .count = 3,
            .type = DataType::kFloat32,
            .root = 1});
    EXPECT_EQ(fake.kind, std::string(to_string(op)));
    EXPECT_EQ(handed.root, 1);
    EXPECT_EQ(fake.count, op == Op::kReduce ? 3 : 12) << to_string(op);
  }
}

TEST(MpiLane, APeerThatNeverTakesPartIsATimeoutAndTheLaneTakesNoMore) {
  auto b = lane(std::chrono::milliseconds(300));
  fake.data_completes = false;
  std::vector<float> in(16, 1.0f), out(16, 0.0f);
  const auto began = std::chrono::steady_clock::now();
  try {
    run(*b, Op::kAllReduce, in.data(), out.data(), 16, DataType::kFloat32);
    FAIL() << "a call no peer finishes returned";
  } catch (const Error& e) {
    const auto took = std::chrono::steady_clock::now() - began;
    EXPECT_EQ(e.code(), ErrorCode::kTimeout) << e.what();
    EXPECT_GE(took, std::chrono::milliseconds(300));
    EXPECT_LT(took, std::chrono::milliseconds(3000));
    EXPECT_NE(std::string(e.what()).find("the data of all_reduce(float32 x 16, sum)"),
              std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("did not take part within 300 ms"), std::string::npos)
        << e.what();
  }
  // MPI may still finish the abandoned request: its buffers must still be the lane's.
  std::memset(fake.out, 0x7f, 16 * sizeof(float));
  try {
    run(*b, Op::kAllReduce, in.data(), out.data(), 16, DataType::kFloat32);
    FAIL() << "a lane that gave up took another call";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kAborted);
    EXPECT_NE(std::string(e.what()).find("gave up on an earlier call"), std::string::npos)
        << e.what();
  }
  b.reset();
  EXPECT_EQ(fake.freed, 0) << "a request left with MPI still refers to the communicator";
  for (float v : out) EXPECT_EQ(v, 0.0f) << "nothing reached the caller";
}

TEST(MpiLane, AnAbortFromAnotherThreadEndsTheWaitWithinMilliseconds) {
  auto b = lane(std::chrono::milliseconds(60000));
  fake.data_completes = false;
  std::vector<float> data(64, 1.0f);
  std::thread aborter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    b->abort();
  });
  const auto began = std::chrono::steady_clock::now();
  try {
    run(*b, Op::kAllReduce, data.data(), data.data(), 64, DataType::kFloat32);
    ADD_FAILURE() << "an aborted call returned";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kAborted) << e.what();
    EXPECT_NE(std::string(e.what()).find("the communicator was aborted"), std::string::npos);
  }
  EXPECT_LT(std::chrono::steady_clock::now() - began, std::chrono::milliseconds(2000));
  aborter.join();
}

TEST(MpiLane, APeersMismatchedCallIsNamedBeforeAnyResult) {
  auto b = lane(std::chrono::milliseconds(5000));
  fake.peer_mismatch = true;
  std::vector<float> in(16, 1.0f), out(16, 0.0f);
  try {
    run(*b, Op::kAllReduce, in.data(), out.data(), 16, DataType::kFloat32);
    FAIL() << "a mismatched call returned";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kMismatch) << e.what();
    EXPECT_NE(std::string(e.what()).find("lane rank 1 called all_reduce(float32 x 17, sum)"),
              std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("this rank called all_reduce(float32 x 16, sum)"),
              std::string::npos)
        << e.what();
  }
  for (float v : out) EXPECT_EQ(v, 0.0f);
}

}  // namespace
}  // namespace tpcomm::transport
