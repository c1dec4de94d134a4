// src/server/denial_signal.h
//
// Provides `DenialSignal`: how Monitor.Watch learns that a policy recorded a
// denial (docs/server.md, "Metrics and the Monitor door"), at no cost to
// the denial path beyond one relaxed load while nobody watches.
//
// One signal serves every policy of a server (`Policies` hands it to each
// `PolicyMetrics`), so a watcher of all policies waits in one place. A
// watcher holds a `DenialSignal::Watcher` for as long as it follows, and
// loops:
//
//     const uint64_t seen = signal.epoch();
//     if (signal.closed()) break;
//     ... read the denial rings it follows (PolicyMetrics::denials_since)
//     signal.wait(seen, timeout);
//
// The denial path calls `denied()` after the denial is in its ring. With no
// watcher registered that is one relaxed load and a not-taken branch. With
// one, it advances the epoch (one atomic increment) and, only if a watcher
// is asleep in `wait`, takes the mutex and wakes every sleeper.
//
// Why the relaxed load is enough: a watcher registers before its first
// read of a ring, and each ring is read and written under its spin lock. A
// denial whose ring write comes after a watcher's read, in that lock's
// order, is ordered after the registration by the lock (acquire/release),
// so its load sees the count non-zero; a denial whose write comes before
// the read is seen by the read itself. The same argument puts the epoch
// increment after the watcher's `epoch()` load, so its `wait` returns.
//
// Why no wake-up is lost inside `wait`: the sleeper counts itself in
// `sleepers_` and then tests the epoch, the denial path increments the
// epoch and then tests `sleepers_`, all sequentially consistent; so either
// the sleeper sees the new epoch and does not sleep, or the denial path
// sees the sleeper and takes the mutex, which the sleeper holds until it
// is inside the condition variable's wait.
//
// Thread-safety: every method is safe to call concurrently.

#ifndef THROTTLEKIT_SRC_SERVER_DENIAL_SIGNAL_H_
#define THROTTLEKIT_SRC_SERVER_DENIAL_SIGNAL_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>

#include "throttlekit/core/mutex.h"

namespace throttlekit::server {

class DenialSignal {
 public:
  DenialSignal() = default;
  DenialSignal(const DenialSignal&) = delete;
  DenialSignal& operator=(const DenialSignal&) = delete;

  // Registers a watcher for its lifetime: while one exists, `denied()`
  // advances the epoch and wakes sleepers. Belongs to one thread.
  class Watcher {
   public:
    explicit Watcher(DenialSignal& signal) : signal_(signal) {
      signal_.watchers_.fetch_add(1, std::memory_order_seq_cst);
    }
    ~Watcher() { signal_.watchers_.fetch_sub(1, std::memory_order_seq_cst); }
    Watcher(const Watcher&) = delete;
    Watcher& operator=(const Watcher&) = delete;

   private:
    DenialSignal& signal_;
  };

  // Called by the denial path after the denial is readable in its ring.
  // One relaxed load while no `Watcher` exists.
  void denied() noexcept {
    if (watchers_.load(std::memory_order_relaxed) != 0) [[unlikely]] {
      advance(/*always_wake=*/false);
    }
  }

  // The number of wake-ups so far: read it before reading the rings, and
  // pass it to `wait`.
  uint64_t epoch() const noexcept {
    return epoch_.load(std::memory_order_seq_cst);
  }

  // Blocks until the epoch is no longer `seen` (a denial since, or
  // `close()`), or `timeout` passes. Returns false on timeout only.
  bool wait(uint64_t seen, std::chrono::milliseconds timeout) {
    MutexLock lock(mu_);
    NativeWait native(mu_);
    sleepers_.fetch_add(1, std::memory_order_seq_cst);
    const bool moved = cv_.wait_for(native.lock(), timeout, [&] {
      return epoch_.load(std::memory_order_seq_cst) != seen;
    });
    sleepers_.fetch_sub(1, std::memory_order_seq_cst);
    return moved;
  }

  // Ends every wait, now and later (the server is shutting down): `closed()`
  // becomes true before the epoch moves. Idempotent.
  void close() {
    closed_.store(true, std::memory_order_seq_cst);
    advance(/*always_wake=*/true);
  }
  bool closed() const noexcept {
    return closed_.load(std::memory_order_seq_cst);
  }

 private:
  void advance(bool always_wake) {
    epoch_.fetch_add(1, std::memory_order_seq_cst);
    if (!always_wake && sleepers_.load(std::memory_order_seq_cst) == 0) {
      return;
    }
    // Taken and dropped so a sleeper that counted itself is inside
    // `cv_.wait_for` (it releases the mutex only there) before the notify.
    { MutexLock lock(mu_); }
    cv_.notify_all();
  }

  // Watchers registered; the only word the denial path reads when zero, on
  // a line of its own so the words that move while someone watches do not
  // evict it from the cores that deny.
  alignas(64) std::atomic<int> watchers_{0};
  // Moves on every denial while a watcher exists, and at `close()`.
  alignas(64) std::atomic<uint64_t> epoch_{0};
  // Watchers inside `wait` (so a denial wakes no one when none sleeps).
  std::atomic<int> sleepers_{0};
  std::atomic<bool> closed_{false};
  Mutex mu_;
  std::condition_variable cv_;
};

}  // namespace throttlekit::server

#endif  // THROTTLEKIT_SRC_SERVER_DENIAL_SIGNAL_H_
