// The Envoy door (docs/envoy.md) over a shared store: Redis or Postgres,
// named by the ctest entry (support/shared_store.h), the real server the
// ctest fixture started. Two throttlekit-servers on one
// store, clients spread across both on the real clock, hold each
// descriptor's limit per window: a strict limit (one round trip per
// descriptor), a leased one (one round trip per batch, window-coupled) and
// a federated one (the two servers in two regions).
// On Redis, a store that dies is answered by the configured fail policy.

#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "blocking_pool.h"
#include "config.h"
#include "envoy/service/ratelimit/v3/rls.grpc.pb.h"
#include "envoy_rls.h"
#include "gtest/gtest.h"
#include "policies.h"
#include "server.h"
#include "support/envoy_request.h"
#include "support/forked_fleet.h"
#include "support/manual_clock_server.h"
#include "support/pg_test_env.h"
#include "support/redis_test_server.h"
#include "support/shared_store.h"
#include "throttlekit/redis/redis_coordinator.h"

namespace throttlekit::server {
namespace envoy_store_test {
namespace {

namespace rls = ::envoy::service::ratelimit::v3;
using R = rls::RateLimitResponse;

std::shared_ptr<Coordinator> store() {
  if (testing::on_redis()) return testing::redis_coordinator();
  static const std::string table = testing::unique_table("envoy_store");
  return testing::make_pg(testing::pg_options(table));
}

// Descriptor values unique to this run (the store outlives it).
std::string fresh(const std::string& stem) {
  static const int64_t run = testing::wall_ms();
  return absl::StrCat(stem, "-", getpid(), "-", run);
}

struct Door {
  std::unique_ptr<Server> server;
  std::unique_ptr<rls::RateLimitService::Stub> stub;
};

Door serve(const std::string& yaml, std::shared_ptr<Coordinator> coordinator) {
  absl::StatusOr<ServerConfig> config = parse_config(yaml, "envoy.yaml");
  EXPECT_TRUE(config.ok()) << config.status();
  auto policies = Policies::create(*config, std::move(coordinator));
  EXPECT_TRUE(policies.ok()) << policies.status();
  auto server = Server::start(*std::move(policies), {.listen = "127.0.0.1:0"});
  EXPECT_TRUE(server.ok()) << server.status();
  Door d;
  d.server = *std::move(server);
  d.stub = rls::RateLimitService::NewStub(
      testing::loopback_channel(d.server->port()));
  return d;
}

constexpr int64_t kUserLimit = 40;   // strict, per second
constexpr int64_t kRouteLimit = 60;  // leased, per second
constexpr int64_t kRouteBatch = 6;
constexpr int64_t kTenantLimit = 50;  // federated, per second
constexpr int64_t kTenantBatch = 5;

// The fleet's configuration for a server in `region` (the federated
// limit's region; the rest is the same everywhere).
std::string fleet_yaml(const std::string& region) {
  return absl::StrCat(R"(
version: 1
envoy:
  domains:
    - domain: fleet
      descriptors:
        - key: user
          rate_limit: {unit: second, requests_per_unit: 40}
        - key: route
          rate_limit: {unit: second, requests_per_unit: 60,
                       leased: {batch: 6}}
        - key: tenant
          rate_limit: {unit: second, requests_per_unit: 50,
                       federated: {region: )",
                      region, R"(, batch: 5}}
)");
}

// Two servers on one store, in two regions; 6 clients, each alternating
// between them, send three descriptors (strict, leased, federated) for 6
// windows of a second. Each descriptor's OK is
// counted in the window its status names (the server's now plus
// duration_until_reset is the window's end, on the second; the client
// brackets the server's now between sending and receiving, which names
// the second exactly for any answer faster than a second): per window at
// most the limit, and in
// every window where demand exceeded the limit at least the limit (strict)
// or the limit less what two servers can strand (under a batch each:
// leased, and federated across the two regions).
TEST(EnvoyStore, TwoServersHoldEachDescriptorsLimitPerWindow) {
  Door a = serve(fleet_yaml("eu-west"), store());
  // Its own connections to the same store, in another region.
  Door b = serve(fleet_yaml("us-east"), store());
  const rls::RateLimitRequest req = testing::rls_request(
      "fleet", {testing::rls_descriptor({{"user", fresh("ann")}}),
                testing::rls_descriptor({{"route", fresh("/cart")}}),
                testing::rls_descriptor({{"tenant", fresh("acme")}})});
  struct Window {
    int64_t asked = 0;
    int64_t user_ok = 0;
    int64_t route_ok = 0;
    int64_t tenant_ok = 0;
  };
  std::mutex mu;
  std::map<int64_t, Window> windows;
  int64_t failed = 0;
  std::string first_failure;  // the first failed answer, for the report
  int64_t unattributed = 0;   // answers that took a second or more
  int64_t slowest_ms = 0;
  const int64_t end = testing::wall_ms() + 6'000;
  std::vector<std::thread> clients;
  for (int c = 0; c < 6; ++c) {
    clients.emplace_back([&, c] {
      int i = c;
      while (testing::wall_ms() < end) {
        R resp;
        grpc::ClientContext ctx;
        const int64_t sent = testing::wall_ms();
        const grpc::Status s = ((i++ % 2 == 0) ? a.stub : b.stub)
                                   ->ShouldRateLimit(&ctx, req, &resp);
        const int64_t received = testing::wall_ms();
        std::lock_guard lock(mu);
        slowest_ms = std::max(slowest_ms, received - sent);
        if (!s.ok() || resp.statuses_size() != 3) {
          if (failed++ == 0) {
            first_failure =
                absl::StrCat("status ", static_cast<int>(s.error_code()), " \"",
                             s.error_message(), "\", ", resp.statuses_size(),
                             " statuses, after ", received - sent, " ms");
          }
          continue;
        }
        // The server read its clock once, at some t in [sent, received],
        // and the window's end is t + duration_until_reset, a whole second:
        // the one whole second in [sent + d, received + d] (the RPC took
        // under a second), or -1 when that is not one.
        const auto window_of = [&](const R::DescriptorStatus& st) -> int64_t {
          const int64_t d = st.duration_until_reset().seconds() * 1000 +
                            st.duration_until_reset().nanos() / 1'000'000;
          const int64_t first = (sent + d + 999) / 1000 * 1000;
          return first <= received + d && first + 1000 > received + d ? first
                                                                      : -1;
        };
        const R::DescriptorStatus& user = resp.statuses(0);
        const R::DescriptorStatus& route = resp.statuses(1);
        const R::DescriptorStatus& tenant = resp.statuses(2);
        const int64_t uw = window_of(user);
        const int64_t rw = window_of(route);
        const int64_t tw = window_of(tenant);
        if (uw < 0 || rw < 0 || tw < 0) {
          ++unattributed;
          continue;
        }
        ++windows[uw].asked;
        windows[uw].user_ok += user.code() == R::OK ? 1 : 0;
        windows[rw].route_ok += route.code() == R::OK ? 1 : 0;
        windows[tw].tenant_ok += tenant.code() == R::OK ? 1 : 0;
      }
    });
  }
  for (std::thread& t : clients) t.join();
  EXPECT_EQ(failed, 0) << "the first: " << first_failure;
  int64_t attributed = 0;
  for (const auto& [window_end, w] : windows) attributed += w.asked;
  // A window missing answers is judged on fewer: never over its limit.
  EXPECT_LE(unattributed * 20, attributed)
      << "answers slower than 1 s; the slowest took " << slowest_ms << " ms";
  ASSERT_GE(windows.size(), 5u);
  int64_t full = 0;
  for (const auto& [window_end, w] : windows) {
    EXPECT_LE(w.user_ok, kUserLimit) << "window ending " << window_end;
    EXPECT_LE(w.route_ok, kRouteLimit) << "window ending " << window_end;
    EXPECT_LE(w.tenant_ok, kTenantLimit) << "window ending " << window_end;
    // The first and last windows are partly outside the run.
    if (window_end <= windows.begin()->first ||
        window_end >= windows.rbegin()->first) {
      continue;
    }
    if (w.asked >= 2 * kRouteLimit) {
      ++full;
      EXPECT_EQ(w.user_ok, kUserLimit) << "window ending " << window_end;
      EXPECT_GE(w.route_ok, kRouteLimit - 2 * kRouteBatch)
          << "window ending " << window_end;
      EXPECT_GE(w.tenant_ok, kTenantLimit - 2 * kTenantBatch)
          << "window ending " << window_end;
    }
  }
  EXPECT_GE(full, 3) << "demand exceeded the limits in too few windows";
  EXPECT_TRUE(a.server->policies().close().ok());
  EXPECT_TRUE(b.server->policies().close().ok());
}

// The door's limits for `yaml` over `coordinator` (null: memory).
std::shared_ptr<EnvoyLimits> limits_of(const std::string& yaml,
                                       std::shared_ptr<Coordinator> coordinator,
                                       std::unique_ptr<Policies>& keep) {
  absl::StatusOr<ServerConfig> config = parse_config(yaml, "envoy.yaml");
  EXPECT_TRUE(config.ok()) << config.status();
  auto policies = Policies::create(*config, std::move(coordinator));
  EXPECT_TRUE(policies.ok()) << policies.status();
  keep = *std::move(policies);
  return keep->envoy();
}

constexpr char kDaily[] = R"(
version: 1
envoy:
  domains:
    - domain: daily
      descriptors:
        - key: user
          rate_limit: {unit: day, requests_per_unit: 50}
        - key: route
          rate_limit: {unit: day, requests_per_unit: 30}
)";

// The asynchronous path (the server's ShouldRateLimit) against the
// blocking one over the shared store: 100 requests of two descriptors
// (limits 50 and 30 a day), sent from one thread all at once on the
// asynchronous path and one at a time on the blocking path, each in a key
// space of its own. Each completion runs exactly once; each path admits
// exactly each limit, and its remaining counts are the same multiset (the
// order in which a store applies requests in flight together is its own).
// A peek (descriptor hits_addend 0) runs on the blocking pool and counts
// nothing.
TEST(EnvoyStore, TheAsynchronousPathAnswersAsTheBlockingOne) {
  // Not across midnight UTC, where the daily windows roll.
  while (testing::wall_ms() % 86'400'000 > 86'400'000 - 15'000) {
    std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  std::unique_ptr<Policies> keep;
  std::shared_ptr<EnvoyLimits> limits = limits_of(kDaily, store(), keep);
  ASSERT_NE(limits, nullptr);
  BlockingPool pool(4);
  constexpr int kRequests = 100;
  const auto request = [](const std::string& space) {
    return testing::rls_request(
        "daily", {testing::rls_descriptor({{"user", space + "-u"}}),
                  testing::rls_descriptor({{"route", space + "-r"}})});
  };
  struct Tally {
    std::multiset<uint32_t> remaining[2];
    int ok[2] = {0, 0};
    void add(const R& r) {
      ASSERT_EQ(r.statuses_size(), 2);
      for (int d = 0; d < 2; ++d) {
        remaining[d].insert(r.statuses(d).limit_remaining());
        if (r.statuses(d).code() == R::OK) ++ok[d];
      }
    }
  };

  const rls::RateLimitRequest async_request = request(fresh("async"));
  std::vector<R> responses(kRequests);
  std::vector<std::atomic<int>> calls(kRequests);
  std::vector<absl::Status> statuses(kRequests);
  std::atomic<int> finished{0};
  for (int i = 0; i < kRequests; ++i) {
    limits->should_rate_limit_async(async_request, &responses[i], pool,
                                    [&, i](absl::Status s) {
                                      statuses[i] = std::move(s);
                                      calls[i].fetch_add(1);
                                      finished.fetch_add(1);
                                    });
  }
  const int64_t deadline = testing::wall_ms() + 20'000;
  while (finished.load() < kRequests && testing::wall_ms() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_EQ(finished.load(), kRequests) << "completions missing";
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  Tally async_tally;
  for (int i = 0; i < kRequests; ++i) {
    EXPECT_EQ(calls[i].load(), 1) << "request " << i;
    ASSERT_TRUE(statuses[i].ok()) << statuses[i];
    async_tally.add(responses[i]);
  }

  const rls::RateLimitRequest blocking_request = request(fresh("blocking"));
  Tally blocking_tally;
  for (int i = 0; i < kRequests; ++i) {
    R r;
    ASSERT_TRUE(limits->should_rate_limit(blocking_request, &r).ok());
    blocking_tally.add(r);
  }
  EXPECT_EQ(async_tally.ok[0], 50);
  EXPECT_EQ(async_tally.ok[1], 30);
  EXPECT_EQ(blocking_tally.ok[0], 50);
  EXPECT_EQ(blocking_tally.ok[1], 30);
  EXPECT_EQ(async_tally.remaining[0], blocking_tally.remaining[0]);
  EXPECT_EQ(async_tally.remaining[1], blocking_tally.remaining[1]);

  // A peek through the pool: it answers, once, and counts nothing.
  const std::string peeked = fresh("peek");
  rls::RateLimitRequest peek = request(peeked);
  peek.mutable_descriptors(0)->mutable_hits_addend()->set_value(0);
  R first;
  ASSERT_TRUE(limits->should_rate_limit(request(peeked), &first).ok());
  std::atomic<int> peek_calls{0};
  R answer;
  absl::Status peek_status;
  limits->should_rate_limit_async(peek, &answer, pool, [&](absl::Status s) {
    peek_status = std::move(s);
    peek_calls.fetch_add(1);
  });
  const int64_t peek_deadline = testing::wall_ms() + 10'000;
  while (peek_calls.load() == 0 && testing::wall_ms() < peek_deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  ASSERT_EQ(peek_calls.load(), 1);
  ASSERT_TRUE(peek_status.ok()) << peek_status;
  EXPECT_EQ(answer.statuses(0).code(), R::OK);
  EXPECT_EQ(answer.statuses(1).limit_remaining(), 28u);  // counted
  // The peeked descriptor counted nothing: after one more request its
  // limit has counted two hits, the other descriptor's three.
  R after;
  ASSERT_TRUE(limits->should_rate_limit(request(peeked), &after).ok());
  EXPECT_EQ(after.statuses(0).limit_remaining(), 48u);
  EXPECT_EQ(after.statuses(1).limit_remaining(), 27u);
}

// On the embedded memory store nothing waits: the answer is complete
// before `should_rate_limit_async` returns.
TEST(EnvoyStore, InMemoryTheAsynchronousPathCompletesInline) {
  std::unique_ptr<Policies> keep;
  std::shared_ptr<EnvoyLimits> limits = limits_of(kDaily, nullptr, keep);
  ASSERT_NE(limits, nullptr);
  BlockingPool pool(1);
  R answer;
  bool done = false;
  limits->should_rate_limit_async(
      testing::rls_request("daily",
                           {testing::rls_descriptor({{"user", "inline"}})}),
      &answer, pool, [&](absl::Status s) {
        EXPECT_TRUE(s.ok()) << s;
        done = true;
      });
  EXPECT_TRUE(done);
  EXPECT_EQ(answer.statuses(0).limit_remaining(), 49u);
  // A bad request is refused inline too, naming the problem.
  absl::Status refused;
  limits->should_rate_limit_async(testing::rls_request("daily", {}), &answer,
                                  pool, [&](absl::Status s) { refused = s; });
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.message().find("no descriptors"), std::string::npos);
}

// Only on Redis (the postgres entry filters EnvoyStoreRedis.* out).
// A store that dies is decided by `failPolicy`: `error` answers the store's
// status (UNAVAILABLE or DEADLINE_EXCEEDED, for Envoy's failure_mode_deny),
// `open` OK, `closed` OVER_LIMIT, for strict and leased limits alike; once
// the store is back, counting resumes.
TEST(EnvoyStoreRedis, AStoreOutageFollowsTheFailPolicy) {
  testing::PrivateRedis redis(testing::redis_port() + 61);
  ASSERT_TRUE(redis.start());
  const auto connect = [&] {
    auto c =
        RedisCoordinator::create({.port = redis.port(),
                                  .connect_timeout = absl::Milliseconds(200),
                                  .command_timeout = absl::Milliseconds(200)});
    EXPECT_TRUE(c.ok()) << c.status();
    return std::shared_ptr<Coordinator>(*std::move(c));
  };
  const auto config = [](const char* policy) {
    return absl::StrCat(R"(
version: 1
envoy:
  failPolicy: )",
                        policy, R"(
  domains:
    - domain: fleet
      descriptors:
        - key: user
          rate_limit: {unit: hour, requests_per_unit: 100}
        - key: route
          rate_limit: {unit: hour, requests_per_unit: 100, leased: {batch: 1}}
)");
  };
  Door error = serve(config("error"), connect());
  Door open = serve(config("open"), connect());
  Door closed = serve(config("closed"), connect());
  const auto ask = [](Door& door, const rls::RateLimitRequest& req, R* resp) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() +
                     std::chrono::seconds(5));
    return door.stub->ShouldRateLimit(&ctx, req, resp);
  };
  const rls::RateLimitRequest strict = testing::rls_request(
      "fleet", {testing::rls_descriptor({{"user", fresh("u")}})});
  // Batch 1: every hit of the leased limit needs the store.
  const rls::RateLimitRequest leased = testing::rls_request(
      "fleet", {testing::rls_descriptor({{"route", fresh("/r")}})});
  for (Door* d : {&error, &open, &closed}) {
    for (const rls::RateLimitRequest* req : {&strict, &leased}) {
      R resp;
      const grpc::Status s = ask(*d, *req, &resp);
      ASSERT_TRUE(s.ok()) << s.error_message();
      EXPECT_EQ(resp.overall_code(), R::OK);
    }
  }

  redis.kill();
  for (const rls::RateLimitRequest* req : {&strict, &leased}) {
    R resp;
    const grpc::Status s = ask(error, *req, &resp);
    EXPECT_TRUE(s.error_code() == grpc::StatusCode::UNAVAILABLE ||
                s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED)
        << s.error_code() << ": " << s.error_message();
    R o;
    ASSERT_TRUE(ask(open, *req, &o).ok());
    EXPECT_EQ(o.overall_code(), R::OK);
    EXPECT_EQ(o.statuses(0).code(), R::OK);
    R c;
    ASSERT_TRUE(ask(closed, *req, &c).ok());
    EXPECT_EQ(c.overall_code(), R::OVER_LIMIT);
    EXPECT_EQ(c.statuses(0).code(), R::OVER_LIMIT);
  }

  ASSERT_TRUE(redis.start());
  // The servers reconnect within a few attempts; each counted hit then
  // shows in the strict limit's remaining (100 less the hits so far).
  bool back = false;
  for (int i = 0; i < 100 && !back; ++i) {
    R resp;
    back = ask(error, strict, &resp).ok() &&
           resp.statuses(0).limit_remaining() < 100;
    if (!back) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(back) << "counting did not resume after the store came back";
}

}  // namespace
}  // namespace envoy_store_test
}  // namespace throttlekit::server
