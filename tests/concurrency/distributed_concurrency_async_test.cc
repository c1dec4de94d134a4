// DistributedConcurrency's beat without waiting (docs/async.md,
// docs/distributed_concurrency.md): `beat_async` over a coordinator whose
// heartbeats the test delivers (tests/support/held_coordinator.h). The
// grant is applied when its answer arrives, not before; one beat is in
// flight at a time (the scheduler's ticks send none meanwhile, another
// `beat_async` is refused at once, `beat_now` waits for it); a failed
// answer changes nothing; the destructor waits for the beat in flight.
// Under ThreadSanitizer too.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <thread>

#include "support/held_coordinator.h"
#include "throttlekit/concurrency/distributed_concurrency.h"
#include "throttlekit/concurrency/nano_clock_ref.h"
#include "throttlekit/coordinator/memory_coordinator.h"
#include "throttlekit/core/clock.h"

namespace throttlekit {
namespace distributed_concurrency_async_test {
namespace {

using Clock = NanoClockRef<ManualMonotonicClock>;
using Node = BasicDistributedConcurrency<Clock>;

class DistributedConcurrencyAsync : public ::testing::Test {
 protected:
  DistributedConcurrencyAsync()
      : held_(std::make_shared<testing::HeldCoordinator>(
            std::shared_ptr<Coordinator>(*MemoryCoordinator::create({})))) {}

  std::unique_ptr<Node> start(ManualBeatScheduler** beats) {
    DistributedConcurrencyOptions o;
    o.node_id = "a";
    o.key = "fleet";
    o.heartbeat_ms = 100;
    o.local.initial_limit = 8;
    o.local.max_limit = 1000;
    auto scheduler = std::make_unique<ManualBeatScheduler>();
    *beats = scheduler.get();
    auto node =
        Node::create(std::move(o), held_, Clock(clock_), std::move(scheduler));
    EXPECT_TRUE(node.ok()) << node.status();
    return *std::move(node);
  }

  ManualMonotonicClock clock_{1'700'000'000'000'000'000};
  std::shared_ptr<testing::HeldCoordinator> held_;
};

TEST_F(DistributedConcurrencyAsync, TheGrantIsAppliedWhenItsAnswerArrives) {
  ManualBeatScheduler* beats = nullptr;
  std::unique_ptr<Node> node = start(&beats);
  std::optional<absl::Status> done;
  node->beat_async([&](absl::Status s) { done = s; });
  EXPECT_EQ(held_->beats_held(), 1u);
  EXPECT_FALSE(done.has_value());
  // Before the answer: still in the outage (fail-closed), nothing admitted.
  EXPECT_TRUE(node->stats().outage);
  EXPECT_FALSE(node->acquire());
  // A tick that is due sends no second beat while one is in flight.
  beats->run_tick();
  EXPECT_EQ(held_->beats_held(), 1u);
  // Another beat without waiting is refused at once.
  std::optional<absl::Status> second;
  node->beat_async([&](absl::Status s) { second = s; });
  ASSERT_TRUE(second.has_value());
  EXPECT_TRUE(absl::IsFailedPrecondition(*second)) << *second;
  EXPECT_EQ(held_->beats_held(), 1u);
  // The answer: the grant becomes the ceiling.
  ASSERT_TRUE(held_->deliver_beat());
  ASSERT_TRUE(done.has_value());
  EXPECT_TRUE(done->ok()) << *done;
  const DistributedConcurrencyStats s = node->stats();
  EXPECT_FALSE(s.outage);
  EXPECT_EQ(s.share, 8);
  EXPECT_EQ(s.beats, 1);
  EXPECT_EQ(s.local.ceiling, 8);
  EXPECT_TRUE(node->acquire());
  // With nothing in flight, the next due tick beats again (waited for).
  clock_.advance_ns(200'000'000);
  beats->run_tick();
  EXPECT_EQ(node->stats().beats, 2);
}

TEST_F(DistributedConcurrencyAsync, AFailedAnswerChangesNothing) {
  ManualBeatScheduler* beats = nullptr;
  std::unique_ptr<Node> node = start(&beats);
  ASSERT_TRUE(node->beat_now().ok());
  std::optional<absl::Status> done;
  node->beat_async([&](absl::Status s) { done = s; });
  ASSERT_TRUE(held_->deliver_beat(absl::UnavailableError("partitioned")));
  ASSERT_TRUE(done.has_value());
  EXPECT_TRUE(absl::IsUnavailable(*done)) << *done;
  const DistributedConcurrencyStats s = node->stats();
  EXPECT_EQ(s.failed_beats, 1);
  EXPECT_EQ(s.beats, 1);
  EXPECT_EQ(s.share, 8);  // kept while the lease is valid
  EXPECT_FALSE(s.outage);
  EXPECT_TRUE(absl::IsUnavailable(node->last_error()));
}

TEST_F(DistributedConcurrencyAsync, BeatNowWaitsForTheBeatInFlight) {
  ManualBeatScheduler* beats = nullptr;
  std::unique_ptr<Node> node = start(&beats);
  std::atomic<bool> async_done{false};
  node->beat_async([&](absl::Status s) {
    EXPECT_TRUE(s.ok()) << s;
    async_done.store(true);
  });
  std::atomic<bool> now_done{false};
  std::thread waiter([&] {
    EXPECT_TRUE(node->beat_now().ok());
    // The beat in flight was applied before this one was sent (its
    // `on_done` runs after that, with no lock held, possibly later still).
    EXPECT_EQ(node->stats().beats, 2);
    now_done.store(true);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(now_done.load()) << "beat_now did not wait";
  ASSERT_TRUE(held_->deliver_beat());  // runs the completion, then returns
  waiter.join();
  EXPECT_TRUE(async_done.load());
  EXPECT_TRUE(now_done.load());
  EXPECT_EQ(node->stats().beats, 2);
  EXPECT_EQ(node->stats().failed_beats, 0) << "no stale answer";
}

TEST_F(DistributedConcurrencyAsync, TheDestructorWaitsForTheBeatInFlight) {
  ManualBeatScheduler* beats = nullptr;
  std::unique_ptr<Node> node = start(&beats);
  std::atomic<int> completions{0};
  node->beat_async([&](absl::Status s) {
    EXPECT_TRUE(s.ok()) << s;
    completions.fetch_add(1);
  });
  std::atomic<bool> destroyed{false};
  std::thread destroyer([&] {
    node.reset();
    destroyed.store(true);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(destroyed.load()) << "destroyed with a beat in flight";
  ASSERT_TRUE(held_->deliver_beat());
  destroyer.join();
  EXPECT_TRUE(destroyed.load());
  EXPECT_EQ(completions.load(), 1);
}

}  // namespace
}  // namespace distributed_concurrency_async_test
}  // namespace throttlekit
