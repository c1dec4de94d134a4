// src/server/forward_auth_door.h
//
// Provides `ForwardAuthDoor`: throttlekit-server's forward-auth endpoint
// (docs/gateways.md) on a port of its own (cpp-httplib). Each configured
// route (forward_auth_config.h) answers a proxy's subrequest, whatever its
// method, from the request's headers: the Envoy door's decision
// (`EnvoyLimits::should_rate_limit`, the same domains and engines as
// `ShouldRateLimit`) turned into 200 or a refusal with its rate-limit
// fields (forward_auth.h). A path no route names is 404. The routes reload
// with the configuration (`routes()`, forward_auth_routes.h).
//
//     auto door = ForwardAuthDoor::start("0.0.0.0", 9090, *server,
//                                        config.forward_auth);
//
// Thread-safety: `port` is safe to call concurrently; the destructor stops
// and joins the server.

#ifndef THROTTLEKIT_SRC_SERVER_FORWARD_AUTH_DOOR_H_
#define THROTTLEKIT_SRC_SERVER_FORWARD_AUTH_DOOR_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "forward_auth_config.h"
#include "forward_auth_routes.h"
#include "server.h"

namespace throttlekit::server {

class ForwardAuthDoor {
 public:
  // Listens on host:port (port 0 picks) and answers `config`'s routes
  // through `server` until destroyed; `server` must outlive it.
  // kInvalidArgument for a configuration without routes, kUnavailable when
  // it cannot bind.
  static absl::StatusOr<std::unique_ptr<ForwardAuthDoor>> start(
      const std::string& host, int port, Server& server,
      ForwardAuthConfig config);
  ~ForwardAuthDoor();
  ForwardAuthDoor(const ForwardAuthDoor&) = delete;
  ForwardAuthDoor& operator=(const ForwardAuthDoor&) = delete;

  int port() const;
  // The routes in force, for a watcher to reload (config_watcher.h).
  ForwardAuthRoutes& routes();

 private:
  struct Impl;
  explicit ForwardAuthDoor(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace throttlekit::server

#endif  // THROTTLEKIT_SRC_SERVER_FORWARD_AUTH_DOOR_H_
