// throttlekit/strategy/sliding_log.h
//
// Provides `SlidingLog`, the exact sliding-window log (docs/semantics.md,
// "Sliding window log (exact)"): the only strategy that never admits more
// than `limit` units in any window of `window_ms`, at the price of state that
// grows with the number of distinct admission instants inside one window.
//
// A request of `cost` is charged `units = ceil(cost)`. The state is the
// multiset of timestamps of admitted units, kept as ascending runs
// `(timestamp, count)` so that a cost-1000 request stores one run, not 1000
// copies. With `survivors` = units whose timestamp `ts > now - window_ms` and
// `count` = their number, where `now` is first raised to the newest
// timestamp the log holds (a stale `now`, see below):
//
//     allow iff count + units <= limit
//       -> prune the expired runs, add `units` at `now`
//          remaining = max(0, limit - count - units)
//          reset_at  = ceil(oldest + window_ms)  (oldest after the append)
//     deny (no write):
//          remaining = max(0, limit - count)
//          reset_at  = ceil(oldest + window_ms)  (oldest = now when empty)
//          retry     = window_ms                                 if count == 0
//                      max(1, ceil(kth_oldest + window_ms - now)) otherwise,
//                      k = clamp(count + units - limit, 1, count)
//                      (measured from the caller's own `now`)
//
// Choices where docs/semantics.md is silent (docs, pinned by
// sliding_log_test.cc):
// - A `now` behind the newest timestamp the log holds (a backward clock
//   step, or, under threads, a caller that read the clock before another
//   committed a later admission) is stale: the call is decided at that
//   newest timestamp and its units are stamped there, so timestamps only
//   grow and the log never holds more than `limit` units in any window of
//   its own timestamps, whatever order the callers' `now`s arrive in.
//   Stricter, never looser: ThrottleKit 1.x decided at the stale `now`,
//   where units an allowed call had already pruned no longer counted, and
//   inserted at a sorted position (docs/semantics.md, "A stale now").
//   Forward-clock decisions are unchanged.
// - Expired runs are dropped only by an allowed call (a denial writes
//   nothing).
// - A cost above `limit` can never pass; its denial carries the finite hint
//   `window_ms` on an empty log, else the wait until the whole log expires.
//
// Cost. Each run also stores the cumulative number of units admitted up to
// and including it (modulo 2^64, from an arbitrary base), so the surviving
// count is one subtraction. Searches gallop (probe 1, 2, 4, ... slots ahead,
// then bisect): the first survivor from the oldest live run, O(log e) for
// `e` runs expiring at this call; the k-th oldest unit on the sums from the
// first survivor, O(log r) when it is the r-th run. So `check`, `peek`,
// `forecast`, `kth_oldest_ms` and `surviving_units` are O(log runs), and
// O(1) in the steady state where a call expires a few runs and looks for an
// early k. An allowed call adds amortized O(1): pruned runs are skipped at
// once and erased only when they outnumber the live ones, and a new run is
// always appended (or merged into the newest).

#ifndef THROTTLEKIT_STRATEGY_SLIDING_LOG_H_
#define THROTTLEKIT_STRATEGY_SLIDING_LOG_H_

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "throttlekit/core/decision.h"
#include "throttlekit/core/option_check.h"
#include "throttlekit/strategy/strategy.h"

namespace throttlekit {

class SlidingLog {
 public:
  struct Options {
    // Units admitted per window; 1 .. 2^53-1.
    int64_t limit = 0;
    // The window in ms; 1 .. 2^53-1.
    int64_t window_ms = 0;
  };

  // `count` units admitted at epoch ms `at_ms`.
  struct Run {
    int64_t at_ms = 0;
    int64_t count = 0;
    friend bool operator==(const Run&, const Run&) = default;
  };

  // The admitted units as live runs with strictly ascending `at_ms` and
  // `count >= 1`; after any allowed call they hold at most `limit` units.
  // Its value is the live runs alone (pruned runs not yet erased and the
  // base of the cumulative sums are layout). 24 B inline, like the vector it
  // is; default-constructed (cold) it is empty and allocates nothing; once
  // written, 16 B per slot on the heap: one bookkeeping slot plus at most
  // twice the live runs plus one (the capacity is never shrunk). Plain
  // value: not thread-safe.
  class State {
   public:
    State() = default;

    // The state whose live runs are `runs`, as a remote store reads them
    // back (strictly ascending `at_ms`, each `count >= 1`; the caller
    // checks). No runs give the cold state. O(runs).
    static State from_runs(std::span<const Run> runs) {
      State s;
      if (runs.empty()) return s;
      s.slots_.reserve(runs.size() + 1);
      s.slots_.push_back(Slot{1, 0});
      uint64_t cum = 0;
      for (const Run& r : runs) {
        cum += static_cast<uint64_t>(r.count);
        s.slots_.push_back(Slot{r.at_ms, cum});
      }
      return s;
    }

    // The live runs, oldest first (a copy, for tests and diagnostics).
    // O(runs).
    std::vector<Run> runs() const {
      std::vector<Run> out;
      for (size_t i = head(); i < slots_.size(); ++i) {
        out.push_back(Run{slots_[i].at_ms, count_of(i)});
      }
      return out;
    }

    // Slots allocated (bookkeeping, live, pruned but kept, and spare); 0
    // when cold.
    size_t capacity() const noexcept { return slots_.capacity(); }

    // Equal iff the live runs are equal. O(runs).
    friend bool operator==(const State& a, const State& b) {
      const size_t ha = a.head();
      const size_t hb = b.head();
      if (a.slots_.size() - ha != b.slots_.size() - hb) return false;
      for (size_t i = ha, j = hb; i < a.slots_.size(); ++i, ++j) {
        if (a.slots_[i].at_ms != b.slots_[j].at_ms ||
            a.count_of(i) != b.count_of(j)) {
          return false;
        }
      }
      return true;
    }

   private:
    friend class SlidingLog;

    // A run and `cum`, the units admitted up to and including it (mod
    // 2^64, from an arbitrary base); its count is `cum` minus the previous
    // slot's. The live units total at most `limit` < 2^53, so differences
    // of sums across live runs are exact even after the sums wrap.
    struct Slot {
      int64_t at_ms = 0;
      uint64_t cum = 0;
    };

    // Index of the oldest live run (`slots_.size()` when none is live).
    size_t head() const noexcept {
      return slots_.empty() ? 0 : static_cast<size_t>(slots_[0].at_ms);
    }
    // Units of the run in slot `i` (1 <= i < size).
    int64_t count_of(size_t i) const noexcept {
      return static_cast<int64_t>(slots_[i].cum - slots_[i - 1].cum);
    }

    // Empty when cold. Otherwise `slots_[0]` is bookkeeping, not a run: its
    // `at_ms` holds `head` (>= 1) and its `cum` the base for slot 1. Slots
    // [1, head) are pruned runs, erased once they outnumber the live ones;
    // [head, size) are the live runs, ascending by `at_ms`.
    std::vector<Slot> slots_;
  };

  static constexpr std::string_view kName = "sliding_log";

  // Validates `options`; the error names the field and its bound.
  static absl::StatusOr<SlidingLog> create(const Options& options) {
    if (auto s = detail::check_int_options(
            "sliding_log",
            {{"limit", options.limit}, {"window_ms", options.window_ms}});
        !s.ok()) {
      return s;
    }
    return SlidingLog(options);
  }

  const Options& options() const noexcept { return options_; }
  int64_t policy_window_ms() const noexcept { return options_.window_ms; }

  // See strategy.h. `cost` must be valid (`validate_cost`); it is charged
  // `ceil(cost)` units. Writes `state` only when allowed; an allowed call
  // may allocate (a new run). O(log runs), plus amortized O(1) to prune.
  // Not thread-safe on one `state`.
  Decision check(State& state, int64_t now_ms, double cost) const {
    const int64_t at = decided_at(state, now_ms);
    const size_t first = first_survivor(state, static_cast<double>(at));
    const int64_t count = count_from(state, first);
    const int64_t units = detail::ceil_to_int(cost);
    if (units > options_.limit - count)
      return deny(state, first, count, units, now_ms);
    prune_before(state, first);
    add_units(state, at, units);
    return Decision{
        true, options_.limit,
        std::max<int64_t>(0, options_.limit - count - units),
        reset_at(static_cast<double>(state.slots_[state.head()].at_ms)), 0};
  }

  // See strategy.h: the decision for one unit, consuming nothing; on allow
  // `remaining` is the current capacity `limit - count`. O(log runs).
  Decision peek(const State& state, int64_t now_ms) const {
    const double at = static_cast<double>(decided_at(state, now_ms));
    const size_t first = first_survivor(state, at);
    const int64_t count = count_from(state, first);
    if (count + 1 > options_.limit) return deny(state, first, count, 1, now_ms);
    return Decision{true, options_.limit, options_.limit - count,
                    reset_at(oldest_or(state, first, at)), 0};
  }

  // See strategy.h. `next_replenish_at_ms` is exact: the instant the
  // k-th oldest unit expires (or `now + window_ms` for a cost above `limit`
  // on an empty log). `full_at_ms` is when the newest unit expires (`now`
  // when empty): the instant the whole log is replenished. O(log runs).
  Forecast forecast(const State& state, int64_t now_ms, double cost) const {
    const size_t first =
        first_survivor(state, static_cast<double>(decided_at(state, now_ms)));
    const int64_t count = count_from(state, first);
    const int64_t units = detail::ceil_to_int(cost);
    const int64_t next =
        units <= options_.limit - count
            ? now_ms
            : now_ms + retry_after(state, first, count, units, now_ms);
    const int64_t full =
        first == state.slots_.size()
            ? now_ms
            : reset_at(static_cast<double>(state.slots_.back().at_ms));
    return Forecast{std::max<int64_t>(0, options_.limit - count), next, full};
  }

  // The newest unit's expiry: at `now >= newest + window_ms` every unit is
  // pruned, so the log is exactly cold. `INT64_MIN` for an empty log. O(1).
  int64_t expires_at_ms(const State& state) const noexcept {
    if (state.head() == state.slots_.size()) {
      return std::numeric_limits<int64_t>::min();
    }
    return reset_at(static_cast<double>(state.slots_.back().at_ms));
  }

  // The timestamp of the k-th oldest unit surviving at `now_ms` (1-based,
  // counting each run's units; `k` is clamped to [1, surviving units]).
  // `now_ms` when nothing survives. Exposed for tests and for the lock-free
  // ring that compares itself against this log. O(log runs).
  int64_t kth_oldest_ms(const State& state, int64_t now_ms, int64_t k) const {
    const size_t first = first_survivor(state, static_cast<double>(now_ms));
    const int64_t count = count_from(state, first);
    if (count == 0) return now_ms;
    return kth_from(state, first, std::clamp<int64_t>(k, 1, count));
  }

  // Units that survive at `now_ms` (timestamps `> now_ms - window_ms`).
  // O(log runs).
  int64_t surviving_units(const State& state, int64_t now_ms) const {
    const double now = static_cast<double>(now_ms);
    return count_from(state, first_survivor(state, now));
  }

 private:
  explicit SlidingLog(const Options& o)
      : options_(o), window_(static_cast<double>(o.window_ms)) {}

  // The first index in [lo, n) at which `before` is false, given that it
  // holds on a prefix of [lo, n) (n if it holds everywhere). Probes lo,
  // lo+1, lo+3, lo+7, ... then bisects the last gap: O(log(answer - lo)).
  template <class Before>
  static size_t gallop(size_t lo, size_t n, Before before) {
    size_t hi = lo;
    size_t step = 1;
    while (hi < n && before(hi)) {
      lo = hi + 1;
      hi = lo + step - 1;
      step *= 2;
    }
    hi = std::min(hi, n);
    while (lo < hi) {
      const size_t mid = lo + (hi - lo) / 2;
      if (before(mid)) {
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
    return lo;
  }

  // Index of the first live run with `at > now - window_ms` (runs ascend,
  // so every live run before it is expired).
  size_t first_survivor(const State& state, double now) const {
    const double cutoff = now - window_;
    const auto& slots = state.slots_;
    return gallop(state.head(), slots.size(), [&](size_t i) {
      return !(cutoff < static_cast<double>(slots[i].at_ms));
    });
  }

  // The k-th oldest unit from run `first` on; 1 <= k <= count_from(first).
  static int64_t kth_from(const State& state, size_t first, int64_t k) {
    const auto& slots = state.slots_;
    const uint64_t base = slots[first - 1].cum;  // first >= head >= 1
    const auto want = static_cast<uint64_t>(k);
    const size_t i = gallop(first, slots.size(), [&](size_t j) {
      return slots[j].cum - base < want;
    });
    return i < slots.size() ? slots[i].at_ms
                            : slots.back().at_ms;  // unreachable, valid k
  }

  static int64_t count_from(const State& state, size_t first) {
    if (first == state.slots_.size()) return 0;
    return static_cast<int64_t>(state.slots_.back().cum -
                                state.slots_[first - 1].cum);
  }

  static double oldest_or(const State& state, size_t first, double now) {
    return first == state.slots_.size()
               ? now
               : static_cast<double>(state.slots_[first].at_ms);
  }

  // ceil(oldest + window_ms)
  int64_t reset_at(double oldest) const noexcept {
    return detail::ceil_to_int(oldest + window_);
  }

  // The wait from the caller's `now_ms` until the k-th oldest unit expires.
  int64_t retry_after(const State& state, size_t first, int64_t count,
                      int64_t units, int64_t now_ms) const {
    if (count == 0) return options_.window_ms;
    const int64_t k =
        std::clamp<int64_t>(count + units - options_.limit, 1, count);
    const double kth = static_cast<double>(kth_from(state, first, k));
    return std::max<int64_t>(
        1, detail::ceil_to_int(kth + window_ - static_cast<double>(now_ms)));
  }

  // A denial for the caller at `now_ms`. `reset_at` comes from the oldest
  // survivor; a log with none holds no newer timestamp, so `now_ms` is then
  // the instant decided at.
  Decision deny(const State& state, size_t first, int64_t count, int64_t units,
                int64_t now_ms) const {
    return Decision{
        false, options_.limit, std::max<int64_t>(0, options_.limit - count),
        reset_at(oldest_or(state, first, static_cast<double>(now_ms))),
        retry_after(state, first, count, units, now_ms)};
  }

  // max(now, the newest timestamp held): the instant a call is decided at.
  static int64_t decided_at(const State& state, int64_t now_ms) noexcept {
    const auto& slots = state.slots_;
    return state.head() < slots.size() ? std::max(now_ms, slots.back().at_ms)
                                       : now_ms;
  }

  // Drops the live runs before `first`: they leave the value at once, and
  // leave memory once they outnumber the live runs. An erase moves fewer
  // slots than it removes and a slot is removed once, so pruning is
  // amortized O(1). A cold state gets its bookkeeping slot (and room for
  // one run: one allocation).
  static void prune_before(State& state, size_t first) {
    auto& slots = state.slots_;
    if (slots.empty()) {
      slots.reserve(2);
      slots.push_back(State::Slot{1, 0});
      return;
    }
    if (first - 1 > slots.size() - first) {
      slots[0].cum = slots[first - 1].cum;
      slots.erase(slots.begin() + 1,
                  slots.begin() + static_cast<std::ptrdiff_t>(first));
      first = 1;
    }
    slots[0].at_ms = static_cast<int64_t>(first);
  }

  // Adds `units` at `at_ms` (`decided_at`, never before the newest run):
  // appended, or merged into the newest run. `state` has its bookkeeping
  // slot.
  static void add_units(State& state, int64_t at_ms, int64_t units) {
    auto& slots = state.slots_;
    const auto add = static_cast<uint64_t>(units);
    if (state.head() == slots.size() || slots.back().at_ms < at_ms) {
      slots.push_back(State::Slot{at_ms, slots.back().cum + add});
      return;
    }
    slots.back().cum += add;
  }

  Options options_;
  double window_;
};

static_assert(Strategy<SlidingLog>);

}  // namespace throttlekit

#endif  // THROTTLEKIT_STRATEGY_SLIDING_LOG_H_
