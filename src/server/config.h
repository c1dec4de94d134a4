// src/server/config.h
//
// Provides the server's configuration: `parse_config` turns a YAML document
// (docs/server.md, "Configuration") into a `ServerConfig` of named policies,
// validating everything at load. Every error is kInvalidArgument and reads
// `<source>: <path in the document>: <problem>`, e.g.
//
//     server.yaml: limiters.api.limit: must be an integer in [1, 2^53-1];
//     got "ten"
//
//     version: 1
//     leaseTtl: 30s            # Admit slots unrenewed this long are reclaimed
//     limiters:
//       api:      {strategy: gcra, limit: 100, period: 1m, burst: 20}
//       tokens:   {strategy: tokenBudget, budget: 100000, period: 1m}
//       checkout:
//         admission:
//           concurrency: {maxInflight: 8}
//           rate: {strategy: gcra, limit: 50, period: 1s}
//       completions:
//         fleetBudget: {budget: 1000000, windowMs: 60000}
//       pool:                  # one in-flight ceiling across the fleet
//         distributedConcurrency: {minLimit: 4, maxLimit: 200,
//                                  aggregate: median}
//       tenants:               # weighted-fair across tenants and regions
//         federatedFairEscrow:
//           limit: 6000
//           period: 1s
//           region: eu-west
//           tenants:
//             - {name: acme, weight: 3}
//             - {name: free, weight: 1, hardCap: 200}
//       global:
//         federated: {batch: 16, region: eu-west}
//         strategy: fixedWindow
//         limit: 10000
//         period: 1m
//
// Durations are integers (milliseconds) or strings with a unit: `250ms`,
// `1s`, `5m`, `1h`, `1d`. Unknown keys are errors (a misspelt option must
// not silently fall back to a default). Nesting deeper than 64 levels is
// refused. An `envoy:` block holds rate-limit domains in the format of
// Envoy's reference rate-limit service (envoy_config.h, docs/envoy.md); an
// `rlqs:` block the rate limit quota service's domains (rlqs_config.h,
// docs/rlqs.md); a `forwardAuth:` block the forward-auth door's routes
// (forward_auth_config.h, docs/gateways.md).
// Thread-safety: the functions read the files named and are otherwise pure.

#ifndef THROTTLEKIT_SRC_SERVER_CONFIG_H_
#define THROTTLEKIT_SRC_SERVER_CONFIG_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"
#include "envoy_config.h"
#include "forward_auth_config.h"
#include "rlqs_config.h"
#include "throttlekit/concurrency/adaptive_concurrency.h"
#include "throttlekit/concurrency/distributed_concurrency.h"
#include "throttlekit/coordinator/any_strategy.h"
#include "throttlekit/twotier/weighted_fair_escrow.h"

namespace throttlekit::server {

// The deepest YAML nesting a configuration may have.
inline constexpr int kMaxConfigDepth = 64;

// A rate strategy and its options (validated by the strategy's `create`).
struct StrategySpec {
  std::string name;  // as written: "gcra", "tokenBucket", ...
  StrategyOptions options;
};

// A windowed limiter federated across every server on the shared store
// (`federated: {batch: 16, region: eu}`): one global budget per window,
// spent from leased batches (docs/federation.md); Fleet.Reserve leases
// from the same budget.
struct FederatedSpec {
  int64_t batch = 16;
  std::string region = "default";  // 1 .. 64 bytes
};

// A limiter: Check, CheckMany, Peek, Forecast (and Debit for tokenBudget).
struct LimiterPolicy {
  StrategySpec strategy;
  std::optional<FederatedSpec> federated;
};

// One in-flight ceiling across every server on the shared store
// (`distributedConcurrency:`): each server runs `adaptive` as its local
// limit and beats to the store, which grants it a share
// (docs/distributed_concurrency.md). `node_id` and `key` are filled in by
// the server (its --node-id, the policy's name).
struct DistributedSpec {
  DistributedConcurrencyOptions options;
};

// The concurrency axis of an admission: a fixed ceiling, an adaptive limit,
// or an adaptive limit under a fleet-wide ceiling (`distributed`, whose
// local limit is `adaptive`).
struct ConcurrencySpec {
  int64_t max_inflight = 0;  // > 0: a fixed ceiling
  std::optional<AdaptiveConcurrencyOptions> adaptive;
  std::optional<DistributedSpec> distributed;
};

// A unified admission (Admit, Release, Heartbeat): any of its axes may be
// absent, not all.
struct AdmissionPolicy {
  std::optional<ConcurrencySpec> concurrency;
  std::optional<StrategySpec> rate;
  std::optional<StrategySpec> cost;
};

// One token budget across the fleet (Debit), on the shared store.
struct FleetBudgetPolicy {
  int64_t budget = 0;
  int64_t window_ms = 0;
};

// Weighted fairness between tenants over one budget of `limit` credits per
// window, served by Check with the tenant's name as the key:
// `fairEscrow` is `WeightedFairEscrow` (one server; with a shared store,
// one budget across servers, each sharing fairly among its own callers),
// `federatedFairEscrow` is `FederatedFairEscrow` (fair across regions too:
// a region pool in Redis splits the budget between the servers by the
// weights of their active tenants).
struct FairEscrowPolicy {
  bool federated = false;
  int64_t limit = 0;
  int64_t window_ms = 0;
  int64_t quantum = 16;            // default min(16, limit)
  std::string region = "default";  // federated only; 1 .. 64 bytes
  std::vector<WeightedFairEscrowOptions::Tenant> tenants;
};

struct PolicySpec {
  std::string name;
  std::variant<LimiterPolicy, AdmissionPolicy, FleetBudgetPolicy,
               FairEscrowPolicy>
      body;
};

struct ServerConfig {
  std::vector<PolicySpec> policies;  // in document order; names unique
  // The Envoy rate-limit service's domains (`envoy:`, docs/envoy.md); a
  // document needs at least one of `limiters`, `envoy` and `rlqs`.
  EnvoyConfig envoy;
  // The rate limit quota service's domains (`rlqs:`, docs/rlqs.md); no
  // domains when the document has no `rlqs` block.
  RlqsConfig rlqs;
  // The forward-auth door's routes (`forwardAuth:`, docs/gateways.md),
  // counted in `envoy`'s domains; no routes without the block.
  ForwardAuthConfig forward_auth;
  // An Admit slot not renewed (Heartbeat) for this long is reclaimed.
  int64_t lease_ttl_ms = 30'000;
  // Keys longer than this are refused (kInvalidArgument).
  int64_t max_key_bytes = 4096;
  // CheckMany and Heartbeat refuse more entries than this.
  int64_t max_batch = 1000;
};

// Parses and validates `yaml`; `source` names it in errors (a file name).
// The `envoy.files` it names are read relative to `source`'s directory.
absl::StatusOr<ServerConfig> parse_config(std::string_view yaml,
                                          std::string_view source);

// Reads the file at `path` and parses it; an unreadable file is
// kNotFound naming the path.
absl::StatusOr<ServerConfig> load_config(const std::string& path);

}  // namespace throttlekit::server

#endif  // THROTTLEKIT_SRC_SERVER_CONFIG_H_
