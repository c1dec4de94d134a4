// throttlekit/strategy/sliding_window.h
//
// Provides `SlidingWindow`, the sub-bucketed sliding-window counter
// (docs/semantics.md, "Sliding window"): the window of `window_ms` is cut into
// `S = buckets` ticks of `w = window_ms / S` ms; a request is admitted when
// the estimated units in the last `window_ms` plus its cost fit `limit`. The
// S whole ticks ending with the current one count in full and the tick
// before them counts in proportion to how much of it the window still
// overlaps. `S = 1` is the classic two-counter estimate.
//
// State: a ring of `S + 1` slots `(tick, count)`; tick `k` lives in slot
// `k mod (S + 1)`, and a slot whose tick is not the one asked for reads 0.
// For a request of `cost` at `now`:
//
//     c = floor(now / w);  elapsed = max(0, now - c*w)
//     weight    = clamp((w - elapsed) / w, 0, 1);  lag = 0
//     if a slot holds a tick top > c (a stale `now`):
//         c = top;  weight = 1;  lag = c*w - now
//     full      = sum of slots c-S+1 .. c   (added in ascending tick order)
//     oldest    = slot c-S
//     estimate  = full + oldest * weight;  projected = estimate + cost
//     reset_at  = ceil((c + 1) * w + window_ms)
//     allow iff projected <= limit (fractions compared, nothing floored):
//         slot c += cost;  remaining = max(0, floor(limit - projected))
//     deny (state untouched): D = projected - limit
//         retry = (oldest > 0 and D <= oldest*weight)
//                     ? ceil(lag + D * w / oldest) : ceil((c + 1)*w - now)
//         retry = max(1, retry);  remaining = max(0, floor(limit - estimate))
//
// The reported limit is `limit`; the policy window is `window_ms`.
//
// What it guarantees (proved by tests/strategy/sliding_window_property_test.cc,
// under any order of `now`s): any S consecutive whole ticks admit at most
// `limit`, counting each admission in the tick it was written to. A span `[a, a
// + window_ms)` starting a fraction `f` into tick k admits at most `limit + f *
// X_k`, where `X_k` is what tick k admitted; so at most `2 x limit` in the
// worst case (all of `limit` admitted at the end of one tick), and about `limit
// + limit / S` when traffic is spread evenly over the ticks.
//
// Choices where docs/semantics.md is silent (docs/strategies.md; pinned by
// tests/strategy/sliding_window_test.cc):
// - `buckets <= window_ms`, so a tick is at least 1 ms (`now` is integer ms;
//   finer ticks would only lose precision). `w` may be fractional.
// - A `now` whose tick is behind the latest tick the ring holds (a backward
//   clock step, or, under threads, a caller that read the clock before
//   another committed a later tick) is stale: the call is decided at the
//   start of that latest tick and counts into it, and its retry is measured
//   from the caller's `now`. Stricter, never looser. ThrottleKit 1.x read the
//   later ticks as 0 there and overwrote one of them (docs/semantics.md, "A
//   stale now"); forward-clock decisions are unchanged.
// - A cost above `limit` never passes; its denial carries the finite hint
//   of the formula above (at most about one tick).
// - The state starts as an empty vector (no allocation), sized to `S + 1`
//   slots by the first allowed call, so a denied call on a cold key
//   allocates nothing.
//
// Precondition for every `now_ms`: |now_ms| <= 2^53 (exact in a double).

#ifndef THROTTLEKIT_STRATEGY_SLIDING_WINDOW_H_
#define THROTTLEKIT_STRATEGY_SLIDING_WINDOW_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "throttlekit/core/decision.h"
#include "throttlekit/core/option_check.h"
#include "throttlekit/strategy/internal/earliest.h"
#include "throttlekit/strategy/strategy.h"

namespace throttlekit {

class SlidingWindow {
 public:
  // The largest number of sub-buckets.
  static constexpr int64_t kMaxBuckets = 100000;
  // The tick of a slot never written.
  static constexpr int64_t kNoTick = std::numeric_limits<int64_t>::min();

  struct Options {
    // Units per window; 1 .. 2^53-1.
    int64_t limit = 0;
    // The window length in ms; 1 .. 2^53-1.
    int64_t window_ms = 0;
    // Sub-buckets S per window; 1 .. min(100000, window_ms).
    int64_t buckets = 10;
  };

  // One tick's count. `tick == kNoTick` marks a slot never written.
  struct Slot {
    int64_t tick = kNoTick;
    double count = 0;
    friend bool operator==(const Slot&, const Slot&) = default;
  };

  // The ring. Cold is empty: default construction allocates nothing; the
  // first allowed `check` sizes it to `buckets + 1` slots.
  struct State {
    std::vector<Slot> slots;
    friend bool operator==(const State&, const State&) = default;
  };

  static constexpr std::string_view kName = "sliding_window";

  // Validates `options`; the error names the field and its bound.
  static absl::StatusOr<SlidingWindow> create(const Options& options) {
    if (auto s = detail::check_int_options(
            "sliding_window", {{"limit", options.limit},
                               {"window_ms", options.window_ms},
                               {"buckets", options.buckets, 1, kMaxBuckets}});
        !s.ok()) {
      return s;
    }
    if (options.buckets > options.window_ms) {
      return absl::InvalidArgumentError(absl::StrCat(
          "sliding_window.buckets must be <= sliding_window.window_ms (a "
          "sub-bucket is at least 1 ms); got buckets=",
          options.buckets, ", window_ms=", options.window_ms));
    }
    return SlidingWindow(options);
  }

  const Options& options() const noexcept { return options_; }

  // The state holding the `written` slots (each at its ring index
  // `tick mod (buckets + 1)`), as a remote store reads them back; no slots
  // give the cold state. A later slot replaces an earlier one at the same
  // index. O(buckets).
  State state_from_slots(std::span<const Slot> written) const {
    State state;
    if (written.empty()) return state;
    state.slots.assign(static_cast<size_t>(ring_), Slot{});
    for (const Slot& slot : written) state.slots[index(slot.tick)] = slot;
    return state;
  }

  // The tick length w = window_ms / buckets in ms.
  double tick_ms() const noexcept { return w_; }
  int64_t policy_window_ms() const noexcept { return options_.window_ms; }

  // See strategy.h. Writes `state` only when allowed. O(buckets). May throw
  // std::bad_alloc only when an allowed call sizes a cold ring.
  // Thread-safety: const; the caller serialises access to `state`.
  Decision check(State& state, int64_t now_ms, double cost) const {
    const View v = view(state, now_ms);
    const double projected = v.estimate + cost;
    if (projected <= limit_) {
      if (state.slots.empty()) {
        state.slots.assign(static_cast<size_t>(ring_), Slot{});
      }
      Slot& slot = state.slots[index(v.c)];
      if (slot.tick == v.c) {
        slot.count += cost;
      } else {
        slot = Slot{v.c, cost};
      }
      return Decision{true, options_.limit, floor_units(limit_ - projected),
                      detail::to_int(v.reset_at), 0};
    }
    return Decision{false, options_.limit, floor_units(limit_ - v.estimate),
                    detail::to_int(v.reset_at), retry(v, cost)};
  }

  // See strategy.h: the cost-1 decision; `remaining` is
  // `max(0, floor(limit - estimate))`. O(buckets). Thread-safety: const.
  Decision peek(const State& state, int64_t now_ms) const noexcept {
    const View v = view(state, now_ms);
    const bool allowed = v.estimate + 1.0 <= limit_;
    return Decision{allowed, options_.limit, floor_units(limit_ - v.estimate),
                    detail::to_int(v.reset_at), allowed ? 0 : retry(v, 1.0)};
  }

  // See strategy.h. `spendable_now = max(0, floor(limit - estimate))`.
  // `next_replenish_at_ms`: `now` if `cost` fits now; for a cost above
  // `limit`, `now + retry` with the hint of `check`; otherwise an integer ms
  // t found by bisection on the exact admission predicate, such that `check`
  // at t would allow and at t - 1 would deny. The estimate never grows with
  // time when no slot holds a tick later than the current one (always so
  // under a clock that does not move backwards), so t is then the earliest.
  // `full_at_ms`: `now` when no slot counts at or after tick c - S, else the
  // first ms at which the latest counted tick has left the window (so it can
  // be earlier than `reset_at_ms`, which docs/semantics.md measures from
  // the current tick). O(buckets * log(window_ms)). Thread-safety: const.
  Forecast forecast(const State& state, int64_t now_ms,
                    double cost) const noexcept {
    const View v = view(state, now_ms);
    const int64_t spendable = floor_units(limit_ - v.estimate);
    const int64_t top = latest_tick(state, v.c - s_);
    const int64_t full_at = top == kNoTick ? now_ms : clear_at(top);
    if (v.estimate + cost <= limit_) {
      return Forecast{spendable, now_ms, full_at};
    }
    if (cost > limit_) {
      return Forecast{
          spendable,
          detail::to_int(v.now + static_cast<double>(retry(v, cost))), full_at};
    }
    // From clear_at(max(top, c)) on, every slot reads 0 and `cost` fits.
    const auto passes = [&](double t) {
      return view(state, detail::to_int(t)).estimate + cost <= limit_;
    };
    return Forecast{
        spendable,
        detail::earliest_ms(
            v.now, static_cast<double>(clear_at(std::max(top, v.c))), passes),
        full_at};
  }

  // The first ms at which the latest stored tick has left the window: from
  // then on every slot reads 0, exactly as for a cold key. INT64_MIN for the
  // cold state. Thread-safety: const.
  int64_t expires_at_ms(const State& state) const noexcept {
    const int64_t m = latest_tick(state, kNoTick);
    if (m == kNoTick) return std::numeric_limits<int64_t>::min();
    return clear_at(m);
  }

 private:
  static constexpr double kSearchLimit = 9007199254740991.0;

  // Everything a decision at `now` reads from the state.
  struct View {
    int64_t c;  // the current tick (the latest stored one for a stale now)
    double now;
    double lag;     // c*w - now for a stale now, else 0
    double weight;  // how much of tick c - S the window still overlaps
    double oldest;  // count of tick c - S
    double estimate;
    double reset_at;
  };

  explicit SlidingWindow(const Options& o)
      : options_(o),
        limit_(static_cast<double>(o.limit)),
        window_(static_cast<double>(o.window_ms)),
        s_(o.buckets),
        ring_(o.buckets + 1),
        w_(window_ / static_cast<double>(o.buckets)) {}

  size_t index(int64_t tick) const noexcept {
    return static_cast<size_t>(((tick % ring_) + ring_) % ring_);
  }

  static double count_at(const Slot& slot, int64_t tick) noexcept {
    return slot.tick == tick ? slot.count : 0.0;
  }

  View view(const State& s, int64_t now_ms) const noexcept {
    const double now = static_cast<double>(now_ms);
    double cd = detail::floor_d(now / w_);
    int64_t c = detail::to_int(cd);
    const double elapsed = std::max(0.0, now - cd * w_);
    double weight = std::clamp((w_ - elapsed) / w_, 0.0, 1.0);
    double lag = 0;
    double full = 0;
    double oldest = 0;
    if (!s.slots.empty()) {
      // The walk over ticks c-S .. c visits every slot, so it also finds a
      // later tick (a stale `now`) at no extra cost; then it walks again
      // from that tick's start.
      if (sum_ticks(s, c, full, oldest)) {
        c = latest_tick(s, c + 1);
        cd = static_cast<double>(c);
        weight = 1;
        lag = cd * w_ - now;
        full = 0;
        sum_ticks(s, c, full, oldest);
      }
    }
    return View{c,
                now,
                lag,
                weight,
                oldest,
                full + oldest * weight,
                detail::ceil_d((cd + 1) * w_ + window_)};
  }

  // Sums ticks c-S+1 .. c into `full` (ascending) and reads tick c-S into
  // `oldest`: one index computation, then a walk around the ring (no
  // division per slot). Returns whether a slot holds a tick later than c.
  bool sum_ticks(const State& s, int64_t c, double& full,
                 double& oldest) const noexcept {
    size_t i = index(c - s_);
    oldest = count_at(s.slots[i], c - s_);
    bool later = s.slots[i].tick > c - s_ && s.slots[i].count > 0;
    for (int64_t k = c - s_ + 1; k <= c; ++k) {
      i = i + 1 == static_cast<size_t>(ring_) ? 0 : i + 1;
      full += count_at(s.slots[i], k);
      later |= s.slots[i].tick > k && s.slots[i].count > 0;
    }
    return later;
  }

  // The denial's retry hint; see the class comment.
  int64_t retry(const View& v, double cost) const noexcept {
    const double d = v.estimate + cost - limit_;
    const double r =
        (v.oldest > 0 && d <= v.oldest * v.weight)
            ? detail::ceil_d(v.lag + d * w_ / v.oldest)
            : detail::ceil_d((static_cast<double>(v.c) + 1) * w_ - v.now);
    return std::max<int64_t>(1, detail::to_int(r));
  }

  // The first integer ms t with floor(t / w) >= tick + S + 1 (computed with
  // the rounding of `view`), when `tick` has left the window.
  int64_t clear_at(int64_t tick) const noexcept {
    const double first_clear =
        static_cast<double>(tick) + static_cast<double>(s_) + 1;
    double t = detail::ceil_d(first_clear * w_);
    while (t < kSearchLimit && detail::floor_d(t / w_) < first_clear) t += 1;
    while (detail::floor_d((t - 1) / w_) >= first_clear) t -= 1;
    return detail::to_int(t);
  }

  // The latest tick >= `from` of a slot that was written with a count, or
  // kNoTick if none.
  static int64_t latest_tick(const State& s, int64_t from) noexcept {
    int64_t top = kNoTick;
    for (const Slot& slot : s.slots) {
      if (slot.tick != kNoTick && slot.tick >= from && slot.count > 0) {
        top = std::max(top, slot.tick);
      }
    }
    return top;
  }

  static int64_t floor_units(double v) noexcept {
    return std::max<int64_t>(0, detail::floor_to_int(v));
  }

  Options options_;
  double limit_;
  double window_;
  int64_t s_;
  int64_t ring_;
  double w_;
};

static_assert(Strategy<SlidingWindow>);

}  // namespace throttlekit

#endif  // THROTTLEKIT_STRATEGY_SLIDING_WINDOW_H_
