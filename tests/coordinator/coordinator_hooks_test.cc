// The Coordinator's one hook per verb (coordinator.h, verb_completion.h):
// the blocking verb reaches the hook with a completion its caller waits
// for, the `*_async` verb with one it does not; a hook that completes
// inline makes the blocking verb allocation-free; one that completes on
// another thread wakes the waiting caller with its value; a hook left to
// its default answers kUnimplemented naming the backend and the verb.

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "support/allocation_counter.h"
#include "support/forwarding_coordinator.h"
#include "support/test_time.h"
#include "throttlekit/coordinator/coordinator.h"
#include "throttlekit/coordinator/memory_coordinator.h"
#include "throttlekit/coordinator/verb_completion.h"
#include "throttlekit/core/clock.h"
#include "throttlekit/core/completion_latch.h"

namespace throttlekit {
namespace coordinator_hooks_test {
namespace {

// A memory store whose clock stands still at `kEpoch`: a test counting
// admissions in one 1 s window must not see the system clock cross a second
// boundary between its calls (run 58 did, under the ASan pass's load).
std::unique_ptr<MemoryCoordinator> still_memory() {
  static ManualClock clock(testing::kEpoch);
  return *MemoryCoordinator::create(
      {}, std::make_shared<ClockAdapter<ClockRef<ManualClock>>>(
              ClockRef<ManualClock>(clock)));
}

AnyStrategy fixed(int64_t limit) {
  return *make_strategy(
      FixedWindow::Options{.limit = limit, .window_ms = 1000});
}

// Records, per verb, whether its hook saw a waiting caller.
class Recording final : public testing::ForwardingCoordinator {
 public:
  explicit Recording(std::shared_ptr<Coordinator> inner)
      : ForwardingCoordinator(std::move(inner)) {}
  std::vector<std::pair<std::string, bool>> seen;

 protected:
  void do_check(const AnyStrategy& s, std::string_view k, int64_t now,
                double cost, VerbCompletion<Decision>&& done) override {
    seen.emplace_back("check", done.caller_waits());
    ForwardingCoordinator::do_check(s, k, now, cost, std::move(done));
  }
  void do_lease(const LeaseBudget& b, std::string_view k, int64_t want,
                VerbCompletion<LeaseGrant>&& done) override {
    seen.emplace_back("lease", done.caller_waits());
    ForwardingCoordinator::do_lease(b, k, want, std::move(done));
  }
  void do_now_ms(VerbCompletion<int64_t>&& done) override {
    seen.emplace_back("now_ms", done.caller_waits());
    ForwardingCoordinator::do_now_ms(std::move(done));
  }
};

TEST(CoordinatorHooks, TheBlockingVerbWaitsOnTheHookAndTheAsyncOneDoesNot) {
  auto memory = still_memory();
  Recording c(std::move(memory));
  ASSERT_TRUE(c.check(fixed(5), "k", 0, 1).ok());
  absl::StatusOr<Decision> async_answer = absl::UnknownError("not run");
  c.check_async(fixed(5), "k", 0, 1, [&](absl::StatusOr<Decision> d) {
    async_answer = std::move(d);
  });
  ASSERT_TRUE(async_answer.ok());
  EXPECT_EQ(async_answer->remaining, 3);
  const LeaseBudget budget = *LeaseBudget::create({10, 1000});
  ASSERT_TRUE(c.lease(budget, "l", 2).ok());
  c.lease_async(budget, "l", 2, [](absl::StatusOr<LeaseGrant>) {});
  ASSERT_TRUE(c.now_ms().ok());
  // ping reads the clock by default, waited for as ping is.
  ASSERT_TRUE(c.ping().ok());
  const std::vector<std::pair<std::string, bool>> want = {{"check", true},
                                                          {"check", false},
                                                          {"lease", true},
                                                          {"lease", false},
                                                          {"now_ms", true}};
  ASSERT_GE(c.seen.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(c.seen[i], want[i]) << "call " << i;
  }
}

TEST(CoordinatorHooks, AnInlineHookMakesTheBlockingVerbAllocationFree) {
  auto memory = still_memory();
  const AnyStrategy s = fixed(1'000'000);
  ASSERT_TRUE(memory->check(s, "warm", 0, 1).ok());  // the key exists
  const LeaseBudget budget = *LeaseBudget::create({1'000'000, 60'000});
  ASSERT_TRUE(memory->lease(budget, "lease", 1).ok());
  const long before = ::throttlekit::testing::allocations();
  for (int i = 0; i < 1000; ++i) {
    absl::StatusOr<Decision> d = memory->check(s, "warm", 0, 1);
    ASSERT_TRUE(d.ok());
    ASSERT_TRUE(d->allowed);
    ASSERT_TRUE(memory->lease(budget, "lease", 1).ok());
    ASSERT_TRUE(memory->now_ms().ok());
  }
  EXPECT_EQ(::throttlekit::testing::allocations() - before, 0);
}

// Completes every check from another thread, after the hook returned.
class Deferred final : public testing::ForwardingCoordinator {
 public:
  explicit Deferred(std::shared_ptr<Coordinator> inner)
      : ForwardingCoordinator(std::move(inner)) {}
  ~Deferred() override {
    for (std::thread& t : threads_) t.join();
  }

 protected:
  void do_check(const AnyStrategy& s, std::string_view k, int64_t now,
                double cost, VerbCompletion<Decision>&& done) override {
    absl::StatusOr<Decision> d = inner().check(s, k, now, cost);
    threads_.emplace_back([done = std::move(done), d = std::move(d)]() mutable {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      std::move(done)(std::move(d));
    });
  }

 private:
  std::vector<std::thread> threads_;
};

TEST(CoordinatorHooks, AHookCompletedOnAnotherThreadWakesTheWaitingCaller) {
  auto memory = still_memory();
  Deferred c(std::move(memory));
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<Decision> d = c.check(fixed(2), "k", 0, 1);
    ASSERT_TRUE(d.ok()) << d.status();
    EXPECT_EQ(d->allowed, i < 2) << "call " << i;
  }
}

TEST(CoordinatorHooks, TheLatchTakesAValueFromAnyThread) {
  for (int i = 0; i < 200; ++i) {
    CompletionLatch<int64_t> latch;
    Completion<int64_t> c = latch.completion();
    std::thread t([&c, i] { std::move(c)(i); });
    EXPECT_EQ(*latch.wait(), i);
    t.join();
  }
}

TEST(CoordinatorHooks, TheLatchWritesIntoTheCallersValueFromAnyThread) {
  for (int i = 0; i < 200; ++i) {
    absl::StatusOr<int64_t> into = absl::UnknownError("not written");
    CompletionLatch<int64_t> latch(into);
    Completion<int64_t> c = latch.completion();
    std::thread t([&c, i] {
      if (i % 2 == 0) {
        std::move(c)(i);
      } else {
        std::move(c)(absl::UnavailableError("down"));
      }
    });
    latch.await();
    if (i % 2 == 0) {
      ASSERT_TRUE(into.ok()) << into.status();
      EXPECT_EQ(*into, i);
    } else {
      EXPECT_EQ(into.status().code(), absl::StatusCode::kUnavailable);
    }
    t.join();
  }
  // Completed inline, on the waiting thread: `await` returns at once.
  absl::StatusOr<int64_t> inline_into;
  CompletionLatch<int64_t> inline_latch(inline_into);
  inline_latch.complete(absl::StatusOr<int64_t>(7));
  inline_latch.await();
  EXPECT_EQ(*inline_into, 7);
}

// A coordinator with only the required hooks: the others answer
// kUnimplemented naming it and the verb.
class Minimal final : public testing::ForwardingCoordinator {
 public:
  explicit Minimal(std::shared_ptr<Coordinator> inner)
      : ForwardingCoordinator(std::move(inner)) {}
  std::string_view backend() const noexcept override { return "minimal"; }

 protected:
  void do_escrow_take(std::string_view key, int64_t want, int64_t now_ms,
                      VerbCompletion<LeaseGrant>&& done) override {
    Coordinator::do_escrow_take(key, want, now_ms, std::move(done));
  }
};

TEST(CoordinatorHooks, ADefaultHookAnswersUnimplementedNamingTheVerb) {
  Minimal c(still_memory());
  absl::StatusOr<LeaseGrant> g = c.escrow_take("k", 1);
  EXPECT_EQ(g.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_EQ(g.status().message(),
            "minimal: escrow_take is not supported by this backend");
  absl::StatusOr<LeaseGrant> async = absl::UnknownError("not run");
  c.escrow_take_async(
      "k", 1, 0, [&](absl::StatusOr<LeaseGrant> r) { async = std::move(r); });
  EXPECT_EQ(async.status().code(), absl::StatusCode::kUnimplemented);
}

TEST(CoordinatorHooks, ThenKeepsWhetherTheCallerWaits) {
  bool ran = false;
  VerbCompletion<int> waited = VerbCompletion<int>::waited(
      [&](absl::StatusOr<int> v) { ran = v.ok() && *v == 7; });
  VerbCompletion<std::string> mapped =
      std::move(waited).then<std::string>([](absl::StatusOr<std::string> s) {
        return absl::StatusOr<int>(static_cast<int>(s->size()));
      });
  EXPECT_TRUE(mapped.caller_waits());
  std::move(mapped)(std::string("seven!!"));
  EXPECT_TRUE(ran);
  VerbCompletion<int> plain([](absl::StatusOr<int>) {});
  EXPECT_FALSE(plain.caller_waits());
  EXPECT_FALSE(std::move(plain)
                   .then<int>([](absl::StatusOr<int> v) { return v; })
                   .caller_waits());
}

}  // namespace
}  // namespace coordinator_hooks_test
}  // namespace throttlekit
