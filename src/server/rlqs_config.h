// src/server/rlqs_config.h
//
// Provides the configuration of throttlekit-server's quota door, the rate
// limit quota service (RLQS) Envoy's `envoy.filters.http.rate_limit_quota`
// filter streams its usage reports to (docs/rlqs.md, "Configuration"): per
// domain, rules matching bucket ids to a global budget, a blanket rule, and
// what a bucket no rule matches gets,
//
//     rlqs:
//       unknownDomain: allow
//       fleetHeartbeat: 1s                 # on a shared store
//       abandonIdle: 1m                    # 0s: never
//       domains:
//         - domain: edge
//           assignmentTtl: 6s
//           buckets:                       # first match wins
//             - match: {name: api, tenant: "*"}
//               limit: {requests: 100, per: 1s}
//               shared: false
//             - match: {name: internal}
//               allow: true
//           unmatched: deny
//
// read from the server's YAML by its parser (config.h) as the `envoy:` block
// is; and `match_rlqs_bucket`, which finds the rule a bucket id falls under
// and the key of the budget it spends. Every error is kInvalidArgument
// reading `<source>: <path in the document>: <problem>`.
//
// The configuration is a value: a reload parses a new one and swaps it in
// whole, nothing here is global.
//
// Thread-safety: plain values and pure functions.

#ifndef THROTTLEKIT_SRC_SERVER_RLQS_CONFIG_H_
#define THROTTLEKIT_SRC_SERVER_RLQS_CONFIG_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace throttlekit::server {

// The most tokens a rule's limit may hand out per fill interval: 2^30, well
// inside the wire's uint32 `max_tokens`.
inline constexpr int64_t kMaxRlqsRequests = int64_t{1} << 30;
// The fill interval's bounds, in whole seconds (Envoy reads whole seconds).
inline constexpr int64_t kMinRlqsFillIntervalS = 1;
inline constexpr int64_t kMaxRlqsFillIntervalS = 86'400;
// The assignment time to live's bounds and default, in whole seconds: at
// least 2 s so that a refresh every ttl/2 still leaves a second for its
// delivery (docs/rlqs.md, "The bound").
inline constexpr int64_t kMinRlqsAssignmentTtlS = 2;
inline constexpr int64_t kMaxRlqsAssignmentTtlS = 3'600;
inline constexpr int64_t kDefaultRlqsAssignmentTtlS = 6;
// How often a server on a shared store beats for each budget it serves
// (`fleetHeartbeat`, docs/rlqs.md "The fleet"): bounds and default, ms.
inline constexpr int64_t kMinRlqsFleetHeartbeatMs = 10;
inline constexpr int64_t kMaxRlqsFleetHeartbeatMs = 60'000;
inline constexpr int64_t kDefaultRlqsFleetHeartbeatMs = 1000;
// A bucket a client reports with no requests for this long is abandoned
// (`abandonIdle`, docs/rlqs.md "Abandon"): bounds and default, ms; 0 never.
inline constexpr int64_t kMaxRlqsAbandonIdleMs = 86'400'000;
inline constexpr int64_t kDefaultRlqsAbandonIdleMs = 60'000;

// An assignment that counts nothing.
enum class RlqsBlanket {
  kAllowAll,
  kDenyAll,
};

// What the door does with a stream naming a domain the configuration does
// not have (`unknownDomain: allow | notFound`).
enum class RlqsUnknownDomain {
  // Every bucket gets ALLOW_ALL.
  kAllow,
  // The stream ends NOT_FOUND naming the domain.
  kNotFound,
};

// One `key: value` of a rule's `match`.
struct RlqsMatchEntry {
  std::string key;  // never empty
  // As written. Empty or "*": any value (the key must still be present).
  // Holding `*` otherwise: a pattern, each `*` matching any run of bytes.
  std::string value;
  // `value` split on `*` when it is a pattern other than "*"; empty for an
  // exact value or any value.
  std::vector<std::string> pattern;
};

// A rule's `limit`: the GLOBAL budget of the buckets it matches, `requests`
// tokens every `fill_interval_s`, split among the clients reporting them.
struct RlqsLimit {
  int64_t requests = 0;         // [1, kMaxRlqsRequests]
  int64_t fill_interval_s = 1;  // whole seconds, [1, 86400]
};

// One entry of a domain's `buckets`.
struct RlqsBucketRule {
  // Sorted by key, keys unique. A bucket id matches when it has every key
  // and each value matches; keys of the id not named here do not matter.
  // Empty: every bucket id matches.
  std::vector<RlqsMatchEntry> match;
  // Counted: a share of this budget as a token bucket. nullopt: `blanket`.
  std::optional<RlqsLimit> limit;
  // `allow: true` (kAllowAll) or `deny: true` (kDenyAll); meaningless with
  // a limit.
  RlqsBlanket blanket = RlqsBlanket::kAllowAll;
  // Whole seconds, [2, 3600]: how long an assignment holds; a client's
  // assignment is re-sent every ttl/2.
  int64_t assignment_ttl_s = kDefaultRlqsAssignmentTtlS;
  // With a limit: false, each distinct bucket id has a budget of its own;
  // true, every bucket id the rule matches spends one budget.
  bool shared = false;
  // What names the rule across reloads (rlqs_rule_identity): set by the
  // parser. A reload keeps a budget whose rule has the same identity.
  std::string identity;
};

// One domain, as Envoy's filter names it in its reports.
struct RlqsDomain {
  std::string domain;  // never empty; unique across the configuration
  // Where it was defined, for errors: `server.yaml: rlqs.domains[0]`.
  std::string source;
  std::vector<RlqsBucketRule> buckets;  // first match wins
  // What a bucket no rule matches gets (`unmatched: allow | deny`).
  RlqsBlanket unmatched = RlqsBlanket::kAllowAll;
  // The domain's `assignmentTtl` (whole seconds): its rules' default and
  // the time to live of an unmatched bucket's assignment.
  int64_t assignment_ttl_s = kDefaultRlqsAssignmentTtlS;
};

// The server's `rlqs:` block; empty `domains` when the document has none
// (the door is off).
struct RlqsConfig {
  std::vector<RlqsDomain> domains;
  RlqsUnknownDomain unknown_domain = RlqsUnknownDomain::kAllow;
  // On a shared store: each server's beat period per budget.
  int64_t fleet_heartbeat_ms = kDefaultRlqsFleetHeartbeatMs;
  // How long a bucket is reported idle before it is abandoned; 0: never.
  int64_t abandon_idle_ms = kDefaultRlqsAbandonIdleMs;

  // The domain named `name`, or null.
  const RlqsDomain* find(std::string_view name) const;
};

// A bucket id: the key/value pairs of the contract's `BucketId.bucket`,
// sorted by key (the contract says their order does not matter).
using RlqsBucketId = std::map<std::string, std::string>;

// The rule a bucket id falls under and the budget it spends.
struct RlqsRuleMatch {
  size_t rule = 0;  // the index in the domain's `buckets`
  // Identifies the budget within the domain: the rule's identity and,
  // unless the rule is shared, the whole bucket id, every string
  // length-prefixed so that no two (rule, id) pairs make the same key
  // (rlqs_budget_key). Not the rule's place: a rule inserted before it
  // leaves its budgets' keys as they were.
  std::string budget_key;
};

// Whether `id` matches `rule`'s `match` (see RlqsBucketRule::match).
bool rlqs_rule_matches(const RlqsBucketRule& rule, const RlqsBucketId& id);

// The first rule of `domain` matching `id` and its budget key; nullopt when
// none does (the bucket gets `domain.unmatched`).
std::optional<RlqsRuleMatch> match_rlqs_bucket(const RlqsDomain& domain,
                                               const RlqsBucketId& id);

// A rule's identity: what a reload compares to keep a budget. Its match
// (each key and value, any value written `*`), and for a limit its `per`,
// its assignment TTL and `shared`, or its blanket rule; not its `requests`
// (a reload changes a kept budget's limit) nor its place in the list.
// Every part length-prefixed: two rules with the same identity are the
// same rule.
std::string rlqs_rule_identity(const RlqsBucketRule& rule);

// The budget key of the rule whose identity is `identity` for `id`:
// `<n>:<identity>` then, unless `shared`, rlqs_bucket_key(id).
std::string rlqs_budget_key(std::string_view identity, bool shared,
                            const RlqsBucketId& id);

// A bucket id's own key: `<n>:<key><n>:<value>` for each pair in key order,
// where each <n> is the byte length of the string after it.
std::string rlqs_bucket_key(const RlqsBucketId& id);

}  // namespace throttlekit::server

#endif  // THROTTLEKIT_SRC_SERVER_RLQS_CONFIG_H_
