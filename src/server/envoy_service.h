// src/server/envoy_service.h (internal)
//
// `EnvoyRateLimitService`: Envoy's `ShouldRateLimit` over the configured
// domains (envoy_rls.h; docs/envoy.md).

#ifndef THROTTLEKIT_SRC_SERVER_ENVOY_SERVICE_H_
#define THROTTLEKIT_SRC_SERVER_ENVOY_SERVICE_H_

#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl_view.h"
#include "blocking_pool.h"
#include "envoy/service/ratelimit/v3/rls.grpc.pb.h"
#include "envoy_rls.h"
#include "server.h"
#include "service_support.h"
#include "throttlekit/concurrency/beat_scheduler.h"
#include "throttlekit/core/binding_axis.h"
#include "throttlekit/observe/decision_observer.h"
#include "throttlekit/v1/throttlekit.grpc.pb.h"

namespace throttlekit::server::services {

namespace v1 = ::throttlekit::v1;

// Envoy's global rate-limit service (docs/envoy.md) over the configured
// domains.
// On gRPC's callback API: the descriptors' checks go to their engines
// without waiting and the RPC finishes from the last answer
// (`EnvoyLimits::should_rate_limit_async`); no callback thread waits on a
// store.
class EnvoyRateLimitService final
    : public ::envoy::service::ratelimit::v3::RateLimitService::
          WithCallbackMethod_ShouldRateLimit<
              ::envoy::service::ratelimit::v3::RateLimitService::Service> {
 public:
  EnvoyRateLimitService(Policies& policies, BlockingPool& blocking)
      : policies_(policies), blocking_(blocking) {}

  grpc::ServerUnaryReactor* ShouldRateLimit(
      grpc::CallbackServerContext* ctx,
      const ::envoy::service::ratelimit::v3::RateLimitRequest* req,
      ::envoy::service::ratelimit::v3::RateLimitResponse* resp) override {
    grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
    // The limits stay alive until the answer (a reload swaps them).
    std::shared_ptr<EnvoyLimits> envoy = policies_.envoy();
    if (envoy == nullptr && policies_.envoy_awaited()) {
      // The reference answers an error too ("no rate limit configuration
      // loaded"); this one says it will pass.
      reactor->Finish(to_grpc(absl::UnavailableError(absl::StrCat(
          "ShouldRateLimit: no rate limit configuration loaded yet (the "
          "control plane has sent no RateLimitConfig set); domain \"",
          req->domain(), "\""))));
      return reactor;
    }
    if (envoy == nullptr) {
      reactor->Finish(to_grpc(absl::NotFoundError(
          absl::StrCat("ShouldRateLimit: unknown domain \"", req->domain(),
                       "\" (this server has no envoy domains configured)"))));
      return reactor;
    }
    EnvoyLimits& limits = *envoy;
    limits.should_rate_limit_async(
        *req, resp, blocking_,
        [reactor, envoy = std::move(envoy)](absl::Status s) {
          reactor->Finish(to_grpc(s));
        });
    return reactor;
  }

 private:
  Policies& policies_;
  BlockingPool& blocking_;
};

}  // namespace throttlekit::server::services

#endif  // THROTTLEKIT_SRC_SERVER_ENVOY_SERVICE_H_
