// throttlekit/concurrency/windowed_min.h
//
// Provides `WindowedMin`: the minimum of the last `window` samples, kept in a
// monotonic deque (docs/adaptive_concurrency.md, "gradient2": rtt_noload is
// a windowed rolling minimum, so the baseline can drift up after a deploy
// instead of being pinned to an all-time minimum).
//
// The deque holds (sequence number, value) pairs with strictly increasing
// sequence numbers and strictly increasing values; its front is the minimum.
// A push drops expired entries from the front and every entry not smaller
// than the new value from the back, so each sample enters and leaves once:
// O(1) amortized. Every entry's sequence number lies in the last `window`,
// so the deque never holds more than `window` entries; it lives in a ring
// allocated once, at construction, and a push never allocates.

#ifndef THROTTLEKIT_CONCURRENCY_WINDOWED_MIN_H_
#define THROTTLEKIT_CONCURRENCY_WINDOWED_MIN_H_

#include <cassert>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace throttlekit {

// Not thread-safe: the owner serializes calls (AdaptiveConcurrency holds it
// under its slow-path lock).
class WindowedMin {
 public:
  // Precondition: window >= 1. Allocates `window` entries.
  explicit WindowedMin(int64_t window)
      : ring_(static_cast<size_t>(window)), window_(window) {
    assert(window >= 1);
  }

  // Records the next sample. O(1) amortized; never allocates.
  void push(int64_t value) noexcept {
    ++seq_;
    while (size_ > 0 && at(0).seq <= seq_ - window_) pop_front();
    while (size_ > 0 && at(size_ - 1).value >= value) --size_;
    Entry& slot = ring_[(head_ + size_) % ring_.size()];
    slot = Entry{seq_, value};
    ++size_;
  }

  // The minimum of the last `window` samples; 0 when no sample has been
  // pushed since construction or the last `clear`.
  int64_t min() const noexcept { return size_ == 0 ? 0 : at(0).value; }

  bool empty() const noexcept { return size_ == 0; }

  // Forgets every sample (the window restarts empty).
  void clear() noexcept {
    head_ = 0;
    size_ = 0;
  }

  // Entries held in the deque: at most `window` (memory is bounded).
  int64_t deque_size() const noexcept { return static_cast<int64_t>(size_); }

  int64_t window() const noexcept { return window_; }

 private:
  struct Entry {
    int64_t seq = 0;
    int64_t value = 0;
  };

  const Entry& at(size_t i) const noexcept {
    return ring_[(head_ + i) % ring_.size()];
  }
  void pop_front() noexcept {
    head_ = (head_ + 1) % ring_.size();
    --size_;
  }

  std::vector<Entry> ring_;
  int64_t window_;
  int64_t seq_ = 0;  // sequence number of the newest sample
  size_t head_ = 0;  // ring index of the deque's front
  size_t size_ = 0;
};

}  // namespace throttlekit

#endif  // THROTTLEKIT_CONCURRENCY_WINDOWED_MIN_H_
