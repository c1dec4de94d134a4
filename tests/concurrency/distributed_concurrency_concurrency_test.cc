// DistributedConcurrency under real threads and the real clock: nodes on
// one MemoryCoordinator, each with its beats on a ThreadBeatScheduler
// (every 2 ms) and more worker threads than cores acquiring, holding for a
// moment and releasing, while a node joins and one leaves. Each worker
// counts itself in a shared counter after its acquire and out before its
// release, so the counter never exceeds the true sum of held slots: with
// acknowledged handoff it must never exceed the global limit, over
// thousands of beats and the grant changes of a join and a leave. Runs
// under ThreadSanitizer (label tsan).

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "support/created.h"
#include "throttlekit/concurrency/distributed_concurrency.h"
#include "throttlekit/coordinator/memory_coordinator.h"

namespace throttlekit {
namespace distributed_concurrency_concurrency_test {
namespace {

struct Fleet {
  std::shared_ptr<Coordinator> coordinator = *MemoryCoordinator::create({});
  std::atomic<int64_t> held{0};
  std::atomic<int64_t> peak{0};
  std::atomic<int64_t> granted{0};
  std::atomic<bool> stop{false};
};

std::unique_ptr<DistributedConcurrency> node(Fleet& fleet, std::string id,
                                             int64_t local, bool handoff) {
  DistributedConcurrencyOptions o;
  o.node_id = std::move(id);
  o.key = "fleet";
  o.heartbeat_ms = 2;
  // Long against a beat thread starved by nine spinning workers on two
  // cores (a lease lapsing while its node holds slots is outside the bound:
  // the coordinator would give them away).
  o.lease_ttl_ms = 2000;
  o.handoff = handoff;
  o.eager_heartbeats = true;
  o.eager_debounce_ms = 1;
  o.local.initial_limit = local;
  return testing::made(DistributedConcurrency::create(o, fleet.coordinator));
}

// Until `stop` or `fleet.stop`: acquire, count in, hold ~50 us, count
// out, release (kIgnored: the local limits stay fixed, so the global limit
// is constant and the bound exact).
void work(Fleet& fleet, DistributedConcurrency& n,
          const std::atomic<bool>& stop) {
  while (!stop.load() && !fleet.stop.load(std::memory_order_relaxed)) {
    DistributedConcurrency::Permit p = n.acquire();
    if (!p) {
      std::this_thread::yield();
      continue;
    }
    const int64_t now = fleet.held.fetch_add(1) + 1;
    int64_t peak = fleet.peak.load();
    while (now > peak && !fleet.peak.compare_exchange_weak(peak, now)) {
    }
    fleet.granted.fetch_add(1, std::memory_order_relaxed);
    const auto until =
        std::chrono::steady_clock::now() + std::chrono::microseconds(50);
    while (std::chrono::steady_clock::now() < until) {
    }
    fleet.held.fetch_sub(1);
    p.release(PermitOutcome::kIgnored);
  }
}

// Runs nodes a and b, then c joins and b leaves, with 3 workers each (9
// threads on 2 cores) for `ms` in all; returns the peak of the shared
// counter.
int64_t run_fleet(Fleet& fleet, bool handoff, int ms) {
  constexpr int64_t kLocal = 4;  // every node's local limit: L = 4
  const std::atomic<bool> never{false};
  std::atomic<bool> b_stop{false};
  std::unique_ptr<DistributedConcurrency> a = node(fleet, "a", kLocal, handoff);
  std::unique_ptr<DistributedConcurrency> b = node(fleet, "b", kLocal, handoff);
  std::unique_ptr<DistributedConcurrency> c;
  std::vector<std::thread> workers, b_workers;
  for (int i = 0; i < 3; ++i) {
    workers.emplace_back([&] { work(fleet, *a, never); });
    b_workers.emplace_back([&] { work(fleet, *b, b_stop); });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(ms / 3));
  c = node(fleet, "c", kLocal, handoff);
  for (int i = 0; i < 3; ++i) {
    workers.emplace_back([&] { work(fleet, *c, never); });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(ms / 3));
  b_stop.store(true);
  for (std::thread& t : b_workers) t.join();
  b.reset();  // leaves: its row lapses after its lease
  std::this_thread::sleep_for(std::chrono::milliseconds(ms / 3));
  fleet.stop.store(true);
  for (std::thread& t : workers) t.join();
  EXPECT_GT(a->stats().beats, 50);
  EXPECT_GT(c->stats().beats, 50);
  EXPECT_EQ(a->stats().failed_beats, 0);
  return fleet.peak.load();
}

TEST(DistributedConcurrencyThreads, HandoffHoldsTheGlobalLimit) {
  Fleet fleet;
  const int64_t peak = run_fleet(fleet, /*handoff=*/true, 1500);
  std::printf("with handoff: peak held %lld of L = 4\n",
              static_cast<long long>(peak));
  EXPECT_LE(peak, 4);
  EXPECT_GE(peak, 3);  // the workers (6 to 9) do press on the limit
  EXPECT_GT(fleet.granted.load(), 1000);
  EXPECT_EQ(fleet.held.load(), 0);
}

// Without handoff the occupancy cap still holds sum(share) <= L, but a
// node admitting against a grant whose reduction is still on its way can
// overshoot for a moment; reported, not bounded at L.
TEST(DistributedConcurrencyThreads, WithoutHandoffTheOvershootIsBounded) {
  Fleet fleet;
  const int64_t peak = run_fleet(fleet, /*handoff=*/false, 1500);
  std::printf("without handoff: peak held %lld of L = 4\n",
              static_cast<long long>(peak));
  EXPECT_LE(peak, 2 * 4);
  EXPECT_GT(fleet.granted.load(), 1000);
}

}  // namespace
}  // namespace distributed_concurrency_concurrency_test
}  // namespace throttlekit
