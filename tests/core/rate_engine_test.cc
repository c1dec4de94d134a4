// One request handler, every engine (core/rate_engine.h): the same handler
// template compiles against the embedded `RateLimiter`, `StrictRateLimiter`
// over a real Redis and a real Postgres, `CachedDenyLimiter` over Redis,
// `LeasedLimiter` over Redis and over Postgres, and `TwoTier`; the same
// traffic through each gives the same answers. The engines differ only in
// the one line that creates them (docs/architecture.md, "One surface").
#include "throttlekit/core/rate_engine.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "support/pg_test_env.h"
#include "support/redis_test_server.h"
#include "support/run_id.h"
#include "throttlekit/coordinator/strict_rate_limiter.h"
#include "throttlekit/postgres/postgres_coordinator.h"
#include "throttlekit/redis/redis_coordinator.h"
#include "throttlekit/store/rate_limiter.h"
#include "throttlekit/strategy/fixed_window.h"
#include "throttlekit/twotier/cached_deny_limiter.h"
#include "throttlekit/twotier/leased_limiter.h"
#include "throttlekit/twotier/two_tier.h"

namespace throttlekit {
namespace rate_engine_test {
namespace {

static_assert(RateEngine<RateLimiter<FixedWindow>>);
static_assert(RateEngine<StrictRateLimiter<FixedWindow>>);
static_assert(RateEngine<CachedDenyLimiter<FixedWindow>>);
static_assert(RateEngine<LeasedLimiter>);
static_assert(RateEngine<TwoTier<FixedWindow>>);

// The handler a service writes once: 400 for bad input, 503 when the
// limiter cannot answer, 429 when denied, 200 when admitted.
template <RateEngine E>
int handle(E& limiter, std::string_view user, double cost = 1) {
  absl::StatusOr<Decision> d = limiter.check(user, cost);
  if (!d.ok()) return absl::IsInvalidArgument(d.status()) ? 400 : 503;
  return d->allowed ? 200 : 429;
}

constexpr int64_t kLimit = 25;
constexpr int64_t kWindowMs = 10'000;
const FixedWindow::Options kPlan = {kLimit, kWindowMs};

using testing::run_id;

// Each engine behind a `std::unique_ptr`, created by its one line.
struct Memory {
  static constexpr const char* kName = "memory";
  static std::unique_ptr<RateLimiter<FixedWindow>> make() {
    return std::make_unique<RateLimiter<FixedWindow>>(
        *RateLimiter<FixedWindow>::create(kPlan));
  }
};
struct StrictRedis {
  static constexpr const char* kName = "strict over Redis";
  static auto make() {
    return *StrictRateLimiter<FixedWindow>::create(
        kPlan, testing::redis_coordinator(), {.prefix = "h:s:" + run_id()});
  }
};
struct StrictPostgres {
  static constexpr const char* kName = "strict over Postgres";
  static auto make() {
    return *StrictRateLimiter<FixedWindow>::create(
        kPlan, pg(), {.prefix = "h:s:" + run_id()});
  }
  static std::shared_ptr<Coordinator> pg() {
    static const std::shared_ptr<Coordinator> c =
        testing::make_pg(testing::pg_options(testing::unique_table("tk_one")));
    return c;
  }
};
struct CachedDenyRedis {
  static constexpr const char* kName = "cached-deny over Redis";
  static auto make() {
    CachedDenyOptions o;
    o.prefix = "h:c:" + run_id();
    return *CachedDenyLimiter<FixedWindow>::create(
        kPlan, testing::redis_coordinator(), o);
  }
};
std::unique_ptr<LeasedLimiter> leased_over(std::shared_ptr<Coordinator> c) {
  return *LeasedLimiter::create({.prefix = "h:l:" + run_id(),
                                 .limit = kLimit,
                                 .window_ms = kWindowMs,
                                 .batch = 10},
                                std::move(c));
}
struct LeasedRedis {
  static constexpr const char* kName = "leased over Redis";
  static auto make() { return leased_over(testing::redis_coordinator()); }
};
struct LeasedPostgres {
  static constexpr const char* kName = "leased over Postgres";
  static auto make() { return leased_over(StrictPostgres::pg()); }
};
struct TwoTierRedis {
  static constexpr const char* kName = "two-tier (cached-deny) over Redis";
  static auto make() {
    return *TwoTier<FixedWindow>::create(
        kPlan, testing::redis_coordinator(),
        {.mode = TwoTierMode::kCachedDeny, .prefix = "h:t:" + run_id()});
  }
};

template <class Engine>
class OneHandler : public ::testing::Test {
 protected:
  // Starts just after a window boundary of the wall clock, so the whole
  // test (well under a second) runs inside one window on every backend.
  static void SetUpTestSuite() {
    const int64_t now = SystemClock{}.now_ms();
    const int64_t into = now % kWindowMs;
    if (into > kWindowMs - 3000) {
      std::this_thread::sleep_for(
          std::chrono::milliseconds(kWindowMs - into + 5));
    }
  }
};

using Engines =
    ::testing::Types<Memory, StrictRedis, StrictPostgres, CachedDenyRedis,
                     LeasedRedis, LeasedPostgres, TwoTierRedis>;
TYPED_TEST_SUITE(OneHandler, Engines);

TYPED_TEST(OneHandler, SameTrafficSameAnswers) {
  auto limiter = TypeParam::make();
  ASSERT_NE(limiter, nullptr);
  // Three users, 40 requests each, interleaved: each gets exactly the limit.
  std::map<int, int> codes;
  std::map<std::string, int> admitted;
  for (int i = 0; i < 120; ++i) {
    const std::string user = absl::StrCat("user:", i % 3);
    const int code = handle(*limiter, user);
    ++codes[code];
    if (code == 200) ++admitted[user];
  }
  EXPECT_EQ(codes[200], 3 * kLimit) << TypeParam::kName;
  EXPECT_EQ(codes[429], 120 - 3 * kLimit) << TypeParam::kName;
  for (const auto& [user, n] : admitted) EXPECT_EQ(n, kLimit) << user;
  // Bad input is a 400 on every engine, before any backend is asked.
  EXPECT_EQ(handle(*limiter, ""), 400);
  EXPECT_EQ(handle(*limiter, "user:0", 0), 400);
  EXPECT_EQ(handle(*limiter, "user:0", std::nan("")), 400);
  // check_many: one denial per spent user, one admission for a new one.
  const std::vector<std::string_view> keys = {"user:1", "user:9"};
  absl::StatusOr<std::vector<Decision>> many = limiter->check_many(keys);
  ASSERT_TRUE(many.ok()) << many.status();
  EXPECT_FALSE((*many)[0].allowed);
  EXPECT_TRUE((*many)[1].allowed);
  // reset: the user starts over.
  ASSERT_TRUE(limiter->reset("user:2").ok());
  EXPECT_EQ(handle(*limiter, "user:2"), 200);
  (void)limiter->stats();
}

// peek and forecast answer, or say exactly why they cannot.
TYPED_TEST(OneHandler, PeekAndForecastAnswerOrSayWhyNot) {
  auto limiter = TypeParam::make();
  ASSERT_NE(limiter, nullptr);
  ASSERT_EQ(handle(*limiter, "p"), 200);
  absl::StatusOr<Decision> peek = limiter->peek("p");
  absl::StatusOr<Forecast> forecast = limiter->forecast("p", 1);
  if constexpr (std::is_same_v<TypeParam, LeasedRedis> ||
                std::is_same_v<TypeParam, LeasedPostgres>) {
    EXPECT_TRUE(absl::IsUnimplemented(peek.status())) << peek.status();
    EXPECT_NE(peek.status().message().find("leased_limiter.peek"),
              std::string::npos);
    EXPECT_TRUE(absl::IsUnimplemented(forecast.status()));
  } else {
    ASSERT_TRUE(peek.ok()) << peek.status();
    EXPECT_TRUE(peek->allowed);
    EXPECT_EQ(peek->remaining, kLimit - 1);
    ASSERT_TRUE(forecast.ok()) << forecast.status();
    EXPECT_EQ(forecast->spendable_now, kLimit - 1);
  }
  EXPECT_TRUE(absl::IsInvalidArgument(limiter->peek("").status()));
}

}  // namespace
}  // namespace rate_engine_test
}  // namespace throttlekit
