// throttlekit/coordinator/backend_stats.h
//
// Provides `BackendStats`: the counters a networked coordinator
// (`RedisCoordinator`, `PostgresCoordinator`) keeps since its creation, in
// one shape for both, so a dashboard or a benchmark reads either the same
// way (docs/redis.md and docs/postgres.md say what each backend counts).
//
// Thread-safety: `BackendStats` is a plain value; `stats()` fills it from
// `detail::BackendCounters` (relaxed atomics, safe to bump from any
// thread), so the fields are each exact but not one instant's snapshot.

#ifndef THROTTLEKIT_COORDINATOR_BACKEND_STATS_H_
#define THROTTLEKIT_COORDINATOR_BACKEND_STATS_H_

#include <atomic>
#include <cstdint>

namespace throttlekit {

struct BackendStats {
  // Calls the server answered: a result, or a refusal such as a key holding
  // another strategy's state. Connection set-up requests are not counted.
  int64_t requests = 0;
  // Writes of calls to the server. Redis pipelines many calls per write
  // (requests / batches is the pipelining factor); Postgres writes one.
  int64_t batches = 0;
  // Connections established (set-up completed).
  int64_t connects = 0;
  // Calls that returned kDeadlineExceeded (waiting for a connection, the
  // server or its reply).
  int64_t timeouts = 0;
  // Calls that failed for another reason: connection refused or lost, or a
  // server error.
  int64_t failures = 0;
  // Times the server had lost what the coordinator installs and it was
  // loaded again: a script (Redis NOSCRIPT) or the schema (Postgres).
  int64_t reloads = 0;
  // Redis Cluster: MOVED and ASK replies followed, slot maps read, and
  // calls sent again after TRYAGAIN or CLUSTERDOWN (0 on a single server
  // and on Postgres).
  int64_t redirects = 0;
  int64_t refreshes = 0;
  int64_t retries = 0;
  // Redis Sentinel: times the coordinator moved to another primary (0
  // elsewhere).
  int64_t switches = 0;
  // Redis `durable_writes`: calls failed because fewer replicas than asked
  // acknowledged their batch in time (also counted in `failures`).
  int64_t unreplicated = 0;
  // Postgres: connections kept after a call passed its deadline, the late
  // reply read off them instead of closing them (0 elsewhere).
  int64_t drained = 0;
};

namespace detail {

// The live counters behind `BackendStats`: one relaxed atomic per field.
struct BackendCounters {
  std::atomic<int64_t> requests{0}, batches{0}, connects{0}, timeouts{0},
      failures{0}, reloads{0}, redirects{0}, refreshes{0}, retries{0},
      switches{0}, unreplicated{0}, drained{0};

  static void add(std::atomic<int64_t>& counter, int64_t n = 1) noexcept {
    counter.fetch_add(n, std::memory_order_relaxed);
  }

  BackendStats snapshot() const noexcept {
    const auto get = [](const std::atomic<int64_t>& c) {
      return c.load(std::memory_order_relaxed);
    };
    return BackendStats{get(requests),  get(batches),      get(connects),
                        get(timeouts),  get(failures),     get(reloads),
                        get(redirects), get(refreshes),    get(retries),
                        get(switches),  get(unreplicated), get(drained)};
  }
};

}  // namespace detail
}  // namespace throttlekit

#endif  // THROTTLEKIT_COORDINATOR_BACKEND_STATS_H_
