// src/server/envoy_rls_tree.h: the configured descriptor tree of the Envoy
// door (envoy_rls.h): each domain's levels of descriptors by key and value,
// the limit and counters of each, and the plan one request descriptor is
// decided against. Private to the door's sources (envoy_rls.cc, the
// decisions; envoy_rls_metrics.cc, the exposition).

#ifndef THROTTLEKIT_SRC_SERVER_ENVOY_RLS_TREE_H_
#define THROTTLEKIT_SRC_SERVER_ENVOY_RLS_TREE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "envoy_rls.h"

namespace throttlekit::server {

// The children of a node (or a domain's top level), by entry key.
struct EnvoyLimits::Level {
  struct ByKey {
    absl::flat_hash_map<std::string, const Node*> exact;  // by value
    std::vector<const Node*> patterns;  // values with `*`, in config order
    const Node* any = nullptr;          // the value-less node
  };
  absl::flat_hash_map<std::string, ByKey> by_key;
  std::vector<std::unique_ptr<Node>> owned;
};

// One configured descriptor.
struct EnvoyLimits::Node {
  // The value as configured, and split on `*` when it is a pattern (empty
  // otherwise).
  std::string value;
  std::vector<std::string> pattern;
  // A pattern whose matching values share one count: the counter key holds
  // the pattern in place of the value.
  bool share_threshold = false;
  // `key[_value]` joined by `.` from the domain down: the store prefix's
  // tail and the default name in the headers.
  std::string path;
  bool has_limit = false;
  bool unlimited = false;
  bool shadow = false;
  int64_t requests_per_unit = 0;
  EnvoyUnit unit = EnvoyUnit::kSecond;
  std::string name;
  std::vector<std::string> replaces;
  // Counts the limit; null when unlimited or requests_per_unit is 0.
  std::shared_ptr<Engine> engine;
  // What the engine counts (envoy_signature): a reload keeps the engine of
  // a node whose signature is unchanged.
  std::string signature;
  // Leased or federated: its remaining is this server's credits.
  bool leased = false;
  std::shared_ptr<BasicLeasedLimiter<ServerClock>> leased_limiter;
  std::shared_ptr<ServerFederatedLimiter> federated_limiter;
  // What was decided against it (the reference's statistics).
  std::shared_ptr<LimitCounters> counters = std::make_shared<LimitCounters>();
  // The limit's name in structured headers (its name, else its path).
  std::optional<RateLimitPolicyName> header_name;
  Level children;
};

struct EnvoyLimits::Domain {
  std::string name;
  Level top;
  std::optional<RateLimitPolicyName> header_name;  // for limit overrides
  // Descriptors counted against a request's own `limit`, together.
  std::shared_ptr<LimitCounters> overrides = std::make_shared<LimitCounters>();
  // Requests answered OK, OVER_LIMIT, and refused with a status.
  std::shared_ptr<RequestCounters> requests =
      std::make_shared<RequestCounters>();
};

// What one descriptor of a request is decided against.
struct EnvoyLimits::Plan {
  const Node* node = nullptr;  // the matched limit, if any
  bool from_override = false;  // the descriptor's own limit
  int64_t requests_per_unit = 0;
  EnvoyUnit unit = EnvoyUnit::kSecond;
  Engine* engine = nullptr;  // null: requests_per_unit is 0, or unlimited
  std::string key;           // the counter key within the engine
  double hits = 1;
  bool peek = false;  // a descriptor hits_addend of 0: check, count nothing
};

}  // namespace throttlekit::server

#endif  // THROTTLEKIT_SRC_SERVER_ENVOY_RLS_TREE_H_
