// Gloo's connections must prove that they come from the rank they claim before any group data
// crosses them (docs/store.md, "Threat model"): each rank sends its peers the token it published
// through the store. A connection whose token is not the published one — a process outside the
// group that connected to a Gloo port during set-up — fails set-up naming the rank it posed as.
#include <gloo/rendezvous/context.h>
#include <gloo/transport/tcp/device.h>
#include <gtest/gtest.h>

#include <thread>

#include "control/store_auth.hpp"
#include "tpcomm/error.hpp"
#include "transport/gloo/gloo_pairs.hpp"
#include "transport/gloo/gloo_store_adapter.hpp"

namespace tpcomm::transport {
namespace {

using namespace std::chrono_literals;

// Two ranks on threads connect over one store; `sent_by_rank_1` is what rank 1 sends as its
// token while it publishes another when `impostor`. Returns each rank's error ("" when none).
std::vector<std::string> verify_two_ranks(bool impostor) {
  auto store = make_memory_store();
  auto device = gloo::transport::tcp::CreateDevice(gloo::transport::tcp::attr("127.0.0.1"));
  std::vector<std::string> errors(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      try {
        GlooStoreAdapter adapter(store, "test/gloo/", 10s);
        const Bytes published = control::random_nonce();
        publish_gloo_member_token(adapter, r, published);
        auto context = std::make_shared<gloo::rendezvous::Context>(r, 2);
        context->setTimeout(10s);
        context->connectFullMesh(adapter, device);
        const Bytes sent = impostor && r == 1 ? control::random_nonce() : published;
        verify_gloo_members(*context, adapter, sent, 10s);
      } catch (const Error& e) {
        errors[static_cast<std::size_t>(r)] = e.what();
      } catch (const std::exception& e) {
        errors[static_cast<std::size_t>(r)] = std::string("not a tpcomm::Error: ") + e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  return errors;
}

TEST(GlooMembership, EveryConnectionThatProvesItsRankPasses) {
  const auto errors = verify_two_ranks(false);
  EXPECT_EQ(errors[0], "");
  EXPECT_EQ(errors[1], "");
}

TEST(GlooMembership, AConnectionWithoutThePublishedTokenFailsSetUpNamingTheRankItPosedAs) {
  const auto errors = verify_two_ranks(true);
  EXPECT_NE(errors[0].find("gloo: the connection that rank 1 should have made to rank 0 did not "
                           "prove its membership"),
            std::string::npos)
      << errors[0];
  EXPECT_EQ(errors[1], "") << "rank 1 received rank 0's true token";
}

}  // namespace
}  // namespace tpcomm::transport
