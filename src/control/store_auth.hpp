// Authentication of the TCP store (docs/store.md, "Authentication"): both ends prove that they
// hold the group's shared secret with an HMAC-SHA256 over fresh nonces from both sides, so the
// secret never crosses the wire and a recorded exchange cannot be replayed.
#pragma once

#include <optional>
#include <string>

#include "tpcomm/store.hpp"

namespace tpcomm::control {

inline constexpr std::size_t kNonceBytes = 32;

// kNonceBytes from the kernel's random source.
Bytes random_nonce();
// A new secret for a group: 32 random bytes, written as 64 hex digits.
std::string generate_store_secret();

// What a client sends: HMAC(secret, "tpcomm-store-client" | server nonce | client nonce).
Bytes client_proof(const std::string& secret, const Bytes& server_nonce, const Bytes& client_nonce);
// What the server answers: HMAC(secret, "tpcomm-store-server" | client nonce | server nonce).
Bytes server_proof(const std::string& secret, const Bytes& server_nonce, const Bytes& client_nonce);
// Constant-time comparison of two proofs.
bool same_proof(const Bytes& a, const Bytes& b);

// The group's store secret from TPCOMM_STORE_SECRET, or else from the file TPCOMM_STORE_SECRET_FILE
// names (first line; a regular file of at most 4 KiB); nullopt when neither is set. An empty
// secret, or an unreadable file, is a kInvalidInput error that names the variable.
std::optional<std::string> store_secret_from_environment();

}  // namespace tpcomm::control
