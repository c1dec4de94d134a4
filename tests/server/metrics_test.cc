// PolicyMetrics (src/server/metrics.h), the server's per-policy record of
// decisions, without gRPC: the counts, lanes and latency summary; the ring
// of recent denials and following it by number (Monitor.Watch's cursor),
// with what a slow follower lost counted; the top keys; the denial signal
// Monitor.Watch sleeps on; and the whole under concurrent writers and
// readers (also under ThreadSanitizer).

#include "metrics.h"

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "throttlekit/core/binding_axis.h"

namespace throttlekit::server {
namespace metrics_test {
namespace {

DecisionEvent event(std::string_view key, bool allowed,
                    std::optional<Axis> axis = std::nullopt,
                    int64_t duration_ns = 1000) {
  DecisionEvent e;
  e.key = key;
  e.decision = Decision{.allowed = allowed,
                        .limit = 10,
                        .remaining = allowed ? 5 : 0,
                        .reset_at_ms = 1000,
                        .retry_after_ms = allowed ? 0 : 7};
  e.binding_axis = axis;
  e.duration_ns = duration_ns;
  return e;
}

TEST(PolicyMetrics, CountsLanesAndLatency) {
  PolicyMetrics m;
  for (int i = 0; i < 90; ++i) m.on_decision(event("a", true, {}, 1000));
  for (int i = 0; i < 10; ++i) m.on_decision(event("a", true, {}, 100'000));
  m.on_decision(event("b", false, Axis::kRate));
  m.on_decision(event("b", false, Axis::kConcurrency));
  m.on_decision(event("b", false, Axis::kConcurrency));
  m.on_decision(event("c", false));  // a limiter's denial: no lane
  const PolicyMetrics::Snapshot s = m.snapshot();
  EXPECT_EQ(s.allowed, 100);
  EXPECT_EQ(s.denied, 4);
  EXPECT_EQ(s.denied_by_lane[0], 1);  // rate
  EXPECT_EQ(s.denied_by_lane[1], 2);  // concurrency
  EXPECT_EQ(s.denied_by_lane[2], 0);
  EXPECT_EQ(s.denied_by_lane[3], 0);
  EXPECT_EQ(s.limit, 10);
  EXPECT_EQ(s.latency.n, 104);
  // Within the histogram's 1/8 octave.
  EXPECT_NEAR(s.latency.p50_ms, 0.001, 0.001 * 0.13);
  EXPECT_NEAR(s.latency.p99_ms, 0.1, 0.1 * 0.13);
  EXPECT_NEAR(s.latency.max_ms, 0.1, 1e-9);
}

TEST(PolicyMetrics, FollowsDenialsByNumberAndCountsWhatWasLost) {
  PolicyMetrics m;
  std::vector<PolicyMetrics::Denial> out;
  int64_t lost = 0;
  EXPECT_EQ(m.denials_since(0, out, &lost), 0);
  EXPECT_TRUE(out.empty());
  m.on_decision(event("allowed", true));  // not a denial
  m.on_decision(event("d0", false, Axis::kCost));
  m.on_decision(event("d1", false));
  int64_t next = m.denials_since(0, out, &lost);
  EXPECT_EQ(next, 2);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].key, "d0");
  EXPECT_EQ(out[0].axis, "cost");
  EXPECT_EQ(out[0].retry_after_ms, 7);
  EXPECT_EQ(out[1].axis, "");
  EXPECT_EQ(lost, 0);
  // From the cursor: only what is new.
  out.clear();
  m.on_decision(event("d2", false));
  next = m.denials_since(next, out, &lost);
  EXPECT_EQ(next, 3);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].key, "d2");
  // A follower a whole ring behind gets the newest kRecent and the count
  // of the rest.
  out.clear();
  for (int i = 0; i < 50; ++i) {
    m.on_decision(event(absl::StrCat("e", i), false));
  }
  next = m.denials_since(next, out, &lost);
  EXPECT_EQ(next, 53);
  ASSERT_EQ(out.size(), static_cast<size_t>(PolicyMetrics::kRecent));
  EXPECT_EQ(out.front().key, "e18");
  EXPECT_EQ(out.back().key, "e49");
  EXPECT_EQ(lost, 50 - PolicyMetrics::kRecent);
  // recent_denials is the same ring, oldest first.
  const std::vector<PolicyMetrics::Denial> recent = m.recent_denials();
  ASSERT_EQ(recent.size(), static_cast<size_t>(PolicyMetrics::kRecent));
  EXPECT_EQ(recent.back().key, "e49");
  // A long key is cut to 120 bytes in the ring (the sketches keep it).
  const std::string long_key(300, 'k');
  m.on_decision(event(long_key, false));
  EXPECT_EQ(m.recent_denials().back().key, std::string(120, 'k'));
  EXPECT_EQ(m.top_denied(100).size(), 54u);
}

TEST(PolicyMetrics, TopKeysRankRequestsAndDenials) {
  PolicyMetrics m;
  for (int i = 0; i < 30; ++i) m.on_decision(event("hot", i < 20));
  for (int i = 0; i < 5; ++i) m.on_decision(event("warm", false));
  m.on_decision(event("cold", true));
  const std::vector<KeyCount> requested = m.top_requested(2);
  ASSERT_EQ(requested.size(), 2u);
  EXPECT_EQ(requested[0].key, "hot");
  EXPECT_EQ(requested[0].count, 30);
  EXPECT_EQ(requested[1].key, "warm");
  const std::vector<KeyCount> denied = m.top_denied(10);
  ASSERT_EQ(denied.size(), 2u);
  EXPECT_EQ(denied[0].key, "hot");
  EXPECT_EQ(denied[0].count, 10);
  EXPECT_EQ(denied[1].count, 5);
}

// Writers on every path at once with readers of every view: totals add
// up, a follower's cursor sees each denial number once (received + lost
// = all), and ThreadSanitizer sees no race.
TEST(PolicyMetrics, ConcurrentWritersAndReaders) {
  PolicyMetrics m;
  constexpr int kWriters = 4;
  constexpr int kPerWriter = 20'000;
  std::atomic<bool> done{false};
  std::vector<std::thread> threads;
  for (int w = 0; w < kWriters; ++w) {
    threads.emplace_back([&m, w] {
      const std::string own = absl::StrCat("writer-", w);
      for (int i = 0; i < kPerWriter; ++i) {
        const bool allowed = i % 3 != 0;
        const std::string_view key =
            i % 2 == 0 ? std::string_view(own) : "shared";
        m.on_decision(
            event(key, allowed,
                  allowed ? std::nullopt : std::optional<Axis>(Axis::kRate),
                  100 + i));
      }
    });
  }
  int64_t received = 0;
  int64_t lost = 0;
  int64_t cursor = 0;
  std::thread follower([&] {
    std::vector<PolicyMetrics::Denial> batch;
    while (true) {
      const bool last = done.load();
      batch.clear();
      cursor = m.denials_since(cursor, batch, &lost);
      received += static_cast<int64_t>(batch.size());
      for (const PolicyMetrics::Denial& d : batch) EXPECT_EQ(d.axis, "rate");
      if (last) break;
    }
  });
  std::thread reader([&] {
    // The counters are read one after the other (relaxed, no common
    // instant), so only each one's own order is checked: never backwards.
    PolicyMetrics::Snapshot before;
    while (!done.load()) {
      const PolicyMetrics::Snapshot s = m.snapshot();
      EXPECT_GE(s.allowed, before.allowed);
      EXPECT_GE(s.denied, before.denied);
      EXPECT_GE(s.denied_by_lane[0], before.denied_by_lane[0]);
      before = s;
      EXPECT_LE(m.recent_denials().size(),
                static_cast<size_t>(PolicyMetrics::kRecent));
      EXPECT_LE(m.top_requested(5).size(), 5u);
      (void)m.top_denied(5);
    }
  });
  for (int w = 0; w < kWriters; ++w) threads[w].join();
  done = true;
  follower.join();
  reader.join();
  const int64_t denied_per_writer = (kPerWriter + 2) / 3;
  const PolicyMetrics::Snapshot s = m.snapshot();
  EXPECT_EQ(s.denied, kWriters * denied_per_writer);
  EXPECT_EQ(s.allowed, kWriters * (kPerWriter - denied_per_writer));
  EXPECT_EQ(s.denied_by_lane[0], s.denied);
  EXPECT_EQ(s.latency.n, kWriters * kPerWriter);
  EXPECT_EQ(cursor, s.denied);
  EXPECT_EQ(received + lost, s.denied);
  // The shared key carries half of every writer's decisions: exact, as
  // fewer keys than the sketch holds were ever seen.
  const std::vector<KeyCount> top = m.top_requested(1);
  ASSERT_EQ(top.size(), 1u);
  EXPECT_EQ(top[0].key, "shared");
  EXPECT_EQ(top[0].count, kWriters * kPerWriter / 2);
  EXPECT_EQ(top[0].error, 0);
}

// The signal moves for a denial only while a watcher is registered, never
// for an allowed decision; `wait` returns at once when it moved, times out
// when it did not, and always after `close()`.
TEST(DenialSignal, MovesForDenialsOnlyWhileWatched) {
  auto signal = std::make_shared<DenialSignal>();
  PolicyMetrics m(signal);
  m.on_decision(event("a", false));
  EXPECT_EQ(signal->epoch(), 0u);  // nobody watches: not even the epoch
  {
    const DenialSignal::Watcher watcher(*signal);
    m.on_decision(event("a", true));
    EXPECT_EQ(signal->epoch(), 0u);
    const uint64_t seen = signal->epoch();
    m.on_decision(event("a", false));
    EXPECT_EQ(signal->epoch(), seen + 1);
    EXPECT_TRUE(signal->wait(seen, std::chrono::hours(1)));
    EXPECT_FALSE(signal->wait(signal->epoch(), std::chrono::milliseconds(1)));
  }
  const uint64_t seen = signal->epoch();
  m.on_decision(event("a", false));
  EXPECT_EQ(signal->epoch(), seen);
  EXPECT_FALSE(signal->closed());
  signal->close();
  EXPECT_TRUE(signal->closed());
  EXPECT_TRUE(signal->wait(seen, std::chrono::hours(1)));
}

// Watch's loop (epoch, read the ring, wait) over four writers (with the
// follower, more threads than the machine's cores): the follower receives
// (or counts lost) every denial, and never needs its timeout to see one:
// once the writers stop it has all of them without a timed wake.
TEST(DenialSignal, AFollowerIsWokenForEveryDenial) {
  constexpr int kWriters = 4;
  constexpr int kPerWriter = 10000;
  auto signal = std::make_shared<DenialSignal>();
  PolicyMetrics m(signal);
  std::atomic<int64_t> seen_total{0};
  std::atomic<int> timeouts{0};
  std::atomic<bool> registered{false};
  std::thread follower([&] {
    const DenialSignal::Watcher watcher(*signal);
    std::vector<PolicyMetrics::Denial> batch;
    int64_t lost = 0;
    int64_t cursor = m.denials_since(0, batch, &lost);
    registered = true;
    for (;;) {
      const uint64_t seen = signal->epoch();
      if (signal->closed()) break;
      batch.clear();
      cursor = m.denials_since(cursor, batch, &lost);
      seen_total.store(static_cast<int64_t>(batch.size()) + lost +
                       seen_total.load());
      lost = 0;
      if (!signal->wait(seen, std::chrono::seconds(10))) ++timeouts;
    }
  });
  while (!registered.load()) std::this_thread::yield();
  std::vector<std::thread> writers;
  for (int w = 0; w < kWriters; ++w) {
    writers.emplace_back([&, w] {
      const std::string key = absl::StrCat("w", w);
      for (int i = 0; i < kPerWriter; ++i) m.on_decision(event(key, false));
    });
  }
  for (std::thread& t : writers) t.join();
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (seen_total.load() < kWriters * kPerWriter &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::yield();
  }
  signal->close();
  follower.join();
  EXPECT_EQ(seen_total.load(), kWriters * kPerWriter);
  EXPECT_EQ(timeouts.load(), 0);
}

}  // namespace
}  // namespace metrics_test
}  // namespace throttlekit::server
