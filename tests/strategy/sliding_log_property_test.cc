// SlidingLog properties: it agrees decision for decision with a brute-force
// log that stores every unit (SEMANTICS.md, "Sliding window log (exact)"),
// never admits more than `limit` units in any window of `window_ms`, and a
// denial never changes its state.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "throttlekit/strategy/sliding_log.h"

namespace throttlekit {
namespace {

constexpr int64_t kEpoch = 1'700'000'000'000;

// The spec, written the slow way: one timestamp per unit, recounted on every
// call, pruned only by an allowed call.
class BruteForceLog {
 public:
  BruteForceLog(int64_t limit, int64_t window) : limit_(limit), w_(window) {}

  Decision check(int64_t now, double cost) {
    std::vector<int64_t> alive;
    for (int64_t t : units_) {
      if (t > now - w_) alive.push_back(t);
    }
    const auto count = static_cast<int64_t>(alive.size());
    const auto units = static_cast<int64_t>(std::ceil(cost));
    if (count + units <= limit_) {
      for (int64_t i = 0; i < units; ++i) alive.push_back(now);
      std::sort(alive.begin(), alive.end());
      units_ = alive;
      return Decision{true, limit_,
                      std::max<int64_t>(0, limit_ - count - units),
                      units_.front() + w_, 0};
    }
    int64_t retry = w_;
    if (count > 0) {
      const int64_t k = std::clamp<int64_t>(count + units - limit_, 1, count);
      retry =
          std::max<int64_t>(1, alive[static_cast<size_t>(k - 1)] + w_ - now);
    }
    return Decision{false, limit_, std::max<int64_t>(0, limit_ - count),
                    (alive.empty() ? now : alive.front()) + w_, retry};
  }

 private:
  int64_t limit_;
  int64_t w_;
  std::vector<int64_t> units_;
};

RC_GTEST_PROP(SlidingLogProperty, MatchesBruteForceRecountEvenWithBackwardClock,
              ()) {
  const int64_t limit = *rc::gen::inRange<int64_t>(1, 30);
  const int64_t window = *rc::gen::oneOf(rc::gen::inRange<int64_t>(1, 20),
                                         rc::gen::inRange<int64_t>(1, 2000));
  SlidingLog log = *SlidingLog::create({limit, window});
  BruteForceLog ref(limit, window);
  SlidingLog::State s;
  int64_t now = kEpoch;
  const int steps = *rc::gen::inRange(1, 300);
  for (int i = 0; i < steps; ++i) {
    // Steps that land on the expiry boundaries often, and back jumps.
    now += *rc::gen::oneOf(
        rc::gen::inRange<int64_t>(-window / 2 - 1, window / 3 + 2),
        rc::gen::element<int64_t>(0, 1, -1, window - 1, window, window + 1,
                                  -window));
    const double cost = *rc::gen::element(1.0, 1.0, 2.0, 0.5, 3.7, 7.0, 40.0);
    const Decision got = log.check(s, now, cost);
    const Decision want = ref.check(now, cost);
    RC_ASSERT(got == want);
  }
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
}  // namespace throttlekit
