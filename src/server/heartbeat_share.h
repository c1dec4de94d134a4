// src/server/heartbeat_share.h (internal)
//
// Provides `HeartbeatShare`: the quota door's shares across a fleet of
// throttlekit-servers on one shared store (docs/rlqs.md, "The fleet"),
// from the store's heartbeat step (coordinator/heartbeat_core.h), the one
// distributed concurrency runs, in its acknowledged-handoff mode.
//
// - One heartbeat key per budget, `throttlekit-rlqs:` then the domain and
//   the budget key, each length-prefixed (`store_key`).
// - Each server beats for each budget it serves every `heartbeat_ms` (a
//   new budget at once), as node `<node id>#<incarnation>`, with the
//   generation of the share it applied, `inflight` = the budget's
//   commitments now (QuotaBudget::committed), `local_limit` = the rule's
//   limit and `demand` = its clients' demand; the step runs with handoff
//   (a server is reserved max(acknowledged share, highest share issued and
//   not acknowledged, reported commitments)), demand-proportional targets,
//   and a lease of `lease_ttl_ms(commit)` = commit + max(3 heartbeats,
//   kMinBeatToleranceMs) + the fence margin. So at the store the reserves of
//   the live servers sum to at most the limit, and between two beats a server's
//   commitments stay below what the store reserves for it (QuotaBudget raises
//   only up to its share; a lowered share drains as its records expire, still
//   reported).
// - Self-fencing: the store evicts a server no earlier than a lease after
//   its last answered beat was sent. `BudgetShare::at(now)` is 0 once
//   now + commit > that send time + lease - margin, so every assignment
//   the server sent has expired before its part can go to others. A
//   server cut off from the store lowers its clients to DENY_ALL as their
//   assignments come up for refresh, one lease after its last beat at
//   most. Neither a late beat nor a store that stalls for less than a
//   second fences (the lease covers three beats and at least a second).
// - Incarnations: `<incarnation>` is the wall clock in ms when the source
//   was created (and a per-process count): a restarted server is a new
//   node, and its previous incarnation's row stays reserved until its
//   lease lapses, by when everything that incarnation sent has expired.
// - Before a budget's first answered beat, `at` is nullopt (nothing is
//   assigned: the clients use their no-assignment behaviour for about a
//   round trip). A beat answered with a share or a lease that changes
//   what `at` returns calls the budget's `changed`.
//
// Beats are asynchronous (`Coordinator::heartbeat_async`), one in flight
// per budget, sent by one thread of the source; a store that does not
// answer costs a beat its deadline, never the door's threads.
//
// Thread-safety: every method is safe to call concurrently. `stop` (and
// the destructor) waits for the beats in flight to complete.

#ifndef THROTTLEKIT_SRC_SERVER_HEARTBEAT_SHARE_H_
#define THROTTLEKIT_SRC_SERVER_HEARTBEAT_SHARE_H_

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "quota_share.h"
#include "server_clock.h"
#include "throttlekit/coordinator/coordinator.h"
#include "throttlekit/core/mutex.h"

namespace throttlekit::server {

// The least a server may go without an answered beat before it fences: a
// store (or this process) that stalls for less fences nobody. Two seconds:
// a second was too little on a loaded machine (answers 1.25 s late fenced
// every server of a fleet at once, docs/testing.md "What made runs red").
inline constexpr int64_t kMinBeatToleranceMs = 2000;

struct HeartbeatShareOptions {
  // This server's node id (unique among the live servers of the store),
  // 1 .. 200 bytes; the incarnation is appended.
  std::string node_id;
  // The beat period, [10, 60000] ms (the `rlqs:` block's fleetHeartbeat).
  int64_t heartbeat_ms = 1000;
  // Fences this much before the lease would lapse, [0, 60000] ms: more
  // than the drift of this server's clock against the store's over one
  // lease.
  int64_t fence_margin_ms = 100;
};

// What a budget's share is at the source, for tests and metrics.
struct HeartbeatShareView {
  bool granted = false;        // a beat has been answered
  int64_t share = 0;           // the share applied
  int64_t generation = 0;      // its generation
  int64_t lease_until_ms = 0;  // the fence deadline (server clock)
  int64_t beats = 0;           // beats answered
  int64_t failed_beats = 0;
};

class HeartbeatShare final : public ShareSource {
 public:
  // kInvalidArgument naming the option out of range or a null store.
  static absl::StatusOr<std::unique_ptr<HeartbeatShare>> create(
      HeartbeatShareOptions options, std::shared_ptr<Coordinator> store,
      ServerClock clock = {});
  ~HeartbeatShare() override;
  HeartbeatShare(const HeartbeatShare&) = delete;
  HeartbeatShare& operator=(const HeartbeatShare&) = delete;

  std::shared_ptr<BudgetShare> track(QuotaBudgetRef budget) override;
  void stop() override;
  // throttlekit_rlqs_fleet_beats_total{result="answered"|"failed"},
  // throttlekit_rlqs_fleet_fenced_total (budget reads that found the
  // share fenced to 0: no answered beat recent enough to cover an
  // assignment) and throttlekit_rlqs_fleet_beat_seconds_max (the slowest
  // answered beat since start).
  void append_prometheus(std::string& out) override;

  // The heartbeat key of a budget.
  static std::string store_key(std::string_view domain,
                               std::string_view budget_key);
  // The lease of a budget whose assignments count `commit_ms` after they
  // are sent: those, then what a server may go without an answered beat
  // before it fences, then the margin.
  int64_t lease_ttl_ms(int64_t commit_ms) const {
    return commit_ms +
           std::max<int64_t>(3 * options_.heartbeat_ms, kMinBeatToleranceMs) +
           options_.fence_margin_ms;
  }
  // `<node id>#<incarnation>`: this server's node at the store.
  const std::string& node() const { return node_; }
  // A tracked budget's view; nullopt if this source does not track it.
  std::optional<HeartbeatShareView> view(std::string_view domain,
                                         std::string_view budget_key);

 private:
  class Slot;

  HeartbeatShare(HeartbeatShareOptions options,
                 std::shared_ptr<Coordinator> store, ServerClock clock);
  void run();
  // Sends `slot`'s beat if due at `now_ms`; returns when it is next due.
  int64_t beat(const std::shared_ptr<Slot>& slot, int64_t now_ms);

  const HeartbeatShareOptions options_;
  const std::shared_ptr<Coordinator> store_;
  const ServerClock clock_;
  const std::string node_;

  Mutex mu_;
  std::condition_variable cv_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool wake_ ABSL_GUARDED_BY(mu_) = false;
  bool joined_ ABSL_GUARDED_BY(mu_) = false;  // the thread has ended
  // Beats sent and not yet completed.
  int64_t in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::shared_ptr<Slot>> slots_ ABSL_GUARDED_BY(mu_);
  // The beats' sequence numbers, strictly increasing over all keys.
  std::atomic<int64_t> next_seq_{1};
  // For the metrics: over all budgets, since start.
  std::atomic<int64_t> answered_{0};
  std::atomic<int64_t> failed_{0};
  std::atomic<int64_t> fenced_{0};
  std::atomic<int64_t> slowest_ms_{0};
  std::thread thread_;
};

}  // namespace throttlekit::server

#endif  // THROTTLEKIT_SRC_SERVER_HEARTBEAT_SHARE_H_
