// LeakyBucket properties: accepted requests depart no closer than T * cost
// after the previous departure, no accepted wait exceeds max_queue_ms, a
// rejection writes nothing, and its delay is exactly the wait until the
// request would be accepted (docs/semantics.md, "Leaky bucket").
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <cmath>

#include "support/test_time.h"
#include "throttlekit/strategy/leaky_bucket.h"

namespace throttlekit {
namespace leaky_bucket_property_test {
namespace {

using testing::kEpoch;

RC_GTEST_PROP(LeakyBucketProperty, DeparturesAreSpacedByTTimesCost, ()) {
  const double rate = *rc::gen::element(0.5, 1.0, 3.0, 7.0, 10.0, 250.0);
  const int64_t max_queue = *rc::gen::inRange<int64_t>(0, 5000);
  const LeakyBucket b = *LeakyBucket::create({rate, max_queue});
  const double t = b.interval_ms();
  const bool backward = *rc::gen::arbitrary<bool>();
  LeakyBucket::State s;
  bool any = false;
  int64_t prev_departure = 0;  // now + delay_ms of the previous acceptance
  double prev_cost = 0;
  int64_t latest_now = 0;
  int64_t now = kEpoch;
  const int steps = *rc::gen::inRange(1, 300);
  for (int i = 0; i < steps; ++i) {
    now += *rc::gen::inRange<int64_t>(backward ? -200 : 0, 400);
    const double cost = *rc::gen::element(1.0, 1.0, 2.0, 0.5, 4.0);
    const LeakyBucket::State before = s;
    const Reservation r = b.reserve(s, now, cost);
    RC_ASSERT(r.delay_ms >= 0);
    if (!r.accepted) {
      RC_ASSERT(s == before);
      RC_ASSERT(r.delay_ms >= 1);
      // Exactly the wait until it fits the queue.
      LeakyBucket::State later = s;
      RC_ASSERT(b.reserve(later, now + r.delay_ms, cost).accepted);
      if (r.delay_ms > 1) {
        LeakyBucket::State earlier = s;
        RC_ASSERT(!b.reserve(earlier, now + r.delay_ms - 1, cost).accepted);
      }
      continue;
    }
    RC_ASSERT(r.delay_ms <= max_queue);
    const int64_t departure = now + r.delay_ms;
    if (any) {
      // The exact departures are spaced by T * cost; the reported ones are
      // ceilings of them, so they may lose up to 1 ms.
      RC_ASSERT(static_cast<double>(departure) >=
                static_cast<double>(prev_departure) + t * prev_cost - 1.0);
      if (!backward && now >= latest_now) {
        RC_ASSERT(departure >= prev_departure);
      }
    }
    // The state is the departure slot after this one.
    RC_ASSERT(std::abs(s.next_departure - (std::max(before.next_departure,
                                                    static_cast<double>(now)) +
                                           t * cost)) == 0.0);
    any = true;
    prev_departure = departure;
    prev_cost = cost;
    latest_now = std::max(latest_now, now);
  }
}

RC_GTEST_PROP(LeakyBucketProperty, ThroughputNeverExceedsRate, ()) {
  // Over a busy stretch, units departing by the last departure are at most
  // one request ahead of the rate: (sum(cost) - last cost) * T <= span
  // (+1 ms for the ceilings, +0.5 for accumulated rounding).
  const double rate = *rc::gen::element(1.0, 4.0, 10.0, 100.0);
  const LeakyBucket b = *LeakyBucket::create({rate, 2000});
  const double t = b.interval_ms();
  LeakyBucket::State s;
  double units = 0;
  double last_cost = 0;
  int64_t first_departure = -1;
  int64_t last_departure = 0;
  int64_t now = kEpoch;
  for (int i = 0; i < 300; ++i) {
    now += *rc::gen::inRange<int64_t>(0, 50);
    const double cost = *rc::gen::element(1.0, 2.0, 3.0);
    const Reservation r = b.reserve(s, now, cost);
    if (!r.accepted) continue;
    if (first_departure < 0) first_departure = now + r.delay_ms;
    last_departure = now + r.delay_ms;
    units += cost;
    last_cost = cost;
  }
  if (first_departure < 0) return;
  RC_ASSERT((units - last_cost) * t <=
            static_cast<double>(last_departure - first_departure) + 1.5);
}

}  // namespace
}  // namespace leaky_bucket_property_test
}  // namespace throttlekit
