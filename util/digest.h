// Stable content digests (SHA-256 from OpenSSL's libcrypto). Used wherever a key must mean the
// same thing across runs, toolchains and parity versions: resume fingerprints, compiled-artifact
// cache keys. Never std::hash, whose values are unspecified and differ between builds.
#pragma once

#include <string>
#include <string_view>

namespace parity {

// Lower-case hex SHA-256 of `data` (64 characters).
std::string Sha256Hex(std::string_view data);

}  // namespace parity
