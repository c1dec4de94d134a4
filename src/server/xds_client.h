// src/server/xds_client.h
//
// Provides `XdsClient`: throttlekit-server as an xDS client of a control
// plane (Envoy Gateway's, docs/gateways.md), for its Envoy domains. It
// holds one aggregated discovery stream
// (`envoy.service.discovery.v3.AggregatedDiscoveryService/
// StreamAggregatedResources`, state of the world) with a wildcard
// subscription to `RateLimitConfig` resources, and applies each pushed set
// whole through the path a file reload takes (`Policies::reload_envoy`:
// engines and counts carried over where a limit is unchanged), keeping the
// server's `envoy:` block's other settings (headers, unknownDomain,
// failPolicy). A set that applies is ACKed with its version; one that does
// not (xds_config.h, or the store cannot serve it) is NACKed with the
// reason and the last good set stays. A broken stream is opened again
// after a backoff (100 ms doubling to 10 s, reset by an answered request);
// until the first set arrives the server serves what it started with (with
// no file domains, ShouldRateLimit answers UNAVAILABLE naming the wait;
// `Policies::feed_envoy_from_control_plane`).
//
//     auto xds = XdsClient::start({.server = "cp:18000", .node_id = "rl-0"},
//                                 server->policies());
//
// Thread-safety: the accessors are safe to call concurrently; the
// destructor stops the stream and joins its thread.

#ifndef THROTTLEKIT_SRC_SERVER_XDS_CLIENT_H_
#define THROTTLEKIT_SRC_SERVER_XDS_CLIENT_H_

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "policies.h"
#include "throttlekit/core/mutex.h"

namespace throttlekit::server {

struct XdsClientOptions {
  // The control plane, HOST:PORT.
  std::string server;
  // This server's node id and, optionally, cluster.
  std::string node_id;
  std::string node_cluster;
  // Null: plaintext.
  std::shared_ptr<grpc::ChannelCredentials> credentials;
  int64_t initial_backoff_ms = 100;
  int64_t max_backoff_ms = 10'000;
};

class XdsClient {
 public:
  // Starts the stream's thread. kInvalidArgument for an empty server or
  // node id, or a backoff out of [1 ms, 1 h].
  static absl::StatusOr<std::unique_ptr<XdsClient>> start(
      XdsClientOptions options, Policies& policies);
  ~XdsClient();
  XdsClient(const XdsClient&) = delete;
  XdsClient& operator=(const XdsClient&) = delete;

  // The version of the last set applied ("" before the first).
  std::string version();
  // Sets ACKed and NACKed, streams opened, since start.
  int64_t acks() const { return acks_.load(std::memory_order_relaxed); }
  int64_t nacks() const { return nacks_.load(std::memory_order_relaxed); }
  int64_t streams() const { return streams_.load(std::memory_order_relaxed); }

 private:
  XdsClient(XdsClientOptions options, Policies& policies);
  void run();
  // One stream, until it ends or the client stops.
  void stream_once(const std::shared_ptr<grpc::Channel>& channel);

  const XdsClientOptions options_;
  Policies& policies_;

  Mutex mu_;
  std::condition_variable cv_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  // The stream in progress, to cancel on stop.
  grpc::ClientContext* context_ ABSL_GUARDED_BY(mu_) = nullptr;
  std::string version_ ABSL_GUARDED_BY(mu_);

  std::atomic<int64_t> acks_{0};
  std::atomic<int64_t> nacks_{0};
  std::atomic<int64_t> streams_{0};
  std::thread thread_;
};

}  // namespace throttlekit::server

#endif  // THROTTLEKIT_SRC_SERVER_XDS_CLIENT_H_
