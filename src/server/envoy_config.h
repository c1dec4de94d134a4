// src/server/envoy_config.h
//
// Provides the configuration of throttlekit-server's Envoy door
// (docs/envoy.md): rate-limit domains in the format of Envoy's reference
// rate-limit service, a `domain` with nested `descriptors`,
//
//     domain: messaging
//     descriptors:
//       - key: message_type
//         value: marketing
//         descriptors:
//           - key: to_number
//             rate_limit: {unit: day, requests_per_unit: 5}
//       - key: to_number
//         rate_limit: {unit: day, requests_per_unit: 100, strategy: gcra}
//
// loaded from the server's YAML (`envoy: {domains: [...]}`) or from files
// in that format (`envoy: {files: [...]}`). `parse_envoy_domain` reads one
// such file; the server's own parser (config.h) reads the `envoy:` block
// with the same code. Every error is kInvalidArgument reading
// `<source>: <path in the document>: <problem>`.
//
// Beyond the reference format: `strategy` (and `burst`, `buckets`) in a
// `rate_limit` picks another of the library's strategies to count with;
// fixedWindow, windows aligned to the unit, is the default and is the
// reference's arithmetic.
//
// Thread-safety: plain values; parsing reads the files it names and is
// otherwise pure.

#ifndef THROTTLEKIT_SRC_SERVER_ENVOY_CONFIG_H_
#define THROTTLEKIT_SRC_SERVER_ENVOY_CONFIG_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "throttlekit/coordinator/any_strategy.h"
#include "throttlekit/coordinator/fail_policy.h"
#include "throttlekit/observe/rate_limit_fields.h"

namespace throttlekit::server {

// The window of a limit. The values are the wire's
// `RateLimitResponse.RateLimit.Unit` numbers.
enum class EnvoyUnit : int {
  kSecond = 1,
  kMinute = 2,
  kHour = 3,
  kDay = 4,
  kMonth = 5,  // 30 days, as in the reference service
  kYear = 6,   // 365 days
  kWeek = 7,
};

// The unit's length in ms.
int64_t envoy_unit_ms(EnvoyUnit unit);
// "second", "minute", ... as written in the configuration.
std::string_view envoy_unit_name(EnvoyUnit unit);
// The unit of a wire number (1 .. 7), or nullopt (0, UNKNOWN, and numbers
// the contract does not define).
std::optional<EnvoyUnit> envoy_unit_from_wire(int number);

// The largest requests_per_unit (the wire's uint32).
inline constexpr int64_t kMaxRequestsPerUnit = 4'294'967'295;

// The rate-limit strategy options counting `requests_per_unit` per `unit`
// with the strategy named `strategy` (fixedWindow, gcra, tokenBucket,
// slidingWindow, slidingLog); `burst` (gcra) and `buckets` (slidingWindow)
// are 0 for the strategy's default. kInvalidArgument for another name or
// options the strategy refuses. Requires requests_per_unit >= 1.
absl::StatusOr<StrategyOptions> envoy_strategy_options(
    std::string_view strategy, int64_t requests_per_unit, EnvoyUnit unit,
    int64_t burst = 0, int64_t buckets = 0);

// A descriptor's `rate_limit` block.
struct EnvoyRateLimit {
  // `unlimited: true`: answered OK without counting (no unit may be given).
  bool unlimited = false;
  // 0 .. 2^32-1; 0 refuses every request (the reference's deny rule).
  int64_t requests_per_unit = 0;
  EnvoyUnit unit = EnvoyUnit::kSecond;
  // Names the limit for `replaces` and in responses; may be empty.
  std::string name;
  // Names of the limits this one replaces when both apply to a request.
  std::vector<std::string> replaces;
  // The strategy counting it, as written ("fixedWindow" by default), and its
  // options (set when the limit counts: not unlimited, requests_per_unit >
  // 0).
  std::string strategy = "fixedWindow";
  // The strategy's option as written (0: its default).
  int64_t burst = 0;    // gcra
  int64_t buckets = 0;  // slidingWindow
  std::optional<StrategyOptions> options;
  // `leased: true` or `leased: {batch: N}`: counted by a window-coupled
  // leased limiter on the shared store (docs/envoy.md, "The leased path"),
  // taking credits `batch` at a time; fixedWindow only, 1 .. requests_per_unit.
  // nullopt: every hit is one round trip to the store (strict).
  std::optional<int64_t> leased_batch;
  // `federated: true` or `federated: {region: R, batch: N}`: one budget per
  // window for every server on the shared store, in any number of regions
  // (docs/federation.md): each server spends credits it leases `batch` at a
  // time for its `region` (1 .. 64 bytes, "default" unless given); batch
  // as leased's. fixedWindow or slidingWindow (federated, counted per
  // fixed window of the unit). Exclusive with `leased`.
  struct Federation {
    std::string region = "default";
    int64_t batch = 1;
  };
  std::optional<Federation> federated;
};

// The batch of `leased: true`: a sixteenth of the limit, at least 1, at
// most 256.
int64_t envoy_default_lease_batch(int64_t requests_per_unit);

// One node of a domain's descriptor tree.
struct EnvoyDescriptor {
  std::string key;  // never empty
  // Empty: any value of `key` (each value counted apart). Holding `*`: a
  // pattern, each `*` matching any run of bytes, e.g. `/api/*`.
  std::string value;
  std::optional<EnvoyRateLimit> rate_limit;
  // Counts and reports, but never refuses.
  bool shadow_mode = false;
  // For a pattern: every value it matches shares one count (the pattern's)
  // instead of one count per value.
  bool share_threshold = false;
  std::vector<EnvoyDescriptor> descriptors;
};

// One domain: a tree of descriptors.
struct EnvoyDomain {
  std::string domain;  // never empty; unique across the configuration
  // Where it was defined, for errors: `server.yaml: envoy.domains[0]` or a
  // file's name.
  std::string source;
  std::vector<EnvoyDescriptor> descriptors;
};

// The server's `envoy:` block.
// What the door answers a request naming a domain the configuration does
// not have (`unknownDomain: allow | notFound`).
enum class EnvoyUnknownDomain {
  // OK with no limit for every descriptor, counted in
  // ratelimit_service_rate_limit_domain_not_found, as the reference service
  // answers: behind Envoy with `failure_mode_deny`, a domain missing from
  // the configuration lets its traffic through.
  kAllow,
  // NOT_FOUND naming the domain.
  kNotFound,
};

struct EnvoyConfig {
  std::vector<EnvoyDomain> domains;
  EnvoyUnknownDomain unknown_domain = EnvoyUnknownDomain::kAllow;
  // The rate-limit headers sent in response_headers_to_add, in one of the
  // header helpers' forms; nullopt (the default, as the reference): none.
  std::optional<RateLimitStyle> headers;
  // What a store outage answers (`failPolicy: error | open | closed`):
  // kPropagate (the default) returns the store's status (UNAVAILABLE or
  // DEADLINE_EXCEEDED) and leaves the choice to Envoy's
  // `failure_mode_deny`; kOpen answers OK, kClosed OVER_LIMIT.
  FailPolicy fail_policy;
  // The files `files:` named, as read (for a watcher to reread on change).
  std::vector<std::string> files;
  // The block stands with no domains: it wrote `domains: []` (and no
  // files), for a server whose domains all come from a control plane
  // (docs/gateways.md). The Envoy door is then on with every domain
  // unknown until a set arrives.
  bool without_domains = false;
};

// Parses one document in the reference service's format (a `domain` and
// its `descriptors`); `source` names it in errors.
absl::StatusOr<EnvoyDomain> parse_envoy_domain(std::string_view yaml,
                                               std::string_view source);

}  // namespace throttlekit::server

#endif  // THROTTLEKIT_SRC_SERVER_ENVOY_CONFIG_H_
