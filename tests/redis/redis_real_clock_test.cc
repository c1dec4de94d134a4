// The engines over a real Redis on the system clock: 8 threads (more than
// the machine's cores) on one hot key, 20 ms windows crossed ~50 times,
// admissions counted per window (tests/support/coordinator_real_clock.h).
// `StrictRateLimiter` and `CachedDenyLimiter` for every strategy (the Redis
// clock decides, inside one script); `check_at` with each thread's own
// clock for the windowed strategies (20 ms windows of 40, default options:
// the TTL slack keeps every stale `now` from reviving a window); 1, 2, 4
// and 8 window-coupled
// `LeasedLimiter` nodes sharing the 8 threads on one budget, at batch 1, 10
// and 30 (the whole limit); three weighted-fair escrows leasing from one
// budget; `UnifiedAdmission::admit_async` over a strict axis with 16
// admissions in flight per thread.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "support/coordinator_real_clock.h"
#include "support/redis_test_server.h"
#include "throttlekit/admission/unified_admission.h"
#include "throttlekit/redis/redis_coordinator.h"
#include "throttlekit/throttlekit.h"

namespace throttlekit {
namespace redis_real_clock_test {
namespace {

// The fixture server with deadlines long enough for a loaded CI machine
// (these tests are about bounds, not latency: an outage would be an error).
std::shared_ptr<Coordinator> redis() {
  return testing::redis_coordinator({.command_timeout = absl::Seconds(5)});
}

std::string run_prefix(const std::string& what) {
  return absl::StrCat("rc:", what, ":", absl::ToUnixNanos(absl::Now()));
}

constexpr testing::RealClockRun kRun = {
    .threads = 8, .limit = 50, .window_ms = 20, .run_ms = 1000};

template <class S>
class RedisRealClock : public ::testing::Test {};

TYPED_TEST_SUITE(RedisRealClock, testing::AllRateStrategies);

TYPED_TEST(RedisRealClock, StrictHoldsTheBoundInEveryWindow) {
  testing::strict_holds_bound<TypeParam>(
      redis(), kRun, run_prefix("strict:" + std::string(TypeParam::kName)));
}

// Each thread's own clock, read before its call (`check_at`), on default
// options: 20 ms windows of 40, as a request-scoped clock would call.
template <class S>
class RedisCheckAtRealClock : public ::testing::Test {};

TYPED_TEST_SUITE(RedisCheckAtRealClock, testing::WindowedRateStrategies);

TYPED_TEST(RedisCheckAtRealClock, StaleNowsHoldTheBoundInEveryWindow) {
  testing::strict_check_at_holds_bound<TypeParam>(
      redis(), {.threads = 8, .limit = 40, .window_ms = 20, .run_ms = 1000},
      run_prefix("check_at:" + std::string(TypeParam::kName)));
}

TYPED_TEST(RedisRealClock, CachedDenyHoldsTheBoundInEveryWindow) {
  testing::cached_deny_holds_bound<TypeParam>(
      redis(), kRun, run_prefix("cached:" + std::string(TypeParam::kName)));
}

// (nodes, batch): 8 threads over the nodes (thread t on node t % nodes).
class RedisLeasedRealClock
    : public ::testing::TestWithParam<std::pair<int, int64_t>> {};

// L = 30 per 20 ms (1,500/s): saturated even at batch 1 under
// ThreadSanitizer, where a round trip per admission gives ~3,300 calls/s.
TEST_P(RedisLeasedRealClock, NodesNeverExceedTheLimitInAnyWindow) {
  const auto [nodes, batch] = GetParam();
  testing::leased_nodes_hold_limit(
      redis(), {.threads = 8, .limit = 30, .window_ms = 20, .run_ms = 1000},
      nodes, batch, run_prefix(absl::StrCat("leased:", nodes, ":", batch)));
}

INSTANTIATE_TEST_SUITE_P(NodesAndBatches, RedisLeasedRealClock,
                         ::testing::Values(std::pair{1, 10}, std::pair{2, 10},
                                           std::pair{4, 1}, std::pair{4, 10},
                                           std::pair{4, 30}, std::pair{8, 10}));

// `admit_async` over a strict Redis rate axis, the way an event loop uses
// it: 8 threads each keep up to 16 admissions in flight (their
// completions run on the coordinator's I/O thread, which releases each
// slot), 20 ms windows crossed about 50 times, every admission counted in
// the window its rate decision names: at most the limit in every window,
// the limit reached in most of them, every completion exactly once, every
// slot released.
//
// An admission asked without a `now` lets Redis's clock decide a strict
// axis (admission/unified_admission.h, "Which `now`"), so the coordinator
// needs no `ttl_slack_ms`. Before it did, the admission passed its own
// clock's read to every axis: with 128 calls in flight on a loaded machine
// a call could reach Redis after its window's key expired, and the first
// run of this test under the full suite counted 100 in a window of 50
// (docs/redis.md, "Physical TTL and a stale now").
TEST(RedisAdmitAsyncRealClock, AdmissionsInFlightHoldTheBoundInEveryWindow) {
  using Strict = StrictRateLimiter<FixedWindow>;
  auto strict = Strict::create(
      testing::StrategyBounds<FixedWindow>::options(kRun.limit, kRun.window_ms),
      redis(), {.prefix = run_prefix("admit_async")});
  ASSERT_TRUE(strict.ok()) << strict.status();
  using Adm = UnifiedAdmission<Strict, NoAxis>;
  auto adm = Adm::create({.max_inflight = 1024,
                          .rate = std::shared_ptr<Strict>(*std::move(strict))});
  ASSERT_TRUE(adm.ok()) << adm.status();
  constexpr int kInFlight = 16;
  const SystemClock clock;
  testing::Load load;
  std::mutex mu;
  std::atomic<int64_t> issued{0}, completed{0}, errors{0};
  std::vector<std::atomic<int>> inflight(static_cast<size_t>(kRun.threads));
  load.start_ms = clock.now_ms();
  const int64_t end = load.start_ms + kRun.run_ms;
  std::vector<std::thread> threads;
  for (int t = 0; t < kRun.threads; ++t) {
    threads.emplace_back([&, t] {
      std::atomic<int>& mine = inflight[static_cast<size_t>(t)];
      for (int64_t pre = clock.now_ms(); pre < end; pre = clock.now_ms()) {
        if (mine.load() >= kInFlight) {
          std::this_thread::yield();
          continue;
        }
        mine.fetch_add(1);
        issued.fetch_add(1);
        (*adm)->admit_async(
            {.key = "hot"}, [&, t, pre](absl::StatusOr<Adm::Admission> a) {
              const int64_t post = clock.now_ms();
              if (!a.ok()) {
                errors.fetch_add(1);
              } else if (a->allowed()) {
                std::lock_guard lock(mu);
                load.admitted.push_back(
                    {pre, post, a->axis(Axis::kRate)->reset_at_ms, t});
              }
              a = absl::CancelledError("released");  // the slot goes back
              inflight[static_cast<size_t>(t)].fetch_sub(1);
              completed.fetch_add(1);
            });
      }
    });
  }
  for (std::thread& th : threads) th.join();
  const int64_t give_up = clock.now_ms() + 30'000;
  while (completed.load() < issued.load() && clock.now_ms() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  load.end_ms = clock.now_ms();
  load.calls = issued.load();
  ASSERT_EQ(completed.load(), issued.load()) << "completions missing";
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ((*adm)->concurrency()->inflight(), 0);
  std::lock_guard lock(mu);
  EXPECT_GT(load.calls, static_cast<int64_t>(load.admitted.size()));
  const std::string figures = testing::check_per_window(load, kRun.limit);
  // Demand is far above the limit: most windows fill.
  std::map<int64_t, int64_t> per;
  for (const testing::Admission& x : load.admitted) ++per[x.reset_at_ms];
  int64_t full = 0;
  for (const auto& [window_end, n] : per) full += n == kRun.limit ? 1 : 0;
  EXPECT_GE(full * 2, static_cast<int64_t>(per.size())) << figures;
  std::printf("admit_async: %lld issued, %zu admitted, %lld full windows; %s\n",
              static_cast<long long>(load.calls), load.admitted.size(),
              static_cast<long long>(full), figures.c_str());
}

// The mechanism, step by step: a window filled, its key left to expire,
// then an admission whose own clock still reads inside that window (a
// stale read: a scheduling delay, a queue). Asked without a `now`, the
// strict axis decides on Redis's clock and counts into the window Redis is
// in; the ended window is never revived (no ttl_slack_ms).
TEST(RedisAdmitAsyncRealClock, AStaleAdmissionClockNeverRevivesAnEndedWindow) {
  using Strict = StrictRateLimiter<FixedWindow>;
  constexpr int64_t kLimit = 5, kWindowMs = 50;
  auto strict = Strict::create({.limit = kLimit, .window_ms = kWindowMs},
                               redis(), {.prefix = run_prefix("stale")});
  ASSERT_TRUE(strict.ok()) << strict.status();
  ManualClock stale(SystemClock{}.now_ms());
  using Adm = BasicUnifiedAdmission<Strict, NoAxis, ClockRef<ManualClock>>;
  auto adm = *Adm::create(
      {.max_inflight = 8, .rate = std::shared_ptr<Strict>(*std::move(strict))},
      ClockRef<ManualClock>(stale));

  // Fill one window on Redis's clock (again if the fill straddled two).
  int64_t window_end = 0;
  for (int attempt = 0; attempt < 20 && window_end == 0; ++attempt) {
    const std::string key = absl::StrCat("k", attempt);
    std::map<int64_t, int> ends;
    for (int i = 0; i < kLimit; ++i) {
      absl::StatusOr<Adm::Admission> a = adm->admit(key);
      ASSERT_TRUE(a.ok()) << a.status();
      if (a->allowed()) ++ends[a->axis(Axis::kRate)->reset_at_ms];
    }
    if (ends.size() != 1 || ends.begin()->second != kLimit) continue;
    window_end = ends.begin()->first;

    // The key expires at the window's end; wait past it.
    while (SystemClock{}.now_ms() < window_end + 10) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    stale.set_ms(window_end - kWindowMs / 2);  // inside the ended window
    absl::StatusOr<Adm::Admission> late = adm->admit(key);
    ASSERT_TRUE(late.ok()) << late.status();
    EXPECT_TRUE(late->allowed()) << "a fresh window on Redis's clock";
    EXPECT_GE(late->axis(Axis::kRate)->reset_at_ms, window_end + kWindowMs)
        << "the ended window (ending " << window_end << ") was revived";

    std::optional<absl::StatusOr<Adm::Admission>> async;
    std::atomic<bool> done{false};
    adm->admit_async({.key = key}, [&](absl::StatusOr<Adm::Admission> a) {
      async.emplace(std::move(a));
      done.store(true);
    });
    while (!done.load())
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    ASSERT_TRUE(async->ok()) << async->status();
    EXPECT_GE((*async)->axis(Axis::kRate)->reset_at_ms, window_end + kWindowMs)
        << "admit_async revived the ended window";
  }
  ASSERT_NE(window_end, 0) << "no window was filled within one window";
}

TEST(RedisEscrowRealClock, ThreeEscrowsOnOneBudgetHoldTheLimit) {
  testing::escrow_fleet_holds_limit(
      redis(), {.threads = 8, .limit = 200, .window_ms = 20, .run_ms = 1000}, 3,
      run_prefix("escrow"));
}

// The same through `admit_async`: leases sent with `lease_async`, the calls
// arriving meanwhile queued behind them and completed from the I/O thread.
TEST(RedisEscrowRealClock, ThreeEscrowsAdmittingAsyncHoldTheLimit) {
  testing::escrow_fleet_holds_limit(
      redis(), {.threads = 8, .limit = 200, .window_ms = 20, .run_ms = 1000}, 3,
      run_prefix("escrow-async"), /*async=*/true);
}

}  // namespace
}  // namespace redis_real_clock_test
}  // namespace throttlekit
