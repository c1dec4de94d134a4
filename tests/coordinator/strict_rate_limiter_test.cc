#include "throttlekit/coordinator/strict_rate_limiter.h"

#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "support/forwarding_coordinator.h"
#include "throttlekit/coordinator/memory_coordinator.h"

namespace throttlekit {
namespace strict_rate_limiter_test {
namespace {

constexpr int64_t kEpoch = 1'700'000'000'000;

// A coordinator whose store is out: every call fails with `status`, never
// reaching the memory coordinator behind it. Used only to drive the fail
// policy, which is pure client logic.
class OutCoordinator final : public testing::ForwardingCoordinator {
 public:
  explicit OutCoordinator(absl::Status status)
      : ForwardingCoordinator(*MemoryCoordinator::create()),
        status_(std::move(status)) {}
  std::string_view backend() const noexcept override { return "out"; }

 protected:
  absl::Status admit(std::string_view) override { return status_; }

 private:
  absl::Status status_;
};

std::shared_ptr<MemoryCoordinator> memory(std::shared_ptr<ManualClock> clock) {
  return *MemoryCoordinator::create(
      {}, std::make_shared<ClockAdapter<ClockRef<ManualClock>>>(
              ClockRef<ManualClock>(*clock)));
}

TEST(StrictRateLimiter, SharesOneLimitThroughTheCoordinator) {
  auto clock = std::make_shared<ManualClock>(kEpoch);
  std::shared_ptr<MemoryCoordinator> store = memory(clock);
  auto a = StrictRateLimiter<Gcra>::create({3, 1000}, store, {.prefix = "api"});
  auto b = StrictRateLimiter<Gcra>::create({3, 1000}, store, {.prefix = "api"});
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_TRUE((*a)->check("u")->allowed);
  EXPECT_TRUE((*b)->check("u")->allowed);
  EXPECT_TRUE((*a)->check("u")->allowed);
  absl::StatusOr<Decision> d = (*b)->check("u");
  ASSERT_TRUE(d.ok());
  EXPECT_FALSE(d->allowed);
  EXPECT_EQ(d->retry_after_ms, 334);
  // The prefix is joined: the raw key is distinct.
  const AnyStrategy g = *make_strategy(Gcra::Options{3, 1000});
  EXPECT_EQ(store->peek(g, "api:u", 0)->remaining, 0);
  EXPECT_EQ(store->peek(g, "u", 0)->remaining, 3);
  EXPECT_EQ((*a)->peek("u")->remaining, 0);
  absl::StatusOr<Forecast> fc = (*a)->forecast("u", 2);
  ASSERT_TRUE(fc.ok());
  EXPECT_EQ(fc->spendable_now, 0);
  EXPECT_EQ(fc->next_replenish_at_ms, kEpoch + 667);  // 2 x T = 666.6..
  EXPECT_EQ(fc->full_at_ms, kEpoch + 1000);
  ASSERT_TRUE((*a)->reset("u").ok());
  EXPECT_EQ((*b)->peek("u")->remaining, 3);
}

TEST(StrictRateLimiter, CheckManyUsesOneNow) {
  auto clock = std::make_shared<ManualClock>(kEpoch + 400);
  auto l = *StrictRateLimiter<FixedWindow>::create({1, 1000}, memory(clock));
  std::vector<std::string_view> keys = {"a", "b", "a"};
  absl::StatusOr<std::vector<Decision>> out = l->check_many(keys);
  ASSERT_TRUE(out.ok());
  EXPECT_TRUE((*out)[0].allowed);
  EXPECT_TRUE((*out)[1].allowed);
  EXPECT_FALSE((*out)[2].allowed);
  EXPECT_EQ((*out)[2].retry_after_ms, 600);
  std::vector<Decision> into(3);
  ASSERT_TRUE(l->check_many(keys, std::span<Decision>(into)).ok());
  EXPECT_FALSE(into[0].allowed);  // "a" was spent above
  EXPECT_TRUE(absl::IsInvalidArgument(
      l->check_many(keys, std::span<Decision>(into.data(), 2))));
  keys.push_back("");
  EXPECT_TRUE(absl::IsInvalidArgument(l->check_many(keys).status()));
}

// A batch of one key many times over a backend that answers inline: the
// chain of its occurrences is walked in a loop (a recursion this deep would
// overflow the stack), in order: the first `limit` allowed, the rest not.
// The asynchronous form completes before it returns, with the same answer.
TEST(StrictRateLimiter, CheckManyOfOneKeyManyTimesIsCheckedInOrder) {
  auto clock = std::make_shared<ManualClock>(kEpoch);
  auto l = *StrictRateLimiter<FixedWindow>::create({1000, 1000}, memory(clock));
  const std::vector<std::string_view> keys(200'000, "hot");
  absl::StatusOr<std::vector<Decision>> out = l->check_many(keys);
  ASSERT_TRUE(out.ok()) << out.status();
  for (size_t i = 0; i < out->size(); ++i) {
    ASSERT_EQ((*out)[i].allowed, i < 1000) << i;
  }
  std::optional<absl::StatusOr<std::vector<Decision>>> async;
  const std::vector<std::string_view> two = {"cold", "cold"};
  l->check_many_async(two, 600, [&](absl::StatusOr<std::vector<Decision>> v) {
    async = std::move(v);
  });
  ASSERT_TRUE(async.has_value()) << "inline on the memory coordinator";
  ASSERT_TRUE(async->ok());
  EXPECT_TRUE((**async)[0].allowed);
  EXPECT_FALSE((**async)[1].allowed);  // 600 + 600 > 1000
}

TEST(StrictRateLimiter, BadInputIsAStatus) {
  auto clock = std::make_shared<ManualClock>(kEpoch);
  auto l = *StrictRateLimiter<Gcra>::create({3, 1000}, memory(clock));
  EXPECT_TRUE(absl::IsInvalidArgument(l->check("").status()));
  EXPECT_TRUE(absl::IsInvalidArgument(l->check("u", 0).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(
      StrictRateLimiter<Gcra>::create({3, 1000}, nullptr).status()));
  const absl::Status bad_retry =
      StrictRateLimiter<Gcra>::create({3, 1000}, memory(clock),
                                      {.fail_policy = {FailPolicy::kClosed, 0}})
          .status();
  EXPECT_TRUE(absl::IsInvalidArgument(bad_retry));
  EXPECT_NE(bad_retry.message().find(
                "strict_rate_limiter.fail_policy.closed_retry_ms"),
            std::string::npos);
}

TEST(StrictRateLimiter, FailPolicyDecidesOutagesOnly) {
  auto out = std::make_shared<OutCoordinator>(
      absl::UnavailableError("redis: connection refused"));
  auto propagate = *StrictRateLimiter<Gcra>::create({3, 1000}, out);
  EXPECT_TRUE(absl::IsUnavailable(propagate->check("u").status()));
  EXPECT_EQ(propagate->outages(), 0);

  auto open = *StrictRateLimiter<Gcra>::create(
      {3, 1000}, out, {.fail_policy = FailPolicy::kOpen});
  absl::StatusOr<Decision> d = open->check_at("u", kEpoch);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(*d, (Decision{true, 3, 0, kEpoch, 0}));
  EXPECT_EQ(open->outages(), 1);

  auto closed = *StrictRateLimiter<Gcra>::create(
      {3, 1000}, out, {.fail_policy = {FailPolicy::kClosed, 250}});
  d = closed->check_at("u", kEpoch);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(*d, (Decision{false, 3, 0, kEpoch + 250, 250}));

  // A deadline is an outage too; a precondition error never is.
  auto slow = std::make_shared<OutCoordinator>(
      absl::DeadlineExceededError("redis: command deadline 50 ms"));
  auto slow_closed = *StrictRateLimiter<Gcra>::create(
      {3, 1000}, slow, {.fail_policy = FailPolicy::kClosed});
  EXPECT_FALSE(slow_closed->check("u")->allowed);
  auto wrong = std::make_shared<OutCoordinator>(
      absl::FailedPreconditionError("key holds gcra state"));
  auto wrong_open = *StrictRateLimiter<Gcra>::create(
      {3, 1000}, wrong, {.fail_policy = FailPolicy::kOpen});
  EXPECT_TRUE(absl::IsFailedPrecondition(wrong_open->check("u").status()));
}

}  // namespace
}  // namespace strict_rate_limiter_test
}  // namespace throttlekit
