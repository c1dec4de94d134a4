// throttlekit/redis/redis_coordinator.h
//
// Provides `RedisCoordinator`: the `Coordinator` over a Redis server
// (target `throttlekit::redis`; hiredis underneath, never included here).
// Every strategy step is one `EVALSHA` of a Lua script that reproduces the
// C++ transition bit for bit (docs/semantics.md, "Redis representation";
// proven by tests/redis/redis_conformance_test.cc); on `NOSCRIPT` the script
// is sent with `EVAL` and the call carries on.
//
//     std::shared_ptr<RedisCoordinator> redis =
//         *RedisCoordinator::create({.host = "10.0.0.5"});
//     auto limiter = StrictRateLimiter<Gcra>::create(
//         {.limit = 100, .period_ms = 60'000}, redis);
//
// Design (docs/redis.md)
// - `connections` connections shared leader/follower style, with no I/O
//   thread: a caller that finds its connection idle writes everything
//   queued on it (its own request included) in one write and reads the
//   replies in order; callers arriving meanwhile queue and wait, and the
//   oldest takes over next. An uncontended call is a plain round trip; under
//   contention requests go out pipelined (auto-pipelining), so throughput
//   is bounded by Redis, not by one round trip per thread.
// - Deadlines: a call waits at most `command_timeout` for its reply and then
//   returns kDeadlineExceeded (a request whose caller gave up is not sent);
//   a call that has to open the connection itself may also spend up to
//   `connect_timeout` connecting. A connection that fails or
//   times out is dropped; the next request reconnects, so service resumes
//   after a server restart without restarting the process.
// - Errors: kUnavailable (cannot connect, connection lost, server error),
//   kDeadlineExceeded, kFailedPrecondition (WRONGTYPE: the key holds another
//   strategy's state), kInvalidArgument (bad options or arguments). Nothing
//   throws.
// - Asynchronous checks (`check_async`, docs/async.md) queue on the same
//   connections and go out in the same pipelined batches. When nobody
//   leads a connection, its I/O thread (one per connection, started by the
//   first asynchronous call) does, so no caller waits; the completion runs
//   on the thread that read the reply. A queued asynchronous request whose
//   deadline passes is not sent; every read waits no longer than the
//   deadline of the request it reads for, so each completion comes within
//   `command_timeout` of the call (plus up to `connect_timeout` when its
//   batch has to open the connection). Destroying the coordinator serves
//   or expires every queued asynchronous call first.
// - Keys are sent as given (binary-safe). On Redis Cluster every key of one
//   limit lives in one slot already (one key per check); keys that must
//   share a slot use a `{hash tag}` in the key.
//
// Thread-safety: every method is safe to call concurrently. The
// coordinator must outlive every call in progress.

#ifndef THROTTLEKIT_REDIS_REDIS_COORDINATOR_H_
#define THROTTLEKIT_REDIS_REDIS_COORDINATOR_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "throttlekit/coordinator/backend_stats.h"
#include "throttlekit/coordinator/coordinator.h"
#include "throttlekit/coordinator/verb_completion.h"
#include "throttlekit/core/ttl_slack.h"
#include "throttlekit/strategy/gcra.h"
#include "throttlekit/strategy/token_bucket.h"

namespace throttlekit {

struct RedisCoordinatorOptions {
  // Server address (IPv4/IPv6 literal or host name) and port 1..65535.
  std::string host = "127.0.0.1";
  int port = 6379;
  // ACL user name for AUTH (Redis 6+); empty uses the default user.
  std::string username;
  // Password for AUTH; empty sends no AUTH.
  std::string password;
  // The logical database (SELECT), 0..15 on a default server.
  int database = 0;
  // Connections (1..64); calls are spread over them round-robin, and each
  // pipelines what its callers queue. One is fastest where the client has
  // few cores (docs/redis.md, measured); raise it when one connection's
  // leader becomes the bottleneck.
  int connections = 1;
  // Most requests written in one pipelined batch; 1..65536.
  int max_pipeline = 512;
  // Bound on establishing a connection (TCP, AUTH, SELECT, SCRIPT LOAD).
  absl::Duration connect_timeout = absl::Milliseconds(1000);
  // Bound on one call, from the moment it is queued to its reply.
  absl::Duration command_timeout = absl::Milliseconds(250);
  // Redis Cluster (docs/redis.md, "Redis Cluster"): any of the cluster's
  // nodes as "host:port" (at most 64; an IPv6 host in brackets). When set,
  // `host` and `port` are unused and `database` must be 0: each call goes
  // to the primary serving its key's slot (`key_slot`, redis/key_slot.h),
  // over `connections` connections per primary; the slot map comes from
  // CLUSTER SLOTS, read in the background (at creation, then after every
  // MOVED, at most every 100 ms); a MOVED or ASK reply is followed at once,
  // within the call's deadline.
  std::vector<std::string> cluster_seeds;
  // Most redirects one call follows (1..16); past them it fails
  // kUnavailable naming the slot.
  int max_redirects = 5;
  // Redis Sentinel (docs/redis.md, "Redis Sentinel"): the sentinels as
  // "host:port" (at most 16) and the name of the primary they watch
  // (`master_name`, required with `sentinels`, not with `cluster_seeds`).
  // When set, `host` and `port` are unused: `create` asks the sentinels for
  // the primary's address (SENTINEL get-master-addr-by-name) and confirms
  // it with ROLE (bounded by the connect and command timeouts of each
  // sentinel asked; a primary not found is not an error: calls fail
  // kUnavailable naming it until one is); a background thread stays
  // subscribed to the sentinels' +switch-master and moves every later call
  // to the new primary the moment one is announced, and a call refused
  // with READONLY (sent to a primary just demoted) or LOADING is sent again
  // to the primary the sentinels name, within its deadline.
  std::vector<std::string> sentinels;
  std::string master_name;
  // AUTH for the sentinels (empty: none); `password` and `username` are the
  // data nodes'.
  std::string sentinel_username;
  std::string sentinel_password;
  // Replicas that must hold each write before its call succeeds (0..16; 0,
  // the default, waits for none): each pipelined batch that writes ends
  // with WAIT <n> <ms>, bounded by its calls' deadlines, and when fewer
  // replicas acknowledged in time every call of the batch fails
  // kUnavailable (the engine's fail policy applies) although the primary
  // applied it. Closes the window in which a primary that dies after
  // answering loses writes its replica never received (docs/redis.md,
  // "Failover and the bound"), at the cost of a replication round trip per
  // batch (measured there).
  int durable_writes = 0;
  // Added to every physical TTL (ms, 0 .. 2^53-1): keeps state that long
  // past its exact expiry, so a caller's `now` up to that much behind the
  // server's clock never finds its window's state gone and counts it
  // again (core/ttl_slack.h). Rate decisions for a `now` that is not stale
  // do not depend on it; 0 leaves every stale `now` exposed. A heartbeat table
  // (distributed concurrency) is forgotten only once its last lease is
  // older than the slack, as in a MemoryCoordinator with the same slack:
  // a beat within it finds the table and numbers its generation on from
  // the last, one after it starts again at generation 1.
  int64_t ttl_slack_ms = kDefaultTtlSlackMs;
};

// One server's share of a `RedisCoordinator`'s counters (`node_stats`).
struct RedisNodeStats {
  std::string address;  // "host:port"
  // Whether calls go there now: the one server; a cluster node that
  // serves a slot in the last map; the Sentinel primary now.
  bool serving = false;
  BackendStats stats;
};

class RedisCoordinator final : public Coordinator {
 public:
  // Validates `options` (errors name the field). Connections are opened
  // lazily by the first calls, so creating a coordinator never fails
  // because the server is down.
  static absl::StatusOr<std::unique_ptr<RedisCoordinator>> create(
      const RedisCoordinatorOptions& options);

  ~RedisCoordinator() override;
  RedisCoordinator(const RedisCoordinator&) = delete;
  RedisCoordinator& operator=(const RedisCoordinator&) = delete;

  std::string_view backend() const noexcept override { return "redis"; }

  // The full Lua text this coordinator sends for a strategy (`S::kName`)
  // or for "lease", "give_back", "state", "heartbeat", "fed_lease",
  // "fed_reconcile", "escrow", "region_pool" or "fused"; empty for
  // an unknown name. For operators
  // who preload scripts and for tools that call them directly (the
  // benchmark runs redis-benchmark on the GCRA script with it).
  static std::string_view lua_script(std::string_view name);

  // The fused admission step (docs/admission.md, "The fused Redis path"):
  // GCRA `rate` for one request on `rate_key` and, if it admits, the token
  // bucket `cost` for `units` on `cost_key`, in ONE script: one round trip,
  // atomic. Each axis runs its strict script unchanged and writes per its
  // own outcome, so the result and the stored states equal `check(rate,
  // rate_key, now_ms, 1)` followed (if allowed) by `check(cost, cost_key,
  // now_ms, units)` step for step
  // (tests/redis/redis_fused_conformance_test.cc). `now_ms` 0 reads the Redis
  // clock once for both axes. On a Redis Cluster the two keys must hash to one
  // slot (a shared {hash tag}). Bad keys or units are kInvalidArgument before
  // any I/O. Thread-safe.
  struct FusedDecision {
    Decision combined;             // combine() over the evaluated axes
    Decision rate;                 // limit: the GCRA burst
    std::optional<Decision> cost;  // limit: the capacity; empty if not asked
  };
  absl::StatusOr<FusedDecision> fused_check(const Gcra& rate,
                                            const TokenBucket& cost,
                                            std::string_view rate_key,
                                            std::string_view cost_key,
                                            int64_t now_ms, double units);
  // As `fused_check`, without waiting (core/completion.h): `on_done` runs
  // exactly once with what `fused_check` would return; inline for bad
  // arguments, else on the connection's I/O thread (docs/async.md).
  void fused_check_async(const Gcra& rate, const TokenBucket& cost,
                         std::string_view rate_key, std::string_view cost_key,
                         int64_t now_ms, double units,
                         Completion<FusedDecision> on_done);

  // Counters since creation (coordinator/backend_stats.h; for tests,
  // benchmarks and metrics). `reloads` counts EVALSHA answered NOSCRIPT
  // (the call is then sent again with EVAL).
  BackendStats stats() const;
  // Per server this coordinator has talked to or learned of (the one
  // server; each cluster node; each primary a Sentinel named): its share of
  // `stats()`'s per-call counters (requests, batches, connects, timeouts,
  // failures, reloads, unreplicated; the topology counters stay
  // coordinator-wide). A snapshot, in the order the servers were learned.
  std::vector<RedisNodeStats> node_stats() const;

  class Impl;

 protected:
  // The Coordinator's hooks (coordinator.h): a call whose caller waits
  // runs on the calling thread, which leads a connection itself; the
  // others are queued on the pipelined connection(s) and completed by the
  // I/O thread from the reply.
  void do_check(const AnyStrategy& strategy, std::string_view key,
                int64_t now_ms, double cost,
                VerbCompletion<Decision>&& done) override;
  void do_peek(const AnyStrategy& strategy, std::string_view key,
               int64_t now_ms, VerbCompletion<Decision>&& done) override;
  void do_forecast(const AnyStrategy& strategy, std::string_view key,
                   int64_t now_ms, double cost,
                   VerbCompletion<Forecast>&& done) override;
  void do_reset(const AnyStrategy& strategy, std::string_view key,
                VerbCompletion<Acknowledged>&& done) override;
  void do_lease(const LeaseBudget& budget, std::string_view key, int64_t want,
                VerbCompletion<LeaseGrant>&& done) override;
  void do_give_back(const LeaseBudget& budget, std::string_view key,
                    int64_t window_start_ms, int64_t credits,
                    std::string_view token,
                    VerbCompletion<int64_t>&& done) override;
  void do_now_ms(VerbCompletion<int64_t>&& done) override;
  void do_ping(VerbCompletion<Acknowledged>&& done) override;
  absl::Status do_wait_ready(absl::Time deadline) override;
  void do_lease_windowed(const LeaseBudget& budget, std::string_view key,
                         int64_t want, int64_t now_ms,
                         VerbCompletion<LeaseGrant>&& done) override;
  void do_reconcile(const LeaseBudget& budget, std::string_view key,
                    int64_t window_start_ms, int64_t leftover,
                    std::string_view token, int64_t now_ms,
                    VerbCompletion<int64_t>&& done) override;
  void do_escrow_take(std::string_view key, int64_t want, int64_t now_ms,
                      VerbCompletion<LeaseGrant>&& done) override;
  void do_escrow_refill(std::string_view key, int64_t granted,
                        int64_t window_start_ms, int64_t expires_at_ms,
                        int64_t now_ms,
                        VerbCompletion<int64_t>&& done) override;
  void do_escrow_release(std::string_view key, int64_t window_start_ms,
                         int64_t now_ms,
                         VerbCompletion<int64_t>&& done) override;
  void do_heartbeat(std::string_view key, const HeartbeatReport& report,
                    const HeartbeatOptions& options, int64_t now_ms,
                    VerbCompletion<HeartbeatGrant>&& done) override;
  void do_heartbeat_nodes(
      std::string_view key,
      VerbCompletion<std::vector<HeartbeatNode>>&& done) override;

 private:
  // The region pool of the federated fair escrow runs its step and reads
  // its table over this coordinator's connections, so it goes wherever
  // this coordinator goes (one server, a cluster's slot owner, the
  // Sentinel primary; federation/redis_region_pool.h).
  friend class RedisRegionPool;
  // One step of the region pool's script on `argv` (its key first, then
  // its ARGV): the reply's integers.
  absl::StatusOr<std::vector<int64_t>> region_pool_step(
      std::vector<std::string> argv);
  // As `region_pool_step`, without waiting: `on_done` runs once, from the
  // thread that reads the reply.
  void region_pool_step_async(std::vector<std::string> argv,
                              Completion<std::vector<int64_t>> on_done);
  // The field/value pairs of the hash at `key` (none when it is absent;
  // kFailedPrecondition when it holds another type).
  absl::StatusOr<std::vector<std::string>> hash_fields(std::string_view key);

  explicit RedisCoordinator(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace throttlekit

#endif  // THROTTLEKIT_REDIS_REDIS_COORDINATOR_H_
