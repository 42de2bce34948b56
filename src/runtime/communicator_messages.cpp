// The public Communicator's point-to-point calls: each passes the gate to peer_messages.cpp.
#include "communicator_state.hpp"
#include "peer_messages.hpp"

namespace tpcomm {
namespace {

transport::PeerMessage message(bool send, const void* buffer, std::size_t count, DataType type,
                               int peer, int tag, CudaStream stream) {
  return {.send = send,
          .buffer = const_cast<void*>(buffer),  // a send's is only read
          .count = count,
          .type = type,
          .peer = peer,
          .tag = tag,
          .stream = stream};
}

}  // namespace

void Communicator::send(const void* buffer, std::size_t count, DataType type, int peer, int tag) {
  wait(isend(buffer, count, type, peer, tag));
}

void Communicator::recv(void* buffer, std::size_t count, DataType type, int peer, int tag) {
  wait(irecv(buffer, count, type, peer, tag));
}

Communicator::Request Communicator::isend(const void* buffer, std::size_t count, DataType type,
                                          int peer, int tag) {
  return impl_->gate.run("send", [&] {
    return runtime::start_message(*impl_, message(true, buffer, count, type, peer, tag, nullptr),
                                  false);
  });
}

Communicator::Request Communicator::irecv(void* buffer, std::size_t count, DataType type, int peer,
                                          int tag) {
  return impl_->gate.run("recv", [&] {
    return runtime::start_message(*impl_, message(false, buffer, count, type, peer, tag, nullptr),
                                  false);
  });
}

Communicator::Request Communicator::isend(const void* buffer, std::size_t count, DataType type,
                                          int peer, int tag, CudaStream stream) {
  return impl_->gate.run("send", [&] {
    return runtime::start_message(*impl_, message(true, buffer, count, type, peer, tag, stream),
                                  true);
  });
}

Communicator::Request Communicator::irecv(void* buffer, std::size_t count, DataType type, int peer,
                                          int tag, CudaStream stream) {
  return impl_->gate.run("recv", [&] {
    return runtime::start_message(*impl_, message(false, buffer, count, type, peer, tag, stream),
                                  true);
  });
}

Communicator::Request Communicator::irecv_any(void* buffer, std::size_t count, DataType type,
                                              int tag) {
  return impl_->gate.run("recv", [&] {
    return runtime::start_message(*impl_, message(false, buffer, count, type, -1, tag, nullptr),
                                  false);
  });
}

int Communicator::wait(Request request) {
  return impl_->gate.run("wait", [&] { return runtime::wait_message(*impl_, request); });
}

}  // namespace tpcomm
