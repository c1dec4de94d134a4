// src/postgres/socket_watchdog.h (internal to throttlekit::postgres)
//
// Provides `SocketWatchdog`: one thread that shuts a socket down
// (`shutdown(fd, SHUT_RDWR)`) once its deadline passes, so a blocking libpq
// call on it returns at once with a broken connection. This is what bounds a
// call by its deadline even when the server stops answering entirely (for
// example frozen with SIGSTOP), which a server-side statement_timeout cannot
// do. The connection whose socket was shut down is then dropped.
//
// Thread-safety: every method is safe to call concurrently.

#ifndef THROTTLEKIT_SRC_POSTGRES_SOCKET_WATCHDOG_H_
#define THROTTLEKIT_SRC_POSTGRES_SOCKET_WATCHDOG_H_

#include <sys/socket.h>

#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "throttlekit/core/mutex.h"

namespace throttlekit::postgres_internal {

class SocketWatchdog {
 public:
  SocketWatchdog() : thread_([this] { run(); }) {}
  ~SocketWatchdog() {
    {
      MutexLock lock(mu_);
      stop_ = true;
    }
    cv_.notify_one();
    thread_.join();
  }
  SocketWatchdog(const SocketWatchdog&) = delete;
  SocketWatchdog& operator=(const SocketWatchdog&) = delete;

  // Watches `fd` until `finish()` or destruction: at `deadline` the socket
  // is shut down. The caller keeps `fd` open while armed.
  class Armed {
   public:
    Armed(SocketWatchdog& dog, int fd, absl::Time deadline)
        : dog_(&dog), id_(dog.arm(fd, deadline)) {}
    ~Armed() { finish(); }
    Armed(const Armed&) = delete;
    Armed& operator=(const Armed&) = delete;

    // Stops watching; true iff the deadline fired (the socket is shut
    // down). Idempotent.
    bool finish() {
      if (dog_ != nullptr) {
        fired_ = dog_->disarm(id_);
        dog_ = nullptr;
      }
      return fired_;
    }

   private:
    SocketWatchdog* dog_;
    uint64_t id_;
    bool fired_ = false;
  };

 private:
  struct Entry {
    int fd;
    absl::Time deadline;
    bool fired = false;
  };

  uint64_t arm(int fd, absl::Time deadline) {
    uint64_t id;
    {
      MutexLock lock(mu_);
      id = next_id_++;
      armed_.emplace(id, Entry{fd, deadline});
    }
    cv_.notify_one();
    return id;
  }

  bool disarm(uint64_t id) {
    MutexLock lock(mu_);
    auto it = armed_.find(id);
    const bool fired = it->second.fired;
    armed_.erase(it);
    return fired;
  }

  void run() {
    MutexLock lock(mu_);
    while (!stop_) {
      absl::Time next = absl::InfiniteFuture();
      const absl::Time now = absl::Now();
      for (auto& [id, e] : armed_) {
        if (e.fired) continue;
        if (e.deadline <= now) {
          ::shutdown(e.fd, SHUT_RDWR);
          e.fired = true;
        } else if (e.deadline < next) {
          next = e.deadline;
        }
      }
      if (next == absl::InfiniteFuture()) {
        cv_.wait(lock);
      } else {
        cv_.wait_until(lock, absl::ToChronoTime(next));
      }
    }
  }

  // A `Mutex` (core/mutex.h: a std::mutex, checked by clang's analysis),
  // not absl's: the distribution's abseil is not built for ThreadSanitizer.
  Mutex mu_;
  std::condition_variable_any cv_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<uint64_t, Entry> armed_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;  // last: starts after the members it reads
};

}  // namespace throttlekit::postgres_internal

#endif  // THROTTLEKIT_SRC_POSTGRES_SOCKET_WATCHDOG_H_
