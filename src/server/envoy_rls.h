// src/server/envoy_rls.h
//
// Provides `EnvoyLimits`: the decisions of Envoy's global rate-limit service,
// `envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit`
// (proto/envoy/service/ratelimit/v3/rls.proto), over the configured
// domains (envoy_config.h), with the matching rules of the reference
// service and the library's engines counting (docs/envoy.md).
//
// A request names a domain and carries descriptors, each a list of
// (key, value) entries. Each descriptor is matched level by level down its
// domain's tree: at each level an exact (key, value) node first, then the
// key's `*` patterns in configuration order, then the key's value-less
// node; a descriptor gets the limit of the node its last entry lands on
// (one with more or fewer entries than that path gets none). Then:
//
//   - a descriptor carrying a `limit` override is counted against that
//     limit instead (a fixed window of the unit), whatever it matched;
//   - a limit named in another matched limit's `replaces` is dropped;
//   - `unlimited` answers OK (limit_remaining 2^32-1) without counting;
//   - every other matched limit is counted with the descriptor's hits
//     (its own hits_addend if set, else the request's, 0 meaning 1; a
//     descriptor hits_addend of 0 checks without counting), each descriptor
//     on its own, so one descriptor over its limit does not stop the
//     others from counting (as the reference service does);
//   - a descriptor is OVER_LIMIT when its engine denies, unless in
//     `shadow_mode` (then OK, the count kept); the request is OVER_LIMIT if
//     any descriptor is.
//
// Each limit counts per distinct sequence of the request's values along its
// path (`key: remote_address` without a value limits each address apart;
// a pattern with `share_threshold` counts all its values as one), in an
// engine of its own under `throttlekit:envoy:<domain>:<path>`.
//
// Thread-safety: every method is safe to call concurrently.

#ifndef THROTTLEKIT_SRC_SERVER_ENVOY_RLS_H_
#define THROTTLEKIT_SRC_SERVER_ENVOY_RLS_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine.h"
#include "envoy/service/ratelimit/v3/rls.pb.h"
#include "envoy_config.h"
#include "policies.h"
#include "throttlekit/core/mutex.h"

namespace throttlekit::server {

// The most hits one request or descriptor may add (Envoy's own ceiling for a
// configured hits_addend); more is INVALID_ARGUMENT.
inline constexpr int64_t kMaxHitsAddend = 1'000'000'000;

// The most distinct (requests_per_unit, unit) limit overrides the server
// keeps an engine for; a request bringing another one is
// RESOURCE_EXHAUSTED.
inline constexpr int64_t kMaxLimitOverrides = 1024;

class EnvoyLimits {
 public:
  struct Options {
    // A descriptor's counter key (its values, length-prefixed) may be at
    // most this long; longer is INVALID_ARGUMENT.
    int64_t max_key_bytes = 4096;
    // A request may carry at most this many descriptors.
    int64_t max_descriptors = 1000;
  };

  // Builds every domain's tree and an engine per counted limit, on the
  // embedded memory store, reading `clock`.
  static absl::StatusOr<std::unique_ptr<EnvoyLimits>> create(
      const EnvoyConfig& config, Options options, ServerClock clock = {});

  ~EnvoyLimits();
  EnvoyLimits(const EnvoyLimits&) = delete;
  EnvoyLimits& operator=(const EnvoyLimits&) = delete;

  // Decides `request` into `response` (statuses in the request's order,
  // overall_code, and response_headers_to_add when headers are configured),
  // every descriptor at one instant. A bad request is refused before
  // anything is counted: INVALID_ARGUMENT for an empty domain, no
  // descriptors, more than `max_descriptors`, a descriptor without entries
  // or with an empty key, hits above kMaxHitsAddend, an override without a
  // unit, a counter key over `max_key_bytes`; NOT_FOUND for a domain the
  // configuration does not name. Thread-safe.
  absl::Status should_rate_limit(
      const ::envoy::service::ratelimit::v3::RateLimitRequest& request,
      ::envoy::service::ratelimit::v3::RateLimitResponse* response);

  // The number of configured domains.
  size_t domains() const;

 private:
  struct Node;
  struct Level;
  struct Domain;
  struct Plan;

  EnvoyLimits(Options options, ServerClock clock);

  // The engine counting a fixed window of `requests_per_unit` per `unit`
  // for limit overrides, made on first use. Thread-safe.
  absl::StatusOr<Engine*> override_engine(int64_t requests_per_unit,
                                          EnvoyUnit unit);

  const Options options_;
  const ServerClock clock_;
  std::optional<RateLimitStyle> headers_;
  absl::flat_hash_map<std::string, std::unique_ptr<Domain>> domains_;
  Mutex overrides_mu_;
  // (requests_per_unit, unit) -> its engine; at most kMaxLimitOverrides.
  absl::flat_hash_map<std::pair<int64_t, int>, std::shared_ptr<Engine>>
      overrides_ ABSL_GUARDED_BY(overrides_mu_);
};

}  // namespace throttlekit::server

#endif  // THROTTLEKIT_SRC_SERVER_ENVOY_RLS_H_
