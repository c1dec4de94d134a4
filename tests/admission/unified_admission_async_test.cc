// UnifiedAdmission without waiting (docs/async.md, docs/admission.md):
// `admit_async` over axes that answer inline completes before it returns
// and allocates nothing; it equals `admit` step for step over random
// timelines (slots held and released, both axes binding, stale clocks, bad
// input, the bid-price policy); an axis that answers later resumes the
// chain from its completion, with the key copied (the caller's buffer is
// overwritten before the answer comes); an outage releases the slot; the
// awaitable suspends only when an axis answers later; and, under
// ThreadSanitizer, thousands of admissions from many threads complete
// exactly once while another thread delivers the leases.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "support/allocation_counter.h"
#include "support/eager_task.h"
#include "support/held_coordinator.h"
#include "support/manual_store.h"
#include "throttlekit/admission/unified_admission.h"
#include "throttlekit/store/rate_limiter.h"
#include "throttlekit/strategy/gcra.h"
#include "throttlekit/strategy/token_bucket.h"
#include "throttlekit/twotier/leased_limiter.h"

namespace throttlekit {
namespace unified_admission_async_test {
namespace {

constexpr int64_t kEpoch = testing::kManualEpoch;
using Rate = RateLimiter<Gcra>;
using Cost = RateLimiter<TokenBucket>;
using Adm = UnifiedAdmission<Rate, Cost>;
using Leased = BasicLeasedLimiter<ClockRef<ManualClock>>;
using LeasedAdm = UnifiedAdmission<Leased, Cost>;

static_assert(AsyncAxis<Rate> && AsyncAxis<Leased> && AsyncAxis<NoAxis>);

std::shared_ptr<Rate> gcra(int64_t limit) {
  return std::make_shared<Rate>(
      *Rate::create({.limit = limit, .period_ms = 1000}));
}
std::shared_ptr<Cost> bucket(int64_t capacity) {
  return std::make_shared<Cost>(
      *Cost::create({.capacity = capacity, .refill_per_sec = 10}));
}

// One `admit_async`, which must complete before it returns.
absl::StatusOr<Admission> admit_inline(auto& adm, const AdmitRequest& r) {
  std::optional<absl::StatusOr<Admission>> got;
  int calls = 0;
  adm.admit_async(r, [&](absl::StatusOr<Admission> a) {
    ++calls;
    got.emplace(std::move(a));
  });
  EXPECT_EQ(calls, 1) << "completed once, before admit_async returned";
  if (!got) return absl::InternalError("no completion");
  return *std::move(got);
}

TEST(UnifiedAdmissionAsync,
     InlineAxesCompleteBeforeReturningWithoutAllocating) {
  auto adm =
      *Adm::create({.max_inflight = 1, .rate = gcra(3), .cost = bucket(10)});
  // Longer than any small-string buffer: a copy of it would allocate.
  const std::string key(64, 'k');
  ASSERT_TRUE(adm->admit_at(key, kEpoch)->allowed());  // warms both stores

  int calls = 0;
  std::optional<Axis> bound[3];
  bool allowed = false;
  const long before = testing::allocations();
  {
    std::optional<absl::StatusOr<Admission>> held;
    adm->admit_async({.key = key, .cost = 2, .now_ms = kEpoch},
                     [&](absl::StatusOr<Admission> a) {
                       ++calls;
                       allowed = a.ok() && a->allowed();
                       held.emplace(std::move(a));  // keeps the slot
                     });
    adm->admit_async({.key = key, .now_ms = kEpoch},
                     [&](absl::StatusOr<Admission> a) {
                       ++calls;
                       bound[0] = a->binding_axis();
                     });
  }
  adm->admit_async({.key = key, .cost = 9, .now_ms = kEpoch},
                   [&](absl::StatusOr<Admission> a) {
                     ++calls;
                     bound[1] = a->binding_axis();
                   });
  adm->admit_async({.key = key, .now_ms = kEpoch},
                   [&](absl::StatusOr<Admission> a) {
                     ++calls;
                     bound[2] = a->binding_axis();
                   });
  EXPECT_EQ(testing::allocations() - before, 0);
  EXPECT_EQ(calls, 4);
  EXPECT_TRUE(allowed);
  EXPECT_EQ(bound[0], Axis::kConcurrency);
  EXPECT_EQ(bound[1], Axis::kCost);
  EXPECT_EQ(bound[2], Axis::kRate);
  EXPECT_EQ(adm->concurrency()->inflight(), 0);

  // Bad input completes inline with the status.
  EXPECT_TRUE(absl::IsInvalidArgument(
      admit_inline(*adm, {.key = "", .now_ms = kEpoch}).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(
      admit_inline(*adm, {.key = "k", .cost = -1, .now_ms = kEpoch}).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(
      admit_inline(*adm, {.key = "k", .cost = std::nan(""), .now_ms = kEpoch})
          .status()));
}

// Twin admissions over twin engines, one asked by `admit`, the other by
// `admit_async`: equal decisions, binding axes and per-axis decisions at
// every step, with slots held and released in the same order.
TEST(UnifiedAdmissionAsync, EqualsBlockingStepForStep) {
  auto blocking =
      *Adm::create({.max_inflight = 3, .rate = gcra(15), .cost = bucket(8)});
  auto async =
      *Adm::create({.max_inflight = 3, .rate = gcra(15), .cost = bucket(8)});
  std::mt19937_64 rng(20261127);
  std::vector<Admission> held_b, held_a;
  int64_t now = kEpoch;
  int denials[3] = {0, 0, 0}, admitted = 0, errors = 0;
  for (int step = 0; step < 2000; ++step) {
    const int kind = static_cast<int>(rng() % 10);
    if (kind < 6) {
      now += static_cast<int64_t>(rng() % 90);
    } else if (kind < 8) {
      now -= static_cast<int64_t>(rng() % 200);  // a stale now
    }
    if (!held_b.empty() && rng() % 3 == 0) {
      const size_t i = rng() % held_b.size();
      held_b.erase(held_b.begin() + static_cast<std::ptrdiff_t>(i));
      held_a.erase(held_a.begin() + static_cast<std::ptrdiff_t>(i));
    }
    const double costs[] = {1, 1, 2, 3, 0.5, 5, 11, 0};
    const std::string key = "t" + std::to_string(rng() % 3);
    const AdmitRequest r{
        .key = rng() % 50 == 0 ? std::string_view() : std::string_view(key),
        .cost = costs[rng() % 8],
        .now_ms = now};
    absl::StatusOr<Admission> b = blocking->admit(r);
    absl::StatusOr<Admission> a = admit_inline(*async, r);
    ASSERT_EQ(a.status(), b.status()) << "step " << step;
    if (!b.ok()) {
      ++errors;
      continue;
    }
    ASSERT_EQ(a->decision(), b->decision()) << "step " << step;
    ASSERT_EQ(a->binding_axis(), b->binding_axis()) << "step " << step;
    for (Axis x : {Axis::kConcurrency, Axis::kRate, Axis::kCost}) {
      ASSERT_EQ(a->axis(x), b->axis(x)) << "step " << step;
    }
    ASSERT_EQ(a->holds_slot(), b->holds_slot()) << "step " << step;
    if (b->binding_axis()) ++denials[static_cast<int>(*b->binding_axis())];
    if (b->allowed()) {
      ++admitted;
      held_b.push_back(*std::move(b));
      held_a.push_back(*std::move(a));
    }
    ASSERT_EQ(async->concurrency()->inflight(),
              blocking->concurrency()->inflight());
  }
  std::printf(
      "%d admitted; denied by concurrency %d, rate %d, cost %d; %d "
      "bad inputs\n",
      admitted, denials[0], denials[1], denials[2], errors);
  EXPECT_GT(admitted, 100);
  for (int d : denials) EXPECT_GT(d, 50);
  EXPECT_GT(errors, 10);
}

TEST(UnifiedAdmissionAsync, PolicyGateEqualsBlocking) {
  auto policy = std::shared_ptr<BidPricePolicy>(
      *BidPricePolicy::create({.duals = Duals{.rate = 5, .cost = 1}}));
  auto blocking = *Adm::create({.rate = gcra(50), .policy = policy});
  auto async = *Adm::create({.rate = gcra(50), .policy = policy});
  const AdmitRequest cases[] = {
      {.key = "t", .cost = 3, .value = 7, .now_ms = kEpoch},  // below bid
      {.key = "t", .cost = 2, .value = 7, .now_ms = kEpoch},  // clears it
      {.key = "t", .cost = 1, .now_ms = kEpoch},              // no value
      {.key = "", .cost = 1, .value = 9, .now_ms = kEpoch},   // bad key
  };
  for (const AdmitRequest& r : cases) {
    absl::StatusOr<Admission> b = blocking->admit(r);
    absl::StatusOr<Admission> a = admit_inline(*async, r);
    ASSERT_EQ(a.status(), b.status());
    if (!b.ok()) continue;
    EXPECT_EQ(a->decision(), b->decision());
    EXPECT_EQ(a->policy_denied(), b->policy_denied());
  }
}

// The rate axis is a leased limiter whose leases the test delivers: the
// admission waits for the lease, then asks the cost axis from the lease's
// completion, with its own copy of the key.
struct HeldAdmission : testing::ManualStore {
  explicit HeldAdmission(int64_t max_inflight = 100)
      : adm(*LeasedAdm::create(
            {.max_inflight = max_inflight, .rate = rate, .cost = cost})) {}
  std::shared_ptr<testing::HeldCoordinator> held =
      std::make_shared<testing::HeldCoordinator>(store);
  std::shared_ptr<Leased> rate =
      *Leased::create({.limit = 100, .window_ms = 1000, .batch = 10}, held,
                      ClockRef<ManualClock>(clock));
  std::shared_ptr<Cost> cost = bucket(50);
  std::unique_ptr<LeasedAdm> adm;
};

TEST(UnifiedAdmissionAsync, AnAxisThatAnswersLaterResumesTheChain) {
  HeldAdmission h;
  std::string key = "tenant:" + std::string(40, 'x');
  const std::string original = key;
  std::vector<absl::StatusOr<Admission>> done;
  for (int i = 0; i < 3; ++i) {
    h.adm->admit_async(
        {.key = key, .cost = 4, .now_ms = kEpoch},
        [&](absl::StatusOr<Admission> a) { done.push_back(std::move(a)); });
  }
  EXPECT_TRUE(done.empty()) << "waits for the lease";
  EXPECT_EQ(h.adm->concurrency()->inflight(), 3);
  key.assign(key.size(), '?');  // the caller's buffer is gone
  ASSERT_EQ(h.held->held(), 1u);
  h.held->deliver_all();
  ASSERT_EQ(done.size(), 3u);
  for (const absl::StatusOr<Admission>& a : done) {
    ASSERT_TRUE(a.ok()) << a.status();
    EXPECT_TRUE(a->allowed());
    EXPECT_EQ(a->axis(Axis::kCost)->remaining % 4, 2);  // 50 - 4k
  }
  // The cost axis counted the original key (12 of its 50 units spent),
  // never the overwritten buffer.
  EXPECT_FALSE(h.cost->check_at(original, kEpoch, 39)->allowed);
  EXPECT_TRUE(h.cost->check_at(key, kEpoch, 50)->allowed);
  EXPECT_EQ(h.adm->concurrency()->inflight(), 3);
  done.clear();
  EXPECT_EQ(h.adm->concurrency()->inflight(), 0);

  // Now a local hit: the chain completes inline.
  std::optional<absl::StatusOr<Admission>> hit;
  h.adm->admit_async(
      {.key = original, .now_ms = kEpoch},
      [&](absl::StatusOr<Admission> a) { hit.emplace(std::move(a)); });
  ASSERT_TRUE(hit.has_value());
  EXPECT_TRUE((*hit)->allowed());
}

// Both axes answer later: the cost axis is asked from the rate axis's
// completion and keeps its own continuation too. The key it is asked
// with must stay the request's while the continuation moves: the
// simulator (sim/admission_fleet.h) found it mangled for a short key,
// whose buffer the move emptied under the cost axis's feet, so every
// tenant's cost was counted on one wrong key.
TEST(UnifiedAdmissionAsync, TwoAxesThatAnswerLaterBothSeeTheKey) {
  testing::ManualStore ms;
  auto rate_held = std::make_shared<testing::HeldCoordinator>(ms.store);
  auto cost_held = std::make_shared<testing::HeldCoordinator>(ms.store);
  auto rate = std::shared_ptr<Leased>(*Leased::create(
      {.prefix = "rate", .limit = 100, .window_ms = 1000, .batch = 10},
      rate_held, ClockRef<ManualClock>(ms.clock)));
  auto cost = std::shared_ptr<Leased>(*Leased::create(
      {.prefix = "cost", .limit = 100, .window_ms = 1000, .batch = 10},
      cost_held, ClockRef<ManualClock>(ms.clock)));
  using TwoLeased = UnifiedAdmission<Leased, Leased>;
  auto adm =
      *TwoLeased::create({.max_inflight = 10, .rate = rate, .cost = cost});
  for (const std::string& key : {std::string("k0"), std::string(40, 'y')}) {
    std::optional<absl::StatusOr<Admission>> got;
    adm->admit_async(
        {.key = key, .cost = 3, .now_ms = ms.clock.now_ms()},
        [&](absl::StatusOr<Admission> a) { got.emplace(std::move(a)); });
    ASSERT_EQ(rate_held->keys(), std::vector<std::string>{"rate:" + key});
    rate_held->deliver_all();
    ASSERT_FALSE(got.has_value()) << "the cost axis's lease is held";
    EXPECT_EQ(cost_held->keys(), std::vector<std::string>{"cost:" + key});
    cost_held->deliver_all();
    ASSERT_TRUE(got.has_value() && got->ok());
    EXPECT_TRUE((*got)->allowed());
    EXPECT_EQ(cost->credits(key), 7);  // the batch of 10 less the cost 3
  }
}

TEST(UnifiedAdmissionAsync, AnOutageReleasesTheSlot) {
  HeldAdmission h;
  std::optional<absl::StatusOr<Admission>> got;
  int calls = 0;
  h.adm->admit_async({.key = "k", .now_ms = kEpoch},
                     [&](absl::StatusOr<Admission> a) {
                       ++calls;
                       got.emplace(std::move(a));
                     });
  EXPECT_EQ(h.adm->concurrency()->inflight(), 1);
  h.held->fail_next(1, absl::UnavailableError("store down"));
  h.held->deliver_all();
  ASSERT_EQ(calls, 1);
  // Whatever the leased limiter's fail policy answered, no slot is held
  // unless the admission was allowed.
  if (got->ok() && (*got)->allowed()) {
    EXPECT_EQ(h.adm->concurrency()->inflight(), 1);
    EXPECT_FALSE((*got)->axis(Axis::kCost) == std::nullopt);
  } else {
    EXPECT_EQ(h.adm->concurrency()->inflight(), 0);
  }
  got.reset();
  EXPECT_EQ(h.adm->concurrency()->inflight(), 0);
}

testing::EagerTask admit_twice(LeasedAdm& adm, std::vector<bool>& log) {
  absl::StatusOr<Admission> a =
      co_await adm.async_admit({.key = "co", .now_ms = kEpoch});
  log.push_back(a.ok() && a->allowed());
  absl::StatusOr<Admission> b =
      co_await adm.async_admit({.key = "co", .now_ms = kEpoch});
  log.push_back(b.ok() && b->allowed());
}

TEST(UnifiedAdmissionAsync, TheAwaitableSuspendsOnlyForALaterAnswer) {
  HeldAdmission h;
  std::vector<bool> log;
  admit_twice(*h.adm, log);
  EXPECT_TRUE(log.empty()) << "suspended on the lease";
  h.held->deliver_all();
  // Resumed by the lease; the second admission was a local hit, inline.
  EXPECT_EQ(log, (std::vector<bool>{true, true}));
  EXPECT_EQ(h.held->held(), 0u);
  EXPECT_EQ(h.adm->concurrency()->inflight(), 0);
}

// Many threads admit while one delivers leases: every completion runs
// exactly once, and every slot comes back.
TEST(UnifiedAdmissionAsync, ThreadsAdmitWhileLeasesArriveExactlyOnce) {
  constexpr int kThreads = 6, kEach = 800;
  HeldAdmission h(kThreads * kEach);  // no concurrency denial
  std::atomic<int> completions{0}, allowed{0};
  std::atomic<bool> stop{false};
  std::thread deliverer([&] {
    while (!stop.load()) {
      if (!h.held->deliver_one()) std::this_thread::yield();
    }
    h.held->deliver_all();
  });
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i) {
        const std::string key = "k" + std::to_string((t + i) % 5);
        h.adm->admit_async({.key = key, .cost = 0.01, .now_ms = kEpoch},
                           [&](absl::StatusOr<Admission> a) {
                             if (a.ok() && a->allowed()) ++allowed;
                             // The slot goes back before it is counted.
                             a = absl::CancelledError("released");
                             ++completions;
                           });
      }
    });
  }
  for (std::thread& t : threads) t.join();
  const auto give_up =
      std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (completions.load() < kThreads * kEach &&
         std::chrono::steady_clock::now() < give_up) {
    std::this_thread::yield();
  }
  stop = true;
  deliverer.join();
  EXPECT_EQ(completions.load(), kThreads * kEach);
  // 100 per window per key over 5 keys, one window.
  EXPECT_EQ(allowed.load(), 500);
  EXPECT_EQ(h.adm->concurrency()->inflight(), 0);
}

}  // namespace
}  // namespace unified_admission_async_test
}  // namespace throttlekit
