// src/server/blocking_pool.h
//
// Provides `BlockingPool`: the threads on which throttlekit-server runs the
// engine calls that wait on a store and have no asynchronous form (the
// Envoy door's peeks over a store), so that gRPC's callback threads, which
// serve every other call, never wait on a store (docs/server.md, "The
// RPCs").
//
//     BlockingPool pool(16);
//     pool.run([&] { answer(engine.check(key)); });
//
// Threads start on demand (a task that finds no thread idle starts one,
// up to `max_threads`) and stay until the pool is destroyed; tasks beyond
// them queue and run in arrival order. The destructor runs every task
// queued, then joins.
//
// Thread-safety: `run` and `threads` may be called concurrently.

#ifndef THROTTLEKIT_SRC_SERVER_BLOCKING_POOL_H_
#define THROTTLEKIT_SRC_SERVER_BLOCKING_POOL_H_

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "throttlekit/core/mutex.h"

namespace throttlekit::server {

class BlockingPool {
 public:
  using Task = absl::AnyInvocable<void() &&>;

  // `max_threads` >= 1 (the server validates its option).
  explicit BlockingPool(int max_threads) : max_threads_(max_threads) {}
  BlockingPool(const BlockingPool&) = delete;
  BlockingPool& operator=(const BlockingPool&) = delete;

  ~BlockingPool() {
    std::vector<std::thread> threads;
    {
      MutexLock lock(mu_);
      stopping_ = true;
      threads.swap(threads_);
    }
    cv_.notify_all();
    for (std::thread& t : threads) t.join();
  }

  // Runs `task` on a pool thread, now or when one is free.
  void run(Task task) {
    bool start = false;
    {
      MutexLock lock(mu_);
      tasks_.push_back(std::move(task));
      if (idle_ < tasks_.size() &&
          threads_.size() < static_cast<size_t>(max_threads_)) {
        threads_.emplace_back([this] { loop(); });
        start = true;
      }
    }
    if (!start) cv_.notify_one();
  }

  // The threads started so far.
  size_t threads() const {
    MutexLock lock(mu_);
    return threads_.size();
  }

 private:
  void loop() {
    MutexLock lock(mu_);
    for (;;) {
      if (tasks_.empty()) {
        if (stopping_) return;
        ++idle_;
        NativeWait native(mu_);
        cv_.wait(native.lock(), [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
          return stopping_ || !tasks_.empty();
        });
        --idle_;
        continue;
      }
      Task task = std::move(tasks_.front());
      tasks_.pop_front();
      lock.unlock();
      std::move(task)();
      lock.lock();
    }
  }

  const int max_threads_;
  mutable Mutex mu_;
  std::condition_variable cv_;
  std::deque<Task> tasks_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> threads_ ABSL_GUARDED_BY(mu_);
  size_t idle_ ABSL_GUARDED_BY(mu_) = 0;  // threads waiting for a task
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace throttlekit::server

#endif  // THROTTLEKIT_SRC_SERVER_BLOCKING_POOL_H_
