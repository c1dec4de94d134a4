// throttlekit/redis/key_slot.h
//
// Provides `key_slot(key)`: the Redis Cluster hash slot (0 .. 16383) of a
// key, as every cluster node computes it (docs/redis.md, "Redis Cluster"):
// CRC16 (the XMODEM variant: polynomial 0x1021, initial value 0, no
// reflection) of the key's hash tag, modulo 16384. The hash tag is the text
// between the first '{' and the first '}' after it, when that text is not
// empty; otherwise the whole key. Keys sharing a tag share a slot, which is
// how every multi-key script of this library stays on one node.
//
//     key_slot("{tenant:7}:r") == key_slot("{tenant:7}:c")
//
// Thread-safety: pure functions.

#ifndef THROTTLEKIT_REDIS_KEY_SLOT_H_
#define THROTTLEKIT_REDIS_KEY_SLOT_H_

#include <array>
#include <cstdint>
#include <string_view>

namespace throttlekit {

inline constexpr int kClusterSlots = 16384;

namespace detail {

// CRC16/XMODEM's byte table, computed at compile time.
inline constexpr std::array<uint16_t, 256> kCrc16Table = [] {
  std::array<uint16_t, 256> t{};
  for (int b = 0; b < 256; ++b) {
    uint16_t crc = static_cast<uint16_t>(b << 8);
    for (int bit = 0; bit < 8; ++bit) {
      crc = (crc & 0x8000) != 0 ? static_cast<uint16_t>((crc << 1) ^ 0x1021)
                                : static_cast<uint16_t>(crc << 1);
    }
    t[static_cast<size_t>(b)] = crc;
  }
  return t;
}();

}  // namespace detail

// CRC16/XMODEM of `data` (crc16("123456789") == 0x31C3).
constexpr uint16_t crc16(std::string_view data) noexcept {
  uint16_t crc = 0;
  for (char c : data) {
    const auto byte = static_cast<uint8_t>(c);
    crc = static_cast<uint16_t>(
        (crc << 8) ^ detail::kCrc16Table[((crc >> 8) ^ byte) & 0xFF]);
  }
  return crc;
}

// The part of `key` that is hashed: its non-empty hash tag, else the key.
constexpr std::string_view hash_tag(std::string_view key) noexcept {
  const size_t open = key.find('{');
  if (open == std::string_view::npos) return key;
  const size_t close = key.find('}', open + 1);
  if (close == std::string_view::npos || close == open + 1) return key;
  return key.substr(open + 1, close - open - 1);
}

// The cluster slot of `key`, 0 .. 16383.
constexpr int key_slot(std::string_view key) noexcept {
  return crc16(hash_tag(key)) & (kClusterSlots - 1);
}

}  // namespace throttlekit

#endif  // THROTTLEKIT_REDIS_KEY_SLOT_H_
