// The server's YAML configuration (src/server/config.h): what loads, and
// every refusal naming the source, the path in the document and the
// problem.

#include "config.h"

#include <string>
#include <variant>

#include "gtest/gtest.h"
#include "support/config_error.h"

namespace throttlekit::server {
namespace config_test {
namespace {

using testing::has;

// The error of parsing `yaml` (the test fails if it parses).
std::string error_of(const std::string& yaml) {
  return testing::config_error(yaml, "bad.yaml");
}

TEST(ServerConfig, LoadsEveryPolicyKind) {
  absl::StatusOr<ServerConfig> c = parse_config(R"(
version: 1
leaseTtl: 2s
maxKeyBytes: 256
limiters:
  api: {strategy: gcra, limit: 100, period: 1m, burst: 20}
  bucket: {strategy: tokenBucket, capacity: 10, refillPerSec: 2.5}
  fixed: {strategy: fixedWindow, limit: 5, windowMs: 1000}
  sliding: {strategy: slidingWindow, limit: 50, period: 10s, buckets: 5}
  log: {strategy: slidingLog, limit: 3, period: 500ms}
  daily: {strategy: quota, limit: 1000, period: day, offsetMinutes: -300}
  fixedQuota: {strategy: quota, limit: 7, period: 1h, anchorMs: 0}
  tokens: {strategy: tokenBudget, budget: 100000, period: 1h}
  checkout:
    admission:
      concurrency: {maxInflight: 8}
      rate: {strategy: gcra, limit: 50, period: 1s}
      cost: {strategy: tokenBucket, capacity: 1000, refillPerSec: 100}
  adaptive:
    admission:
      concurrency: {adaptive: aimd, minLimit: 2, maxLimit: 40}
  completions:
    fleetBudget: {budget: 1000000, windowMs: 60000}
)",
                                                "good.yaml");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->lease_ttl_ms, 2000);
  EXPECT_EQ(c->max_key_bytes, 256);
  ASSERT_EQ(c->policies.size(), 11u);
  EXPECT_EQ(c->policies[0].name, "api");
  const auto& api = std::get<LimiterPolicy>(c->policies[0].body);
  const auto& gcra = std::get<Gcra::Options>(api.strategy.options);
  EXPECT_EQ(gcra.limit, 100);
  EXPECT_EQ(gcra.period_ms, 60'000);
  EXPECT_EQ(gcra.burst, 20);
  const auto& bucket = std::get<TokenBucket::Options>(
      std::get<LimiterPolicy>(c->policies[1].body).strategy.options);
  EXPECT_EQ(bucket.refill_per_sec, 2.5);
  EXPECT_EQ(std::get<SlidingLog::Options>(
                std::get<LimiterPolicy>(c->policies[4].body).strategy.options)
                .window_ms,
            500);
  const auto& daily = std::get<Quota::Options>(
      std::get<LimiterPolicy>(c->policies[5].body).strategy.options);
  EXPECT_EQ(daily.period, QuotaPeriod::kDay);
  EXPECT_EQ(daily.offset_minutes, -300);
  const auto& fixed_quota = std::get<Quota::Options>(
      std::get<LimiterPolicy>(c->policies[6].body).strategy.options);
  EXPECT_EQ(fixed_quota.period, QuotaPeriod::kFixed);
  EXPECT_EQ(fixed_quota.period_ms, 3'600'000);
  const auto& checkout = std::get<AdmissionPolicy>(c->policies[8].body);
  ASSERT_TRUE(checkout.concurrency.has_value());
  EXPECT_EQ(checkout.concurrency->max_inflight, 8);
  ASSERT_TRUE(checkout.rate.has_value());
  ASSERT_TRUE(checkout.cost.has_value());
  const auto& adaptive = std::get<AdmissionPolicy>(c->policies[9].body);
  ASSERT_TRUE(adaptive.concurrency->adaptive.has_value());
  EXPECT_EQ(adaptive.concurrency->adaptive->law, ConcurrencyLaw::kAimd);
  EXPECT_EQ(adaptive.concurrency->adaptive->max_limit, 40);
  EXPECT_FALSE(adaptive.rate.has_value());
  const auto& budget = std::get<FleetBudgetPolicy>(c->policies[10].body);
  EXPECT_EQ(budget.budget, 1'000'000);
  EXPECT_EQ(budget.window_ms, 60'000);
}

TEST(ServerConfig, LoadsAFederatedLimiter) {
  absl::StatusOr<ServerConfig> c = parse_config(R"(
version: 1
limiters:
  global:
    federated: {batch: 32, region: eu-west}
    strategy: fixedWindow
    limit: 10000
    period: 1m
  plain: {strategy: fixedWindow, limit: 5, period: 1s}
)",
                                                "fed.yaml");
  ASSERT_TRUE(c.ok()) << c.status();
  const auto& global = std::get<LimiterPolicy>(c->policies[0].body);
  ASSERT_TRUE(global.federated.has_value());
  EXPECT_EQ(global.federated->batch, 32);
  EXPECT_EQ(global.federated->region, "eu-west");
  EXPECT_EQ(std::get<FixedWindow::Options>(global.strategy.options).limit,
            10000);
  EXPECT_FALSE(std::get<LimiterPolicy>(c->policies[1].body).federated);
}

TEST(ServerConfig, LoadsDistributedConcurrency) {
  absl::StatusOr<ServerConfig> c = parse_config(R"(
version: 1
limiters:
  pool:
    distributedConcurrency: {minLimit: 4, maxLimit: 200, aggregate: median}
  tuned:
    distributedConcurrency:
      adaptive: aimd
      initialLimit: 10
      heartbeat: 250ms
      leaseTtl: 1s
      handoff: false
      eagerHeartbeats: true
      demandProportional: true
      fenceMargin: 100ms
  combined:
    admission:
      concurrency: {distributed: {maxLimit: 50}}
      rate: {strategy: gcra, limit: 10, period: 1s}
)",
                                                "dc.yaml");
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ(c->policies.size(), 3u);
  const auto& pool = std::get<AdmissionPolicy>(c->policies[0].body);
  ASSERT_TRUE(pool.concurrency.has_value());
  ASSERT_TRUE(pool.concurrency->distributed.has_value());
  EXPECT_FALSE(pool.rate.has_value());
  const DistributedConcurrencyOptions& p =
      pool.concurrency->distributed->options;
  EXPECT_EQ(p.local.min_limit, 4);
  EXPECT_EQ(p.local.max_limit, 200);
  EXPECT_EQ(p.local.law, ConcurrencyLaw::kGradient2);
  EXPECT_EQ(p.aggregate, HeartbeatAggregate::kLowerMedian);
  EXPECT_TRUE(p.handoff) << "the server's default holds the hard bound";
  EXPECT_EQ(p.heartbeat_ms, 1000);
  EXPECT_FALSE(p.self_fencing);
  EXPECT_EQ(p.outage, ConcurrencyOutageMode::kFailClosed);

  const DistributedConcurrencyOptions& t =
      std::get<AdmissionPolicy>(c->policies[1].body)
          .concurrency->distributed->options;
  EXPECT_EQ(t.local.law, ConcurrencyLaw::kAimd);
  EXPECT_EQ(t.local.initial_limit, 10);
  EXPECT_EQ(t.heartbeat_ms, 250);
  EXPECT_EQ(t.lease_ttl_ms, 1000);
  EXPECT_FALSE(t.handoff);
  EXPECT_TRUE(t.eager_heartbeats);
  EXPECT_TRUE(t.demand_proportional);
  EXPECT_TRUE(t.self_fencing);
  EXPECT_EQ(t.fence_safety_margin_ms, 100);
  EXPECT_EQ(t.aggregate, HeartbeatAggregate::kMin);

  const auto& combined = std::get<AdmissionPolicy>(c->policies[2].body);
  ASSERT_TRUE(combined.concurrency->distributed.has_value());
  EXPECT_EQ(combined.concurrency->distributed->options.local.max_limit, 50);
  EXPECT_TRUE(combined.rate.has_value());
}

TEST(ServerConfig, LoadsFairEscrows) {
  absl::StatusOr<ServerConfig> c = parse_config(R"(
version: 1
limiters:
  local:
    fairEscrow:
      limit: 100
      period: 1s
      quantum: 8
      tenants:
        - {name: acme, weight: 2.5}
        - {name: free, hardCap: 10}
  fleet:
    federatedFairEscrow:
      limit: 6000
      windowMs: 60000
      region: eu-west
      tenants: [{name: acme, weight: 3}, {name: free, weight: 1, hardCap: 200}]
)",
                                                "fair.yaml");
  ASSERT_TRUE(c.ok()) << c.status();
  const auto& local = std::get<FairEscrowPolicy>(c->policies[0].body);
  EXPECT_FALSE(local.federated);
  EXPECT_EQ(local.limit, 100);
  EXPECT_EQ(local.window_ms, 1000);
  EXPECT_EQ(local.quantum, 8);
  ASSERT_EQ(local.tenants.size(), 2u);
  EXPECT_EQ(local.tenants[0].name, "acme");
  EXPECT_EQ(local.tenants[0].weight, 2.5);
  EXPECT_EQ(local.tenants[1].weight, 1);
  EXPECT_EQ(local.tenants[1].hard_cap, 10);
  const auto& fleet = std::get<FairEscrowPolicy>(c->policies[1].body);
  EXPECT_TRUE(fleet.federated);
  EXPECT_EQ(fleet.region, "eu-west");
  EXPECT_EQ(fleet.window_ms, 60000);
  EXPECT_EQ(fleet.quantum, 16);
  EXPECT_EQ(fleet.tenants[1].hard_cap, 200);
}

TEST(ServerConfig, ErrorsNameTheSourceThePathAndTheProblem) {
  const std::string e = error_of(R"(
version: 1
limiters:
  api: {strategy: gcra, limit: ten, period: 1m}
)");
  EXPECT_TRUE(has(e,
                  "bad.yaml: limiters.api.limit: must be an integer in "
                  "[1, 2^53-1]; got \"ten\""))
      << e;
}

TEST(ServerConfig, RefusesEachBadDocument) {
  struct Case {
    const char* yaml;
    const char* expect;  // a substring of the error
  };
  const Case cases[] = {
      {"limiters: {a: {strategy: gcra, limit: 1, period: 1s}}",
       "(document): missing `version: 1`"},
      {"version: 2\nlimiters: {a: {strategy: gcra, limit: 1, period: 1s}}",
       "version: must be 1; got \"2\""},
      {"version: 1", "missing `limiters`"},
      {"version: 1\nlimiters: {}", "limiters: must be a non-empty mapping"},
      {"- 1\n- 2", "(document): must be a mapping"},
      {"version: 1\nlimiters: {a: {strategy: gcra, limit: 1, period: 1s}}\n"
       "extra: 1",
       "extra: unknown key"},
      {"version: 1\nlimiters: {a: {strategy: gcra, limit: 1, period: 1s, "
       "brust: 3}}",
       "limiters.a.brust: unknown key; expected one of"},
      {"version: 1\nlimiters: {a: {strategy: gcrb, limit: 1, period: 1s}}",
       "limiters.a.strategy: unknown strategy \"gcrb\""},
      {"version: 1\nlimiters: {a: {strategy: gcra, limit: 1}}",
       "limiters.a: missing the window"},
      {"version: 1\nlimiters: {a: {strategy: gcra, limit: 1, period: 1s, "
       "periodMs: 1000}}",
       "limiters.a: give the window once"},
      {"version: 1\nlimiters: {a: {strategy: gcra, limit: 1, period: 1w}}",
       "limiters.a.period: must be a duration"},
      {"version: 1\nlimiters: {a: {strategy: gcra, limit: 1, period: -5}}",
       "limiters.a.period: must be a duration"},
      {"version: 1\nlimiters: {a: {strategy: gcra, limit: 1, period: "
       "99999999999999999d}}",
       "limiters.a.period: must be a duration"},
      {"version: 1\nlimiters: {a: {strategy: gcra, limit: 0, period: 1s}}",
       "limiters.a.limit: must be an integer in [1, 2^53-1]; got \"0\""},
      {"version: 1\nlimiters: {a: {strategy: gcra, limit: 1.5, period: 1s}}",
       "got \"1.5\""},
      {"version: 1\nlimiters: {a: {strategy: tokenBucket, capacity: 1, "
       "refillPerSec: .nan}}",
       "limiters.a.refillPerSec: must be a finite number > 0"},
      {"version: 1\nlimiters: {a: {strategy: tokenBucket, capacity: 1}}",
       "limiters.a: missing `refillPerSec`"},
      {"version: 1\nlimiters: {a: {strategy: leakyBucket}}",
       "leakyBucket shapes traffic"},
      {"version: 1\nlimiters: {a: {limit: 1}}",
       "limiters.a: needs exactly one of strategy"},
      {"version: 1\nlimiters: {a: {strategy: gcra, limit: 1, period: 1s, "
       "fleetBudget: {budget: 1, windowMs: 1}}}",
       "limiters.a: needs exactly one of strategy"},
      {"version: 1\nlimiters: {a: {admission: {}}}",
       "limiters.a.admission: needs at least one axis"},
      {"version: 1\nlimiters: {a: {admission: {concurrency: {}}}}",
       "limiters.a.admission.concurrency: needs maxInflight"},
      {"version: 1\nlimiters: {a: {admission: {concurrency: {maxInflight: 2, "
       "adaptive: aimd}}}}",
       "not both"},
      {"version: 1\nlimiters: {a: {admission: {concurrency: {adaptive: "
       "vegas}}}}",
       "limiters.a.admission.concurrency.adaptive: must be gradient2 or aimd"},
      {"version: 1\nlimiters: {a: {admission: {concurrency: {adaptive: aimd, "
       "minLimit: 50, maxLimit: 10}}}}",
       "limiters.a.admission.concurrency: adaptive_concurrency"},
      {"version: 1\nlimiters: {a: {admission: {rate: {strategy: gcra, "
       "limit: 1}}}}",
       "limiters.a.admission.rate: missing the window"},
      {"version: 1\nlimiters: {a: {admission: {speed: 1}}}",
       "limiters.a.admission.speed: unknown key"},
      {"version: 1\nlimiters: {a: {fleetBudget: {budget: 5}}}",
       "limiters.a.fleetBudget: missing the window"},
      {"version: 1\nlimiters: {a: {federatedFairEscrow: {limit: 2, period: "
       "1s}}}",
       "limiters.a.federatedFairEscrow: missing `tenants`"},
      {"version: 1\nlimiters: {a: {fairEscrow: {limit: 2, period: 1s, "
       "tenants: []}}}",
       "limiters.a.fairEscrow.tenants: must be a non-empty list"},
      {"version: 1\nlimiters: {a: {fairEscrow: {limit: 2, period: 1s, "
       "tenants: [{weight: 2}]}}}",
       "limiters.a.fairEscrow.tenants[0].name: must be the tenant's name"},
      {"version: 1\nlimiters: {a: {fairEscrow: {limit: 2, period: 1s, "
       "tenants: [{name: x, weight: 0}]}}}",
       "limiters.a.fairEscrow.tenants[0].weight: must be a finite number > 0"},
      {"version: 1\nlimiters: {a: {fairEscrow: {limit: 2, period: 1s, "
       "tenants: [{name: x, hardCap: 3}]}}}",
       "limiters.a.fairEscrow.tenants[0].hardCap: must be an integer in "
       "[0, limit]"},
      {"version: 1\nlimiters: {a: {fairEscrow: {limit: 2, period: 1s, "
       "tenants: [{name: x, wieght: 3}]}}}",
       "limiters.a.fairEscrow.tenants[0].wieght: unknown key"},
      {"version: 1\nlimiters: {a: {fairEscrow: {limit: 2, period: 1s, "
       "tenants: [{name: x}, {name: x}]}}}",
       "limiters.a.fairEscrow: weighted_fair_escrow"},
      {"version: 1\nlimiters: {a: {fairEscrow: {limit: 2, period: 1s, "
       "quantum: 0, tenants: [{name: x}]}}}",
       "limiters.a.fairEscrow.quantum: must be an integer in [1, limit]"},
      {"version: 1\nlimiters: {a: {federatedFairEscrow: {limit: 9, period: "
       "1s, tenants: [{name: x, weight: 1.5}]}}}",
       "limiters.a.federatedFairEscrow: federated_fair_escrow"},
      {"version: 1\nlimiters: {a: {fairEscrow: {limit: 9, period: 1s, "
       "region: eu, tenants: [{name: x}]}}}",
       "limiters.a.fairEscrow.region: unknown key"},
      {"version: 1\nlimiters: {a: {fairEscrow: {limit: 9, period: 1s, "
       "tenants: [{name: x}]}, federatedFairEscrow: {limit: 9, period: 1s, "
       "tenants: [{name: x}]}}}",
       "limiters.a: needs exactly one of"},
      {"version: 1\nlimiters: {a: {distributedConcurrency: {minLimit: 2}, "
       "admission: {concurrency: {maxInflight: 1}}}}",
       "limiters.a: needs exactly one of strategy"},
      {"version: 1\nlimiters: {a: {distributedConcurrency: {aggregate: "
       "sum}}}",
       "limiters.a.distributedConcurrency.aggregate: must be min or median"},
      {"version: 1\nlimiters: {a: {distributedConcurrency: {handoff: yes}}}",
       "limiters.a.distributedConcurrency.handoff: must be true or false"},
      {"version: 1\nlimiters: {a: {distributedConcurrency: {outage: "
       "open}}}",
       "limiters.a.distributedConcurrency.outage: must be failClosed or "
       "localOnly"},
      {"version: 1\nlimiters: {a: {distributedConcurrency: {heartbeat: 1s, "
       "leaseTtl: 500ms}}}",
       "limiters.a.distributedConcurrency: "
       "distributed_concurrency.lease_ttl_ms"},
      {"version: 1\nlimiters: {a: {distributedConcurrency: {outage: "
       "localOnly, fenceMargin: 10ms}}}",
       "distributed_concurrency.self_fencing needs outage kFailClosed"},
      {"version: 1\nlimiters: {a: {distributedConcurrency: {minLimit: 9, "
       "maxLimit: 3}}}",
       "limiters.a.distributedConcurrency: adaptive_concurrency"},
      {"version: 1\nlimiters: {a: {distributedConcurrency: {minLimt: 2}}}",
       "limiters.a.distributedConcurrency.minLimt: unknown key"},
      {"version: 1\nlimiters: {a: {admission: {concurrency: {maxInflight: 2, "
       "distributed: {}}}}}",
       "give one of maxInflight"},
      {"version: 1\nlimiters: {a: {federated: {batch: 16}}}",
       "limiters.a: needs exactly one of strategy"},
      {"version: 1\nlimiters: {a: {federated: {batch: 0}, strategy: "
       "fixedWindow, limit: 5, period: 1s}}",
       "limiters.a.federated.batch: must be an integer in [1, 2^20]"},
      {"version: 1\nlimiters: {a: {federated: {bacth: 3}, strategy: "
       "fixedWindow, limit: 5, period: 1s}}",
       "limiters.a.federated.bacth: unknown key"},
      {"version: 1\nlimiters: {a: {strategy: slidingWindow, limit: 10, "
       "period: 1s, buckets: 3000}}",
       "limiters.a: sliding_window"},
      {"version: 1\nmaxKeyBytes: 0\nlimiters: {a: {strategy: gcra, limit: "
       "1, period: 1s}}",
       "maxKeyBytes: must be an integer in [1, 2^20]"},
      {"version: 1\nleaseTtl: 0\nlimiters: {a: {strategy: gcra, limit: 1, "
       "period: 1s}}",
       "leaseTtl: must be a duration"},
      {"version: 1\nlimiters: {a: [1, 2]}", "limiters.a: must be a mapping"},
      {"version: 1\nlimiters: {? [x]\n: {strategy: gcra}}",
       "a mapping key must be a plain string"},
      {"version: 1\nlimiters: {a: {strategy: gcra, limit: 1, period: 1s\n",
       "bad.yaml: line"},
      {"version: 1\nlimiters:\n  a: {strategy: gcra, limit: 1, period: 1s}\n"
       "  a: {strategy: gcra, limit: 2, period: 1s}\n",
       "limiters.a: defined twice"},
  };
  for (const Case& c : cases) {
    testing::expect_config_error(c.yaml, "bad.yaml", c.expect);
  }
}

TEST(ServerConfig, NestingIsCapped) {
  // 70 levels of flow sequences under an unknown-to-be key: refused for
  // depth before anything reads it.
  std::string deep = "version: 1\nx: ";
  for (int i = 0; i < 70; ++i) deep += "[";
  for (int i = 0; i < 70; ++i) deep += "]";
  const std::string e = error_of(deep);
  EXPECT_TRUE(has(e, "nested deeper than 64 levels")) << e;
  // Far deeper: the parser's own guard or ours, never a crash.
  std::string deeper = "version: 1\nx: ";
  for (int i = 0; i < 20'000; ++i) deeper += "[";
  EXPECT_TRUE(has(error_of(deeper), "bad.yaml"));
}

TEST(ServerConfig, AnUnreadableFileIsNotFound) {
  absl::StatusOr<ServerConfig> c = load_config("/nonexistent/server.yaml");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(
      has(std::string(c.status().message()), "/nonexistent/server.yaml"));
}

}  // namespace
}  // namespace config_test
}  // namespace throttlekit::server
