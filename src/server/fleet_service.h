// src/server/fleet_service.h (internal)
//
// `FleetService`: the `Fleet` service, Tier-2 leases for other processes
// (docs/server.md).

#ifndef THROTTLEKIT_SRC_SERVER_FLEET_SERVICE_H_
#define THROTTLEKIT_SRC_SERVER_FLEET_SERVICE_H_

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "policies.h"
#include "service_support.h"
#include "throttlekit/coordinator/lease.h"
#include "throttlekit/core/decision.h"
#include "throttlekit/v1/throttlekit.grpc.pb.h"

namespace throttlekit::server::services {

namespace v1 = ::throttlekit::v1;

class FleetService final : public v1::Fleet::Service {
 public:
  FleetService(Policies& policies, std::string secret)
      : policies_(policies), secret_(std::move(secret)) {}

  grpc::Status Reserve(grpc::ServerContext* ctx, const v1::ReserveRequest* req,
                       v1::ReserveResponse* resp) override {
    if (absl::Status s = admitted(*ctx); !s.ok()) return to_grpc(s);
    Policy* p = policies_.find(req->policy());
    if (p == nullptr) {
      return to_grpc(absl::NotFoundError(
          absl::StrCat("unknown policy \"", req->policy(), "\"")));
    }
    if (req->axis() == v1::AXIS_CONCURRENCY) {
      return to_grpc(absl::UnimplementedError(
          "Reserve: concurrency slots are not leasable; Admit holds them"));
    }
    if (p->federated == nullptr) {
      return to_grpc(absl::NotFoundError(
          absl::StrCat("Reserve: policy \"", p->name,
                       "\" is not leasable (only a federated: policy is)")));
    }
    const int64_t wants = req->wants() == 0 ? 1 : req->wants();
    if (wants < 1 || wants > kMaxSafeInteger) {
      return to_grpc(absl::InvalidArgumentError(absl::StrCat(
          "Reserve: wants must be in [1, 2^53-1] (0 means 1); got ", wants)));
    }
    const std::string& domain = req->caller().domain();
    if (static_cast<int64_t>(domain.size()) >
        policies_.config().max_key_bytes) {
      return to_grpc(absl::InvalidArgumentError(
          absl::StrCat("Reserve: caller.domain is ", domain.size(),
                       " bytes; the server's limit is ",
                       policies_.config().max_key_bytes, " (maxKeyBytes)")));
    }
    absl::StatusOr<LeaseGrant> g = p->store->lease_windowed(
        *p->lease_budget, p->lease_key(domain.empty() ? "*" : domain), wants);
    if (!g.ok()) return to_grpc(g.status());
    const int64_t left_ms = std::max<int64_t>(0, g->expires_at_ms - g->now_ms);
    v1::Lease* lease = resp->mutable_lease();
    lease->set_capacity(g->granted);
    lease->set_expiry_ms(g->expires_at_ms);
    lease->set_refresh_interval_ms(left_ms);
    lease->set_safe_capacity(g->granted);
    lease->set_retry_after_ms(g->granted == 0 ? std::max<int64_t>(1, left_ms)
                                              : 0);
    lease->set_limit(p->lease_budget->limit());
    return grpc::Status::OK;
  }

 private:
  // Loopback callers, or any caller presenting the fleet secret.
  absl::Status admitted(const grpc::ServerContext& ctx) const {
    return door_admits(ctx, secret_, "x-fleet-secret", "Fleet.Reserve");
  }

  Policies& policies_;
  const std::string secret_;
};

}  // namespace throttlekit::server::services

#endif  // THROTTLEKIT_SRC_SERVER_FLEET_SERVICE_H_
