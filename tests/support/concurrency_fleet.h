// tests/support/concurrency_fleet.h
//
// Provides `run_concurrency_fleet`: a real fleet of DistributedConcurrency
// nodes, one per OS process, on one key of a real coordinator (the Redis
// and Postgres fleet tests call it with their backend), and what it
// measured.
//
// Five processes (p0 .. p4), each a node with local limit kLocal (fixed:
// min = max = initial, so L = kLocal whatever the aggregate), beating every
// kBeatMs on a thread, four worker threads each: acquire, count the slot in
// shared memory, hold it ~0.3 ms (sleeping), count it out, release. The
// script, in ms from the start:
//   0      p0 .. p3 start;
//   1500   p4 joins;
//   2500   p1 leaves (its workers stop, its node is destroyed; its row
//          lapses after the lease);
//   3500   p2 is SIGKILLed (its slots die with it; its budget returns
//          after the lease);
//   4500   p3 is quiesced (its workers park holding nothing), SIGSTOPped
//          for 3 leases (its lease lapses and its budget is handed on),
//          released and resumed: its workers try at once, and self-fencing
//          must refuse them until a beat renews its lease;
//   6500   the end.
// The parent samples every process's in-flight count (shared memory) at
// least every millisecond, and the table on the coordinator.

#ifndef THROTTLEKIT_TESTS_SUPPORT_CONCURRENCY_FLEET_H_
#define THROTTLEKIT_TESTS_SUPPORT_CONCURRENCY_FLEET_H_

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "support/forked_fleet.h"
#include "throttlekit/concurrency/distributed_concurrency.h"
#include "throttlekit/coordinator/coordinator.h"

namespace throttlekit::testing {

inline constexpr int kFleetProcs = 5;
inline constexpr int kFleetWorkers = 4;
inline constexpr int64_t kLocal = 12;  // every node's local limit: L
inline constexpr int64_t kBeatMs = 25;
inline constexpr int64_t kLeaseMs = 250;
inline constexpr int64_t kFenceMarginMs = 50;
inline constexpr int64_t kRunMs = 6500;

// Lives in memory shared by the parent and every child (lock-free atomics
// work across processes).
struct FleetShared {
  std::atomic<int64_t> inflight[kFleetProcs];
  std::atomic<int64_t> admitted[kFleetProcs];
  std::atomic<int64_t> closed_refusals[kFleetProcs];  // refused at limit 0
  std::atomic<int64_t> fences[kFleetProcs];           // on_fenced calls
  std::atomic<int64_t> share[kFleetProcs];
  std::atomic<int64_t> beats[kFleetProcs];
  std::atomic<int64_t> failed_beats[kFleetProcs];
  std::atomic<int> quiesce[kFleetProcs];  // parent -> child
  std::atomic<int> parked[kFleetProcs];   // child -> parent
  std::atomic<int> leave[kFleetProcs];    // parent -> child
  std::atomic<int> stop;
  // Slots held fleet-wide: a worker counts itself in here after its own
  // process's counter and out before it, so `held` never exceeds the true
  // sum of held slots (a kill between the two can only leave it low by
  // one). Every acquisition checks it: exact, not sampled.
  std::atomic<int64_t> held;
  std::atomic<int64_t> peak;
  std::atomic<int64_t> over;          // acquisitions that took held above L
  std::atomic<int64_t> last_over_ms;  // since the start; -1 for none
  int64_t start_ms;
};

struct FleetResult {
  int64_t samples = 0;
  int64_t max_gap_us = 0;  // the longest time between two samples
  int64_t max_inflight = 0;
  int64_t max_inflight_at_ms = 0;
  // The largest sum of the processes' counters read one after the other
  // (may exceed the true sum if the sampler was descheduled mid-read).
  int64_t max_sum_of_reads = 0;
  int64_t over_samples = 0;  // samples with sum(inflight) > L
  int64_t last_over_ms = -1;
  int64_t admitted = 0;
  // From the workers' own counting, at every acquisition.
  int64_t peak_held = 0;
  int64_t over_acquisitions = 0;
  int64_t last_over_acquisition_ms = -1;
  int64_t reclaimed_after_ms = -1;  // p2's row gone, after the kill
  // The latest expiry p2's row carried (its last beat's, on the store's
  // clock, epoch ms) and the wall time the parent first saw the row gone.
  int64_t p2_expires_at_ms = -1;
  int64_t p2_gone_seen_at_ms = -1;
  int64_t p3_fences = 0;
  int64_t p3_closed_refusals_after_resume = 0;
  int64_t p4_max_share = 0;
  // sum(inflight) every 10 ms (max over each 10 ms), for the docs' plot.
  std::vector<int64_t> timeline;
};

// The options of fleet node `node_id` on `key`, with `handoff` or not:
// beats every kBeatMs on a kLeaseMs lease, eagerly, and an AIMD local
// limit (the caller sets its bounds). Self-fencing: a process descheduled
// past its lease (many threads on two cores) stops admitting before its
// budget is handed on; without fencing it would keep its old share
// meanwhile (the documented caveat), which these runs are not about.
inline DistributedConcurrencyOptions fleet_node_options(std::string node_id,
                                                        const std::string& key,
                                                        bool handoff) {
  return {.node_id = std::move(node_id),
          .key = key,
          .heartbeat_ms = kBeatMs,
          .lease_ttl_ms = kLeaseMs,
          .handoff = handoff,
          .eager_heartbeats = true,
          .self_fencing = true,
          .fence_safety_margin_ms = kFenceMarginMs,
          .local = {.law = ConcurrencyLaw::kAimd}};
}

// In a node's process: the node of `o` over a coordinator from
// `make_coordinator`, after its first beat. Exits the process with 3 when
// there is no coordinator, with 4 when the node cannot be made.
inline std::unique_ptr<DistributedConcurrency> start_fleet_node(
    const DistributedConcurrencyOptions& o,
    const std::function<std::shared_ptr<Coordinator>()>& make_coordinator) {
  std::shared_ptr<Coordinator> coordinator = make_coordinator();
  if (coordinator == nullptr) _exit(3);
  absl::StatusOr<std::unique_ptr<DistributedConcurrency>> made =
      DistributedConcurrency::create(o, coordinator);
  if (!made.ok()) _exit(4);
  std::unique_ptr<DistributedConcurrency> node = *std::move(made);
  (void)node->beat_now();
  return node;
}

// One node's process: runs until told to leave or stop.
inline void run_fleet_node(
    int i, FleetShared& sh, const std::string& key, bool handoff,
    const std::function<std::shared_ptr<Coordinator>()>& make_coordinator) {
  DistributedConcurrencyOptions o =
      fleet_node_options("p" + std::to_string(i), key, handoff);
  o.on_fenced = [&sh, i] { sh.fences[i].fetch_add(1); };
  o.local.initial_limit = o.local.min_limit = o.local.max_limit = kLocal;
  std::unique_ptr<DistributedConcurrency> node =
      start_fleet_node(o, make_coordinator);
  std::atomic<int> parked_workers{0};
  std::vector<std::thread> workers;
  for (int w = 0; w < kFleetWorkers; ++w) {
    workers.emplace_back([&] {
      bool parked = false;
      while (sh.stop.load() == 0 && sh.leave[i].load() == 0) {
        if (sh.quiesce[i].load() != 0) {
          if (!parked) parked_workers.fetch_add(1);
          parked = true;
          std::this_thread::sleep_for(std::chrono::microseconds(100));
          continue;
        }
        if (parked) parked_workers.fetch_sub(1);
        parked = false;
        DistributedConcurrency::Permit p = node->acquire();
        if (!p) {
          if (p.limit_at_acquire() == 0) sh.closed_refusals[i].fetch_add(1);
          std::this_thread::sleep_for(std::chrono::microseconds(200));
          continue;
        }
        sh.inflight[i].fetch_add(1);
        const int64_t held = sh.held.fetch_add(1) + 1;
        raise_to(sh.peak, held);
        if (held > kLocal) {
          sh.over.fetch_add(1);
          sh.last_over_ms.store(wall_ms() - sh.start_ms);
        }
        sh.admitted[i].fetch_add(1);
        std::this_thread::sleep_for(std::chrono::microseconds(300));
        sh.held.fetch_sub(1);
        sh.inflight[i].fetch_sub(1);
        p.release(PermitOutcome::kSuccess);
      }
      if (parked) parked_workers.fetch_sub(1);
    });
  }
  while (sh.stop.load() == 0 && sh.leave[i].load() == 0) {
    const DistributedConcurrencyStats s = node->stats();
    sh.share[i].store(s.share);
    sh.beats[i].store(s.beats);
    sh.failed_beats[i].store(s.failed_beats);
    sh.parked[i].store(parked_workers.load() == kFleetWorkers ? 1 : 0);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  for (std::thread& t : workers) t.join();
  node.reset();
  _exit(0);
}

// Runs the script above on `key`; `make_coordinator` is called once in
// every process (after its fork) and once in the parent (to read the
// table).
inline FleetResult run_concurrency_fleet(
    const std::string& key, bool handoff,
    const std::function<std::shared_ptr<Coordinator>()>& make_coordinator) {
  FleetShared* shared = map_shared<FleetShared>();
  if (shared == nullptr) return {};
  FleetShared& sh = *shared;
  const int64_t start = wall_ms() + 300;
  sh.start_ms = start;
  sh.last_over_ms.store(-1);
  const int64_t join_at[kFleetProcs] = {0, 0, 0, 0, 1500};
  pid_t pids[kFleetProcs];
  for (int i = 0; i < kFleetProcs; ++i) {
    pids[i] = fork();
    if (pids[i] == 0) {
      std::this_thread::sleep_for(
          std::chrono::milliseconds(start + join_at[i] - wall_ms()));
      run_fleet_node(i, sh, key, handoff, make_coordinator);
    }
  }
  std::shared_ptr<Coordinator> reader = make_coordinator();
  FleetResult r;
  const auto now_ms = [&] { return wall_ms() - start; };
  const auto since = std::chrono::steady_clock::now();
  const auto us = [&] {
    return std::chrono::duration_cast<std::chrono::microseconds>(
               std::chrono::steady_clock::now() - since)
        .count();
  };
  bool left = false, killed = false, stopped = false, resumed = false;
  int64_t killed_at = 0, resumed_at = 0, p3_refusals_at_resume = 0;
  int64_t last_sample_us = -1;
  int64_t bucket_max = 0, bucket = 0;
  while (now_ms() < 0)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  while (now_ms() < kRunMs) {
    const int64_t t = now_ms();
    // Every process's in-flight count; the fleet's sum is read as `held`,
    // one word, so a sampler descheduled between two processes' reads
    // cannot add a slot that moved between them.
    int64_t per_process = 0;
    for (int i = 0; i < kFleetProcs; ++i) per_process += sh.inflight[i].load();
    const int64_t sum = sh.held.load();
    r.max_sum_of_reads = std::max(r.max_sum_of_reads, per_process);
    const int64_t u = us();
    if (last_sample_us >= 0) {
      r.max_gap_us = std::max(r.max_gap_us, u - last_sample_us);
    }
    last_sample_us = u;
    ++r.samples;
    if (sum > r.max_inflight) {
      r.max_inflight = sum;
      r.max_inflight_at_ms = t;
    }
    if (sum > kLocal) {
      ++r.over_samples;
      r.last_over_ms = t;
    }
    if (t / 10 != bucket) {
      r.timeline.push_back(bucket_max);
      bucket = t / 10;
      bucket_max = 0;
    }
    bucket_max = std::max(bucket_max, sum);
    r.p4_max_share = std::max(r.p4_max_share, sh.share[4].load());
    if (!left && t >= 2500) {
      sh.leave[1].store(1);
      left = true;
    }
    // p2's row as the table holds it (its last beat's expiry), read just
    // before the kill and after it until the row is gone.
    const auto read_p2 = [&] {
      absl::StatusOr<std::vector<HeartbeatNode>> rows =
          reader->heartbeat_nodes(key);
      if (!rows.ok()) return false;
      const auto p2 =
          std::find_if(rows->begin(), rows->end(),
                       [](const HeartbeatNode& n) { return n.id == "p2"; });
      if (p2 == rows->end()) return true;
      r.p2_expires_at_ms = std::max(r.p2_expires_at_ms, p2->expires_at_ms);
      return false;
    };
    if (!killed && t >= 3500) {
      (void)read_p2();
      kill(pids[2], SIGKILL);
      waitpid(pids[2], nullptr, 0);
      sh.held.fetch_sub(sh.inflight[2].exchange(0));  // its work died
      killed = true;
      killed_at = t;
    }
    if (killed && r.reclaimed_after_ms < 0 && t % 5 == 0 && read_p2()) {
      r.reclaimed_after_ms = t - killed_at;
      r.p2_gone_seen_at_ms = wall_ms();
    }
    if (!stopped && t >= 4500) {
      sh.quiesce[3].store(1);
      if (sh.parked[3].load() == 1 && sh.inflight[3].load() == 0) {
        kill(pids[3], SIGSTOP);
        stopped = true;
        resumed_at = t + 3 * kLeaseMs;
      }
    }
    if (stopped && !resumed && t >= resumed_at) {
      p3_refusals_at_resume = sh.closed_refusals[3].load();
      sh.quiesce[3].store(0);
      kill(pids[3], SIGCONT);
      resumed = true;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  sh.stop.store(1);
  for (int i = 0; i < kFleetProcs; ++i) {
    if (i != 2) waitpid(pids[i], nullptr, 0);
  }
  for (int i = 0; i < kFleetProcs; ++i) r.admitted += sh.admitted[i].load();
  r.peak_held = sh.peak.load();
  r.over_acquisitions = sh.over.load();
  r.last_over_acquisition_ms = sh.last_over_ms.load();
  r.p3_fences = sh.fences[3].load();
  r.p3_closed_refusals_after_resume =
      sh.closed_refusals[3].load() - p3_refusals_at_resume;
  EXPECT_TRUE(resumed) << "p3 never parked";
  unmap_shared(shared);
  return r;
}

inline void print_fleet(const char* what, const FleetResult& r) {
  std::printf(
      "%s: %lld samples (longest gap %lld us), max sampled sum(inflight) "
      "%lld of L %lld at %lld ms, %lld samples over L (last at %lld ms); "
      "at acquisitions: peak %lld, %lld over L (last at %lld ms); %lld "
      "admitted, p2 reclaimed %lld ms after its kill (%lld ms after its "
      "lease's expiry), p3 fenced %lld "
      "time(s) and refused %lld acquires after resuming, p4's largest "
      "share %lld\n",
      what, static_cast<long long>(r.samples),
      static_cast<long long>(r.max_gap_us),
      static_cast<long long>(r.max_inflight), static_cast<long long>(kLocal),
      static_cast<long long>(r.max_inflight_at_ms),
      static_cast<long long>(r.over_samples),
      static_cast<long long>(r.last_over_ms),
      static_cast<long long>(r.peak_held),
      static_cast<long long>(r.over_acquisitions),
      static_cast<long long>(r.last_over_acquisition_ms),
      static_cast<long long>(r.admitted),
      static_cast<long long>(r.reclaimed_after_ms),
      static_cast<long long>(r.p2_gone_seen_at_ms - r.p2_expires_at_ms),
      static_cast<long long>(r.p3_fences),
      static_cast<long long>(r.p3_closed_refusals_after_resume),
      static_cast<long long>(r.p4_max_share));
  std::printf("%s timeline (max sum(inflight) per 10 ms):", what);
  for (int64_t v : r.timeline) std::printf(" %lld", static_cast<long long>(v));
  std::printf("\n");
}

// The assertions every backend's fleet meets.
inline void expect_fleet_holds(const FleetResult& with_handoff,
                               const FleetResult& without) {
  print_fleet("handoff", with_handoff);
  print_fleet("no handoff", without);
  for (const FleetResult* r : {&with_handoff, &without}) {
    // Over one sample per ms on average (the workers' own count, at every
    // acquisition, is the exact check).
    EXPECT_GT(r->samples, kRunMs);
    EXPECT_GT(r->admitted, 2'000);  // the fleet did serve
    EXPECT_GE(r->p3_fences, 1);     // p3 fenced itself while stopped
    EXPECT_GT(r->p4_max_share, 0);  // the newcomer got a share
    // p2's budget came back during the run, and not before the lease its
    // last beat wrote had lapsed: the row was seen gone no earlier than
    // the expiry it carried (store clock and wall clock are this
    // machine's; 1 ms for their rounding). Not "a lease minus a beat after
    // the kill": on a loaded machine p2's last beat can come longer before
    // its kill (run BP: a 100 ms stall, reclaimed 158 ms after the kill,
    // still after its lease). How long after the kill is printed: a peer's
    // beat evicts it, and the parent's read sees it, both later on a loaded
    // machine.
    EXPECT_GE(r->reclaimed_after_ms, 0) << "p2's row never went";
    EXPECT_GT(r->p2_expires_at_ms, 0) << "p2's row never read";
    EXPECT_GE(r->p2_gone_seen_at_ms, r->p2_expires_at_ms - 1)
        << "p2's share was reclaimed before its lease lapsed";
  }
  // With handoff the ceiling is hard: no acquisition ever took the fleet
  // above L, and no sample saw it there.
  EXPECT_EQ(with_handoff.over_acquisitions, 0);
  EXPECT_LE(with_handoff.peak_held, kLocal);
  EXPECT_EQ(with_handoff.over_samples, 0);
  // Without, any overshoot drains: none in the last second.
  EXPECT_LT(without.last_over_acquisition_ms, kRunMs - 1000);
}

}  // namespace throttlekit::testing

#endif  // THROTTLEKIT_TESTS_SUPPORT_CONCURRENCY_FLEET_H_
