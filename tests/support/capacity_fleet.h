// tests/support/capacity_fleet.h
//
// Provides `run_capacity_fleet`: a real fleet of DistributedConcurrency
// nodes (one per OS process, on one key of a real coordinator) in front of
// a simulated backend whose capacity changes during the run, so the nodes'
// local limits, and with them the global ceiling L, move. The Redis and
// Postgres fleet tests call it with their backend.
//
// Four processes (at nice 10, below the observer), each a node whose local
// limit is AIMD in [kCapMin, kCapMax] starting at kCapMax, beating every
// kBeatMs with self-fencing (concurrency_fleet.h's constants), six worker
// threads each: acquire, count the slot in shared memory, call the backend,
// count it out, release. The backend is a counter in shared memory with a
// capacity: a call that finds it full is dropped at once (released as kDropped,
// which backs AIMD off by 0.9); one that fits holds its backend slot ~0.3 ms
// (released as kSuccess). The script, in ms from the start:
//   0      every process starts; the backend has no capacity limit, so L is
//          kCapMax;
//   1200   the backend's capacity drops to kCapSmall: calls are dropped,
//          the local limits fall towards kCapMin and L with them;
//   2600   the capacity is unlimited again (AIMD may climb back);
//   4000   the end.
//
// What is counted: at every acquisition the fleet's held slots (the workers'
// own count, as in concurrency_fleet.h), kept as the maximum per 5 ms
// bucket; the parent reads the coordinator's table about every 2 ms and
// keeps, per bucket, the smallest and largest L (the minimum of the live
// nodes' reported local limits: the aggregate the nodes run); and every
// node publishes the L of the grant it holds every millisecond (L can rise
// and fall between two reads of the table, and a grant made at the peak
// stands until its node beats again).

#ifndef THROTTLEKIT_TESTS_SUPPORT_CAPACITY_FLEET_H_
#define THROTTLEKIT_TESTS_SUPPORT_CAPACITY_FLEET_H_

#include <gtest/gtest.h>
#include <sys/resource.h>
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
#include <vector>

#include "support/concurrency_fleet.h"
#include "support/forked_fleet.h"
#include "throttlekit/concurrency/distributed_concurrency.h"
#include "throttlekit/coordinator/coordinator.h"

namespace throttlekit::testing {

inline constexpr int kCapProcs = 4;
inline constexpr int kCapWorkers = 6;
inline constexpr int64_t kCapMax = 16;  // every local limit's start and top
inline constexpr int64_t kCapMin = 4;
inline constexpr int64_t kCapSmall = 5;  // the backend's reduced capacity
inline constexpr int64_t kCapDropAtMs = 1200;
inline constexpr int64_t kCapRestoreAtMs = 2600;
inline constexpr int64_t kCapRunMs = 4000;
inline constexpr int64_t kCapBucketMs = 5;
inline constexpr int kCapBuckets = kCapRunMs / kCapBucketMs;

struct CapacityShared {
  std::atomic<int64_t> capacity;  // the backend's; 0: unlimited
  std::atomic<int64_t> backend;   // calls in the backend now
  std::atomic<int64_t> held;      // slots held fleet-wide (workers' count)
  std::atomic<int64_t> drops;
  std::atomic<int64_t> admitted;
  std::atomic<int64_t> held_at_acquire[kCapBuckets];  // max per bucket
  // The largest global limit of a grant any node held, per bucket (each
  // node's monitor thread publishes its last grant's every millisecond): L
  // can move up and back between two reads of the table, and a grant made
  // at the peak stands until its node beats again.
  std::atomic<int64_t> grant_l[kCapBuckets];
  std::atomic<int64_t> local_limit[kCapProcs];  // each node's, now
  std::atomic<int> stop;
  int64_t start_ms;
};

struct CapacityResult {
  // Per bucket: the largest fleet count an acquisition saw (0: none), and
  // the smallest and largest L the parent read (0: no read).
  std::vector<int64_t> held_at_acquire;
  std::vector<int64_t> l_min, l_max;
  std::vector<int64_t> grant_l;  // the largest L of a grant held (0: none)
  int64_t drops = 0;
  int64_t admitted = 0;
  int64_t table_reads = 0;
  int64_t l_before_drop = 0;  // the largest L before the drop
  int64_t l_lowest = 0;       // the smallest L while the capacity was low
  int64_t lowest_local_limit = 0;
  int64_t l_at_end = 0;
};

// The parent's reads of bucket `b` may all precede a change later in the
// bucket, which an acquisition in it already saw: the L around bucket `b`
// is judged from the `window` buckets before it through kCapAfter after.
inline constexpr int kCapAfter = 2;

// The L in force around bucket `b`: the largest the parent read from
// `window` buckets before it to kCapAfter after; 0 when the parent read
// nothing in the kCapAfter buckets after `b` (descheduled on a loaded
// machine, it cannot tell what L an acquisition in `b` already saw).
inline int64_t recent_max_l(const CapacityResult& r, int b, int window) {
  const int last = std::min(kCapBuckets - 1, b + kCapAfter);
  bool read_after = false;
  for (int i = b + 1; i <= last; ++i) read_after |= r.l_max[i] > 0;
  if (!read_after) return 0;
  int64_t l = 0;
  for (int i = std::max(0, b - window); i <= last; ++i) {
    l = std::max({l, r.l_max[i], r.grant_l[i]});
  }
  return l;
}

// Unread buckets in a row that a settled span may contain: 15 ms, less than
// a beat interval (kBeatMs). L, the smallest local limit the live nodes
// reported, moves only when a node beats, and a node raising or lowering it
// again beats kBeatMs later; a move of L that a gap hid would also show in
// `grant_l`, which the nodes publish every millisecond, not only when read.
inline constexpr int kCapMaxGap = 3;

// True when L held one value from `window` buckets before `b` to kCapAfter
// after: every read in that span saw that value, no node held a grant
// above it, the span's reads leave no gap longer than kCapMaxGap buckets,
// and one of the kCapAfter buckets after `b` was read. That value in `*l`.
inline bool settled_l(const CapacityResult& r, int b, int window, int64_t* l) {
  if (b < window || b + kCapAfter >= kCapBuckets) return false;
  int64_t value = 0;
  int gap = 0;
  bool read_after = false;
  for (int i = b - window; i <= b + kCapAfter; ++i) {
    if (r.l_min[i] == 0) {
      if (++gap > kCapMaxGap) return false;
      continue;
    }
    gap = 0;
    if (r.l_min[i] != r.l_max[i] || (value != 0 && r.l_min[i] != value)) {
      return false;
    }
    value = r.l_min[i];
    read_after |= i > b;
  }
  if (value == 0 || !read_after) return false;
  for (int i = b - window; i <= b + kCapAfter; ++i) {
    if (r.grant_l[i] > value) return false;
  }
  *l = value;
  return true;
}

inline void run_capacity_node(
    int i, CapacityShared& sh, const std::string& key, bool handoff,
    const std::function<std::shared_ptr<Coordinator>()>& make_coordinator) {
  // The nodes run at nice 10 (their threads inherit it): 28 threads on two
  // cores would otherwise starve the store's server processes that answer
  // the parent's reads, and a run the parent cannot observe is evidence of
  // nothing. Their own store calls are served at the normal priority; the
  // nodes still run on whatever the observer leaves, descheduled often.
  (void)setpriority(PRIO_PROCESS, 0, 10);
  // Self-fencing as in concurrency_fleet.h (28 threads on two cores).
  DistributedConcurrencyOptions o =
      fleet_node_options("c" + std::to_string(i), key, handoff);
  o.local.min_limit = kCapMin;
  o.local.initial_limit = o.local.max_limit = kCapMax;
  std::unique_ptr<DistributedConcurrency> node =
      start_fleet_node(o, make_coordinator);
  std::vector<std::thread> workers;
  for (int w = 0; w < kCapWorkers; ++w) {
    workers.emplace_back([&] {
      while (sh.stop.load() == 0) {
        DistributedConcurrency::Permit p = node->acquire();
        if (!p) {
          std::this_thread::sleep_for(std::chrono::microseconds(200));
          continue;
        }
        const int64_t held = sh.held.fetch_add(1) + 1;
        const int64_t b = (wall_ms() - sh.start_ms) / kCapBucketMs;
        if (b >= 0 && b < kCapBuckets) raise_to(sh.held_at_acquire[b], held);
        sh.admitted.fetch_add(1);
        const int64_t cap = sh.capacity.load();
        const int64_t in_backend = sh.backend.fetch_add(1) + 1;
        if (cap > 0 && in_backend > cap) {
          sh.backend.fetch_sub(1);
          sh.drops.fetch_add(1);
          std::this_thread::sleep_for(std::chrono::microseconds(100));
          sh.held.fetch_sub(1);
          p.release(PermitOutcome::kDropped);
          continue;
        }
        std::this_thread::sleep_for(std::chrono::microseconds(300));
        sh.backend.fetch_sub(1);
        sh.held.fetch_sub(1);
        p.release(PermitOutcome::kSuccess);
      }
    });
  }
  while (sh.stop.load() == 0) {
    const DistributedConcurrencyStats st = node->stats();
    sh.local_limit[i].store(st.local.limit);
    const int64_t b = (wall_ms() - sh.start_ms) / kCapBucketMs;
    if (b >= 0 && b < kCapBuckets) raise_to(sh.grant_l[b], st.global_limit);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  for (std::thread& t : workers) t.join();
  node.reset();
  _exit(0);
}

inline CapacityResult run_capacity_fleet(
    const std::string& key, bool handoff,
    const std::function<std::shared_ptr<Coordinator>()>& make_coordinator) {
  CapacityShared* shared = map_shared<CapacityShared>();
  if (shared == nullptr) return {};
  CapacityShared& sh = *shared;
  const int64_t start = wall_ms() + 300;
  sh.start_ms = start;
  pid_t pids[kCapProcs];
  for (int i = 0; i < kCapProcs; ++i) {
    pids[i] = fork();
    if (pids[i] == 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(start - wall_ms()));
      run_capacity_node(i, sh, key, handoff, make_coordinator);
    }
  }
  std::shared_ptr<Coordinator> reader = make_coordinator();
  const ObserverPriority observer;
  CapacityResult r;
  r.l_min.assign(kCapBuckets, 0);
  r.l_max.assign(kCapBuckets, 0);
  r.lowest_local_limit = kCapMax;
  const auto now_ms = [&] { return wall_ms() - start; };
  while (now_ms() < 0)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  for (int64_t t = now_ms(); t < kCapRunMs; t = now_ms()) {
    if (t >= kCapDropAtMs && t < kCapRestoreAtMs) {
      sh.capacity.store(kCapSmall);
    } else {
      sh.capacity.store(0);
    }
    absl::StatusOr<std::vector<HeartbeatNode>> rows =
        reader->heartbeat_nodes(key);
    const int64_t after = now_ms();
    // A read counts for the buckets it spanned only if it stayed in one
    // (the table is somewhere between the call and the answer).
    if (rows.ok() && !rows->empty() &&
        t / kCapBucketMs == after / kCapBucketMs && after < kCapRunMs) {
      ++r.table_reads;
      int64_t l = INT64_MAX;
      for (const HeartbeatNode& n : *rows) l = std::min(l, n.local_limit);
      const int b = static_cast<int>(t / kCapBucketMs);
      r.l_min[b] = r.l_min[b] == 0 ? l : std::min(r.l_min[b], l);
      r.l_max[b] = std::max(r.l_max[b], l);
      if (t < kCapDropAtMs) r.l_before_drop = std::max(r.l_before_drop, l);
      if (t >= kCapDropAtMs && t < kCapRestoreAtMs) {
        r.l_lowest = r.l_lowest == 0 ? l : std::min(r.l_lowest, l);
      }
      r.l_at_end = l;
    }
    for (int i = 0; i < kCapProcs; ++i) {
      const int64_t l = sh.local_limit[i].load();
      if (l > 0) r.lowest_local_limit = std::min(r.lowest_local_limit, l);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  sh.stop.store(1);
  for (int i = 0; i < kCapProcs; ++i) waitpid(pids[i], nullptr, 0);
  for (int b = 0; b < kCapBuckets; ++b) {
    r.held_at_acquire.push_back(sh.held_at_acquire[b].load());
    r.grant_l.push_back(sh.grant_l[b].load());
  }
  r.drops = sh.drops.load();
  r.admitted = sh.admitted.load();
  unmap_shared(shared);
  return r;
}

// Acquisitions that saw the fleet above the L in force: `recent` against
// the largest L of the last lease (`kLeaseMs`), `settled` against L in
// buckets where it had not moved for 100 ms.
struct CapacityOvers {
  int64_t judged = 0;    // buckets with an acquisition and a read after it
  int64_t unjudged = 0;  // buckets with an acquisition and no read after it
  int64_t recent = 0;
  int64_t settled = 0;
  int64_t settled_buckets = 0;  // buckets with an acquisition and settled L
  int64_t last_settled_over_ms = -1;
  std::vector<int> recent_buckets;  // the buckets counted in `recent`
};

inline CapacityOvers capacity_overs(const CapacityResult& r) {
  CapacityOvers o;
  constexpr int kLeaseBuckets = static_cast<int>(kLeaseMs / kCapBucketMs);
  constexpr int kSettleBuckets = static_cast<int>(100 / kCapBucketMs);
  for (int b = 0; b < kCapBuckets; ++b) {
    const int64_t held = r.held_at_acquire[b];
    if (held == 0) continue;
    const int64_t recent = recent_max_l(r, b, kLeaseBuckets);
    ++(recent > 0 ? o.judged : o.unjudged);
    if (recent > 0 && held > recent) {
      ++o.recent;
      o.recent_buckets.push_back(b);
    }
    int64_t l = 0;
    if (settled_l(r, b, kSettleBuckets, &l)) {
      ++o.settled_buckets;
      if (held > l) {
        ++o.settled;
        o.last_settled_over_ms = b * kCapBucketMs;
      }
    }
  }
  return o;
}

inline void print_capacity_fleet(const char* what, const CapacityResult& r,
                                 const CapacityOvers& o) {
  for (const int b : o.recent_buckets) {
    std::printf(
        "%s: over at bucket %d (%d ms): held %lld, L read/granted "
        "around:",
        what, b, b * static_cast<int>(kCapBucketMs),
        static_cast<long long>(r.held_at_acquire[b]));
    for (int i = std::max(0, b - 6); i <= std::min(kCapBuckets - 1, b + 6);
         ++i) {
      std::printf(" %lld-%lld/%lld", static_cast<long long>(r.l_min[i]),
                  static_cast<long long>(r.l_max[i]),
                  static_cast<long long>(r.grant_l[i]));
    }
    std::printf("\n");
  }
  std::printf(
      "%s: %lld admitted, %lld dropped by the backend; %lld table reads; L "
      "%lld before the drop, down to %lld while capacity was %lld (lowest "
      "local limit %lld), %lld at the end; acquisitions above the largest "
      "L of the last lease: %lld of %lld buckets judged (%lld not: no read "
      "right after); above a settled L: %lld of %lld buckets (last at %lld "
      "ms)\n",
      what, static_cast<long long>(r.admitted), static_cast<long long>(r.drops),
      static_cast<long long>(r.table_reads),
      static_cast<long long>(r.l_before_drop),
      static_cast<long long>(r.l_lowest), static_cast<long long>(kCapSmall),
      static_cast<long long>(r.lowest_local_limit),
      static_cast<long long>(r.l_at_end), static_cast<long long>(o.recent),
      static_cast<long long>(o.judged), static_cast<long long>(o.unjudged),
      static_cast<long long>(o.settled),
      static_cast<long long>(o.settled_buckets),
      static_cast<long long>(o.last_settled_over_ms));
  std::printf("%s (held at acquisition / L) per 50 ms:", what);
  for (int b = 0; b < kCapBuckets; b += 10) {
    int64_t held = 0, l = 0;
    for (int i = b; i < b + 10 && i < kCapBuckets; ++i) {
      held = std::max(held, r.held_at_acquire[i]);
      l = std::max(l, r.l_max[i]);
    }
    std::printf(" %lld/%lld", static_cast<long long>(held),
                static_cast<long long>(l));
  }
  std::printf("\n");
}

// Whether a pair of runs carries enough evidence: more than 500 table
// reads in each (one per 8 ms), and in the with-handoff run four in five
// buckets judged against the L of the last lease and a quarter of all
// buckets judged against a settled L. All need table reads close after
// each acquisition; a run whose reader was starved has too few of them.
// (On a Postgres store, with the reader in the real-time class and the
// nodes at normal priority, 58% to 89% of the buckets were judged, 157 to
// 390 settled and 450 to 1,300 reads made; a run in the test command's
// serial phase, the machine busier than alone, had the evidence in none of
// three attempts. Alone, with the nodes at nice 10 or not, the reader made
// 1,000 to 1,300 reads, 97% to 99% of the buckets judged, 400 to 430
// settled: the nice keeps the fleet's own 28 threads from taking the
// store's share of the cores when the machine is slower.)
inline bool capacity_fleet_has_power(const CapacityResult& with_handoff,
                                     const CapacityResult& without,
                                     const CapacityOvers& o) {
  return with_handoff.table_reads > 500 && without.table_reads > 500 &&
         o.judged > 4 * (o.judged + o.unjudged) / 5 &&
         o.settled_buckets > kCapBuckets / 4;
}

// The bounds every run of every backend's capacity fleet holds.
inline void expect_capacity_fleet_bounds(const CapacityResult& with_handoff,
                                         const CapacityResult& without) {
  const CapacityOvers o = capacity_overs(with_handoff);
  const CapacityOvers plain = capacity_overs(without);
  print_capacity_fleet("handoff", with_handoff, o);
  print_capacity_fleet("no handoff", without, plain);
  for (const CapacityResult* r : {&with_handoff, &without}) {
    EXPECT_GT(r->admitted, 2'000);  // the fleet did serve
    EXPECT_GT(r->drops, 0);         // the capacity did drop
    // The local limits, and L with them, moved with the capacity.
    EXPECT_EQ(r->l_before_drop, kCapMax);
    EXPECT_LE(r->l_lowest, kCapMax / 2);
  }
  // With handoff: no acquisition took the fleet above the largest L in
  // force during the last lease, nor above L once L had held still for
  // 100 ms.
  EXPECT_EQ(o.recent, 0);
  EXPECT_EQ(o.settled, 0);
  // Without handoff any overshoot of a settled L drains: none in the last
  // second (L is back at its top and still by then).
  EXPECT_LT(plain.last_settled_over_ms, kCapRunMs - 1000);
}

// Runs the fleet with and without handoff on keys `key_prefix`:<attempt>,
// asserting the bounds of every run, until a with-handoff run has power
// (capacity_fleet_has_power), at most `kCapAttempts` times: a run with too
// few table reads to judge is evidence of nothing, never a pass.
inline constexpr int kCapAttempts = 3;
inline void expect_capacity_fleet_holds(
    const std::string& key_prefix,
    const std::function<std::shared_ptr<Coordinator>()>& make_coordinator) {
  for (int attempt = 1;; ++attempt) {
    const std::string key = key_prefix + ":" + std::to_string(attempt);
    const CapacityResult handoff =
        run_capacity_fleet(key + ":h", /*handoff=*/true, make_coordinator);
    const CapacityResult plain =
        run_capacity_fleet(key + ":p", /*handoff=*/false, make_coordinator);
    expect_capacity_fleet_bounds(handoff, plain);
    const CapacityOvers o = capacity_overs(handoff);
    if (capacity_fleet_has_power(handoff, plain, o)) return;
    if (attempt == kCapAttempts) {
      ADD_FAILURE() << kCapAttempts << " runs without the evidence to judge "
                    << "the settled bound: the last judged " << o.judged
                    << " of " << o.judged + o.unjudged << " buckets, "
                    << o.settled_buckets << " settled (need more than "
                    << kCapBuckets / 4 << "), " << handoff.table_reads
                    << " and " << plain.table_reads
                    << " table reads (need more than 500 each)";
      return;
    }
    std::printf(
        "attempt %d: %lld settled buckets, %lld of %lld judged, %lld and "
        "%lld table reads: too little evidence, running again\n",
        attempt, static_cast<long long>(o.settled_buckets),
        static_cast<long long>(o.judged),
        static_cast<long long>(o.judged + o.unjudged),
        static_cast<long long>(handoff.table_reads),
        static_cast<long long>(plain.table_reads));
  }
}

}  // namespace throttlekit::testing

#endif  // THROTTLEKIT_TESTS_SUPPORT_CAPACITY_FLEET_H_
