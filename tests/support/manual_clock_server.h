// tests/support/manual_clock_server.h
//
// For the tests of throttlekit-server's doors in process (src/server):
// - `start_manual_clock_server`: a real server of a configuration over a
//   store (null: the embedded store) on a manual clock, listening on a
//   free loopback port, with no reaper (the tests move the clock and
//   reclaim expired slots themselves);
// - `loopback_channel`: a plain channel to a server on a loopback port.
// A configuration or server that fails is a test failure (EXPECT).

#ifndef THROTTLEKIT_TESTS_SUPPORT_MANUAL_CLOCK_SERVER_H_
#define THROTTLEKIT_TESTS_SUPPORT_MANUAL_CLOCK_SERVER_H_

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "config.h"
#include "policies.h"
#include "server.h"
#include "throttlekit/coordinator/coordinator.h"
#include "throttlekit/core/clock.h"

namespace throttlekit::testing {

// `options` other than the address, the clock and the reaper are kept.
inline std::unique_ptr<server::Server> start_manual_clock_server(
    const absl::StatusOr<server::ServerConfig>& config,
    std::shared_ptr<Coordinator> store, ManualClock& clock,
    server::ServerOptions options = {}) {
  EXPECT_TRUE(config.ok()) << config.status();
  auto policies = server::Policies::create(*config, std::move(store),
                                           server::ServerClock{&clock});
  EXPECT_TRUE(policies.ok()) << policies.status();
  options.listen = "127.0.0.1:0";
  options.clock = server::ServerClock{&clock};
  options.reaper = false;
  auto server = server::Server::start(*std::move(policies), std::move(options));
  EXPECT_TRUE(server.ok()) << server.status();
  return *std::move(server);
}

inline std::shared_ptr<grpc::Channel> loopback_channel(int port) {
  return grpc::CreateChannel(absl::StrCat("127.0.0.1:", port),
                             grpc::InsecureChannelCredentials());
}

}  // namespace throttlekit::testing

#endif  // THROTTLEKIT_TESTS_SUPPORT_MANUAL_CLOCK_SERVER_H_
