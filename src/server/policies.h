// src/server/policies.h
//
// Provides `Policies`: the configured policies (config.h) built into the
// library's engines over one store (reading `ServerClock`, server_clock.h).
//
//   - a limiter (`strategy:`) is `RateLimiter<S>` on the embedded store, or
//     `StrictRateLimiter<S>` over the Redis or Postgres coordinator (one
//     round trip per check, the store's clock deciding);
//   - an admission (`admission:`) is `UnifiedAdmission` over those engines;
//   - a fair escrow (`fairEscrow:`, `federatedFairEscrow:`) is
//     `WeightedFairEscrow` (over the shared store when there is one) or
//     `FederatedFairEscrow` (over the Redis region pool), behind a limiter's
//     `Engine` whose key is the tenant (Check only);
//   - distributed concurrency (`distributedConcurrency:`) is an admission
//     whose concurrency axis is a `DistributedConcurrency` node's limiter,
//     beating to the shared store under `throttlekit:<policy>`;
//   - a fleet budget (`fleetBudget:`) is `FleetTokenBudget` on the shared
//     store (a memory store cannot coordinate a fleet: refused at load);
//   - a federated limiter (`federated:`) is `federate()` over the shared
//     store: one budget per window across every server; Fleet.Reserve
//     leases from the same budget (`lease_budget`, `lease_key`).
//
// The Envoy rate-limit service's domains (`envoy:`, docs/envoy.md) are built
// into an `EnvoyLimits` (envoy_rls.h) over the same store and the same
// engine construction (`make_policy_engine`); a `leased` descriptor is a
// window-coupled `LeasedLimiter` on the shared store.
//
// Store keys are `throttlekit:<policy>[:rate|:cost]:<key>`, so servers
// sharing a store and a configuration share their budgets.
//
// Thread-safety: every method is safe to call concurrently.

#ifndef THROTTLEKIT_SRC_SERVER_POLICIES_H_
#define THROTTLEKIT_SRC_SERVER_POLICIES_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "config.h"
#include "denial_signal.h"
#include "engine.h"
#include "metrics.h"
#include "server_clock.h"
#include "throttlekit/admission/unified_admission.h"
#include "throttlekit/concurrency/distributed_concurrency.h"
#include "throttlekit/coordinator/coordinator.h"
#include "throttlekit/coordinator/lease.h"
#include "throttlekit/core/clock.h"
#include "throttlekit/core/mutex.h"
#include "throttlekit/federation/federated_limiter.h"
#include "throttlekit/federation/fleet_token_budget.h"
#include "throttlekit/federation/region_pool.h"

namespace throttlekit::server {

using ServerAdmission = BasicUnifiedAdmission<Engine, Engine, ServerClock>;
using ServerFederatedLimiter = BasicFederatedLimiter<ServerClock>;

// One configured policy. Exactly one of `limiter`, `admission`,
// `fleet_budget` is set.
struct Policy {
  std::string name;
  // "limiter", "admitter" or "budget" (the Monitor's kinds).
  std::string_view kind;
  // The strategy's name, for a limiter.
  std::string strategy;
  // A limiter's engine; `debits` says Debit may use it (tokenBudget).
  std::shared_ptr<Engine> limiter;
  bool debits = false;
  std::unique_ptr<ServerAdmission> admission;
  // True when every axis of `admission` answers without waiting on a store
  // (Engine::answers_without_waiting): Admit then runs `admit_async` on
  // gRPC's callback thread, otherwise on the blocking pool.
  bool admission_answers_without_waiting = false;
  // An admission whose concurrency axis is fleet-wide
  // (`distributedConcurrency`): the node whose local limiter is the
  // admission's concurrency axis. Declared after `admission` so it is
  // destroyed first (its beats stop before the limiter goes).
  std::unique_ptr<DistributedConcurrency> distributed;
  std::unique_ptr<FleetTokenBudget> fleet_budget;
  // A federated limiter (also `limiter`): its global budget, where Tier-2
  // leases come from.
  std::shared_ptr<ServerFederatedLimiter> federated;
  std::optional<LeaseBudget> lease_budget;
  // The shared store a limiter counts on (its global budget's, for a
  // federated one); null on the embedded memory store.
  std::shared_ptr<Coordinator> store;
  // What the policy decided (never null): the admission reports to it as
  // its observer, the RPC handlers for limiters and budgets. `Policies`
  // gives it the policies' `DenialSignal`.
  std::shared_ptr<PolicyMetrics> metrics = std::make_shared<PolicyMetrics>();

  // The store key of `domain`'s global budget: the key a federated Check
  // of `domain` spends from.
  std::string lease_key(std::string_view domain) const {
    return join_key(lease_prefix, domain);
  }
  // `throttlekit:<policy>`, the federated limiter's key prefix (built once).
  std::string lease_prefix;
};

// What a server brings to its policies besides the store.
struct PolicyContext {
  // This server's id in a distributed-concurrency fleet (unique among the
  // live servers on one store); empty: `default_node_id()`.
  std::string node_id;
  // Distributed concurrency: begin serving with a share (one beat at
  // creation) rather than in an outage until the first scheduled beat.
  bool beat_at_start = true;
  // The region pool a `federatedFairEscrow` shares with the other servers
  // (a `RedisRegionPool` on the --redis server); null: such a policy is
  // refused at load.
  std::function<absl::StatusOr<std::shared_ptr<RegionPool>>()> region_pool;
};

// `<host name>:<pid>`.
std::string default_node_id();

// The engine counting `spec`: the embedded store's `RateLimiter<S>` when
// `store` is null, otherwise the strict limiter over `store`, deciding
// outages by `fail_policy`; keys live under `prefix`. kInvalidArgument for
// options the strategy refuses.
absl::StatusOr<std::shared_ptr<Engine>> make_policy_engine(
    const StrategySpec& spec, const std::shared_ptr<Coordinator>& store,
    const std::string& prefix, ServerClock clock, FailPolicy fail_policy = {});

class EnvoyLimits;

class Policies {
 public:
  // Builds every policy of `config` over `store` (null: the embedded
  // memory store). kInvalidArgument naming the policy when the store cannot
  // serve it (a fleet budget, a federated limiter or distributed
  // concurrency without a shared store).
  // The Envoy domains count on the same store (a `leased` one needs a
  // shared store: kInvalidArgument on the memory store).
  static absl::StatusOr<std::unique_ptr<Policies>> create(
      const ServerConfig& config, std::shared_ptr<Coordinator> store,
      ServerClock clock = {}, PolicyContext context = {});

  ~Policies();

  // The policy named `name`, or null.
  Policy* find(std::string_view name) const {
    auto it = by_name_.find(absl::string_view(name.data(), name.size()));
    return it == by_name_.end() ? nullptr : it->second.get();
  }

  const std::vector<Policy*>& all() const { return order_; }

  // Gives back the credits every federated limiter and every leased Envoy
  // limit holds (reconcile); returns the first error. The server calls it at
  // shutdown.
  absl::Status close();
  const ServerConfig& config() const { return config_; }
  // "memory", "redis" or "postgres".
  std::string_view store_name() const { return store_name_; }
  // The shared store; null for the embedded one.
  const std::shared_ptr<Coordinator>& store() const { return store_; }
  // This server's node id in the fleet (PolicyContext::node_id, or
  // `default_node_id()`).
  const std::string& node_id() const { return node_id_; }
  // Told of every policy's denials (their metrics share it), for
  // Monitor.Watch.
  DenialSignal& denial_signal() const { return *denial_signal_; }
  // The Envoy rate-limit service's domains; null when none are configured.
  // One atomic load: a caller holding the result keeps deciding on it while
  // a reload swaps in the next. Thread-safe.
  std::shared_ptr<EnvoyLimits> envoy() const {
    return envoy_.load(std::memory_order_acquire);
  }

  // Marks the Envoy domains as a control plane's (xds_client.h): from then
  // on a set with no domains is a configuration in force (every domain
  // unknown, answered as docs/envoy.md says), not "no Envoy door". Until
  // the first set arrives `envoy()` is null (unless a file gave domains)
  // and `envoy_awaited()` true. Thread-safe.
  void feed_envoy_from_control_plane() {
    envoy_fed_.store(true, std::memory_order_release);
  }
  // Fed by a control plane that has sent no set yet, with no file domains.
  bool envoy_awaited() const {
    return envoy_fed_.load(std::memory_order_acquire) && envoy() == nullptr;
  }

  // Replaces the Envoy domains with `config`'s (empty: none), keeping the
  // engines and counts of every limit whose counting is unchanged
  // (EnvoyLimits::create) and giving back the credits of leased limits
  // dropped. Requests in flight finish on the limits they started on; none
  // is refused by the swap. On an error (a limit the store cannot serve)
  // the domains in force stay. Thread-safe; reloads are serialised.
  absl::Status reload_envoy(const EnvoyConfig& config);
  // Reloads applied and refused since start (reload_envoy's, and those a
  // watcher counted with `count_envoy_reload_error`).
  int64_t envoy_reloads() const {
    return envoy_reloads_.load(std::memory_order_relaxed);
  }
  int64_t envoy_reload_errors() const {
    return envoy_reload_errors_.load(std::memory_order_relaxed);
  }
  // Counts a reload refused before it reached `reload_envoy` (a
  // configuration that does not parse).
  void count_envoy_reload_error() {
    envoy_reload_errors_.fetch_add(1, std::memory_order_relaxed);
  }

 private:
  Policies() = default;

  ServerConfig config_;
  std::string_view store_name_;
  std::string node_id_;
  std::shared_ptr<Coordinator> store_;
  const std::shared_ptr<DenialSignal> denial_signal_ =
      std::make_shared<DenialSignal>();
  absl::flat_hash_map<std::string, std::unique_ptr<Policy>> by_name_;
  std::vector<Policy*> order_;
  ServerClock clock_;
  std::atomic<std::shared_ptr<EnvoyLimits>> envoy_;
  std::atomic<bool> envoy_fed_{false};
  Mutex reload_mu_;
  std::atomic<int64_t> envoy_reloads_{0};
  std::atomic<int64_t> envoy_reload_errors_{0};
};

}  // namespace throttlekit::server

#endif  // THROTTLEKIT_SRC_SERVER_POLICIES_H_
