// tests/server/rlqs_load.h
//
// What the quota door's real-clock tests drive and count through their
// emulated clients (rlqs_emulator.h):
//
// - `Load` and `drive`: requests at steady rates, each (client, bucket) at
//   its rate per second, in 5 ms steps, from the test's thread;
// - `LoadThreads`: the same from a thread per (client, bucket), as the
//   proxies' workers would (more threads than cores), rates changed while
//   they run;
// - `tokens_of`, `holds_tokens`: what a client's bucket holds;
// - `most_in_window`: the most admissions in any window of a length;
// - `rlqs_bound`: docs/rlqs.md's bound on them, R*I/F + R +
//   R*(floor(I/L) + 1);
// - and, from rlqs_held.h, `most_held_at_once`.
//
// Thread-safety: the functions are called from the test's one thread;
// LoadThreads' methods too (its threads only call the emulators, which
// are thread-safe).

#ifndef THROTTLEKIT_TESTS_SERVER_RLQS_LOAD_H_
#define THROTTLEKIT_TESTS_SERVER_RLQS_LOAD_H_

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "rlqs_emulator.h"
#include "rlqs_held.h"

namespace throttlekit::testing {

struct Load {
  RlqsEmulator* client;
  RlqsId bucket;
  double per_s;
  double issued = 0;
};

// Drives `loads` until `done` holds or `max_ms` passed; returns whether
// `done` held.
inline bool drive(
    std::vector<Load>& loads, int64_t max_ms,
    const std::function<bool()>& done = [] { return false; }) {
  const int64_t start = steady_ms();
  int64_t last = start;
  while (true) {
    const int64_t now = steady_ms();
    for (Load& l : loads) {
      l.issued += l.per_s * static_cast<double>(now - last) / 1000.0;
      for (; l.issued >= 1; l.issued -= 1) (void)l.client->request(l.bucket);
    }
    last = now;
    if (done()) return true;
    if (now - start >= max_ms) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

// One thread per load, each issuing its requests at its rate on the real
// clock until destroyed.
class LoadThreads {
 public:
  explicit LoadThreads(const std::vector<Load>& loads) {
    for (const Load& l : loads) {
      auto w = std::make_unique<Worker>();
      w->client = l.client;
      w->bucket = l.bucket;
      w->per_s.store(l.per_s);
      workers_.push_back(std::move(w));
    }
    for (auto& w : workers_) {
      Worker* raw = w.get();
      raw->thread = std::thread([this, raw] { run(*raw); });
    }
  }
  ~LoadThreads() { stop(); }
  // Stops and joins the threads (before the clients go). Idempotent.
  void stop() {
    stop_.store(true);
    for (auto& w : workers_) {
      if (w->thread.joinable()) w->thread.join();
    }
  }
  LoadThreads(const LoadThreads&) = delete;
  LoadThreads& operator=(const LoadThreads&) = delete;

  void set_rate(size_t i, double per_s) { workers_[i]->per_s.store(per_s); }
  void set_all(double per_s) {
    for (auto& w : workers_) w->per_s.store(per_s);
  }

  // Waits until `done` holds (checked every 10 ms) or `max_ms` passed;
  // whether it held.
  static bool wait(
      int64_t max_ms,
      const std::function<bool()>& done = [] { return false; }) {
    const int64_t end = steady_ms() + max_ms;
    while (!done()) {
      if (steady_ms() >= end) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return true;
  }

 private:
  struct Worker {
    RlqsEmulator* client = nullptr;
    RlqsId bucket;
    std::atomic<double> per_s{0};
    std::thread thread;
  };

  void run(Worker& w) {
    double issued = 0;
    int64_t last = steady_ms();
    while (!stop_.load()) {
      const double rate = w.per_s.load();
      const int64_t now = steady_ms();
      issued += rate * static_cast<double>(now - last) / 1000.0;
      last = now;
      for (; issued >= 1; issued -= 1) (void)w.client->request(w.bucket);
      // Until the next request is due, at most 20 ms (a rate may change).
      const double gap_ms = rate > 0 ? (1 - issued) * 1000.0 / rate : 20;
      std::this_thread::sleep_for(std::chrono::milliseconds(
          std::clamp<int64_t>(static_cast<int64_t>(gap_ms), 1, 20)));
    }
  }

  std::vector<std::unique_ptr<Worker>> workers_;
  std::atomic<bool> stop_{false};
};

// The max_tokens of `c`'s token bucket for `id`; 0 without one.
inline uint32_t tokens_of(RlqsEmulator& c, const RlqsId& id) {
  std::optional<RlqsEmulator::View> v = c.bucket(id);
  return v.has_value() && v->kind == RlqsEmulator::Kind::kTokenBucket
             ? v->max_tokens
             : 0;
}

inline bool holds_tokens(RlqsEmulator& c, const RlqsId& id, uint32_t at_least) {
  return tokens_of(c, id) >= at_least && tokens_of(c, id) > 0;
}

// The most of `times` (ms) in any window of `window_ms`.
inline int64_t most_in_window(std::vector<int64_t> times, int64_t window_ms) {
  std::sort(times.begin(), times.end());
  int64_t most = 0;
  size_t lo = 0;
  for (size_t hi = 0; hi < times.size(); ++hi) {
    while (times[hi] - times[lo] >= window_ms) ++lo;
    most = std::max<int64_t>(most, static_cast<int64_t>(hi - lo + 1));
  }
  return most;
}

// docs/rlqs.md, "The bound": the most a budget of `limit` tokens per
// `fill_s` seconds admits in `window_ms`, with assignments counted
// `commit_ms` (ttl + slack) after they are sent.
inline int64_t rlqs_bound(int64_t limit, int64_t fill_s, int64_t commit_ms,
                          int64_t window_ms) {
  return limit * window_ms / (fill_s * 1000) + limit +
         limit * (window_ms / commit_ms + 1);
}

}  // namespace throttlekit::testing

#endif  // THROTTLEKIT_TESTS_SERVER_RLQS_LOAD_H_
