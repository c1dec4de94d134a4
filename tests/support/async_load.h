// tests/support/async_load.h
//
// Load for the asynchronous-path tests (docs/async.md), the same on every
// backend:
// - `run_in_window`: one thread submits `total` checks, at most `window`
//   in flight, and counts each completion in its own slot;
//   `expect_each_once_admitting` checks its result;
// - `FaultStream`: threads keep checks in flight while a script changes
//   the server (stops, freezes, restarts it) phase by phase; every
//   completion is counted in its slot and by the phase it was submitted in,
//   with the slowest call's latency (`run_through_freeze_then_kill`: the
//   private Redis's script and its checks in one call).
// - `DecisionWaiter`: one completion as a future;
// - `expect_async_equals_blocking`: every strategy's timeline sent
//   asynchronously at once and, on another key, through the blocking
//   path: the decisions equal step for step; and
//   `expect_async_verbs_equal_blocking`, the same for leases, give-backs
//   and heartbeats;
// - `expect_async_federation_verbs_equal_blocking`, the same for
//   federation's windowed leases, reconciles and escrow;
// - `expect_check_many_pipelined`: a strict `check_many` batch pipelined,
//   in order per key, at one `now`.
// The loads wait until nothing is in flight before returning.

#ifndef THROTTLEKIT_TESTS_SUPPORT_ASYNC_LOAD_H_
#define THROTTLEKIT_TESTS_SUPPORT_ASYNC_LOAD_H_

#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <future>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "support/run_threads.h"
#include "throttlekit/coordinator/backend_stats.h"
#include "throttlekit/coordinator/coordinator.h"
#include "throttlekit/coordinator/strict_rate_limiter.h"
#include "throttlekit/core/completion.h"
#include "throttlekit/core/decision.h"
#include "throttlekit/strategy/fixed_window.h"

namespace throttlekit::testing {

// A completion's value, waited for.
template <class T>
struct Waited {
  std::promise<absl::StatusOr<T>> promise;
  Completion<T> completion() {
    return [this](absl::StatusOr<T> v) { promise.set_value(std::move(v)); };
  }
  absl::StatusOr<T> get() { return promise.get_future().get(); }
};

// One asynchronous decision, waited for.
using DecisionWaiter = Waited<Decision>;

// `n` calls sent all at once (`send(i, completion)`) beside the same calls
// made one by one through the blocking verb (`call(i)`), each asynchronous
// answer waited for in turn: both must answer every call, and
// `compare(i, async, blocking)` checks each pair. Stops at the first call
// either failed (a fatal failure: callers wrap it in
// ASSERT_NO_FATAL_FAILURE).
template <class T, class Send, class Call, class Compare>
void expect_sent_at_once_as_blocking(size_t n, Send send, Call call,
                                     Compare compare) {
  std::vector<Waited<T>> waited(n);
  for (size_t i = 0; i < n; ++i) send(i, waited[i].completion());
  for (size_t i = 0; i < n; ++i) {
    absl::StatusOr<T> blocking = call(i);
    absl::StatusOr<T> async = waited[i].get();
    ASSERT_TRUE(blocking.ok()) << blocking.status();
    ASSERT_TRUE(async.ok()) << async.status();
    compare(i, *async, *blocking);
  }
}

// A `compare` for lease grants: equal but for the store's clock stamp; the
// asynchronous grants are kept in `grants`, in order.
inline auto equal_grants(std::vector<LeaseGrant>& grants, const char* what) {
  return
      [&grants, what](size_t i, LeaseGrant& async, const LeaseGrant& blocking) {
        async.now_ms = blocking.now_ms;
        EXPECT_EQ(async, blocking) << what << " " << i;
        grants.push_back(async);
      };
}

// Leases of 3, 4, 5 and 2 credits (of a window's 10) sent at once
// (`send(want, completion)`) beside the same through the blocking verb
// (`call(want)`): equal grants, `what` naming them, the last finding the
// window spent. The asynchronous grants are kept in `grants`.
template <class Send, class Call>
void expect_leases_until_spent(Send send, Call call, const char* what,
                               std::vector<LeaseGrant>& grants) {
  const std::vector<int64_t> wants = {3, 4, 5, 2};
  ASSERT_NO_FATAL_FAILURE(expect_sent_at_once_as_blocking<LeaseGrant>(
      wants.size(),
      [&](size_t i, Completion<LeaseGrant> done) {
        send(wants[i], std::move(done));
      },
      [&](size_t i) { return call(wants[i]); }, equal_grants(grants, what)));
  EXPECT_EQ(grants.back().granted, 0) << "the window is spent";
}

// For each strategy, `steps` checks at rising times (costs 0.5 to 3) sent
// with `check_async` all at once on one key, and the same timeline through
// `check` on another key: equal decisions, step for step. The keys start
// with `prefix` (unique per run).
inline void expect_async_equals_blocking(
    Coordinator& c, const std::vector<AnyStrategy>& strategies, int steps,
    const std::string& prefix) {
  for (size_t s = 0; s < strategies.size(); ++s) {
    std::vector<int64_t> at(steps);
    std::vector<double> cost(steps);
    int64_t now = 1'700'000'000'000;
    for (int i = 0; i < steps; ++i) {
      now += (i * 37) % 211;
      at[i] = now;
      cost[i] = i % 5 == 4 ? 0.5 : 1 + (i * 7) % 3;
    }
    const std::string blocking_key = absl::StrCat(prefix, ":b:", s);
    const std::string async_key = absl::StrCat(prefix, ":a:", s);
    // All at once: one connection keeps their order.
    ASSERT_NO_FATAL_FAILURE(expect_sent_at_once_as_blocking<Decision>(
        steps,
        [&](size_t i, DecisionCompletion done) {
          c.check_async(strategies[s], async_key, at[i], cost[i],
                        std::move(done));
        },
        [&](size_t i) {
          return c.check(strategies[s], blocking_key, at[i], cost[i]);
        },
        [&](size_t i, const Decision& async, const Decision& blocking) {
          EXPECT_EQ(async, blocking) << "strategy " << s << " step " << i;
        }));
  }
}

// The coordinator's other asynchronous verbs against their blocking forms,
// each sequence sent all at once on one key and through the blocking verb
// on another: leases of one window (~31 years, so no boundary is crossed)
// until it is spent, give-backs with a repeated token, a lease of what came
// back; with `heartbeat`, beats of three nodes at caller times. Equal
// results, step for step (the store's clock stamp aside).
inline void expect_async_verbs_equal_blocking(Coordinator& c,
                                              const std::string& prefix,
                                              bool heartbeat) {
  const LeaseBudget budget = *LeaseBudget::create({10, 1'000'000'000'000});
  const std::string a = prefix + ":lease:a", b = prefix + ":lease:b";
  std::vector<LeaseGrant> async_grants;
  ASSERT_NO_FATAL_FAILURE(expect_leases_until_spent(
      [&](int64_t want, Completion<LeaseGrant> done) {
        c.lease_async(budget, a, want, std::move(done));
      },
      [&](int64_t want) { return c.lease(budget, b, want); }, "lease",
      async_grants));
  const int64_t start = async_grants.front().window_start_ms;
  // The same token twice: applied once.
  ASSERT_NO_FATAL_FAILURE(expect_sent_at_once_as_blocking<int64_t>(
      2,
      [&](size_t, Completion<int64_t> done) {
        c.give_back_async(budget, a, start, 2, "t", std::move(done));
      },
      [&](size_t) { return c.give_back(budget, b, start, 2, "t"); },
      [](size_t i, int64_t async, int64_t blocking) {
        EXPECT_EQ(async, blocking) << "give-back " << i;
        EXPECT_EQ(async, i == 0 ? 2 : 0) << "give-back " << i;
      }));
  Waited<LeaseGrant> again;
  c.lease_async(budget, a, 5, again.completion());
  absl::StatusOr<LeaseGrant> async = again.get();
  ASSERT_TRUE(async.ok()) << async.status();
  EXPECT_EQ(async->granted, 2) << "what came back";
  // Bad input completes inline.
  std::optional<absl::StatusOr<LeaseGrant>> bad;
  c.lease_async(budget, a, 0,
                [&bad](absl::StatusOr<LeaseGrant> g) { bad = g; });
  ASSERT_TRUE(bad.has_value());
  EXPECT_TRUE(absl::IsInvalidArgument(bad->status())) << bad->status();
  if (!heartbeat) return;
  const HeartbeatOptions options{.lease_ttl_ms = 1000};
  const std::string ha = prefix + ":beat:a", hb = prefix + ":beat:b";
  const std::array<std::string, 3> nodes = {"n1", "n2", "n3"};
  const auto report = [&](int i) {
    return HeartbeatReport{.node_id = nodes[i % 3],
                           .seq = 1 + i / 3,
                           .inflight = i % 4,
                           .local_limit = 30 + i};
  };
  const auto at = [](int i) { return int64_t{1'700'000'000'000} + 100 * i; };
  ASSERT_NO_FATAL_FAILURE(expect_sent_at_once_as_blocking<HeartbeatGrant>(
      6,
      [&](size_t i, Completion<HeartbeatGrant> done) {
        c.heartbeat_async(ha, report(i), options, at(i), std::move(done));
      },
      [&](size_t i) { return c.heartbeat(hb, report(i), options, at(i)); },
      [](size_t i, const HeartbeatGrant& got, const HeartbeatGrant& blocking) {
        EXPECT_EQ(got.share, blocking.share) << "beat " << i;
        EXPECT_EQ(got.generation, blocking.generation) << "beat " << i;
        EXPECT_EQ(got.global_limit, blocking.global_limit) << "beat " << i;
        EXPECT_EQ(got.live_nodes, blocking.live_nodes) << "beat " << i;
        EXPECT_EQ(got.lease_expires_at_ms, blocking.lease_expires_at_ms);
        EXPECT_EQ(got.stale, blocking.stale) << "beat " << i;
      }));
}

// Federation's verbs without waiting equal the blocking ones: windowed
// leases sent all at once on one key and made one by one on another, then
// a reconcile twice with one token (applied once), then (`escrow`) a
// refill and takes of the regional balance. Bad input completes inline.
inline void expect_async_federation_verbs_equal_blocking(
    Coordinator& c, const std::string& prefix, bool escrow) {
  const LeaseBudget budget = *LeaseBudget::create({10, 1'000'000'000'000});
  const std::string a = prefix + ":fed:a", b = prefix + ":fed:b";
  std::vector<LeaseGrant> grants;
  ASSERT_NO_FATAL_FAILURE(expect_leases_until_spent(
      [&](int64_t want, Completion<LeaseGrant> done) {
        c.lease_windowed_async(budget, a, want, 0, std::move(done));
      },
      [&](int64_t want) { return c.lease_windowed(budget, b, want); },
      "windowed lease", grants));
  const int64_t start = grants.front().window_start_ms;
  const int64_t end = grants.front().expires_at_ms;
  ASSERT_NO_FATAL_FAILURE(expect_sent_at_once_as_blocking<int64_t>(
      2,
      [&](size_t, Completion<int64_t> done) {
        c.reconcile_async(budget, a, start, 2, "t", 0, std::move(done));
      },
      [&](size_t) { return c.reconcile(budget, b, start, 2, "t"); },
      [](size_t i, int64_t async, int64_t blocking) {
        EXPECT_EQ(async, blocking) << "reconcile " << i;
        EXPECT_EQ(async, i == 0 ? 2 : 0) << "reconcile " << i;
      }));
  Waited<LeaseGrant> again;
  c.lease_windowed_async(budget, a, 5, 0, again.completion());
  absl::StatusOr<LeaseGrant> regranted = again.get();
  ASSERT_TRUE(regranted.ok()) << regranted.status();
  EXPECT_EQ(regranted->granted, 2) << "what was reconciled";
  // Bad input completes inline.
  std::optional<absl::StatusOr<LeaseGrant>> bad_lease;
  c.lease_windowed_async(budget, a, 0, 0,
                         [&](absl::StatusOr<LeaseGrant> g) { bad_lease = g; });
  ASSERT_TRUE(bad_lease.has_value());
  EXPECT_TRUE(absl::IsInvalidArgument(bad_lease->status()))
      << bad_lease->status();
  std::optional<absl::StatusOr<int64_t>> bad_back;
  c.reconcile_async(budget, a, start, -1, "t", 0,
                    [&](absl::StatusOr<int64_t> n) { bad_back = n; });
  ASSERT_TRUE(bad_back.has_value());
  EXPECT_TRUE(absl::IsInvalidArgument(bad_back->status()))
      << bad_back->status();
  if (!escrow) return;
  const std::string ea = prefix + ":l2:a", eb = prefix + ":l2:b";
  Waited<int64_t> refilled;
  c.escrow_refill_async(ea, 7, start, end, 0, refilled.completion());
  absl::StatusOr<int64_t> refilled_blocking =
      c.escrow_refill(eb, 7, start, end);
  absl::StatusOr<int64_t> refilled_async = refilled.get();
  ASSERT_TRUE(refilled_blocking.ok()) << refilled_blocking.status();
  ASSERT_TRUE(refilled_async.ok()) << refilled_async.status();
  EXPECT_EQ(*refilled_async, *refilled_blocking);
  EXPECT_EQ(*refilled_async, 7) << "the balance after the refill";
  const std::vector<int64_t> takes = {3, 5};
  std::vector<LeaseGrant> taken;
  ASSERT_NO_FATAL_FAILURE(expect_sent_at_once_as_blocking<LeaseGrant>(
      takes.size(),
      [&](size_t i, Completion<LeaseGrant> done) {
        c.escrow_take_async(ea, takes[i], 0, std::move(done));
      },
      [&](size_t i) { return c.escrow_take(eb, takes[i]); },
      equal_grants(taken, "escrow take")));
  EXPECT_EQ(taken[0].granted, 3) << "escrow take 0";
  EXPECT_EQ(taken[1].granted, 4) << "escrow take 1";
  std::optional<absl::StatusOr<int64_t>> bad_refill;
  c.escrow_refill_async(ea, 1, end, start, 0,
                        [&](absl::StatusOr<int64_t> n) { bad_refill = n; });
  ASSERT_TRUE(bad_refill.has_value());
  EXPECT_TRUE(absl::IsInvalidArgument(bad_refill->status()))
      << bad_refill->status();
}

// `StrictRateLimiter::check_many` over `c` (shared): 32 keys, each four
// times, interleaved, with a limit of 3 per window: the first three of each
// key allowed and the fourth denied, in order, all at one `now` (one window
// end); pipelined (a clock read and about one batch per occurrence round,
// not a round trip per key); the asynchronous form completes once with the
// same shape of answer; bad input completes inline.
template <class Backend>
void expect_check_many_pipelined(std::shared_ptr<Backend> c,
                                 const std::string& prefix) {
  auto limiter = *StrictRateLimiter<FixedWindow>::create(
      {.limit = 3, .window_ms = 600'000}, c, {.prefix = prefix});
  std::vector<std::string> owned;
  for (int round = 0; round < 4; ++round) {
    for (int k = 0; k < 32; ++k) owned.push_back(absl::StrCat("k", k));
  }
  const std::vector<std::string_view> keys(owned.begin(), owned.end());
  // Connected (and the schema made) before counting.
  ASSERT_TRUE(limiter->check_many(std::vector<std::string_view>{"warm"}).ok());
  const BackendStats before = c->stats();
  absl::StatusOr<std::vector<Decision>> out = limiter->check_many(keys);
  const BackendStats after = c->stats();
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->size(), keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    EXPECT_EQ((*out)[i].allowed, i < 96) << i << " " << keys[i];
    EXPECT_EQ((*out)[i].reset_at_ms, (*out)[0].reset_at_ms) << "one now";
  }
  EXPECT_EQ(after.requests - before.requests, 129);  // TIME and 128 steps
  EXPECT_LE(after.batches - before.batches, 24)
      << "one round trip per key instead of a pipelined batch";

  // Without waiting: another prefix's keys, every one allowed once.
  auto other = *StrictRateLimiter<FixedWindow>::create(
      {.limit = 1, .window_ms = 600'000}, c, {.prefix = prefix + ":async"});
  Waited<std::vector<Decision>> waited;
  other->check_many_async(std::span(keys.data(), 32), 1, waited.completion());
  absl::StatusOr<std::vector<Decision>> async = waited.get();
  ASSERT_TRUE(async.ok()) << async.status();
  ASSERT_EQ(async->size(), 32u);
  for (const Decision& d : *async) EXPECT_TRUE(d.allowed);

  std::optional<absl::StatusOr<std::vector<Decision>>> bad;
  const std::vector<std::string_view> with_empty = {"a", ""};
  other->check_many_async(
      with_empty, 1,
      [&](absl::StatusOr<std::vector<Decision>> v) { bad = std::move(v); });
  ASSERT_TRUE(bad.has_value()) << "bad input completes inline";
  EXPECT_TRUE(absl::IsInvalidArgument(bad->status())) << bad->status();
}

// Every strategy, with options whose timelines above cross their limits.
inline std::vector<AnyStrategy> async_conformance_strategies() {
  return {
      *make_strategy(Gcra::Options{3, 1000, 0}),
      *make_strategy(TokenBucket::Options{3, 0.5}),
      *make_strategy(FixedWindow::Options{5, 1000}),
      *make_strategy(SlidingWindow::Options{10, 1000, 4}),
      *make_strategy(SlidingLog::Options{3, 700}),
      *make_strategy(Quota::Options{5, QuotaPeriod::kDay, 1, 0}),
      *make_strategy(TokenBudget::Options{5, 1000}),
  };
}

// `calls` checks queued on `owner`'s coordinator, then `owner` reset (the
// last reference): its destructor must complete every one, successfully.
template <class Owner>
void expect_destruction_completes_queued(Owner& owner, int calls,
                                         const std::string& key) {
  const AnyStrategy gcra = *make_strategy(Gcra::Options{1'000'000, 1000});
  std::atomic<int> completed{0}, ok{0};
  for (int i = 0; i < calls; ++i) {
    owner->check_async(gcra, key, 0, 1, [&](absl::StatusOr<Decision> d) {
      if (d.ok()) ok.fetch_add(1);
      completed.fetch_add(1);
    });
  }
  owner.reset();
  EXPECT_EQ(completed.load(), calls);
  EXPECT_EQ(ok.load(), calls);
}

struct WindowResult {
  int allowed = 0;
  int failed = 0;
  // Slots completed other than exactly once (0 when every call completed
  // exactly once).
  int not_once = 0;
};

// `submit(on_done)` starts one check that calls on_done(StatusOr<Decision>).
template <class Submit>
WindowResult run_in_window(int total, int window, Submit submit) {
  std::vector<std::atomic<int>> completed(total);
  std::atomic<int> in_flight{0}, allowed{0}, failed{0};
  for (int i = 0; i < total; ++i) {
    while (in_flight.load() >= window) std::this_thread::yield();
    in_flight.fetch_add(1);
    submit([&, i](absl::StatusOr<Decision> d) {
      completed[i].fetch_add(1);
      if (!d.ok()) {
        failed.fetch_add(1);
      } else if (d->allowed) {
        allowed.fetch_add(1);
      }
      in_flight.fetch_sub(1);
    });
  }
  while (in_flight.load() > 0) std::this_thread::yield();
  WindowResult r{allowed.load(), failed.load(), 0};
  for (int i = 0; i < total; ++i) r.not_once += completed[i].load() != 1;
  return r;
}

// Expects of `r` (a run offering more checks than one window's `limit`):
// every call completed exactly once, none failed, exactly `limit` admitted.
inline void expect_each_once_admitting(const WindowResult& r, int limit) {
  EXPECT_EQ(r.not_once, 0);
  EXPECT_EQ(r.failed, 0);
  EXPECT_EQ(r.allowed, limit);
}

class FaultStream {
 public:
  static constexpr int kPhases = 8;
  static constexpr int kSlots = 1 << 21;

  FaultStream() : completed_(kSlots), began_ns_(kSlots) {}

  // `submitters` threads keep up to `per_thread` checks in flight each
  // (at most about 8 submissions per ms per thread) while `script(*this)`
  // runs on another thread; then waits up to 3 s for the last completions.
  // `submit(on_done)` starts one check.
  template <class Submit, class Script>
  void run(int submitters, int per_thread, Submit submit, Script script) {
    run_threads(submitters + 1, [&](int t) {
      if (t == submitters) {
        script(*this);
        stop_.store(true);
        return;
      }
      while (!stop_.load()) {
        if (in_flight_.load() >= per_thread * submitters) {
          absl::SleepFor(absl::Microseconds(200));
          continue;
        }
        const int slot = next_.fetch_add(1);
        if (slot >= kSlots) break;
        if (slot % 8 == 0) absl::SleepFor(absl::Milliseconds(1));
        in_flight_.fetch_add(1);
        const int p = phase_.load();
        began_ns_[slot] = absl::GetCurrentTimeNanos();
        submit([this, slot, p](absl::StatusOr<Decision> d) {
          record(slot, p, d.status());
        });
      }
    });
    for (int i = 0; i < 300 && in_flight_.load() > 0; ++i) {
      absl::SleepFor(absl::Milliseconds(10));
    }
  }

  // For the script: the phase new submissions count in, and a wait (up to
  // 12 s) for the first success submitted in phase `p`.
  void set_phase(int p) { phase_.store(p); }
  void wait_ok(int p) {
    for (int i = 0; i < 600 && ok_[p].load() == 0; ++i) {
      absl::SleepFor(absl::Milliseconds(20));
    }
  }

  // Every call submitted completed exactly once, the slowest within
  // `bound`.
  void expect_each_once_within(absl::Duration bound) const {
    ASSERT_EQ(in_flight(), 0);
    ASSERT_FALSE(ran_out_of_slots());
    EXPECT_EQ(not_once(), 0);
    EXPECT_LE(slowest(), bound);
  }

  // A script for a server with freeze / thaw / kill / start (a private
  // Redis): phase 0 up, 1 frozen (400 ms), 2 thawed, 3 killed (400 ms),
  // 4 restarted; each phase after an outage lasts until a call succeeds.
  template <class Server>
  void freeze_then_kill(Server& server) {
    wait_ok(0);
    absl::SleepFor(absl::Milliseconds(200));
    server.freeze();
    set_phase(1);
    absl::SleepFor(absl::Milliseconds(400));
    server.thaw();
    set_phase(2);
    wait_ok(2);
    absl::SleepFor(absl::Milliseconds(200));
    server.kill();
    set_phase(3);
    absl::SleepFor(absl::Milliseconds(400));
    EXPECT_TRUE(server.start());
    set_phase(4);
    wait_ok(4);
    absl::SleepFor(absl::Milliseconds(200));
  }
  // `run` with the `freeze_then_kill(server)` script, then the checks of
  // both: every call completed once, the slowest within `bound`, and every
  // phase seen.
  template <class Server, class Submit>
  void run_through_freeze_then_kill(Server& server, int submitters,
                                    int per_thread, absl::Duration bound,
                                    Submit submit) {
    run(submitters, per_thread, submit,
        [&](FaultStream& f) { f.freeze_then_kill(server); });
    expect_each_once_within(bound);
    expect_freeze_then_kill_seen();
  }
  // What `freeze_then_kill` must have produced.
  void expect_freeze_then_kill_seen() const {
    EXPECT_GT(ok(0), 0);
    EXPECT_GT(deadline_exceeded(1), 0) << "the frozen server timed out";
    EXPECT_GT(ok(2), 0) << "service resumed after the thaw";
    EXPECT_GT(unavailable(3) + deadline_exceeded(3), 0) << "the kill was seen";
    EXPECT_GT(ok(4), 0) << "service resumed after the restart";
    EXPECT_EQ(other(), 0);
  }

  int in_flight() const { return in_flight_.load(); }
  bool ran_out_of_slots() const { return next_.load() >= kSlots; }
  // Slots submitted but completed other than exactly once.
  int not_once() const {
    int n = 0;
    for (int i = 0; i < std::min(next_.load(), kSlots); ++i) {
      n += completed_[i].load() != 1;
    }
    return n;
  }
  int ok(int p) const { return ok_[p].load(); }
  int deadline_exceeded(int p) const { return late_[p].load(); }
  int unavailable(int p) const { return down_[p].load(); }
  int other() const { return other_.load(); }
  absl::Duration slowest() const {
    return absl::Nanoseconds(slowest_ns_.load());
  }

 private:
  void record(int slot, int p, const absl::Status& s) {
    const int64_t ns = absl::GetCurrentTimeNanos() - began_ns_[slot];
    int64_t prev = slowest_ns_.load();
    while (ns > prev && !slowest_ns_.compare_exchange_weak(prev, ns)) {
    }
    completed_[slot].fetch_add(1);
    if (s.ok()) {
      ok_[p].fetch_add(1);
    } else if (absl::IsDeadlineExceeded(s)) {
      late_[p].fetch_add(1);
    } else if (absl::IsUnavailable(s)) {
      down_[p].fetch_add(1);
    } else {
      other_.fetch_add(1);
    }
    in_flight_.fetch_sub(1);
  }

  std::vector<std::atomic<int>> completed_;
  std::vector<int64_t> began_ns_;
  std::atomic<int> next_{0}, in_flight_{0}, phase_{0}, other_{0};
  std::atomic<int64_t> slowest_ns_{0};
  std::array<std::atomic<int>, kPhases> ok_{}, late_{}, down_{};
  std::atomic<bool> stop_{false};
};

}  // namespace throttlekit::testing

#endif  // THROTTLEKIT_TESTS_SUPPORT_ASYNC_LOAD_H_
