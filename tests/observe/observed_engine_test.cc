// Tests of Observed<E> (observe/observed_engine.h) and the names
// (observe/names.h): every decision of the wrapped engine is reported
// once, with the engine's own decision; the wrapper is a RateEngine over
// engines held by value or by pointer; a throwing observer changes nothing.

#include "throttlekit/observe/observed_engine.h"

#include <gtest/gtest.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "support/test_time.h"
#include "throttlekit/coordinator/memory_coordinator.h"
#include "throttlekit/coordinator/strict_rate_limiter.h"
#include "throttlekit/observe/names.h"
#include "throttlekit/store/rate_limiter.h"
#include "throttlekit/strategy/fixed_window.h"
#include "throttlekit/strategy/gcra.h"

namespace throttlekit {
namespace observed_engine_test {
namespace {

using testing::kEpoch;

class Recorder : public DecisionObserver {
 public:
  void on_decision(const DecisionEvent& e) override {
    keys.emplace_back(e.key);
    events.push_back(e);
    if (throw_now) throw std::runtime_error("tap failed");
  }
  std::vector<DecisionEvent> events;
  std::vector<std::string> keys;
  bool throw_now = false;
};

using Window = RateLimiter<FixedWindow>;
static_assert(RateEngine<Observed<Window>>);
static_assert(RateEngine<Observed<std::unique_ptr<StrictRateLimiter<Gcra>>>>);

TEST(Observed, ReportsEveryDecisionOnce) {
  auto recorder = std::make_shared<Recorder>();
  Observed<Window> engine(*Window::create({.limit = 2, .window_ms = 1000}),
                          recorder, "api_rate");
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<Decision> d = engine.check_at("k", kEpoch, 1);
    ASSERT_TRUE(d.ok());
    ASSERT_EQ(recorder->events.size(), static_cast<size_t>(i + 1));
    EXPECT_EQ(recorder->events.back().decision, *d);
    EXPECT_EQ(recorder->events.back().engine, "api_rate");
    EXPECT_EQ(recorder->events.back().kind, DecisionKind::kCheck);
    EXPECT_GE(recorder->events.back().duration_ns, 0);
  }
  EXPECT_FALSE(recorder->events.back().decision.allowed);
  // check_many: one event per key.
  const std::string_view keys[] = {"a", "b", "a"};
  Decision out[3];
  ASSERT_TRUE(engine.check_many(keys, out, 1).ok());
  EXPECT_EQ(recorder->events.size(), 6u);
  EXPECT_EQ(recorder->keys[5], "a");
  // Errors decide nothing and are not reported; peek is not a decision.
  EXPECT_FALSE(engine.check_at("", kEpoch, 1).ok());
  EXPECT_TRUE(engine.peek("k").ok());
  EXPECT_EQ(recorder->events.size(), 6u);
}

TEST(Observed, NullObserverPassesThrough) {
  Observed<Window> engine(*Window::create({.limit = 1, .window_ms = 1000}),
                          nullptr, "x");
  EXPECT_TRUE(engine.check_at("k", kEpoch)->allowed);
  EXPECT_FALSE(engine.check_at("k", kEpoch)->allowed);
}

TEST(Observed, WrapsEnginesHeldByPointerAndSwallowsAThrowingObserver) {
  auto recorder = std::make_shared<Recorder>();
  recorder->throw_now = true;
  auto store = std::shared_ptr<Coordinator>(*MemoryCoordinator::create({}));
  Observed<std::unique_ptr<StrictRateLimiter<Gcra>>> engine(
      *StrictRateLimiter<Gcra>::create({.limit = 1, .period_ms = 1000}, store),
      recorder, "strict");
  EXPECT_TRUE(engine.check_at("k", kEpoch)->allowed);
  EXPECT_FALSE(engine.check_at("k", kEpoch)->allowed);
  EXPECT_EQ(recorder->events.size(), 2u);
}

TEST(ObserveNames, PrometheusForms) {
  EXPECT_EQ(names::prometheus_name(names::kChecks, true),
            "throttlekit_checks_total");
  EXPECT_EQ(names::prometheus_name(names::kDeniesByAxis, true),
            "throttlekit_denies_by_axis_total");
  EXPECT_EQ(names::prometheus_name(names::kStoreLatency, false),
            "throttlekit_store_latency");
  EXPECT_EQ(names::kAttrBindingAxis, "throttlekit.binding_axis");
  EXPECT_EQ(axis_name(Axis::kRate), names::kLaneRate);
  EXPECT_EQ(axis_name(Axis::kConcurrency), names::kLaneConcurrency);
  EXPECT_EQ(axis_name(Axis::kCost), names::kLaneCost);
}

}  // namespace
}  // namespace observed_engine_test
}  // namespace throttlekit
