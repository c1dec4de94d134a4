// tests/support/generators.h
//
// Provides the RapidCheck generators the strategy properties share
// (tests/strategy/*_property_test.cc):
//
// - Costs: `gen_cost()`, a small cost, mostly whole units and sometimes a
//   fraction (`small_costs()`, its generator); `gen_any_cost(scale)`, a small
//   cost, one around `scale` (a strategy's ceiling: at it, just above it, half
//   of it) or a heavy one; `gen_invalid_cost()`, a value cost validation must
//   reject (0, -0, negative, NaN, infinite, above 2^53 - 1).
// - Options: `gen_gcra()`, `gen_token_bucket()`, `gen_fixed_window()`,
//   `gen_sliding_window()`, `gen_sliding_log()`, `gen_quota_options()`,
//   `gen_token_budget()`, `gen_leaky_bucket()`: a strategy (for the quota,
//   its options) in ranges small enough that a few hundred calls cross many
//   windows.
// - Timelines: `step_ms(strategy)`, the longest forward step for that
//   strategy (about the time a unit or a tick takes to come back, so a
//   timeline alternates admissions and denials); `gen_forward_step(most)`;
//   `Clock` and `gen_clock()`: a timeline that only moves forward, or one
//   whose `now`s also go back (skewed callers, or a random walk), as every
//   strategy allows (docs/semantics.md, "A stale now"); `StepShape` and
//   `Timeline`, which draws such a timeline's `now`s one by one.
//
// Call them inside a property (they draw with `*`).

#ifndef THROTTLEKIT_TESTS_SUPPORT_GENERATORS_H_
#define THROTTLEKIT_TESTS_SUPPORT_GENERATORS_H_

#include <rapidcheck.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <ostream>
#include <vector>

#include "support/test_time.h"
#include "throttlekit/core/decision.h"
#include "throttlekit/strategy/civil_time.h"
#include "throttlekit/strategy/fixed_window.h"
#include "throttlekit/strategy/gcra.h"
#include "throttlekit/strategy/leaky_bucket.h"
#include "throttlekit/strategy/quota.h"
#include "throttlekit/strategy/sliding_log.h"
#include "throttlekit/strategy/sliding_window.h"
#include "throttlekit/strategy/token_bucket.h"
#include "throttlekit/strategy/token_budget.h"

namespace throttlekit::testing {

// ---- Costs ----------------------------------------------------------------

// Small valid costs: mostly whole units, sometimes a fraction (the list the
// per-strategy properties used, merged).
inline rc::Gen<double> small_costs() {
  return rc::gen::element(1.0, 1.0, 0.5, 2.0, 3.0, 0.25, 3.5, 0.1);
}

// A small valid cost.
inline double gen_cost() { return *small_costs(); }

// A valid cost for a strategy whose ceiling (the largest cost that can ever
// pass), or scale, is `scale`: half the time a small one, else one at the
// ceiling, just above it, about half of it, or a heavy one. Clamped to
// 2^53 - 1, the largest valid cost.
inline double gen_any_cost(double scale) {
  const double cost = *rc::gen::weightedOneOf<double>(
      {{2, small_costs()},
       {1, rc::gen::element(scale, scale + 0.5, scale + 1.0,
                            std::floor(scale / 2) + 0.5)},
       {1,
        rc::gen::element(2.5, 0.2, 0.3, 7.5, 30.0, 40.0, 49.0, 50.0, 60.0)}});
  return std::min(cost, static_cast<double>(kMaxSafeInteger));
}

// A value no cost validation may accept (docs/semantics.md, "Decision": a
// cost is finite, > 0 and <= 2^53 - 1).
inline double gen_invalid_cost() {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  return *rc::gen::oneOf(
      rc::gen::element(0.0, -0.0, -1.0, -0.5, -1e-300, -1e300,
                       std::numeric_limits<double>::quiet_NaN(), kInf, -kInf,
                       static_cast<double>(kMaxSafeInteger) + 1.0,
                       static_cast<double>(kMaxSafeInteger) * 2.0, 1e300,
                       std::numeric_limits<double>::max()),
      rc::gen::map(rc::gen::inRange<int64_t>(-1'000'000, 1),
                   [](int64_t c) { return static_cast<double>(c); }));
}

// ---- Options ----------------------------------------------------------------

// 1 .. 49 units per 1 .. 4999 ms; burst 0 (meaning `limit`) or 1 .. 59.
inline Gcra gen_gcra() {
  const int64_t limit = *rc::gen::inRange<int64_t>(1, 50);
  const int64_t period = *rc::gen::inRange<int64_t>(1, 5000);
  const int64_t burst = *rc::gen::oneOf(rc::gen::just<int64_t>(0),
                                        rc::gen::inRange<int64_t>(1, 60));
  return *Gcra::create({limit, period, burst});
}

// Capacity 1 .. 49; an arbitrary (usually inexact) refill rate.
inline TokenBucket gen_token_bucket() {
  const int64_t capacity = *rc::gen::inRange<int64_t>(1, 50);
  const double refill = *rc::gen::inRange(1, 20'000) / 7.0;
  return *TokenBucket::create({capacity, refill});
}

// 1 .. 29 units per window of 1 .. 1999 ms.
inline FixedWindow gen_fixed_window() {
  return *FixedWindow::create(
      {*rc::gen::inRange<int64_t>(1, 30), *rc::gen::inRange<int64_t>(1, 2000)});
}

// 1 .. 29 units per window of 1 .. 1999 ms in 1 .. min(window, 20) ticks
// (often fractional ones).
inline SlidingWindow gen_sliding_window() {
  const int64_t window = *rc::gen::inRange<int64_t>(1, 2000);
  const int64_t buckets =
      *rc::gen::inRange<int64_t>(1, std::min<int64_t>(window, 20) + 1);
  return *SlidingWindow::create(
      {*rc::gen::inRange<int64_t>(1, 30), window, buckets});
}

// 1 .. 39 units (sometimes 1 .. 999, or 10^12) per window of 1 .. 2999 ms.
inline SlidingLog gen_sliding_log() {
  const int64_t limit = *rc::gen::weightedOneOf<int64_t>(
      {{4, rc::gen::inRange<int64_t>(1, 40)},
       {1, rc::gen::inRange<int64_t>(1, 1000)},
       {1, rc::gen::just<int64_t>(1'000'000'000'000)}});
  return *SlidingLog::create({limit, *rc::gen::inRange<int64_t>(1, 3000)});
}

// 1 .. 19 units per day, week, month or fixed period (1 ms .. 3 days,
// anchored within 10 days of kEpoch), any week start and UTC offset.
inline Quota::Options gen_quota_options() {
  constexpr int64_t kDay = detail::kMsPerDay;
  Quota::Options o;
  o.limit = *rc::gen::inRange<int64_t>(1, 20);
  o.period = *rc::gen::element(QuotaPeriod::kDay, QuotaPeriod::kWeek,
                               QuotaPeriod::kMonth, QuotaPeriod::kFixed);
  o.week_starts_on = *rc::gen::inRange<int64_t>(0, 7);
  o.offset_minutes = *rc::gen::inRange<int64_t>(-840, 841);
  o.anchor_ms = kEpoch + *rc::gen::inRange<int64_t>(-10 * kDay, 10 * kDay);
  o.period_ms = *rc::gen::inRange<int64_t>(1, 3 * kDay);
  return o;
}

// A budget of 1 .. 499 tokens per window of 1 .. 4999 ms.
inline TokenBudget gen_token_budget() {
  return *TokenBudget::create({*rc::gen::inRange<int64_t>(1, 500),
                               *rc::gen::inRange<int64_t>(1, 5000)});
}

// 0.5 .. 250 units a second; a queue of 0 .. 4999 ms.
inline LeakyBucket gen_leaky_bucket() {
  const double rate = *rc::gen::element(0.5, 1.0, 3.0, 7.0, 10.0, 250.0);
  return *LeakyBucket::create({rate, *rc::gen::inRange<int64_t>(0, 5000)});
}

// ---- Timelines --------------------------------------------------------------

// The longest forward step (ms, inclusive) of a timeline for the strategy.
inline int64_t step_ms(const Gcra& g) {
  return 2 * g.options().period_ms / g.options().limit + 1;
}
inline int64_t step_ms(const TokenBucket& b) {
  return static_cast<int64_t>(
             std::min(1e6, std::ceil(3.0 / b.rate_per_ms()) + 2)) -
         1;
}
inline int64_t step_ms(const FixedWindow& f) {
  return f.options().window_ms / f.options().limit + 1;
}
inline int64_t step_ms(const SlidingWindow& sw) {
  return static_cast<int64_t>(2 * sw.tick_ms()) + 1;
}
inline int64_t step_ms(const SlidingLog& l) {
  return l.options().window_ms / 4 + 1;
}
inline int64_t step_ms(const Quota& q) { return q.policy_window_ms() / 8; }
inline int64_t step_ms(const TokenBudget& b) {
  return b.options().window_ms / 4 + 1;
}
inline int64_t step_ms(const LeakyBucket& b) {
  return std::max<int64_t>(
      399, static_cast<int64_t>(std::ceil(2 * b.interval_ms())));
}

// A forward step of 0 .. `most` ms.
inline int64_t gen_forward_step(int64_t most) {
  return *rc::gen::inRange<int64_t>(0, most + 1);
}

// A check a forward timeline admitted: its `now` and its cost.
struct Admit {
  int64_t at;
  double cost;
};

// A forward timeline of `steps` checks of `strategy` on `state`: from
// `start`, each `now` a `gen_forward_step(step_ms(strategy))` after the
// last, each check's cost `cost()`. Returns the admitted checks in order;
// `*last_now`, if given, is set to the last check's `now`.
template <class S, class Cost>
std::vector<Admit> forward_admissions(const S& strategy,
                                      typename S::State& state, int64_t start,
                                      int steps, Cost cost,
                                      int64_t* last_now = nullptr) {
  std::vector<Admit> admitted;
  int64_t now = start;
  for (int i = 0; i < steps; ++i) {
    now += gen_forward_step(step_ms(strategy));
    const double c = cost();
    if (strategy.check(state, now, c).allowed) admitted.push_back({now, c});
  }
  if (last_now != nullptr) *last_now = now;
  return admitted;
}

// Asserts (RC_ASSERT), for every run of admissions i .. j (i <= j), that
// their summed cost is at most `most(j - i, elapsed_ms)`, where elapsed_ms
// is the time from admission i to admission j.
template <class Most>
void assert_every_run_within(const std::vector<Admit>& admitted, Most most) {
  for (size_t i = 0; i < admitted.size(); ++i) {
    double units = 0;
    for (size_t j = i; j < admitted.size(); ++j) {
      units += admitted[j].cost;
      const double elapsed =
          static_cast<double>(admitted[j].at - admitted[i].at);
      RC_ASSERT(units <= most(j - i, elapsed));
    }
  }
}

// How a timeline's `now` moves (a stale `now`, behind one already seen, is
// allowed by every strategy: docs/semantics.md, "A stale now"):
// - kForward: never back.
// - kSkewed: callers that read a real clock and were delayed before
//   committing: each `now` lags the real time by 0 .. `skew` ms, so
//   consecutive `now`s go back and forth; one step in 200 the real clock
//   itself steps back by 0 .. `jump` ms.
// - kWalk: a random walk, each step forward 0 .. `forward` and back
//   0 .. `back` ms, so it can drift back for a long stretch; one step in
//   ten also jumps back by 0 .. `jump` ms.
enum class Clock { kForward, kSkewed, kWalk };

// So a counterexample names the clock.
inline std::ostream& operator<<(std::ostream& os, Clock clock) {
  switch (clock) {
    case Clock::kForward:
      return os << "Clock::kForward";
    case Clock::kSkewed:
      return os << "Clock::kSkewed";
    case Clock::kWalk:
      return os << "Clock::kWalk";
  }
  return os << "Clock(?)";
}

inline Clock gen_clock() {
  return *rc::gen::element(Clock::kForward, Clock::kSkewed, Clock::kWalk);
}

// The step sizes of a timeline, in ms (see `Clock`).
struct StepShape {
  int64_t forward = 0;
  int64_t back = 0;  // kWalk
  int64_t skew = 0;  // kSkewed
  int64_t jump = 0;
};

// A timeline of `now`s starting at `start`: `next()` draws the next one;
// `last()` is the latest drawn (`start` before the first).
class Timeline {
 public:
  Timeline(int64_t start, const StepShape& shape, Clock clock)
      : real_(start), last_(start), shape_(shape), clock_(clock) {}

  int64_t next() {
    real_ += gen_forward_step(shape_.forward);
    last_ = real_;
    switch (clock_) {
      case Clock::kForward:
        break;
      case Clock::kSkewed:
        if (*rc::gen::inRange(0, 200) == 0) real_ -= gen_jump();
        last_ = real_ - *rc::gen::inRange<int64_t>(0, shape_.skew + 1);
        break;
      case Clock::kWalk:
        real_ -= *rc::gen::inRange<int64_t>(0, shape_.back + 1);
        if (*rc::gen::inRange(0, 10) == 0) real_ -= gen_jump();
        last_ = real_;
        break;
    }
    return last_;
  }

  int64_t last() const { return last_; }

 private:
  int64_t gen_jump() const {
    return *rc::gen::inRange<int64_t>(0, shape_.jump + 1);
  }

  int64_t real_;
  int64_t last_;
  StepShape shape_;
  Clock clock_;
};

}  // namespace throttlekit::testing

#endif  // THROTTLEKIT_TESTS_SUPPORT_GENERATORS_H_
