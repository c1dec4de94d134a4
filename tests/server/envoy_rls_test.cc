// Envoy's global rate-limit service on throttlekit-server
// (src/server/envoy_rls.h, docs/envoy.md): a real gRPC server on loopback
// over the embedded memory store on a manual clock, and a real
// `envoy.service.ratelimit.v3.RateLimitService` client stub. The reference
// service's documented matching examples (nested descriptors, exact values,
// patterns and value-less keys, shared patterns, depth, unlimited, shadow
// mode, replaces), hits_addend per request and per descriptor, limit
// overrides, windows aligned to the unit, another strategy backing a
// descriptor, the headers in each form, every response field, the
// decisions equal to the library's engines over a random timeline, and bad
// requests refused with their status having counted nothing.

#include "envoy_rls.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "config.h"
#include "config_watcher.h"
#include "envoy/service/ratelimit/v3/rls.grpc.pb.h"
#include "google/protobuf/text_format.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "policies.h"
#include "server.h"
#include "support/envoy_request.h"
#include "support/manual_clock_server.h"
#include "support/script_entries.h"
#include "support/test_time.h"
#include "throttlekit/coordinator/memory_coordinator.h"
#include "throttlekit/store/rate_limiter.h"

namespace throttlekit::server {
namespace envoy_rls_test {
namespace {

namespace rls = ::envoy::service::ratelimit::v3;
namespace rlc = ::envoy::extensions::common::ratelimit::v3;
using R = rls::RateLimitResponse;

// A minute boundary (2023-11-14T22:13:00Z): windows of a second, a minute
// and an hour start here; the day ends 6420 s later.
constexpr int64_t kStart = testing::kEpoch - 20'000;
constexpr uint32_t kUnlimited = 4'294'967'295;

using Entries = testing::RlsEntries;
using testing::rls_descriptor;
using testing::rls_request;

// `d` with its own hits_addend.
rlc::RateLimitDescriptor with_hits(rlc::RateLimitDescriptor d, uint64_t hits) {
  d.mutable_hits_addend()->set_value(hits);
  return d;
}

// `d` with a limit override.
rlc::RateLimitDescriptor with_limit(rlc::RateLimitDescriptor d,
                                    uint32_t requests_per_unit,
                                    ::envoy::type::v3::RateLimitUnit unit) {
  d.mutable_limit()->set_requests_per_unit(requests_per_unit);
  d.mutable_limit()->set_unit(unit);
  return d;
}

// A server over `store` (null: the embedded store) on a manual clock (its
// own at kStart, or `shared`), and a client of its Envoy door.
class EnvoyDoor {
 public:
  explicit EnvoyDoor(const std::string& yaml,
                     std::shared_ptr<Coordinator> store = nullptr,
                     ManualClock* shared = nullptr)
      : EnvoyDoor(parse_config(yaml, "test.yaml"), std::move(store), shared) {}

  explicit EnvoyDoor(const absl::StatusOr<ServerConfig>& config,
                     std::shared_ptr<Coordinator> store = nullptr,
                     ManualClock* shared = nullptr)
      : own_clock_(kStart),
        clock_(shared != nullptr ? *shared : own_clock_),
        server_(testing::start_manual_clock_server(config, std::move(store),
                                                   clock_)),
        stub_(rls::RateLimitService::NewStub(
            testing::loopback_channel(server_->port()))) {}

  ManualClock& clock() { return clock_; }

  grpc::Status call(const rls::RateLimitRequest& req, R& resp) {
    grpc::ClientContext ctx;
    return stub_->ShouldRateLimit(&ctx, req, &resp);
  }

  // The answer to `req`, which must succeed.
  R decide(const rls::RateLimitRequest& req) {
    R resp;
    const grpc::Status s = call(req, resp);
    EXPECT_TRUE(s.ok()) << s.error_code() << ": " << s.error_message();
    EXPECT_EQ(resp.statuses_size(), req.descriptors_size());
    return resp;
  }

  // The answer to a request of the one descriptor `entries`.
  R decide(const std::string& domain, const Entries& entries) {
    return decide(rls_request(domain, {rls_descriptor(entries)}));
  }

  Server& server() { return *server_; }

 private:
  ManualClock own_clock_;
  ManualClock& clock_;
  std::unique_ptr<Server> server_;
  std::unique_ptr<rls::RateLimitService::Stub> stub_;
};

// Expects status `s` to be a counted limit: `code`, `remaining`, and the
// configured {requests_per_unit, unit, name}.
void expect_limit(const R::DescriptorStatus& s, R::Code code,
                  uint32_t remaining, uint32_t requests_per_unit,
                  R::RateLimit::Unit unit, const std::string& name = "") {
  EXPECT_EQ(s.code(), code);
  EXPECT_EQ(s.limit_remaining(), remaining);
  ASSERT_TRUE(s.has_current_limit());
  EXPECT_EQ(s.current_limit().requests_per_unit(), requests_per_unit);
  EXPECT_EQ(s.current_limit().unit(), unit);
  EXPECT_EQ(s.current_limit().name(), name);
  EXPECT_TRUE(s.has_duration_until_reset());
  EXPECT_FALSE(s.has_quota());
}

// Expects status `s` to be OK with no limit applied.
void expect_no_limit(const R::DescriptorStatus& s) {
  EXPECT_EQ(s.code(), R::OK);
  EXPECT_FALSE(s.has_current_limit());
  EXPECT_EQ(s.limit_remaining(), 0u);
  EXPECT_FALSE(s.has_duration_until_reset());
}

std::vector<std::pair<std::string, std::string>> headers(const R& r) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& h : r.response_headers_to_add()) {
    out.emplace_back(h.key(), h.value());
  }
  return out;
}

constexpr char kMessaging[] = R"(
version: 1
envoy:
  domains:
    - domain: messaging
      descriptors:
        - key: message_type
          value: marketing
          descriptors:
            - key: to_number
              rate_limit: {unit: day, requests_per_unit: 5, name: marketing}
        - key: to_number
          rate_limit: {unit: day, requests_per_unit: 100}
)";

TEST(EnvoyRls, NestedDescriptorsAllMustPassAndTheOthersStillCount) {
  EnvoyDoor door(kMessaging);
  const auto marketing = rls_descriptor(
      {{"message_type", "marketing"}, {"to_number", "2061111111"}});
  const auto number = rls_descriptor({{"to_number", "2061111111"}});
  for (uint32_t i = 1; i <= 5; ++i) {
    const R r = door.decide(rls_request("messaging", {marketing, number}));
    EXPECT_EQ(r.overall_code(), R::OK) << i;
    expect_limit(r.statuses(0), R::OK, 5 - i, 5, R::RateLimit::DAY,
                 "marketing");
    expect_limit(r.statuses(1), R::OK, 100 - i, 100, R::RateLimit::DAY);
  }
  // The sixth is over the marketing limit: the request is OVER_LIMIT, and
  // the per-number limit still counts it (as the reference service does).
  const R r = door.decide(rls_request("messaging", {marketing, number}));
  EXPECT_EQ(r.overall_code(), R::OVER_LIMIT);
  expect_limit(r.statuses(0), R::OVER_LIMIT, 0, 5, R::RateLimit::DAY,
               "marketing");
  expect_limit(r.statuses(1), R::OK, 94, 100, R::RateLimit::DAY);
  // Every other field of the response: the day's window ends 6420 s after
  // kStart; nothing else is sent without headers configured.
  for (const R::DescriptorStatus& s : r.statuses()) {
    EXPECT_EQ(s.duration_until_reset().seconds(), 6420);
    EXPECT_EQ(s.duration_until_reset().nanos(), 0);
  }
  EXPECT_EQ(r.response_headers_to_add_size(), 0);
  EXPECT_EQ(r.request_headers_to_add_size(), 0);
  EXPECT_TRUE(r.raw_body().empty());
  EXPECT_FALSE(r.has_dynamic_metadata());
  EXPECT_FALSE(r.has_quota());

  // Another number is counted apart.
  const R other = door.decide("messaging", {{"message_type", "marketing"},
                                            {"to_number", "2062222222"}});
  expect_limit(other.statuses(0), R::OK, 4, 5, R::RateLimit::DAY, "marketing");
  // A message type the configuration does not name matches nothing.
  const R transactional = door.decide(
      "messaging",
      {{"message_type", "transactional"}, {"to_number", "2061111111"}});
  EXPECT_EQ(transactional.overall_code(), R::OK);
  expect_no_limit(transactional.statuses(0));
  // The next day's window starts afresh.
  door.clock().advance_ms(6'420'000);
  const R next_day = door.decide(rls_request("messaging", {marketing, number}));
  expect_limit(next_day.statuses(0), R::OK, 4, 5, R::RateLimit::DAY,
               "marketing");
  expect_limit(next_day.statuses(1), R::OK, 99, 100, R::RateLimit::DAY);
  EXPECT_EQ(next_day.statuses(0).duration_until_reset().seconds(), 86'400);
}

TEST(EnvoyRls, ExactValueBeatsPatternBeatsKeyOnly) {
  EnvoyDoor door(R"(
version: 1
envoy:
  domains:
    - domain: edge
      descriptors:
        - key: remote_address
          rate_limit: {unit: second, requests_per_unit: 3}
        - key: remote_address
          value: 50.0.0.5
          rate_limit: {unit: second, requests_per_unit: 0}
        - key: remote_address
          value: "10.*"
          rate_limit: {unit: second, requests_per_unit: 2, name: ten_net}
        - key: path
          value: /api/*/action
          rate_limit: {unit: minute, requests_per_unit: 1}
)");
  // The exact value: a limit of 0 refuses every request.
  const R blocked = door.decide("edge", {{"remote_address", "50.0.0.5"}});
  EXPECT_EQ(blocked.overall_code(), R::OVER_LIMIT);
  expect_limit(blocked.statuses(0), R::OVER_LIMIT, 0, 0, R::RateLimit::SECOND);
  EXPECT_EQ(blocked.statuses(0).duration_until_reset().seconds(), 1);
  // The pattern, each matching value counted apart.
  const std::vector<R::Code> ten = {R::OK, R::OK, R::OVER_LIMIT};
  for (size_t i = 0; i < ten.size(); ++i) {
    const R r = door.decide("edge", {{"remote_address", "10.1.1.1"}});
    expect_limit(r.statuses(0), ten[i], i == 0 ? 1 : 0, 2, R::RateLimit::SECOND,
                 "ten_net");
  }
  expect_limit(
      door.decide("edge", {{"remote_address", "10.1.1.2"}}).statuses(0), R::OK,
      1, 2, R::RateLimit::SECOND, "ten_net");
  // Any other value: the value-less descriptor.
  expect_limit(
      door.decide("edge", {{"remote_address", "192.168.0.1"}}).statuses(0),
      R::OK, 2, 3, R::RateLimit::SECOND);
  expect_limit(
      door.decide("edge", {{"remote_address", "1.10.0.1"}}).statuses(0), R::OK,
      2, 3, R::RateLimit::SECOND);
  // A pattern with its `*` in the middle; a value it does not match, with
  // no value-less descriptor beside it, gets no limit.
  expect_limit(door.decide("edge", {{"path", "/api/42/action"}}).statuses(0),
               R::OK, 0, 1, R::RateLimit::MINUTE);
  expect_limit(door.decide("edge", {{"path", "/api/42/action"}}).statuses(0),
               R::OVER_LIMIT, 0, 1, R::RateLimit::MINUTE);
  expect_no_limit(door.decide("edge", {{"path", "/api/42/other"}}).statuses(0));
}

TEST(EnvoyRls, ASharedPatternCountsAllItsValuesAsOne) {
  EnvoyDoor door(R"(
version: 1
envoy:
  domains:
    - domain: files
      descriptors:
        - key: path
          value: "docs/*"
          share_threshold: true
          rate_limit: {unit: minute, requests_per_unit: 2}
        - key: path
          value: "img/*"
          rate_limit: {unit: minute, requests_per_unit: 2}
)");
  const std::vector<std::pair<std::string, R::Code>> shared = {
      {"docs/a.pdf", R::OK}, {"docs/b.csv", R::OK}, {"docs/c", R::OVER_LIMIT}};
  for (const auto& [path, code] : shared) {
    EXPECT_EQ(door.decide("files", {{"path", path}}).statuses(0).code(), code)
        << path;
  }
  // Without share_threshold each value has its own count.
  for (const std::string path : {"img/a.png", "img/b.png", "img/c.png"}) {
    expect_limit(door.decide("files", {{"path", path}}).statuses(0), R::OK, 1,
                 2, R::RateLimit::MINUTE);
  }
}

TEST(EnvoyRls, TheDescriptorsDepthMustBeTheLimitsDepth) {
  EnvoyDoor door(R"(
version: 1
envoy:
  domains:
    - domain: example4
      descriptors:
        - key: key
          value: value
          rate_limit: {unit: second, requests_per_unit: 300}
        - key: parent
          descriptors:
            - key: subkey
              rate_limit: {unit: second, requests_per_unit: 7}
)");
  expect_no_limit(
      door.decide("example4", {{"key", "value"}, {"subkey", "subvalue"}})
          .statuses(0));
  expect_limit(door.decide("example4", {{"key", "value"}}).statuses(0), R::OK,
               299, 300, R::RateLimit::SECOND);
  expect_no_limit(door.decide("example4", {{"parent", "x"}}).statuses(0));
  expect_limit(
      door.decide("example4", {{"parent", "x"}, {"subkey", "y"}}).statuses(0),
      R::OK, 6, 7, R::RateLimit::SECOND);
  expect_no_limit(
      door.decide("example4", {{"parent", "x"}, {"subkey", "y"}, {"more", "z"}})
          .statuses(0));
}

TEST(EnvoyRls, UnlimitedAnswersOkWithoutCounting) {
  EnvoyDoor door(R"(
version: 1
envoy:
  domains:
    - domain: internal
      descriptors:
        - key: ldap
          rate_limit: {unlimited: true}
        - key: azure
          rate_limit: {unit: minute, requests_per_unit: 1}
)");
  const auto ldap = rls_descriptor({{"ldap", "a"}});
  const auto azure = rls_descriptor({{"azure", "b"}});
  const std::vector<R::Code> overall = {R::OK, R::OVER_LIMIT, R::OVER_LIMIT};
  for (const R::Code want : overall) {
    const R r = door.decide(rls_request("internal", {ldap, azure}));
    EXPECT_EQ(r.overall_code(), want);
    const R::DescriptorStatus& s = r.statuses(0);
    EXPECT_EQ(s.code(), R::OK);
    EXPECT_EQ(s.limit_remaining(), kUnlimited);
    EXPECT_FALSE(s.has_current_limit());
    EXPECT_FALSE(s.has_duration_until_reset());
    EXPECT_EQ(r.statuses(1).code(), want);
  }
}

TEST(EnvoyRls, ShadowModeCountsAndReportsButAnswersOk) {
  EnvoyDoor door(R"(
version: 1
envoy:
  domains:
    - domain: example6
      descriptors:
        - key: service
          descriptors:
            - key: user
              value: user-a
              shadow_mode: true
              rate_limit: {unit: second, requests_per_unit: 2}
            - key: user
              value: user-b
              rate_limit: {unit: second, requests_per_unit: 2}
)");
  const std::vector<uint32_t> remaining = {1, 0, 0};
  const std::vector<R::Code> user_b = {R::OK, R::OK, R::OVER_LIMIT};
  for (size_t i = 0; i < remaining.size(); ++i) {
    const R a =
        door.decide("example6", {{"service", "auth"}, {"user", "user-a"}});
    EXPECT_EQ(a.overall_code(), R::OK);
    expect_limit(a.statuses(0), R::OK, remaining[i], 2, R::RateLimit::SECOND);
    const R b =
        door.decide("example6", {{"service", "auth"}, {"user", "user-b"}});
    EXPECT_EQ(b.overall_code(), user_b[i]);
    expect_limit(b.statuses(0), user_b[i], remaining[i], 2,
                 R::RateLimit::SECOND);
  }
}

TEST(EnvoyRls, ReplacesDropsTheReplacedLimitAndLeavesItsCount) {
  EnvoyDoor door(R"(
version: 1
envoy:
  domains:
    - domain: example7
      descriptors:
        - key: key_1
          value: value_1
          descriptors:
            - key: user
              value: bkthomps
              rate_limit: {name: specific_limit, requests_per_unit: 5, unit: second}
        - key: key_2
          value: value_2
          descriptors:
            - key: user
              value: bkthomps
              rate_limit:
                replaces: [{name: specific_limit}]
                requests_per_unit: 10
                unit: second
)");
  const auto first =
      rls_descriptor({{"key_1", "value_1"}, {"user", "bkthomps"}});
  const auto second =
      rls_descriptor({{"key_2", "value_2"}, {"user", "bkthomps"}});
  for (uint32_t i = 1; i <= 7; ++i) {
    const R r = door.decide(rls_request("example7", {first, second}));
    EXPECT_EQ(r.overall_code(), R::OK) << i;
    expect_no_limit(r.statuses(0));
    expect_limit(r.statuses(1), R::OK, 10 - i, 10, R::RateLimit::SECOND);
  }
  // The replaced limit was not counted; alone, it applies again.
  expect_limit(door.decide(rls_request("example7", {first})).statuses(0), R::OK,
               4, 5, R::RateLimit::SECOND, "specific_limit");
  expect_limit(door.decide(rls_request("example7", {second})).statuses(0),
               R::OK, 2, 10, R::RateLimit::SECOND);
}

TEST(EnvoyRls, HitsAddendPerRequestAndPerDescriptor) {
  EnvoyDoor door(R"(
version: 1
envoy:
  domains:
    - domain: hits
      descriptors:
        - key: k
          rate_limit: {unit: minute, requests_per_unit: 10}
)");
  const auto k = rls_descriptor({{"k", "v"}});
  const auto remaining = [&](const rls::RateLimitRequest& req) {
    const R r = door.decide(req);
    EXPECT_EQ(r.overall_code(), r.statuses(0).code());
    return std::pair(r.statuses(0).code(), r.statuses(0).limit_remaining());
  };
  using Want = std::pair<R::Code, uint32_t>;
  EXPECT_EQ(remaining(rls_request("hits", {k}, 3)), Want(R::OK, 7));
  EXPECT_EQ(remaining(rls_request("hits", {k}, 0)), Want(R::OK, 6));  // 0 is 1
  // The descriptor's own hits_addend takes precedence over the request's.
  EXPECT_EQ(remaining(rls_request("hits", {with_hits(k, 2)}, 4)),
            Want(R::OK, 4));
  // A descriptor hits_addend of 0 checks without counting.
  EXPECT_EQ(remaining(rls_request("hits", {with_hits(k, 0)}, 4)),
            Want(R::OK, 4));
  // Hits that do not fit are refused and not counted: what is left stays.
  EXPECT_EQ(remaining(rls_request("hits", {k}, 5)), Want(R::OVER_LIMIT, 4));
  EXPECT_EQ(remaining(rls_request("hits", {k}, 4)), Want(R::OK, 0));
  // At the limit, a check without counting asks whether one more would pass.
  EXPECT_EQ(remaining(rls_request("hits", {with_hits(k, 0)})),
            Want(R::OVER_LIMIT, 0));
}

TEST(EnvoyRls, ALimitOverrideIsCountedInsteadOfTheConfiguredLimit) {
  EnvoyDoor door(R"(
version: 1
envoy:
  domains:
    - domain: api
      descriptors:
        - key: tenant
          rate_limit: {unit: second, requests_per_unit: 100, name: tenants}
)");
  const auto acme = with_limit(rls_descriptor({{"tenant", "acme"}}), 3,
                               ::envoy::type::v3::MINUTE);
  const std::vector<R::Code> codes = {R::OK, R::OK, R::OK, R::OVER_LIMIT};
  const std::vector<uint32_t> left = {2, 1, 0, 0};
  for (size_t i = 0; i < codes.size(); ++i) {
    const R r = door.decide(rls_request("api", {acme}));
    EXPECT_EQ(r.overall_code(), codes[i]);
    expect_limit(r.statuses(0), codes[i], left[i], 3, R::RateLimit::MINUTE);
    EXPECT_EQ(r.statuses(0).duration_until_reset().seconds(), 60);
  }
  // The configured limit was not touched.
  expect_limit(door.decide("api", {{"tenant", "acme"}}).statuses(0), R::OK, 99,
               100, R::RateLimit::SECOND, "tenants");
  // Each descriptor has its own count under an override ...
  expect_limit(
      door.decide(rls_request("api",
                              {with_limit(rls_descriptor({{"tenant", "other"}}),
                                          3, ::envoy::type::v3::MINUTE)}))
          .statuses(0),
      R::OK, 2, 3, R::RateLimit::MINUTE);
  // ... which applies whether or not the configuration matches it (as in
  // the reference service) ...
  expect_limit(
      door
          .decide(rls_request(
              "api", {with_limit(rls_descriptor({{"unconfigured", "x"}}), 2,
                                 ::envoy::type::v3::SECOND)}))
          .statuses(0),
      R::OK, 1, 2, R::RateLimit::SECOND);
  // ... and refuses every request when it is 0.
  expect_limit(
      door.decide(rls_request("api",
                              {with_limit(rls_descriptor({{"tenant", "zero"}}),
                                          0, ::envoy::type::v3::HOUR)}))
          .statuses(0),
      R::OVER_LIMIT, 0, 0, R::RateLimit::HOUR);
}

TEST(EnvoyRls, TheServerCountsAtMost1024DistinctOverrides) {
  EnvoyDoor door(R"(
version: 1
envoy:
  domains: [{domain: api}]
)");
  const auto tenant = rls_descriptor({{"tenant", "acme"}});
  for (uint32_t limit = 1; limit <= kMaxLimitOverrides; ++limit) {
    const R r = door.decide(rls_request(
        "api", {with_limit(tenant, limit, ::envoy::type::v3::HOUR)}));
    ASSERT_EQ(r.statuses(0).limit_remaining(), limit - 1) << limit;
  }
  R resp;
  const grpc::Status s = door.call(
      rls_request(
          "api",
          {rls_descriptor({{"tenant", "other"}}),
           with_limit(tenant, static_cast<uint32_t>(kMaxLimitOverrides + 1),
                      ::envoy::type::v3::HOUR)}),
      resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(s.error_message().find("at most 1024 distinct limit overrides"),
            std::string::npos)
      << s.error_message();
  // A limit already counted is still served.
  const R again = door.decide(
      rls_request("api", {with_limit(tenant, 5, ::envoy::type::v3::HOUR)}));
  expect_limit(again.statuses(0), R::OK, 3, 5, R::RateLimit::HOUR);
}

TEST(EnvoyRls, WindowsAreAlignedToTheUnit) {
  EnvoyDoor door(R"(
version: 1
envoy:
  domains:
    - domain: aligned
      descriptors:
        - key: k
          rate_limit: {unit: minute, requests_per_unit: 2}
)");
  door.clock().set_ms(kStart + 50'250);
  const std::vector<R::Code> codes = {R::OK, R::OK, R::OVER_LIMIT};
  for (const R::Code want : codes) {
    const R r = door.decide("aligned", {{"k", "v"}});
    EXPECT_EQ(r.statuses(0).code(), want);
    // 9.75 s to the minute's end.
    EXPECT_EQ(r.statuses(0).duration_until_reset().seconds(), 9);
    EXPECT_EQ(r.statuses(0).duration_until_reset().nanos(), 750'000'000);
  }
  door.clock().advance_ms(9'750);  // the next minute
  const R r = door.decide("aligned", {{"k", "v"}});
  expect_limit(r.statuses(0), R::OK, 1, 2, R::RateLimit::MINUTE);
  EXPECT_EQ(r.statuses(0).duration_until_reset().seconds(), 60);
}

TEST(EnvoyRls, AnotherStrategyMayBackADescriptor) {
  EnvoyDoor door(R"(
version: 1
envoy:
  domains:
    - domain: shaped
      descriptors:
        - key: fixed
          rate_limit: {unit: second, requests_per_unit: 2}
        - key: smooth
          rate_limit: {unit: second, requests_per_unit: 2, strategy: gcra}
)");
  const std::vector<R::Code> codes = {R::OK, R::OK, R::OVER_LIMIT};
  for (const R::Code want : codes) {
    EXPECT_EQ(door.decide("shaped", {{"fixed", "a"}}).statuses(0).code(), want);
    EXPECT_EQ(door.decide("shaped", {{"smooth", "a"}}).statuses(0).code(),
              want);
  }
  // Half a second later the fixed window is still spent; GCRA has paced one
  // request back in (one per 500 ms).
  door.clock().advance_ms(500);
  EXPECT_EQ(door.decide("shaped", {{"fixed", "a"}}).statuses(0).code(),
            R::OVER_LIMIT);
  const R smooth = door.decide("shaped", {{"smooth", "a"}});
  expect_limit(smooth.statuses(0), R::OK, 0, 2, R::RateLimit::SECOND);
  EXPECT_EQ(smooth.statuses(0).duration_until_reset().seconds(), 1);
}

TEST(EnvoyRls, DecisionsEqualTheLibrarysOverARandomTimeline) {
  EnvoyDoor door(R"(
version: 1
envoy:
  domains:
    - domain: eq
      descriptors:
        - key: user
          rate_limit: {unit: second, requests_per_unit: 5}
        - key: route
          value: "/v1/*"
          rate_limit:
            unit: minute
            requests_per_unit: 40
            strategy: gcra
            burst: 6
)");
  // The same engines in process, on the same clock, keyed by the value.
  const ServerClock clock{&door.clock()};
  auto fixed = RateLimiter<FixedWindow, ServerClock>::create(
      {.limit = 5, .window_ms = 1000}, {}, clock);
  auto gcra = RateLimiter<Gcra, ServerClock>::create(
      {.limit = 40, .period_ms = 60'000, .burst = 6}, {}, clock);
  ASSERT_TRUE(fixed.ok() && gcra.ok());
  const auto expect_same = [&](const R::DescriptorStatus& s, const Decision& d,
                               int step) {
    EXPECT_EQ(s.code(), d.allowed ? R::OK : R::OVER_LIMIT) << step;
    EXPECT_EQ(s.limit_remaining(), static_cast<uint32_t>(d.remaining)) << step;
    const int64_t until_ms = s.duration_until_reset().seconds() * 1000 +
                             s.duration_until_reset().nanos() / 1'000'000;
    EXPECT_EQ(until_ms,
              std::max<int64_t>(0, d.reset_at_ms - door.clock().now_ms()))
        << step;
  };
  std::mt19937 rng(32);
  const std::vector<std::string> users = {"alice", "bob", "carol"};
  for (int step = 0; step < 300; ++step) {
    door.clock().advance_ms(static_cast<int64_t>(rng() % 400));
    const std::string& user = users[rng() % users.size()];
    const std::string route = absl::StrCat("/v1/", rng() % 2);
    const uint32_t hits = 1 + static_cast<uint32_t>(rng() % 3);
    const bool peek = step % 7 == 0;  // a descriptor hits_addend of 0
    auto user_desc = rls_descriptor({{"user", user}});
    if (peek) user_desc = with_hits(user_desc, 0);
    const R r = door.decide(rls_request(
        "eq", {user_desc, rls_descriptor({{"route", route}})}, hits));
    const absl::StatusOr<Decision> want_user =
        peek ? fixed->peek(user) : fixed->check(user, hits);
    const absl::StatusOr<Decision> want_route = gcra->check(route, hits);
    ASSERT_TRUE(want_user.ok() && want_route.ok());
    expect_same(r.statuses(0), *want_user, step);
    expect_same(r.statuses(1), *want_route, step);
    EXPECT_EQ(r.overall_code(),
              want_user->allowed && want_route->allowed ? R::OK : R::OVER_LIMIT)
        << step;
  }
}

constexpr char kTwoLimits[] = R"(
      descriptors:
        - key: a
          rate_limit: {unit: minute, requests_per_unit: 10}
        - key: b
          rate_limit: {unit: minute, requests_per_unit: 3}
)";

std::string with_headers(const std::string& form) {
  return absl::StrCat("version: 1\nenvoy:\n  headers: ", form,
                      "\n  domains:\n    - domain: hdr", kTwoLimits);
}

TEST(EnvoyRls, HeadersNameTheDescriptorClosestToItsLimit) {
  EnvoyDoor door(with_headers("draft06"));
  const auto req = rls_request(
      "hdr", {rls_descriptor({{"a", "x"}}), rls_descriptor({{"b", "x"}})});
  using Headers = std::vector<std::pair<std::string, std::string>>;
  EXPECT_EQ(headers(door.decide(req)),
            (Headers{{"RateLimit-Limit", "3"},
                     {"RateLimit-Remaining", "2"},
                     {"RateLimit-Reset", "60"},
                     {"RateLimit-Policy", "3;w=60"}}));
  door.clock().advance_ms(1'500);
  door.decide(req);
  door.decide(req);
  // Over the limit: that descriptor's numbers, and Retry-After.
  const R over = door.decide(req);
  EXPECT_EQ(over.overall_code(), R::OVER_LIMIT);
  EXPECT_EQ(headers(over), (Headers{{"RateLimit-Limit", "3"},
                                    {"RateLimit-Remaining", "0"},
                                    {"RateLimit-Reset", "59"},
                                    {"RateLimit-Policy", "3;w=60"},
                                    {"Retry-After", "59"}}));

  // Draft 07: the same numbers in one dictionary.
  EnvoyDoor d7(with_headers("draft07"));
  EXPECT_EQ(headers(d7.decide(req)),
            (Headers{{"RateLimit", "limit=3, remaining=2, reset=60"},
                     {"RateLimit-Policy", "3;w=60"}}));

  EnvoyDoor legacy(with_headers("legacy"));
  EXPECT_EQ(
      headers(legacy.decide(req)),
      (Headers{{"X-RateLimit-Limit", "3"},
               {"X-RateLimit-Remaining", "2"},
               {"X-RateLimit-Reset", absl::StrCat((kStart + 60'000) / 1000)}}));
  EnvoyDoor structured(with_headers("structured"));
  EXPECT_EQ(headers(structured.decide(req)),
            (Headers{{"RateLimit-Policy", "\"b\";q=3;w=60"},
                     {"RateLimit", "\"b\";r=2;t=60"}}));
  EnvoyDoor off(with_headers("off"));
  EXPECT_TRUE(headers(off.decide(req)).empty());
}

TEST(EnvoyRls, BadRequestsAreRefusedAndCountNothing) {
  EnvoyDoor door(R"(
version: 1
maxKeyBytes: 64
maxBatch: 100
envoy:
  domains:
    - domain: d
      descriptors:
        - key: k
          rate_limit: {unit: minute, requests_per_unit: 5}
)");
  const auto good = rls_descriptor({{"k", "v"}});
  rlc::RateLimitDescriptor no_entries;
  rlc::RateLimitDescriptor empty_key = rls_descriptor({{"", "v"}});
  const auto no_unit =
      with_limit(rls_descriptor({{"k", "v"}}), 3, ::envoy::type::v3::UNKNOWN);
  const auto long_key = rls_descriptor({{"k", std::string(70, 'x')}});
  rls::RateLimitRequest many = rls_request("d", {});
  for (int i = 0; i < 100'000; ++i) *many.add_descriptors() = good;
  struct Case {
    rls::RateLimitRequest req;
    grpc::StatusCode code;
    std::string message;  // a substring of the error
  };
  const Case cases[] = {
      {rls_request("", {good}), grpc::StatusCode::INVALID_ARGUMENT,
       "the domain is empty"},
      {rls_request("d", {}), grpc::StatusCode::INVALID_ARGUMENT,
       "no descriptors"},
      {rls_request("nope", {good, no_entries}),
       grpc::StatusCode::INVALID_ARGUMENT, "descriptors[1]: no entries"},
      {many, grpc::StatusCode::INVALID_ARGUMENT,
       "100000 descriptors; the server's limit is 100 (maxBatch)"},
      {rls_request("d", {good}, 2'000'000'000),
       grpc::StatusCode::INVALID_ARGUMENT,
       "hits_addend is 2000000000; at most 1000000000"},
      {rls_request("d", {good, with_hits(good, uint64_t{1} << 40)}),
       grpc::StatusCode::INVALID_ARGUMENT, "descriptors[1].hits_addend"},
      {rls_request("d", {good, no_entries}), grpc::StatusCode::INVALID_ARGUMENT,
       "descriptors[1]: no entries"},
      {rls_request("d", {good, empty_key}), grpc::StatusCode::INVALID_ARGUMENT,
       "descriptors[1].entries[0]: the key is empty"},
      {rls_request("d", {good, no_unit}), grpc::StatusCode::INVALID_ARGUMENT,
       "descriptors[1].limit.unit: 0 is not a unit"},
      {rls_request("d", {good, long_key}), grpc::StatusCode::INVALID_ARGUMENT,
       "descriptors[1]: its counter key is 73 bytes; the server's limit is "
       "64 (maxKeyBytes)"},
  };
  for (const Case& c : cases) {
    R resp;
    const grpc::Status s = door.call(c.req, resp);
    EXPECT_EQ(s.error_code(), c.code) << c.message;
    EXPECT_NE(s.error_message().find(c.message), std::string::npos)
        << s.error_message() << "\nexpected: " << c.message;
  }
  // None of them counted the good descriptor they carried.
  expect_limit(door.decide(rls_request("d", {good})).statuses(0), R::OK, 4, 5,
               R::RateLimit::MINUTE);

  // A server without envoy domains answers NOT_FOUND.
  EnvoyDoor none(R"(
version: 1
limiters:
  api: {strategy: gcra, limit: 1, period: 1s}
)");
  R resp;
  const grpc::Status s = none.call(rls_request("d", {good}), resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_NE(s.error_message().find("no envoy domains configured"),
            std::string::npos)
      << s.error_message();
}

// A domain the configuration does not name: OK with no limit for every
// descriptor (a limit override too), as the reference service answers,
// counted per domain name in ratelimit_service_rate_limit_domain_not_found;
// a bad request to it is still refused. `unknownDomain: notFound` answers
// NOT_FOUND instead.
TEST(EnvoyRls, AnUnknownDomainIsAllowedWithNoLimitAndCounted) {
  constexpr char kDomain[] = R"(
    - domain: d
      descriptors:
        - key: k
          rate_limit: {unit: minute, requests_per_unit: 1}
)";
  EnvoyDoor door(absl::StrCat("version: 1\nenvoy:\n  domains:", kDomain));
  const auto k = rls_descriptor({{"k", "v"}});
  const auto overridden =
      with_limit(rls_descriptor({{"k", "v"}}), 1, ::envoy::type::v3::MINUTE);
  for (int i = 0; i < 3; ++i) {
    const R r = door.decide(rls_request("elsewhere", {k, overridden}));
    EXPECT_EQ(r.overall_code(), R::OK);
    for (const auto& st : r.statuses()) {
      EXPECT_EQ(st.code(), R::OK);
      EXPECT_FALSE(st.has_current_limit());
      EXPECT_EQ(st.limit_remaining(), 0u);
    }
  }
  door.decide(rls_request("other", {k}));
  R resp;
  EXPECT_EQ(
      door.call(rls_request("elsewhere", {rlc::RateLimitDescriptor()}), resp)
          .error_code(),
      grpc::StatusCode::INVALID_ARGUMENT);
  // The configured domain still counts its own limit.
  EXPECT_EQ(door.decide(rls_request("d", {k})).overall_code(), R::OK);
  EXPECT_EQ(door.decide(rls_request("d", {k})).overall_code(), R::OVER_LIMIT);
  const std::string text = door.server().prometheus_text();
  for (const char* line : {
           "ratelimit_service_rate_limit_domain_not_found{domain=\"elsewhere\"}"
           " 3\n",
           "ratelimit_service_rate_limit_domain_not_found{domain=\"other\"} "
           "1\n",
           "throttlekit_envoy_unrouted_requests_total 1\n",
           "ratelimit_service_rate_limit_total_hits{domain=\"d\",key1=\"k\"} "
           "2\n",
       }) {
    EXPECT_NE(text.find(line), std::string::npos) << "missing: " << line;
  }

  EnvoyDoor strict(absl::StrCat(
      "version: 1\nenvoy:\n  unknownDomain: notFound\n  domains:", kDomain));
  const grpc::Status s = strict.call(rls_request("elsewhere", {k}), resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_NE(s.error_message().find("unknown domain \"elsewhere\""),
            std::string::npos)
      << s.error_message();
  EXPECT_EQ(strict.decide(rls_request("d", {k})).overall_code(), R::OK);
}

// The names of unknown domains are the clients' to choose: at most 256 are
// counted apart, the rest together.
TEST(EnvoyRls, UnknownDomainNamesAreBounded) {
  EnvoyDoor door(R"(
version: 1
envoy:
  domains:
    - domain: d
)");
  const auto k = rls_descriptor({{"k", "v"}});
  for (int i = 0; i < 300; ++i) {
    door.decide(rls_request(absl::StrCat("u", i), {k}));
  }
  const std::string text = door.server().prometheus_text();
  EXPECT_NE(text.find("ratelimit_service_rate_limit_domain_not_found{domain="
                      "\"u0\"} 1\n"),
            std::string::npos);
  EXPECT_NE(text.find("ratelimit_service_rate_limit_domain_not_found{domain="
                      "\"(other)\"} 44\n"),
            std::string::npos)
      << text;
  size_t rows = 0;
  for (size_t at = text.find("domain_not_found{"); at != std::string::npos;
       at = text.find("domain_not_found{", at + 1)) {
    ++rows;
  }
  EXPECT_EQ(rows, 257u);
}

// The door's metrics on /metrics: per limit in hits under the reference
// service's names, per domain in requests by answer, and the requests no
// domain took.
TEST(EnvoyRls, MetricsPerDomainAndDescriptor) {
  EnvoyDoor door(R"(
version: 1
envoy:
  domains:
    - domain: m
      descriptors:
        - key: user
          rate_limit: {unit: minute, requests_per_unit: 10}
        - key: route
          value: /a
          shadow_mode: true
          rate_limit: {unit: minute, requests_per_unit: 2}
)");
  for (int i = 0; i < 9; ++i) door.decide("m", {{"user", "ann"}});
  // 3 hits with 1 left: refused, all three over the limit.
  EXPECT_EQ(
      door.decide(rls_request("m", {rls_descriptor({{"user", "ann"}})}, 3))
          .overall_code(),
      R::OVER_LIMIT);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(door.decide("m", {{"route", "/a"}}).overall_code(), R::OK);
  }
  door.decide(rls_request("m", {with_limit(rls_descriptor({{"other", "x"}}), 5,
                                           ::envoy::type::v3::MINUTE)}));
  // A check without counting adds no hit.
  door.decide(
      rls_request("m", {with_hits(rls_descriptor({{"user", "bob"}}), 0)}));
  R resp;
  EXPECT_FALSE(
      door.call(rls_request("", {rls_descriptor({{"user", "ann"}})}), resp)
          .ok());
  // An unknown domain is answered (OK, no limit) and counted apart.
  EXPECT_TRUE(
      door.call(rls_request("nope", {rls_descriptor({{"user", "ann"}})}), resp)
          .ok());
  EXPECT_FALSE(door.call(rls_request("m", {}), resp).ok());
  EXPECT_FALSE(
      door.call(rls_request("m", {rls_descriptor({{"", "x"}})}), resp).ok());

  const std::string text = door.server().prometheus_text();
  for (
      const char* line : {
          "# TYPE ratelimit_service_rate_limit_total_hits counter\n",
          "ratelimit_service_rate_limit_total_hits{domain=\"m\",key1=\"user\"} "
          "12\n",
          "ratelimit_service_rate_limit_within_limit{domain=\"m\",key1="
          "\"user\"} 9\n",
          "ratelimit_service_rate_limit_near_limit{domain=\"m\",key1=\"user\"} "
          "1\n",
          "ratelimit_service_rate_limit_over_limit{domain=\"m\",key1=\"user\"} "
          "3\n",
          "ratelimit_service_rate_limit_shadow_mode{domain=\"m\",key1="
          "\"user\"} 0\n",
          "ratelimit_service_rate_limit_total_hits{domain=\"m\",key1="
          "\"route_/a\"} 3\n",
          "ratelimit_service_rate_limit_within_limit{domain=\"m\",key1="
          "\"route_/a\"} 2\n",
          "ratelimit_service_rate_limit_near_limit{domain=\"m\",key1="
          "\"route_/a\"} 1\n",
          "ratelimit_service_rate_limit_over_limit{domain=\"m\",key1="
          "\"route_/a\"} 1\n",
          "ratelimit_service_rate_limit_shadow_mode{domain=\"m\",key1="
          "\"route_/a\"} 1\n",
          "ratelimit_service_rate_limit_total_hits{domain=\"m\",key1="
          "\"(override)\"} 1\n",
          "ratelimit_service_rate_limit_within_limit{domain=\"m\",key1="
          "\"(override)\"} 1\n",
          "throttlekit_envoy_requests_total{domain=\"m\",code=\"OK\"} 14\n",
          "throttlekit_envoy_requests_total{domain=\"m\",code=\"OVER_LIMIT\"} "
          "1\n",
          "throttlekit_envoy_requests_total{domain=\"m\",code=\"ERROR\"} 1\n",
          "throttlekit_envoy_unrouted_requests_total 2\n",
          "ratelimit_service_rate_limit_domain_not_found{domain=\"nope\"} "
          "1\n",
      }) {
    EXPECT_NE(text.find(line), std::string::npos) << "missing: " << line;
  }
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  ASSERT_TRUE(out.good()) << path;
}

// Two versions of one configuration: `user` is 1000 per hour in both; `ip`
// changes its limit; `extra` comes and goes.
constexpr char kReloadA[] = R"(domain: r
descriptors:
  - key: user
    rate_limit: {unit: hour, requests_per_unit: 1000}
  - key: ip
    rate_limit: {unit: hour, requests_per_unit: 5}
)";
constexpr char kReloadB[] = R"(domain: r
descriptors:
  - key: user
    rate_limit: {unit: hour, requests_per_unit: 1000}
  - key: ip
    rate_limit: {unit: hour, requests_per_unit: 7, name: seven}
)";

// The configuration rewritten at least 40 times (and once broken) while
// four clients send 1,500 requests: no request fails, the unchanged limit keeps
// its count through every reload (exactly 1,000 admitted), a changed limit
// takes effect, a domain added and removed comes and goes, the broken
// version is refused with the domains in force kept, and the counters
// carry over.
TEST(EnvoyRls, ReloadUnderTrafficKeepsCountsAndRefusesNothing) {
  const std::string dir =
      absl::StrCat(::testing::TempDir(), "/envoy-reload-", getpid());
  ASSERT_EQ(std::system(absl::StrCat("mkdir -p '", dir, "'").c_str()), 0);
  const std::string server_yaml = dir + "/server.yaml";
  const std::string rls_yaml = dir + "/rls.yaml";
  const std::string extra_yaml = dir + "/extra.yaml";
  write_file(rls_yaml, kReloadA);
  write_file(extra_yaml,
             "domain: extra\ndescriptors:\n  - key: k\n    "
             "rate_limit: {unit: minute, requests_per_unit: 3}\n");
  const std::string files_a = "version: 1\nenvoy: {files: [rls.yaml]}\n";
  const std::string files_b =
      "version: 1\nenvoy: {files: [rls.yaml, extra.yaml]}\n";
  write_file(server_yaml, files_a);
  EnvoyDoor door(load_config(server_yaml));
  auto watcher = ConfigWatcher::start(server_yaml, door.server().policies(),
                                      {.background = false});
  ASSERT_TRUE(watcher.ok()) << watcher.status();
  EXPECT_EQ((*watcher)->poll().value_or(true), false);  // nothing changed

  constexpr int kRequests = 1500;
  std::atomic<int> sent{0};
  std::atomic<int> admitted{0};
  std::atomic<int> failed{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < 4; ++c) {
    clients.emplace_back([&] {
      while (sent.fetch_add(1) < kRequests) {
        R resp;
        const grpc::Status st = door.call(
            rls_request("r", {rls_descriptor({{"user", "ann"}})}), resp);
        if (!st.ok() || resp.statuses_size() != 1) {
          failed.fetch_add(1);
          continue;
        }
        admitted.fetch_add(resp.statuses(0).code() == R::OK ? 1 : 0);
      }
    });
  }
  // Reloads start once traffic flows, and go on (at least 40, an even
  // number, so version A is the last) until every request was sent.
  while (sent.load() < 50) std::this_thread::yield();
  int applied = 0;
  int i = 0;
  for (; i < 40 || sent.load() < kRequests || i % 2 != 0; ++i) {
    const bool b = i % 2 == 0;
    write_file(rls_yaml, b ? kReloadB : kReloadA);
    write_file(server_yaml, b ? files_b : files_a);
    absl::StatusOr<bool> changed = (*watcher)->poll();
    ASSERT_TRUE(changed.ok()) << changed.status();
    applied += *changed ? 1 : 0;
    if (i == 20) {
      // A broken version: refused, naming the file and the problem; the
      // domains in force (version A) stay.
      write_file(rls_yaml,
                 "domain: r\ndescriptors:\n  - key: user\n    rate_limit: "
                 "{unit: fortnight, requests_per_unit: 1}\n");
      absl::StatusOr<bool> broken = (*watcher)->poll();
      ASSERT_FALSE(broken.ok());
      EXPECT_NE(broken.status().message().find(
                    "rls.yaml: descriptors[0].rate_limit.unit: unknown unit"),
                std::string::npos)
          << broken.status();
    }
  }
  for (std::thread& t : clients) t.join();
  EXPECT_EQ(applied, i);
  EXPECT_EQ(failed.load(), 0);
  // Exactly the limit: no reload lost or reset the count.
  EXPECT_EQ(admitted.load(), 1000);
  R last = door.decide("r", {{"user", "ann"}});
  EXPECT_EQ(last.statuses(0).code(), R::OVER_LIMIT);

  // The last version applied is A: `ip` at 5, `extra` gone.
  EXPECT_EQ(door.decide("r", {{"ip", "1.2.3.4"}})
                .statuses(0)
                .current_limit()
                .requests_per_unit(),
            5u);
  // An unknown domain again: answered with no limit, counted apart.
  const R gone = door.decide("extra", {{"k", "v"}});
  EXPECT_EQ(gone.overall_code(), R::OK);
  EXPECT_FALSE(gone.statuses(0).has_current_limit());
  EXPECT_NE(door.server().prometheus_text().find(
                "ratelimit_service_rate_limit_domain_not_found{domain="
                "\"extra\"} 1\n"),
            std::string::npos);
  // Version B again: `ip` at 7 under its new name, `extra` served.
  write_file(rls_yaml, kReloadB);
  write_file(server_yaml, files_b);
  ASSERT_TRUE((*watcher)->poll().value_or(false));
  const R seven = door.decide("r", {{"ip", "1.2.3.4"}});
  EXPECT_EQ(seven.statuses(0).current_limit().requests_per_unit(), 7u);
  EXPECT_EQ(seven.statuses(0).current_limit().name(), "seven");
  EXPECT_EQ(door.decide("extra", {{"k", "v"}}).statuses(0).code(), R::OK);

  const std::string text = door.server().prometheus_text();
  for (const std::string& line : {
           std::string("ratelimit_service_rate_limit_total_hits{domain=\"r\","
                       "key1=\"user\"} 1501\n"),
           std::string("ratelimit_service_rate_limit_within_limit{domain="
                       "\"r\",key1=\"user\"} 1000\n"),
           absl::StrCat("throttlekit_envoy_reloads_total{result=\"applied\"} ",
                        applied + 1, "\n"),
           std::string("throttlekit_envoy_reloads_total{result=\"refused\"} "
                       "1\n"),
       }) {
    EXPECT_NE(text.find(line), std::string::npos) << "missing: " << line;
  }
}

// The reload bound as it is used: the real clock, six clients on two
// cores against a limit of 40 per one-second window, the configuration
// swapped every 20 ms for four windows. Each answer is counted in the
// window it names (the server read its clock between sending and
// receiving, and now + duration_until_reset is a whole second): per window
// at most 40, and exactly 40 in every window the clients pressed, whatever
// the reloads in between.
TEST(EnvoyRls, ReloadsOnTheRealClockHoldEachWindow) {
  const std::string dir =
      absl::StrCat(::testing::TempDir(), "/envoy-reload-real-", getpid());
  ASSERT_EQ(std::system(absl::StrCat("mkdir -p '", dir, "'").c_str()), 0);
  const std::string server_yaml = dir + "/server.yaml";
  const auto version = [](int ip_limit) {
    return absl::StrCat(
        "version: 1\nenvoy:\n  domains:\n    - domain: r\n      descriptors:\n"
        "        - key: user\n          rate_limit: {unit: second, "
        "requests_per_unit: 40}\n        - key: ip\n          rate_limit: "
        "{unit: second, requests_per_unit: ",
        ip_limit, "}\n");
  };
  write_file(server_yaml, version(5));
  absl::StatusOr<ServerConfig> config = load_config(server_yaml);
  ASSERT_TRUE(config.ok()) << config.status();
  auto policies = Policies::create(*config, nullptr);  // the system clock
  ASSERT_TRUE(policies.ok()) << policies.status();
  auto server = Server::start(*std::move(policies), {.listen = "127.0.0.1:0"});
  ASSERT_TRUE(server.ok()) << server.status();
  auto watcher = ConfigWatcher::start(server_yaml, (*server)->policies(),
                                      {.background = false});
  ASSERT_TRUE(watcher.ok()) << watcher.status();
  const auto wall = [] { return SystemClock{}.now_ms(); };
  const rls::RateLimitRequest req =
      rls_request("r", {rls_descriptor({{"user", "ann"}})});
  std::mutex mu;
  std::map<int64_t, int64_t> admitted;  // by window end
  std::map<int64_t, int64_t> asked;
  int64_t failed = 0;
  int64_t unattributed = 0;
  std::atomic<bool> stop{false};
  std::vector<std::thread> clients;
  for (int c = 0; c < 6; ++c) {
    clients.emplace_back([&] {
      auto stub = rls::RateLimitService::NewStub(
          testing::loopback_channel((*server)->port()));
      while (!stop.load()) {
        R resp;
        grpc::ClientContext ctx;
        const int64_t sent = wall();
        const grpc::Status st = stub->ShouldRateLimit(&ctx, req, &resp);
        const int64_t received = wall();
        std::lock_guard lock(mu);
        if (!st.ok() || resp.statuses_size() != 1) {
          ++failed;
          continue;
        }
        const auto& d = resp.statuses(0).duration_until_reset();
        const int64_t until = d.seconds() * 1000 + d.nanos() / 1'000'000;
        const int64_t end = (sent + until + 999) / 1000 * 1000;
        if (end > received + until || end + 1000 <= received + until) {
          ++unattributed;  // an answer slower than a second
          continue;
        }
        ++asked[end];
        admitted[end] += resp.statuses(0).code() == R::OK ? 1 : 0;
      }
    });
  }
  int reloads = 0;
  const int64_t until = wall() + 4'000;
  for (int i = 0; wall() < until; ++i) {
    write_file(server_yaml, version(i % 2 == 0 ? 7 : 5));
    absl::StatusOr<bool> changed = (*watcher)->poll();
    ASSERT_TRUE(changed.ok()) << changed.status();
    reloads += *changed ? 1 : 0;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  stop = true;
  for (std::thread& t : clients) t.join();
  EXPECT_EQ(failed, 0);
  EXPECT_GE(reloads, 100);
  int64_t attributed = 0;
  for (const auto& [end, n] : asked) attributed += n;
  EXPECT_LE(unattributed * 20, attributed);
  ASSERT_GE(admitted.size(), 4u);
  int64_t pressed = 0;
  for (const auto& [end, n] : admitted) {
    EXPECT_LE(n, 40) << "window ending " << end;
    // The first and last windows are partly outside the run.
    if (end == admitted.begin()->first || end == admitted.rbegin()->first) {
      continue;
    }
    if (asked[end] >= 80) {
      ++pressed;
      EXPECT_EQ(n, 40) << "window ending " << end;
    }
  }
  EXPECT_GE(pressed, 2);
}

// The watcher's own thread sees a change within a few intervals.
TEST(EnvoyRls, TheWatcherThreadAppliesAChange) {
  const std::string dir =
      absl::StrCat(::testing::TempDir(), "/envoy-watch-", getpid());
  ASSERT_EQ(std::system(absl::StrCat("mkdir -p '", dir, "'").c_str()), 0);
  const std::string server_yaml = dir + "/server.yaml";
  write_file(server_yaml, "version: 1\nenvoy: {domains: [{domain: a}]}\n");
  EnvoyDoor door(load_config(server_yaml));
  auto watcher = ConfigWatcher::start(server_yaml, door.server().policies(),
                                      {.interval_ms = 10});
  ASSERT_TRUE(watcher.ok()) << watcher.status();
  write_file(server_yaml,
             "version: 1\nenvoy: {domains: [{domain: a}, {domain: b}]}\n");
  bool seen = false;
  for (int i = 0; i < 500 && !seen; ++i) {
    R resp;
    seen =
        door.call(rls_request("b", {rls_descriptor({{"k", "v"}})}), resp).ok();
    if (!seen) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(seen) << "the watcher did not apply the change in 5 s";
  EXPECT_FALSE(
      ConfigWatcher::start(dir + "/absent.yaml", door.server().policies(), {})
          .ok());
  EXPECT_FALSE(ConfigWatcher::start(server_yaml, door.server().policies(),
                                    {.interval_ms = 0})
                   .ok());
}

// The shared request script (tests/server/envoy_script/script.txt, also
// sent by the Python client): every answer exactly as written, but
// duration_until_reset, checked set, positive and within the unit.
TEST(EnvoyRls, TheSharedScriptAnswersAsWritten) {
  const char* dir = std::getenv("THROTTLEKIT_ENVOY_SCRIPT_DIR");
  ASSERT_NE(dir, nullptr) << "THROTTLEKIT_ENVOY_SCRIPT_DIR is not set";
  EnvoyDoor door(load_config(absl::StrCat(dir, "/server.yaml")));
  const auto entries =
      testing::read_script_entries(absl::StrCat(dir, "/script.txt"));
  ASSERT_TRUE(entries.ok()) << entries.status();
  int steps = 0;
  std::optional<rls::RateLimitRequest> pending;
  for (const auto& [number, tag, body] : *entries) {
    if (tag == "request") {
      pending.emplace();
      ASSERT_TRUE(
          google::protobuf::TextFormat::ParseFromString(body, &*pending))
          << "script.txt:" << number;
      continue;
    }
    ASSERT_TRUE(pending.has_value()) << "script.txt:" << number;
    R got;
    const grpc::Status s = door.call(*pending, got);
    pending.reset();
    ++steps;
    if (tag == "expect_error") {
      grpc::StatusCode want = grpc::StatusCode::OK;
      if (absl::StrContains(body, "INVALID_ARGUMENT")) {
        want = grpc::StatusCode::INVALID_ARGUMENT;
      } else if (absl::StrContains(body, "NOT_FOUND")) {
        want = grpc::StatusCode::NOT_FOUND;
      }
      ASSERT_NE(want, grpc::StatusCode::OK) << "script.txt:" << number;
      EXPECT_EQ(s.error_code(), want) << "script.txt:" << number;
      continue;
    }
    ASSERT_EQ(tag, "expect") << "script.txt:" << number;
    ASSERT_TRUE(s.ok()) << "script.txt:" << number << ": " << s.error_message();
    R want;
    ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(body, &want))
        << "script.txt:" << number;
    for (R::DescriptorStatus& st : *got.mutable_statuses()) {
      if (st.has_current_limit()) {
        const auto unit = envoy_unit_from_wire(st.current_limit().unit());
        ASSERT_TRUE(unit.has_value());
        const int64_t ms = st.duration_until_reset().seconds() * 1000 +
                           st.duration_until_reset().nanos() / 1'000'000;
        EXPECT_TRUE(st.has_duration_until_reset()) << "script.txt:" << number;
        EXPECT_GT(ms, 0) << "script.txt:" << number;
        EXPECT_LE(ms, envoy_unit_ms(*unit)) << "script.txt:" << number;
      }
      st.clear_duration_until_reset();
    }
    EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(got, want))
        << "script.txt:" << number << ": expected\n"
        << want.DebugString() << "got\n"
        << got.DebugString();
  }
  EXPECT_EQ(steps, 26);
}

TEST(EnvoyRls, LeasedAndFederatedNeedASharedStore) {
  for (const std::string how : {"leased: true", "federated: true"}) {
    absl::StatusOr<ServerConfig> config = parse_config(absl::StrCat(R"(
version: 1
envoy:
  domains:
    - domain: d
      descriptors:
        - key: k
          rate_limit: {unit: minute, requests_per_unit: 10, )",
                                                                    how, "}\n"),
                                                       "test.yaml");
    ASSERT_TRUE(config.ok()) << config.status();
    auto policies = Policies::create(*config, nullptr);
    ASSERT_FALSE(policies.ok());
    EXPECT_EQ(policies.status().code(), absl::StatusCode::kInvalidArgument);
    const std::string what = how.substr(0, how.find(':'));
    EXPECT_NE(
        policies.status().message().find(absl::StrCat(
            "envoy domain d, k: ", what, " needs a store the servers share")),
        std::string::npos)
        << policies.status();
  }
}

// Two servers in two regions over one shared store (the memory
// coordinator) on one manual clock: a federated limit (batch 4) is one
// budget per window for both, every response field as documented, and
// close() gives a server's unspent credits back to the window.
TEST(EnvoyRls, TwoRegionsOnOneStoreShareAFederatedLimit) {
  const auto fleet = [](const char* region) {
    return absl::StrCat(R"(
version: 1
envoy:
  domains:
    - domain: regional
      descriptors:
        - key: tenant
          rate_limit: {unit: minute, requests_per_unit: 20, name: federated,
                       federated: {region: )",
                        region, R"(, batch: 4}}
)");
  };
  ManualClock clock(kStart);
  auto store = MemoryCoordinator::create(
      {}, std::make_shared<ClockAdapter<ServerClock>>(ServerClock{&clock}));
  ASSERT_TRUE(store.ok()) << store.status();
  const std::shared_ptr<Coordinator> shared(*std::move(store));
  EnvoyDoor a(fleet("eu-west"), shared, &clock);
  EnvoyDoor b(fleet("us-east"), shared, &clock);
  int ok = 0;
  for (int i = 0; i < 40; ++i) {
    clock.advance_ms(100);
    const R r = (i % 2 == 0 ? a : b).decide("regional", {{"tenant", "acme"}});
    ASSERT_EQ(r.statuses_size(), 1);
    const R::DescriptorStatus& st = r.statuses(0);
    ok += st.code() == R::OK ? 1 : 0;
    EXPECT_EQ(st.current_limit().name(), "federated");
    EXPECT_EQ(st.current_limit().requests_per_unit(), 20u);
    EXPECT_EQ(st.current_limit().unit(), R::RateLimit::MINUTE);
    const int64_t until = 60'000 - (clock.now_ms() - kStart);
    EXPECT_EQ(st.duration_until_reset().seconds() * 1000 +
                  st.duration_until_reset().nanos() / 1'000'000,
              until)
        << i;
    EXPECT_EQ(r.overall_code(), st.code());
  }
  // One budget for both regions: the window's 20, and not one more.
  EXPECT_EQ(ok, 20);

  // The next window: `a` spends one of its batch; once it closes, its 3
  // unspent credits are back in the window, and `b` spends all 19.
  clock.set_ms(kStart + 60'000);
  EXPECT_EQ(a.decide("regional", {{"tenant", "acme"}}).statuses(0).code(),
            R::OK);
  ASSERT_TRUE(a.server().policies().close().ok());
  int b_ok = 0;
  while (b_ok < 30 &&
         b.decide("regional", {{"tenant", "acme"}}).statuses(0).code() ==
             R::OK) {
    ++b_ok;
  }
  EXPECT_EQ(b_ok, 19);
}

// Two servers over one shared store (the memory coordinator, which the
// conformance suites hold equal to Redis and Postgres) on one manual
// clock: a strict limit and a leased one (batch 4), each descriptor counted
// across both servers, every response field as documented, and close()
// giving a server's unspent credits back to the other.
TEST(EnvoyRls, TwoServersOnOneStoreShareEachLimit) {
  constexpr char kFleet[] = R"(
version: 1
envoy:
  domains:
    - domain: fleet
      descriptors:
        - key: user
          rate_limit: {unit: minute, requests_per_unit: 10, name: strict}
        - key: route
          rate_limit: {unit: minute, requests_per_unit: 20, name: leased,
                       leased: {batch: 4}}
)";
  ManualClock clock(kStart);
  auto store = MemoryCoordinator::create(
      {}, std::make_shared<ClockAdapter<ServerClock>>(ServerClock{&clock}));
  ASSERT_TRUE(store.ok()) << store.status();
  const std::shared_ptr<Coordinator> shared(*std::move(store));
  EnvoyDoor a(kFleet, shared, &clock);
  EnvoyDoor b(kFleet, shared, &clock);
  const auto both = [](EnvoyDoor& door) {
    return door.decide(
        rls_request("fleet", {rls_descriptor({{"user", "ann"}}),
                              rls_descriptor({{"route", "/cart"}})}));
  };
  int strict_ok = 0;
  int leased_ok = 0;
  for (int i = 0; i < 40; ++i) {
    clock.advance_ms(100);
    const R r = both(i % 2 == 0 ? a : b);
    const R::DescriptorStatus& user = r.statuses(0);
    const R::DescriptorStatus& route = r.statuses(1);
    strict_ok += user.code() == R::OK ? 1 : 0;
    leased_ok += route.code() == R::OK ? 1 : 0;
    // The strict limit's remaining is the store's count, across servers.
    EXPECT_EQ(user.limit_remaining(),
              static_cast<uint32_t>(std::max(0, 10 - strict_ok)))
        << i;
    EXPECT_EQ(user.current_limit().name(), "strict");
    EXPECT_EQ(route.current_limit().name(), "leased");
    EXPECT_EQ(route.current_limit().requests_per_unit(), 20u);
    // Both windows end on the minute: kStart is a minute boundary.
    const int64_t until = 60'000 - (clock.now_ms() - kStart);
    EXPECT_EQ(user.duration_until_reset().seconds() * 1000 +
                  user.duration_until_reset().nanos() / 1'000'000,
              until)
        << i;
    EXPECT_EQ(route.duration_until_reset().seconds() * 1000 +
                  route.duration_until_reset().nanos() / 1'000'000,
              until)
        << i;
    EXPECT_EQ(r.overall_code(), user.code() == R::OK && route.code() == R::OK
                                    ? R::OK
                                    : R::OVER_LIMIT);
  }
  EXPECT_EQ(strict_ok, 10);
  // Window-coupled leases: the two servers together spend the window's 20
  // credits, and not one more.
  EXPECT_EQ(leased_ok, 20);

  // The next window: `a` leases a batch of 4 and spends one; `b` spends
  // the other 16, then is refused; once `a` closes, its 3 unspent credits
  // are back in the window for `b`.
  clock.set_ms(kStart + 60'000);
  EXPECT_EQ(a.decide("fleet", {{"route", "/cart"}}).statuses(0).code(), R::OK);
  int b_ok = 0;
  while (b_ok < 30 &&
         b.decide("fleet", {{"route", "/cart"}}).statuses(0).code() == R::OK) {
    ++b_ok;
  }
  EXPECT_EQ(b_ok, 16);
  ASSERT_TRUE(a.server().policies().close().ok());
  // `b` marked the window spent: it leases again once per spent_recheck_ms
  // (an eighth of the window), denying without a round trip in between.
  EXPECT_NE(b.decide("fleet", {{"route", "/cart"}}).statuses(0).code(), R::OK);
  clock.advance_ms(60'000 / 8);
  int returned = 0;
  while (returned < 10 &&
         b.decide("fleet", {{"route", "/cart"}}).statuses(0).code() == R::OK) {
    ++returned;
  }
  EXPECT_EQ(returned, 3);
}

}  // namespace
}  // namespace envoy_rls_test
}  // namespace throttlekit::server
