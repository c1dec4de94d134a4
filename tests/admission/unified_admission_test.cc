// Tests of UnifiedAdmission (admission/unified_admission.h): the
// composition matrix (each axis binding, the slot released on a downstream
// denial, the short-circuit leaving later axes empty and unspent, an error
// releasing the slot), the lease shim, absent axes, bad input, a fixed
// ceiling, a distributed node's limiter as the concurrency axis, equality
// with the same engines called in sequence, and the observer (one lane
// function; a throwing observer changes nothing).

#include "throttlekit/admission/unified_admission.h"

#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "support/test_time.h"
#include "throttlekit/concurrency/distributed_concurrency.h"
#include "throttlekit/concurrency/nano_clock_ref.h"
#include "throttlekit/coordinator/memory_coordinator.h"
#include "throttlekit/coordinator/strict_rate_limiter.h"
#include "throttlekit/store/rate_limiter.h"
#include "throttlekit/strategy/fixed_window.h"
#include "throttlekit/strategy/gcra.h"
#include "throttlekit/strategy/token_bucket.h"

namespace throttlekit {
namespace unified_admission_test {
namespace {

using testing::kEpoch;
using EpochRef = ClockRef<ManualClock>;
using Window = RateLimiter<FixedWindow, EpochRef>;
using Bucket = RateLimiter<TokenBucket, EpochRef>;

// The engines' own clock (for peek and forecast): the tests' epoch.
const ManualClock& engine_clock() {
  static const ManualClock clock(kEpoch);
  return clock;
}
using ManualNano = NanoClockRef<ManualMonotonicClock>;
using Adm = BasicUnifiedAdmission<Window, Bucket, SystemClock, ManualNano>;

std::shared_ptr<Window> window(int64_t limit) {
  return std::make_shared<Window>(*Window::create(
      {.limit = limit, .window_ms = 1000}, {}, EpochRef(engine_clock())));
}
std::shared_ptr<Bucket> bucket(double capacity) {
  return std::make_shared<Bucket>(*Bucket::create(
      {.capacity = static_cast<int64_t>(capacity), .refill_per_sec = capacity},
      {}, EpochRef(engine_clock())));
}

// An adaptive limiter on a manual clock, its limit pinned at `limit`.
struct Slots {
  ManualMonotonicClock nano{1'000'000};
  std::shared_ptr<BasicAdaptiveConcurrency<ManualNano>> limiter;
  explicit Slots(int64_t limit) {
    AdaptiveConcurrencyOptions o;
    o.law = ConcurrencyLaw::kAimd;
    o.initial_limit = o.min_limit = o.max_limit = limit;
    limiter =
        *BasicAdaptiveConcurrency<ManualNano>::create(o, ManualNano(nano));
  }
};

std::unique_ptr<Adm> make(Slots& slots, std::shared_ptr<Window> rate,
                          std::shared_ptr<Bucket> cost,
                          std::shared_ptr<DecisionObserver> observer = {}) {
  auto a = Adm::create({.concurrency = slots.limiter,
                        .rate = std::move(rate),
                        .cost = std::move(cost),
                        .observer = std::move(observer)},
                       SystemClock{}, ManualNano(slots.nano));
  EXPECT_TRUE(a.ok()) << a.status();
  return *std::move(a);
}

// `a` is a denial that `axis` bound: that axis refused (its lane,
// `lane`, names the denial), and the admission holds no slot.
void expect_bound_by(const absl::StatusOr<Adm::Admission>& a, Axis axis,
                     std::string_view lane) {
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_FALSE(a->allowed());
  EXPECT_EQ(a->binding_axis(), axis);
  EXPECT_EQ(a->deny_lane(), lane);
  ASSERT_TRUE(a->axis(axis));
  EXPECT_FALSE(a->axis(axis)->allowed);
  EXPECT_FALSE(a->holds_slot());
}

TEST(UnifiedAdmission, AllThreeAdmitAndTheCallerHoldsTheSlot) {
  Slots slots(2);
  auto rate = window(5);
  auto cost = bucket(10);
  auto adm = make(slots, rate, cost);
  absl::StatusOr<Adm::Admission> a = adm->admit_at("t", kEpoch, 3);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_TRUE(a->allowed());
  EXPECT_TRUE(a->holds_slot());
  EXPECT_EQ(slots.limiter->inflight(), 1);
  EXPECT_FALSE(a->binding_axis());
  EXPECT_FALSE(a->deny_lane());
  // The combined decision: min limit, min remaining, max reset.
  const Decision c = *a->axis(Axis::kConcurrency);
  const Decision r = *a->axis(Axis::kRate);
  const Decision k = *a->axis(Axis::kCost);
  EXPECT_EQ(c, (Decision{true, 2, 1, kEpoch, 0}));
  EXPECT_EQ(r.remaining, 4);
  EXPECT_EQ(k.remaining, 7);
  EXPECT_EQ(a->decision(), combine(combine(c, r), k));
  EXPECT_EQ(a->decision().limit, 2);
  EXPECT_EQ(a->decision().remaining, 1);
  a->release(PermitOutcome::kSuccess);
  EXPECT_FALSE(a->holds_slot());
  EXPECT_EQ(slots.limiter->inflight(), 0);
  a->release(PermitOutcome::kDropped);  // idempotent
  EXPECT_EQ(slots.limiter->inflight(), 0);
}

TEST(UnifiedAdmission, ConcurrencyBindsAndShortCircuits) {
  Slots slots(1);
  auto rate = window(5);
  auto cost = bucket(10);
  auto adm = make(slots, rate, cost);
  absl::StatusOr<Adm::Admission> held = adm->admit_at("t", kEpoch, 1);
  ASSERT_TRUE(held.ok() && held->allowed());
  absl::StatusOr<Adm::Admission> a = adm->admit_at("t", kEpoch + 7, 4);
  ASSERT_NO_FATAL_FAILURE(
      expect_bound_by(a, Axis::kConcurrency, "concurrency"));
  EXPECT_FALSE(a->axis(Axis::kRate));  // never asked
  EXPECT_FALSE(a->axis(Axis::kCost));
  // Nothing spent on the later axes.
  EXPECT_EQ(rate->peek("t")->remaining, 4);
  EXPECT_EQ(cost->forecast("t", 1)->spendable_now, 9);
  // The lease shim: no sample yet, so the hint is the floor of 1 ms.
  EXPECT_EQ(a->decision(), (Decision{false, 1, 0, kEpoch + 7, 1}));
  EXPECT_EQ(slots.limiter->inflight(), 1);
}

// A DistributedConcurrency node's limiter on the concurrency axis: admit()
// holds the node's fleet share as its ceiling, and a share lowered by the
// coordinator binds the next admission.
TEST(UnifiedAdmission, ADistributedNodeOnTheConcurrencyAxis) {
  ManualMonotonicClock nano{1'000'000};
  ManualClock store_clock(kEpoch);
  std::shared_ptr<Coordinator> store = *MemoryCoordinator::create(
      {}, std::make_shared<ClockAdapter<ClockRef<ManualClock>>>(
              ClockRef<ManualClock>(store_clock)));
  DistributedConcurrencyOptions o;
  o.node_id = "a";
  o.key = "fleet";
  o.local.law = ConcurrencyLaw::kAimd;
  o.local.initial_limit = o.local.min_limit = o.local.max_limit = 4;
  auto scheduler = std::make_unique<ManualBeatScheduler>();
  ManualBeatScheduler* beats = scheduler.get();
  auto node = *BasicDistributedConcurrency<ManualNano>::create(
      o, store, ManualNano(nano), std::move(scheduler));
  beats->run_tick();
  ASSERT_EQ(node->stats().share, 4);
  auto adm = *Adm::create({.concurrency = node->limiter(),
                           .rate = window(100),
                           .cost = bucket(100)},
                          SystemClock{}, ManualNano(nano));
  std::vector<Adm::Admission> held;
  for (int i = 0; i < 4; ++i) {
    absl::StatusOr<Adm::Admission> a = adm->admit_at("t", kEpoch, 1);
    ASSERT_TRUE(a.ok() && a->allowed());
    held.push_back(*std::move(a));
  }
  // A second node joins; the first's next beat halves its share.
  ASSERT_TRUE(store
                  ->heartbeat("fleet",
                              {.node_id = "b", .seq = 1, .local_limit = 4},
                              {.lease_ttl_ms = 2000})
                  .ok());
  held.clear();
  nano.advance_ns(int64_t{1000} * 1'000'000);
  store_clock.advance_ms(1000);
  beats->run_tick();
  EXPECT_EQ(node->stats().share, 2);
  for (int i = 0; i < 2; ++i) {
    absl::StatusOr<Adm::Admission> a = adm->admit_at("t", kEpoch, 1);
    ASSERT_TRUE(a.ok() && a->allowed());
    held.push_back(*std::move(a));
  }
  absl::StatusOr<Adm::Admission> over = adm->admit_at("t", kEpoch, 1);
  ASSERT_TRUE(over.ok());
  EXPECT_FALSE(over->allowed());
  EXPECT_EQ(over->binding_axis(), Axis::kConcurrency);
}

TEST(UnifiedAdmission, RefusedSlotHintIsTheLastLatencyRounded) {
  Slots slots(1);
  auto adm = make(slots, nullptr, nullptr);
  for (const auto& [rtt_ns, hint] : std::vector<std::pair<int64_t, int64_t>>{
           {2'400'000, 2}, {2'500'000, 3}, {300'000, 1}, {41'000'000, 41}}) {
    absl::StatusOr<Adm::Admission> held = adm->admit_at("t", kEpoch);
    ASSERT_TRUE(held.ok() && held->allowed());
    slots.nano.advance_ns(rtt_ns);
    held->release(PermitOutcome::kSuccess);  // one sample of rtt_ns
    held = adm->admit_at("t", kEpoch);
    absl::StatusOr<Adm::Admission> refused = adm->admit_at("t", kEpoch + 3);
    ASSERT_TRUE(refused.ok());
    EXPECT_FALSE(refused->allowed());
    EXPECT_EQ(refused->decision().retry_after_ms, hint) << rtt_ns;
    EXPECT_EQ(refused->decision().reset_at_ms, kEpoch + 3);
  }
}

TEST(UnifiedAdmission, RateBindsReleasesTheSlotAndLeavesCostUnasked) {
  Slots slots(4);
  auto rate = window(1);
  auto cost = bucket(10);
  auto adm = make(slots, rate, cost);
  ASSERT_TRUE(adm->admit_at("t", kEpoch, 2)->allowed());
  absl::StatusOr<Adm::Admission> a = adm->admit_at("t", kEpoch, 2);
  // The slot is released as the denial is made.
  ASSERT_NO_FATAL_FAILURE(expect_bound_by(a, Axis::kRate, "rate"));
  EXPECT_TRUE(a->axis(Axis::kConcurrency)->allowed);
  EXPECT_FALSE(a->axis(Axis::kCost));
  EXPECT_EQ(cost->forecast("t", 1)->spendable_now, 8);  // only the first spent
  // The first admission's slot was dropped with its handle (destroyed
  // above), this one's at the denial: nothing in flight.
  EXPECT_EQ(slots.limiter->inflight(), 0);
  a->release();  // a no-op
  EXPECT_EQ(slots.limiter->inflight(), 0);
  EXPECT_EQ(a->decision().retry_after_ms, a->axis(Axis::kRate)->retry_after_ms);
}

TEST(UnifiedAdmission, CostBindsAfterTheRateAxisHasCounted) {
  Slots slots(4);
  auto rate = window(5);
  auto cost = bucket(10);
  auto adm = make(slots, rate, cost);
  absl::StatusOr<Adm::Admission> a = adm->admit_at("t", kEpoch, 11);
  ASSERT_NO_FATAL_FAILURE(expect_bound_by(a, Axis::kCost, "cost"));
  EXPECT_TRUE(a->axis(Axis::kRate)->allowed);
  // As the two engines called in sequence: the rate axis counted.
  EXPECT_EQ(rate->peek("t")->remaining, 4);
  EXPECT_EQ(slots.limiter->inflight(), 0);
  EXPECT_EQ(a->decision().retry_after_ms, a->axis(Axis::kCost)->retry_after_ms);
}

// Any sequence of admissions equals the same engines asked in sequence by
// hand: the same decisions, the same state after each step.
TEST(UnifiedAdmission, EqualsTheEnginesCalledInSequence) {
  Slots slots(1'000);
  auto rate = window(7);
  auto cost = bucket(20);
  auto adm = make(slots, rate, cost);
  auto twin_rate = window(7);
  auto twin_cost = bucket(20);
  std::vector<Adm::Admission> held;
  for (int i = 0; i < 400; ++i) {
    const int64_t now = kEpoch + i * 37;
    const double c = 1 + (i * 7) % 9;
    const std::string key = "k" + std::to_string(i % 3);
    absl::StatusOr<Adm::Admission> a = adm->admit_at(key, now, c);
    ASSERT_TRUE(a.ok());
    Decision want = combine(kAllowFull, *a->axis(Axis::kConcurrency));
    const Decision r = *twin_rate->check_at(key, now, 1);
    want = combine(want, r);
    EXPECT_EQ(*a->axis(Axis::kRate), r) << i;
    if (r.allowed) {
      const Decision k = *twin_cost->check_at(key, now, c);
      want = combine(want, k);
      EXPECT_EQ(*a->axis(Axis::kCost), k) << i;
    } else {
      EXPECT_FALSE(a->axis(Axis::kCost)) << i;
    }
    EXPECT_EQ(a->decision(), want) << i;
    EXPECT_EQ(rate->peek(key)->remaining, twin_rate->peek(key)->remaining);
    if (a->allowed()) held.push_back(*std::move(a));
  }
  EXPECT_EQ(slots.limiter->inflight(), static_cast<int64_t>(held.size()));
  held.clear();
  EXPECT_EQ(slots.limiter->inflight(), 0);
}

// A rate engine whose store is down: every check fails.
struct BrokenEngine {
  struct Stats {};
  absl::StatusOr<Decision> check(std::string_view, double = 1) {
    return absl::UnavailableError("store down");
  }
  absl::StatusOr<Decision> check_at(std::string_view, int64_t, double = 1) {
    return absl::UnavailableError("store down");
  }
  absl::Status check_many(std::span<const std::string_view>,
                          std::span<Decision>, double = 1) {
    return absl::UnavailableError("store down");
  }
  absl::StatusOr<std::vector<Decision>> check_many(
      std::span<const std::string_view>, double = 1) {
    return absl::UnavailableError("store down");
  }
  absl::StatusOr<Decision> peek(std::string_view) {
    return absl::UnavailableError("store down");
  }
  absl::StatusOr<Forecast> forecast(std::string_view, double = 1) {
    return absl::UnavailableError("store down");
  }
  absl::Status reset(std::string_view) { return absl::OkStatus(); }
  Stats stats() { return {}; }
};
static_assert(RateEngine<BrokenEngine>);

TEST(UnifiedAdmission, AnErrorOnALaterAxisReleasesTheSlot) {
  Slots slots(1);
  auto rate = window(5);
  auto adm =
      BasicUnifiedAdmission<Window, BrokenEngine, SystemClock, ManualNano>::
          create({.concurrency = slots.limiter,
                  .rate = rate,
                  .cost = std::make_shared<BrokenEngine>()},
                 SystemClock{}, ManualNano(slots.nano));
  ASSERT_TRUE(adm.ok());
  for (int i = 0; i < 3; ++i) {
    auto a = (*adm)->admit_at("t", kEpoch, 1);
    EXPECT_EQ(a.status().code(), absl::StatusCode::kUnavailable);
    EXPECT_EQ(slots.limiter->inflight(), 0);  // the one slot is free again
  }
  // The rate axis did count each attempt (as in sequence).
  EXPECT_EQ(rate->peek("t")->remaining, 2);
}

TEST(UnifiedAdmission, BadInputTakesNoSlotAndSpendsNothing) {
  Slots slots(1);
  auto rate = window(5);
  auto cost = bucket(10);
  auto adm = make(slots, rate, cost);
  const double bad_costs[] = {0, -1, std::nan(""), INFINITY, 1e300};
  for (double c : bad_costs) {
    EXPECT_EQ(adm->admit_at("t", kEpoch, c).status().code(),
              absl::StatusCode::kInvalidArgument)
        << c;
  }
  EXPECT_EQ(adm->admit_at("", kEpoch, 1).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(slots.limiter->inflight(), 0);
  EXPECT_EQ(rate->peek("t")->remaining, 5);
}

TEST(UnifiedAdmission, AbsentAxesAreTheIdentity) {
  // No axis at all: everything is admitted with the identity decision.
  auto none = UnifiedAdmission<>::create({});
  ASSERT_TRUE(none.ok());
  absl::StatusOr<Admission> a = (*none)->admit_at("t", kEpoch, 5);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->decision(), kAllowFull);
  EXPECT_FALSE(a->holds_slot());
  // A rate axis only, typed with NoAxis for cost; and a null engine of a
  // real type.
  auto rate = window(1);
  auto only_rate = UnifiedAdmission<Window>::create({.rate = rate});
  ASSERT_TRUE(only_rate.ok());
  a = (*only_rate)->admit_at("t", kEpoch);
  EXPECT_EQ(a->decision(), *a->axis(Axis::kRate));
  auto null_cost =
      UnifiedAdmission<Window, Bucket>::create({.rate = window(3)});
  a = (*null_cost)->admit_at("t", kEpoch, 99);
  EXPECT_TRUE(a->allowed());
  EXPECT_FALSE(a->axis(Axis::kCost));
}

TEST(UnifiedAdmission, FixedCeiling) {
  auto adm = UnifiedAdmission<Window>::create(
      {.max_inflight = 2, .rate = window(100)});
  ASSERT_TRUE(adm.ok());
  absl::StatusOr<Admission> a = (*adm)->admit_at("t", kEpoch);
  absl::StatusOr<Admission> b = (*adm)->admit_at("t", kEpoch);
  absl::StatusOr<Admission> c = (*adm)->admit_at("t", kEpoch);
  EXPECT_TRUE(a->allowed() && b->allowed());
  EXPECT_FALSE(c->allowed());
  EXPECT_EQ(c->binding_axis(), Axis::kConcurrency);
  EXPECT_EQ(c->decision().limit, 2);
  a->release(PermitOutcome::kDropped);  // a fixed ceiling never moves
  EXPECT_EQ((*adm)->concurrency()->stats().limit, 2);
  EXPECT_TRUE((*adm)->admit_at("t", kEpoch)->allowed());
}

TEST(UnifiedAdmission, CreateRefusesBadConcurrencyOptions) {
  Slots slots(1);
  auto both = Adm::create({.concurrency = slots.limiter, .max_inflight = 3},
                          SystemClock{}, ManualNano(slots.nano));
  EXPECT_EQ(both.status().code(), absl::StatusCode::kInvalidArgument);
  for (int64_t bad : {int64_t{-1}, (int64_t{1} << 30) + 1}) {
    auto s = UnifiedAdmission<>::create({.max_inflight = bad});
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(s.status().message().find("unified_admission.max_inflight"),
              std::string::npos);
  }
}

// Any backend on an axis: strict over a coordinator on the rate axis.
TEST(UnifiedAdmission, StrictEngineOverACoordinatorOnTheRateAxis) {
  using Strict = StrictRateLimiter<Gcra>;
  auto store = std::shared_ptr<Coordinator>(*MemoryCoordinator::create({}));
  auto strict = std::shared_ptr<Strict>(
      *Strict::create({.limit = 2, .period_ms = 1000}, store));
  auto adm =
      UnifiedAdmission<Strict>::create({.max_inflight = 8, .rate = strict});
  ASSERT_TRUE(adm.ok());
  EXPECT_TRUE((*adm)->admit_at("t", kEpoch)->allowed());
  EXPECT_TRUE((*adm)->admit_at("t", kEpoch)->allowed());
  absl::StatusOr<Admission> third = (*adm)->admit_at("t", kEpoch);
  EXPECT_EQ(third->binding_axis(), Axis::kRate);
  EXPECT_EQ((*adm)->concurrency()->inflight(), 0);
}

// Without a caller-supplied `now`, a store-backed axis decides on the
// store's clock, not at the admission's clock read before the round trip
// (a stale `now` would revive an ended window whose state the store has
// dropped); the in-process axes keep the admission's `now`. With a caller's
// `now` (admit_at, AdmitRequest::now_ms), every axis decides at it.
TEST(UnifiedAdmission, StoreBackedAxesDecideOnTheStoreClockUnlessGivenNow) {
  using Strict = StrictRateLimiter<FixedWindow>;
  using EpochAdm = BasicUnifiedAdmission<Strict, Window, EpochRef, ManualNano>;
  ManualClock store_clock(kEpoch + 10'000);  // ten windows ahead
  ManualClock admission_clock(kEpoch);       // the admission's stale read
  ManualMonotonicClock nano{1'000'000};
  std::shared_ptr<Coordinator> store = *MemoryCoordinator::create(
      {}, std::make_shared<ClockAdapter<EpochRef>>(EpochRef(store_clock)));
  auto strict = std::shared_ptr<Strict>(
      *Strict::create({.limit = 1, .window_ms = 1000}, store));
  ASSERT_TRUE(decides_at_store(*strict));
  ASSERT_FALSE(decides_at_store(*window(1)));
  auto adm = *EpochAdm::create(
      {.max_inflight = 8, .rate = strict, .cost = window(100)},
      EpochRef(admission_clock), ManualNano(nano));

  // The caller's now: the store counts the window of kEpoch, and
  // AdmitRequest::now_ms is a caller's now too.
  absl::StatusOr<EpochAdm::Admission> at = adm->admit_at("t", kEpoch);
  ASSERT_TRUE(at.ok() && at->allowed());
  EXPECT_EQ(at->axis(Axis::kRate)->reset_at_ms, kEpoch + 1000);
  absl::StatusOr<EpochAdm::Admission> given =
      adm->admit({.key = "t", .now_ms = kEpoch + 5});
  EXPECT_EQ(given->binding_axis(), Axis::kRate);
  EXPECT_EQ(given->axis(Axis::kRate)->reset_at_ms, kEpoch + 1000);

  // The admission's clock: the store decides in its own window (kEpoch +
  // 10 s), which is empty; the memory axis stays at the admission's now.
  absl::StatusOr<EpochAdm::Admission> own = adm->admit("t");
  ASSERT_TRUE(own.ok());
  EXPECT_TRUE(own->allowed());
  EXPECT_EQ(own->axis(Axis::kRate)->reset_at_ms, kEpoch + 11'000);
  EXPECT_EQ(own->axis(Axis::kCost)->reset_at_ms, kEpoch + 1000);
  absl::StatusOr<EpochAdm::Admission> again = adm->admit("t");
  EXPECT_EQ(again->binding_axis(), Axis::kRate);
  EXPECT_EQ(again->axis(Axis::kRate)->reset_at_ms, kEpoch + 11'000);

  // admit_async takes the same paths, on a fresh key.
  std::optional<absl::StatusOr<EpochAdm::Admission>> async;
  const auto keep = [&](absl::StatusOr<EpochAdm::Admission> a) {
    async.emplace(std::move(a));
  };
  adm->admit_async({.key = "u", .now_ms = kEpoch}, keep);
  ASSERT_TRUE(async.has_value() && async->ok());
  EXPECT_TRUE((*async)->allowed());
  EXPECT_EQ((*async)->axis(Axis::kRate)->reset_at_ms, kEpoch + 1000);
  async.reset();
  adm->admit_async({.key = "u"}, keep);
  ASSERT_TRUE(async.has_value() && async->ok());
  EXPECT_TRUE((*async)->allowed()) << "the store's window is another one";
  EXPECT_EQ((*async)->axis(Axis::kRate)->reset_at_ms, kEpoch + 11'000);
  async.reset();
  adm->admit_async({.key = "u"}, keep);
  ASSERT_TRUE(async.has_value() && async->ok());
  EXPECT_EQ((*async)->binding_axis(), Axis::kRate);
}

// Records events; throws on demand.
class Recorder : public DecisionObserver {
 public:
  void on_decision(const DecisionEvent& e) override {
    events.push_back(e);
    if (throw_now) throw std::runtime_error("observer failed");
  }
  std::vector<DecisionEvent> events;
  bool throw_now = false;
};

// One function gives the result's binding axis, the metric lane and the
// span attribute: they agree on every path.
TEST(UnifiedAdmissionObserver, LaneSpanAndBindingAxisNeverDisagree) {
  Slots slots(1);
  auto recorder = std::make_shared<Recorder>();
  auto adm = make(slots, window(2), bucket(5), recorder);
  std::vector<Adm::Admission> held;
  struct Step {
    double cost;
    bool keep;
    std::optional<std::string_view> lane;
  };
  const Step steps[] = {
      {1, true, std::nullopt},    // allow, slot held
      {1, false, "concurrency"},  // the one slot is taken
      {9, false, "cost"},         // (after releasing) cost 9 > 5 (rate: 2nd)
      {1, false, "rate"},         // rate: 3rd of 2
  };
  for (const Step& s : steps) {
    if (!s.keep && !held.empty() && s.lane != "concurrency") held.clear();
    absl::StatusOr<Adm::Admission> a = adm->admit_at("t", kEpoch, s.cost);
    ASSERT_TRUE(a.ok());
    EXPECT_EQ(a->deny_lane(), s.lane);
    const DecisionEvent& e = recorder->events.back();
    EXPECT_EQ(e.kind, DecisionKind::kAdmit);
    EXPECT_EQ(e.key, "t");
    EXPECT_EQ(e.decision, a->decision());
    EXPECT_EQ(e.binding_axis, a->binding_axis());
    const auto lane =
        deny_lane(e.decision.allowed, e.binding_axis, e.policy_denied);
    const auto span = binding_axis_attribute(e.decision.allowed, e.binding_axis,
                                             e.policy_denied);
    EXPECT_EQ(lane, s.lane);
    EXPECT_EQ(span, s.lane);  // an axis denial: span == lane
    if (a->binding_axis()) {
      EXPECT_EQ(lane, axis_name(*a->binding_axis()));
    }
    if (s.keep) held.push_back(*std::move(a));
  }
  EXPECT_EQ(recorder->events.size(), 4u);
  // A policy denial: lane "policy", no span attribute, no binding axis.
  EXPECT_EQ(deny_lane(false, std::nullopt, true), "policy");
  EXPECT_FALSE(binding_axis_attribute(false, std::nullopt, true));
  EXPECT_FALSE(deny_lane(true, std::nullopt, false));
}

TEST(UnifiedAdmissionObserver, AThrowingObserverChangesNothing) {
  Slots slots(1);
  auto recorder = std::make_shared<Recorder>();
  recorder->throw_now = true;
  auto rate = window(5);
  auto adm = make(slots, rate, bucket(5), recorder);
  {
    absl::StatusOr<Adm::Admission> a = adm->admit_at("t", kEpoch, 1);
    ASSERT_TRUE(a.ok());
    EXPECT_TRUE(a->allowed());
    EXPECT_EQ(slots.limiter->inflight(), 1);
  }
  EXPECT_EQ(slots.limiter->inflight(), 0);
  absl::StatusOr<Adm::Admission> denied = adm->admit_at("t", kEpoch, 50);
  ASSERT_TRUE(denied.ok());
  EXPECT_EQ(denied->binding_axis(), Axis::kCost);
  EXPECT_EQ(slots.limiter->inflight(), 0);
  EXPECT_EQ(recorder->events.size(), 2u);
}

// The bid-price policy is asked first: a request below its bid is denied
// with no binding axis, takes no slot and spends nothing.
TEST(UnifiedAdmissionPolicy, DeniesBelowTheBidBeforeAnyAxis) {
  Slots slots(4);
  auto rate = window(5);
  auto recorder = std::make_shared<Recorder>();
  auto policy = std::shared_ptr<BidPricePolicy>(
      *BidPricePolicy::create({.duals = Duals{.rate = 5, .cost = 1}}));
  auto adm = Adm::create({.concurrency = slots.limiter,
                          .rate = rate,
                          .cost = bucket(100),
                          .observer = recorder,
                          .policy = policy},
                         SystemClock{}, ManualNano(slots.nano));
  ASSERT_TRUE(adm.ok());
  // bid = 5 + 1 * cost: value 7 clears cost 2, not cost 3.
  absl::StatusOr<Adm::Admission> low =
      (*adm)->admit({.key = "t", .cost = 3, .value = 7, .now_ms = kEpoch});
  ASSERT_TRUE(low.ok()) << low.status();
  EXPECT_FALSE(low->allowed());
  EXPECT_TRUE(low->policy_denied());
  EXPECT_FALSE(low->binding_axis());
  EXPECT_EQ(low->deny_lane(), "policy");
  EXPECT_FALSE(low->axis(Axis::kConcurrency));
  EXPECT_FALSE(low->axis(Axis::kRate));
  EXPECT_EQ(low->decision().retry_after_ms, 0);
  EXPECT_EQ(slots.limiter->inflight(), 0);
  EXPECT_EQ(rate->peek("t")->remaining, 5);
  const DecisionEvent& e = recorder->events.back();
  EXPECT_TRUE(e.policy_denied);
  EXPECT_EQ(deny_lane(e.decision.allowed, e.binding_axis, e.policy_denied),
            "policy");
  EXPECT_FALSE(binding_axis_attribute(e.decision.allowed, e.binding_axis,
                                      e.policy_denied));

  absl::StatusOr<Adm::Admission> high =
      (*adm)->admit({.key = "t", .cost = 2, .value = 7, .now_ms = kEpoch});
  ASSERT_TRUE(high.ok());
  EXPECT_TRUE(high->allowed());
  EXPECT_FALSE(high->policy_denied());
  EXPECT_EQ(rate->peek("t")->remaining, 4);
  // With a policy every admission needs a value.
  EXPECT_EQ((*adm)->admit("t", 1).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*adm)->admit_at("t", kEpoch, 1).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*adm)->admit({.key = "t", .value = std::nan("")}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*adm)->admit({.key = "", .value = 9}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(policy->stats().policy_denied, 1);
}

}  // namespace
}  // namespace unified_admission_test
}  // namespace throttlekit
