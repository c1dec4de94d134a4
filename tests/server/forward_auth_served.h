// tests/server/forward_auth_served.h
//
// Provides `ServedDoor`: a throttlekit-server of a configuration on the
// embedded store with its forward-auth door (src/server/forward_auth_door.h)
// on a free loopback port, for the door's tests; the door stops before the
// server.

#ifndef THROTTLEKIT_TESTS_SERVER_FORWARD_AUTH_SERVED_H_
#define THROTTLEKIT_TESTS_SERVER_FORWARD_AUTH_SERVED_H_

#include <gtest/gtest.h>

#include <memory>
#include <utility>

#include "config.h"
#include "forward_auth_door.h"
#include "server.h"
#include "started_server.h"

namespace throttlekit::testing {

struct ServedDoor {
  ~ServedDoor() {
    door.reset();
    if (server != nullptr) server->shutdown();
  }
  // Starts both; false (with the reason as a test failure) if either fails.
  bool start(const server::ServerConfig& config) {
    server = start_server(config);
    if (server == nullptr) return false;
    auto d = server::ForwardAuthDoor::start("127.0.0.1", 0, *server,
                                            config.forward_auth);
    EXPECT_TRUE(d.ok()) << d.status();
    if (!d.ok()) return false;
    door = *std::move(d);
    return true;
  }

  std::unique_ptr<server::Server> server;
  std::unique_ptr<server::ForwardAuthDoor> door;
};

}  // namespace throttlekit::testing

#endif  // THROTTLEKIT_TESTS_SERVER_FORWARD_AUTH_SERVED_H_
