// The Envoy door's configuration (src/server/envoy_config.h): domains in
// the reference rate-limit service's format, inline in the server's YAML
// or in files of their own; every refusal names the source, the path in the
// document and the problem.

#include "envoy_config.h"

#include <cstdio>
#include <fstream>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "absl/strings/str_cat.h"
#include "config.h"
#include "gtest/gtest.h"
#include "support/config_error.h"

namespace throttlekit::server {
namespace envoy_config_test {
namespace {

using testing::config_error;
using testing::has;

// A server document whose envoy block holds one domain, `body` being its
// descriptors (indented under `descriptors:`).
std::string one_domain(const std::string& body) {
  return absl::StrCat(
      "version: 1\nenvoy:\n  domains:\n    - domain: d\n      descriptors:\n",
      body);
}

// A file in the test's temporary directory, removed at the end of scope.
class TempFile {
 public:
  TempFile(const std::string& name, const std::string& text)
      : path_(absl::StrCat(::testing::TempDir(), "/", name)) {
    std::ofstream(path_) << text;
  }
  ~TempFile() { std::remove(path_.c_str()); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

TEST(EnvoyConfig, LoadsTheReferenceFormatInline) {
  absl::StatusOr<ServerConfig> c = parse_config(R"(
version: 1
envoy:
  headers: draft07
  unknownDomain: notFound
  domains:
    - domain: messaging
      descriptors:
        - key: message_type
          value: marketing
          descriptors:
            - key: to_number
              rate_limit: {unit: day, requests_per_unit: 5}
        - key: to_number
          rate_limit: {unit: Day, requests_per_unit: 100, name: per_number}
        - key: path
          value: /api/*
          shadow_mode: true
          share_threshold: true
          detailed_metric: true
          rate_limit:
            unit: second
            requests_per_unit: 10
            strategy: gcra
            burst: 4
            replaces: [{name: per_number}]
        - key: ldap
          rate_limit: {unlimited: true}
        - key: blocked
          rate_limit: {unit: minute, requests_per_unit: 0}
)",
                                                "server.yaml");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->policies.empty());
  ASSERT_EQ(c->envoy.domains.size(), 1u);
  ASSERT_TRUE(c->envoy.headers.has_value());
  EXPECT_EQ(*c->envoy.headers, RateLimitStyle::kDraft07);
  EXPECT_EQ(c->envoy.unknown_domain, EnvoyUnknownDomain::kNotFound);
  const EnvoyDomain& d = c->envoy.domains[0];
  EXPECT_EQ(d.domain, "messaging");
  EXPECT_EQ(d.source, "server.yaml: envoy.domains[0]");
  ASSERT_EQ(d.descriptors.size(), 5u);

  const EnvoyDescriptor& marketing = d.descriptors[0];
  EXPECT_EQ(marketing.key, "message_type");
  EXPECT_EQ(marketing.value, "marketing");
  EXPECT_FALSE(marketing.rate_limit.has_value());
  ASSERT_EQ(marketing.descriptors.size(), 1u);
  const EnvoyRateLimit& five = *marketing.descriptors[0].rate_limit;
  EXPECT_EQ(five.requests_per_unit, 5);
  EXPECT_EQ(five.unit, EnvoyUnit::kDay);
  EXPECT_EQ(five.strategy, "fixedWindow");
  ASSERT_TRUE(five.options.has_value());
  const auto* fixed = std::get_if<FixedWindow::Options>(&*five.options);
  ASSERT_NE(fixed, nullptr);
  EXPECT_EQ(fixed->limit, 5);
  EXPECT_EQ(fixed->window_ms, 86'400'000);

  const EnvoyRateLimit& per_number = *d.descriptors[1].rate_limit;
  EXPECT_EQ(per_number.unit, EnvoyUnit::kDay);  // units ignore case
  EXPECT_EQ(per_number.name, "per_number");

  const EnvoyDescriptor& path = d.descriptors[2];
  EXPECT_EQ(path.value, "/api/*");
  EXPECT_TRUE(path.shadow_mode);
  EXPECT_TRUE(path.share_threshold);
  EXPECT_FALSE(d.descriptors[1].share_threshold);
  const EnvoyRateLimit& gcra = *path.rate_limit;
  ASSERT_EQ(gcra.replaces.size(), 1u);
  EXPECT_EQ(gcra.replaces[0], "per_number");
  const auto* g = std::get_if<Gcra::Options>(&*gcra.options);
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(g->limit, 10);
  EXPECT_EQ(g->period_ms, 1000);
  EXPECT_EQ(g->burst, 4);

  EXPECT_TRUE(d.descriptors[3].rate_limit->unlimited);
  EXPECT_FALSE(d.descriptors[3].rate_limit->options.has_value());
  // A limit of 0 refuses everything and counts nothing: no strategy.
  EXPECT_EQ(d.descriptors[4].rate_limit->requests_per_unit, 0);
  EXPECT_FALSE(d.descriptors[4].rate_limit->options.has_value());
}

TEST(EnvoyConfig, LeasedLimitsAndTheFailPolicy) {
  absl::StatusOr<ServerConfig> c = parse_config(R"(
version: 1
envoy:
  failPolicy: closed
  domains:
    - domain: d
      descriptors:
        - key: a
          rate_limit: {unit: second, requests_per_unit: 1000, leased: true}
        - key: b
          rate_limit: {unit: second, requests_per_unit: 10, leased: true}
        - key: c
          rate_limit: {unit: hour, requests_per_unit: 100000,
                       leased: {batch: 500}}
        - key: e
          rate_limit: {unit: hour, requests_per_unit: 100000, leased: {}}
        - key: f
          rate_limit: {unit: hour, requests_per_unit: 5, leased: false}
)",
                                                "server.yaml");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->envoy.fail_policy.mode(), FailPolicy::kClosed);
  const std::vector<EnvoyDescriptor>& ds = c->envoy.domains[0].descriptors;
  // `leased: true`: a sixteenth of the limit, at least 1, at most 256.
  EXPECT_EQ(ds[0].rate_limit->leased_batch, std::optional<int64_t>(62));
  EXPECT_EQ(ds[1].rate_limit->leased_batch, std::optional<int64_t>(1));
  EXPECT_EQ(ds[2].rate_limit->leased_batch, std::optional<int64_t>(500));
  EXPECT_EQ(ds[3].rate_limit->leased_batch, std::optional<int64_t>(256));
  EXPECT_FALSE(ds[4].rate_limit->leased_batch.has_value());
  EXPECT_TRUE(ds[0].rate_limit->options.has_value());

  for (const char* mode : {"open", "error"}) {
    absl::StatusOr<ServerConfig> m =
        parse_config(absl::StrCat("version: 1\nenvoy: {failPolicy: ", mode,
                                  ", domains: [{domain: d}]}"),
                     "server.yaml");
    ASSERT_TRUE(m.ok()) << m.status();
    EXPECT_EQ(m->envoy.fail_policy.mode(), std::string_view(mode) == "open"
                                               ? FailPolicy::kOpen
                                               : FailPolicy::kPropagate);
  }
}

TEST(EnvoyConfig, FederatedLimits) {
  absl::StatusOr<ServerConfig> c = parse_config(R"(
version: 1
envoy:
  domains:
    - domain: d
      descriptors:
        - key: a
          rate_limit: {unit: second, requests_per_unit: 1000, federated: true}
        - key: b
          rate_limit: {unit: minute, requests_per_unit: 600,
                       strategy: slidingWindow,
                       federated: {region: eu-west, batch: 20}}
        - key: e
          rate_limit: {unit: hour, requests_per_unit: 5, federated: false}
)",
                                                "server.yaml");
  ASSERT_TRUE(c.ok()) << c.status();
  const std::vector<EnvoyDescriptor>& ds = c->envoy.domains[0].descriptors;
  ASSERT_TRUE(ds[0].rate_limit->federated.has_value());
  // `federated: true`: region "default", the batch of `leased: true`.
  EXPECT_EQ(ds[0].rate_limit->federated->region, "default");
  EXPECT_EQ(ds[0].rate_limit->federated->batch, 62);
  EXPECT_FALSE(ds[0].rate_limit->leased_batch.has_value());
  ASSERT_TRUE(ds[1].rate_limit->federated.has_value());
  EXPECT_EQ(ds[1].rate_limit->federated->region, "eu-west");
  EXPECT_EQ(ds[1].rate_limit->federated->batch, 20);
  EXPECT_FALSE(ds[2].rate_limit->federated.has_value());
}

TEST(EnvoyConfig, LoadsFilesBesideThePolicies) {
  const TempFile file("envoy_config_test_edge.yaml", R"(
domain: edge
descriptors:
  - key: remote_address
    rate_limit: {unit: second, requests_per_unit: 10}
)");
  absl::StatusOr<ServerConfig> c = parse_config(
      absl::StrCat("version: 1\nlimiters:\n  api: {strategy: gcra, limit: 1, "
                   "period: 1s}\nenvoy:\n  files: [",
                   file.path(), "]\n"),
      "server.yaml");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->policies.size(), 1u);
  ASSERT_EQ(c->envoy.domains.size(), 1u);
  EXPECT_EQ(c->envoy.domains[0].domain, "edge");
  EXPECT_EQ(c->envoy.domains[0].source, file.path());
  EXPECT_FALSE(c->envoy.headers.has_value());  // none unless asked for

  // A relative name is read from the document's directory.
  const std::string dir = ::testing::TempDir();
  absl::StatusOr<ServerConfig> relative = parse_config(
      "version: 1\nenvoy: {files: [envoy_config_test_edge.yaml]}\n",
      absl::StrCat(dir, "/server.yaml"));
  ASSERT_TRUE(relative.ok()) << relative.status();
  EXPECT_EQ(relative->envoy.domains[0].domain, "edge");
}

TEST(EnvoyConfig, ParsesOneReferenceFile) {
  absl::StatusOr<EnvoyDomain> d = parse_envoy_domain(R"(
domain: internal
descriptors:
  - key: azure
    rate_limit: {unit: minute, requests_per_unit: 100}
)",
                                                     "internal.yaml");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->domain, "internal");
  EXPECT_EQ(d->descriptors[0].rate_limit->unit, EnvoyUnit::kMinute);

  absl::StatusOr<EnvoyDomain> bad = parse_envoy_domain(
      "domain: internal\ndescriptors:\n  - key: azure\n    rate_limit: "
      "{unit: fortnight, requests_per_unit: 1}\n",
      "internal.yaml");
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(has(std::string(bad.status().message()),
                  "internal.yaml: descriptors[0].rate_limit.unit: unknown "
                  "unit \"fortnight\""))
      << bad.status();
}

TEST(EnvoyConfig, UnitsAndStrategies) {
  EXPECT_EQ(envoy_unit_ms(EnvoyUnit::kSecond), 1'000);
  EXPECT_EQ(envoy_unit_ms(EnvoyUnit::kWeek), 604'800'000);
  EXPECT_EQ(envoy_unit_ms(EnvoyUnit::kMonth), 30 * int64_t{86'400'000});
  EXPECT_EQ(envoy_unit_ms(EnvoyUnit::kYear), 365 * int64_t{86'400'000});
  EXPECT_TRUE(envoy_unit_from_wire(7) == EnvoyUnit::kWeek);
  EXPECT_FALSE(envoy_unit_from_wire(0).has_value());
  EXPECT_FALSE(envoy_unit_from_wire(8).has_value());

  absl::StatusOr<StrategyOptions> bucket =
      envoy_strategy_options("tokenBucket", 120, EnvoyUnit::kMinute);
  ASSERT_TRUE(bucket.ok()) << bucket.status();
  const auto& tb = std::get<TokenBucket::Options>(*bucket);
  EXPECT_EQ(tb.capacity, 120);
  EXPECT_DOUBLE_EQ(tb.refill_per_sec, 2.0);
  absl::StatusOr<StrategyOptions> sliding =
      envoy_strategy_options("slidingWindow", 10, EnvoyUnit::kSecond, 0, 5);
  ASSERT_TRUE(sliding.ok()) << sliding.status();
  EXPECT_EQ(std::get<SlidingWindow::Options>(*sliding).buckets, 5);
  EXPECT_FALSE(envoy_strategy_options("quota", 1, EnvoyUnit::kDay).ok());
}

TEST(EnvoyConfig, RefusesEachBadDocument) {
  struct Case {
    std::string yaml;
    const char* expect;  // a substring of the error
  };
  const Case cases[] = {
      {"version: 1",
       "(document): missing `limiters` (or an `envoy` or `rlqs` block)"},
      {"version: 1\nenvoy: {}",
       "envoy: needs at least one domain (domains or files;"},
      {"version: 1\nenvoy: {domains: [], files: []}",
       "envoy: needs at least one domain"},
      {"version: 1\nenvoy: {domains: {}}",
       "envoy.domains: must be a list of domains"},
      {"version: 1\nenvoy: {headers: loud, domains: [{domain: d}]}",
       "envoy.headers: must be off, structured, draft07, draft06 or legacy; "
       "got \"loud\""},
      {"version: 1\nenvoy: {unknownDomain: deny, domains: [{domain: d}]}",
       "envoy.unknownDomain: must be allow or notFound; got \"deny\""},
      {"version: 1\nenvoy: {domains: [{domain: d}], filez: []}",
       "envoy.filez: unknown key"},
      {"version: 1\nenvoy: {domains: [{descriptors: []}]}",
       "envoy.domains[0]: missing `domain`"},
      {"version: 1\nenvoy: {domains: [{domain: \"\"}]}",
       "envoy.domains[0].domain: must be a non-empty string"},
      {"version: 1\nenvoy: {domains: [{domain: d}, {domain: d}]}",
       "envoy.domains[1].domain: duplicate domain \"d\"; also defined at "
       "server.yaml: envoy.domains[0]"},
      {"version: 1\nenvoy: {domains: [{domain: d, descriptors: {key: a}}]}",
       "envoy.domains[0].descriptors: must be a list of descriptors"},
      {"version: 1\nenvoy: {domains: [{domain: d, descriptors: [a]}]}",
       "envoy.domains[0].descriptors[0]: must be a mapping"},
      {one_domain("        - {value: x}\n"),
       "envoy.domains[0].descriptors[0]: missing `key`"},
      {one_domain("        - {key: \"\"}\n"),
       "envoy.domains[0].descriptors[0].key: must be a non-empty string"},
      {one_domain("        - {key: a, value: {x: 1}}\n"),
       "envoy.domains[0].descriptors[0].value: must be a non-empty string"},
      {one_domain("        - {key: a, value: b}\n        - {key: a, value: "
                  "b}\n"),
       "envoy.domains[0].descriptors[1]: duplicate descriptor composite key "
       "\"d.a_b\" (also envoy.domains[0].descriptors[0])"},
      {one_domain("        - {key: a}\n        - {key: a}\n"),
       "duplicate descriptor composite key \"d.a\""},
      {one_domain("        - key: a\n          descriptors:\n            - "
                  "{key: b, value: c}\n            - {key: b, value: c}\n"),
       "envoy.domains[0].descriptors[0].descriptors[1]: duplicate descriptor "
       "composite key \"d.a.b_c\""},
      {one_domain("        - {key: a, descriptors: {key: b}}\n"),
       "envoy.domains[0].descriptors[0].descriptors: must be a list of "
       "descriptors"},
      {one_domain("        - {key: a, rate_limit: {unit: fortnight, "
                  "requests_per_unit: 1}}\n"),
       "envoy.domains[0].descriptors[0].rate_limit.unit: unknown unit "
       "\"fortnight\"; expected second, minute, hour, day, week, month or "
       "year"},
      {one_domain("        - {key: a, rate_limit: {requests_per_unit: 1}}\n"),
       "envoy.domains[0].descriptors[0].rate_limit: missing `unit`"},
      {one_domain("        - {key: a, rate_limit: {unit: second}}\n"),
       "envoy.domains[0].descriptors[0].rate_limit: missing "
       "`requests_per_unit`"},
      {one_domain("        - {key: a, rate_limit: {unit: second, "
                  "requests_per_unit: -1}}\n"),
       "envoy.domains[0].descriptors[0].rate_limit.requests_per_unit: must "
       "be an integer in [0, 2^32-1]; got \"-1\""},
      {one_domain("        - {key: a, rate_limit: {unit: second, "
                  "requests_per_unit: 4294967296}}\n"),
       "rate_limit.requests_per_unit: must be an integer in [0, 2^32-1]"},
      {one_domain("        - {key: a, rate_limit: {unit: second, "
                  "requests_per_unit: many}}\n"),
       "rate_limit.requests_per_unit: must be an integer"},
      {one_domain("        - {key: a, rate_limit: {unlimited: true, unit: "
                  "second}}\n"),
       "envoy.domains[0].descriptors[0].rate_limit.unit: an unlimited limit "
       "takes no unit"},
      {one_domain("        - {key: a, rate_limit: {unlimited: yes}}\n"),
       "rate_limit.unlimited: must be true or false"},
      {one_domain("        - {key: a, rate_limit: {unit: second, "
                  "requests_per_unit: 1, strategy: leakyBucket}}\n"),
       "envoy.domains[0].descriptors[0].rate_limit.strategy: unknown "
       "strategy \"leakyBucket\""},
      {one_domain("        - {key: a, rate_limit: {unit: second, "
                  "requests_per_unit: 1, burst: 2}}\n"),
       "rate_limit.burst: applies to strategy gcra only"},
      {one_domain("        - {key: a, rate_limit: {unit: second, "
                  "requests_per_unit: 10, strategy: slidingWindow, buckets: "
                  "2000}}\n"),
       "envoy.domains[0].descriptors[0].rate_limit.strategy: "},
      {one_domain("        - {key: a, rate_limit: {unit: second, "
                  "requests_per_unit: 1, name: x, replaces: [{name: x}]}}\n"),
       "rate_limit.replaces[0].name: a limit cannot replace itself"},
      {one_domain("        - {key: a, rate_limit: {unit: second, "
                  "requests_per_unit: 1, replaces: [{}]}}\n"),
       "rate_limit.replaces[0]: missing `name`"},
      {one_domain("        - {key: a, rate_limit: {unit: second, "
                  "requests_per_unit: 1, replaces: x}}\n"),
       "rate_limit.replaces: must be a list of {name: <a limit's name>}"},
      {one_domain("        - {key: a, rate_limit: {unit: second, "
                  "requests_per_unit: 1, requests_per_minute: 3}}\n"),
       "rate_limit.requests_per_minute: unknown key"},
      {one_domain("        - {key: a, shadow_mode: 1}\n"),
       "envoy.domains[0].descriptors[0].shadow_mode: must be true or false"},
      {one_domain("        - {key: a, value: b, share_threshold: true}\n"),
       "envoy.domains[0].descriptors[0].share_threshold: applies to a value "
       "with `*` (a pattern) only"},
      {one_domain("        - {key: a, metadata: {team: x}}\n"),
       "envoy.domains[0].descriptors[0].metadata: not supported by "
       "throttlekit-server yet"},
      {one_domain("        - {key: a, quota_mode: true}\n"),
       "descriptors[0].quota_mode: not supported"},
      {one_domain("        - {key: a, vaule: b}\n"),
       "envoy.domains[0].descriptors[0].vaule: unknown key"},
      {one_domain("        - {key: a, rate_limit: {unit: second, "
                  "requests_per_unit: 10, strategy: gcra, leased: true}}\n"),
       "envoy.domains[0].descriptors[0].rate_limit.leased: leases count a "
       "fixed window; strategy gcra cannot be leased"},
      {one_domain("        - {key: a, rate_limit: {unit: second, "
                  "requests_per_unit: 10, leased: {batch: 11}}}\n"),
       "rate_limit.leased.batch: must be an integer in [1, "
       "requests_per_unit = 10]; got \"11\""},
      {one_domain("        - {key: a, rate_limit: {unit: second, "
                  "requests_per_unit: 10, leased: {batch: 0}}}\n"),
       "rate_limit.leased.batch: must be an integer in [1, "},
      {one_domain("        - {key: a, rate_limit: {unit: second, "
                  "requests_per_unit: 10, leased: {size: 2}}}\n"),
       "rate_limit.leased.size: unknown key"},
      {one_domain("        - {key: a, rate_limit: {unit: second, "
                  "requests_per_unit: 10, leased: yes}}\n"),
       "rate_limit.leased: must be true, false or {batch: N}; got \"yes\""},
      {one_domain("        - {key: a, rate_limit: {unit: second, "
                  "requests_per_unit: 0, leased: true}}\n"),
       "rate_limit.leased: a limit of 0 refuses without counting"},
      {one_domain("        - {key: a, rate_limit: {unlimited: true, leased: "
                  "true}}\n"),
       "rate_limit.leased: an unlimited limit is never counted"},
      {one_domain("        - {key: a, rate_limit: {unit: second, "
                  "requests_per_unit: 10, strategy: gcra, federated: true}}\n"),
       "envoy.domains[0].descriptors[0].rate_limit.federated: only windowed "
       "strategies federate (fixedWindow, slidingWindow); strategy gcra "
       "cannot be federated"},
      {one_domain("        - {key: a, rate_limit: {unit: second, "
                  "requests_per_unit: 10, leased: true, federated: true}}\n"),
       "envoy.domains[0].descriptors[0].rate_limit: a limit is leased or "
       "federated, not both"},
      {one_domain("        - {key: a, rate_limit: {unit: second, "
                  "requests_per_unit: 10, federated: {batch: 11}}}\n"),
       "rate_limit.federated.batch: must be an integer in [1, "
       "requests_per_unit = 10]; got \"11\""},
      {one_domain("        - {key: a, rate_limit: {unit: second, "
                  "requests_per_unit: 10, federated: {region: \"\"}}}\n"),
       "rate_limit.federated.region: must be a non-empty string"},
      {one_domain("        - {key: a, rate_limit: {unit: second, "
                  "requests_per_unit: 10, federated: {region: " +
                  std::string(65, 'r') + "}}}\n"),
       "rate_limit.federated.region: must be 1 .. 64 bytes; got 65"},
      {one_domain("        - {key: a, rate_limit: {unit: second, "
                  "requests_per_unit: 10, federated: {zone: eu}}}\n"),
       "rate_limit.federated.zone: unknown key"},
      {one_domain("        - {key: a, rate_limit: {unit: second, "
                  "requests_per_unit: 10, federated: 1}}\n"),
       "rate_limit.federated: must be true, false or {batch: N, region: R}; "
       "got \"1\""},
      {one_domain("        - {key: a, rate_limit: {unlimited: true, "
                  "federated: true}}\n"),
       "rate_limit.federated: an unlimited limit is never counted; it cannot "
       "be federated"},
      {"version: 1\nenvoy: {failPolicy: deny, domains: [{domain: d}]}",
       "envoy.failPolicy: must be error, open or closed; got \"deny\""},
      {"version: 1\nenvoy: {files: [/nonexistent/throttlekit/rls.yaml]}",
       "server.yaml: envoy.files[0]: cannot read the file "
       "/nonexistent/throttlekit/rls.yaml"},
      {"version: 1\nenvoy: {files: [\"\"]}",
       "envoy.files[0]: must be a file name"},
  };
  for (const Case& c : cases) {
    const std::string e =
        testing::expect_config_error(c.yaml, "server.yaml", c.expect);
    EXPECT_TRUE(has(e, "server.yaml: ")) << e;
  }
}

TEST(EnvoyConfig, AnExplicitEmptyDomainListStandsForAControlPlanesSets) {
  absl::StatusOr<ServerConfig> config = parse_config(
      "version: 1\nenvoy: {domains: [], headers: draft06, unknownDomain: "
      "notFound}\n",
      "server.yaml");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_TRUE(config->envoy.without_domains);
  EXPECT_TRUE(config->envoy.domains.empty());
  EXPECT_EQ(config->envoy.headers, RateLimitStyle::kDraft06);
  EXPECT_EQ(config->envoy.unknown_domain, EnvoyUnknownDomain::kNotFound);
  config = parse_config("version: 1\nenvoy: {domains: [{domain: d}]}\n",
                        "server.yaml");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_FALSE(config->envoy.without_domains);
}

TEST(EnvoyConfig, FileErrorsNameTheFile) {
  const TempFile bad("envoy_config_test_bad.yaml",
                     "domain: edge\ndescriptors:\n  - key: a\n    rate_limit: "
                     "{unit: second, requests_per_unit: 1}\n  - key: a\n");
  std::string e = config_error(
      absl::StrCat("version: 1\nenvoy: {files: [", bad.path(), "]}\n"));
  EXPECT_TRUE(has(e, absl::StrCat(bad.path(),
                                  ": descriptors[1]: duplicate descriptor "
                                  "composite key \"edge.a\"")))
      << e;

  const TempFile twin("envoy_config_test_twin.yaml", "domain: edge\n");
  const TempFile first("envoy_config_test_first.yaml", "domain: edge\n");
  e = config_error(absl::StrCat("version: 1\nenvoy: {files: [", first.path(),
                                ", ", twin.path(), "]}\n"));
  EXPECT_TRUE(has(e, absl::StrCat(twin.path(),
                                  ": domain: duplicate domain \"edge\"; also "
                                  "defined at ",
                                  first.path())))
      << e;

  const TempFile invalid("envoy_config_test_invalid.yaml", "domain: [\n");
  e = config_error(
      absl::StrCat("version: 1\nenvoy: {files: [", invalid.path(), "]}\n"));
  EXPECT_TRUE(has(e, absl::StrCat(invalid.path(), ": line "))) << e;
  EXPECT_TRUE(has(e, "not valid YAML")) << e;

  // Nesting past the cap, in a file of its own.
  std::string deep = "domain: deep\ndescriptors:\n";
  std::string indent = "  ";
  for (int i = 0; i < 40; ++i) {
    absl::StrAppend(&deep, indent, "- key: k\n", indent, "  descriptors:\n");
    indent += "    ";
  }
  const TempFile nested("envoy_config_test_deep.yaml", deep);
  e = config_error(
      absl::StrCat("version: 1\nenvoy: {files: [", nested.path(), "]}\n"));
  EXPECT_TRUE(has(e, "nested deeper than 64 levels")) << e;
}

}  // namespace
}  // namespace envoy_config_test
}  // namespace throttlekit::server
