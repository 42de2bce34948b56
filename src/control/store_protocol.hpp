// The TCP store's wire format (docs/store.md). Every frame: a 12-byte header — magic "TPST"
// (0x54505354), protocol version (u16), message type (u16), payload length (u32, at most
// kMaxPayload) — then the payload: fields of u32-length-prefixed bytes and little-endian i64.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tpcomm/store.hpp"

namespace tpcomm::store_wire {

constexpr std::uint32_t kMagic = 0x54505354;  // "TPST"
constexpr std::uint16_t kVersion = 2;         // 2: the handshake (kHello ... kWelcome)
constexpr std::size_t kHeaderSize = 12;
constexpr std::uint32_t kMaxPayload = 64u << 20;  // 64 MiB: a bound, not an expectation

enum class Type : std::uint16_t {
  kSet = 1,
  kGet = 2,
  kWait = 3,
  kAdd = 4,
  kCompareSet = 5,
  kDelete = 6,
  kSize = 7,
  kSetEphemeral = 8,     // like kSet, but deleted when the connection closes
  kHello = 9,            // client nonce: the first frame of every connection
  kProof = 10,           // the client's HMAC over both nonces (empty without a secret)
  kClaimEphemeral = 11,  // set when absent, deleted when the connection closes; VALUE(held)
  kOk = 100,
  kValue = 101,
  kNotFound = 102,
  kMissing = 103,
  kInteger = 104,
  kBool = 105,
  kChallenge = 106,  // server nonce and whether a secret is required
  kWelcome = 107,    // the server's HMAC over both nonces (empty without a secret)
  kError = 199,
};

struct Header {
  std::uint32_t magic = kMagic;
  std::uint16_t version = kVersion;
  Type type = Type::kOk;
  std::uint32_t length = 0;
};

// Why a peer's bytes are not a valid frame (empty: valid so far).
std::string check_header(const Header& h);
Header decode_header(const std::uint8_t* bytes);

class Writer {
 public:
  explicit Writer(Type type) : type_(type) {}
  Writer& bytes(const Bytes& b);
  Writer& string(const std::string& s);
  Writer& i64(std::int64_t v);
  Writer& u8(std::uint8_t v);
  // Header plus payload.
  Bytes frame() const;

 private:
  Type type_;
  Bytes payload_;
};

// Reads fields of a payload; throws kInvalidInput on a short or malformed payload.
class Reader {
 public:
  Reader(const std::uint8_t* data, std::size_t size) : data_(data), size_(size) {}
  Bytes bytes();
  std::string string();
  std::int64_t i64();
  std::uint8_t u8();
  void expect_end() const;

 private:
  void need(std::size_t n) const;
  const std::uint8_t* data_;
  std::size_t size_;
  std::size_t pos_ = 0;
};

}  // namespace tpcomm::store_wire
