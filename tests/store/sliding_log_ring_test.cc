// Unit tests of SlidingLogRing: boundaries, exact retry-after, expiry at
// equality, a clock that goes backwards, bad options.
#include "throttlekit/store/sliding_log_ring.h"

#include <gtest/gtest.h>

#include <memory>

#include "throttlekit/core/clock.h"
#include "throttlekit/strategy/sliding_log.h"

namespace throttlekit {
namespace sliding_log_ring_test {
namespace {

constexpr int64_t kEpoch = 1'700'000'000'000;  // large epochs, as in prod

std::unique_ptr<SlidingLogRing> make(int64_t limit, int64_t window_ms) {
  auto r = SlidingLogRing::create({limit, window_ms});
  EXPECT_TRUE(r.ok()) << r.status();
  return *std::move(r);
}

TEST(SlidingLogRing, AdmitsExactlyLimitAtOneInstantThenDenies) {
  auto ring = make(3, 1000);
  for (int i = 0; i < 3; ++i) {
    const Decision d = ring->try_acquire(kEpoch);
    ASSERT_TRUE(d.allowed) << i;
    EXPECT_EQ(d, (Decision{true, 3, 2 - i, kEpoch + 1000, 0}));
  }
  const Decision d = ring->try_acquire(kEpoch);
  EXPECT_EQ(d, (Decision{false, 3, 0, kEpoch + 1000, 1000}));
  // A denial writes nothing: the same answer again, and no admission.
  EXPECT_EQ(ring->try_acquire(kEpoch), d);
  EXPECT_EQ(ring->admissions(), 3);
}

TEST(SlidingLogRing, RetryAfterIsTheInstantTheOldestExpires) {
  auto ring = make(3, 1000);
  ASSERT_TRUE(ring->try_acquire(kEpoch).allowed);
  ASSERT_TRUE(ring->try_acquire(kEpoch + 100).allowed);
  const Decision third = ring->try_acquire(kEpoch + 200);
  EXPECT_EQ(third, (Decision{true, 3, 0, kEpoch + 1000, 0}));

  EXPECT_EQ(ring->try_acquire(kEpoch + 300),
            (Decision{false, 3, 0, kEpoch + 1000, 700}));
  EXPECT_EQ(ring->try_acquire(kEpoch + 999),
            (Decision{false, 3, 0, kEpoch + 1000, 1}));
  // Retrying exactly after retry_after_ms admits; the survivors are the
  // entries at +100 and +200, so the oldest is +100.
  EXPECT_EQ(ring->try_acquire(kEpoch + 1000),
            (Decision{true, 3, 0, kEpoch + 1100, 0}));
  EXPECT_EQ(ring->try_acquire(kEpoch + 1000),
            (Decision{false, 3, 0, kEpoch + 1100, 100}));
}

TEST(SlidingLogRing, EntryExpiresAtExactlyWindowLater) {
  auto ring = make(1, 500);
  ASSERT_TRUE(ring->try_acquire(kEpoch).allowed);
  // Half-open: the entry at t survives at t + window - 1 ...
  EXPECT_EQ(ring->try_acquire(kEpoch + 499),
            (Decision{false, 1, 0, kEpoch + 500, 1}));
  // ... and is expired at t + window (ts <= now - window).
  EXPECT_EQ(ring->try_acquire(kEpoch + 500),
            (Decision{true, 1, 0, kEpoch + 1000, 0}));
}

TEST(SlidingLogRing, RemainingCountsOnlySurvivors) {
  auto ring = make(4, 1000);
  ASSERT_TRUE(ring->try_acquire(kEpoch).allowed);
  ASSERT_TRUE(ring->try_acquire(kEpoch + 10).allowed);
  ASSERT_TRUE(ring->try_acquire(kEpoch + 20).allowed);
  // At +1010 the entries at +0 and +10 are expired, +20 survives.
  EXPECT_EQ(ring->try_acquire(kEpoch + 1010),
            (Decision{true, 4, 2, kEpoch + 1020, 0}));
  // Everything expired: the new entry is the oldest.
  EXPECT_EQ(ring->try_acquire(kEpoch + 5000),
            (Decision{true, 4, 3, kEpoch + 6000, 0}));
}

TEST(SlidingLogRing, AgreesWithSlidingLogOnAFixedScript) {
  const SlidingLog log = *SlidingLog::create({5, 300});
  SlidingLog::State state;
  auto ring = make(5, 300);
  int64_t now = kEpoch;
  for (int i = 0; i < 400; ++i) {
    now += (i * 7919) % 97;  // deterministic, uneven steps
    EXPECT_EQ(ring->peek(now), log.peek(state, now)) << i;
    EXPECT_EQ(ring->try_acquire(now), log.check(state, now, 1)) << i;
  }
}

TEST(SlidingLogRing, PeekConsumesNothing) {
  auto ring = make(2, 1000);
  EXPECT_EQ(ring->peek(kEpoch), (Decision{true, 2, 2, kEpoch + 1000, 0}));
  ASSERT_TRUE(ring->try_acquire(kEpoch).allowed);
  EXPECT_EQ(ring->peek(kEpoch + 5), (Decision{true, 2, 1, kEpoch + 1000, 0}));
  EXPECT_EQ(ring->peek(kEpoch + 5), (Decision{true, 2, 1, kEpoch + 1000, 0}));
  ASSERT_TRUE(ring->try_acquire(kEpoch + 5).allowed);
  EXPECT_EQ(ring->peek(kEpoch + 6),
            (Decision{false, 2, 0, kEpoch + 1000, 994}));
  EXPECT_EQ(ring->admissions(), 2);
}

TEST(SlidingLogRing, ClockBehindByMoreThanAWindowIsDeniedWithExactRetry) {
  auto ring = make(2, 1000);
  ASSERT_TRUE(ring->try_acquire(kEpoch + 10'000).allowed);
  ASSERT_TRUE(ring->try_acquire(kEpoch + 10'000).allowed);
  // Jump back ten seconds: both entries are in the future, so survivors.
  EXPECT_EQ(ring->try_acquire(kEpoch),
            (Decision{false, 2, 0, kEpoch + 11'000, 11'000}));
  EXPECT_EQ(ring->try_acquire(kEpoch + 11'000).allowed, true);
}

TEST(SlidingLogRing, BackwardNowIsRecordedAtTheNewestAdmission) {
  auto ring = make(2, 1000);
  ASSERT_TRUE(ring->try_acquire(kEpoch + 500).allowed);
  // Behind the newest admission: decided at kEpoch (the entry at +500
  // survives, one slot free) and recorded at +500, so both entries expire
  // at +1500.
  EXPECT_EQ(ring->try_acquire(kEpoch),
            (Decision{true, 2, 0, kEpoch + 1500, 0}));
  // SlidingLog would have stored the second unit at kEpoch and admit here;
  // the ring is stricter and says exactly when it will admit.
  EXPECT_EQ(ring->try_acquire(kEpoch + 1000),
            (Decision{false, 2, 0, kEpoch + 1500, 500}));
  EXPECT_EQ(ring->try_acquire(kEpoch + 1499).retry_after_ms, 1);
  EXPECT_EQ(ring->try_acquire(kEpoch + 1500),
            (Decision{true, 2, 1, kEpoch + 2500, 0}));
  EXPECT_EQ(ring->try_acquire(kEpoch + 1500),
            (Decision{true, 2, 0, kEpoch + 2500, 0}));
}

TEST(SlidingLogRing, RecordsStayOrderedAfterABackwardNow) {
  auto ring = make(3, 1000);
  ASSERT_TRUE(ring->try_acquire(kEpoch + 500).allowed);
  ASSERT_TRUE(ring->try_acquire(kEpoch).allowed);  // recorded at +500
  // At +1200 both records (+500, +500) survive: one slot left after this
  // one. (SlidingLog, holding +0 and +500, would count one survivor.)
  EXPECT_EQ(ring->try_acquire(kEpoch + 1200),
            (Decision{true, 3, 0, kEpoch + 1500, 0}));
  EXPECT_EQ(ring->peek(kEpoch + 1200),
            (Decision{false, 3, 0, kEpoch + 1500, 300}));
}

TEST(SlidingLogRing, NowOutsideTheDomainIsClamped) {
  auto ring = make(1, 10);
  // A negative now is treated as 0.
  EXPECT_EQ(ring->try_acquire(-5), (Decision{true, 1, 0, 10, 0}));
  EXPECT_EQ(ring->try_acquire(9), (Decision{false, 1, 0, 10, 1}));
  EXPECT_TRUE(ring->try_acquire(10).allowed);
}

TEST(SlidingLogRing, LimitOneAlternates) {
  auto ring = make(1, 100);
  for (int64_t t = 0; t < 1000; t += 50) {
    const Decision d = ring->try_acquire(kEpoch + t);
    EXPECT_EQ(d.allowed, t % 100 == 0) << t;
    EXPECT_EQ(d.retry_after_ms, t % 100 == 0 ? 0 : 50) << t;
  }
  EXPECT_EQ(ring->admissions(), 10);
}

TEST(SlidingLogRing, ManyLapsKeepTheRingExact) {
  // 10 laps of a 7-slot ring: the lap parity must tell laps apart.
  auto ring = make(7, 70);
  int admitted = 0;
  for (int64_t t = 0; t < 700; ++t)
    admitted += ring->try_acquire(kEpoch + t).allowed;
  EXPECT_EQ(admitted, 70);
  EXPECT_EQ(ring->admissions(), 70);
}

TEST(SlidingLogRing, ReadsAnEpochClock) {
  ManualClock clock(kEpoch);
  auto ring = make(1, 1000);
  EXPECT_TRUE(ring->try_acquire(clock).allowed);
  clock.advance_ms(400);
  EXPECT_EQ(ring->peek(clock), (Decision{false, 1, 0, kEpoch + 1000, 600}));
  EXPECT_EQ(ring->try_acquire(ClockRef<ManualClock>(clock)).retry_after_ms,
            600);
  clock.advance_ms(600);
  EXPECT_TRUE(ring->try_acquire(clock).allowed);
}

TEST(SlidingLogRing, ReadsTheSystemClockByDefault) {
  auto ring = make(1, 60'000);
  const int64_t before = SystemClock{}.now_ms();
  const Decision d = ring->try_acquire();
  const int64_t after = SystemClock{}.now_ms();
  EXPECT_TRUE(d.allowed);
  EXPECT_GE(d.reset_at_ms, before + 60'000);
  EXPECT_LE(d.reset_at_ms, after + 60'000);
  EXPECT_FALSE(ring->try_acquire().allowed);
}

TEST(SlidingLogRing, RejectsBadOptions) {
  auto zero = SlidingLogRing::create({0, 1000});
  ASSERT_FALSE(zero.ok());
  EXPECT_EQ(zero.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(zero.status().message().find("sliding_log_ring.limit"),
            absl::string_view::npos);
  EXPECT_NE(zero.status().message().find("16777216"), absl::string_view::npos);

  auto huge = SlidingLogRing::create({SlidingLogRing::kMaxLimit + 1, 1000});
  ASSERT_FALSE(huge.ok());
  EXPECT_NE(huge.status().message().find("sliding_log_ring.limit"),
            absl::string_view::npos);

  auto window = SlidingLogRing::create({10, 0});
  ASSERT_FALSE(window.ok());
  EXPECT_EQ(window.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(window.status().message().find("sliding_log_ring.window_ms"),
            absl::string_view::npos);

  auto negative = SlidingLogRing::create({10, -5});
  EXPECT_FALSE(negative.ok());
  auto too_long = SlidingLogRing::create({10, kMaxSafeInteger + 1});
  EXPECT_FALSE(too_long.ok());

  EXPECT_TRUE(SlidingLogRing::create({1, 1}).ok());
  EXPECT_TRUE(SlidingLogRing::create({1, kMaxSafeInteger}).ok());
}

TEST(SlidingLogRing, MemoryIsEightBytesPerSlot) {
  EXPECT_EQ(
      SlidingLogRing::memory_bytes(1000) - SlidingLogRing::memory_bytes(0),
      8000u);
  EXPECT_LE(SlidingLogRing::memory_bytes(0), 256u);
}

}  // namespace
}  // namespace sliding_log_ring_test
}  // namespace throttlekit
