// throttlekit/store/internal/key_hash.h
//
// Provides `detail::KeyHasher`: the memory store's seeded 64-bit key hash.
// Keys of up to 16 bytes (the common case: "user:42", "tenant:acme") take a
// short path of two overlapping word loads and two 64x64->128 multiply-folds
// (the wyhash construction); longer keys go through absl::Hash. Each hasher
// draws its own 128-bit secret at construction, so colliding key sets cannot
// be precomputed by a client.
//
// Thread-safety: immutable after construction; `operator()` is safe to call
// concurrently.

#ifndef THROTTLEKIT_STORE_INTERNAL_KEY_HASH_H_
#define THROTTLEKIT_STORE_INTERNAL_KEY_HASH_H_

#include <chrono>
#include <cstdint>
#include <cstring>
#include <random>
#include <string_view>

#include "absl/hash/hash.h"
#include "absl/numeric/int128.h"
#include "absl/strings/string_view.h"
#include "throttlekit/core/inline.h"

namespace throttlekit::detail {

class KeyHasher {
 public:
  // Seeds from std::random_device, mixed with the clock and this object's
  // address (so a random_device without entropy still varies per run).
  KeyHasher() noexcept {
    uint64_t entropy = 0;
    try {
      std::random_device rd;
      entropy = (uint64_t{rd()} << 32) ^ rd();
    } catch (...) {
      // No entropy source: the clock and the address below still vary.
    }
    const uint64_t t = static_cast<uint64_t>(
        std::chrono::steady_clock::now().time_since_epoch().count());
    const uint64_t a = reinterpret_cast<uintptr_t>(this);
    seed0_ =
        fold(entropy ^ 0xa0761d6478bd642fULL, t ^ 0xe7037ed1a0b428dbULL) | 1;
    seed1_ = fold(a ^ 0x8ebc6af09c88c6e3ULL, entropy ^ t) | 1;
  }

  THROTTLEKIT_ALWAYS_INLINE uint64_t
  operator()(std::string_view key) const noexcept {
    const size_t n = key.size();
    const char* p = key.data();
    uint64_t a;
    uint64_t b;
    if (n >= 8 && n <= 16) {
      std::memcpy(&a, p, 8);
      std::memcpy(&b, p + n - 8, 8);
    } else if (n >= 4 && n < 8) {
      uint32_t x;
      uint32_t y;
      std::memcpy(&x, p, 4);
      std::memcpy(&y, p + n - 4, 4);
      a = x;
      b = y;
    } else if (n > 0 && n < 4) {
      a = (uint64_t{static_cast<uint8_t>(p[0])} << 16) |
          (uint64_t{static_cast<uint8_t>(p[n / 2])} << 8) |
          static_cast<uint8_t>(p[n - 1]);
      b = 0;
    } else if (n == 0) {
      a = 0;
      b = 0;
    } else {
      const uint64_t h =
          absl::Hash<absl::string_view>{}(absl::string_view(p, n));
      return fold(h ^ seed0_, seed1_ ^ n);
    }
    // Two rounds, as in wyhash: one multiply-fold leaves the top bits (the
    // shard index) visibly biased for sequential keys such as "k0".."k63999".
    const uint64_t h = fold(a ^ seed0_, b ^ seed1_ ^ (uint64_t{n} << 56));
    return fold(h ^ 0xa0761d6478bd642fULL, seed1_ ^ 0xe7037ed1a0b428dbULL);
  }

 private:
  THROTTLEKIT_ALWAYS_INLINE static uint64_t fold(uint64_t x,
                                                 uint64_t y) noexcept {
    const absl::uint128 m = absl::uint128(x) * y;
    return absl::Uint128Low64(m) ^ absl::Uint128High64(m);
  }

  uint64_t seed0_;
  uint64_t seed1_;
};

}  // namespace throttlekit::detail

#endif  // THROTTLEKIT_STORE_INTERNAL_KEY_HASH_H_
