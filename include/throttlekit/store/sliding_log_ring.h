// throttlekit/store/sliding_log_ring.h
//
// Provides `SlidingLogRing`: the exact sliding-window log (docs/semantics.md,
// "Sliding window log (exact)") for ONE resource, kept in a lock-free ring
// of `limit` timestamps. It is the classic "non-locking throttling component"
// (a circular buffer of request times with a head, a tail and a retry-after)
// without that design's race, where an admission could be lost between
// reading the head and writing the slot (docs/lockfree_ring.md).
//
// Algorithm
//
// Admissions are numbered by a 64-bit ticket; `head_` is the next ticket.
// Admission n is stored in slot `n % limit`, so the ring always holds the
// last `limit` admissions and admission n overwrites admission n - limit.
// With `cutoff = now - window_ms` (entries `<= cutoff` are expired):
//
//     admit n  iff  ts(n - limit) <= cutoff   (a slot never written: -inf)
//
// which is exactly "the surviving admissions number at most limit - 1"
// because the recorded timestamps never decrease along tickets (invariant 2
// below): if the oldest of the last `limit` is expired, at most `limit - 1`
// survive; if it survives, all `limit` do.
//
// Each slot is ONE 64-bit word, `ts << 1 | lap parity`, where the lap of
// ticket n is `n / limit` (the never-written slot is lap -1, ts -2^62). The
// parity tells a reader whether the slot still holds admission n - limit or
// already holds admission n. Admission n is ONE compare-and-swap on slot
// `n % limit`, from the word of admission n - limit to the word of
// admission n: claiming the ticket and writing its timestamp are a single
// atomic step, so there is no "claimed but not yet written" state for anyone
// to wait on or to misread. `head_` is then advanced from n to n + 1 by a
// CAS that any thread may perform (helping), once it sees slot `n % limit`
// holding admission n. One call:
//
//     loop:
//       h = head_                                   (acquire)
//       w = slot[h % limit]                         (acquire)
//       if head_ != h: retry                        (acquire; validates w)
//       if parity(w) == lap(h) & 1: CAS head_ h -> h+1 (help); retry
//       -- w is admission h - limit --
//       if ts(w) > cutoff: DENY (nothing written)
//       read ts(h-1); gallop back from h-1 and bisect for the oldest
//         survivor among tickets [h-limit+1, h-1] (`remaining`, `reset_at`)
//       CAS slot[h % limit]: w -> (max(now, ts(h-1)) << 1 | lap(h) & 1)
//         success: CAS head_ h -> h+1 (may fail: helped); ALLOW
//         failure: retry (another thread took ticket h)
//
// Invariants
//
// 1. `head_ == h` implies admissions 0 .. h-1 are in their slots and
//    admission h is not yet in, or is in slot `h % limit` (head lags by at
//    most one). `head_` only moves h -> h+1 after someone saw admission h in
//    its slot.
// 2. Recorded timestamps never decrease along tickets: admission n records
//    `max(now, ts(n-1))`. Hence the admission rule above, and the search
//    for the oldest survivor may bisect.
// 3. Per slot, each new word's timestamp is at least `window_ms` (>= 1)
//    above the one it replaces (`ts(n) >= now >= ts(n-limit) + window_ms`).
//    So a slot's word never repeats (no ABA on the slot CAS), and any
//    half-open window `(t - window_ms, t]` contains at most one admission
//    per slot: at most `limit` admissions, measured both in recorded
//    timestamps and in the callers' `now` (`now(n) >= now(n-limit) +
//    window_ms` too, because `ts >= now`).
//
// Why no admission is lost and none is doubled: a ticket is taken only by
// the CAS that writes it, and that CAS succeeds for exactly one thread (the
// slot's expected word is admission h - limit's, which no longer matches once
// anyone has written admission h, and never recurs by invariant 3). The
// double read of `head_` around `w` rules out a stale `h`: if `w` were
// admission h + k*limit (k >= 1), its writer read `head_ == h + k*limit`
// before writing it, and our acquire load of `w` makes that head value
// visible to our second head load. If the slot CAS succeeds, the slots read
// by the survivor search held exactly tickets h-limit+1 .. h-1 (a newer value
// there would imply admission h was already written, failing our CAS), so
// `remaining` and `reset_at_ms` describe the state at the CAS.
//
// Linearization: an admission at its slot CAS; a denial at its load of `w`
// (head_ == h throughout, slot holding admission h - limit). Every decision
// is therefore the one the ring would return if the calls ran one at a time
// in that order.
//
// Memory orders: loads of `head_` and the slots are acquire; the slot CAS and
// the head CAS are acq_rel (release publishes the slot word before anyone can
// see the advanced head; acquire carries the chain of earlier admissions to
// the helper). Nothing is seq_cst; the proof above uses only happens-before
// and per-location coherence.
//
// Progress: lock-free. A thread retries only because `head_` moved or the
// slot changed, i.e. another call admitted; no thread ever waits for another.
// `peek` helps advance `head_` too (never changing a decision).
//
// Agreement with `SlidingLog` (cost 1, same options):
// - Sequentially with `now` that never decreases: all five fields equal
//   `SlidingLog::check` / `SlidingLog::peek` (property-tested).
// - Concurrently: every field of every decision is exact for the ring's
//   rule applied to the calls one at a time in linearization order (the
//   ring stays sorted even when nows arrive out of order, so `remaining`
//   and `reset_at_ms` stay exact too). Whenever the callers' nows, taken in
//   that order, never decrease (one fixed `now`, or a clock read in order)
//   all five fields also equal what `SlidingLog` returns for that sequence;
//   otherwise see the next paragraph. The window bound (invariant 3) holds
//   in every case.
//
// Time going backwards (a `now` older than the newest admission, or two
// threads whose nows arrive out of order): the decision still uses the
// caller's `now` (cutoff `now - window_ms`), but the admission is recorded
// at the newest admission's time (`max(now, ts(h-1))`). This keeps the ring
// sorted and is never looser than the caller's clock: the window bound holds
// for callers' nows. `SlidingLog` instead inserts the unit at `now` in sorted
// position and forgets units it pruned, so after a backward jump the two may
// differ (the ring is typically stricter). `retry_after_ms` is exact for the
// ring's rule: at `now + retry_after_ms` admission h - limit has expired.
//
// Limits and memory: `limit` in [1, 2^24] (`kMaxLimit`), `window_ms` in
// [1, 2^53-1]. `now_ms` must be epoch ms in [0, 2^53-1]; values outside are
// clamped into it. Memory: 8 bytes per slot (`8 * limit`, 128 MiB at the
// maximum) plus one cache line for `head_`; nothing is allocated after
// `create`.
//
// Thread-safety: every method is safe to call concurrently. The object is
// neither copyable nor movable (it owns atomics); `create` returns it in a
// `unique_ptr`.

#ifndef THROTTLEKIT_STORE_SLIDING_LOG_RING_H_
#define THROTTLEKIT_STORE_SLIDING_LOG_RING_H_

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "throttlekit/core/clock.h"
#include "throttlekit/core/decision.h"
#include "throttlekit/core/option_check.h"
#include "throttlekit/strategy/sliding_log.h"
#include "throttlekit/strategy/strategy.h"

namespace throttlekit {

class SlidingLogRing {
 public:
  // The same options as the `SlidingLog` strategy; `limit` is bounded by
  // `kMaxLimit` because the ring preallocates one slot per unit.
  using Options = SlidingLog::Options;

  // The largest `limit`: 2^24 slots, 128 MiB.
  static constexpr int64_t kMaxLimit = int64_t{1} << 24;

  static constexpr std::string_view kName = "sliding_log_ring";

  // Validates `options` (`limit` in [1, 2^24], `window_ms` in [1, 2^53-1];
  // the error names "sliding_log_ring.<field>" and its bound) and allocates
  // the ring. Thread-safe.
  static absl::StatusOr<std::unique_ptr<SlidingLogRing>> create(
      const Options& options) {
    if (auto s = detail::check_int_option("sliding_log_ring", "limit",
                                          options.limit, 1, kMaxLimit);
        !s.ok()) {
      return s;
    }
    if (auto s =
            detail::check_int_option("sliding_log_ring", "window_ms",
                                     options.window_ms, 1, kMaxSafeInteger);
        !s.ok()) {
      return s;
    }
    return std::unique_ptr<SlidingLogRing>(new SlidingLogRing(options));
  }

  SlidingLogRing(const SlidingLogRing&) = delete;
  SlidingLogRing& operator=(const SlidingLogRing&) = delete;

  // Admits or denies one request at epoch ms `now_ms` (see the class
  // comment); an allowed call records it, a denied call writes nothing.
  // Lock-free; thread-safe.
  [[nodiscard]] Decision try_acquire(int64_t now_ms) noexcept {
    const int64_t now = clamp_now(now_ms);
    const int64_t cutoff = now - window_ms_;
    // Exponential backoff after a lost slot CAS: the winner then finishes
    // its admission (and the next ones) with the lines still in its cache,
    // instead of both threads bouncing them on every step.
    int backoff = 1;
    for (;;) {
      const uint64_t h = head_.load(std::memory_order_acquire);
      const Position at = position(h);
      std::atomic<uint64_t>& target = slots_[at.index];
      uint64_t w = target.load(std::memory_order_acquire);
      if (head_.load(std::memory_order_acquire) != h) continue;
      if (parity_of(w) == at.parity) {  // admission h is in; head lags
        help_advance(h);
        continue;
      }
      const int64_t evicted = ts_of(w);  // admission h - limit
      if (evicted > cutoff) return deny(evicted, now);
      const int64_t newest = h == 0 ? kEmptyTs : ts_back(at, 1);
      const int64_t recorded = std::max(now, newest);
      const Survivors alive = survivors(h, at, cutoff, newest, recorded);
      if (target.compare_exchange_strong(w, pack(recorded, at.parity),
                                         std::memory_order_acq_rel,
                                         std::memory_order_acquire)) {
        help_advance(h);
        return Decision{true, limit_,
                        std::max<int64_t>(0, limit_ - alive.count - 1),
                        reset_at(alive.oldest), 0};
      }
      for (int i = 0; i < backoff; ++i) cpu_relax();
      backoff = std::min(backoff * 2, kMaxBackoff);
    }
  }

  // As `try_acquire(now_ms)`, reading `clock` once. Thread-safe.
  template <EpochClock C>
  [[nodiscard]] Decision try_acquire(const C& clock) noexcept {
    return try_acquire(clock.now_ms());
  }

  // As `try_acquire(now_ms)` at `SystemClock` time. Thread-safe.
  [[nodiscard]] Decision try_acquire() noexcept {
    return try_acquire(SystemClock{});
  }

  // The decision for one request at `now_ms` without consuming, as
  // `SlidingLog::peek`: on allow `remaining` is the current capacity
  // `limit - count`. A consistent snapshot (linearizable). Writes no
  // decision state (it may help advance `head_`). Lock-free; thread-safe.
  [[nodiscard]] Decision peek(int64_t now_ms) const noexcept {
    const int64_t now = clamp_now(now_ms);
    const int64_t cutoff = now - window_ms_;
    for (;;) {
      const uint64_t h = head_.load(std::memory_order_acquire);
      const Position at = position(h);
      const uint64_t w = slots_[at.index].load(std::memory_order_acquire);
      if (head_.load(std::memory_order_acquire) != h) continue;
      if (parity_of(w) == at.parity) {
        help_advance(h);
        continue;
      }
      const int64_t evicted = ts_of(w);
      if (evicted > cutoff) return deny(evicted, now);
      const int64_t newest = h == 0 ? kEmptyTs : ts_back(at, 1);
      const Survivors alive = survivors(h, at, cutoff, newest, now);
      // The slot reads were of tickets h-limit+1 .. h-1 iff head_ is still h
      // (a newer value there would have needed head_ > h first).
      if (head_.load(std::memory_order_acquire) != h) continue;
      return Decision{true, limit_, limit_ - alive.count,
                      reset_at(alive.oldest), 0};
    }
  }

  // As `peek(now_ms)`, reading `clock` once. Thread-safe.
  template <EpochClock C>
  [[nodiscard]] Decision peek(const C& clock) const noexcept {
    return peek(clock.now_ms());
  }

  // Admissions since creation. Exact when no call is in flight (every
  // admitting call advances `head_` past its own ticket, itself or by help,
  // before it returns). Thread-safe.
  int64_t admissions() const noexcept {
    return static_cast<int64_t>(head_.load(std::memory_order_acquire));
  }

  const Options& options() const noexcept { return options_; }

  // Bytes held for `limit` slots: 8 per slot, plus the object (one cache
  // line for `head_` and the options).
  static constexpr size_t memory_bytes(int64_t limit) noexcept {
    return sizeof(SlidingLogRing) +
           static_cast<size_t>(limit) * sizeof(std::atomic<uint64_t>);
  }

 private:
  static constexpr int kMaxBackoff = 64;

  static void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
  }
  // The timestamp of a slot never written: below every cutoff.
  static constexpr int64_t kEmptyTs = -(int64_t{1} << 62);

  explicit SlidingLogRing(const Options& options)
      : options_(options),
        limit_(options.limit),
        window_ms_(options.window_ms),
        ulimit_(static_cast<uint64_t>(options.limit)),
        slots_(std::make_unique<std::atomic<uint64_t>[]>(
            static_cast<size_t>(options.limit))) {
    // Lap -1 (odd parity) at -2^62: "admission n - limit" for n < limit.
    for (size_t i = 0; i < static_cast<size_t>(limit_); ++i) {
      slots_[i].store(pack(kEmptyTs, 1), std::memory_order_relaxed);
    }
  }

  static constexpr int64_t clamp_now(int64_t now_ms) noexcept {
    return std::clamp<int64_t>(now_ms, 0, kMaxSafeInteger);
  }

  // One slot word: the timestamp (in [-2^62, 2^62)) shifted left by one, the
  // lap parity in bit 0.
  static constexpr uint64_t pack(int64_t ts, uint64_t parity) noexcept {
    return (static_cast<uint64_t>(ts) << 1) | parity;
  }
  static constexpr int64_t ts_of(uint64_t word) noexcept {
    return static_cast<int64_t>(word) >> 1;  // arithmetic shift (C++20)
  }
  static constexpr uint64_t parity_of(uint64_t word) noexcept {
    return word & 1;
  }
  // Where ticket h lives: its slot and its lap's parity (one division).
  struct Position {
    uint64_t index;
    uint64_t parity;
  };
  Position position(uint64_t h) const noexcept {
    const uint64_t lap = h / ulimit_;
    return Position{h - lap * ulimit_, lap & 1};
  }

  // The timestamp of ticket h - d, 1 <= d < limit (no division).
  int64_t ts_back(Position at, uint64_t d) const noexcept {
    const uint64_t i = at.index >= d ? at.index - d : at.index + ulimit_ - d;
    return ts_of(slots_[i].load(std::memory_order_acquire));
  }

  void help_advance(uint64_t h) const noexcept {
    head_.compare_exchange_strong(h, h + 1, std::memory_order_acq_rel,
                                  std::memory_order_relaxed);
  }

  // The survivors (`ts > cutoff`) among tickets [max(0, h-limit+1), h), the
  // ones that stay in the log once admission h is appended: their number,
  // and the oldest timestamp of them and the new entry (`fallback` when none
  // survives), i.e. the log's front. The ring is sorted (invariant 2), so
  // survivors are the newest d tickets for some d: found by galloping back
  // from ticket h-1 and then bisecting, O(log d) loads.
  struct Survivors {
    int64_t count;
    int64_t oldest;
  };
  Survivors survivors(uint64_t h, Position at, int64_t cutoff, int64_t newest,
                      int64_t fallback) const noexcept {
    const uint64_t n = std::min<uint64_t>(h, ulimit_ - 1);  // candidates
    if (n == 0 || newest <= cutoff) return Survivors{0, fallback};
    uint64_t alive = 1;  // ticket h - alive survives
    int64_t alive_ts = newest;
    uint64_t dead = n + 1;  // ticket h - dead is expired or not a candidate
    for (uint64_t d = 2; d <= n; d *= 2) {
      const int64_t ts = ts_back(at, d);
      if (ts <= cutoff) {
        dead = d;
        break;
      }
      alive = d;
      alive_ts = ts;
    }
    while (dead - alive > 1) {
      const uint64_t mid = alive + (dead - alive) / 2;
      const int64_t ts = ts_back(at, mid);
      if (ts > cutoff) {
        alive = mid;
        alive_ts = ts;
      } else {
        dead = mid;
      }
    }
    return Survivors{static_cast<int64_t>(alive), alive_ts};
  }

  // ceil(oldest + window_ms) in double, as `SlidingLog` computes it.
  int64_t reset_at(int64_t oldest) const noexcept {
    return detail::ceil_to_int(static_cast<double>(oldest) +
                               static_cast<double>(window_ms_));
  }

  // At the limit: every one of the last `limit` admissions survives and the
  // oldest is `evicted` (`SlidingLog`'s deny with count = limit, k = 1).
  Decision deny(int64_t evicted, int64_t now) const noexcept {
    const double oldest = static_cast<double>(evicted);
    const double window = static_cast<double>(window_ms_);
    return Decision{
        false, limit_, 0, reset_at(evicted),
        std::max<int64_t>(1, detail::ceil_to_int(oldest + window -
                                                 static_cast<double>(now)))};
  }

  const Options options_;
  const int64_t limit_;
  const int64_t window_ms_;
  const uint64_t ulimit_;
  // One word per slot (see the class comment); atomic because concurrent
  // callers claim a ticket by CAS on its slot.
  const std::unique_ptr<std::atomic<uint64_t>[]> slots_;
  // The next ticket. Mutable: `peek` helps advance it (not a decision
  // change). On its own cache line: every call reads it.
  alignas(64) mutable std::atomic<uint64_t> head_{0};
  static_assert(std::atomic<uint64_t>::is_always_lock_free);
};

}  // namespace throttlekit

#endif  // THROTTLEKIT_STORE_SLIDING_LOG_RING_H_
