// RedisCoordinator: hiredis connections shared leader/follower style; the
// leader pipelines everything queued (see the header and docs/redis.md).
// Asynchronous calls queue on the same connections; each connection's I/O
// thread leads when no blocking caller does (docs/async.md). This file
// validates the options and creates the coordinator; the rest lives by
// concept: the scripts (scripts.h), a request and its arguments
// (request.h), the side connections (side_connection.h), the topology
// reads (topology_reads.h), the machinery (coordinator_impl.h) and the
// verbs (verbs.cc).

#include "throttlekit/redis/redis_coordinator.h"

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "coordinator_impl.h"
#include "endpoint_check.h"
#include "throttlekit/core/option_check.h"

namespace throttlekit {

using namespace redis_internal;  // NOLINT: this backend's own internals

namespace {

// `addresses` (the option `field`): at most `most` of them, each
// "host:port".
absl::Status check_addresses(std::string_view field,
                             const std::vector<std::string>& addresses,
                             size_t most) {
  if (addresses.size() > most) {
    return bad_option("redis_coordinator", field,
                      absl::StrCat("at most ", most, " addresses"),
                      addresses.size());
  }
  for (const std::string& address : addresses) {
    if (absl::StatusOr<std::pair<std::string, int>> a =
            parse_node_address(address);
        !a.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "redis_coordinator.", absl::string_view(field.data(), field.size()),
          ": ", a.status().message()));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<RedisCoordinator>> RedisCoordinator::create(
    const RedisCoordinatorOptions& o) {
  const auto bad = [](std::string_view field, std::string_view bound,
                      const auto& got) {
    return bad_option("redis_coordinator", field, bound, got);
  };
  if (absl::Status s = check_endpoint("redis_coordinator", o); !s.ok()) {
    return s;
  }
  if (o.connections < 1 || o.connections > 64) {
    return bad("connections", "in [1, 64]", o.connections);
  }
  if (o.max_pipeline < 1 || o.max_pipeline > 65536) {
    return bad("max_pipeline", "in [1, 65536]", o.max_pipeline);
  }
  if (o.ttl_slack_ms < 0 || o.ttl_slack_ms > kMaxSafeInteger) {
    return bad("ttl_slack_ms", "in [0, 2^53-1]", o.ttl_slack_ms);
  }
  if (absl::Status s = check_addresses("cluster_seeds", o.cluster_seeds, 64);
      !s.ok()) {
    return s;
  }
  if (o.max_redirects < 1 || o.max_redirects > 16) {
    return bad("max_redirects", "in [1, 16]", o.max_redirects);
  }
  if (!o.cluster_seeds.empty() && o.database != 0) {
    return absl::InvalidArgumentError(
        "redis_coordinator.database must be 0 with cluster_seeds (a cluster "
        "has one database)");
  }
  if (!o.cluster_seeds.empty() && !o.sentinels.empty()) {
    return absl::InvalidArgumentError(
        "redis_coordinator.cluster_seeds and sentinels select two "
        "topologies; set one");
  }
  if (absl::Status s = check_addresses("sentinels", o.sentinels, 16); !s.ok()) {
    return s;
  }
  if (!o.sentinels.empty() && o.master_name.empty()) {
    return absl::InvalidArgumentError(
        "redis_coordinator.master_name must name the primary the sentinels "
        "watch");
  }
  if (o.sentinels.empty() && !o.master_name.empty()) {
    return absl::InvalidArgumentError(
        "redis_coordinator.master_name needs sentinels");
  }
  if (!o.sentinel_username.empty() && o.sentinel_password.empty()) {
    return absl::InvalidArgumentError(
        "redis_coordinator.sentinel_username needs a sentinel_password");
  }
  if (o.durable_writes < 0 || o.durable_writes > 16) {
    return bad("durable_writes", "in [0, 16]", o.durable_writes);
  }
  return std::unique_ptr<RedisCoordinator>(
      new RedisCoordinator(std::make_unique<Impl>(o)));
}

RedisCoordinator::RedisCoordinator(std::unique_ptr<Impl> impl)
    : impl_(std::move(impl)) {}
RedisCoordinator::~RedisCoordinator() = default;

std::string_view RedisCoordinator::lua_script(std::string_view name) {
  static constexpr std::string_view kNames[kScriptCount] = {
      Gcra::kName,        TokenBucket::kName,
      FixedWindow::kName, SlidingWindow::kName,
      SlidingLog::kName,  Quota::kName,
      TokenBudget::kName, "lease",
      "give_back",        "state",
      "heartbeat",        "fed_lease",
      "fed_reconcile",    "escrow",
      "region_pool",      "fused"};
  for (int i = 0; i < kScriptCount; ++i) {
    if (kNames[i] == name) return script_texts()[i];
  }
  return {};
}

BackendStats RedisCoordinator::stats() const { return impl_->stats(); }

std::vector<RedisNodeStats> RedisCoordinator::node_stats() const {
  return impl_->node_stats();
}

}  // namespace throttlekit
