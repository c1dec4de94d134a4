// throttlekit/core/mutex.h
//
// Provides `Mutex` and `MutexLock`: a `std::mutex` that clang's thread
// safety analysis understands (so `ABSL_GUARDED_BY(mu_)` and
// `ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_)` are checked by the
// `-Wthread-safety -Werror` build of scripts/test.sh), and its scoped lock.
// Being a `std::mutex` underneath, ThreadSanitizer sees every hand-over
// (the distribution's abseil, and so `absl::Mutex`, is not built for it).
//
//     Mutex mu_;
//     int64_t count_ ABSL_GUARDED_BY(mu_);
//     ...
//     MutexLock lock(mu_);
//     ++count_;
//     cv_.wait(lock, [&] { return count_ > 0; });  // condition_variable_any
//
// `MutexLock` is also BasicLockable, so `std::condition_variable_any` can
// wait on it (it unlocks and relocks inside, which the analysis does not
// see; the lock is held again when `wait` returns). Where the cheaper
// `std::condition_variable` matters (a per-request wake on a hot path),
// `NativeWait` lends it the std::mutex of a `MutexLock`'s scope:
//
//     MutexLock lock(mu_);
//     NativeWait native(mu_);
//     cv_.wait_until(native.lock(), deadline, [&] { return done_; });
//
// Thread-safety: `Mutex` is a mutex; a `MutexLock` belongs to one thread.

#ifndef THROTTLEKIT_CORE_MUTEX_H_
#define THROTTLEKIT_CORE_MUTEX_H_

#include <mutex>

#include "absl/base/thread_annotations.h"

namespace throttlekit {

class ABSL_LOCKABLE Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { mu_.lock(); }
  bool try_lock() ABSL_EXCLUSIVE_TRYLOCK_FUNCTION(true) {
    return mu_.try_lock();
  }
  void unlock() ABSL_UNLOCK_FUNCTION() { mu_.unlock(); }

 private:
  friend class NativeWait;
  std::mutex mu_;
};

// A `std::unique_lock` over a `Mutex` the calling thread holds (through a
// `MutexLock`), for `std::condition_variable` waits; it never unlocks the
// mutex for good (the `MutexLock` does). Belongs to one thread.
class NativeWait {
 public:
  explicit NativeWait(Mutex& mu) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu)
      : lock_(mu.mu_, std::adopt_lock) {}
  ~NativeWait() { lock_.release(); }
  NativeWait(const NativeWait&) = delete;
  NativeWait& operator=(const NativeWait&) = delete;

  std::unique_lock<std::mutex>& lock() noexcept { return lock_; }

 private:
  std::unique_lock<std::mutex> lock_;
};

class ABSL_SCOPED_LOCKABLE MutexLock {
 public:
  explicit MutexLock(Mutex& mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) {
    mu_.lock();
  }
  // Takes over `mu`, already locked by this thread.
  MutexLock(Mutex& mu, std::adopt_lock_t) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu)
      : mu_(mu) {}
  ~MutexLock() ABSL_UNLOCK_FUNCTION() {
    if (held_) mu_.unlock();
  }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

  // BasicLockable, for `std::condition_variable_any` and for code that
  // drops the lock around a slow call.
  void lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() {
    mu_.lock();
    held_ = true;
  }
  void unlock() ABSL_UNLOCK_FUNCTION() {
    held_ = false;
    mu_.unlock();
  }

 private:
  Mutex& mu_;
  bool held_ = true;
};

}  // namespace throttlekit

#endif  // THROTTLEKIT_CORE_MUTEX_H_
