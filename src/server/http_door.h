// src/server/http_door.h
//
// Provides `HttpDoor`: throttlekit-server's HTTP endpoints (cpp-httplib):
// the Prometheus text exposition (`Server::prometheus_text`, GET /metrics by
// default), GET /healthz (200 `ok` while the store answers, else 503 naming
// it; docs/server.md, "Metrics") and, for the reference service's
// environment (reference_env.h), GET /healthcheck: 200 `OK` while healthy,
// else 500, as the reference answers it.
//
// `--metrics-listen` opens one on loopback only (metrics name policies;
// expose them through a proxy if needed); the reference environment's doors
// listen where its operator placed them. Thread-safety: `port` is safe to
// call concurrently; the destructor stops and joins the server.

#ifndef THROTTLEKIT_SRC_SERVER_HTTP_DOOR_H_
#define THROTTLEKIT_SRC_SERVER_HTTP_DOOR_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "server.h"

namespace throttlekit::server {

struct HttpDoorOptions {
  // Where to listen (port 0 picks one).
  std::string host = "127.0.0.1";
  int port = 0;
  // The path of the metrics; empty: not served.
  std::string metrics_path = "/metrics";
  // GET /healthz (ours) and GET /healthcheck (the reference's).
  bool healthz = true;
  bool healthcheck = false;
  // Healthy also needs an Envoy configuration in force (the reference's
  // HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED; a server fed over xDS has
  // none until the control plane's first set).
  bool healthy_needs_config = false;
  // Refuses a host off loopback (127.0.0.1, ::1, localhost).
  bool loopback_only = true;
};

class HttpDoor {
 public:
  // Listens and serves `server`'s metrics and health until destroyed;
  // `server` must outlive it. kInvalidArgument for a host off loopback
  // where `loopback_only`, or a metrics path not from /; kUnavailable when
  // it cannot bind.
  static absl::StatusOr<std::unique_ptr<HttpDoor>> start(
      const HttpDoorOptions& options, Server& server);
  ~HttpDoor();
  HttpDoor(const HttpDoor&) = delete;
  HttpDoor& operator=(const HttpDoor&) = delete;

  int port() const;

 private:
  struct Impl;
  explicit HttpDoor(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace throttlekit::server

#endif  // THROTTLEKIT_SRC_SERVER_HTTP_DOOR_H_
