// StoreHost and bootstrap_from_address: rank 0 serves the store on a kernel-chosen port and the
// ranks meet by the address it hands out (the way tpcomm.Communicator.from_torch rendezvous).
#include <gtest/gtest.h>

#include <future>
#include <thread>

#include "tpcomm/communicator.hpp"
#include "tpcomm/error.hpp"

namespace tpcomm {
namespace {

using namespace std::chrono_literals;

TEST(AddressBootstrap, RanksMeetByTheAddressRankZeroHandsOutAndReduce) {
  constexpr int kSize = 3;
  std::promise<std::string> address;
  auto shared = address.get_future().share();
  std::vector<std::thread> ranks;
  std::vector<std::vector<float>> results(kSize);
  for (int r = 0; r < kSize; ++r) {
    ranks.emplace_back([&, r] {
      try {
        std::unique_ptr<StoreHost> host;
        if (r == 0) {
          host = std::make_unique<StoreHost>("127.0.0.1");
          address.set_value(host->address());
        }
        auto comm = Communicator::create(
            bootstrap_from_address(shared.get(), r, kSize, Deadline::after(20s), std::move(host)));
        std::vector<float> v(777);
        for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(r * 10 + i % 7);
        comm->all_reduce(v.data(), v.data(), v.size(), DataType::kFloat32, ReduceOp::kSum);
        results[r] = v;
      } catch (const std::exception& e) {
        ADD_FAILURE() << "rank " << r << ": " << e.what();
      }
    });
  }
  for (auto& t : ranks) t.join();
  for (int r = 0; r < kSize; ++r) {
    ASSERT_EQ(results[r].size(), 777u);
    for (std::size_t i = 0; i < 777; ++i)
      ASSERT_EQ(results[r][i], static_cast<float>(30 + 3 * (i % 7))) << r << " " << i;
  }
}

TEST(AddressBootstrap, TheAddressCarriesAFreshPortSecretAndGroupEachTime) {
  StoreHost a("127.0.0.1");
  StoreHost b("127.0.0.1");
  EXPECT_EQ(a.address().rfind("tpcomm-store 127.0.0.1 ", 0), 0u) << a.address();
  EXPECT_NE(a.address(), b.address());
}

TEST(AddressBootstrap, TextThatIsNoAddressAndARankOutsideTheGroupAreRefused) {
  try {
    bootstrap_from_address("127.0.0.1:29500", 0, 2, Deadline::after(1s));
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidInput);
    EXPECT_NE(std::string(e.what()).find("is not a tpcomm store address"), std::string::npos);
  }
  StoreHost host("127.0.0.1");
  EXPECT_THROW(bootstrap_from_address(host.address(), 2, 2, Deadline::after(1s)), Error);
  EXPECT_THROW(StoreHost("192.0.2.1"), Error);  // TEST-NET: never this machine's address
}

}  // namespace
}  // namespace tpcomm
