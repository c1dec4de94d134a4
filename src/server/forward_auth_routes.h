// src/server/forward_auth_routes.h
//
// Provides `ForwardAuthRoutes`: the forward-auth door's routes in force
// (forward_auth_config.h), swapped whole when the configuration reloads
// (config_watcher.h): a request decides on the routes it loaded (one
// atomic load), and a reload waits for no request.
//
// Thread-safety: every member is safe to call concurrently.

#ifndef THROTTLEKIT_SRC_SERVER_FORWARD_AUTH_ROUTES_H_
#define THROTTLEKIT_SRC_SERVER_FORWARD_AUTH_ROUTES_H_

#include <atomic>
#include <memory>
#include <utility>

#include "absl/status/status.h"
#include "forward_auth_config.h"

namespace throttlekit::server {

class ForwardAuthRoutes {
 public:
  explicit ForwardAuthRoutes(ForwardAuthConfig config)
      : config_(std::make_shared<const ForwardAuthConfig>(std::move(config))) {}

  // The routes in force; the caller's copy stays valid across a reload.
  std::shared_ptr<const ForwardAuthConfig> get() const {
    return config_.load(std::memory_order_acquire);
  }

  // Whether `next` can replace the routes: kInvalidArgument when it has
  // none (the door is open and needs some; removing the `forwardAuth:`
  // block takes a restart).
  static absl::Status check(const ForwardAuthConfig& next) {
    if (next.routes.empty()) {
      return absl::InvalidArgumentError(
          "forwardAuth: the forward-auth door is open and needs routes (a "
          "restart without --forward-auth-listen closes it)");
    }
    return absl::OkStatus();
  }

  // Puts `next` in force (after `check`).
  void reload(ForwardAuthConfig next) {
    config_.store(std::make_shared<const ForwardAuthConfig>(std::move(next)),
                  std::memory_order_release);
  }

 private:
  std::atomic<std::shared_ptr<const ForwardAuthConfig>> config_;
};

}  // namespace throttlekit::server

#endif  // THROTTLEKIT_SRC_SERVER_FORWARD_AUTH_ROUTES_H_
