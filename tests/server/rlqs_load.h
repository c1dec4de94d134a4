// tests/server/rlqs_load.h
//
// What the quota door's real-clock tests drive and count through their
// emulated clients (rlqs_emulator.h):
//
// - `Load` and `drive`: requests at steady rates, each (client, bucket) at
//   its rate per second, in 5 ms steps;
// - `tokens_of`, `holds_tokens`: what a client's bucket holds;
// - `most_in_window`: the most admissions in any window of a length;
// - `rlqs_bound`: docs/rlqs.md's bound on them, R*I/F + R +
//   R*(floor(I/L) + 1).
//
// Thread-safety: the functions are called from the test's one thread.

#ifndef THROTTLEKIT_TESTS_SERVER_RLQS_LOAD_H_
#define THROTTLEKIT_TESTS_SERVER_RLQS_LOAD_H_

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <thread>
#include <vector>

#include "rlqs_emulator.h"

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
