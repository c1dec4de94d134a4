// src/server/fleet_lease_client.h
//
// Provides `FleetLeaseClient`: the Tier-2 client of throttlekit-server
// (docs/server.md, "Tier 1 and Tier 2"). It reserves a chunk of a federated
// policy's window with `Fleet.Reserve` and spends it locally with the
// library's `LeaseSpender`: no round trip per request, one per batch.
//
//     auto client = FleetLeaseClient::create(
//         channel, {.policy = "global-api", .domain = "acme", .batch = 100});
//     absl::StatusOr<Decision> d = (*client)->check();   // ~ns when local
//
// The grant's `expiry_ms` (the window's end on the store's clock) is taken
// as given and never extended: credits left at it are dead, and the next
// check reserves from the new window. The client never invents a denial: a
// check that cannot be paid from what is held reserves `max(batch,
// ceil(cost))`, and a grant that falls short is the server's verdict
// `{false, limit, 0, expiry, retry_after_ms}`. A grant of 0 marks the
// window spent (`detail::SpentMark`, the leased limiter's mechanism,
// include/throttlekit/twotier/internal/spent_mark.h): until it ends the
// client repeats the verdict without asking, except that one check per
// `spent_recheck_ms` reserves again, so units returned to the window (a
// reset, another region's reconcile) are seen within that interval.
// Reserves are coalesced: one
// in flight per client; checks that miss meanwhile wait for it and try the
// fresh credits first.
//
// Thread-safety: every method is safe to call concurrently. The local
// spend is lock-free (one CAS); a refresh holds the client's refresh mutex
// for one round trip.

#ifndef THROTTLEKIT_SRC_SERVER_FLEET_LEASE_CLIENT_H_
#define THROTTLEKIT_SRC_SERVER_FLEET_LEASE_CLIENT_H_

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "throttlekit/coordinator/lease.h"
#include "throttlekit/core/clock.h"
#include "throttlekit/core/cost.h"
#include "throttlekit/core/decision.h"
#include "throttlekit/core/mutex.h"
#include "throttlekit/twotier/internal/spent_mark.h"
#include "throttlekit/twotier/lease_spender.h"
#include "throttlekit/v1/throttlekit.grpc.pb.h"

namespace throttlekit::server {

struct FleetLeaseClientOptions {
  // The federated policy and the budget key (empty: the policy's whole
  // budget).
  std::string policy;
  std::string domain;
  // Units asked for per Reserve; 1 .. 2^53-1.
  int64_t batch = 100;
  // Sent as `x-fleet-secret` when set (needed off loopback).
  std::string secret;
  // Identifies this client to the server (telemetry).
  std::string client_id;
  // Deadline of one Reserve.
  std::chrono::milliseconds rpc_timeout{2000};
  // After a grant of 0 (the window is spent) checks are denied locally, but
  // one per `spent_recheck_ms` reserves again. Unset: an eighth of the time
  // left in the window when it is first marked spent (at least 1; the
  // client does not know the policy's window), so at most 8 extra Reserves
  // per spent window; 0: never (deny until the window ends); else
  // 1 .. 2^53-1.
  std::optional<int64_t> spent_recheck_ms;
};

template <EpochClock C = SystemClock>
class BasicFleetLeaseClient {
  // The library's mark, named from the root: throttlekit::server has a
  // `detail` of its own (engine.h).
  using SpentMark = ::throttlekit::detail::SpentMark;

 public:
  struct Stats {
    int64_t reserves = 0;        // Reserve round trips
    int64_t granted = 0;         // units they granted
    int64_t spent_rechecks = 0;  // Reserves of a window marked spent
  };

  // Validates `options`; kInvalidArgument naming the field.
  static absl::StatusOr<std::unique_ptr<BasicFleetLeaseClient>> create(
      std::shared_ptr<grpc::Channel> channel, FleetLeaseClientOptions options,
      C clock = C{}) {
    if (channel == nullptr) {
      return absl::InvalidArgumentError("fleet_lease_client: channel is null");
    }
    if (options.policy.empty()) {
      return absl::InvalidArgumentError(
          "fleet_lease_client.policy must not be empty");
    }
    if (options.batch < 1 || options.batch > kMaxSafeInteger) {
      return absl::InvalidArgumentError(
          absl::StrCat("fleet_lease_client.batch must be in [1, 2^53-1]; got ",
                       options.batch));
    }
    if (options.spent_recheck_ms.has_value() &&
        (*options.spent_recheck_ms < 0 ||
         *options.spent_recheck_ms > kMaxSafeInteger)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "fleet_lease_client.spent_recheck_ms must be 0 (never) or in "
          "[1, 2^53-1]; got ",
          *options.spent_recheck_ms));
    }
    return std::unique_ptr<BasicFleetLeaseClient>(new BasicFleetLeaseClient(
        v1::Fleet::NewStub(channel), std::move(options), std::move(clock)));
  }

  // Admits or denies `cost` units: locally from the lease when it holds
  // enough in a live window, else after one Reserve. A failed Reserve is
  // its gRPC status (UNAVAILABLE, DEADLINE_EXCEEDED, NOT_FOUND, ...).
  absl::StatusOr<Decision> check(double cost = 1) {
    if (absl::Status s = validate_cost(cost); !s.ok()) return s;
    const int64_t now = clock_.now_ms();
    if (std::optional<Decision> d = spender_.spend(now, cost)) {
      d->limit = limit_.load(std::memory_order_relaxed);
      return *d;
    }
    const SpentMark::Verdict gate = spent_.gate(now);
    if (gate.gate == SpentMark::Gate::kDeny) {
      return spent_denial(now, gate.until_ms);
    }
    return refresh_and_spend(cost, gate.gate == SpentMark::Gate::kRecheck);
  }

  Stats stats() const {
    return {reserves_.load(std::memory_order_relaxed),
            granted_.load(std::memory_order_relaxed),
            spent_rechecks_.load(std::memory_order_relaxed)};
  }
  // Credits held now (dead ones included) and the end of their window.
  double credits() const { return spender_.credits(); }
  int64_t expires_at_ms() const { return spender_.expires_at_ms(); }

 private:
  BasicFleetLeaseClient(std::unique_ptr<v1::Fleet::Stub> stub,
                        FleetLeaseClientOptions options, C clock)
      : stub_(std::move(stub)),
        options_(std::move(options)),
        clock_(std::move(clock)),
        spender_(0) {}  // the policy's limit arrives with the first lease

  // The server's last verdict on a window marked spent (ending at
  // `until_ms`), repeated without a round trip.
  Decision spent_denial(int64_t now_ms, int64_t until_ms) const {
    return Decision{false, limit_.load(std::memory_order_relaxed), 0, until_ms,
                    std::max<int64_t>(1, until_ms - now_ms)};
  }

  // One Reserve, unless a refresh that finished while this one waited paid
  // for `cost` or marked the window spent. `recheck`: the caller took the
  // spent window's recheck (spent_mark.h).
  absl::StatusOr<Decision> refresh_and_spend(double cost, bool recheck) {
    MutexLock lock(refresh_mu_);
    const int64_t now = clock_.now_ms();
    if (std::optional<Decision> d = spender_.spend(now, cost)) {
      d->limit = limit_.load(std::memory_order_relaxed);
      return *d;
    }
    if (!recheck) {
      const SpentMark::Verdict gate = spent_.gate(now);
      if (gate.gate == SpentMark::Gate::kDeny) {
        return spent_denial(now, gate.until_ms);
      }
      recheck = gate.gate == SpentMark::Gate::kRecheck;
    }
    if (recheck) spent_rechecks_.fetch_add(1, std::memory_order_relaxed);
    v1::ReserveRequest req;
    req.set_policy(options_.policy);
    req.mutable_caller()->set_domain(options_.domain);
    req.mutable_caller()->set_client_id(options_.client_id);
    req.set_wants(std::max<int64_t>(options_.batch,
                                    static_cast<int64_t>(std::ceil(cost))));
    req.set_axis(v1::AXIS_RATE);
    v1::ReserveResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + options_.rpc_timeout);
    if (!options_.secret.empty()) {
      ctx.AddMetadata("x-fleet-secret", options_.secret);
    }
    const grpc::Status s = stub_->Reserve(&ctx, req, &resp);
    if (!s.ok()) {
      return absl::Status(static_cast<absl::StatusCode>(s.error_code()),
                          absl::StrCat("Reserve: ", s.error_message()));
    }
    const v1::Lease& lease = resp.lease();
    reserves_.fetch_add(1, std::memory_order_relaxed);
    granted_.fetch_add(lease.capacity(), std::memory_order_relaxed);
    limit_.store(lease.limit(), std::memory_order_relaxed);
    // A grant of 0 says the window is spent: checks repeat the verdict
    // until it ends, but for one Reserve per recheck interval.
    if (lease.capacity() == 0) {
      const int64_t at = clock_.now_ms();
      spent_.mark(lease.expiry_ms(), at,
                  options_.spent_recheck_ms.value_or(
                      std::max<int64_t>(1, (lease.expiry_ms() - at) / 8)));
    } else {
      spent_.clear();
    }
    LeaseGrant grant;
    grant.granted = lease.capacity();
    grant.expires_at_ms = lease.expiry_ms();
    if (std::optional<Decision> d =
            spender_.refill_and_spend(grant, clock_.now_ms(), cost)) {
      d->limit = lease.limit();
      return *d;
    }
    // The server's verdict: what it granted does not pay for `cost`.
    const int64_t retry =
        lease.retry_after_ms() > 0
            ? lease.retry_after_ms()
            : std::max<int64_t>(1, lease.expiry_ms() - clock_.now_ms());
    return Decision{false, lease.limit(), 0, lease.expiry_ms(), retry};
  }

  const std::unique_ptr<v1::Fleet::Stub> stub_;
  const FleetLeaseClientOptions options_;
  const C clock_;
  LeaseSpender spender_;
  Mutex refresh_mu_;
  std::atomic<int64_t> reserves_{0};
  std::atomic<int64_t> granted_{0};
  std::atomic<int64_t> spent_rechecks_{0};
  // The limit decisions report: the last lease's.
  std::atomic<int64_t> limit_{0};
  // A window the server said is spent: gated lock-free by `check`,
  // marked and cleared under `refresh_mu_`.
  SpentMark spent_;
};

using FleetLeaseClient = BasicFleetLeaseClient<>;

}  // namespace throttlekit::server

#endif  // THROTTLEKIT_SRC_SERVER_FLEET_LEASE_CLIENT_H_
