// RedisRegionPool: each step one call of the pool's Lua script
// (lua/region_pool.lua, after the prelude) on a RedisCoordinator's
// connections (see the header and throttlekit/federation/region_pool.h).

#include "throttlekit/federation/redis_region_pool.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "endpoint_check.h"
#include "throttlekit/core/key.h"
#include "throttlekit/core/option_check.h"

namespace throttlekit {

class RedisRegionPool::Impl {
 public:
  Impl(RedisRegionPoolOptions options,
       std::shared_ptr<RedisCoordinator> coordinator)
      : options_(std::move(options)), redis_(std::move(coordinator)) {}

  const RedisRegionPoolOptions& options() const { return options_; }
  RedisCoordinator& redis() const { return *redis_; }

 private:
  const RedisRegionPoolOptions options_;
  const std::shared_ptr<RedisCoordinator> redis_;
};

namespace {

// A coordinator's status as the pool's: its message named as the pool's.
absl::Status pool_status(const absl::Status& s) {
  return absl::Status(s.code(),
                      absl::StrCat("redis_region_pool: ", s.message()));
}

}  // namespace

absl::StatusOr<std::unique_ptr<RedisRegionPool>> RedisRegionPool::create(
    const RedisRegionPoolOptions& o) {
  const auto bad = [](std::string_view field, std::string_view bound,
                      const auto& got) {
    return redis_internal::bad_option("redis_region_pool", field, bound, got);
  };
  if (o.prefix.empty() || o.prefix.size() > 256) {
    return bad("prefix", "1 .. 256 bytes", o.prefix.size());
  }
  if (o.ttl_slack_ms < 0 || o.ttl_slack_ms > kMaxSafeInteger) {
    return bad("ttl_slack_ms", "in [0, 2^53-1]", o.ttl_slack_ms);
  }
  if (o.coordinator != nullptr) {
    const RedisRegionPoolOptions defaults;
    const char* set =
        o.host != defaults.host                         ? "host"
        : o.port != defaults.port                       ? "port"
        : o.username != defaults.username               ? "username"
        : o.password != defaults.password               ? "password"
        : o.database != defaults.database               ? "database"
        : o.connect_timeout != defaults.connect_timeout ? "connect_timeout"
        : o.command_timeout != defaults.command_timeout ? "command_timeout"
                                                        : nullptr;
    if (set != nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          "redis_region_pool.", set,
          " is the coordinator's when redis_region_pool.coordinator is set; "
          "set it there"));
    }
    return std::unique_ptr<RedisRegionPool>(
        new RedisRegionPool(std::make_unique<Impl>(o, o.coordinator)));
  }
  if (absl::Status s = redis_internal::check_endpoint("redis_region_pool", o);
      !s.ok()) {
    return s;
  }
  absl::StatusOr<std::unique_ptr<RedisCoordinator>> redis =
      RedisCoordinator::create({.host = o.host,
                                .port = o.port,
                                .username = o.username,
                                .password = o.password,
                                .database = o.database,
                                .connect_timeout = o.connect_timeout,
                                .command_timeout = o.command_timeout});
  if (!redis.ok()) return pool_status(redis.status());
  return std::unique_ptr<RedisRegionPool>(
      new RedisRegionPool(std::make_unique<Impl>(
          o, std::shared_ptr<RedisCoordinator>(*std::move(redis)))));
}

RedisRegionPool::RedisRegionPool(std::unique_ptr<Impl> impl)
    : impl_(std::move(impl)) {}
RedisRegionPool::~RedisRegionPool() = default;

std::string_view RedisRegionPool::lua_script() {
  return RedisCoordinator::lua_script("region_pool");
}

const RedisRegionPoolOptions& RedisRegionPool::options() const noexcept {
  return impl_->options();
}

namespace {

// The pool script's KEYS[1] and ARGV (lua/region_pool.lua).
std::vector<std::string> step_argv(const RedisRegionPoolOptions& o,
                                   const LeaseBudget& budget,
                                   std::string_view key,
                                   std::string_view region, int64_t weight,
                                   int64_t want, int64_t now_ms) {
  return {join_key(o.prefix, key),
          std::to_string(now_ms),
          std::to_string(want),
          std::string(region),
          std::to_string(o.ttl_slack_ms),
          std::to_string(budget.limit()),
          std::to_string(budget.window_ms()),
          std::to_string(weight),
          std::to_string(kMaxPoolRegions)};
}

// The script's reply as a grant.
absl::StatusOr<RegionPoolGrant> to_grant(
    const absl::StatusOr<std::vector<int64_t>>& v) {
  if (!v.ok()) return pool_status(v.status());
  if (v->size() != 5) {
    return absl::UnavailableError(
        absl::StrCat("redis_region_pool: the pool script replied with ",
                     v->size(), " values; expected 5"));
  }
  return RegionPoolGrant{(*v)[0], (*v)[1], (*v)[2], (*v)[3], (*v)[4]};
}

}  // namespace

absl::StatusOr<RegionPoolGrant> RedisRegionPool::do_grant(
    const LeaseBudget& budget, std::string_view key, std::string_view region,
    int64_t weight, int64_t want, int64_t now_ms) {
  return to_grant(impl_->redis().region_pool_step(
      step_argv(impl_->options(), budget, key, region, weight, want, now_ms)));
}

void RedisRegionPool::do_grant_async(const LeaseBudget& budget,
                                     std::string_view key,
                                     std::string_view region, int64_t weight,
                                     int64_t want, int64_t now_ms,
                                     Completion<RegionPoolGrant> on_done) {
  impl_->redis().region_pool_step_async(
      step_argv(impl_->options(), budget, key, region, weight, want, now_ms),
      [done =
           std::move(on_done)](absl::StatusOr<std::vector<int64_t>> v) mutable {
        std::move(done)(to_grant(v));
      });
}

absl::StatusOr<RegionPoolState> RedisRegionPool::do_state(
    std::string_view key) {
  absl::StatusOr<std::vector<std::string>> pairs =
      impl_->redis().hash_fields(join_key(impl_->options().prefix, key));
  if (!pairs.ok()) {
    if (absl::IsFailedPrecondition(pairs.status())) {
      return absl::FailedPreconditionError(
          "redis_region_pool: the key holds another layout");
    }
    return pool_status(pairs.status());
  }
  RegionPoolState state;
  if (pairs->size() % 2 != 0) {
    return absl::UnavailableError(
        "redis_region_pool: unexpected reply to the state read");
  }
  bool has_window = false;
  for (size_t i = 0; i < pairs->size(); i += 2) {
    const std::string& field = (*pairs)[i];
    const std::string& text = (*pairs)[i + 1];
    int64_t value = 0;
    if (!absl::SimpleAtoi(text, &value)) {
      return absl::FailedPreconditionError(
          "redis_region_pool: the key holds another layout");
    }
    if (field == "ws") {
      state.window_start_ms = value;
      has_window = true;
    } else if (field.starts_with("w:")) {
      state.regions[field.substr(2)].weight = value;
    } else if (field.starts_with("g:")) {
      state.regions[field.substr(2)].granted = value;
    } else {
      return absl::FailedPreconditionError(absl::StrCat(
          "redis_region_pool: the key holds another layout (field \"", field,
          "\")"));
    }
  }
  if (!pairs->empty() && !has_window) {
    return absl::FailedPreconditionError(
        "redis_region_pool: the key holds another layout (no \"ws\")");
  }
  return state;
}

}  // namespace throttlekit
