// Gloo's rendezvous runs over our store: this adapter implements gloo::rendezvous::Store with a
// key prefix per communicator, deadlines on every wait, and a record of the keys it wrote so that
// they can be removed once every rank is connected.
#pragma once

#include <gloo/rendezvous/store.h>

#include <memory>
#include <string>
#include <vector>

#include "tpcomm/store.hpp"

namespace tpcomm::transport {

class GlooStoreAdapter final : public gloo::rendezvous::Store {
 public:
  GlooStoreAdapter(std::shared_ptr<tpcomm::Store> store, std::string prefix,
                   std::chrono::milliseconds timeout)
      : store_(std::move(store)), prefix_(std::move(prefix)), timeout_(timeout) {}

  void set(const std::string& key, const std::vector<char>& data) override;
  // Gloo expects get() to wait for the key.
  std::vector<char> get(const std::string& key) override;
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override;

  // Deletes the keys this rank wrote (after every rank has read them).
  void remove_own_keys();

 private:
  std::shared_ptr<tpcomm::Store> store_;
  std::string prefix_;
  std::chrono::milliseconds timeout_;
  std::vector<std::string> written_;
};

}  // namespace tpcomm::transport
