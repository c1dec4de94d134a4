#include "throttlekit/core/clock.h"

#include <gtest/gtest.h>

namespace throttlekit {
namespace clock_test {
namespace {

TEST(ManualClock, MovesForwardAndBackward) {
  ManualClock clock(1'700'000'000'000);
  EXPECT_EQ(clock.now_ms(), 1'700'000'000'000);
  clock.advance_ms(250);
  EXPECT_EQ(clock.now_ms(), 1'700'000'000'250);
  clock.advance_ms(-1000);
  EXPECT_EQ(clock.now_ms(), 1'699'999'999'250);
  clock.set_ms(5);
  EXPECT_EQ(clock.now_ms(), 5);
}

TEST(SystemClock, ReadsEpochMilliseconds) {
  // After 2023-11-14 and before 2100: epoch ms, not seconds or ns.
  int64_t now = SystemClock{}.now_ms();
  EXPECT_GT(now, 1'700'000'000'000);
  EXPECT_LT(now, 4'102'444'800'000);
  int64_t coarse = CoarseSystemClock{}.now_ms();
  EXPECT_LE(std::abs(coarse - now), 1000);
}

TEST(ClockRef, SeesTheReferentsMoves) {
  ManualClock clock(10);
  ClockRef<ManualClock> ref(clock);
  clock.set_ms(42);
  EXPECT_EQ(ref.now_ms(), 42);
  ClockAdapter<ClockRef<ManualClock>> erased(ref);
  const Clock& c = erased;
  EXPECT_EQ(c.now_ms(), 42);
}

TEST(MonotonicClock, NeverGoesBackwards) {
  MonotonicClock m;
  int64_t a = m.now_ns();
  int64_t b = m.now_ns();
  EXPECT_LE(a, b);
  ManualMonotonicClock manual(100);
  manual.advance_ns(5);
  EXPECT_EQ(manual.now_ns(), 105);
}

}  // namespace
}  // namespace clock_test
}  // namespace throttlekit
