// The region pool (level 1 of the federated weighted-fair escrow,
// throttlekit/federation/region_pool.h): the core on hand-worked cases;
// RapidCheck properties of the core (the grants never sum above L, grants
// are monotone within a window, a lone region gets min(want, L), equal
// weights under full demand converge to floor(L/K) each); the memory pool
// equal to the core step for step, atomic under threads, on its injected
// clock, sweeping dead keys, refusing bad input.

#include "throttlekit/federation/region_pool.h"

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "support/region_pool_timeline.h"
#include "support/test_time.h"

namespace throttlekit {
namespace region_pool_test {
namespace {

constexpr int64_t kEpoch = testing::kEpoch;

LeaseBudget budget(int64_t limit, int64_t window_ms = 1000) {
  return *LeaseBudget::create({limit, window_ms});
}

// One step that must succeed; its grant.
RegionPoolGrant step(RegionPoolState& s, const LeaseBudget& b,
                     const std::string& region, int64_t weight, int64_t want,
                     int64_t now) {
  absl::StatusOr<RegionPoolGrant> g =
      region_pool_step(s, b, region, weight, want, now);
  EXPECT_TRUE(g.ok()) << g.status();
  return g.ok() ? *g : RegionPoolGrant{};
}

int64_t sum_granted(const RegionPoolState& s) {
  int64_t sum = 0;
  for (const auto& [name, r] : s.regions) sum += r.granted;
  return sum;
}

TEST(RegionPoolCore, ALoneRegionGetsWhatItAsksUpToTheLimit) {
  RegionPoolState s;
  const LeaseBudget b = budget(100);
  RegionPoolGrant g = step(s, b, "eu", 5, 30, kEpoch + 10);
  EXPECT_EQ(g, (RegionPoolGrant{30, 0, 100, 5, kEpoch}));
  g = step(s, b, "eu", 5, 150, kEpoch + 20);
  EXPECT_EQ(g, (RegionPoolGrant{100, 30, 100, 5, kEpoch}));
  EXPECT_EQ(s.window_start_ms, kEpoch);
  EXPECT_EQ(s.regions.at("eu"), (RegionPoolState::Region{5, 100}));
}

// Weights 3 : 1 over L = 100: fair shares 75 and 25. Whoever asks later
// still gets its fair share; nobody gets another's.
TEST(RegionPoolCore, FairSharesAreReservedForRegisteredRegions) {
  RegionPoolState s;
  const LeaseBudget b = budget(100);
  // eu alone: fair 100, takes 10.
  EXPECT_EQ(step(s, b, "eu", 3, 10, kEpoch),
            (RegionPoolGrant{10, 0, 100, 3, kEpoch}));
  // us registers: fair 75 / 25; others = max(10, 75) = 75: ceiling 25.
  EXPECT_EQ(step(s, b, "us", 1, 50, kEpoch + 1),
            (RegionPoolGrant{25, 0, 25, 4, kEpoch}));
  // eu: others = max(25, 25) = 25: ceiling 75.
  EXPECT_EQ(step(s, b, "eu", 3, 90, kEpoch + 2),
            (RegionPoolGrant{75, 10, 75, 4, kEpoch}));
  // us asks for more: others = max(75, 75): ceiling stays 25.
  EXPECT_EQ(step(s, b, "us", 1, 30, kEpoch + 3),
            (RegionPoolGrant{25, 25, 25, 4, kEpoch}));
  EXPECT_EQ(sum_granted(s), 100);
}

// A registered region's unused fair share is not lent: us (fair 25) takes
// 5, eu can still take only 75.
TEST(RegionPoolCore, AnUnusedFairShareIsNotLent) {
  RegionPoolState s;
  const LeaseBudget b = budget(100);
  step(s, b, "us", 1, 5, kEpoch);
  EXPECT_EQ(step(s, b, "eu", 3, 100, kEpoch + 1).granted, 75);
  EXPECT_EQ(sum_granted(s), 80);
}

// Taken before another region registered stays taken (grants are monotone):
// the late region gets what is left.
TEST(RegionPoolCore, ALateRegionGetsWhatIsLeft) {
  RegionPoolState s;
  const LeaseBudget b = budget(100);
  EXPECT_EQ(step(s, b, "eu", 1, 90, kEpoch).granted, 90);
  const RegionPoolGrant g = step(s, b, "us", 1, 50, kEpoch + 1);
  EXPECT_EQ(g.granted, 10);
  EXPECT_EQ(g.fair_share, 50);
}

TEST(RegionPoolCore, GrantsAreMonotoneAndCumulative) {
  RegionPoolState s;
  const LeaseBudget b = budget(100);
  EXPECT_EQ(step(s, b, "eu", 2, 40, kEpoch).granted, 40);
  // Asking for less (or 0: a registration) returns the grant unchanged.
  EXPECT_EQ(step(s, b, "eu", 2, 10, kEpoch + 1),
            (RegionPoolGrant{40, 40, 100, 2, kEpoch}));
  EXPECT_EQ(step(s, b, "eu", 7, 0, kEpoch + 2),
            (RegionPoolGrant{40, 40, 100, 7, kEpoch}));
  // The weight was updated (upsert) even though nothing was granted.
  EXPECT_EQ(s.regions.at("eu").weight, 7);
}

// Three equal regions over 100: fair 33 each, the leftover unit to the
// first region that asks past its share.
TEST(RegionPoolCore, RoundingLeftoverGoesToTheFirstAsker) {
  RegionPoolState s;
  const LeaseBudget b = budget(100);
  for (const char* r : {"a", "b", "c"}) step(s, b, r, 1, 0, kEpoch);
  EXPECT_EQ(step(s, b, "b", 1, 100, kEpoch + 1).granted, 34);
  EXPECT_EQ(step(s, b, "a", 1, 100, kEpoch + 2).granted, 33);
  EXPECT_EQ(step(s, b, "c", 1, 100, kEpoch + 3).granted, 33);
  EXPECT_EQ(sum_granted(s), 100);
}

TEST(RegionPoolCore, TheWindowRollsAndClearsEverything) {
  RegionPoolState s;
  const LeaseBudget b = budget(100);
  step(s, b, "eu", 1, 60, kEpoch + 999);
  step(s, b, "us", 1, 60, kEpoch + 999);
  // At the boundary: a new window, eu alone again.
  const RegionPoolGrant g = step(s, b, "eu", 1, 80, kEpoch + 1000);
  EXPECT_EQ(g, (RegionPoolGrant{80, 0, 100, 1, kEpoch + 1000}));
  EXPECT_EQ(s.regions.size(), 1u);
  // Several windows later.
  EXPECT_EQ(step(s, b, "us", 1, 5, kEpoch + 7321).window_start_ms,
            kEpoch + 7000);
}

TEST(RegionPoolCore, AClockBehindStaysInTheStoredWindow) {
  RegionPoolState s;
  const LeaseBudget b = budget(100);
  step(s, b, "eu", 1, 100, kEpoch + 2500);
  // A region whose clock is in the window before: no fresh budget.
  const RegionPoolGrant g = step(s, b, "us", 1, 50, kEpoch + 1200);
  EXPECT_EQ(g.window_start_ms, kEpoch + 2000);
  EXPECT_EQ(g.granted, 0);
  EXPECT_EQ(sum_granted(s), 100);
}

// Fair shares of L = 2^53-1 with weights near 2^31 are exact (w * L
// needs 84 bits).
TEST(RegionPoolCore, FairSharesAreExactAtTheBounds) {
  RegionPoolState s;
  const LeaseBudget b = budget(kMaxSafeInteger);
  step(s, b, "a", kMaxRegionWeight, 0, kEpoch);
  step(s, b, "b", kMaxRegionWeight - 1, 0, kEpoch);
  const RegionPoolGrant c = step(s, b, "c", 1, 0, kEpoch);
  EXPECT_EQ(c.total_weight, int64_t{1} << 32);
  EXPECT_EQ(c.fair_share, 2097151);  // floor((2^53-1) / 2^32)
  EXPECT_EQ(step(s, b, "a", kMaxRegionWeight, 0, kEpoch).fair_share,
            4503599627370495);  // floor((2^53-1) / 2)
  EXPECT_EQ(step(s, b, "b", kMaxRegionWeight - 1, 0, kEpoch).fair_share,
            4503599625273343);
  // Everyone asks for everything: exactly L in total.
  for (const char* r : {"c", "b", "a"}) {
    step(s, b, r, r[0] == 'c' ? 1 : kMaxRegionWeight - (r[0] == 'b'),
         kMaxSafeInteger, kEpoch);
  }
  EXPECT_EQ(sum_granted(s), kMaxSafeInteger);
}

TEST(RegionPoolCore, AFullWindowRefusesANewRegionAndChangesNothing) {
  RegionPoolState s;
  const LeaseBudget b = budget(5000);
  for (size_t i = 0; i < kMaxPoolRegions; ++i) {
    step(s, b, "r" + std::to_string(i), 1, 1, kEpoch);
  }
  const RegionPoolState before = s;
  absl::StatusOr<RegionPoolGrant> g =
      region_pool_step(s, b, "late", 1, 1, kEpoch + 1);
  EXPECT_EQ(g.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(s == before);
  // A known region still steps; the next window takes the new one.
  EXPECT_EQ(step(s, b, "r7", 1, 3, kEpoch + 2).granted, 3);
  EXPECT_EQ(step(s, b, "late", 1, 1, kEpoch + 1000).granted, 1);
}

TEST(RegionPoolCore, RefusesBadArgumentsNamingTheFieldAndBound) {
  RegionPoolState s;
  const LeaseBudget b = budget(100);
  const auto code = [&](const std::string& region, int64_t weight, int64_t want,
                        int64_t now) {
    return region_pool_step(s, b, region, weight, want, now).status();
  };
  EXPECT_EQ(code("", 1, 1, kEpoch).message(),
            "region_pool.region must be 1 .. 64 bytes; got 0");
  EXPECT_EQ(code(std::string(65, 'r'), 1, 1, kEpoch).message(),
            "region_pool.region must be 1 .. 64 bytes; got 65");
  EXPECT_EQ(code("eu", 0, 1, kEpoch).message(),
            "region_pool.weight must be in [1, 2^31]; got 0");
  EXPECT_EQ(code("eu", kMaxRegionWeight + 1, 1, kEpoch).message(),
            "region_pool.weight must be in [1, 2^31]; got 2147483649");
  EXPECT_EQ(code("eu", 1, -1, kEpoch).message(),
            "region_pool.want must be in [0, 2^53-1]; got -1");
  EXPECT_EQ(code("eu", 1, kMaxSafeInteger + 1, kEpoch).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code("eu", 1, 1, -5).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(s.regions.empty());
  EXPECT_TRUE(code(std::string(64, 'r'), kMaxRegionWeight, 0, 0).ok());
}

// ---------------------------------------------------------------------------
// Properties of the core.

struct Step {
  int region = 0;
  int64_t weight = 1;
  int64_t want = 0;
  int64_t dt = 0;
};

rc::Gen<Step> step_gen(int64_t limit) {
  return rc::gen::build<Step>(
      rc::gen::set(&Step::region, rc::gen::inRange(0, 5)),
      rc::gen::set(
          &Step::weight,
          rc::gen::oneOf(rc::gen::inRange<int64_t>(1, 10),
                         rc::gen::inRange<int64_t>(1, kMaxRegionWeight + 1))),
      rc::gen::set(&Step::want,
                   rc::gen::oneOf(rc::gen::inRange<int64_t>(0, limit + 3),
                                  rc::gen::just(kMaxSafeInteger))),
      rc::gen::set(&Step::dt,
                   rc::gen::oneOf(rc::gen::inRange<int64_t>(0, 50),
                                  rc::gen::inRange<int64_t>(-1500, 3000))));
}

RC_GTEST_PROP(RegionPoolProperty, GrantsNeverSumAboveTheLimit, ()) {
  const int64_t limit = *rc::gen::oneOf(rc::gen::inRange<int64_t>(1, 2000),
                                        rc::gen::just(kMaxSafeInteger));
  const LeaseBudget b = budget(limit);
  const auto steps = *rc::gen::container<std::vector<Step>>(step_gen(limit));
  RegionPoolState s;
  int64_t now = kEpoch;
  for (const Step& st : steps) {
    now = std::max<int64_t>(0, now + st.dt);
    const RegionPoolState before = s;
    absl::StatusOr<RegionPoolGrant> g = region_pool_step(
        s, b, "r" + std::to_string(st.region), st.weight, st.want, now);
    RC_ASSERT(g.ok());
    RC_ASSERT(sum_granted(s) <= limit);
    RC_ASSERT(g->granted >= g->previous);
    RC_ASSERT(g->granted <= std::max(g->previous, st.want));
    // Monotone: in the same window no region's grant ever shrinks.
    if (!before.regions.empty() &&
        s.window_start_ms == before.window_start_ms) {
      for (const auto& [name, r] : before.regions) {
        RC_ASSERT(s.regions.at(name).granted >= r.granted);
      }
    }
  }
}

RC_GTEST_PROP(RegionPoolProperty, ALoneRegionGetsMinOfWantAndLimit, ()) {
  const int64_t limit = *rc::gen::inRange<int64_t>(1, kMaxSafeInteger);
  const int64_t weight = *rc::gen::inRange<int64_t>(1, kMaxRegionWeight + 1);
  const auto wants =
      *rc::gen::nonEmpty(rc::gen::container<std::vector<int64_t>>(
          rc::gen::inRange<int64_t>(0, kMaxSafeInteger)));
  RegionPoolState s;
  int64_t most = 0;
  for (const int64_t want : wants) {
    absl::StatusOr<RegionPoolGrant> g =
        region_pool_step(s, budget(limit), "alone", weight, want, kEpoch);
    RC_ASSERT(g.ok());
    most = std::max(most, want);
    RC_ASSERT(g->granted == std::min(most, limit));
    RC_ASSERT(g->fair_share == limit);
  }
}

// K regions of equal weight register (want 0), then ask round-robin for
// their grant plus 1 .. q until a whole round changes nothing: each holds
// at least floor(L / K) and together exactly L.
RC_GTEST_PROP(RegionPoolProperty, EqualWeightsUnderFullDemandConverge, ()) {
  const int k = *rc::gen::inRange(1, 6);
  const int64_t limit = *rc::gen::inRange<int64_t>(k, 5000);
  const int64_t weight = *rc::gen::inRange<int64_t>(1, kMaxRegionWeight + 1);
  const int64_t q = *rc::gen::inRange<int64_t>(1, limit / k + 1);
  const LeaseBudget b = budget(limit);
  RegionPoolState s;
  for (int r = 0; r < k; ++r) {
    RC_ASSERT(region_pool_step(s, b, "r" + std::to_string(r), weight, 0, kEpoch)
                  .ok());
  }
  std::vector<int64_t> held(k, 0);
  for (bool changed = true; changed;) {
    changed = false;
    for (int r = 0; r < k; ++r) {
      const int64_t want = held[r] + *rc::gen::inRange<int64_t>(1, q + 1);
      absl::StatusOr<RegionPoolGrant> g = region_pool_step(
          s, b, "r" + std::to_string(r), weight, want, kEpoch + 1);
      RC_ASSERT(g.ok());
      changed = changed || g->granted != held[r];
      held[r] = g->granted;
    }
  }
  int64_t sum = 0;
  for (const int64_t h : held) {
    RC_ASSERT(h >= limit / k);
    RC_ASSERT(h <= limit / k + limit % k);
    sum += h;
  }
  RC_ASSERT(sum == limit);
}

// ---------------------------------------------------------------------------
// The memory pool.

TEST(MemoryRegionPool, EqualsTheCoreStepForStep) {
  MemoryRegionPool pool;
  EXPECT_EQ(
      testing::expect_region_pool_matches_core(pool, "rfp-conf:", 12, 300),
      12 * 300);
}

TEST(MemoryRegionPool, ConcurrentGrantsNeverExceedTheLimit) {
  MemoryRegionPool pool;
  const int64_t most =
      testing::expect_concurrent_grants_never_exceed_limit(pool, "hot");
  EXPECT_GT(most, 0);
}

TEST(MemoryRegionPool, NowZeroReadsTheInjectedClock) {
  ManualClock clock(kEpoch + 1500);
  BasicMemoryRegionPool<ClockRef<ManualClock>> pool{
      ClockRef<ManualClock>(clock)};
  const LeaseBudget b = budget(10);
  absl::StatusOr<RegionPoolGrant> g = pool.grant(b, "k", "eu", 1, 4);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->window_start_ms, kEpoch + 1000);
  clock.advance_ms(500);
  g = pool.grant(b, "k", "eu", 1, 20);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(*g, (RegionPoolGrant{10, 0, 10, 1, kEpoch + 2000}));
  EXPECT_EQ(pool.backend(), "memory");
}

TEST(MemoryRegionPool, SweepsKeysAWindowPastTheirEnd) {
  ManualClock clock(kEpoch);
  BasicMemoryRegionPool<ClockRef<ManualClock>> pool{
      ClockRef<ManualClock>(clock)};
  const LeaseBudget b = budget(10);
  for (int i = 0; i < 63; ++i) {
    ASSERT_TRUE(pool.grant(b, "old" + std::to_string(i), "eu", 1, 1).ok());
  }
  EXPECT_EQ(pool.size(), 63u);
  clock.advance_ms(2000);  // the old windows ended a whole window ago
  ASSERT_TRUE(pool.grant(b, "new", "eu", 1, 1).ok());
  EXPECT_EQ(pool.size(), 1u);
  // A swept key is a cold key: a fresh window.
  absl::StatusOr<RegionPoolState> st = pool.state("old3");
  ASSERT_TRUE(st.ok());
  EXPECT_TRUE(st->regions.empty());
}

TEST(MemoryRegionPool, RefusesBadInputBeforeTouchingState) {
  MemoryRegionPool pool;
  const LeaseBudget b = budget(10);
  const auto code = [](const absl::StatusOr<RegionPoolGrant>& g) {
    return g.status().code();
  };
  const auto bad = absl::StatusCode::kInvalidArgument;
  EXPECT_EQ(code(pool.grant(b, "", "eu", 1, 1)), bad);
  EXPECT_EQ(pool.grant(b, "", "eu", 1, 1).status().message(),
            "region_pool.key: key must not be empty");
  EXPECT_EQ(code(pool.grant(b, "k", "", 1, 1)), bad);
  EXPECT_EQ(code(pool.grant(b, "k", std::string(65, 'x'), 1, 1)), bad);
  EXPECT_EQ(code(pool.grant(b, "k", "eu", 0, 1)), bad);
  EXPECT_EQ(code(pool.grant(b, "k", "eu", kMaxRegionWeight + 1, 1)), bad);
  EXPECT_EQ(code(pool.grant(b, "k", "eu", 1, -1)), bad);
  EXPECT_EQ(code(pool.grant(b, "k", "eu", 1, kMaxSafeInteger + 1)), bad);
  EXPECT_EQ(code(pool.grant(b, "k", "eu", 1, 1, -1)), bad);
  EXPECT_EQ(pool.grant(b, "k", "eu", 1, 1, -1).status().message(),
            "region_pool.now_ms must be 0 (the pool's clock) or in "
            "[1, 2^53-1]; got -1");
  EXPECT_EQ(pool.state("").status().code(), bad);
  EXPECT_EQ(pool.size(), 0u);
  absl::StatusOr<RegionPoolGrant> g = pool.grant(b, "k", "eu", 1, 100);
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->granted, 10);
}

}  // namespace
}  // namespace region_pool_test
}  // namespace throttlekit
