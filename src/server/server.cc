// src/server/server.cc: the gRPC door (server.h): the server, its
// services (one header each: rate_limiter_service.h, envoy_service.h,
// fleet_service.h, monitor_service.h) and its health.

#include "server.h"

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
#include "envoy_service.h"
#include "fleet_service.h"
#include "heartbeat_share.h"
#include "monitor_service.h"
#include "prometheus_family.h"
#include "quota_door.h"
#include "rate_limiter_service.h"
#include "rlqs_service.h"
#include "throttlekit/concurrency/beat_scheduler.h"
#include "throttlekit/core/binding_axis.h"
#include "throttlekit/observe/decision_observer.h"
#include "throttlekit/v1/throttlekit.grpc.pb.h"

namespace throttlekit::server {

using services::EnvoyRateLimitService;
using services::FleetService;
using services::MonitorService;
using services::RateLimiterService;
using services::RlqsService;

bool is_loopback_peer(std::string_view peer) {
  const auto starts = [&](std::string_view p) {
    return peer.substr(0, p.size()) == p;
  };
  return starts("ipv4:127.") || starts("ipv6:[::1]:") ||
         starts("ipv6:[::ffff:127.") || starts("unix:");
}

struct Server::Impl {
  std::unique_ptr<Policies> policies;
  // Before the services: it outlives the calls they hand it.
  std::unique_ptr<BlockingPool> blocking;
  std::unique_ptr<SlotLeases> leases;
  std::unique_ptr<RateLimiterService> service;
  std::unique_ptr<EnvoyRateLimitService> envoy;
  std::unique_ptr<FleetService> fleet;
  std::unique_ptr<MonitorService> monitor;
  // The quota door's budgets and streams: declared before the gRPC server,
  // so the reactors go before it does.
  std::unique_ptr<QuotaDoor> quota;
  std::unique_ptr<RlqsService> rlqs;
  std::unique_ptr<grpc::Server> grpc_server;
  int port = 0;
  // Reclaims expired slots (null when the options turned it off).
  std::unique_ptr<ThreadBeatScheduler> reaper;
  // Watches the store until it is ready (its connections open and set
  // up), then sets the health service SERVING (null: the embedded store,
  // ready from the start).
  std::unique_ptr<ThreadBeatScheduler> readiness;
  std::atomic<bool> store_ready{false};
  std::atomic<bool> shut_down{false};
};

Server::Server(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

absl::StatusOr<std::unique_ptr<Server>> Server::start(
    std::unique_ptr<Policies> policies, ServerOptions options) {
  if (policies == nullptr) {
    return absl::InvalidArgumentError("server: policies are null");
  }
  auto impl = std::make_unique<Impl>();
  impl->leases = std::make_unique<SlotLeases>(policies->config().lease_ttl_ms,
                                              options.clock);
  impl->policies = std::move(policies);
  if (options.blocking_threads < 1 || options.blocking_threads > 4096) {
    return absl::InvalidArgumentError(
        absl::StrCat("server: blocking_threads must be in [1, 4096]; got ",
                     options.blocking_threads));
  }
  impl->blocking = std::make_unique<BlockingPool>(options.blocking_threads);
  impl->service = std::make_unique<RateLimiterService>(
      *impl->policies, *impl->leases, *impl->blocking);

  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  // One server per port: a second one on a port in use must fail, not
  // share it (gRPC sets SO_REUSEPORT unless told not to).
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  if (options.sync_threads < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "server: sync_threads must be >= 0; got ", options.sync_threads));
  }
  if (options.sync_threads > 0) {
    grpc::ResourceQuota quota("throttlekit-server");
    quota.SetMaxThreads(options.sync_threads);
    builder.SetResourceQuota(quota);
  }
  const bool tls = !options.tls_cert_chain.empty();
  if (tls != !options.tls_private_key.empty()) {
    return absl::InvalidArgumentError(
        "server: TLS needs both the certificate chain and the private key");
  }
  if (!tls && !options.tls_client_ca.empty()) {
    return absl::InvalidArgumentError(
        "server: a client CA (mutual TLS) needs the server's own certificate "
        "and key");
  }
  std::shared_ptr<grpc::ServerCredentials> credentials =
      grpc::InsecureServerCredentials();
  if (tls) {
    grpc::SslServerCredentialsOptions ssl(
        options.tls_client_ca.empty()
            ? GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE
            : GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
    ssl.pem_root_certs = options.tls_client_ca;
    ssl.pem_key_cert_pairs.push_back(
        {options.tls_private_key, options.tls_cert_chain});
    credentials = grpc::SslServerCredentials(ssl);
  }
  builder.AddListeningPort(options.listen, credentials, &impl->port);
  builder.RegisterService(impl->service.get());
  impl->envoy =
      std::make_unique<EnvoyRateLimitService>(*impl->policies, *impl->blocking);
  builder.RegisterService(impl->envoy.get());
  impl->fleet = std::make_unique<FleetService>(*impl->policies,
                                               std::move(options.fleet_secret));
  builder.RegisterService(impl->fleet.get());
  impl->monitor = std::make_unique<MonitorService>(
      *impl->policies, *impl->leases, std::move(options.monitor_secret),
      options.watch_cancel_check_ms);
  builder.RegisterService(impl->monitor.get());
  // On a shared store each budget's share comes from the fleet's heartbeat
  // step (docs/rlqs.md, "The fleet"); alone, a budget's share is its limit.
  // Also with no rlqs domains yet: a reload may add them.
  std::unique_ptr<ShareSource> shares;
  if (const std::shared_ptr<Coordinator>& store = impl->policies->store();
      store != nullptr) {
    absl::StatusOr<std::unique_ptr<HeartbeatShare>> fleet =
        HeartbeatShare::create(
            {.node_id = impl->policies->node_id(),
             .heartbeat_ms = impl->policies->config().rlqs.fleet_heartbeat_ms},
            store, options.clock);
    if (!fleet.ok()) return fleet.status();
    shares = *std::move(fleet);
  }
  impl->quota = std::make_unique<QuotaDoor>(impl->policies->config().rlqs,
                                            options.clock, std::move(shares));
  impl->rlqs = std::make_unique<RlqsService>(*impl->quota);
  builder.RegisterService(impl->rlqs.get());
  impl->grpc_server = builder.BuildAndStart();
  if (impl->grpc_server == nullptr || impl->port == 0) {
    return absl::UnavailableError(absl::StrCat(
        "server: cannot listen on ", options.listen,
        tls ? " with the TLS certificate and key given (are they PEM, and "
              "does the key belong to the certificate?)"
            : ""));
  }
  // The health service says NOT_SERVING until the shared store is ready:
  // its connections open in the background (docs/server.md, "Health"), so
  // a load balancer sends nothing before the first call can be answered.
  if (const std::shared_ptr<Coordinator>& store = impl->policies->store();
      store != nullptr) {
    grpc::HealthCheckServiceInterface* health =
        impl->grpc_server->GetHealthCheckService();
    health->SetServingStatus(false);
    impl->readiness = std::make_unique<ThreadBeatScheduler>();
    Impl* self = impl.get();
    impl->readiness->start([self, health, store]() -> int64_t {
      if (self->store_ready.load(std::memory_order_acquire)) return 60'000;
      if (!store->wait_ready(absl::Now()).ok()) return 10;
      self->store_ready.store(true, std::memory_order_release);
      health->SetServingStatus(true);
      return 60'000;
    });
  } else {
    impl->store_ready.store(true, std::memory_order_release);
  }
  if (options.reaper) {
    // Expired slots are reclaimed within a quarter of the lease TTL (at
    // most a second late).
    SlotLeases* leases = impl->leases.get();
    const int64_t period_ms =
        std::clamp<int64_t>(leases->ttl_ms() / 4, 5, 1000);
    impl->reaper = std::make_unique<ThreadBeatScheduler>();
    impl->reaper->start([leases, period_ms] {
      leases->reclaim_expired();
      return period_ms;
    });
  }
  return std::unique_ptr<Server>(new Server(std::move(impl)));
}

Server::~Server() { shutdown(); }

int Server::port() const { return impl_->port; }

void Server::shutdown() {
  if (impl_->shut_down.exchange(true)) return;
  if (impl_->reaper != nullptr) impl_->reaper->stop();
  if (impl_->readiness != nullptr) impl_->readiness->stop();
  impl_->monitor->stop();  // Watch streams end, so Shutdown need not wait
  impl_->quota->stop();    // so do the quota streams
  impl_->grpc_server->Shutdown();
  // Credits federated limiters hold go back to their windows.
  impl_->policies->close().IgnoreError();
}

void Server::wait() { impl_->grpc_server->Wait(); }

bool Server::healthy() {
  const std::shared_ptr<Coordinator>& store = impl_->policies->store();
  return store == nullptr || store->ping().ok();
}

bool Server::store_ready() const {
  return impl_->store_ready.load(std::memory_order_acquire);
}

std::string Server::prometheus_text() {
  std::string out;
  const auto family = [&](std::string_view name, std::string_view type,
                          std::string_view help) {
    append_family(out, name, type, help);
  };
  struct Row {
    std::string label;
    PolicyMetrics::Snapshot m;
    const Policy* p;
  };
  std::vector<Row> rows;
  for (const Policy* p : impl_->policies->all()) {
    rows.push_back({prometheus_label(p->name), p->metrics->snapshot(), p});
  }
  family("throttlekit_checks_total", "counter",
         "Decisions made, by policy and outcome.");
  for (const Row& r : rows) {
    absl::StrAppend(&out, "throttlekit_checks_total{policy=\"", r.label,
                    "\",allowed=\"true\"} ", r.m.allowed, "\n",
                    "throttlekit_checks_total{policy=\"", r.label,
                    "\",allowed=\"false\"} ", r.m.denied, "\n");
  }
  family("throttlekit_denies_by_axis_total", "counter",
         "Admission denials by the binding axis (lane).");
  for (const Row& r : rows) {
    if (r.p->admission == nullptr) continue;
    for (size_t i = 0; i < PolicyMetrics::kLanes.size(); ++i) {
      absl::StrAppend(&out, "throttlekit_denies_by_axis_total{policy=\"",
                      r.label, "\",lane=\"", sv(PolicyMetrics::kLanes[i]),
                      "\"} ", r.m.denied_by_lane[i], "\n");
    }
  }
  family("throttlekit_limit", "gauge",
         "The ceiling the policy's last decision reported.");
  for (const Row& r : rows) {
    absl::StrAppend(&out, "throttlekit_limit{policy=\"", r.label, "\"} ",
                    r.m.limit, "\n");
  }
  family("throttlekit_decision_latency_seconds", "summary",
         "Time to decide (the engine's call), p50 and p99.");
  for (const Row& r : rows) {
    const auto& l = r.m.latency;
    absl::StrAppend(&out, "throttlekit_decision_latency_seconds{policy=\"",
                    r.label, "\",quantile=\"0.5\"} ", l.p50_ms / 1e3, "\n",
                    "throttlekit_decision_latency_seconds{policy=\"", r.label,
                    "\",quantile=\"0.99\"} ", l.p99_ms / 1e3, "\n",
                    "throttlekit_decision_latency_seconds_sum{policy=\"",
                    r.label, "\"} ", l.avg_ms * static_cast<double>(l.n) / 1e3,
                    "\n",
                    "throttlekit_decision_latency_seconds_count{policy=\"",
                    r.label, "\"} ", l.n, "\n");
  }
  family("throttlekit_concurrency_limit", "gauge",
         "An admission's in-flight ceiling in force (observed ceiling).");
  for (const Row& r : rows) {
    if (r.p->admission == nullptr || r.p->admission->concurrency() == nullptr) {
      continue;
    }
    absl::StrAppend(
        &out, "throttlekit_concurrency_limit{policy=\"", r.label, "\"} ",
        r.p->admission->concurrency()->stats().effective_limit, "\n");
  }
  family("throttlekit_concurrency_inflight", "gauge",
         "An admission's requests in flight.");
  for (const Row& r : rows) {
    if (r.p->admission == nullptr || r.p->admission->concurrency() == nullptr) {
      continue;
    }
    absl::StrAppend(&out, "throttlekit_concurrency_inflight{policy=\"", r.label,
                    "\"} ", r.p->admission->concurrency()->stats().inflight,
                    "\n");
  }
  // Distributed concurrency: one stats read per policy for four gauges.
  struct Fleet {
    const std::string* label;
    DistributedConcurrencyStats stats;
  };
  std::vector<Fleet> fleets;
  for (const Row& r : rows) {
    if (r.p->distributed != nullptr) {
      fleets.push_back({&r.label, r.p->distributed->stats()});
    }
  }
  if (!fleets.empty()) {
    const auto gauge = [&](std::string_view name, std::string_view help,
                           auto value) {
      family(name, "gauge", help);
      for (const Fleet& f : fleets) {
        absl::StrAppend(&out, sv(name), "{policy=\"", *f.label, "\"} ",
                        value(f.stats), "\n");
      }
    };
    gauge("throttlekit_concurrency_share",
          "Distributed concurrency: this server's share of the fleet ceiling.",
          [](const DistributedConcurrencyStats& d) { return d.share; });
    gauge("throttlekit_concurrency_global_limit",
          "Distributed concurrency: the fleet ceiling at the last beat.",
          [](const DistributedConcurrencyStats& d) { return d.global_limit; });
    gauge("throttlekit_concurrency_nodes",
          "Distributed concurrency: live servers at the last beat.",
          [](const DistributedConcurrencyStats& d) { return d.live_nodes; });
    gauge(
        "throttlekit_concurrency_fenced",
        "Distributed concurrency: 1 while this server has fenced itself.",
        [](const DistributedConcurrencyStats& d) { return d.fenced ? 1 : 0; });
    gauge(
        "throttlekit_concurrency_outage",
        "Distributed concurrency: 1 while this server holds no valid lease.",
        [](const DistributedConcurrencyStats& d) { return d.outage ? 1 : 0; });
  }
  family("throttlekit_slots_held", "gauge",
         "Admit slots held under a lease id.");
  absl::StrAppend(&out, "throttlekit_slots_held ", impl_->leases->held(), "\n");
  family("throttlekit_slots_reclaimed_total", "counter",
         "Admit slots reclaimed at expiry (their client stopped renewing).");
  absl::StrAppend(&out, "throttlekit_slots_reclaimed_total ",
                  impl_->leases->reclaimed_total(), "\n");
  family("throttlekit_store_up", "gauge",
         "1 when the store answers a ping (always on the embedded store).");
  absl::StrAppend(&out, "throttlekit_store_up ", healthy() ? 1 : 0, "\n");
  if (const std::shared_ptr<EnvoyLimits> envoy = impl_->policies->envoy();
      envoy != nullptr) {
    envoy->append_prometheus(out);
  }
  impl_->quota->append_prometheus(out);
  family("throttlekit_envoy_reloads_total", "counter",
         "Envoy door: configuration reloads by result (applied, refused: the "
         "domains in force stayed).");
  absl::StrAppend(&out, "throttlekit_envoy_reloads_total{result=\"applied\"} ",
                  impl_->policies->envoy_reloads(), "\n",
                  "throttlekit_envoy_reloads_total{result=\"refused\"} ",
                  impl_->policies->envoy_reload_errors(), "\n");
  return out;
}

Policies& Server::policies() { return *impl_->policies; }
SlotLeases& Server::leases() { return *impl_->leases; }

QuotaDoor& Server::quota_door() { return *impl_->quota; }

size_t Server::blocking_pool_threads() const {
  return impl_->blocking->threads();
}

}  // namespace throttlekit::server
