// BlockingPool (src/server/blocking_pool.h): every task runs exactly once;
// threads never exceed the cap; tasks beyond the cap wait for a free
// thread; the destructor runs what is queued. Under ThreadSanitizer too.

#include "blocking_pool.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

#include "support/run_threads.h"

namespace throttlekit::server {
namespace blocking_pool_test {
namespace {

TEST(BlockingPool, RunsEveryTaskOnceFromManyThreads) {
  constexpr int kThreads = 6, kEach = 2000;
  std::vector<std::atomic<int>> ran(kThreads * kEach);
  {
    BlockingPool pool(4);
    testing::run_threads(kThreads, [&](int t) {
      for (int i = 0; i < kEach; ++i) {
        pool.run([&ran, n = t * kEach + i] { ran[n].fetch_add(1); });
      }
    });
    EXPECT_LE(pool.threads(), 4u);
  }  // the destructor runs what is still queued
  for (size_t n = 0; n < ran.size(); ++n) {
    ASSERT_EQ(ran[n].load(), 1) << "task " << n;
  }
}

TEST(BlockingPool, TasksBeyondTheCapWaitForAFreeThread) {
  BlockingPool pool(2);
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::atomic<int> blocked{0};
  for (int i = 0; i < 2; ++i) {
    pool.run([&, released] {
      blocked.fetch_add(1);
      released.wait();
    });
  }
  while (blocked.load() < 2) std::this_thread::yield();
  std::mutex mu;
  std::vector<int> order;
  for (int i = 0; i < 5; ++i) {
    pool.run([&, i] {
      std::lock_guard<std::mutex> lock(mu);
      order.push_back(i);
    });
  }
  // Both threads are busy and the cap is reached: nothing else has run.
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(pool.threads(), 2u);
  {
    std::lock_guard<std::mutex> lock(mu);
    EXPECT_TRUE(order.empty());
  }
  release.set_value();
  for (;;) {
    std::lock_guard<std::mutex> lock(mu);
    if (order.size() == 5) break;
  }
  // Two threads take from one queue: starts are in order, ends may cross;
  // every task ran once.
  std::vector<int> sorted = order;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, (std::vector<int>{0, 1, 2, 3, 4}));
}

}  // namespace
}  // namespace blocking_pool_test
}  // namespace throttlekit::server
