// HMAC-SHA256 proofs and secrets of the store's handshake (store_auth.hpp), on OpenSSL.
#include "store_auth.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <fmt/format.h>

#include "common/text_file.hpp"
#include "tpcomm/env.hpp"
#include "tpcomm/error.hpp"

namespace tpcomm::control {
namespace {

constexpr std::size_t kMaxSecretBytes = 4096;

Bytes hmac(const std::string& secret, std::string_view label, const Bytes& first,
           const Bytes& second) {
  Bytes message(label.begin(), label.end());
  message.insert(message.end(), first.begin(), first.end());
  message.insert(message.end(), second.begin(), second.end());
  Bytes out(EVP_MAX_MD_SIZE);
  unsigned int length = 0;
  if (HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()), message.data(),
           message.size(), out.data(), &length) == nullptr) {
    throw Error(ErrorCode::kInternal, "HMAC-SHA256 failed in OpenSSL");
  }
  out.resize(length);
  return out;
}

std::string checked_secret(std::string secret, std::string_view source) {
  while (!secret.empty() && (secret.back() == '\n' || secret.back() == '\r')) secret.pop_back();
  if (secret.empty()) {
    throw invalid_input(
        fmt::format("{} is empty: a store secret needs at least one byte "
                    "(tpcomm run makes one for its ranks)",
                    source));
  }
  if (secret.size() > kMaxSecretBytes) {
    throw invalid_input(fmt::format("{} holds {} bytes; a store secret is at most {}", source,
                                    secret.size(), kMaxSecretBytes));
  }
  return secret;
}

}  // namespace

Bytes random_nonce() {
  Bytes nonce(kNonceBytes);
  if (RAND_bytes(nonce.data(), static_cast<int>(nonce.size())) != 1) {
    throw Error(ErrorCode::kUnavailable, "no random bytes from OpenSSL for the store handshake");
  }
  return nonce;
}

std::string generate_store_secret() {
  std::string hex;
  for (std::uint8_t b : random_nonce()) hex += fmt::format("{:02x}", b);
  return hex;
}

Bytes client_proof(const std::string& secret, const Bytes& server_nonce,
                   const Bytes& client_nonce) {
  return hmac(secret, "tpcomm-store-client", server_nonce, client_nonce);
}

Bytes server_proof(const std::string& secret, const Bytes& server_nonce,
                   const Bytes& client_nonce) {
  return hmac(secret, "tpcomm-store-server", client_nonce, server_nonce);
}

bool same_proof(const Bytes& a, const Bytes& b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

std::optional<std::string> store_secret_from_environment() {
  if (auto value = env_raw("TPCOMM_STORE_SECRET")) {
    return checked_secret(*value, "TPCOMM_STORE_SECRET");
  }
  if (auto path = env_raw("TPCOMM_STORE_SECRET_FILE")) {
    std::string text = common::read_text_file(*path, "TPCOMM_STORE_SECRET_FILE");
    if (auto newline = text.find('\n'); newline != std::string::npos) text.resize(newline);
    return checked_secret(text,
                          fmt::format("the secret file {} (TPCOMM_STORE_SECRET_FILE)", *path));
  }
  return std::nullopt;
}

}  // namespace tpcomm::control
