// SlidingLog properties: it agrees field for field (check, peek, forecast,
// kth oldest, survivors, expiry and the stored runs) with a brute-force log
// that recounts the multiset of admitted units on every call
// (docs/semantics.md, "Sliding window log (exact)"), on timelines with
// backward clocks, fractional costs, costs above the limit and limits up to
// 2^53 - 1; it never admits more than `limit` units in any window of
// `window_ms`, and a denial never changes its state and its retry hint is
// exact. The contract every strategy shares is typed in
// strategy_contract_property_test.cc.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "support/test_time.h"
#include "throttlekit/strategy/sliding_log.h"

namespace throttlekit {
namespace sliding_log_property_test {
namespace {

using testing::kEpoch;

// The spec, written the slow way: the multiset of admitted unit timestamps,
// in arrival order, recounted and re-sorted on every call, pruned only by
// an allowed call. A call is decided at max(now, the newest stored unit)
// and stamps its units there; its retry is measured from its own `now`. An
// admission of `units` is stored as `units` copies of one timestamp (one entry
// with a multiplicity, so limits up to 2^53 - 1 stay cheap); nothing is merged
// or kept sorted.
class BruteForceLog {
 public:
  BruteForceLog(int64_t limit, int64_t window) : limit_(limit), w_(window) {}

  Decision check(int64_t now, double cost) {
    const auto units = static_cast<int64_t>(std::ceil(cost));
    const int64_t at = decided_at(now);
    const int64_t count = surviving_units(at);
    if (count + units > limit_) return deny(at, now, units);
    std::vector<Copies> kept;
    for (const Copies& c : stored_) {
      if (c.at > at - w_) kept.push_back(c);
    }
    kept.push_back(Copies{at, units});
    stored_ = kept;
    return Decision{true, limit_, std::max<int64_t>(0, limit_ - count - units),
                    oldest_or_now(at) + w_, 0};
  }

  Decision peek(int64_t now) const {
    const int64_t at = decided_at(now);
    const int64_t count = surviving_units(at);
    if (count + 1 > limit_) return deny(at, now, 1);
    return Decision{true, limit_, limit_ - count, oldest_or_now(at) + w_, 0};
  }

  Forecast forecast(int64_t now, double cost) const {
    const auto units = static_cast<int64_t>(std::ceil(cost));
    const int64_t at = decided_at(now);
    const int64_t count = surviving_units(at);
    const int64_t next =
        count + units <= limit_ ? now : now + retry(at, now, count, units);
    int64_t full = now;
    for (const Copies& c : stored_) {
      if (c.at > at - w_) full = std::max(full, c.at + w_);
    }
    return Forecast{std::max<int64_t>(0, limit_ - count), next, full};
  }

  int64_t surviving_units(int64_t now) const {
    int64_t n = 0;
    for (const Copies& c : stored_) {
      if (c.at > now - w_) n += c.units;
    }
    return n;
  }

  // The k-th oldest survivor, k clamped to [1, count]; `now` when none.
  int64_t kth_oldest(int64_t now, int64_t k) const {
    const std::vector<Copies> alive = sorted_survivors(now);
    const int64_t count = surviving_units(now);
    if (count == 0) return now;
    k = std::clamp<int64_t>(k, 1, count);
    for (const Copies& c : alive) {
      if (k <= c.units) return c.at;
      k -= c.units;
    }
    return alive.back().at;
  }

  // The newest stored (not necessarily surviving) unit + window.
  int64_t expires_at() const {
    if (stored_.empty()) return std::numeric_limits<int64_t>::min();
    int64_t newest = stored_.front().at;
    for (const Copies& c : stored_) newest = std::max(newest, c.at);
    return newest + w_;
  }

  // The stored multiset as (timestamp, multiplicity), ascending, one entry
  // per distinct timestamp.
  std::vector<SlidingLog::Run> runs() const {
    std::vector<Copies> all = stored_;
    std::stable_sort(all.begin(), all.end(), by_time);
    std::vector<SlidingLog::Run> out;
    for (const Copies& c : all) {
      if (!out.empty() && out.back().at_ms == c.at) {
        out.back().count += c.units;
      } else {
        out.push_back(SlidingLog::Run{c.at, c.units});
      }
    }
    return out;
  }

 private:
  struct Copies {
    int64_t at;
    int64_t units;
  };
  static bool by_time(const Copies& a, const Copies& b) { return a.at < b.at; }

  std::vector<Copies> sorted_survivors(int64_t now) const {
    std::vector<Copies> alive;
    for (const Copies& c : stored_) {
      if (c.at > now - w_) alive.push_back(c);
    }
    std::stable_sort(alive.begin(), alive.end(), by_time);
    return alive;
  }

  int64_t oldest_or_now(int64_t now) const {
    int64_t oldest = now;
    bool any = false;
    for (const Copies& c : stored_) {
      if (c.at > now - w_ && (!any || c.at < oldest)) oldest = c.at;
      any = any || c.at > now - w_;
    }
    return oldest;
  }

  int64_t decided_at(int64_t now) const {
    int64_t at = now;
    for (const Copies& c : stored_) at = std::max(at, c.at);
    return at;
  }

  // Until the k-th oldest unit surviving at `at` expires, from `now`.
  int64_t retry(int64_t at, int64_t now, int64_t count, int64_t units) const {
    if (count == 0) return w_;
    const int64_t k = std::clamp<int64_t>(count + units - limit_, 1, count);
    return std::max<int64_t>(1, kth_oldest(at, k) + w_ - now);
  }

  Decision deny(int64_t at, int64_t now, int64_t units) const {
    const int64_t count = surviving_units(at);
    return Decision{false, limit_, std::max<int64_t>(0, limit_ - count),
                    oldest_or_now(at) + w_, retry(at, now, count, units)};
  }

  int64_t limit_;
  int64_t w_;
  std::vector<Copies> stored_;
};

// A cost for a log of `limit`: small, fractional, near or above the limit.
double any_cost(int64_t limit) {
  const double l = static_cast<double>(limit);
  const double max = static_cast<double>(kMaxSafeInteger);
  return std::min(
      max, *rc::gen::oneOf(
               rc::gen::element(1.0, 1.0, 2.0, 0.5, 3.7, 1e-9, 7.0, 40.0),
               rc::gen::element(l, l + 1, std::floor(l / 3) + 0.5, l / 2 + 1),
               rc::gen::map(rc::gen::inRange<int64_t>(1, limit + 1),
                            [](int64_t c) { return static_cast<double>(c); })));
}

RC_GTEST_PROP(SlidingLogProperty, MatchesBruteForceRecountEvenWithBackwardClock,
              ()) {
  const int64_t limit = *rc::gen::oneOf(
      rc::gen::inRange<int64_t>(1, 30), rc::gen::inRange<int64_t>(1, 1000),
      rc::gen::element<int64_t>(1'000'000'000'000, kMaxSafeInteger));
  const int64_t window = *rc::gen::oneOf(
      rc::gen::inRange<int64_t>(1, 20), rc::gen::inRange<int64_t>(1, 2000),
      rc::gen::inRange<int64_t>(1, 1'000'000'000'000));
  SlidingLog log = *SlidingLog::create({limit, window});
  BruteForceLog ref(limit, window);
  SlidingLog::State s;
  int64_t now = kEpoch;
  const int steps = *rc::gen::inRange(1, 300);
  for (int i = 0; i < steps; ++i) {
    // Steps that land on the expiry boundaries often, and back jumps, some
    // by more than a window.
    now += *rc::gen::oneOf(
        rc::gen::inRange<int64_t>(-window / 2 - 1, window / 3 + 2),
        rc::gen::inRange<int64_t>(0, 4),
        rc::gen::element<int64_t>(0, 1, -1, window - 1, window, window + 1,
                                  -window, -window - 1),
        rc::gen::inRange<int64_t>(-3 * window, 3 * window));
    const double cost = any_cost(limit);
    const int64_t k = *rc::gen::oneOf(
        rc::gen::inRange<int64_t>(-2, 40),
        rc::gen::inRange<int64_t>(1, limit + 1),
        rc::gen::element<int64_t>(int64_t{limit}, limit + 1, INT64_MAX));
    RC_ASSERT(log.peek(s, now) == ref.peek(now));
    RC_ASSERT(log.forecast(s, now, cost) == ref.forecast(now, cost));
    RC_ASSERT(log.kth_oldest_ms(s, now, k) == ref.kth_oldest(now, k));
    RC_ASSERT(log.surviving_units(s, now) == ref.surviving_units(now));
    const Decision got = log.check(s, now, cost);
    const Decision want = ref.check(now, cost);
    RC_ASSERT(got == want);
    RC_ASSERT(s.runs() == ref.runs());
    RC_ASSERT(log.expires_at_ms(s) == ref.expires_at());
  }
}

// Many live runs (one per ms) so that pruning erases long prefixes, with
// occasional stale nows.
RC_GTEST_PROP(SlidingLogProperty, MatchesBruteForceOnLongLogs, ()) {
  const int64_t limit = *rc::gen::element<int64_t>(500, 1'000'000'000'000);
  const int64_t window = *rc::gen::inRange<int64_t>(50, 400);
  SlidingLog log = *SlidingLog::create({limit, window});
  BruteForceLog ref(limit, window);
  SlidingLog::State s;
  int64_t now = kEpoch;
  const int steps = *rc::gen::inRange(200, 700);
  for (int i = 0; i < steps; ++i) {
    now += *rc::gen::weightedOneOf<int64_t>(
        {{40, rc::gen::just<int64_t>(1)},
         {4, rc::gen::inRange<int64_t>(2, window / 3)},
         {2, rc::gen::inRange<int64_t>(-window / 2, 0)},
         {1, rc::gen::inRange<int64_t>(window, 2 * window)}});
    const double cost = *rc::gen::element(1.0, 1.0, 3.0, 0.5, 120.0);
    RC_ASSERT(log.check(s, now, cost) == ref.check(now, cost));
    if (i % 16 == 0) {
      const int64_t k = *rc::gen::inRange<int64_t>(1, 2000);
      RC_ASSERT(log.kth_oldest_ms(s, now, k) == ref.kth_oldest(now, k));
      RC_ASSERT(log.forecast(s, now, 400) == ref.forecast(now, 400));
      RC_ASSERT(s.runs() == ref.runs());
    }
  }
  RC_ASSERT(s.runs() == ref.runs());
}

RC_GTEST_PROP(SlidingLogProperty, NeverMoreThanLimitUnitsInAnyWindow, ()) {
  const int64_t limit = *rc::gen::inRange<int64_t>(1, 40);
  const int64_t window = *rc::gen::inRange<int64_t>(1, 3000);
  SlidingLog log = *SlidingLog::create({limit, window});
  SlidingLog::State s;
  struct Admit {
    int64_t at;
    int64_t units;
  };
  std::vector<Admit> admitted;
  int64_t now = kEpoch;
  const int steps = *rc::gen::inRange(1, 400);
  for (int i = 0; i < steps; ++i) {
    now += *rc::gen::inRange<int64_t>(0, window / 4 + 2);
    const double cost = *rc::gen::element(1.0, 1.0, 2.0, 0.3, 5.0);
    if (log.check(s, now, cost).allowed) {
      admitted.push_back({now, static_cast<int64_t>(std::ceil(cost))});
    }
  }
  // Every window (t - window_ms, t] ending at an admission.
  for (const Admit& end : admitted) {
    int64_t units = 0;
    for (const Admit& a : admitted) {
      if (a.at > end.at - window && a.at <= end.at) units += a.units;
    }
    RC_ASSERT(units <= limit);
  }
}

// Stays here although strategy_contract_property_test.cc types the denial
// and peek parts for every strategy: an exact retry hint (the request passes
// at now + retry and not a ms earlier) is the sliding log's own promise;
// elsewhere retry hints are only hints.
RC_GTEST_PROP(SlidingLogProperty, DenialNeverChangesStateAndRetryIsExact, ()) {
  const int64_t limit = *rc::gen::inRange<int64_t>(1, 20);
  const int64_t window = *rc::gen::inRange<int64_t>(1, 1000);
  SlidingLog log = *SlidingLog::create({limit, window});
  SlidingLog::State s;
  int64_t now = kEpoch;
  for (int i = 0; i < 200; ++i) {
    now += *rc::gen::inRange<int64_t>(-20, 100);
    const double cost = *rc::gen::element(1.0, 2.5, 9.0, 100.0);
    const SlidingLog::State before = s;
    const Decision peeked = log.peek(s, now);
    RC_ASSERT(s == before);
    const Decision d = log.check(s, now, cost);
    RC_ASSERT(d.remaining >= 0);
    // peek is the cost-1 question: same verdict; same decision when denied.
    if (cost == 1.0) {
      RC_ASSERT(peeked.allowed == d.allowed);
      if (!d.allowed) RC_ASSERT(peeked == d);
    }
    if (!d.allowed) {
      RC_ASSERT(s == before);
      RC_ASSERT(d.retry_after_ms >= 1);
      // A cost that fits the limit passes exactly at now + retry (with
      // nothing admitted in between) and not one ms earlier.
      if (static_cast<int64_t>(std::ceil(cost)) <= limit) {
        SlidingLog::State later = s;
        RC_ASSERT(log.check(later, now + d.retry_after_ms, cost).allowed);
        SlidingLog::State earlier = s;
        if (d.retry_after_ms > 1) {
          RC_ASSERT(
              !log.check(earlier, now + d.retry_after_ms - 1, cost).allowed);
        }
      }
    } else {
      RC_ASSERT(d.retry_after_ms == 0);
      RC_ASSERT(log.surviving_units(s, now) <= limit);
    }
  }
}

}  // namespace
}  // namespace sliding_log_property_test
}  // namespace throttlekit
