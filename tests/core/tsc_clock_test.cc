#include "throttlekit/core/tsc_clock.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <random>
#include <thread>
#include <vector>

#include "throttlekit/core/clock.h"

namespace throttlekit {
namespace tsc_clock_test {
namespace {

// A simulated machine: a counter at `ticks_per_ns` and a system clock whose
// rate differs from true time by `system_ppm` and that can be stepped.
// Time moves only through `advance_ns`.
struct Machine {
  std::atomic<uint64_t> ticks{1'000'000'000};
  std::atomic<int64_t> system_ns{1'800'000'000'000'000'000};
  double ticks_per_ns = 3.0;
  double system_ppm = 0;
  const char* unsuitable = nullptr;
  // Fractions carried between advances, so long runs do not drift.
  double tick_carry = 0;
  double ns_carry = 0;

  void advance_ns(int64_t dt) {
    const double t = static_cast<double>(dt) * ticks_per_ns + tick_carry;
    const double whole_t = std::floor(t);
    tick_carry = t - whole_t;
    ticks.fetch_add(static_cast<uint64_t>(whole_t));
    const double s =
        static_cast<double>(dt) * (1 + system_ppm * 1e-6) + ns_carry;
    const double whole_s = std::floor(s);
    ns_carry = s - whole_s;
    system_ns.fetch_add(static_cast<int64_t>(whole_s));
  }
  void step_system_ns(int64_t d) { system_ns.fetch_add(d); }
  double system_ms() const {
    return static_cast<double>(system_ns.load()) / 1e6;
  }
};

struct FakeSources {
  Machine* m = nullptr;
  uint64_t ticks() const noexcept { return m->ticks.load(); }
  uint64_t ordered_ticks() const noexcept { return m->ticks.load(); }
  int64_t system_ns() const noexcept { return m->system_ns.load(); }
  const char* unsuitable() const noexcept { return m->unsuitable; }
};

using FakeClock = BasicTscClock<FakeSources>;
constexpr int64_t kMs = 1'000'000;

int64_t floor_ms(int64_t ns) { return ns / kMs; }

// A clock over a fresh machine, calibrated: its first read, then one 20 ms
// later (past the 10 ms calibration).
struct Calibrated {
  Machine m;
  FakeClock clock{FakeSources{&m}};
  int64_t last = 0;
  Calibrated() {
    (void)clock.now_ms();
    m.advance_ns(20 * kMs);
    last = clock.now_ms();
  }
};

// Reads every `every_ns` for `for_ns`, checking that reads never go back
// and calling `check(clock, machine)` after each.
template <class F>
void run(FakeClock& clock, Machine& m, int64_t for_ns, int64_t every_ns,
         int64_t& last, F check) {
  for (int64_t t = 0; t < for_ns; t += every_ns) {
    m.advance_ns(every_ns);
    const int64_t now = clock.now_ms();
    ASSERT_GE(now, last) << "the clock stepped backwards at " << t << " ns";
    last = now;
    check(now);
  }
}

TEST(TscClock, ReadsTheSystemClockWhileCalibratingThenTheCounter) {
  Machine m;
  FakeClock clock(FakeSources{&m});
  EXPECT_EQ(clock.now_ms(), floor_ms(m.system_ns.load()));
  EXPECT_EQ(clock.status().mode, TscClockStatus::Mode::kCalibrating);
  m.advance_ns(5 * kMs);
  EXPECT_EQ(clock.now_ms(), floor_ms(m.system_ns.load()));
  EXPECT_EQ(clock.status().mode, TscClockStatus::Mode::kCalibrating);
  m.advance_ns(6 * kMs);
  EXPECT_EQ(clock.now_ms(), floor_ms(m.system_ns.load()));
  const TscClockStatus s = clock.status();
  ASSERT_EQ(s.mode, TscClockStatus::Mode::kFast);
  EXPECT_NEAR(s.ticks_per_ns, 3.0, 1e-6);
  EXPECT_TRUE(s.reason.empty());
  // From here the counter alone moves the clock: the system clock is not
  // read until the line's end (100 ms).
  m.ticks.fetch_add(3 * 40 * kMs);  // 40 ms of counter, system frozen
  EXPECT_NEAR(clock.now_ms_exact() - m.system_ms(), 40.0, 1e-6);
}

TEST(TscClock, TracksASlewingSystemClockWithinATenthOfAMillisecond) {
  Calibrated c;
  Machine& m = c.m;
  FakeClock& clock = c.clock;
  int64_t last = c.last;
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> ppm(-500, 500);
  double worst = 0;
  // An hour of reads 1 ms apart; NTP changes the system clock's rate to
  // anything within its 500 ppm limit every 7 s.
  for (int minute = 0; minute < 60; ++minute) {
    for (int slew = 0; slew < 9; ++slew) {
      m.system_ppm = ppm(rng);
      run(clock, m, 7'000 * kMs, kMs, last, [&](int64_t now) {
        const double err = clock.now_ms_exact() - m.system_ms();
        worst = std::max(worst, std::abs(err));
        ASSERT_LE(std::abs(now - floor_ms(m.system_ns.load())), 1);
      });
    }
  }
  // A rate change of up to 1000 ppm over one 100 ms line: 0.1 ms.
  EXPECT_LE(worst, 0.11) << "worst error " << worst << " ms";
  EXPECT_GT(clock.status().lines, 30'000);
}

TEST(TscClock, ABackwardStepOfTheSystemClockIsSpreadNotFollowed) {
  Calibrated c;
  Machine& m = c.m;
  FakeClock& clock = c.clock;
  int64_t last = c.last;
  m.step_system_ns(-1'000 * kMs);
  // Runs slow by at most 1/64: over every 1 s the clock advances at least
  // 63/64 s (minus a read's rounding), and it catches up within 64 s and
  // an interval.
  int64_t caught_up_after_ms = -1;
  for (int second = 0; second < 80; ++second) {
    const int64_t before = clock.now_ms();
    run(clock, m, 1'000 * kMs, kMs, last, [](int64_t) {});
    const int64_t advanced = clock.now_ms() - before;
    EXPECT_GE(advanced, 1000 * 63 / 64 - 2) << "second " << second;
    EXPECT_LE(advanced, 1001) << "second " << second;
    if (caught_up_after_ms < 0 &&
        std::abs(clock.now_ms_exact() - m.system_ms()) < 0.11) {
      caught_up_after_ms = (second + 1) * 1000;
    }
  }
  EXPECT_GT(caught_up_after_ms, 60'000);
  EXPECT_LE(caught_up_after_ms, 66'000);
}

TEST(TscClock, AForwardStepIsFollowedAtTheNextLine) {
  Calibrated c;
  Machine& m = c.m;
  FakeClock& clock = c.clock;
  int64_t last = c.last;
  m.step_system_ns(5'000 * kMs);
  run(clock, m, 101 * kMs, kMs, last, [](int64_t) {});
  EXPECT_LT(std::abs(clock.now_ms_exact() - m.system_ms()), 0.01);
  // The step was not learned as a rate.
  EXPECT_NEAR(clock.status().ticks_per_ns, 3.0, 1e-6);
}

TEST(TscClock, AfterAnIdleHourTheFirstReadIsTheSystemClocks) {
  Calibrated c;
  Machine& m = c.m;
  FakeClock& clock = c.clock;
  // The counter runs 20 ppm fast against the system clock for an hour no
  // one reads: the line would be 72 ms ahead.
  m.system_ppm = -20;
  m.advance_ns(3'600'000 * kMs);
  const int64_t now = clock.now_ms();
  EXPECT_EQ(now, floor_ms(m.system_ns.load()));
  EXPECT_LT(std::abs(clock.now_ms_exact() - m.system_ms()), 0.01);
}

TEST(TscClock, ANewCounterFrequencyIsLearnedWhenTwoIntervalsAgree) {
  Calibrated c;
  Machine& m = c.m;
  FakeClock& clock = c.clock;
  int64_t last = c.last;
  m.ticks_per_ns = 2.0;  // a migration to a host with another frequency
  run(clock, m, 2'000 * kMs, kMs, last, [](int64_t) {});
  EXPECT_NEAR(clock.status().ticks_per_ns, 2.0, 1e-6);
  double worst = 0;
  run(clock, m, 2'000 * kMs, kMs, last, [&](int64_t) {
    worst = std::max(worst, std::abs(clock.now_ms_exact() - m.system_ms()));
  });
  EXPECT_LT(worst, 0.11);
}

TEST(TscClock, AnUnsuitableCounterMeansTheSystemClockWithTheReason) {
  Machine m;
  m.unsuitable = "the CPU's timestamp counter is not invariant";
  FakeClock clock(FakeSources{&m});
  for (int i = 0; i < 50; ++i) {
    m.advance_ns(kMs / 3);
    EXPECT_EQ(clock.now_ms(), floor_ms(m.system_ns.load()));
  }
  const TscClockStatus s = clock.status();
  EXPECT_EQ(s.mode, TscClockStatus::Mode::kSystem);
  EXPECT_EQ(s.reason, "the CPU's timestamp counter is not invariant");
}

TEST(TscClock, ACounterRunningBackwardsMeansTheSystemClock) {
  Calibrated c;
  Machine& m = c.m;
  FakeClock& clock = c.clock;
  ASSERT_EQ(clock.status().mode, TscClockStatus::Mode::kFast);
  m.advance_ns(150 * kMs);
  m.ticks.fetch_sub(1'000 * kMs);
  EXPECT_EQ(clock.now_ms(), floor_ms(m.system_ns.load()));
  EXPECT_EQ(clock.status().mode, TscClockStatus::Mode::kSystem);
  EXPECT_EQ(clock.status().reason, "the timestamp counter ran backwards");
  m.advance_ns(5 * kMs);
  EXPECT_EQ(clock.now_ms(), floor_ms(m.system_ns.load()));
}

TEST(TscClock, ACounterOfAnAbsurdFrequencyIsRefused) {
  Machine m;
  m.ticks_per_ns = 50;  // 50 GHz
  FakeClock clock(FakeSources{&m});
  (void)clock.now_ms();
  m.advance_ns(20 * kMs);
  EXPECT_EQ(clock.now_ms(), floor_ms(m.system_ns.load()));
  EXPECT_EQ(clock.status().mode, TscClockStatus::Mode::kSystem);
}

// The machine's own counter: on a suitable machine (this CI class is one)
// the clock goes fast and every read lies within 1 ms of the system
// clock's reads just before and just after it; on any
// other the status names the reason and reads are the system clock's. Four
// threads read it for 300 ms of real time: every thread's reads are
// non-decreasing (the lines are published while they read).
TEST(TscClock, TheProcessClockAgreesWithTheSystemClockAcrossThreads) {
  const int64_t first = TscClock{}.now_ms();
  EXPECT_LE(std::abs(first - SystemClock{}.now_ms()), 2);
  std::this_thread::sleep_for(std::chrono::milliseconds(15));
  (void)TscClock{}.now_ms();
  const TscClockStatus status = TscClock::status();
  if (status.mode == TscClockStatus::Mode::kSystem) {
    EXPECT_FALSE(status.reason.empty());
    GTEST_LOG_(INFO) << "the fast clock is off here: " << status.reason;
  } else {
    EXPECT_EQ(status.mode, TscClockStatus::Mode::kFast);
    EXPECT_GT(status.ticks_per_ns, 0.1);
  }
  const auto end =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(300);
  std::atomic<int64_t> backwards{0}, far{0}, reads{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&] {
      int64_t last = TscClock{}.now_ms();
      int64_t n = 0;
      while (std::chrono::steady_clock::now() < end) {
        // Bracketed by the system clock, so a thread preempted between
        // two reads does not count as a difference.
        const int64_t before = SystemClock{}.now_ms();
        const int64_t now = TscClock{}.now_ms();
        const int64_t after = SystemClock{}.now_ms();
        if (now < last) backwards.fetch_add(1);
        if (now < before - 1 || now > after + 1) far.fetch_add(1);
        last = now;
        ++n;
      }
      reads.fetch_add(n);
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(backwards.load(), 0);
  EXPECT_EQ(far.load(), 0) << "of " << reads.load() << " reads";
  EXPECT_GT(reads.load(), 1000);
  if (status.mode == TscClockStatus::Mode::kFast) {
    EXPECT_GE(TscClock::status().lines, 3);  // re-synchronised meanwhile
  }
}

}  // namespace
}  // namespace tsc_clock_test
}  // namespace throttlekit
