// tests/server/rlqs_held.h
//
// What the quota door's clients held, for the invariant its bound rests on
// (docs/rlqs.md, "The bound"): `RlqsHeld`, one token bucket a client had
// installed, from its arrival until it was replaced, ruled out by a blanket
// rule, abandoned or expired; and `most_held_at_once`, the largest
// capacity the clients held together at any instant. Each installed bucket
// is one of its client's unexpired records, so the sum stays within the
// budget.
//
// Thread-safety: plain values and a pure function.

#ifndef THROTTLEKIT_TESTS_SERVER_RLQS_HELD_H_
#define THROTTLEKIT_TESTS_SERVER_RLQS_HELD_H_

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

namespace throttlekit::testing {

struct RlqsHeld {
  int64_t from_ms = 0;
  int64_t to_ms = 0;
  uint32_t max_tokens = 0;
};

// The largest sum over `held` intervals overlapping at one instant (an
// interval ending at t does not overlap one starting at t).
inline int64_t most_held_at_once(const std::vector<RlqsHeld>& held) {
  std::vector<std::pair<int64_t, int64_t>> events;  // (time, +/- tokens)
  for (const RlqsHeld& h : held) {
    if (h.to_ms <= h.from_ms) continue;
    events.emplace_back(h.from_ms, h.max_tokens);
    events.emplace_back(h.to_ms, -static_cast<int64_t>(h.max_tokens));
  }
  // Ends before starts at one instant.
  std::sort(events.begin(), events.end());
  int64_t sum = 0;
  int64_t most = 0;
  for (const auto& [t, d] : events) {
    sum += d;
    most = std::max(most, sum);
  }
  return most;
}

}  // namespace throttlekit::testing

#endif  // THROTTLEKIT_TESTS_SERVER_RLQS_HELD_H_
