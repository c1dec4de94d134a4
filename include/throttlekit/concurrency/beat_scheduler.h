// throttlekit/concurrency/beat_scheduler.h
//
// Provides `BeatScheduler`, what drives a `DistributedConcurrency` node's
// heartbeats, and its two implementations: `ThreadBeatScheduler` (the
// default: one thread that sleeps between ticks) and `ManualBeatScheduler`
// (tests and simulations run each tick by hand, so no test sleeps).
//
// A scheduler calls the tick it was started with, one call at a time,
// until `stop`: first at once, then each time the delay the previous tick
// returned (in ms) has passed. The tick decides everything else (whether a
// beat is due, eager beats, fencing); the scheduler only keeps time.

#ifndef THROTTLEKIT_CONCURRENCY_BEAT_SCHEDULER_H_
#define THROTTLEKIT_CONCURRENCY_BEAT_SCHEDULER_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "throttlekit/core/mutex.h"

namespace throttlekit {

class BeatScheduler {
 public:
  // The work of one tick; returns the ms until the next tick, >= 1.
  using Tick = std::function<int64_t()>;

  virtual ~BeatScheduler() = default;

  // Starts calling `tick`. Called once, before any other method.
  virtual void start(Tick tick) = 0;
  // No tick runs after `stop` returns (one in progress is waited for).
  // Idempotent. Must not be called from inside the tick.
  virtual void stop() = 0;
};

// One thread per scheduler: runs the tick, sleeps for the delay it
// returned (or until `stop`), repeats. A tick that blocks (a coordinator
// that hangs until its command deadline) delays the next one; the tick's
// owner bounds it. Thread-safe.
class ThreadBeatScheduler final : public BeatScheduler {
 public:
  ThreadBeatScheduler() = default;
  ThreadBeatScheduler(const ThreadBeatScheduler&) = delete;
  ThreadBeatScheduler& operator=(const ThreadBeatScheduler&) = delete;
  ~ThreadBeatScheduler() override { stop(); }

  void start(Tick tick) override {
    thread_ = std::thread([this, tick = std::move(tick)] { run(tick); });
  }

  void stop() override {
    {
      MutexLock lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

 private:
  void run(const Tick& tick) {
    MutexLock lock(mu_);
    while (!stopping_) {
      lock.unlock();
      const int64_t delay_ms = tick();
      lock.lock();
      const auto until = std::chrono::steady_clock::now() +
                         std::chrono::milliseconds(delay_ms < 1 ? 1 : delay_ms);
      while (!stopping_ && std::chrono::steady_clock::now() < until) {
        cv_.wait_until(lock, until);
      }
    }
  }

  Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::condition_variable_any cv_;
  std::thread thread_;
};

// Runs a tick only when told: `run_tick()` calls it on the caller's thread
// and returns the delay it asked for. For tests that drive a node on a
// manual clock. Not thread-safe: one thread drives it.
class ManualBeatScheduler final : public BeatScheduler {
 public:
  void start(Tick tick) override { tick_ = std::move(tick); }
  void stop() override { tick_ = nullptr; }

  // Runs one tick; returns its delay, or -1 when stopped or not started.
  int64_t run_tick() {
    if (!tick_) return -1;
    next_delay_ms_ = tick_();
    ++ticks_;
    return next_delay_ms_;
  }

  // The delay the last tick asked for (0 before the first).
  int64_t next_delay_ms() const { return next_delay_ms_; }
  int64_t ticks() const { return ticks_; }
  bool started() const { return static_cast<bool>(tick_); }

 private:
  Tick tick_;
  int64_t next_delay_ms_ = 0;
  int64_t ticks_ = 0;
};

}  // namespace throttlekit

#endif  // THROTTLEKIT_CONCURRENCY_BEAT_SCHEDULER_H_
