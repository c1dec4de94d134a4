// The asynchronous surface without a server (core/completion.h,
// core/check_awaitable.h): the in-memory engine completes inline, before
// check_async returns, and allocates nothing; the awaitable never suspends
// on an inline answer and resumes exactly once, on the completing thread,
// when the answer comes later.
#include "throttlekit/core/check_awaitable.h"

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <coroutine>
#include <deque>
#include <exception>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "support/allocation_counter.h"
#include "support/eager_task.h"
#include "throttlekit/core/completion.h"
#include "throttlekit/core/rate_engine.h"
#include "throttlekit/store/rate_limiter.h"
#include "throttlekit/strategy/gcra.h"

namespace throttlekit {
namespace check_awaitable_test {
namespace {

static_assert(AsyncRateEngine<RateLimiter<Gcra>>);

using Task = testing::EagerTask;

TEST(CheckAsync, MemoryCompletesInlineWithoutAllocating) {
  auto limiter = *RateLimiter<Gcra>::create({.limit = 3, .period_ms = 1000});
  ASSERT_TRUE(limiter.check("k").ok());  // the key exists: no insert below
  int calls = 0;
  int allowed = 0;
  const long before = testing::allocations();
  for (int i = 0; i < 5; ++i) {
    limiter.check_async("k", [&](absl::StatusOr<Decision> d) {
      ++calls;
      if (d.ok() && d->allowed) ++allowed;
    });
    EXPECT_EQ(calls, i + 1) << "completed before check_async returned";
  }
  EXPECT_EQ(testing::allocations() - before, 0);
  EXPECT_EQ(allowed, 2);  // 3 per second, one taken above
}

TEST(CheckAsync, BadInputCompletesInlineWithTheStatus) {
  auto limiter = *RateLimiter<Gcra>::create({.limit = 3, .period_ms = 1000});
  std::optional<absl::StatusOr<Decision>> got;
  limiter.check_async("", 1, [&](absl::StatusOr<Decision> d) { got = d; });
  ASSERT_TRUE(got.has_value());
  EXPECT_TRUE(absl::IsInvalidArgument(got->status())) << got->status();
  got.reset();
  limiter.check_async("k", 0, [&](absl::StatusOr<Decision> d) { got = d; });
  ASSERT_TRUE(got.has_value());
  EXPECT_TRUE(absl::IsInvalidArgument(got->status())) << got->status();
}

Task await_memory(RateLimiter<Gcra>& limiter, std::thread::id& ran_on,
                  std::optional<absl::StatusOr<Decision>>& out) {
  absl::StatusOr<Decision> d = co_await limiter.async_check("k");
  ran_on = std::this_thread::get_id();
  out = std::move(d);
}

TEST(CheckAwaitable, NeverSuspendsOnAnInlineAnswer) {
  auto limiter = *RateLimiter<Gcra>::create({.limit = 1, .period_ms = 1000});
  std::thread::id ran_on;
  std::optional<absl::StatusOr<Decision>> first, second;
  await_memory(limiter, ran_on, first);
  // The coroutine ran to its end inside the call, on this thread.
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(ran_on, std::this_thread::get_id());
  EXPECT_TRUE((*first)->allowed);
  await_memory(limiter, ran_on, second);
  ASSERT_TRUE(second.has_value());
  EXPECT_FALSE((*second)->allowed);
}

// An engine whose answers come later, from its own thread: each
// check_async queues the completion; once `release` is called the worker
// answers in order (so every caller has suspended before any answer).
class DeferredEngine {
 public:
  DeferredEngine() : worker_([this] { run(); }) {}
  ~DeferredEngine() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_one();
    worker_.join();
  }

  template <DecisionCallback F>
  void check_async(std::string_view key, double cost, F&& on_done) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      pending_.emplace_back(std::string(key), cost,
                            DecisionCompletion(std::forward<F>(on_done)));
    }
    cv_.notify_one();
  }
  CheckAwaitable<DeferredEngine> async_check(std::string_view key,
                                             double cost = 1) {
    return CheckAwaitable<DeferredEngine>(*this, key, cost);
  }
  std::thread::id worker_id() const { return worker_.get_id(); }
  void release() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      released_ = true;
    }
    cv_.notify_one();
  }

 private:
  void run() {
    int64_t n = 0;
    for (;;) {
      std::tuple<std::string, double, DecisionCompletion> job;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock,
                 [this] { return stop_ || (released_ && !pending_.empty()); });
        if (pending_.empty()) return;
        job = std::move(pending_.front());
        pending_.pop_front();
      }
      // The key's length as the remaining count, so answers are checkable.
      ++n;
      std::move(std::get<2>(job))(Decision{
          true, 100, static_cast<int64_t>(std::get<0>(job).size()), 0, n});
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::tuple<std::string, double, DecisionCompletion>> pending_;
  bool stop_ = false;
  bool released_ = false;
  std::thread worker_;
};

Task await_deferred(DeferredEngine& engine, std::string key,
                    std::atomic<int>& resumed, std::thread::id& ran_on,
                    int64_t& remaining) {
  absl::StatusOr<Decision> d = co_await engine.async_check(key);
  ran_on = std::this_thread::get_id();
  remaining = d.ok() ? d->remaining : -1;
  resumed.fetch_add(1);
}

TEST(CheckAwaitable, ResumesOnceOnTheCompletingThread) {
  DeferredEngine engine;
  constexpr int kCoroutines = 200;
  std::atomic<int> resumed{0};
  std::vector<std::thread::id> ran_on(kCoroutines);
  std::vector<int64_t> remaining(kCoroutines, 0);
  for (int i = 0; i < kCoroutines; ++i) {
    await_deferred(engine, std::string(1 + i % 7, 'k'), resumed, ran_on[i],
                   remaining[i]);
  }
  EXPECT_EQ(resumed.load(), 0) << "every coroutine is suspended";
  engine.release();
  while (resumed.load() < kCoroutines) std::this_thread::yield();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(resumed.load(), kCoroutines);  // none resumed twice
  for (int i = 0; i < kCoroutines; ++i) {
    EXPECT_EQ(ran_on[i], engine.worker_id()) << i;
    EXPECT_EQ(remaining[i], 1 + i % 7) << i;
  }
}

}  // namespace
}  // namespace check_awaitable_test
}  // namespace throttlekit
