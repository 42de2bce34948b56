// Frame encoding and decoding of the TCP store protocol.
#include "store_protocol.hpp"

#include <cstring>

#include <fmt/format.h>

#include "common/little_endian.hpp"

#include "tpcomm/error.hpp"

namespace tpcomm::store_wire {
namespace {

using common::get_le;
using common::put_le;

}  // namespace

std::string check_header(const Header& h) {
  if (h.magic != kMagic) {
    return fmt::format("bad magic 0x{:08x} (not a tpcomm store frame)", h.magic);
  }
  if (h.version != kVersion) {
    return fmt::format("protocol version {} (this store speaks {})", h.version, kVersion);
  }
  if (h.length > kMaxPayload) {
    return fmt::format("frame of {} bytes is above the limit of {}", h.length, kMaxPayload);
  }
  return {};
}

Header decode_header(const std::uint8_t* b) {
  Header h;
  h.magic = static_cast<std::uint32_t>(get_le(b, 4));
  h.version = static_cast<std::uint16_t>(get_le(b + 4, 2));
  h.type = static_cast<Type>(get_le(b + 6, 2));
  h.length = static_cast<std::uint32_t>(get_le(b + 8, 4));
  return h;
}

Writer& Writer::bytes(const Bytes& b) {
  put_le(payload_, b.size(), 4);
  payload_.insert(payload_.end(), b.begin(), b.end());
  return *this;
}
Writer& Writer::string(const std::string& s) {
  put_le(payload_, s.size(), 4);
  payload_.insert(payload_.end(), s.begin(), s.end());
  return *this;
}
Writer& Writer::i64(std::int64_t v) {
  put_le(payload_, static_cast<std::uint64_t>(v), 8);
  return *this;
}
Writer& Writer::u8(std::uint8_t v) {
  payload_.push_back(v);
  return *this;
}
Bytes Writer::frame() const {
  if (payload_.size() > kMaxPayload) {
    throw invalid_input(fmt::format("store message of {} bytes is above the limit of {}",
                                    payload_.size(), kMaxPayload));
  }
  Bytes out;
  out.reserve(kHeaderSize + payload_.size());
  put_le(out, kMagic, 4);
  put_le(out, kVersion, 2);
  put_le(out, static_cast<std::uint16_t>(type_), 2);
  put_le(out, payload_.size(), 4);
  out.insert(out.end(), payload_.begin(), payload_.end());
  return out;
}

void Reader::need(std::size_t n) const {
  if (size_ - pos_ < n) {
    throw invalid_input(
        fmt::format("truncated store message: needed {} more bytes at offset {} "
                    "of {}",
                    n, pos_, size_));
  }
}
Bytes Reader::bytes() {
  need(4);
  auto n = static_cast<std::size_t>(get_le(data_ + pos_, 4));
  pos_ += 4;
  need(n);
  Bytes out(data_ + pos_, data_ + pos_ + n);
  pos_ += n;
  return out;
}
std::string Reader::string() {
  Bytes b = bytes();
  return std::string(b.begin(), b.end());
}
std::int64_t Reader::i64() {
  need(8);
  auto v = static_cast<std::int64_t>(get_le(data_ + pos_, 8));
  pos_ += 8;
  return v;
}
std::uint8_t Reader::u8() {
  need(1);
  return data_[pos_++];
}
void Reader::expect_end() const {
  if (pos_ != size_) {
    throw invalid_input(
        fmt::format("store message has {} unexpected trailing bytes", size_ - pos_));
  }
}

}  // namespace tpcomm::store_wire
