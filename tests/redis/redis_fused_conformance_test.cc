// The fused Redis path equals the sequential one on a real Redis: GCRA
// (rate, one request) then, if it admits, the token bucket (cost), as one
// script (`RedisCoordinator::fused_check`) against the two strict checks in
// sequence on a twin pair of keys. Random timelines (costs, both axes
// binding, clock steps forward and back, two tenants); after every step
// the decisions are compared, then each axis's stored state through the
// read path (peek and forecast of both axes on both pairs), and the step
// count must reach 300. Also: UnifiedAdmission over FusedRateCost is one
// round trip per admission and equals admit over the strict pair.

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <future>
#include <latch>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "support/redis_test_server.h"
#include "support/test_time.h"
#include "throttlekit/admission/unified_admission.h"
#include "throttlekit/coordinator/strict_rate_limiter.h"
#include "throttlekit/redis/fused_rate_cost.h"
#include "throttlekit/redis/redis_coordinator.h"

namespace throttlekit {
namespace redis_fused_conformance_test {
namespace {

using testing::kEpoch;

struct Pair {
  AnyStrategy rate_any;
  AnyStrategy cost_any;
  const Gcra& rate() const { return std::get<Gcra>(rate_any); }
  const TokenBucket& cost() const { return std::get<TokenBucket>(cost_any); }
};

Pair make_pair(int64_t limit, int64_t period_ms, int64_t burst,
               int64_t capacity, double refill) {
  return Pair{*make_strategy(Gcra::Options{
                  .limit = limit, .period_ms = period_ms, .burst = burst}),
              *make_strategy(TokenBucket::Options{.capacity = capacity,
                                                  .refill_per_sec = refill})};
}

TEST(RedisFusedConformance, FusedEqualsSequentialStepForStep) {
  std::unique_ptr<RedisCoordinator> redis = testing::redis_coordinator();
  const std::string run = "fused:" + std::to_string(getpid()) + ":";
  const std::vector<Pair> pairs = {
      make_pair(5, 1000, 0, 20, 10),      // both axes bind often
      make_pair(3, 600, 6, 8, 2.5),       // burst > limit, slow refill
      make_pair(50, 1000, 0, 7, 100.0),   // the cost axis binds
      make_pair(2, 2000, 0, 1000, 1000),  // the rate axis binds
  };
  std::mt19937_64 rng(20261125);
  int steps = 0, rate_denials = 0, cost_denials = 0, back_steps = 0;
  for (size_t p = 0; p < pairs.size(); ++p) {
    const Pair& pair = pairs[p];
    for (int timeline = 0; timeline < 3; ++timeline) {
      int64_t now = kEpoch + static_cast<int64_t>(rng() % 1000);
      for (int i = 0; i < 40; ++i) {
        const int step_kind = static_cast<int>(rng() % 10);
        if (step_kind < 6) {
          now += static_cast<int64_t>(rng() % 120);
        } else if (step_kind < 8) {
          now -= static_cast<int64_t>(rng() % 300);  // a stale now
          ++back_steps;
        } else {
          now += static_cast<int64_t>(rng() % 5000);
        }
        const double costs[] = {1, 1, 2, 3, 0.5, 7.5, 13, 25};
        const double cost = costs[rng() % 8];
        const std::string tenant = run + std::to_string(p) + ":" +
                                   std::to_string(timeline) + ":" +
                                   (rng() % 2 ? "a" : "b");
        const std::string fr = "{" + tenant + "}:fr",
                          fc = "{" + tenant + "}:fc";
        const std::string sr = "{" + tenant + "}:sr",
                          sc = "{" + tenant + "}:sc";
        const std::string ar = "{" + tenant + "}:ar",
                          ac = "{" + tenant + "}:ac";

        absl::StatusOr<RedisCoordinator::FusedDecision> f =
            redis->fused_check(pair.rate(), pair.cost(), fr, fc, now, cost);
        ASSERT_TRUE(f.ok()) << f.status();
        absl::StatusOr<Decision> r = redis->check(pair.rate_any, sr, now, 1);
        ASSERT_TRUE(r.ok()) << r.status();
        ASSERT_EQ(f->rate, *r) << "step " << steps;
        Decision combined = *r;
        if (r->allowed) {
          absl::StatusOr<Decision> c =
              redis->check(pair.cost_any, sc, now, cost);
          ASSERT_TRUE(c.ok()) << c.status();
          ASSERT_TRUE(f->cost.has_value()) << "step " << steps;
          ASSERT_EQ(*f->cost, *c) << "step " << steps;
          combined = combine(combined, *c);
          cost_denials += !c->allowed;
        } else {
          ASSERT_FALSE(f->cost.has_value()) << "step " << steps;
          ++rate_denials;
        }
        ASSERT_EQ(f->combined, combined) << "step " << steps;
        // The same step without waiting, on a third pair of keys.
        std::promise<absl::StatusOr<RedisCoordinator::FusedDecision>> p;
        redis->fused_check_async(
            pair.rate(), pair.cost(), ar, ac, now, cost,
            [&p](absl::StatusOr<RedisCoordinator::FusedDecision> d) {
              p.set_value(std::move(d));
            });
        absl::StatusOr<RedisCoordinator::FusedDecision> g =
            p.get_future().get();
        ASSERT_TRUE(g.ok()) << g.status();
        ASSERT_EQ(g->combined, f->combined) << "step " << steps;
        ASSERT_EQ(g->rate, f->rate) << "step " << steps;
        ASSERT_EQ(g->cost, f->cost) << "step " << steps;
        // The stored states, through the read path, at a later instant.
        const int64_t later = now + static_cast<int64_t>(rng() % 50);
        ASSERT_EQ(*redis->peek(pair.rate_any, fr, later),
                  *redis->peek(pair.rate_any, sr, later));
        ASSERT_EQ(*redis->peek(pair.cost_any, fc, later),
                  *redis->peek(pair.cost_any, sc, later));
        ASSERT_EQ(*redis->peek(pair.rate_any, ar, later),
                  *redis->peek(pair.rate_any, sr, later));
        ASSERT_EQ(*redis->peek(pair.cost_any, ac, later),
                  *redis->peek(pair.cost_any, sc, later));
        ASSERT_EQ(*redis->forecast(pair.rate_any, fr, later, 2),
                  *redis->forecast(pair.rate_any, sr, later, 2));
        ASSERT_EQ(*redis->forecast(pair.cost_any, fc, later, cost),
                  *redis->forecast(pair.cost_any, sc, later, cost));
        ++steps;
      }
    }
  }
  std::printf(
      "%d steps (each: decisions, then both axes' states), %d rate "
      "denials, %d cost denials, %d backward clock steps\n",
      steps, rate_denials, cost_denials, back_steps);
  EXPECT_GE(steps, 300);
  EXPECT_GT(rate_denials, 20);
  EXPECT_GT(cost_denials, 20);
}

TEST(RedisFusedConformance, StoreClockIsReadOnceForBothAxes) {
  std::unique_ptr<RedisCoordinator> redis = testing::redis_coordinator();
  const Pair pair = make_pair(10, 1000, 0, 10, 10);
  const std::string t = "{fused-clock:" + std::to_string(getpid()) + "}";
  absl::StatusOr<RedisCoordinator::FusedDecision> f =
      redis->fused_check(pair.rate(), pair.cost(), t + ":r", t + ":c", 0, 4);
  ASSERT_TRUE(f.ok()) << f.status();
  ASSERT_TRUE(f->cost.has_value());
  // GCRA's reset is tat = now + T; the bucket's is now + ceil(4 / rate):
  // both from the same now.
  EXPECT_EQ(f->rate.reset_at_ms - 100, f->cost->reset_at_ms - 400);
}

TEST(RedisFusedConformance, BadInputIsRefusedBeforeAnyIo) {
  std::unique_ptr<RedisCoordinator> redis = testing::redis_coordinator();
  const Pair pair = make_pair(10, 1000, 0, 10, 10);
  EXPECT_EQ(redis->fused_check(pair.rate(), pair.cost(), "", "c", kEpoch, 1)
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(redis->fused_check(pair.rate(), pair.cost(), "r", "c", kEpoch, 0)
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(redis->fused_check(pair.rate(), pair.cost(), "r", "c", -5, 1)
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(RedisFusedConformance, BadInputCompletesInlineWithoutWaiting) {
  std::unique_ptr<RedisCoordinator> redis = testing::redis_coordinator();
  const Pair pair = make_pair(10, 1000, 0, 10, 10);
  const int64_t before = redis->stats().requests;
  for (auto [r, c, now, units] :
       {std::tuple<const char*, const char*, int64_t, double>{"", "c", kEpoch,
                                                              1},
        {"r", "c", kEpoch, 0},
        {"r", "", kEpoch, 1},
        {"r", "c", -5, 1}}) {
    int calls = 0;
    redis->fused_check_async(
        pair.rate(), pair.cost(), r, c, now, units,
        [&calls](absl::StatusOr<RedisCoordinator::FusedDecision> d) {
          ++calls;
          EXPECT_TRUE(absl::IsInvalidArgument(d.status())) << d.status();
        });
    EXPECT_EQ(calls, 1) << "inline, before fused_check_async returned";
  }
  EXPECT_EQ(redis->stats().requests, before);
}

TEST(FusedRateCost, OnlyGcraWithTokenBucketIsFused) {
  auto redis = std::shared_ptr<RedisCoordinator>(testing::redis_coordinator());
  auto bad = FusedRateCost::create(
      {.rate = FixedWindow::Options{.limit = 5, .window_ms = 1000},
       .cost = TokenBucket::Options{.capacity = 5, .refill_per_sec = 5}},
      redis);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("rate = fixed_window"),
            std::string::npos)
      << bad.status();
  auto swapped = FusedRateCost::create(
      {.rate = TokenBucket::Options{.capacity = 5, .refill_per_sec = 5},
       .cost = Gcra::Options{.limit = 5, .period_ms = 1000}},
      redis);
  EXPECT_EQ(swapped.status().code(), absl::StatusCode::kInvalidArgument);
  auto tagged = FusedRateCost::create(
      {.rate = Gcra::Options{.limit = 5, .period_ms = 1000},
       .cost = TokenBucket::Options{.capacity = 5, .refill_per_sec = 5},
       .prefix = "a{b"},
      redis);
  EXPECT_EQ(tagged.status().code(), absl::StatusCode::kInvalidArgument);
  auto invalid = FusedRateCost::create(
      {.rate = Gcra::Options{.limit = 0, .period_ms = 1000},
       .cost = TokenBucket::Options{.capacity = 5, .refill_per_sec = 5}},
      redis);
  EXPECT_EQ(invalid.status().code(), absl::StatusCode::kInvalidArgument);
}

// admit() over the fused pair: one round trip per admission, and the same
// decisions as admit() over the strict pair on twin keys.
TEST(FusedRateCost, UnifiedAdmissionIsOneRoundTripAndEqualsSequential) {
  auto redis = std::shared_ptr<RedisCoordinator>(testing::redis_coordinator());
  const std::string prefix = "fadm:" + std::to_string(getpid());
  auto fused = std::shared_ptr<FusedRateCost>(*FusedRateCost::create(
      {.rate = Gcra::Options{.limit = 4, .period_ms = 1000},
       .cost = TokenBucket::Options{.capacity = 10, .refill_per_sec = 5},
       .prefix = prefix},
      redis));
  auto one = *UnifiedAdmission<FusedRateCost>::create(
      {.max_inflight = 100, .rate = fused});
  using StrictGcra = StrictRateLimiter<Gcra>;
  using StrictBucket = StrictRateLimiter<TokenBucket>;
  auto rate = std::shared_ptr<StrictGcra>(*StrictGcra::create(
      {.limit = 4, .period_ms = 1000}, redis, {.prefix = prefix + ":sr"}));
  auto cost = std::shared_ptr<StrictBucket>(
      *StrictBucket::create({.capacity = 10, .refill_per_sec = 5}, redis,
                            {.prefix = prefix + ":sc"}));
  auto two = *UnifiedAdmission<StrictGcra, StrictBucket>::create(
      {.max_inflight = 100, .rate = rate, .cost = cost});
  std::vector<Admission> held;
  int64_t now = kEpoch;
  const double costs[] = {1, 3, 2, 6, 1, 4, 1, 1};
  for (int i = 0; i < 60; ++i) {
    now += 90;
    const double c = costs[i % 8];
    const int64_t before = redis->stats().requests;
    absl::StatusOr<Admission> a = one->admit_at("tenant", now, c);
    ASSERT_TRUE(a.ok()) << a.status();
    EXPECT_EQ(redis->stats().requests - before, 1) << "step " << i;
    absl::StatusOr<Admission> b = two->admit_at("tenant", now, c);
    ASSERT_TRUE(b.ok()) << b.status();
    EXPECT_EQ(a->decision(), b->decision()) << "step " << i;
    EXPECT_EQ(a->binding_axis(), b->binding_axis()) << "step " << i;
    EXPECT_EQ(a->axis(Axis::kCost), b->axis(Axis::kCost)) << "step " << i;
    if (a->allowed()) held.push_back(*std::move(a));
  }
  held.clear();
  EXPECT_EQ(one->concurrency()->inflight(), 0);
}

// admit_async over the fused pair: one round trip per admission, completed
// on the coordinator's I/O thread, with the decisions admit gives on twin
// keys; many admissions in flight at once each complete exactly once.
TEST(FusedRateCost, UnifiedAdmissionAsyncEqualsBlocking) {
  auto redis = std::shared_ptr<RedisCoordinator>(testing::redis_coordinator());
  const std::string prefix = "fasync:" + std::to_string(getpid());
  auto make = [&](const std::string& p) {
    auto fused = std::shared_ptr<FusedRateCost>(*FusedRateCost::create(
        {.rate = Gcra::Options{.limit = 4, .period_ms = 1000},
         .cost = TokenBucket::Options{.capacity = 10, .refill_per_sec = 5},
         .prefix = p},
        redis));
    return *UnifiedAdmission<FusedRateCost>::create(
        {.max_inflight = 10'000, .rate = fused});
  };
  auto blocking = make(prefix + ":b");
  auto async = make(prefix + ":a");
  std::vector<Admission> held_b, held_a;
  int64_t now = kEpoch;
  const double costs[] = {1, 3, 2, 6, 1, 4, 1, 1};
  const std::thread::id caller = std::this_thread::get_id();
  for (int i = 0; i < 60; ++i) {
    now += 90;
    const double c = costs[i % 8];
    absl::StatusOr<Admission> b = blocking->admit_at("tenant", now, c);
    ASSERT_TRUE(b.ok()) << b.status();
    const int64_t before = redis->stats().requests;
    std::promise<absl::StatusOr<Admission>> p;
    std::thread::id completed_on;
    async->admit_async({.key = "tenant", .cost = c, .now_ms = now},
                       [&](absl::StatusOr<Admission> a) {
                         completed_on = std::this_thread::get_id();
                         p.set_value(std::move(a));
                       });
    absl::StatusOr<Admission> a = p.get_future().get();
    ASSERT_TRUE(a.ok()) << a.status();
    EXPECT_NE(completed_on, caller);
    EXPECT_EQ(redis->stats().requests - before, 1) << "step " << i;
    EXPECT_EQ(a->decision(), b->decision()) << "step " << i;
    EXPECT_EQ(a->binding_axis(), b->binding_axis()) << "step " << i;
    EXPECT_EQ(a->axis(Axis::kRate), b->axis(Axis::kRate)) << "step " << i;
    EXPECT_EQ(a->axis(Axis::kCost), b->axis(Axis::kCost)) << "step " << i;
    if (b->allowed()) {
      held_b.push_back(*std::move(b));
      held_a.push_back(*std::move(a));
    }
  }
  EXPECT_EQ(async->concurrency()->inflight(), held_a.size());
  held_a.clear();
  EXPECT_EQ(async->concurrency()->inflight(), 0);

  // 2,000 admissions in flight on distinct keys: each completes once.
  std::latch latch(2000);
  std::atomic<int> calls{0}, allowed{0};
  for (int i = 0; i < 2000; ++i) {
    async->admit_async({.key = "many:" + std::to_string(i), .cost = 1},
                       [&](absl::StatusOr<Admission> a) {
                         ++calls;
                         if (a.ok() && a->allowed()) ++allowed;
                         // The slot goes back before the latch opens.
                         a = absl::CancelledError("released");
                         latch.count_down();
                       });
  }
  latch.wait();
  EXPECT_EQ(calls.load(), 2000);
  EXPECT_EQ(allowed.load(), 2000);
  EXPECT_EQ(async->concurrency()->inflight(), 0);
}

}  // namespace
}  // namespace redis_fused_conformance_test
}  // namespace throttlekit
