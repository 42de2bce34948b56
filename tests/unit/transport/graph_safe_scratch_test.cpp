// Broadcast's device staging buffer against CUDA graphs (docs/gpu-graphs.md, "Broadcast's device
// buffer under graphs"), with a fake allocator that records what it handed out and what was freed.
#include <gtest/gtest.h>

#include <memory>
#include <set>

#include "tpcomm/error.hpp"
#include "transport/common/graph_safe_scratch.hpp"

namespace tpcomm {
namespace {

struct FakeDevice {
  std::set<void*> live;
  int allocations = 0;
  transport::GraphSafeScratch::Allocate allocator() {
    return [this](std::size_t bytes) {
      ++allocations;
      void* p = ::operator new(bytes);
      live.insert(p);
      return std::shared_ptr<void>(p, [this](void* q) {
        live.erase(q);
        ::operator delete(q);
      });
    };
  }
};

TEST(GraphSafeScratch, ABufferACaptureUsedOutlivesItsGrowth) {
  FakeDevice device;
  {
    transport::GraphSafeScratch s(device.allocator());
    void* eager = s.get(1024, false, "broadcast");
    void* captured = s.get(512, true, "broadcast");  // a graph now points at it
    EXPECT_EQ(captured, eager);
    void* grown = s.get(4096, false, "broadcast");
    EXPECT_NE(grown, captured);
    EXPECT_EQ(device.live.count(captured), 1u) << "freed while a graph may replay into it";
    EXPECT_EQ(s.retired(), 1u);
    EXPECT_GE(s.bytes(), 4096u);
  }
  EXPECT_TRUE(device.live.empty()) << "the communicator's end frees every buffer";
}

TEST(GraphSafeScratch, ABufferNoCaptureUsedIsFreedOnGrowth) {
  FakeDevice device;
  transport::GraphSafeScratch s(device.allocator());
  void* first = s.get(1024, false, "broadcast");
  s.get(8192, false, "broadcast");
  EXPECT_EQ(device.live.count(first), 0u);
  EXPECT_EQ(s.retired(), 0u);
  EXPECT_EQ(device.live.size(), 1u);
}

TEST(GraphSafeScratch, GrowingDuringACaptureIsRefusedWithWhatToDo) {
  FakeDevice device;
  transport::GraphSafeScratch s(device.allocator());
  s.get(1024, false, "broadcast");
  try {
    s.get(2048, true, "rank 0: broadcast(float32 x 512)");
    FAIL() << "a capture allocated";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidInput);
    const std::string text = e.what();
    EXPECT_NE(text.find("rank 0: broadcast(float32 x 512)"), std::string::npos) << text;
    EXPECT_NE(text.find("2048"), std::string::npos) << text;
    EXPECT_NE(text.find("outside a capture first"), std::string::npos) << text;
  }
  EXPECT_EQ(device.allocations, 1);
  transport::GraphSafeScratch fresh(device.allocator());
  EXPECT_THROW(fresh.get(16, true, "broadcast"), Error) << "nothing made before: also refused";
  EXPECT_EQ(device.allocations, 1);
}

TEST(GraphSafeScratch, ABigEnoughBufferIsReused) {
  FakeDevice device;
  transport::GraphSafeScratch s(device.allocator());
  void* a = s.get(4096, false, "broadcast");
  EXPECT_EQ(s.get(100, true, "broadcast"), a);
  EXPECT_EQ(s.get(4096, false, "broadcast"), a);
  EXPECT_EQ(device.allocations, 1);
}

TEST(GraphSafeScratch, AFailedGrowthKeepsTheBufferItHad) {
  FakeDevice device;
  transport::GraphSafeScratch::Allocate real = device.allocator();
  bool out_of_memory = true;
  transport::GraphSafeScratch t([&](std::size_t bytes) -> std::shared_ptr<void> {
    if (out_of_memory && bytes > 1024) throw Error(ErrorCode::kUnavailable, "cudaMalloc: oom");
    return real(bytes);
  });
  void* first = t.get(1024, false, "broadcast");
  t.get(512, true, "broadcast");  // a graph points at it
  EXPECT_THROW(t.get(4096, false, "broadcast"), Error);
  EXPECT_EQ(t.get(1024, false, "broadcast"), first) << "the old buffer is gone after a failure";
  EXPECT_EQ(t.bytes(), 1024u);
  EXPECT_EQ(device.live.count(first), 1u);
  out_of_memory = false;
  EXPECT_NE(t.get(4096, false, "broadcast"), first);
  EXPECT_EQ(device.live.count(first), 1u) << "a captured buffer freed on a later growth";
  EXPECT_EQ(t.retired(), 1u);
}

// Every eager broadcast a little larger than the last, each after a capture: the buffers kept for
// graphs stay below the one in use (powers of two), not a copy per growth.
TEST(GraphSafeScratch, WhatIsKeptForGraphsStaysBelowTheBufferInUse) {
  FakeDevice device;
  transport::GraphSafeScratch s(device.allocator());
  for (std::size_t bytes = 1000; bytes <= 1'000'000; bytes += 1000) {
    s.get(bytes, false, "broadcast");
    s.get(bytes, true, "broadcast");
  }
  EXPECT_GE(s.bytes(), 1'000'000u);
  EXPECT_LT(s.retired_bytes(), s.bytes());
  EXPECT_LE(device.allocations, 11);
}

}  // namespace
}  // namespace tpcomm
