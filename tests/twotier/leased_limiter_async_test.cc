// LeasedLimiter without waiting (docs/async.md, docs/twotier.md "Leased
// mode"): local hits complete inline without allocating; misses on one key
// share the one lease in flight and are served from its grant in arrival
// order, leasing again for the demand it did not cover; a spent window is
// the store's denial; an outage is each waiter's fail policy; the blocking
// check is the same path; destruction waits for the leases in flight; and,
// on the real clock with more threads than cores, a fleet admits at most
// the limit in every window, counted per window.

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "support/allocation_counter.h"
#include "support/held_coordinator.h"
#include "support/manual_store.h"
#include "support/run_threads.h"
#include "support/test_work.h"
#include "throttlekit/coordinator/memory_coordinator.h"
#include "throttlekit/core/rate_engine.h"
#include "throttlekit/twotier/leased_limiter.h"

namespace throttlekit {
namespace leased_limiter_async_test {
namespace {

constexpr int64_t kEpoch = testing::kManualEpoch;
using Limiter = BasicLeasedLimiter<ClockRef<ManualClock>>;

static_assert(AsyncRateEngine<LeasedLimiter>);

// Completions recorded in the order they ran.
struct Log {
  std::mutex mu;
  std::vector<std::pair<int, absl::StatusOr<Decision>>> done;
  auto on(int i) {
    return [this, i](absl::StatusOr<Decision> d) {
      std::lock_guard<std::mutex> lock(mu);
      done.emplace_back(i, std::move(d));
    };
  }
  size_t size() {
    std::lock_guard<std::mutex> lock(mu);
    return done.size();
  }
};

struct Held : testing::ManualStore {
  std::shared_ptr<testing::HeldCoordinator> held =
      std::make_shared<testing::HeldCoordinator>(store);
  std::unique_ptr<Limiter> limiter;

  explicit Held(LeasedLimiterOptions o) {
    absl::StatusOr<std::unique_ptr<Limiter>> l =
        Limiter::create(std::move(o), held, ClockRef<ManualClock>(clock));
    EXPECT_TRUE(l.ok()) << l.status();
    limiter = *std::move(l);
  }
};

TEST(LeasedLimiterAsync, HitsCompleteInlineWithoutAllocating) {
  testing::ManualStore m;
  auto limiter =
      *Limiter::create({.limit = 1000, .window_ms = 1000, .batch = 500},
                       m.store, ClockRef<ManualClock>(m.clock));
  ASSERT_TRUE(limiter->check("k").ok());  // the lease
  int allowed = 0;
  const long before = testing::allocations();
  for (int i = 0; i < 100; ++i) {
    limiter->check_async("k", 1, [&allowed](absl::StatusOr<Decision> d) {
      allowed += d.ok() && d->allowed;
    });
  }
  EXPECT_EQ(testing::allocations() - before, 0);
  EXPECT_EQ(allowed, 100);
  EXPECT_EQ(limiter->stats().leases, 1);

  // Bad input completes inline too.
  std::optional<absl::StatusOr<Decision>> bad;
  limiter->check_async("", 1, [&bad](absl::StatusOr<Decision> d) { bad = d; });
  ASSERT_TRUE(bad.has_value());
  EXPECT_TRUE(absl::IsInvalidArgument(bad->status())) << bad->status();
  bad.reset();
  limiter->check_async("k", -1,
                       [&bad](absl::StatusOr<Decision> d) { bad = d; });
  ASSERT_TRUE(bad.has_value());
  EXPECT_TRUE(absl::IsInvalidArgument(bad->status())) << bad->status();
}

TEST(LeasedLimiterAsync, MissesShareTheLeaseInFlightAndAreServedInOrder) {
  Held h({.limit = 100, .window_ms = 1000, .batch = 4});
  Log log;
  for (int i = 0; i < 10; ++i) h.limiter->check_async("k", 1, log.on(i));
  EXPECT_EQ(log.size(), 0u);
  EXPECT_EQ(h.held->wants(), std::vector<int64_t>{4}) << "one lease in flight";

  ASSERT_TRUE(h.held->deliver_one());
  ASSERT_EQ(log.size(), 4u);
  // The six the grant did not cover lease again, for their demand.
  EXPECT_EQ(h.held->wants(), std::vector<int64_t>{6});
  h.held->deliver_all();
  ASSERT_EQ(log.size(), 10u);
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(log.done[i].first, i) << "served in arrival order";
    ASSERT_TRUE(log.done[i].second.ok()) << log.done[i].second.status();
    EXPECT_TRUE(log.done[i].second->allowed);
    EXPECT_EQ(log.done[i].second->reset_at_ms, kEpoch + 1000);
  }
  EXPECT_EQ(h.limiter->stats().leases, 2);
  EXPECT_EQ(h.limiter->stats().leased_credits, 10);
  EXPECT_EQ(h.limiter->credits("k"), 0);
}

TEST(LeasedLimiterAsync, AShortfallInASpentWindowIsTheStoresDenial) {
  Held h({.limit = 5, .window_ms = 1000, .batch = 4});
  Log log;
  for (int i = 0; i < 8; ++i) h.limiter->check_async("k", 1, log.on(i));
  h.clock.advance_ms(100);
  h.held->deliver_all();
  ASSERT_EQ(log.size(), 8u);
  int allowed = 0;
  for (auto& [i, d] : log.done) {
    ASSERT_TRUE(d.ok()) << d.status();
    if (d->allowed) {
      ++allowed;
      EXPECT_LT(i, 5) << "the first five are served";
    } else {
      EXPECT_EQ(d->reset_at_ms, kEpoch + 1000);
      EXPECT_EQ(d->retry_after_ms, 900) << "until the window ends";
    }
  }
  EXPECT_EQ(allowed, 5);
  EXPECT_EQ(h.limiter->stats().leases, 2);
  EXPECT_EQ(h.limiter->stats().denials, 3);
  // Marked spent: the next shortfall is denied inline, no lease.
  std::optional<absl::StatusOr<Decision>> next;
  h.limiter->check_async("k", 1,
                         [&next](absl::StatusOr<Decision> d) { next = d; });
  ASSERT_TRUE(next.has_value());
  ASSERT_TRUE(next->ok());
  EXPECT_FALSE((*next)->allowed);
  EXPECT_EQ(h.held->held(), 0u);
}

TEST(LeasedLimiterAsync, AnOutageIsEachWaitersFailPolicy) {
  for (FailPolicy::Mode mode :
       {FailPolicy::kPropagate, FailPolicy::kClosed, FailPolicy::kOpen}) {
    Held h({.limit = 100,
            .window_ms = 1000,
            .batch = 10,
            .fail_policy = FailPolicy(mode)});
    Log log;
    for (int i = 0; i < 3; ++i) h.limiter->check_async("k", 1, log.on(i));
    h.held->fail_next(1, absl::UnavailableError("store down"));
    h.held->deliver_all();
    ASSERT_EQ(log.size(), 3u);
    for (auto& [i, d] : log.done) {
      if (mode == FailPolicy::kPropagate) {
        EXPECT_TRUE(absl::IsUnavailable(d.status())) << d.status();
      } else {
        ASSERT_TRUE(d.ok()) << d.status();
        EXPECT_EQ(d->allowed, mode == FailPolicy::kOpen);
      }
    }
    EXPECT_EQ(h.limiter->stats().outages,
              mode == FailPolicy::kPropagate ? 0 : 3);
    // The key is not stuck: the next miss leases again.
    h.limiter->check_async("k", 1, log.on(3));
    EXPECT_EQ(h.held->held(), 1u);
    h.held->deliver_all();
    ASSERT_EQ(log.size(), 4u);
    ASSERT_TRUE(log.done[3].second.ok());
    EXPECT_TRUE(log.done[3].second->allowed);
  }
}

// A batch without waiting: every key at one `now`, hits inline and misses
// joining their keys' leases, answered once, from the last answer, in key
// order, as `check_many` answers; an outage is the first error in key
// order (the other keys checked all the same); bad input completes inline
// with nothing checked.
TEST(LeasedLimiterAsync, ABatchIsAnsweredOnceInKeyOrderFromItsLastAnswer) {
  Held h({.limit = 100, .window_ms = 1000, .batch = 10});
  Log warm;
  h.limiter->check_async("a", 1, warm.on(0));
  h.held->deliver_all();
  ASSERT_EQ(warm.size(), 1u);

  const std::vector<std::string_view> keys = {"a", "b", "a", "c"};
  int calls = 0;
  absl::StatusOr<std::vector<Decision>> got;
  const auto record = [&](absl::StatusOr<std::vector<Decision>> r) {
    ++calls;
    got = std::move(r);
  };
  h.limiter->check_many_async(keys, 1, record);
  EXPECT_EQ(calls, 0) << "b and c wait for their leases";
  EXPECT_EQ(h.held->held(), 2u);
  h.held->deliver_all();
  ASSERT_EQ(calls, 1);
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->size(), 4u);
  for (const Decision& d : *got) {
    EXPECT_TRUE(d.allowed);
    EXPECT_EQ(d.reset_at_ms, (*got)[0].reset_at_ms) << "one instant";
  }
  // The blocking form gives the same decisions on the same state.
  absl::StatusOr<std::vector<Decision>> blocking = h.limiter->check_many(keys);
  ASSERT_TRUE(blocking.ok()) << blocking.status();
  EXPECT_EQ(blocking->size(), 4u);

  // An outage on b's lease: the batch's answer is b's error; c's lease was
  // still asked for and granted.
  const std::vector<std::string_view> fresh = {"x", "y", "z"};
  calls = 0;
  h.limiter->check_many_async(fresh, 1, record);
  EXPECT_EQ(h.held->held(), 3u);
  h.held->deliver_one();  // x
  h.held->fail_next(1, absl::UnavailableError("store down"));
  h.held->deliver_all();  // y fails, z granted
  ASSERT_EQ(calls, 1);
  EXPECT_TRUE(absl::IsUnavailable(got.status())) << got.status();
  EXPECT_GT(h.limiter->credits("z"), 0);

  // Bad input: inline, nothing checked.
  const int64_t leases = h.limiter->stats().leases;
  calls = 0;
  const std::vector<std::string_view> bad = {"q", ""};
  h.limiter->check_many_async(bad, 1, record);
  ASSERT_EQ(calls, 1);
  EXPECT_TRUE(absl::IsInvalidArgument(got.status())) << got.status();
  h.limiter->check_many_async(std::span<const std::string_view>(), 1, record);
  ASSERT_EQ(calls, 2);
  ASSERT_TRUE(got.ok());
  EXPECT_TRUE(got->empty());
  EXPECT_EQ(h.held->held(), 0u);
  EXPECT_EQ(h.limiter->stats().leases, leases);
}

TEST(LeasedLimiterAsync, TheBlockingCheckWaitsOnTheSamePath) {
  Held h({.limit = 100, .window_ms = 1000, .batch = 2});
  std::atomic<bool> returned{false};
  absl::StatusOr<Decision> blocking;
  std::thread caller([&] {
    blocking = h.limiter->check("k");
    returned.store(true);
  });
  while (h.held->held() == 0) std::this_thread::yield();
  // An asynchronous miss joins the blocking caller's lease.
  Log log;
  h.limiter->check_async("k", 1, log.on(0));
  EXPECT_EQ(h.held->held(), 1u);
  absl::SleepFor(absl::Milliseconds(20));
  EXPECT_FALSE(returned.load()) << "the blocking check waits for the grant";
  h.held->deliver_all();
  caller.join();
  ASSERT_TRUE(blocking.ok()) << blocking.status();
  EXPECT_TRUE(blocking->allowed);
  ASSERT_EQ(log.size(), 1u);
  EXPECT_TRUE(log.done[0].second->allowed);
  EXPECT_EQ(h.limiter->stats().leases, 1);
}

TEST(LeasedLimiterAsync, DestructionWaitsForTheLeasesInFlight) {
  Held h({.limit = 100, .window_ms = 1000, .batch = 10});
  std::atomic<int> completed{0};
  for (int i = 0; i < 3; ++i) {
    h.limiter->check_async("k" + std::to_string(i), 1,
                           [&completed](absl::StatusOr<Decision> d) {
                             EXPECT_TRUE(d.ok() && d->allowed);
                             completed.fetch_add(1);
                           });
  }
  ASSERT_EQ(h.held->held(), 3u);
  std::thread network([&] {
    absl::SleepFor(absl::Milliseconds(50));
    h.held->deliver_all();
  });
  h.limiter.reset();  // returns once the three grants are handled
  EXPECT_EQ(completed.load(), 3);
  network.join();
}

// The real clock, more threads than cores, 20 ms windows crossed over a
// hundred times: four nodes share one memory store, threads mix
// asynchronous and blocking checks on two keys, and every admission is
// counted in the store window it spent (`reset_at_ms`, the window's end).
TEST(LeasedLimiterAsync,
     AFleetAdmitsAtMostTheLimitInEveryWindowOnTheRealClock) {
  constexpr int64_t kLimit = 40;
  constexpr int64_t kWindowMs = 20;
  std::shared_ptr<MemoryCoordinator> store = *MemoryCoordinator::create();
  std::vector<std::unique_ptr<LeasedLimiter>> nodes;
  for (int i = 0; i < 4; ++i) {
    nodes.push_back(*LeasedLimiter::create(
        {.limit = kLimit, .window_ms = kWindowMs, .batch = 6}, store));
  }
  const absl::Duration run =
      absl::Milliseconds(testing::scaled_work(2500, 600));
  std::mutex mu;
  std::map<std::pair<int, int64_t>, int64_t> per_window;  // (key, end)
  std::atomic<int64_t> completions{0}, submitted{0};
  const absl::Time until = absl::Now() + run;
  testing::run_threads(6, [&](int t) {
    std::map<std::pair<int, int64_t>, int64_t> mine;
    std::mutex mine_mu;
    // This thread's calls not completed yet: a waiter may be completed by
    // the thread whose lease serves it, after this one moved on.
    std::atomic<int64_t> pending{0};
    int64_t n = 0;
    while (absl::Now() < until) {
      const int key = (n + t) % 2;
      LeasedLimiter& node = *nodes[(t + n) % nodes.size()];
      const std::string k = key == 0 ? "a" : "b";
      submitted.fetch_add(1);
      pending.fetch_add(1);
      auto count = [&, key](absl::StatusOr<Decision> d) {
        EXPECT_TRUE(d.ok()) << d.status();
        if (d.ok() && d->allowed) {
          std::lock_guard<std::mutex> lock(mine_mu);
          ++mine[{key, d->reset_at_ms}];
        }
        completions.fetch_add(1);
        pending.fetch_sub(1);
      };
      if (n % 3 == 2) {
        count(node.check(k));
      } else {
        node.check_async(k, 1, count);
      }
      ++n;
    }
    while (pending.load() > 0) std::this_thread::yield();
    std::lock_guard<std::mutex> lock(mine_mu);
    std::lock_guard<std::mutex> merge(mu);
    for (auto& [w, c] : mine) per_window[w] += c;
  });
  EXPECT_EQ(completions.load(), submitted.load());
  int64_t worst = 0;
  for (auto& [w, c] : per_window) {
    EXPECT_LE(c, kLimit) << "key " << w.first << " window ending " << w.second;
    worst = std::max(worst, c);
  }
  EXPECT_GE(per_window.size(), 20u) << "windows crossed";
  EXPECT_EQ(worst, kLimit) << "some window was filled";
}

}  // namespace
}  // namespace leased_limiter_async_test
}  // namespace throttlekit
