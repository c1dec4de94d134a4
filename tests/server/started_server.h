// tests/server/started_server.h
//
// Provides `start_server(config)`: a throttlekit-server of `config` on the
// embedded store (or `store`, with `context`: a node id), on the real
// clock, listening on a free loopback port; null, with the reason as a
// test failure, when it cannot start.

#ifndef THROTTLEKIT_TESTS_SERVER_STARTED_SERVER_H_
#define THROTTLEKIT_TESTS_SERVER_STARTED_SERVER_H_

#include <gtest/gtest.h>

#include <memory>
#include <utility>

#include "config.h"
#include "policies.h"
#include "server.h"

namespace throttlekit::testing {

inline std::unique_ptr<server::Server> start_server(
    const server::ServerConfig& config,
    std::shared_ptr<Coordinator> store = nullptr,
    server::PolicyContext context = {}) {
  auto policies = server::Policies::create(config, std::move(store), {},
                                           std::move(context));
  EXPECT_TRUE(policies.ok()) << policies.status();
  if (!policies.ok()) return nullptr;
  auto server =
      server::Server::start(*std::move(policies), {.listen = "127.0.0.1:0"});
  EXPECT_TRUE(server.ok()) << server.status();
  return server.ok() ? *std::move(server) : nullptr;
}

}  // namespace throttlekit::testing

#endif  // THROTTLEKIT_TESTS_SERVER_STARTED_SERVER_H_
