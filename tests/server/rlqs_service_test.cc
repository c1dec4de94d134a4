// The quota door's stream service (src/server/rlqs_service.h,
// quota_door.h, docs/rlqs.md): a real server on loopback over the embedded
// store on the real clock, and clients that behave as Envoy's filter does
// (rlqs_emulator.h) or raw streams for bad input. One client gets the whole
// limit, equal demands split it, bad reports end their stream with their
// status and change nothing, unknown domains both ways, blanket rules and
// unmatched buckets, a stream break keeps the budget committed until the
// assignment expires, fifty clients with demand shifts and breaks stay
// within docs/rlqs.md's bound and near the limit (rlqs_fleet_run.h), idle
// buckets are abandoned and their budget dropped, metrics, a reload
// through the watcher, and shutdown with streams open.
//
// Reports come every 1 s here (Envoy: 5 s): `time_elapsed` is whole
// seconds, so a shorter period would read as 0 s and halve the demand the
// server sees. The TTL is the least allowed, 2 s, with a fill interval of
// 1 s.

#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "config.h"
#include "config_watcher.h"
#include "gtest/gtest.h"
#include "policies.h"
#include "quota_door.h"
#include "rlqs_emulator.h"
#include "rlqs_fleet_run.h"
#include "rlqs_load.h"
#include "server.h"
#include "started_server.h"
#include "support/manual_clock_server.h"

namespace throttlekit::server {
namespace rlqs_service_test {
namespace {

using testing::drive;
using testing::holds_tokens;
using testing::Load;
using testing::RlqsEmulator;
using testing::RlqsEmulatorOptions;
using testing::RlqsId;
using testing::steady_ms;
using testing::tokens_of;
using Kind = RlqsEmulator::Kind;

constexpr int64_t kLimit = 100;
constexpr int64_t kPeriodMs = 1000;

const char* const kConfig = R"(
version: 1
rlqs:
  unknownDomain: allow
  domains:
    - domain: edge
      assignmentTtl: 2s
      buckets:
        - match: {name: api}
          limit: {requests: 100, per: 1s}
        - match: {name: open}
          allow: true
        - match: {name: closed}
          deny: true
      unmatched: deny
    - domain: strict
      buckets:
        - match: {name: api}
          limit: {requests: 10, per: 1s}
)";

const RlqsId kApi = {{"name", "api"}};

// A server of `yaml` on the real clock, and its clients.
class QuotaDoorTest : public ::testing::Test {
 protected:
  void start(const std::string& yaml = kConfig) {
    absl::StatusOr<ServerConfig> config = parse_config(yaml, "test.yaml");
    ASSERT_TRUE(config.ok()) << config.status();
    server_ = testing::start_server(*config);
    ASSERT_NE(server_, nullptr);
  }
  void SetUp() override { start(); }
  void TearDown() override {
    clients_.clear();
    if (server_ != nullptr) server_->shutdown();
  }

  RlqsEmulator& client(RlqsEmulatorOptions o = {
                           .report_period_ms = kPeriodMs}) {
    clients_.push_back(std::make_unique<RlqsEmulator>(
        testing::loopback_channel(server_->port()), std::move(o)));
    return *clients_.back();
  }

  QuotaDoor& door() { return server_->quota_door(); }

  std::unique_ptr<Server> server_;
  std::vector<std::unique_ptr<RlqsEmulator>> clients_;
};

TEST_F(QuotaDoorTest, OneClientGetsTheWholeLimit) {
  RlqsEmulator& a = client();
  std::vector<Load> load = {{&a, kApi, 300}};
  ASSERT_TRUE(drive(load, 4000, [&] { return holds_tokens(a, kApi, 100); }));
  EXPECT_EQ(tokens_of(a, kApi), kLimit);
  std::optional<RlqsEmulator::View> v = a.bucket(kApi);
  EXPECT_EQ(v->tokens_per_fill, kLimit);
  EXPECT_EQ(door().budgets(), 1u);
  EXPECT_EQ(door().streams_open(), 1u);
  // The metrics name the domain and the rule, not the bucket id.
  const std::string text = server_->prometheus_text();
  EXPECT_TRUE(absl::StrContains(text, "throttlekit_rlqs_streams_open 1\n"))
      << text;
  EXPECT_TRUE(absl::StrContains(text, "throttlekit_rlqs_budgets 1\n"));
  EXPECT_TRUE(absl::StrContains(text, "throttlekit_rlqs_clients 1\n"));
  EXPECT_TRUE(
      absl::StrContains(text, "throttlekit_rlqs_bad_reports_total 0\n"));
  EXPECT_TRUE(absl::StrContains(
      text,
      "throttlekit_rlqs_requests_total{domain=\"edge\",rule=\"0\",allowed="
      "\"true\"} "));
  EXPECT_FALSE(absl::StrContains(
      text,
      "throttlekit_rlqs_requests_total{domain=\"edge\",rule=\"0\","
      "allowed=\"false\"} 0\n"))
      << "the denied requests reported are counted";
  EXPECT_FALSE(
      absl::StrContains(text, "throttlekit_rlqs_assignments_sent_total 0\n"));
}

TEST_F(QuotaDoorTest, TwoClientsWithEqualDemandSplitTheLimit) {
  RlqsEmulator& a = client();
  RlqsEmulator& b = client();
  std::vector<Load> load = {{&a, kApi, 300}, {&b, kApi, 300}};
  uint32_t most = 0;
  ASSERT_TRUE(drive(load, 5000,
                    [&] {
                      const uint32_t ta = tokens_of(a, kApi),
                                     tb = tokens_of(b, kApi);
                      most = std::max(most, ta + tb);
                      return ta == 50 && tb == 50;
                    }))
      << tokens_of(a, kApi) << " + " << tokens_of(b, kApi);
  EXPECT_LE(most, kLimit);
  EXPECT_EQ(door().budgets(), 1u);
}

// A raw stream, for what the emulator would never send.
class RawStream {
 public:
  explicit RawStream(int port)
      : stub_(rlqs_pb::RateLimitQuotaService::NewStub(
            testing::loopback_channel(port))),
        rw_(stub_->StreamRateLimitQuotas(&ctx_)) {}
  void send(const std::string& domain,
            std::vector<rlqs_pb::RateLimitQuotaUsageReports::BucketQuotaUsage>
                usages) {
    rlqs_pb::RateLimitQuotaUsageReports r;
    r.set_domain(domain);
    for (auto& u : usages) *r.add_bucket_quota_usages() = std::move(u);
    rw_->Write(r);
  }
  // Reads until the stream ends; its status.
  grpc::Status end() {
    rlqs_pb::RateLimitQuotaResponse resp;
    while (rw_->Read(&resp)) {
    }
    return rw_->Finish();
  }

 private:
  std::unique_ptr<rlqs_pb::RateLimitQuotaService::Stub> stub_;
  grpc::ClientContext ctx_;
  std::unique_ptr<grpc::ClientReaderWriter<rlqs_pb::RateLimitQuotaUsageReports,
                                           rlqs_pb::RateLimitQuotaResponse>>
      rw_;
};

rlqs_pb::RateLimitQuotaUsageReports::BucketQuotaUsage usage(
    const RlqsId& id, int64_t allowed = 1, int64_t elapsed_s = 0) {
  rlqs_pb::RateLimitQuotaUsageReports::BucketQuotaUsage u;
  for (const auto& [k, v] : id)
    (*u.mutable_bucket_id()->mutable_bucket())[k] = v;
  u.set_num_requests_allowed(static_cast<uint64_t>(allowed));
  u.mutable_time_elapsed()->set_seconds(elapsed_s);
  return u;
}

TEST_F(QuotaDoorTest, BadReportsEndTheirStreamNamingTheFieldAndChangeNothing) {
  // A well-behaved client holds the whole limit throughout.
  RlqsEmulator& good = client();
  std::vector<Load> load = {{&good, kApi, 300}};
  ASSERT_TRUE(drive(load, 4000, [&] { return holds_tokens(good, kApi, 100); }));
  const RlqsId fresh = {{"name", "api"}, {"tenant", "fresh"}};
  const auto with = [&](auto edit) {
    auto u = usage(fresh);
    edit(u);
    return u;
  };
  struct Case {
    std::string name;
    std::string first_domain;  // empty: no first well-formed message
    std::string domain;
    std::vector<rlqs_pb::RateLimitQuotaUsageReports::BucketQuotaUsage> usages;
    std::string expected;
  };
  using U = rlqs_pb::RateLimitQuotaUsageReports::BucketQuotaUsage;
  const std::vector<Case> cases = {
      {"no domain", "", "", {usage(fresh)}, "domain: empty"},
      {"domain change",
       "edge",
       "strict",
       {usage(fresh)},
       "domain: \"strict\" differs from the stream's \"edge\""},
      {"empty bucket id",
       "",
       "edge",
       {usage(fresh), U()},
       "bucket_quota_usages[1].bucket_id: empty"},
      {"count over 2^40",
       "",
       "edge",
       {usage(fresh),
        with([](U& u) { u.set_num_requests_denied((uint64_t{1} << 40) + 1); })},
       "bucket_quota_usages[1].num_requests_denied: 1099511627777 is over "
       "2^40"},
      {"negative elapsed",
       "",
       "edge",
       {with([](U& u) { u.mutable_time_elapsed()->set_seconds(-1); })},
       "bucket_quota_usages[0].time_elapsed: negative"},
      {"elapsed over a day",
       "",
       "edge",
       {with([](U& u) { u.mutable_time_elapsed()->set_seconds(86'401); })},
       "bucket_quota_usages[0].time_elapsed: 86401 s is over a day"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    RawStream s(server_->port());
    if (!c.first_domain.empty()) {
      s.send(c.first_domain, {});
    }
    s.send(c.domain, c.usages);
    const grpc::Status st = s.end();
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_TRUE(absl::StrContains(st.error_message(), c.expected))
        << st.error_message();
  }
  // Nothing else changed: no budget for the fresh bucket, and the good
  // client still holds the whole limit.
  EXPECT_EQ(door().budgets(), 1u);
  EXPECT_EQ(tokens_of(good, kApi), kLimit);
  EXPECT_TRUE(absl::StrContains(server_->prometheus_text(),
                                "throttlekit_rlqs_bad_reports_total 6\n"));
}

TEST_F(QuotaDoorTest, AnUnknownDomainIsAllowedAllOrNotFound) {
  RlqsEmulator& c =
      client({.domain = "elsewhere", .report_period_ms = kPeriodMs});
  (void)c.request(kApi);
  EXPECT_TRUE(c.wait_for_bucket(
      kApi, [](const auto& v) { return v.kind == Kind::kAllowAll; }, 3000));
  EXPECT_EQ(door().budgets(), 0u);

  clients_.clear();
  server_->shutdown();
  start(
      absl::StrCat("version: 1\nrlqs:\n  unknownDomain: notFound\n"
                   "  domains:\n    - domain: edge\n"));
  RawStream s(server_->port());
  s.send("elsewhere", {usage(kApi)});
  const grpc::Status st = s.end();
  EXPECT_EQ(st.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_TRUE(absl::StrContains(st.error_message(), "\"elsewhere\""))
      << st.error_message();
}

TEST_F(QuotaDoorTest, BlanketRulesAndUnmatchedBucketsAreRefreshed) {
  RlqsEmulator& c = client();
  const RlqsId open = {{"name", "open"}}, closed = {{"name", "closed"}},
               other = {{"name", "other"}};
  (void)c.request(open);
  (void)c.request(closed);
  (void)c.request(other);
  const auto is = [](Kind k) {
    return [k](const RlqsEmulator::View& v) { return v.kind == k; };
  };
  ASSERT_TRUE(c.wait_for_bucket(open, is(Kind::kAllowAll), 3000));
  ASSERT_TRUE(c.wait_for_bucket(closed, is(Kind::kDenyAll), 3000));
  ASSERT_TRUE(c.wait_for_bucket(other, is(Kind::kDenyAll), 3000));
  EXPECT_TRUE(c.request(open));
  EXPECT_FALSE(c.request(closed));
  EXPECT_FALSE(c.request(other));
  EXPECT_EQ(door().budgets(), 0u);
  // Re-sent at half the TTL (2 s): the assignment's end moves on.
  const int64_t first_end = c.bucket(open)->expires_ms;
  EXPECT_TRUE(c.wait_for_bucket(
      open, [&](const auto& v) { return v.expires_ms > first_end; }, 2500));
}

TEST_F(QuotaDoorTest, ABrokenStreamsBudgetStaysCommittedUntilItExpires) {
  RlqsEmulator& a = client();
  std::vector<Load> load = {{&a, kApi, 300}};
  ASSERT_TRUE(drive(load, 4000, [&] { return holds_tokens(a, kApi, 100); }));
  a.break_stream();
  // What the broken stream's client may go on using, and until when.
  const int64_t a_until = a.bucket(kApi)->expires_ms;
  RlqsEmulator& b = client();
  std::vector<Load> load_b = {{&b, kApi, 300}};
  int64_t first_tokens_ms = 0;
  ASSERT_TRUE(drive(load_b, 6000, [&] {
    if (first_tokens_ms == 0 && tokens_of(b, kApi) > 0) {
      first_tokens_ms = steady_ms();
    }
    return holds_tokens(b, kApi, 90);
  }));
  EXPECT_GE(first_tokens_ms, a_until)
      << "the new client got budget while the old one could still hold it";
}

// The fleet scenario (rlqs_fleet_run.h) on one server over the embedded
// store: 50 clients over and under the limit, stream breaks and a demand
// jump followed within three reports, within the bound.
TEST(QuotaDoorAlone, FiftyClientsShareOneBudgetWithinTheBound) {
  absl::StatusOr<ServerConfig> config =
      parse_config(testing::rlqs_fleet_yaml("edge"), "fleet.yaml");
  ASSERT_TRUE(config.ok()) << config.status();
  testing::run_rlqs_fleet(1, "edge", [&](int) {
    return testing::start_rlqs_server(*config, nullptr, "alone");
  });
}

// abandonIdle: a bucket reported with no requests for 2 s is abandoned
// (the client erases it), its budget is dropped once the assignment it
// held has expired, and the next request reports the bucket afresh.
TEST_F(QuotaDoorTest, AnIdleBucketIsAbandonedAndItsBudgetDropped) {
  server_->shutdown();
  start(R"(
version: 1
rlqs:
  abandonIdle: 2s
  domains:
    - domain: edge
      assignmentTtl: 2s
      buckets:
        - match: {name: api}
          limit: {requests: 100, per: 1s}
        - match: {name: open}
          allow: true
)");
  const RlqsId open = {{"name", "open"}};
  RlqsEmulator& a = client();
  std::vector<Load> load = {{&a, kApi, 20}, {&a, open, 5}};
  ASSERT_TRUE(drive(load, 3000, [&] {
    return holds_tokens(a, kApi, 1) && a.bucket(open).has_value() &&
           a.bucket(open)->kind == Kind::kAllowAll;
  }));
  EXPECT_EQ(door().budgets(), 1u);
  // Idle from now: the reports of the next 2 s and more count nothing.
  const int64_t idle_from = steady_ms();
  ASSERT_TRUE(testing::LoadThreads::wait(6000, [&] {
    return !a.bucket(kApi).has_value() && !a.bucket(open).has_value();
  }));
  EXPECT_GE(steady_ms() - idle_from, 2000);
  EXPECT_TRUE(absl::StrContains(server_->prometheus_text(),
                                "throttlekit_rlqs_abandoned_total 2\n"));
  // The budget goes once the 100 it assigned no longer counts.
  EXPECT_TRUE(
      testing::LoadThreads::wait(5000, [&] { return door().budgets() == 0; }));
  // Traffic again: reported afresh, a new budget, tokens again.
  ASSERT_TRUE(drive(load, 3000, [&] { return holds_tokens(a, kApi, 1); }));
  EXPECT_EQ(door().budgets(), 1u);
}

// A reload through the watcher (config_watcher.h) applies a changed
// `rlqs:` block: the limit a running client holds follows at once, a
// change the door refuses (fleetHeartbeat) refuses the whole document, the
// Envoy block included, and the metrics count both (docs/rlqs.md,
// "Reloading").
TEST_F(QuotaDoorTest, AReloadThroughTheWatcherChangesTheLimitAtOnce) {
  const std::string path =
      absl::StrCat(::testing::TempDir(), "/rlqs-reload-", getpid(), ".yaml");
  const auto write = [&](const std::string& text) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << text;
    ASSERT_TRUE(out.good()) << path;
  };
  write(kConfig);
  auto watcher = ConfigWatcher::start(path, server_->policies(),
                                      {.background = false}, &door());
  ASSERT_TRUE(watcher.ok()) << watcher.status();
  RlqsEmulator& a = client();
  std::vector<Load> load = {{&a, kApi, 300}};
  ASSERT_TRUE(drive(load, 4000, [&] { return holds_tokens(a, kApi, 100); }));

  std::string next = kConfig;
  const std::string was = "limit: {requests: 100, per: 1s}";
  next.replace(next.find(was), was.size(), "limit: {requests: 7, per: 1s}");
  write(next);
  ASSERT_EQ((*watcher)->poll().value_or(false), true);
  EXPECT_EQ(door().budgets(), 1u);
  // Lowered by the server, without waiting for a report.
  EXPECT_TRUE(a.wait_for_bucket(
      kApi, [](const auto& v) { return v.tokens_per_fill == 7; }, 2000))
      << tokens_of(a, kApi);

  write(absl::StrCat(next, "  fleetHeartbeat: 2s\n"));
  const absl::StatusOr<bool> refused = (*watcher)->poll();
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(
      absl::StrContains(refused.status().message(), "rlqs.fleetHeartbeat"))
      << refused.status();
  const std::string text = server_->prometheus_text();
  EXPECT_TRUE(absl::StrContains(
      text, "throttlekit_rlqs_reloads_total{result=\"applied\"} 1\n"))
      << text;
  EXPECT_TRUE(absl::StrContains(
      text, "throttlekit_rlqs_reloads_total{result=\"refused\"} 1\n"));
  EXPECT_TRUE(absl::StrContains(
      text, "throttlekit_envoy_reloads_total{result=\"refused\"} 1\n"));
  std::remove(path.c_str());
}

TEST_F(QuotaDoorTest, ShutdownFinishesOpenStreams) {
  RlqsEmulator& c = client();
  (void)c.request(kApi);
  ASSERT_TRUE(c.wait_for_bucket(
      kApi, [](const auto& v) { return v.kind != Kind::kNone; }, 3000));
  ASSERT_EQ(door().streams_open(), 1u);
  server_->shutdown();
  const std::optional<grpc::Status> st = c.wait_for_end(3000);
  ASSERT_TRUE(st.has_value());
  EXPECT_EQ(st->error_code(), grpc::StatusCode::UNAVAILABLE)
      << st->error_message();
  EXPECT_EQ(door().streams_open(), 0u);
}

}  // namespace
}  // namespace rlqs_service_test
}  // namespace throttlekit::server
