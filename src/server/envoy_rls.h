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
// engine of its own under `throttlekit:envoy:<domain>:<path>`: the embedded
// memory store's limiter, or over a shared store (Redis, Postgres) the
// strict limiter (one round trip per descriptor) or, for a `leased` limit,
// a window-coupled `LeasedLimiter` (one round trip per batch; every server
// on the store together admits at most the limit per window), or, for a
// `federated` limit, a `FederatedLimiter` of the configured region (the
// same bound for every server in every region; docs/federation.md). Store
// outages are decided by the configured fail policy, except a federated
// limit's: it serves the credits it holds, then denies (the federation's
// fail-closed outage), as a federated policy does.
//
// Thread-safety: every method is safe to call concurrently.

#ifndef THROTTLEKIT_SRC_SERVER_ENVOY_RLS_H_
#define THROTTLEKIT_SRC_SERVER_ENVOY_RLS_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "blocking_pool.h"
#include "engine.h"
#include "envoy/service/ratelimit/v3/rls.pb.h"
#include "envoy_config.h"
#include "policies.h"
#include "throttlekit/coordinator/coordinator.h"
#include "throttlekit/core/mutex.h"
#include "throttlekit/twotier/leased_limiter.h"

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

  // Builds every domain's tree and an engine per counted limit over `store`
  // (null: the embedded memory store), reading `clock`. kInvalidArgument
  // naming the domain and descriptor for a `leased` limit without a shared
  // store.
  //
  // With `previous` (the limits this one replaces, on a reload), every
  // limit whose domain, path and counting (strategy, requests_per_unit,
  // unit, strategy options, leasing, fail policy) are unchanged keeps its
  // engine, so its counts go on; every (domain, path) keeps its counters.
  // `previous` must stay alive until this returns; it keeps serving.
  static absl::StatusOr<std::unique_ptr<EnvoyLimits>> create(
      const EnvoyConfig& config, Options options,
      std::shared_ptr<Coordinator> store = nullptr, ServerClock clock = {},
      const EnvoyLimits* previous = nullptr);

  // After a reload to `next`: gives back the live credits of every leased
  // or federated limit `next` did not keep; returns the first error.
  absl::Status close_dropped(const EnvoyLimits& next);

  ~EnvoyLimits();
  EnvoyLimits(const EnvoyLimits&) = delete;
  EnvoyLimits& operator=(const EnvoyLimits&) = delete;

  // Decides `request` into `response` (statuses in the request's order,
  // overall_code, and response_headers_to_add when headers are configured),
  // every descriptor at one instant. A bad request is refused before
  // anything is counted: INVALID_ARGUMENT for an empty domain, no
  // descriptors, more than `max_descriptors`, a descriptor without entries
  // or with an empty key, hits above kMaxHitsAddend, an override without a
  // unit, a counter key over `max_key_bytes`. A domain the configuration
  // does not name is answered OK with no limit for every descriptor
  // (overrides included, as the reference answers) and counted in
  // `domain_not_found`; with `unknownDomain: notFound`, NOT_FOUND naming
  // it. Thread-safe.
  //
  // Every counted descriptor's engine is asked before any answer is read,
  // so an error (a store the fail policy does not decide for) answers the
  // request with the first error in descriptor order, the other
  // descriptors having counted.
  absl::Status should_rate_limit(
      const ::envoy::service::ratelimit::v3::RateLimitRequest& request,
      ::envoy::service::ratelimit::v3::RateLimitResponse* response);
  // As `should_rate_limit`, without waiting (docs/async.md): the checks of
  // the descriptors go to their engines' `check_async` together (over one
  // store, in descriptor order into its pipeline), and `done` runs once
  // with the status when the last answer is in, on the thread that read it
  // (inline for a request refused, or decided in memory). A request whose
  // answers would wait without an asynchronous form (a descriptor
  // hits_addend of 0, a peek, over a shared store) runs on `blocking`.
  // `request` and `response` must outlive `done`. Thread-safe.
  void should_rate_limit_async(
      const ::envoy::service::ratelimit::v3::RateLimitRequest& request,
      ::envoy::service::ratelimit::v3::RateLimitResponse* response,
      BlockingPool& blocking, absl::AnyInvocable<void(absl::Status) &&> done);

  // The number of configured domains.
  size_t domains() const;

  // What the door decided for one configured limit (or a domain's limit
  // overrides together), in hits, under the reference service's statistic
  // names: every counted hit; hits refused (a refused descriptor's hits),
  // hits admitted, hits admitted with the limit over 80% used (not for
  // leased limits, whose remaining is this server's), hits over the limit
  // in shadow mode. Relaxed counters.
  struct LimitCounters {
    std::atomic<int64_t> total_hits{0};
    std::atomic<int64_t> over_limit{0};
    std::atomic<int64_t> near_limit{0};
    std::atomic<int64_t> within_limit{0};
    std::atomic<int64_t> shadow_mode{0};
  };
  // Requests of one domain by answer.
  struct RequestCounters {
    std::atomic<int64_t> ok{0};
    std::atomic<int64_t> over_limit{0};
    std::atomic<int64_t> error{0};
  };

  // Appends the door's Prometheus families to `out` (docs/envoy.md,
  // "Metrics"): ratelimit_service_rate_limit_{total_hits, over_limit,
  // near_limit, within_limit, shadow_mode}{domain, key1} per counted limit,
  // throttlekit_envoy_requests_total{domain, code},
  // ratelimit_service_rate_limit_domain_not_found{domain} and
  // throttlekit_envoy_unrouted_requests_total. Thread-safe.
  void append_prometheus(std::string& out) const;

  // Gives every leased or federated limit's live credits back to its
  // window, for the other servers; returns the first error. Thread-safe;
  // checks after it lease again.
  absl::Status close();

 private:
  struct Node;
  struct Level;
  struct Domain;
  struct Plan;

  EnvoyLimits(Options options, std::shared_ptr<Coordinator> store,
              ServerClock clock);

  struct Pending;
  // The request checked and matched: one plan per descriptor, nothing
  // counted yet (every refusal of the request happens here); `domain` is
  // set once the request's domain is found.
  absl::Status plan(
      const ::envoy::service::ratelimit::v3::RateLimitRequest& request,
      const Domain*& domain, std::vector<Plan>& plans);
  // Whether a plan's descriptor is decided by an engine's answer (not: no
  // limit applies, or an unlimited one).
  static bool asks_engine(const Plan& plan);
  // Whether `answer` asks a shared store for `plan` (else it is decided in
  // memory, or locally: a limit of 0, a missing engine).
  bool asks_store(const Plan& plan) const;
  // The engine's answer for `plan` at `now_ms`, waiting where it waits.
  absl::StatusOr<Decision> answer(const Plan& plan, int64_t now_ms);
  // The response from the plans and their answers (index-aligned):
  // counts, statuses, overall code, headers; the first error in order.
  absl::Status assemble(
      ::envoy::service::ratelimit::v3::RateLimitResponse* response,
      const Domain& domain, const std::vector<Plan>& plans,
      const std::vector<absl::StatusOr<Decision>>& answers, int64_t now_ms);
  // The request counters (by domain and answer, or unrouted).
  void account(const Domain* domain,
               const ::envoy::service::ratelimit::v3::RateLimitResponse& resp,
               const absl::Status& s);

  // Sets `node`'s engine for `limit` under `prefix`: `reuse`'s when given,
  // else a new one.
  absl::Status make_limit_engine(const EnvoyRateLimit& limit,
                                 const std::string& prefix, Node& node,
                                 const Node* reuse);

  // The engine counting a fixed window of `requests_per_unit` per `unit`
  // for limit overrides, made on first use. Thread-safe.
  absl::StatusOr<Engine*> override_engine(int64_t requests_per_unit,
                                          EnvoyUnit unit);

  const Options options_;
  const std::shared_ptr<Coordinator> store_;  // null: the memory store
  const ServerClock clock_;
  std::optional<RateLimitStyle> headers_;
  FailPolicy fail_policy_;
  // The leased and federated limits' limiters (also behind their nodes'
  // engines), each with its close(), for close() and close_dropped().
  struct Holder {
    const void* limiter;
    std::function<absl::Status()> close;
  };
  template <class L>
  void hold(const std::shared_ptr<L>& limiter) {
    holders_.push_back({limiter.get(), [limiter] { return limiter->close(); }});
  }
  std::vector<Holder> holders_;
  // Requests refused before a configured domain was found.
  std::atomic<int64_t> unrouted_{0};
  EnvoyUnknownDomain unknown_domain_ = EnvoyUnknownDomain::kAllow;
  // What an unknown domain's requests are planned against: no descriptor
  // tree, so no descriptor matches a limit.
  std::unique_ptr<Domain> unknown_;
  // Counts a request naming the unknown domain `name`.
  void count_not_found(std::string_view name);
  mutable Mutex not_found_mu_;
  // Requests by unknown domain name: at most kMaxNotFoundNames names, the
  // rest together under "(other)" (a request names its own domain, so the
  // names are the clients' to choose).
  static constexpr size_t kMaxNotFoundNames = 256;
  absl::flat_hash_map<std::string, int64_t> not_found_
      ABSL_GUARDED_BY(not_found_mu_);
  absl::flat_hash_map<std::string, std::unique_ptr<Domain>> domains_;
  mutable Mutex overrides_mu_;
  // (requests_per_unit, unit) -> its engine; at most kMaxLimitOverrides.
  absl::flat_hash_map<std::pair<int64_t, int>, std::shared_ptr<Engine>>
      overrides_ ABSL_GUARDED_BY(overrides_mu_);
};

}  // namespace throttlekit::server

#endif  // THROTTLEKIT_SRC_SERVER_ENVOY_RLS_H_
