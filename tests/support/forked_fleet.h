// tests/support/forked_fleet.h
//
// Provides the harness of the multi-process fleet tests: `wall_ms()` (the
// machine clock every process and the test's server share) and
// `run_forked<Report>(n, start_ms, fn)`, which forks `n` processes, starts
// each at the epoch-ms instant `start_ms`, runs `fn(index)` in it and
// collects the trivially copyable `Report` each returns through a pipe.
// Processes that fail to report are missing from the result.
// `run_forked_after_setup` first lets every process set up, then picks
// the start.
// `FleetSchedule` names the run's windows and attributes each admission to
// the window that paid for it; `FleetRun` is a run's limit, window and
// length; `WindowTally` counts a process's admissions per window.
// `map_shared<T>()` puts a `T` in memory the forked processes share, and
// `raise_to` keeps a lock-free maximum there. An `ObserverPriority` in scope
// runs the observing thread in the real-time class where that is allowed.

#ifndef THROTTLEKIT_TESTS_SUPPORT_FORKED_FLEET_H_
#define THROTTLEKIT_TESTS_SUPPORT_FORKED_FLEET_H_

#include <gtest/gtest.h>
#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <new>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "throttlekit/core/decision.h"

namespace throttlekit::testing {

// A `T` value-initialized in memory shared with the processes forked
// after this call (lock-free atomics work across them); null, and a test
// failure, if the mapping fails. Release it with `unmap_shared`.
template <class T>
T* map_shared() {
  void* mem = mmap(nullptr, sizeof(T), PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) {
    ADD_FAILURE() << "mmap failed";
    return nullptr;
  }
  return new (mem) T();
}
template <class T>
void unmap_shared(T* shared) {
  shared->~T();
  munmap(shared, sizeof(T));
}

// Raises `slot` to `value` if it is below (a lock-free maximum).
inline void raise_to(std::atomic<int64_t>& slot, int64_t value) {
  int64_t seen = slot.load();
  while (value > seen && !slot.compare_exchange_weak(seen, value)) {
  }
}

// While in scope, the calling thread (a fleet test's observer) runs in
// the real-time class SCHED_FIFO at the lowest priority, so a read it
// waits for is handled the moment it is answered, ahead of the fleet's
// threads; where that is not allowed (not root), it runs as before.
class ObserverPriority {
 public:
  ObserverPriority() {
    raised_ = pthread_getschedparam(pthread_self(), &policy_, &param_) == 0;
    if (!raised_) return;
    sched_param fifo{};
    fifo.sched_priority = sched_get_priority_min(SCHED_FIFO);
    raised_ = pthread_setschedparam(pthread_self(), SCHED_FIFO, &fifo) == 0;
  }
  ~ObserverPriority() {
    if (raised_) (void)pthread_setschedparam(pthread_self(), policy_, &param_);
  }
  ObserverPriority(const ObserverPriority&) = delete;
  ObserverPriority& operator=(const ObserverPriority&) = delete;

 private:
  bool raised_ = false;
  int policy_ = SCHED_OTHER;
  sched_param param_{};
};

inline int64_t wall_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// A fleet run of `windows` windows of `window_ms`, starting at the window
// boundary two windows from now (time for every process to start).
struct FleetSchedule {
  int64_t window_ms;
  int64_t first_window;  // absolute window number (epoch ms / window_ms)
  int64_t start_ms;
  int64_t end_ms;

  static FleetSchedule starting_soon(int64_t window_ms, int windows) {
    const int64_t first = wall_ms() / window_ms + 2;
    return FleetSchedule{window_ms, first, first * window_ms,
                         (first + windows) * window_ms};
  }

  // The run-relative window of an admission whose check began at
  // `began_ms` and whose decision says its credits' window ends at
  // `reset_at_ms`: the later of the two instants (a check that began just
  // before a boundary may spend credits of the window after it, and is
  // then an admission of that window). Negative or past the run: outside.
  int64_t window_of(int64_t began_ms, int64_t reset_at_ms) const {
    return std::max(began_ms, reset_at_ms - window_ms) / window_ms -
           first_window;
  }
};

// A fleet run's shape: `limit` per window of `window_ms`, for `windows`
// windows; `starting_soon()` schedules it (FleetSchedule::starting_soon).
struct FleetRun {
  int64_t limit;
  int64_t window_ms;
  int windows;

  FleetSchedule starting_soon() const {
    return FleetSchedule::starting_soon(window_ms, windows);
  }
};

// What one fleet process counts: its admissions per run window (the run's
// `Windows` windows and two after them, for checks that end past the run)
// and the errors it met. Trivially copyable, so a test's `Report` for
// `run_forked` derives from it and adds its own counts.
template <int Windows>
struct WindowTally {
  static constexpr int kSlots = Windows + 2;
  int64_t per_window[kSlots] = {};
  int64_t errors = 0;

  // Counts an admission of run window `w` (FleetSchedule::window_of);
  // false, and nothing counted, if `w` is outside [0, kSlots).
  bool count(int64_t w) {
    if (w < 0 || w >= kSlots) return false;
    ++per_window[w];
    return true;
  }
  // Whether the call answered `d` was admitted: a failed call counts an
  // error, and a denied one backs off 1 ms first (a client honouring
  // backoff).
  bool admitted(const absl::StatusOr<Decision>& d) {
    if (!d.ok()) {
      ++errors;
      return false;
    }
    if (!d->allowed) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      return false;
    }
    return true;
  }
  // Adds another process's counts (the fleet's total).
  WindowTally& operator+=(const WindowTally& other) {
    for (int w = 0; w < kSlots; ++w) per_window[w] += other.per_window[w];
    errors += other.errors;
    return *this;
  }
};

// The reports of forked `children` (pid, read end of its pipe), in
// order; a child that wrote none is missing. Waits for every child.
template <class Report>
std::vector<Report> collect_reports(
    const std::vector<std::pair<pid_t, int>>& children) {
  std::vector<Report> reports;
  for (auto [pid, fd] : children) {
    Report r;
    if (read(fd, &r, sizeof r) == static_cast<ssize_t>(sizeof r)) {
      reports.push_back(r);
    }
    close(fd);
    int status = 0;
    waitpid(pid, &status, 0);
  }
  return reports;
}

// Forks `n` processes; process `i` runs `body(i)` and writes the `Report`
// it returns to its pipe. Returns (pid, read end) per process forked.
template <class Report, class Body>
std::vector<std::pair<pid_t, int>> fork_reporters(int n, Body body) {
  static_assert(std::is_trivially_copyable_v<Report>);
  std::vector<std::pair<pid_t, int>> children;
  for (int i = 0; i < n; ++i) {
    int fds[2];
    if (pipe(fds) != 0) break;
    const pid_t pid = fork();
    if (pid == 0) {
      close(fds[0]);
      const Report r = body(i);
      (void)!write(fds[1], &r, sizeof r);
      _exit(0);
    }
    close(fds[1]);
    children.emplace_back(pid, fds[0]);
  }
  return children;
}

template <class Report, class Fn>
std::vector<Report> run_forked(int n, int64_t start_ms, Fn fn) {
  return collect_reports<Report>(fork_reporters<Report>(n, [&](int i) {
    std::this_thread::sleep_for(
        std::chrono::milliseconds(start_ms - wall_ms()));
    return fn(i);
  }));
}

// As `run_forked`, for processes whose set-up (connecting, loading
// scripts) is slow next to the run: each process first runs
// `setup(index)`, then reports ready; once every process is ready (or
// `setup_timeout_ms` has passed), the parent picks the run's schedule,
// `windows` windows of `window_ms` starting two windows later, and every
// process runs `fn(index, state, schedule)` from its start. The schedule
// is returned through `schedule`. A slow machine thus delays the run
// instead of shortening it.
template <class Report, class Setup, class Fn>
std::vector<Report> run_forked_after_setup(int n, int64_t window_ms,
                                           int windows, Setup setup, Fn fn,
                                           FleetSchedule& schedule,
                                           int64_t setup_timeout_ms = 30000) {
  struct Gate {
    std::atomic<int> ready{0};
    std::atomic<int64_t> first_window{0};  // 0 until the parent picks it
  };
  Gate* gate = map_shared<Gate>();
  if (gate == nullptr) return {};
  const std::vector<std::pair<pid_t, int>> children =
      fork_reporters<Report>(n, [&](int i) {
        auto state = setup(i);
        gate->ready.fetch_add(1);
        int64_t first = 0;
        while ((first = gate->first_window.load()) == 0) {
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        const FleetSchedule run{window_ms, first, first * window_ms,
                                (first + windows) * window_ms};
        std::this_thread::sleep_for(
            std::chrono::milliseconds(run.start_ms - wall_ms()));
        return fn(i, state, run);
      });
  const int64_t give_up = wall_ms() + setup_timeout_ms;
  while (gate->ready.load() < static_cast<int>(children.size()) &&
         wall_ms() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(gate->ready.load(), static_cast<int>(children.size()))
      << "processes not set up within " << setup_timeout_ms << " ms";
  schedule = FleetSchedule::starting_soon(window_ms, windows);
  gate->first_window.store(schedule.first_window);
  std::vector<Report> reports = collect_reports<Report>(children);
  unmap_shared(gate);
  return reports;
}

}  // namespace throttlekit::testing

#endif  // THROTTLEKIT_TESTS_SUPPORT_FORKED_FLEET_H_
