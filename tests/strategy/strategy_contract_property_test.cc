// The contract every strategy promises (throttlekit/strategy/strategy.h,
// docs/strategies.md "The Strategy concept", docs/semantics.md "Decision",
// "A stale now", "Peek and forecast"), as typed RapidCheck properties run
// over each strategy with random options, costs and timelines
// (support/generators.h). A timeline moves only forward, or its `now`s also
// go back (skewed callers, a random walk, jumps back across windows): every
// strategy allows a stale `now`, so each property holds on all of them.
//
// StrategyContractProperty, over all eight strategies (the leaky bucket is a
// shaper, not a `Strategy`: its admission verb is `reserve`, answering a
// `Reservation`, and it has no forecast):
//
// - DenialNeverChangesState: a denied `check` (rejected `reserve`) leaves the
//   state equal to what it was and allocates nothing, and a cold key denied
//   a cost above the ceiling stays cold. Every decision is well formed:
//   `remaining >= 0`, the reported limit, `retry_after_ms` 0 when allowed
//   and >= 1 when denied, `reset_at_ms` not before `now`; for the windowed
//   strategies (fixed window, quota, token budget) a denial's retry is
//   exactly `reset_at - now` and a stale `now` is decided in a window never
//   later than the latest `now`'s. For the shaper: an accepted delay within
//   `max_queue_ms`, a rejection's delay >= 1.
// - PeekIsTheDecisionOfCheckAndWritesNothing: `peek` writes nothing and is
//   the verdict of `check` for cost 1 (the whole decision when that
//   denies); the shaper's `peek` equals `reserve` for any cost.
// - ExpiredStateDecidesLikeCold: from `expires_at_ms(state)` on, `peek`,
//   `forecast` (queue delay for the shaper) and the admission verb decide
//   exactly as for the cold state, call after call; a cold state's expiry is
//   INT64_MIN.
//
// ForecastContractProperty, over the seven `Strategy` types:
//
// - NextAdmitsAndTheMsBeforeDoesNot: `forecast` writes nothing; its
//   `spendable_now` is `peek`'s `remaining`; `next_replenish_at_ms` is `now`
//   exactly when `check` admits now; for a cost that can pass, `check`
//   admits at `next_replenish_at_ms` and denies 1 ms before it; for a cost
//   above the ceiling it is `now` plus the denial's retry hint. At
//   `full_at_ms` the whole ceiling fits; for the token bucket, whose
//   `full_at_ms` (`peek`'s `reset_at`) is searched to be the first such ms,
//   one ms earlier it does not (unless it fits at `now`).
//
// CostValidationContractProperty, over the strategies that validate a cost
// themselves: only the token budget, whose `debit` takes raw tokens. Every
// `check` (and `reserve`) takes an already valid cost: `validate_cost` runs
// in the limiter, stores and coordinators (tests/core/key_cost_test.cc), so
// no other strategy has a verb to test here.
//
// - InvalidCostIsAStatusNeverADecision: 0, -0, negative, NaN, infinite,
//   above 2^53 - 1 or fractional tokens give kInvalidArgument and leave the
//   state untouched; a whole number of tokens in range always gets a
//   decision.
#include <gtest/gtest.h>
#include <rapidcheck.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "support/generators.h"
#include "support/test_time.h"
#include "throttlekit/core/decision.h"
#include "throttlekit/strategy/civil_time.h"
#include "throttlekit/strategy/fixed_window.h"
#include "throttlekit/strategy/gcra.h"
#include "throttlekit/strategy/leaky_bucket.h"
#include "throttlekit/strategy/quota.h"
#include "throttlekit/strategy/sliding_log.h"
#include "throttlekit/strategy/sliding_window.h"
#include "throttlekit/strategy/strategy.h"
#include "throttlekit/strategy/token_bucket.h"
#include "throttlekit/strategy/token_budget.h"

namespace throttlekit {
namespace strategy_contract_property_test {
namespace {

using testing::Clock;
using testing::gen_any_cost;
using testing::gen_clock;
using testing::gen_forward_step;
using testing::gen_invalid_cost;
using testing::kEpoch;
using testing::step_ms;
using testing::StepShape;
using testing::Timeline;

// ---- Traits: what differs between strategies --------------------------------

// Defaults; each strategy's traits below override what differs.
struct ContractDefaults {
  // Every decision's reset_at_ms is after `now` (else at or after it).
  static constexpr bool kResetAfterNow = true;
  // Decisions name an aligned window (`window_end`).
  static constexpr bool kWindowed = false;
  // At a forecast's full_at_ms, a request of the whole ceiling passes.
  static constexpr bool kFullAtAdmitsCeiling = true;
  // ... and, unless it passes at `now`, 1 ms before full_at_ms it does not.
  static constexpr bool kFullAtIsFirst = false;
  // Heap the state holds (slots); plain-value states hold none.
  template <class State>
  static size_t footprint(const State&) {
    return 0;
  }
};

// For strategy S: `gen()`, a strategy with random options
// (support/generators.h); `ceiling(s)`, the largest cost that can ever pass
// (none if any cost can); `limit(s)`, the limit its decisions report; for
// the windowed ones, `window_end(s, now)`, the end of the window holding
// `now`.
template <class S>
struct ContractTraits;

template <>
struct ContractTraits<Gcra> : ContractDefaults {
  static Gcra gen() { return testing::gen_gcra(); }
  static std::optional<double> ceiling(const Gcra& g) {
    return static_cast<double>(g.burst());
  }
  static int64_t limit(const Gcra& g) { return g.burst(); }
  // reset_at = ceil(max(tat, now)): `now` itself on an idle key.
  static constexpr bool kResetAfterNow = false;
};

template <>
struct ContractTraits<TokenBucket> : ContractDefaults {
  static TokenBucket gen() { return testing::gen_token_bucket(); }
  static std::optional<double> ceiling(const TokenBucket& b) {
    return static_cast<double>(b.options().capacity);
  }
  static int64_t limit(const TokenBucket& b) { return b.options().capacity; }
  // reset_at = t + ceil((capacity - tokens) / rate): `t` on a full bucket.
  static constexpr bool kResetAfterNow = false;
  // full_at is peek's reset_at: the first ms at which a check of
  // `capacity` passes, searched from the closed form
  // t + ceil((capacity - tokens) / rate), which rounding can put a ms early
  // or late (docs/strategies.md, "Token bucket").
  static constexpr bool kFullAtIsFirst = true;
};

template <>
struct ContractTraits<FixedWindow> : ContractDefaults {
  static FixedWindow gen() { return testing::gen_fixed_window(); }
  static std::optional<double> ceiling(const FixedWindow& f) {
    return static_cast<double>(f.options().limit);
  }
  static int64_t limit(const FixedWindow& f) { return f.options().limit; }
  static constexpr bool kWindowed = true;
  static int64_t window_end(const FixedWindow& f, int64_t now) {
    const int64_t w = f.options().window_ms;
    return now - detail::floor_mod(now, w) + w;
  }
};

template <>
struct ContractTraits<SlidingWindow> : ContractDefaults {
  static SlidingWindow gen() { return testing::gen_sliding_window(); }
  static std::optional<double> ceiling(const SlidingWindow& sw) {
    return static_cast<double>(sw.options().limit);
  }
  static int64_t limit(const SlidingWindow& sw) { return sw.options().limit; }
  static size_t footprint(const SlidingWindow::State& s) {
    return s.slots.capacity();
  }
};

template <>
struct ContractTraits<SlidingLog> : ContractDefaults {
  static SlidingLog gen() { return testing::gen_sliding_log(); }
  // Charged ceil(cost) units, so a cost passes iff it is <= limit.
  static std::optional<double> ceiling(const SlidingLog& l) {
    return static_cast<double>(l.options().limit);
  }
  static int64_t limit(const SlidingLog& l) { return l.options().limit; }
  static size_t footprint(const SlidingLog::State& s) { return s.capacity(); }
};

template <>
struct ContractTraits<Quota> : ContractDefaults {
  static Quota gen() { return *Quota::create(testing::gen_quota_options()); }
  static std::optional<double> ceiling(const Quota& q) {
    return static_cast<double>(q.options().limit);
  }
  static int64_t limit(const Quota& q) { return q.options().limit; }
  static constexpr bool kWindowed = true;
  static int64_t window_end(const Quota& q, int64_t now) {
    return q.period_at(now).reset_ms;
  }
};

template <>
struct ContractTraits<TokenBudget> : ContractDefaults {
  static TokenBudget gen() { return testing::gen_token_budget(); }
  // The crossing debit passes whatever its size: no ceiling.
  static std::optional<double> ceiling(const TokenBudget&) {
    return std::nullopt;
  }
  static int64_t limit(const TokenBudget& b) { return b.options().budget; }
  static constexpr bool kWindowed = true;
  static int64_t window_end(const TokenBudget& b, int64_t now) {
    const int64_t w = b.options().window_ms;
    return now - detail::floor_mod(now, w) + w;
  }
};

// The shaper: no ceiling (an idle bucket accepts any cost), no limit.
template <>
struct ContractTraits<LeakyBucket> : ContractDefaults {
  static LeakyBucket gen() { return testing::gen_leaky_bucket(); }
  static std::optional<double> ceiling(const LeakyBucket&) {
    return std::nullopt;
  }
};

// ---- The admission verb, and timelines --------------------------------------

// `check`, or the shaper's `reserve`.
template <class S>
auto admit(const S& s, typename S::State& state, int64_t now, double cost) {
  if constexpr (Strategy<S>) {
    return s.check(state, now, cost);
  } else {
    return s.reserve(state, now, cost);
  }
}

bool admitted(const Decision& d) { return d.allowed; }
bool admitted(const Reservation& r) { return r.accepted; }

// The size of a heavy cost: the ceiling, the budget, or for the shaper the
// units that fill its queue.
template <class S>
double scale(const S& s) {
  if constexpr (Strategy<S>) {
    return ContractTraits<S>::ceiling(s).value_or(
        static_cast<double>(ContractTraits<S>::limit(s)));
  } else {
    return std::max(1.0,
                    std::floor(static_cast<double>(s.options().max_queue_ms) /
                               s.interval_ms()));
  }
}

// Steps for `s`: forward up to step_ms(s); a random walk's back steps up to
// half that (at least 50 ms); skewed callers up to two steps (at least
// 50 ms) behind; jumps back up to two windows (at least 5 s).
template <class S>
StepShape shape_of(const S& s) {
  const int64_t forward = step_ms(s);
  int64_t window = 0;
  if constexpr (Strategy<S>) {
    window = s.policy_window_ms();
  } else {
    window = s.options().max_queue_ms +
             static_cast<int64_t>(std::ceil(s.interval_ms()));
  }
  return StepShape{forward, std::max<int64_t>(50, forward / 2),
                   std::max<int64_t>(50, 2 * forward),
                   std::max<int64_t>(5000, 2 * window)};
}

// A timeline for `s` on `clock`, starting within 2 s after kEpoch.
template <class S>
Timeline timeline(const S& s, Clock clock) {
  return Timeline(kEpoch + *rc::gen::inRange<int64_t>(0, 2000), shape_of(s),
                  clock);
}

// Drives `state` through `steps` random calls on `clock`; returns the last
// `now` (the timeline's start if there were none).
template <class S>
int64_t run_history(const S& s, typename S::State& state, Clock clock,
                    int steps) {
  Timeline time = timeline(s, clock);
  for (int i = 0; i < steps; ++i) {
    (void)admit(s, state, time.next(), gen_any_cost(scale(s)));
  }
  return time.last();
}

// Runs `property` with RapidCheck under the test's own name (suite/strategy
// and property), so a failure says which strategy and RC_PARAMS=reproduce
// finds it again.
template <class Property>
void check_property(Property&& property) {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  EXPECT_TRUE(
      rc::check(absl::StrCat(info->test_suite_name(), ".", info->name()),
                std::forward<Property>(property)))
      << "the counterexample is printed above";
}

// Names each typed instance by the strategy's kName.
struct StrategyName {
  template <class S>
  static std::string GetName(int) {
    return std::string(S::kName);
  }
};

// ---- All eight strategies ---------------------------------------------------

template <class S>
class StrategyContractProperty : public ::testing::Test {};

// AllRateStrategies (support/strategy_bounds.h) plus the leaky bucket.
using AllStrategies =
    ::testing::Types<Gcra, TokenBucket, FixedWindow, SlidingWindow, SlidingLog,
                     Quota, TokenBudget, LeakyBucket>;
TYPED_TEST_SUITE(StrategyContractProperty, AllStrategies, StrategyName);

TYPED_TEST(StrategyContractProperty, DenialNeverChangesState) {
  using S = TypeParam;
  using T = ContractTraits<S>;
  using State = typename S::State;
  check_property([] {
    const S s = T::gen();
    // A cold key denied a cost above the ceiling stays cold and allocates
    // nothing.
    if (const std::optional<double> ceiling = T::ceiling(s)) {
      State cold;
      RC_ASSERT(!admitted(admit(s, cold, kEpoch, *ceiling + 0.5)));
      RC_ASSERT(cold == State{});
      RC_ASSERT(T::footprint(cold) == 0u);
    }
    Timeline time = timeline(s, gen_clock());
    State state;
    int64_t latest = std::numeric_limits<int64_t>::min();
    for (int i = 0; i < 200; ++i) {
      const int64_t now = time.next();
      latest = std::max(latest, now);
      const State before = state;
      const size_t held = T::footprint(state);
      const auto d = admit(s, state, now, gen_any_cost(scale(s)));
      if (!admitted(d)) {
        RC_ASSERT(state == before);
        RC_ASSERT(T::footprint(state) == held);
      }
      if constexpr (Strategy<S>) {
        RC_ASSERT(d.remaining >= 0);
        RC_ASSERT(d.limit == T::limit(s));
        RC_ASSERT(d.reset_at_ms >= now);
        if (T::kResetAfterNow) RC_ASSERT(d.reset_at_ms > now);
        if (d.allowed) {
          RC_ASSERT(d.retry_after_ms == 0);
        } else {
          RC_ASSERT(d.retry_after_ms >= 1);
        }
        if constexpr (T::kWindowed) {
          // A stale now is decided in the stored window, never past the
          // latest now's.
          RC_ASSERT(d.reset_at_ms <= T::window_end(s, latest));
          if (!d.allowed) RC_ASSERT(d.retry_after_ms == d.reset_at_ms - now);
        }
      } else {
        if (d.accepted) {
          RC_ASSERT(d.delay_ms >= 0);
          RC_ASSERT(d.delay_ms <= s.options().max_queue_ms);
        } else {
          RC_ASSERT(d.delay_ms >= 1);
        }
      }
    }
  });
}

TYPED_TEST(StrategyContractProperty, PeekIsTheDecisionOfCheckAndWritesNothing) {
  using S = TypeParam;
  using State = typename S::State;
  check_property([] {
    const S s = ContractTraits<S>::gen();
    Timeline time = timeline(s, gen_clock());
    State state;
    const int steps = *rc::gen::inRange(1, 200);
    for (int i = 0; i < steps; ++i) {
      const int64_t now = time.next();
      const State before = state;
      const auto peeked = s.peek(state, now);
      RC_ASSERT(state == before);
      State copy = state;
      if constexpr (Strategy<S>) {
        const Decision checked = s.check(copy, now, 1.0);
        RC_ASSERT(peeked.allowed == checked.allowed);
        RC_ASSERT(peeked.limit == checked.limit);
        if (checked.allowed) {
          RC_ASSERT(peeked.retry_after_ms == 0);
          RC_ASSERT(peeked.remaining >= checked.remaining);
        } else {
          RC_ASSERT(peeked == checked);
        }
      } else {
        // The shaper's answer does not depend on the cost.
        RC_ASSERT(peeked == s.reserve(copy, now, gen_any_cost(scale(s))));
      }
      (void)admit(s, state, now, gen_any_cost(scale(s)));
    }
  });
}

TYPED_TEST(StrategyContractProperty, ExpiredStateDecidesLikeCold) {
  using S = TypeParam;
  using State = typename S::State;
  check_property([] {
    const S s = ContractTraits<S>::gen();
    State warm;
    (void)run_history(s, warm, gen_clock(), *rc::gen::inRange(1, 80));
    RC_PRE(!(warm == State{}));
    State cold;
    RC_ASSERT(s.expires_at_ms(cold) == std::numeric_limits<int64_t>::min());
    int64_t now = s.expires_at_ms(warm) + *rc::gen::inRange<int64_t>(0, 3);
    for (int i = 0; i < 30; ++i) {
      const double cost = gen_any_cost(scale(s));
      RC_ASSERT(s.peek(warm, now) == s.peek(cold, now));
      if constexpr (Strategy<S>) {
        RC_ASSERT(s.forecast(warm, now, cost) == s.forecast(cold, now, cost));
      } else {
        RC_ASSERT(s.queue_delay_ms(warm, now) == s.queue_delay_ms(cold, now));
      }
      RC_ASSERT(admit(s, warm, now, cost) == admit(s, cold, now, cost));
      now += gen_forward_step(step_ms(s));
    }
  });
}

// ---- The seven Strategy types (forecast) ------------------------------------

template <class S>
class ForecastContractProperty : public ::testing::Test {};

// The leaky bucket has no forecast (its `queue_delay_ms` is the whole
// answer).
using ForecastingStrategies =
    ::testing::Types<Gcra, TokenBucket, FixedWindow, SlidingWindow, SlidingLog,
                     Quota, TokenBudget>;
TYPED_TEST_SUITE(ForecastContractProperty, ForecastingStrategies, StrategyName);

TYPED_TEST(ForecastContractProperty, NextAdmitsAndTheMsBeforeDoesNot) {
  using S = TypeParam;
  using T = ContractTraits<S>;
  using State = typename S::State;
  check_property([] {
    const S s = T::gen();
    State state;
    const int64_t last =
        run_history(s, state, gen_clock(), *rc::gen::inRange(0, 100));
    // A now after the history, or one behind it (a stale now).
    const int64_t now =
        last + *rc::gen::oneOf(rc::gen::inRange<int64_t>(-3000, 101),
                               rc::gen::inRange<int64_t>(0, step_ms(s) + 51));
    const double ceiling =
        T::ceiling(s).value_or(std::numeric_limits<double>::infinity());
    double cost = gen_any_cost(scale(s));
    if (*rc::gen::arbitrary<bool>()) cost = std::min(cost, ceiling);
    const State before = state;
    const Forecast f = s.forecast(state, now, cost);
    RC_ASSERT(state == before);
    RC_ASSERT(f.next_replenish_at_ms >= now);
    RC_ASSERT(f.full_at_ms >= now);
    RC_ASSERT(f.spendable_now == s.peek(state, now).remaining);
    State at_now = state;
    const Decision d = s.check(at_now, now, cost);
    RC_ASSERT((f.next_replenish_at_ms == now) == d.allowed);
    if (cost <= ceiling) {
      State at = state;
      RC_ASSERT(s.check(at, f.next_replenish_at_ms, cost).allowed);
      if (f.next_replenish_at_ms > now) {
        State earlier = state;
        RC_ASSERT(!s.check(earlier, f.next_replenish_at_ms - 1, cost).allowed);
      }
    } else {
      // Never passes: the finite retry hint of its denial.
      RC_ASSERT(!d.allowed);
      RC_ASSERT(f.next_replenish_at_ms == now + d.retry_after_ms);
    }
    if constexpr (T::kFullAtAdmitsCeiling) {
      State full = state;
      RC_ASSERT(s.check(full, f.full_at_ms, scale(s)).allowed);
    }
    if constexpr (T::kFullAtIsFirst) {
      // Unless the ceiling fits already (then full_at_ms is
      // max(now, last)), it does not fit 1 ms before full_at_ms.
      State probe = state;
      if (!s.check(probe, now, scale(s)).allowed) {
        RC_ASSERT(f.full_at_ms > now);
        State not_yet = state;
        RC_ASSERT(!s.check(not_yet, f.full_at_ms - 1, scale(s)).allowed);
      }
    }
  });
}

// ---- Strategies that validate a cost themselves
// ------------------------------

template <class S>
class CostValidationContractProperty : public ::testing::Test {};

// Only the token budget: `debit(state, now, tokens)`. (Every `check` and
// the shaper's `reserve` take an already valid cost.)
using CostValidatingStrategies = ::testing::Types<TokenBudget>;
TYPED_TEST_SUITE(CostValidationContractProperty, CostValidatingStrategies,
                 StrategyName);

TYPED_TEST(CostValidationContractProperty, InvalidCostIsAStatusNeverADecision) {
  using S = TypeParam;
  using State = typename S::State;
  check_property([] {
    const S s = ContractTraits<S>::gen();
    State state;
    const int64_t last =
        run_history(s, state, gen_clock(), *rc::gen::inRange(0, 60));
    const int64_t now = last + *rc::gen::inRange<int64_t>(-100, 101);
    // Invalid as any cost, or a valid cost but not a whole number of
    // tokens.
    const double bad =
        *rc::gen::arbitrary<bool>()
            ? gen_invalid_cost()
            : *rc::gen::element(0.5, 1.5, 2.25, 1.0 + 1e-9, 1e15 + 0.5);
    const State before = state;
    const absl::StatusOr<Decision> rejected = s.debit(state, now, bad);
    RC_ASSERT(!rejected.ok());
    RC_ASSERT(rejected.status().code() == absl::StatusCode::kInvalidArgument);
    RC_ASSERT(state == before);
    const double good = *rc::gen::oneOf(
        rc::gen::map(rc::gen::inRange<int64_t>(1, 1000),
                     [](int64_t t) { return static_cast<double>(t); }),
        rc::gen::element(static_cast<double>(kMaxSafeInteger),
                         4503599627370496.0));
    RC_ASSERT(s.debit(state, now, good).ok());
  });
}

}  // namespace
}  // namespace strategy_contract_property_test
}  // namespace throttlekit
