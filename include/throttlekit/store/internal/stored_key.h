// throttlekit/store/internal/stored_key.h
//
// Provides `detail::StoredKey`: the 24-byte key cell of the memory store's
// open-addressed tables. Keys up to 16 bytes live inline (no allocation);
// longer keys own one heap buffer. The cell also carries the key's 31-bit
// hash tag (its home index and a cheap pre-compare filter) and the CLOCK
// reference bit, so a GCRA entry (key + one double) is 32 bytes.
//
// Not thread-safe: guarded by the owning shard's lock.

#ifndef THROTTLEKIT_STORE_INTERNAL_STORED_KEY_H_
#define THROTTLEKIT_STORE_INTERNAL_STORED_KEY_H_

#include <cstdint>
#include <cstring>
#include <string_view>
#include <utility>

#include "throttlekit/core/inline.h"

namespace throttlekit::detail {

class StoredKey {
 public:
  static constexpr uint32_t kInlineBytes = 16;
  static constexpr uint32_t kTagMask = 0x7fffffffu;
  static constexpr uint32_t kReferencedBit = 0x80000000u;

  StoredKey() noexcept {}
  ~StoredKey() { release(); }
  StoredKey(StoredKey&& other) noexcept { steal(other); }
  StoredKey& operator=(StoredKey&& other) noexcept {
    if (this != &other) {
      release();
      steal(other);
    }
    return *this;
  }
  StoredKey(const StoredKey&) = delete;
  StoredKey& operator=(const StoredKey&) = delete;

  // Stores `key` (non-empty, < 4 GiB) with its tag; allocates only for keys
  // longer than kInlineBytes. The reference bit starts clear: a key earns
  // its second chance by being used again, so a flood of one-off keys
  // cannot push out keys in steady use.
  void assign(std::string_view key, uint32_t tag) {
    release();
    if (key.size() > kInlineBytes) {
      heap_ = new char[key.size()];
      std::memcpy(heap_, key.data(), key.size());
    } else {
      std::memcpy(inline_, key.data(), key.size());
    }
    size_ = static_cast<uint32_t>(key.size());
    meta_ = tag & kTagMask;
  }

  // Frees the key; the cell becomes empty.
  void clear() noexcept {
    release();
    size_ = 0;
    meta_ = 0;
  }

  bool empty() const noexcept { return size_ == 0; }
  uint32_t tag() const noexcept { return meta_ & kTagMask; }
  bool referenced() const noexcept { return (meta_ & kReferencedBit) != 0; }
  void set_referenced() noexcept { meta_ |= kReferencedBit; }
  void clear_referenced() noexcept { meta_ &= kTagMask; }

  std::string_view view() const noexcept {
    return {size_ > kInlineBytes ? heap_ : inline_, size_};
  }
  THROTTLEKIT_ALWAYS_INLINE bool equals(std::string_view key,
                                        uint32_t tag) const noexcept {
    if (this->tag() != (tag & kTagMask) || size_ != key.size()) return false;
    if (size_ > kInlineBytes) {
      return std::memcmp(heap_, key.data(), key.size()) == 0;
    }
    return equal_short(inline_, key.data(), size_);
  }
  // Heap bytes owned beyond the cell itself.
  size_t heap_bytes() const noexcept {
    return size_ > kInlineBytes ? size_ : 0;
  }

 private:
  // Whether `a` and `b` agree on their first and last `sizeof(Word)` bytes
  // (which overlap when n is under twice that): all n when
  // sizeof(Word) <= n <= 2 * sizeof(Word).
  template <class Word>
  static bool equal_ends(const char* a, const char* b, size_t n) noexcept {
    Word a0, a1, b0, b1;
    std::memcpy(&a0, a, sizeof(Word));
    std::memcpy(&b0, b, sizeof(Word));
    std::memcpy(&a1, a + n - sizeof(Word), sizeof(Word));
    std::memcpy(&b1, b + n - sizeof(Word), sizeof(Word));
    return ((a0 ^ b0) | (a1 ^ b1)) == 0;
  }
  // Compares n <= 16 bytes with two overlapping word loads per side instead
  // of a memcmp call.
  static bool equal_short(const char* a, const char* b, size_t n) noexcept {
    if (n >= 8) return equal_ends<uint64_t>(a, b, n);
    if (n >= 4) return equal_ends<uint32_t>(a, b, n);
    for (size_t i = 0; i < n; ++i) {
      if (a[i] != b[i]) return false;
    }
    return true;
  }

  void release() noexcept {
    if (size_ > kInlineBytes) delete[] heap_;
  }
  void steal(StoredKey& other) noexcept {
    size_ = other.size_;
    meta_ = other.meta_;
    std::memcpy(inline_, other.inline_, kInlineBytes);  // or the pointer
    other.size_ = 0;
    other.meta_ = 0;
  }

  uint32_t size_ = 0;  // 0: empty cell
  uint32_t meta_ = 0;  // tag (31 bits) | referenced bit
  union {
    char inline_[kInlineBytes];
    char* heap_;
  };
};

static_assert(sizeof(StoredKey) == 24);

}  // namespace throttlekit::detail

#endif  // THROTTLEKIT_STORE_INTERNAL_STORED_KEY_H_
