// src/server/http_door.h
//
// Provides `HttpDoor`: throttlekit-server's HTTP endpoints on a loopback
// port (cpp-httplib): `GET /metrics`, the Prometheus text exposition
// (`Server::prometheus_text`), and `GET /healthz`, 200 `ok` while the store
// answers, else 503 naming it (docs/server.md, "Metrics").
//
// Loopback only: the host must be 127.0.0.1, ::1 or localhost (metrics name
// policies; expose them through a proxy if needed). Thread-safety: `port`
// is safe to call concurrently; the destructor stops and joins the server.

#ifndef THROTTLEKIT_SRC_SERVER_HTTP_DOOR_H_
#define THROTTLEKIT_SRC_SERVER_HTTP_DOOR_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "server.h"

namespace throttlekit::server {

class HttpDoor {
 public:
  // Listens on host:port (port 0 picks) and serves `server`'s metrics and
  // health until destroyed; `server` must outlive it. kInvalidArgument for
  // a host off loopback, kUnavailable when it cannot bind.
  static absl::StatusOr<std::unique_ptr<HttpDoor>> start(
      const std::string& host, int port, Server& server);
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
