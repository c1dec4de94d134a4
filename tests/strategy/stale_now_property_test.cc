// A stale `now` never re-grants credit (docs/semantics.md, "A stale now"):
// every strategy is fed the `now`s of callers that read a clock, were
// delayed by a bounded, random skew, and then committed in arrival order, so
// consecutive `now`s move back and forth. A brute-force oracle recounts what
// was admitted and checks the strategy's bound over every window:
//
// - GCRA: any span [a, b] of callers' `now`s admits at most
//   burst + (b - a) / T.
// - Token bucket: any span [a, b] of the instants the calls were decided at
//   (a call's `now`, raised to the last admission's instant) admits at most
//   capacity + rate * (b - a).
// - Fixed window and quota: each window (named by the decision's reset_at)
//   admits at most `limit`, and no admission lands in a window older than
//   its caller's.
// - Sliding window: any S consecutive ticks (the tick each admission's
//   reset_at names) admit at most `limit`.
// - Sliding log: any window (t - window_ms, t] of the instants decided at
//   admits at most `limit` units.
//
// Before this rule, ThrottleKit 1.x stored a stale `now` (token bucket),
// reset a newer window (fixed window), read later ticks as 0 (sliding
// window) or decided at the stale `now` after pruning (sliding log); each of
// those properties fails on that behaviour. Under a forward clock the rule
// never fires: the last property holds every changed strategy equal, field
// for field, to the 1.x formulas written out here (the token bucket's
// reset_at, now the first ms the bucket is full, within 1 ms of 1.x's closed
// form).
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <utility>
#include <vector>

#include "support/generators.h"
#include "support/test_time.h"
#include "throttlekit/strategy/fixed_window.h"
#include "throttlekit/strategy/gcra.h"
#include "throttlekit/strategy/quota.h"
#include "throttlekit/strategy/sliding_log.h"
#include "throttlekit/strategy/sliding_window.h"
#include "throttlekit/strategy/token_bucket.h"

namespace throttlekit {
namespace stale_now_property_test {
namespace {

using testing::Admit;
using testing::kEpoch;

// One call: the caller's `now` and cost, and what the strategy said.
struct Call {
  int64_t now;
  double cost;
  Decision d;
};

// Runs `steps` calls of `strategy` on one state. The real time advances by
// 0 .. max_step ms a call; each caller's `now` is the real time less a skew
// of 0 .. max_skew ms, so `now`s interleave out of order by up to max_skew.
template <class S>
std::vector<Call> run_interleaved(const S& strategy, int64_t max_step,
                                  int64_t max_skew) {
  typename S::State state{};
  std::vector<Call> calls;
  int64_t real = kEpoch + *rc::gen::inRange<int64_t>(0, 1000);
  const int steps = *rc::gen::inRange(1, 400);
  for (int i = 0; i < steps; ++i) {
    real += *rc::gen::inRange<int64_t>(0, max_step + 1);
    const int64_t now = real - *rc::gen::inRange<int64_t>(0, max_skew + 1);
    const double cost = *rc::gen::element(1.0, 1.0, 1.0, 2.0, 0.5, 3.0);
    calls.push_back(Call{now, cost, strategy.check(state, now, cost)});
  }
  return calls;
}

// The instants admissions were decided at: a call's `now` raised to the
// instant of the admission before it (token bucket and sliding log).
std::vector<Admit> decided_instants(const std::vector<Call>& calls) {
  std::vector<Admit> out;
  int64_t last = std::numeric_limits<int64_t>::min();
  for (const Call& c : calls) {
    if (!c.d.allowed) continue;
    last = std::max(last, c.now);
    out.push_back({last, c.cost});
  }
  return out;
}

// `admitted` (instant, units), ascending by instant: every span between two
// admissions holds at most burst + rate_per_ms * span.
void assert_rate_bound(const std::vector<Admit>& admitted, double burst,
                       double rate_per_ms) {
  testing::assert_every_run_within(admitted, [&](size_t, double span) {
    return burst + rate_per_ms * span + 1e-9;
  });
}

RC_GTEST_PROP(StaleNowProperty, GcraAdmitsAtMostBurstPlusRateInAnySpan, ()) {
  const int64_t limit = *rc::gen::inRange<int64_t>(1, 40);
  const int64_t period = *rc::gen::inRange<int64_t>(1, 400);
  const int64_t burst = *rc::gen::inRange<int64_t>(1, 40);
  const Gcra g = *Gcra::create({limit, period, burst});
  const double interval = static_cast<double>(period) / limit;
  const std::vector<Call> calls =
      run_interleaved(g, period / limit + 2, *rc::gen::inRange<int64_t>(0, 50));
  // The admissions by caller `now`; the worst span starts and ends at one.
  std::vector<Admit> admitted;
  for (const Call& c : calls) {
    if (c.d.allowed) admitted.push_back({c.now, c.cost});
  }
  std::sort(admitted.begin(), admitted.end(),
            [](const Admit& a, const Admit& b) {
              return std::pair(a.at, a.cost) < std::pair(b.at, b.cost);
            });
  assert_rate_bound(admitted, static_cast<double>(burst), 1.0 / interval);
}

RC_GTEST_PROP(StaleNowProperty, TokenBucketNeverRefillsAnIntervalTwice, ()) {
  const int64_t capacity = *rc::gen::inRange<int64_t>(1, 30);
  const double per_sec = *rc::gen::element(10.0, 100.0, 1000.0, 250.0);
  const TokenBucket b = *TokenBucket::create({capacity, per_sec});
  const std::vector<Call> calls =
      run_interleaved(b, 20, *rc::gen::inRange<int64_t>(0, 60));
  assert_rate_bound(decided_instants(calls), static_cast<double>(capacity),
                    per_sec / 1000.0);
}

// Per-window sums by the decision's reset_at; no admission in a window
// older than the caller's own.
template <class S, class WindowEnd>
void check_windowed(const S& strategy, int64_t limit, int64_t window,
                    WindowEnd caller_window_end) {
  const std::vector<Call> calls = run_interleaved(
      strategy, window / limit + 2, *rc::gen::inRange<int64_t>(0, 2 * window));
  std::map<int64_t, double> per_window;
  for (const Call& c : calls) {
    if (!c.d.allowed) continue;
    RC_ASSERT(c.d.reset_at_ms >= caller_window_end(c.now));
    per_window[c.d.reset_at_ms] += c.cost;
  }
  for (const auto& [end, units] : per_window) {
    RC_ASSERT(units <= static_cast<double>(limit));
  }
}

RC_GTEST_PROP(StaleNowProperty, FixedWindowNeverAdmitsMoreThanLimitPerWindow,
              ()) {
  const int64_t limit = *rc::gen::inRange<int64_t>(1, 30);
  const int64_t window = *rc::gen::inRange<int64_t>(1, 500);
  check_windowed(*FixedWindow::create({limit, window}), limit, window,
                 [&](int64_t now) {
                   return now - ((now % window) + window) % window + window;
                 });
}

RC_GTEST_PROP(StaleNowProperty, QuotaNeverAdmitsMoreThanLimitPerPeriod, ()) {
  const int64_t limit = *rc::gen::inRange<int64_t>(1, 30);
  const int64_t period = *rc::gen::inRange<int64_t>(1, 500);
  Quota::Options o;
  o.limit = limit;
  o.period = QuotaPeriod::kFixed;
  o.period_ms = period;
  o.anchor_ms = 0;
  check_windowed(*Quota::create(o), limit, period, [&](int64_t now) {
    return now - ((now % period) + period) % period + period;
  });
}

RC_GTEST_PROP(StaleNowProperty, SlidingWindowNeverOverfillsSConsecutiveTicks,
              ()) {
  const int64_t limit = *rc::gen::inRange<int64_t>(1, 30);
  const int64_t buckets = *rc::gen::inRange<int64_t>(1, 8);
  const int64_t tick = *rc::gen::inRange<int64_t>(1, 50);
  const int64_t window = tick * buckets;
  const SlidingWindow sw = *SlidingWindow::create({limit, window, buckets});
  const std::vector<Call> calls = run_interleaved(
      sw, window / limit + 2, *rc::gen::inRange<int64_t>(0, 2 * window));
  // reset_at = (c + 1) * w + window_ms for an integer tick w.
  std::map<int64_t, double> per_tick;
  for (const Call& c : calls) {
    if (!c.d.allowed) continue;
    const int64_t t = (c.d.reset_at_ms - window) / tick - 1;
    RC_ASSERT(t >= c.now / tick);  // never an older tick than the caller's
    per_tick[t] += c.cost;
  }
  for (const auto& [first, units] : per_tick) {
    double sum = 0;
    for (int64_t k = first; k < first + buckets; ++k) {
      auto it = per_tick.find(k);
      if (it != per_tick.end()) sum += it->second;
    }
    RC_ASSERT(sum <= static_cast<double>(limit) + 1e-9);
  }
}

RC_GTEST_PROP(StaleNowProperty, SlidingLogNeverAdmitsMoreThanLimitInAnyWindow,
              ()) {
  const int64_t limit = *rc::gen::inRange<int64_t>(1, 30);
  const int64_t window = *rc::gen::inRange<int64_t>(1, 500);
  const SlidingLog log = *SlidingLog::create({limit, window});
  const std::vector<Call> calls = run_interleaved(
      log, window / limit + 2, *rc::gen::inRange<int64_t>(0, 2 * window));
  const auto admitted = decided_instants(calls);
  for (size_t j = 0; j < admitted.size(); ++j) {
    int64_t units = 0;
    for (size_t i = 0; i <= j; ++i) {
      if (admitted[i].at > admitted[j].at - window) {
        units += static_cast<int64_t>(std::ceil(admitted[i].cost));
      }
    }
    RC_ASSERT(units <= limit);
  }
}

// The 1.x formulas (docs/semantics.md, "A stale now": as ThrottleKit 1.x
// wrote them), for a clock that never moves backwards.
struct TokenBucket1x {
  double capacity, rate, tokens = 0, last = -1e300;
  bool cold = true;
  Decision check(int64_t now_ms, double cost) {
    const double now = static_cast<double>(now_ms);
    const double t =
        cold ? capacity
             : std::min(capacity, tokens + std::max(0.0, now - last) * rate);
    const auto reset = [&](double x) {
      return static_cast<int64_t>(now + std::ceil((capacity - x) / rate));
    };
    const auto units = [](double x) {
      return std::max<int64_t>(0, static_cast<int64_t>(std::floor(x)));
    };
    if (t >= cost) {
      tokens = t - cost;
      last = now;
      cold = false;
      return Decision{true, static_cast<int64_t>(capacity), units(tokens),
                      reset(tokens), 0};
    }
    return Decision{false, static_cast<int64_t>(capacity), units(t), reset(t),
                    static_cast<int64_t>(std::ceil((cost - t) / rate))};
  }
};

struct FixedWindow1x {
  double limit, window, start = -1, count = 0;
  Decision check(int64_t now_ms, double cost) {
    const double now = static_cast<double>(now_ms);
    const double s = std::floor(now / window) * window;
    const double c = s == start ? count : 0;
    const auto rem = [&](double x) {
      return std::max<int64_t>(0, static_cast<int64_t>(std::floor(limit - x)));
    };
    const auto l = static_cast<int64_t>(limit);
    if (c + cost <= limit) {
      start = s;
      count = c + cost;
      return Decision{true, l, rem(count), static_cast<int64_t>(s + window), 0};
    }
    return Decision{false, l, rem(c), static_cast<int64_t>(s + window),
                    static_cast<int64_t>(std::ceil(s + window - now))};
  }
};

// Ticks only grow under a forward clock, so a map stands in for the ring.
struct SlidingWindow1x {
  double limit, window, w;
  int64_t s;
  std::map<int64_t, double> ticks;
  Decision check(int64_t now_ms, double cost) {
    const double now = static_cast<double>(now_ms);
    const double cd = std::floor(now / w);
    const auto c = static_cast<int64_t>(cd);
    const double weight =
        std::clamp((w - std::max(0.0, now - cd * w)) / w, 0.0, 1.0);
    const auto at = [&](int64_t k) {
      auto it = ticks.find(k);
      return it == ticks.end() ? 0.0 : it->second;
    };
    double full = 0;
    for (int64_t k = c - s + 1; k <= c; ++k) full += at(k);
    const double oldest = at(c - s);
    const double estimate = full + oldest * weight;
    const auto reset = static_cast<int64_t>(std::ceil((cd + 1) * w + window));
    const auto l = static_cast<int64_t>(limit);
    const auto units = [](double x) {
      return std::max<int64_t>(0, static_cast<int64_t>(std::floor(x)));
    };
    // projected = estimate + cost, then limit - projected: the contract's
    // order (docs/semantics.md), which `limit - estimate - cost` is not in
    // floating point (it differed by one unit of remaining).
    const double projected = estimate + cost;
    if (projected <= limit) {
      ticks[c] += cost;
      return Decision{true, l, units(limit - projected), reset, 0};
    }
    const double d = projected - limit;
    const double r = (oldest > 0 && d <= oldest * weight)
                         ? std::ceil(d * w / oldest)
                         : std::ceil((cd + 1) * w - now);
    return Decision{false, l, units(limit - estimate), reset,
                    std::max<int64_t>(1, static_cast<int64_t>(r))};
  }
};

RC_GTEST_PROP(StaleNowProperty, ForwardClockDecisionsEqualThe1xFormulas, ()) {
  const int64_t limit = *rc::gen::inRange<int64_t>(1, 30);
  const int64_t buckets = *rc::gen::inRange<int64_t>(1, 8);
  const int64_t window = buckets * *rc::gen::inRange<int64_t>(1, 60);
  const double per_sec = *rc::gen::element(10.0, 250.0, 1000.0, 333.3);
  TokenBucket bucket = *TokenBucket::create({limit, per_sec});
  FixedWindow fixed = *FixedWindow::create({limit, window});
  SlidingWindow sliding = *SlidingWindow::create({limit, window, buckets});
  TokenBucket::State bs;
  FixedWindow::State fs;
  SlidingWindow::State ss;
  TokenBucket1x b1{static_cast<double>(limit), per_sec / 1000.0};
  FixedWindow1x f1{static_cast<double>(limit), static_cast<double>(window)};
  SlidingWindow1x s1{static_cast<double>(limit),
                     static_cast<double>(window),
                     static_cast<double>(window) / static_cast<double>(buckets),
                     buckets,
                     {}};
  int64_t now = kEpoch + *rc::gen::inRange<int64_t>(0, 1000);
  const int steps = *rc::gen::inRange(1, 300);
  bool off_by_a_ms = false;
  for (int i = 0; i < steps; ++i) {
    now += *rc::gen::inRange<int64_t>(0, window / limit + 3);
    const double cost = *rc::gen::element(1.0, 1.0, 2.0, 0.5, 3.0);
    // The token bucket's reset_at is no longer 1.x's closed form but the
    // first ms the bucket is full, which that form can miss by a ms
    // (docs/semantics.md, "Where this differs from ThrottleKit 1.x"): every
    // other field is 1.x's, and a different reset_at is 1 ms away.
    const TokenBucket::State before = bs;
    Decision got = bucket.check(bs, now, cost);
    const Decision want = b1.check(now, cost);
    if (got.reset_at_ms != want.reset_at_ms) {
      RC_ASSERT(std::abs(got.reset_at_ms - want.reset_at_ms) == 1);
      off_by_a_ms = true;
      // 1.x's instant is not the first full one: either not full yet, or
      // full already 1 ms before.
      const TokenBucket::State after = got.allowed ? bs : before;
      TokenBucket::State at = after;
      const double cap = static_cast<double>(limit);
      const bool full_at_1x = bucket.check(at, want.reset_at_ms, cap).allowed;
      RC_ASSERT(!full_at_1x || want.reset_at_ms > got.reset_at_ms);
      got.reset_at_ms = want.reset_at_ms;
    }
    RC_ASSERT(got == want);
    RC_ASSERT(fixed.check(fs, now, cost) == f1.check(now, cost));
    RC_ASSERT(sliding.check(ss, now, cost) == s1.check(now, cost));
  }
  RC_CLASSIFY(off_by_a_ms, "a 1.x token-bucket reset_at was off by a ms");
}

}  // namespace
}  // namespace stale_now_property_test
}  // namespace throttlekit
