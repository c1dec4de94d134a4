// SlidingLogRing as properties: on single-threaded timelines whose `now`
// never decreases, every decision equals the sequential SlidingLog strategy
// (cost 1) field for field, for `try_acquire` and `peek` alike; on timelines
// that jump backwards it follows its documented rule (decide at `now`,
// record at max(now, newest)) and never admits more than `limit` in any
// window of the callers' clock.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "throttlekit/store/sliding_log_ring.h"
#include "throttlekit/strategy/sliding_log.h"

namespace throttlekit {
namespace sliding_log_ring_property_test {
namespace {

constexpr int64_t kEpoch = 1'700'000'000'000;

// A step of `now`: mostly small, sometimes a whole window or more, so that
// timelines cross the limit, sit on it and expire at equality.
int64_t step(int64_t window) {
  return *rc::gen::oneOf(
      rc::gen::just(int64_t{0}), rc::gen::inRange<int64_t>(0, 4),
      rc::gen::inRange<int64_t>(0, window / 4 + 2), rc::gen::just(window),
      rc::gen::inRange<int64_t>(window, 3 * window + 2));
}

RC_GTEST_PROP(SlidingLogRingProperty, EqualsSlidingLogWhenNowNeverDecreases,
              ()) {
  // Small limits wrap the ring many times; large ones exercise the search
  // for the oldest survivor over many entries.
  const int64_t limit = *rc::gen::oneOf(rc::gen::inRange<int64_t>(1, 24),
                                        rc::gen::inRange<int64_t>(24, 300));
  const int64_t window = *rc::gen::inRange<int64_t>(1, 3000);
  const SlidingLog log = *SlidingLog::create({limit, window});
  SlidingLog::State state;
  auto ring = *SlidingLogRing::create({limit, window});
  int64_t now = kEpoch + *rc::gen::inRange<int64_t>(0, 1'000'000);
  const int steps = *rc::gen::inRange(1, 800);
  for (int i = 0; i < steps; ++i) {
    now += step(window);
    if (*rc::gen::inRange(0, 4) == 0) {
      RC_ASSERT(ring->peek(now) == log.peek(state, now));
    }
    const Decision want = log.check(state, now, 1);
    const Decision got = ring->try_acquire(now);
    RC_ASSERT(got == want);
  }
}

// The ring's documented rule, written the slow and obvious way: the whole
// history of recorded timestamps, a linear count of the last `limit`.
struct RingModel {
  int64_t limit;
  int64_t window;
  std::vector<int64_t> recorded;

  Decision check(int64_t now, bool consume) {
    const int64_t cutoff = now - window;
    const int64_t h = static_cast<int64_t>(recorded.size());
    if (h >= limit && recorded[h - limit] > cutoff) {
      const int64_t oldest = recorded[h - limit];
      return Decision{false, limit, 0, oldest + window,
                      std::max<int64_t>(1, oldest + window - now)};
    }
    const int64_t newest = h == 0 ? now : recorded[h - 1];
    const int64_t at = std::max(now, newest);
    int64_t count = 0;
    int64_t oldest = consume ? at : now;
    for (int64_t j = std::max<int64_t>(0, h - limit + 1); j < h; ++j) {
      if (recorded[j] > cutoff) {
        if (count == 0) oldest = recorded[j];
        ++count;
      }
    }
    if (!consume)
      return Decision{true, limit, limit - count, oldest + window, 0};
    recorded.push_back(at);
    return Decision{true, limit, limit - count - 1, oldest + window, 0};
  }
};

RC_GTEST_PROP(SlidingLogRingProperty, BackwardJumpsFollowTheDocumentedRule,
              ()) {
  const int64_t limit = *rc::gen::inRange<int64_t>(1, 16);
  const int64_t window = *rc::gen::inRange<int64_t>(1, 2000);
  auto ring = *SlidingLogRing::create({limit, window});
  RingModel model{limit, window, {}};
  std::vector<int64_t> admitted_at;  // the callers' nows
  int64_t now = kEpoch;
  const int steps = *rc::gen::inRange(1, 400);
  for (int i = 0; i < steps; ++i) {
    now += step(window) - *rc::gen::inRange<int64_t>(0, 2 * window + 2);
    if (*rc::gen::inRange(0, 4) == 0) {
      RC_ASSERT(ring->peek(now) == model.check(now, false));
    }
    const Decision got = ring->try_acquire(now);
    RC_ASSERT(got == model.check(now, true));
    RC_ASSERT(got.remaining >= 0 && got.remaining < limit + 1);
    RC_ASSERT(got.allowed == (got.retry_after_ms == 0));
    if (got.allowed) admitted_at.push_back(now);
  }
  // Never looser than the callers' clock: any limit + 1 admissions span at
  // least a window, so no half-open window holds more than `limit`.
  std::sort(admitted_at.begin(), admitted_at.end());
  for (size_t i = 0; i + static_cast<size_t>(limit) < admitted_at.size(); ++i) {
    RC_ASSERT(admitted_at[i + static_cast<size_t>(limit)] - admitted_at[i] >=
              window);
  }
  RC_ASSERT(ring->admissions() == static_cast<int64_t>(admitted_at.size()));
}

}  // namespace
}  // namespace sliding_log_ring_property_test
}  // namespace throttlekit
