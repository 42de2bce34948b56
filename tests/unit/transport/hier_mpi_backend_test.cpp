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

const TpcommMpiApi kFakeApi = [] {
  TpcommMpiApi api{};
  api.version = TPCOMM_MPI_API_VERSION;
  api.test = test_request;
  api.split = split;
  api.free_comm = free_comm;
  api.iallreduce = iallreduce;
  api.iallgather = iallgather;
  api.ireduce_scatter_block = ireduce_scatter_block;
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
