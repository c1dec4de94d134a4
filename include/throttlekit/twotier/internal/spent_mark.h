// throttlekit/twotier/internal/spent_mark.h
//
// Provides `detail::SpentMark`: a leasing client's note that the store said
// a window is spent (a grant left it with nothing), shared by the leased
// limiter (leased_limiter.h, one mark per key; federation's limiter runs on
// it) and throttlekit-server's Tier-2 client (src/server/fleet_lease_client.h,
// one per client). docs/twotier.md, "Leased mode".
//
// While the mark lives (`now < until_ms`, the window's end) a shortfall is
// denied without a round trip, except that at most once per `recheck_ms`
// one caller is let through to ask the store again: credits handed back to
// the window later (another node's idle return or `close`, a federation
// reconcile, a reset) are seen within `recheck_ms` instead of at the
// window's end. The gate is one compare-and-swap on the next recheck time,
// so of any number of threads hitting a spent key at most one rechecks per
// interval; the others are denied. `recheck_ms` 0 never rechecks: the mark
// then denies until the window ends (under-use of credits given back).
//
// A recheck is an ordinary lease request, so the store bounds what it
// grants exactly as for any other (window coupling): the mark only decides
// whether to ask, never what is admitted. The cost while a window is spent
// is at most `ceil(time left / recheck_ms)` round trips per key per process.
//
// Thread-safety: `gate` is safe from any thread, concurrently with
// everything; `mark` and `clear` must not run concurrently with each other
// (callers make them under the key's lease lock or the client's refresh
// mutex).

#ifndef THROTTLEKIT_TWOTIER_INTERNAL_SPENT_MARK_H_
#define THROTTLEKIT_TWOTIER_INTERNAL_SPENT_MARK_H_

#include <atomic>
#include <cstdint>
#include <limits>

namespace throttlekit::detail {

class SpentMark {
 public:
  enum class Gate : uint8_t {
    kAsk,      // no live mark: ask the store as usual
    kRecheck,  // marked, and this caller took the interval's recheck: ask
    kDeny,     // marked: deny without a round trip (the window ends at until)
  };
  struct Verdict {
    Gate gate;
    int64_t until_ms;  // the spent window's end (meaningful unless kAsk)
  };

  // Whether a shortfall at epoch-ms `now_ms` may ask the store. At most one
  // caller per `recheck_ms` of a live mark gets kRecheck (for a caller
  // clock that does not run backwards). Lock-free: two loads and, when a
  // recheck is due, one compare-and-swap.
  Verdict gate(int64_t now_ms) noexcept {
    const int64_t until = until_ms_.load(std::memory_order_acquire);
    if (now_ms >= until) return {Gate::kAsk, until};
    int64_t next = next_recheck_ms_.load(std::memory_order_relaxed);
    if (now_ms < next) return {Gate::kDeny, until};
    const int64_t every = recheck_ms_.load(std::memory_order_relaxed);
    if (next_recheck_ms_.compare_exchange_strong(
            next, saturating_add(now_ms, every), std::memory_order_relaxed)) {
      return {Gate::kRecheck, until};
    }
    return {Gate::kDeny, until};
  }

  // The store said, at `now_ms`, that the window ending at `until_ms` is
  // spent. `recheck_ms`: the least time between rechecks (0: never). A mark
  // of the window already marked keeps its interval (so a default derived
  // from the time left is fixed at the window's first mark) and restarts
  // it at `now_ms`. Not concurrently with `mark` or `clear`.
  void mark(int64_t until_ms, int64_t now_ms, int64_t recheck_ms) noexcept {
    if (until_ms_.load(std::memory_order_relaxed) == until_ms) {
      recheck_ms = recheck_ms_.load(std::memory_order_relaxed);
    }
    recheck_ms_.store(recheck_ms, std::memory_order_relaxed);
    next_recheck_ms_.store(
        recheck_ms > 0 ? saturating_add(now_ms, recheck_ms) : kNever,
        std::memory_order_relaxed);
    // Published last: a gate that sees this window sees its recheck time.
    until_ms_.store(until_ms, std::memory_order_release);
  }

  // The store granted something: no window is known spent. Not
  // concurrently with `mark`.
  void clear() noexcept { until_ms_.store(kNone, std::memory_order_release); }

  // The end of the window marked spent (INT64_MIN: none).
  int64_t until_ms() const noexcept {
    return until_ms_.load(std::memory_order_acquire);
  }

 private:
  static constexpr int64_t kNone = std::numeric_limits<int64_t>::min();
  static constexpr int64_t kNever = std::numeric_limits<int64_t>::max();

  static int64_t saturating_add(int64_t a, int64_t b) noexcept {
    return a > kNever - b ? kNever : a + b;
  }

  // The spent window's end (kNone: no mark). Release-stored after the
  // other two, so a gate reading it reads a recheck time of its mark.
  std::atomic<int64_t> until_ms_{kNone};
  // The earliest `now` of the next recheck (kNever: recheck off); the
  // one word the gate's compare-and-swap moves forward.
  std::atomic<int64_t> next_recheck_ms_{kNever};
  // The interval of the marked window.
  std::atomic<int64_t> recheck_ms_{0};
};

}  // namespace throttlekit::detail

#endif  // THROTTLEKIT_TWOTIER_INTERNAL_SPENT_MARK_H_
