#include "throttlekit/strategy/leaky_bucket.h"

#include <gtest/gtest.h>

#include <limits>
#include <string>

#include "support/created.h"
#include "support/test_time.h"

namespace throttlekit {
namespace leaky_bucket_test {
namespace {

using testing::kEpoch;

LeakyBucket make(double rate_per_sec, int64_t max_queue_ms) {
  return testing::created<LeakyBucket>({rate_per_sec, max_queue_ms});
}

TEST(LeakyBucket, SpacesDeparturesByTAndRejectsBeyondTheQueue) {
  LeakyBucket b = make(10, 250);  // T = 100 ms
  EXPECT_EQ(b.interval_ms(), 100.0);
  LeakyBucket::State s;
  EXPECT_EQ(b.reserve(s, kEpoch, 1), (Reservation{true, 0}));
  EXPECT_EQ(b.reserve(s, kEpoch, 1), (Reservation{true, 100}));
  EXPECT_EQ(b.reserve(s, kEpoch, 1), (Reservation{true, 200}));
  EXPECT_EQ(s.next_departure, static_cast<double>(kEpoch + 300));
  const LeakyBucket::State before = s;
  // delay 300 > 250: rejected, retry after ceil(300 - 250).
  EXPECT_EQ(b.reserve(s, kEpoch, 1), (Reservation{false, 50}));
  EXPECT_EQ(s, before);
  EXPECT_EQ(b.reserve(s, kEpoch + 49, 1), (Reservation{false, 1}));
  EXPECT_EQ(b.reserve(s, kEpoch + 50, 1), (Reservation{true, 250}));
}

TEST(LeakyBucket, DelayEqualToMaxQueueIsAccepted) {
  LeakyBucket b = make(10, 100);
  LeakyBucket::State s;
  ASSERT_TRUE(b.reserve(s, kEpoch, 1).accepted);
  EXPECT_EQ(b.reserve(s, kEpoch, 1), (Reservation{true, 100}));
  EXPECT_EQ(b.reserve(s, kEpoch, 1), (Reservation{false, 100}));
}

TEST(LeakyBucket, CostScalesTheSpacing) {
  LeakyBucket b = make(10, 10'000);
  LeakyBucket::State s;
  EXPECT_EQ(b.reserve(s, kEpoch, 5), (Reservation{true, 0}));
  EXPECT_EQ(b.reserve(s, kEpoch + 20, 0.5), (Reservation{true, 480}));
  EXPECT_EQ(s.next_departure, static_cast<double>(kEpoch + 550));
}

TEST(LeakyBucket, AnyCostIsAcceptedOnAnIdleBucket) {
  LeakyBucket b = make(1, 0);  // T = 1000, no queue at all
  LeakyBucket::State s;
  EXPECT_EQ(b.reserve(s, kEpoch, 1e6), (Reservation{true, 0}));
  EXPECT_EQ(b.reserve(s, kEpoch, 1), (Reservation{false, 1'000'000'000}));
}

TEST(LeakyBucket, FractionalIntervalRoundsDelaysUp) {
  LeakyBucket b = make(3, 1000);  // T = 333.33..
  LeakyBucket::State s;
  ASSERT_TRUE(b.reserve(s, kEpoch, 1).accepted);
  EXPECT_EQ(b.reserve(s, kEpoch, 1), (Reservation{true, 334}));
  EXPECT_EQ(b.reserve(s, kEpoch, 1), (Reservation{true, 667}));
  EXPECT_EQ(b.reserve(s, kEpoch, 1), (Reservation{true, 1000}));
  // delay 1333.33 > 1000: ceil(333.33) = 334.
  EXPECT_EQ(b.reserve(s, kEpoch, 1), (Reservation{false, 334}));
}

TEST(LeakyBucket, IdleBucketStartsFromNow) {
  LeakyBucket b = make(10, 0);
  LeakyBucket::State s;
  ASSERT_TRUE(b.reserve(s, kEpoch, 1).accepted);
  EXPECT_EQ(b.reserve(s, kEpoch + 5000, 1), (Reservation{true, 0}));
  EXPECT_EQ(s.next_departure, static_cast<double>(kEpoch + 5100));
}

TEST(LeakyBucket, BackwardClockLengthensTheDelay) {
  LeakyBucket b = make(10, 1000);
  LeakyBucket::State s;
  ASSERT_TRUE(b.reserve(s, kEpoch, 2).accepted);  // next departure +200
  EXPECT_EQ(b.reserve(s, kEpoch - 300, 1), (Reservation{true, 500}));
  EXPECT_EQ(b.reserve(s, kEpoch - 1000, 1), (Reservation{false, 300}));
}

TEST(LeakyBucket, PeekAndQueueDelayWriteNothing) {
  LeakyBucket b = make(10, 150);
  LeakyBucket::State s;
  EXPECT_EQ(b.peek(s, kEpoch), (Reservation{true, 0}));
  EXPECT_EQ(b.queue_delay_ms(s, kEpoch), 0);
  ASSERT_TRUE(b.reserve(s, kEpoch, 1).accepted);
  ASSERT_TRUE(b.reserve(s, kEpoch, 1).accepted);
  const LeakyBucket::State before = s;
  EXPECT_EQ(b.peek(s, kEpoch), (Reservation{false, 50}));
  EXPECT_EQ(b.peek(s, kEpoch + 60), (Reservation{true, 140}));
  EXPECT_EQ(b.queue_delay_ms(s, kEpoch + 60), 140);
  EXPECT_EQ(s, before);
}

TEST(LeakyBucket, ExpiryIsTheNextDeparture) {
  LeakyBucket b = make(3, 1000);
  LeakyBucket::State s;
  EXPECT_EQ(b.expires_at_ms(s), INT64_MIN);
  ASSERT_TRUE(b.reserve(s, kEpoch, 1).accepted);
  const int64_t exp = b.expires_at_ms(s);
  EXPECT_EQ(exp, kEpoch + 334);  // ceil(333.33..)
  LeakyBucket::State warm = s;
  LeakyBucket::State cold;
  EXPECT_EQ(b.reserve(warm, exp, 2), b.reserve(cold, exp, 2));
  EXPECT_EQ(warm, cold);
  EXPECT_EQ(b.queue_delay_ms(s, exp - 1), 1);
}

TEST(LeakyBucket, RejectsBadOptionsNamingTheField) {
  const auto expect_bad = testing::expect_refused<LeakyBucket>;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  expect_bad({0, 10}, "leaky_bucket.rate_per_sec must be finite, > 0");
  expect_bad({-1, 10}, "leaky_bucket.rate_per_sec");
  expect_bad({nan, 10}, "leaky_bucket.rate_per_sec");
  expect_bad({inf, 10}, "leaky_bucket.rate_per_sec");
  expect_bad({1e16, 10}, "leaky_bucket.rate_per_sec");
  expect_bad({10, -1}, "leaky_bucket.max_queue_ms must be in [0, ");
  expect_bad({10, kMaxSafeInteger + 1}, "leaky_bucket.max_queue_ms");
  EXPECT_TRUE(LeakyBucket::create({0.001, 0}).ok());
  EXPECT_TRUE(LeakyBucket::create({9007199254740991.0, kMaxSafeInteger}).ok());
}

}  // namespace
}  // namespace leaky_bucket_test
}  // namespace throttlekit
