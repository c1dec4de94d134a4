// throttlekit/observe/top_keys.h
//
// Provides `TopKeys` (`BasicTopKeys<H>` for another key hash): the heaviest
// keys of a stream in fixed memory, by the Space-Saving sketch (Metwally,
// Agrawal and El Abbadi, "Efficient Computation of Frequent and Top-k
// Elements in Data Streams", ICDT 2005). Feed it every decision's key (from
// a `DecisionObserver`, observe/decision_observer.h, say, with the cost or
// 1 as the weight) and read which keys carry the load (docs/admission.md,
// "Observation"):
//
//     auto top = TopKeys::create({.capacity = 64});  // StatusOr
//     ...
//     (*top)->add(event.key);                        // on the request path
//     ...
//     for (const KeyCount& k : (*top)->top(10)) {    // on a scrape
//       // k.key, k.count (k.count - k.error <= true weight <= k.count)
//     }
//
// The sketch monitors at most `capacity` keys, each with a count and an
// error. `add(key, w)`: a monitored key gets count += w; else, while fewer
// than `capacity` are monitored, the key is monitored with count w and error
// 0; else the entry of minimum count m is given to the key, with count
// m + w and error m (an unmonitored key's weight so far is at most the
// minimum count, so m bounds what this key had before).
//
// Guarantees, with N = total() and C = capacity, for every stream:
//   - a monitored key's true weight t satisfies t <= count <= t + error,
//     so count - error is a lower bound and count an upper bound;
//   - the counts sum to N, so once C keys are monitored the minimum count
//     is <= N / C, and every error <= N / C (an error is the minimum count
//     at the time);
//   - every key with t > N / C is monitored (and so is in top(C)).
// While fewer than C distinct keys were added, every count is exact and
// every error 0. Which of several minimum entries is replaced is
// unspecified; the guarantees hold whichever it is.
//
// Inputs ignored (no effect at all, not even on total()): a weight < 1, an
// empty key and a key over kMaxKeyBytes (core/key.h). Counts and the total
// saturate at INT64_MAX instead of wrapping; the bounds above hold while
// total() < INT64_MAX.
//
// Cost: `add` is O(C): a linear scan of a contiguous array of 64-bit key
// hashes (the key's bytes are compared only on a hash match) and, for an
// unmonitored key once C are monitored, a linear scan for the minimum
// count; C is at most 1024, so each scan reads at most 8 KiB. `add`
// allocates nothing unless the key is longer than kTopKeysReservedKeyBytes
// and than every key its slot held before (each slot reserves that many
// bytes at creation and keeps what it grew to, across `clear` too).
// Memory: about C * (kTopKeysReservedKeyBytes + 64) bytes, plus the longest
// keys stored.
// `top(n)` copies the entries and sorts them: O(C log C), allocating; meant
// for a scrape, not the request path.
//
// Thread-safety: every public method is safe to call concurrently; one
// mutex guards the whole state, so concurrent `add`s serialise (the result
// is that of some order of the calls).

#ifndef THROTTLEKIT_OBSERVE_TOP_KEYS_H_
#define THROTTLEKIT_OBSERVE_TOP_KEYS_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/hash/hash.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "throttlekit/core/key.h"
#include "throttlekit/core/mutex.h"
#include "throttlekit/core/option_check.h"

namespace throttlekit {

struct TopKeysOptions {
  // How many keys are monitored at most, 1 .. kTopKeysMaxCapacity. Keys
  // whose weight exceeds total / capacity are always among them.
  int64_t capacity = 16;
};

inline constexpr int64_t kTopKeysMaxCapacity = 1024;
// Bytes of key storage each slot reserves at creation, so that keys up to
// this long never allocate in `add`.
inline constexpr size_t kTopKeysReservedKeyBytes = 64;

// One monitored key: its weight lies in [count - error, count].
struct KeyCount {
  std::string key;
  int64_t count = 0;  // an upper bound of the key's weight
  int64_t error = 0;  // count - error is a lower bound

  friend bool operator==(const KeyCount&, const KeyCount&) = default;
};

namespace detail {

// The default key hash: absl::Hash of the key's bytes (seeded per
// process). Collisions cost a string compare, never a wrong merge.
struct TopKeysHash {
  uint64_t operator()(std::string_view key) const noexcept {
    return absl::Hash<absl::string_view>{}(
        absl::string_view(key.data(), key.size()));
  }
};

// a + b for a, b >= 0, saturating at INT64_MAX.
constexpr int64_t saturating_add(int64_t a, int64_t b) noexcept {
  return a > std::numeric_limits<int64_t>::max() - b
             ? std::numeric_limits<int64_t>::max()
             : a + b;
}

}  // namespace detail

// `H` maps a key to 64 bits (`uint64_t operator()(std::string_view) const`);
// tests pass a colliding one to pin the string compare on a hash match.
template <class H = detail::TopKeysHash>
class BasicTopKeys {
 public:
  // kInvalidArgument "top_keys.capacity must be in [1, 1024]; got <value>"
  // for a capacity outside 1 .. kTopKeysMaxCapacity.
  static absl::StatusOr<std::unique_ptr<BasicTopKeys>> create(
      TopKeysOptions options, H hash = H{}) {
    if (absl::Status s = detail::check_int_option(
            "top_keys", "capacity", options.capacity, 1, kTopKeysMaxCapacity);
        !s.ok()) {
      return s;
    }
    return std::unique_ptr<BasicTopKeys>(new BasicTopKeys(
        static_cast<size_t>(options.capacity), std::move(hash)));
  }

  BasicTopKeys(const BasicTopKeys&) = delete;
  BasicTopKeys& operator=(const BasicTopKeys&) = delete;

  // Adds `weight` (>= 1) to `key`'s count by the Space-Saving rule (file
  // comment). A weight < 1, an empty key or one over kMaxKeyBytes is
  // ignored. O(capacity); allocates only to grow a slot's string past its
  // longest key so far. Thread-safe.
  void add(std::string_view key, int64_t weight = 1) {
    if (weight < 1 || !is_valid_key(key)) return;
    const uint64_t h = hash_(key);
    MutexLock lock(mu_);
    total_ = detail::saturating_add(total_, weight);
    for (size_t i = 0; i < size_; ++i) {
      if (hashes_[i] == h && keys_[i] == key) {
        counts_[i] = detail::saturating_add(counts_[i], weight);
        return;
      }
    }
    if (size_ < capacity_) {
      put(size_++, h, key, weight, 0);
      return;
    }
    size_t min = 0;
    for (size_t i = 1; i < capacity_; ++i) {
      if (counts_[i] < counts_[min]) min = i;
    }
    const int64_t m = counts_[min];
    put(min, h, key, detail::saturating_add(m, weight), m);
  }

  // At most `n` monitored keys, count descending, ties by key ascending
  // (bytewise). top(capacity) is every monitored key. O(C log C); allocates.
  // Thread-safe.
  std::vector<KeyCount> top(size_t n) const {
    std::vector<KeyCount> out;
    if (n == 0) return out;
    out.reserve(capacity_);
    {
      MutexLock lock(mu_);
      for (size_t i = 0; i < size_; ++i) {
        out.push_back({keys_[i], counts_[i], errors_[i]});
      }
    }
    const auto before = [](const KeyCount& a, const KeyCount& b) {
      return a.count != b.count ? a.count > b.count : a.key < b.key;
    };
    if (n < out.size()) {
      std::partial_sort(out.begin(),
                        out.begin() + static_cast<std::ptrdiff_t>(n), out.end(),
                        before);
      out.resize(n);
    } else {
      std::sort(out.begin(), out.end(), before);
    }
    return out;
  }

  // The sum of the weights added since creation or `clear` (saturating at
  // INT64_MAX). Thread-safe.
  int64_t total() const {
    MutexLock lock(mu_);
    return total_;
  }

  // Forgets every key and the total; slots keep their string storage.
  // Thread-safe.
  void clear() {
    MutexLock lock(mu_);
    size_ = 0;
    total_ = 0;
  }

 private:
  BasicTopKeys(size_t capacity, H hash)
      : capacity_(capacity),
        hash_(std::move(hash)),
        hashes_(capacity),
        counts_(capacity),
        errors_(capacity),
        keys_(capacity) {
    for (std::string& k : keys_) k.reserve(kTopKeysReservedKeyBytes);
  }

  // Gives slot `i` to `key`. `assign` reuses the slot's storage when the
  // key fits in it.
  void put(size_t i, uint64_t h, std::string_view key, int64_t count,
           int64_t error) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    hashes_[i] = h;
    keys_[i].assign(key.data(), key.size());
    counts_[i] = count;
    errors_[i] = error;
  }

  const size_t capacity_;
  const H hash_;
  mutable Mutex mu_;
  // Slot i < size_ monitors keys_[i]; hashes_[i] is hash_(keys_[i]). The
  // hashes and counts are separate contiguous arrays so the two scans of
  // `add` read 8 bytes per slot. Each array has capacity_ elements.
  std::vector<uint64_t> hashes_ ABSL_GUARDED_BY(mu_);
  std::vector<int64_t> counts_ ABSL_GUARDED_BY(mu_);
  std::vector<int64_t> errors_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> keys_ ABSL_GUARDED_BY(mu_);
  size_t size_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t total_ ABSL_GUARDED_BY(mu_) = 0;
};

using TopKeys = BasicTopKeys<>;

}  // namespace throttlekit

#endif  // THROTTLEKIT_OBSERVE_TOP_KEYS_H_
