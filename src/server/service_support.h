// src/server/service_support.h (internal)
//
// What the gRPC services share: statuses and decisions to the wire, a
// decision reported to its policy's metrics, the cost of a request, and
// which callers a door admits (loopback, or the secret).

#ifndef THROTTLEKIT_SRC_SERVER_SERVICE_SUPPORT_H_
#define THROTTLEKIT_SRC_SERVER_SERVICE_SUPPORT_H_

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
#include "throttlekit/concurrency/beat_scheduler.h"
#include "throttlekit/core/binding_axis.h"
#include "throttlekit/observe/decision_observer.h"
#include "throttlekit/v1/throttlekit.grpc.pb.h"

namespace throttlekit::server::services {

namespace v1 = ::throttlekit::v1;

// absl and gRPC share the canonical status codes.
inline grpc::Status to_grpc(const absl::Status& s) {
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()),
                      std::string(s.message()));
}

inline void to_wire(const Decision& d, v1::Decision* out) {
  out->set_allowed(d.allowed);
  out->set_limit(d.limit);
  out->set_remaining(d.remaining);
  out->set_reset_at(d.reset_at_ms);
  out->set_retry_after_ms(d.retry_after_ms);
}

using SteadyClock = std::chrono::steady_clock;

// Reports a limiter's or a budget's decision to its policy's metrics (an
// admission reports its own, as the library's observer).
inline void observe(const Policy& p, std::string_view key, double cost,
                    const Decision& d, SteadyClock::duration took) {
  DecisionEvent e;
  e.kind = DecisionKind::kCheck;
  e.engine = p.strategy;
  e.key = key;
  e.cost = cost;
  e.decision = d;
  e.duration_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(took).count();
  notify(p.metrics.get(), e);
}

// proto3's default 0 means 1; anything else goes to the library, which
// refuses what is not a valid cost (negative, above 2^53-1).
inline double units(int64_t wire) {
  return wire == 0 ? 1.0 : static_cast<double>(wire);
}

// Compares without an early exit, so timing does not reveal how much of a
// guess was right.
inline bool same_secret(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  }
  return diff == 0;
}

// Loopback callers, or any caller presenting `secret` as `header` metadata.
inline absl::Status door_admits(const grpc::ServerContext& ctx,
                                const std::string& secret,
                                std::string_view header,
                                std::string_view door) {
  if (!secret.empty()) {
    const auto& md = ctx.client_metadata();
    auto it = md.find(grpc::string_ref(header.data(), header.size()));
    if (it != md.end() &&
        same_secret(std::string_view(it->second.data(), it->second.size()),
                    secret)) {
      return absl::OkStatus();
    }
  }
  if (is_loopback_peer(ctx.peer())) return absl::OkStatus();
  return absl::PermissionDeniedError(absl::StrCat(
      sv(door), ": answers loopback callers only",
      secret.empty()
          ? " (this server has no secret for others)"
          : absl::StrCat("; others must send the secret as ", sv(header))));
}

}  // namespace throttlekit::server::services

#endif  // THROTTLEKIT_SRC_SERVER_SERVICE_SUPPORT_H_
