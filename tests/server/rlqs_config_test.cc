// The quota door's configuration (src/server/rlqs_config.h): the `rlqs:`
// block of the server's YAML, every refusal naming the source, the path in
// the document and the problem; and the matching of bucket ids to rules and
// budget keys.

#include "rlqs_config.h"

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "config.h"
#include "gtest/gtest.h"
#include "support/config_error.h"

namespace throttlekit::server {
namespace rlqs_config_test {
namespace {

using testing::expect_config_error;

// A server document whose rlqs block holds one domain `edge`, `body` being
// its rules (indented under `buckets:`).
std::string one_domain(const std::string& body) {
  return absl::StrCat(
      "version: 1\nrlqs:\n  domains:\n    - domain: edge\n      buckets:\n",
      body);
}

RlqsConfig parsed(const std::string& yaml) {
  absl::StatusOr<ServerConfig> c = parse_config(yaml, "server.yaml");
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? c->rlqs : RlqsConfig{};
}

TEST(RlqsConfig, LoadsTheDocumentedShape) {
  const RlqsConfig c = parsed(R"(
version: 1
rlqs:
  unknownDomain: notFound
  fleetHeartbeat: 250ms
  abandonIdle: 30s
  domains:
    - domain: edge
      assignmentTtl: 10s
      buckets:
        - match: {name: api, tenant: "*"}
          limit: {requests: 100, per: 1s}
          assignmentTtl: 6s
          shared: false
        - match: {name: search, region: "eu-*"}
          limit: {requests: 1073741824, per: 1d}
          shared: true
        - match: {name: internal}
          allow: true
        - match: {name: blocked, tenant: ""}
          deny: true
      unmatched: deny
    - domain: other
)");
  EXPECT_EQ(c.unknown_domain, RlqsUnknownDomain::kNotFound);
  EXPECT_EQ(c.fleet_heartbeat_ms, 250);
  EXPECT_EQ(c.abandon_idle_ms, 30'000);
  ASSERT_EQ(c.domains.size(), 2u);
  const RlqsDomain& edge = c.domains[0];
  EXPECT_EQ(edge.domain, "edge");
  EXPECT_EQ(edge.source, "server.yaml: rlqs.domains[0]");
  EXPECT_EQ(edge.unmatched, RlqsBlanket::kDenyAll);
  EXPECT_EQ(edge.assignment_ttl_s, 10);
  ASSERT_EQ(edge.buckets.size(), 4u);

  const RlqsBucketRule& api = edge.buckets[0];
  ASSERT_EQ(api.match.size(), 2u);
  EXPECT_EQ(api.match[0].key, "name");  // sorted by key
  EXPECT_EQ(api.match[0].value, "api");
  EXPECT_TRUE(api.match[0].pattern.empty());
  EXPECT_EQ(api.match[1].key, "tenant");
  EXPECT_EQ(api.match[1].value, "*");
  EXPECT_TRUE(api.match[1].pattern.empty());  // "*" alone: any value
  ASSERT_TRUE(api.limit.has_value());
  EXPECT_EQ(api.limit->requests, 100);
  EXPECT_EQ(api.limit->fill_interval_s, 1);
  EXPECT_EQ(api.assignment_ttl_s, 6);
  EXPECT_FALSE(api.shared);

  const RlqsBucketRule& search = edge.buckets[1];
  EXPECT_EQ(search.match[1].key, "region");
  EXPECT_EQ(search.match[1].pattern, (std::vector<std::string>{"eu-", ""}));
  EXPECT_EQ(search.limit->requests, 1 << 30);
  EXPECT_EQ(search.limit->fill_interval_s, 86'400);
  EXPECT_EQ(search.assignment_ttl_s, 10);  // the domain's
  EXPECT_TRUE(search.shared);

  EXPECT_FALSE(edge.buckets[2].limit.has_value());
  EXPECT_EQ(edge.buckets[2].blanket, RlqsBlanket::kAllowAll);
  EXPECT_EQ(edge.buckets[3].blanket, RlqsBlanket::kDenyAll);

  const RlqsDomain& other = c.domains[1];
  EXPECT_TRUE(other.buckets.empty());
  EXPECT_EQ(other.unmatched, RlqsBlanket::kAllowAll);
  EXPECT_EQ(other.assignment_ttl_s, kDefaultRlqsAssignmentTtlS);
  EXPECT_EQ(c.find("other"), &other);
  EXPECT_EQ(c.find("nope"), nullptr);
}

TEST(RlqsConfig, AConfigWithOnlyRlqsIsAccepted) {
  absl::StatusOr<ServerConfig> c = parse_config(
      "version: 1\nrlqs: {domains: [{domain: edge}]}\n", "server.yaml");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->policies.empty());
  EXPECT_TRUE(c->envoy.domains.empty());
  ASSERT_EQ(c->rlqs.domains.size(), 1u);
  EXPECT_EQ(c->rlqs.unknown_domain, RlqsUnknownDomain::kAllow);
  EXPECT_EQ(c->rlqs.fleet_heartbeat_ms, kDefaultRlqsFleetHeartbeatMs);
  EXPECT_EQ(c->rlqs.abandon_idle_ms, kDefaultRlqsAbandonIdleMs);
  absl::StatusOr<ServerConfig> never = parse_config(
      "version: 1\nrlqs: {abandonIdle: 0s, domains: [{domain: e}]}\n",
      "server.yaml");
  ASSERT_TRUE(never.ok()) << never.status();
  EXPECT_EQ(never->rlqs.abandon_idle_ms, 0);
}

TEST(RlqsConfig, SitsBesideLimitersAndTheEnvoyDoor) {
  absl::StatusOr<ServerConfig> c = parse_config(R"(
version: 1
limiters:
  api: {strategy: gcra, limit: 10, period: 1s}
envoy:
  domains: [{domain: rls}]
rlqs:
  domains: [{domain: quota}]
)",
                                                "server.yaml");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->policies.size(), 1u);
  EXPECT_EQ(c->envoy.domains.size(), 1u);
  EXPECT_EQ(c->rlqs.domains.size(), 1u);
}

TEST(RlqsConfig, ADocumentWithoutRlqsHasNoDomains) {
  const absl::StatusOr<ServerConfig> c = parse_config(
      "version: 1\nenvoy: {domains: [{domain: d}]}\n", "server.yaml");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->rlqs.domains.empty());
}

TEST(RlqsConfig, WholeSecondsInEveryUnit) {
  const RlqsConfig c = parsed(one_domain(R"(        - match: {a: "1"}
          limit: {requests: 1, per: 2000}
          assignmentTtl: 1m
        - match: {a: "2"}
          limit: {requests: 1, per: 1h}
          assignmentTtl: 1h
        - match: {a: "3"}
          limit: {requests: 1, per: 60s}
          assignmentTtl: 2s
)"));
  ASSERT_EQ(c.domains.size(), 1u);
  const std::vector<RlqsBucketRule>& b = c.domains[0].buckets;
  ASSERT_EQ(b.size(), 3u);
  EXPECT_EQ(b[0].limit->fill_interval_s, 2);
  EXPECT_EQ(b[0].assignment_ttl_s, 60);
  EXPECT_EQ(b[1].limit->fill_interval_s, 3600);
  EXPECT_EQ(b[1].assignment_ttl_s, 3600);
  EXPECT_EQ(b[2].limit->fill_interval_s, 60);
  EXPECT_EQ(b[2].assignment_ttl_s, 2);
}

TEST(RlqsConfig, RefusesEachBadDocument) {
  struct Case {
    std::string yaml;
    const char* expect;  // a substring of the error
  };
  const std::string rule = "        - match: {name: api}\n";
  const Case cases[] = {
      {"version: 1\nrlqs: []", "server.yaml: rlqs: must be a mapping"},
      {"version: 1\nrlqs: {}", "server.yaml: rlqs: missing `domains`"},
      {"version: 1\nrlqs: {domains: []}",
       "server.yaml: rlqs.domains: needs at least one domain"},
      {"version: 1\nrlqs: {domains: {domain: d}}",
       "server.yaml: rlqs.domains: must be a list of domains"},
      {"version: 1\nrlqs: {domains: [{domain: d}], extra: 1}",
       "server.yaml: rlqs.extra: unknown key; expected one of abandonIdle, "
       "domains, fleetHeartbeat, unknownDomain"},
      {"version: 1\nrlqs: {abandonIdle: 2d, domains: [{domain: d}]}",
       "server.yaml: rlqs.abandonIdle: must be 0s (never) or a duration up "
       "to 1d; got \"2d\""},
      {"version: 1\nrlqs: {abandonIdle: soon, domains: [{domain: d}]}",
       "server.yaml: rlqs.abandonIdle: must be 0s (never) or a duration up "
       "to 1d; got \"soon\""},
      {"version: 1\nrlqs: {fleetHeartbeat: 9ms, domains: [{domain: d}]}",
       "server.yaml: rlqs.fleetHeartbeat: must be a duration in [10ms, 1m]; "
       "got \"9ms\""},
      {"version: 1\nrlqs: {fleetHeartbeat: 2m, domains: [{domain: d}]}",
       "server.yaml: rlqs.fleetHeartbeat: must be a duration in [10ms, 1m]; "
       "got \"2m\""},
      {"version: 1\nrlqs: {unknownDomain: deny, domains: [{domain: d}]}",
       "server.yaml: rlqs.unknownDomain: must be allow or notFound; got "
       "\"deny\""},
      {"version: 1\nrlqs: {domains: [d]}",
       "server.yaml: rlqs.domains[0]: must be a mapping; got \"d\""},
      {"version: 1\nrlqs: {domains: [{buckets: []}]}",
       "server.yaml: rlqs.domains[0]: missing `domain`"},
      {"version: 1\nrlqs: {domains: [{domain: \"\"}]}",
       "server.yaml: rlqs.domains[0].domain: must be a non-empty string; got "
       "\"\""},
      {"version: 1\nrlqs: {domains: [{domain: [a]}]}",
       "server.yaml: rlqs.domains[0].domain: must be a non-empty string; got "
       "a sequence"},
      {"version: 1\nrlqs: {domains: [{domain: d}, {domain: e}, {domain: d}]}",
       "server.yaml: rlqs.domains[2].domain: duplicate domain \"d\"; also "
       "defined at server.yaml: rlqs.domains[0]"},
      {"version: 1\nrlqs: {domains: [{domain: d, unmatched: maybe}]}",
       "server.yaml: rlqs.domains[0].unmatched: must be allow or deny; got "
       "\"maybe\""},
      {"version: 1\nrlqs: {domains: [{domain: d, assignmentTtl: 1s}]}",
       "server.yaml: rlqs.domains[0].assignmentTtl: must be whole seconds in "
       "[2s, 1h]; got \"1s\""},
      {"version: 1\nrlqs: {domains: [{domain: d, bucket: []}]}",
       "server.yaml: rlqs.domains[0].bucket: unknown key; expected one of "
       "assignmentTtl, buckets, domain, unmatched"},
      {"version: 1\nrlqs: {domains: [{domain: d, buckets: {match: {}}}]}",
       "server.yaml: rlqs.domains[0].buckets: must be a list of rules"},
      {one_domain("        - allow: true\n"),
       "server.yaml: rlqs.domains[0].buckets[0]: missing `match` ({} matches "
       "every bucket)"},
      {one_domain("        - {match: [name], allow: true}\n"),
       "server.yaml: rlqs.domains[0].buckets[0].match: must be a mapping of "
       "bucket id keys to values"},
      {one_domain("        - {match: {\"\": x}, allow: true}\n"),
       "server.yaml: rlqs.domains[0].buckets[0].match: a match key must not "
       "be empty"},
      {one_domain("        - {match: {name: [a, b]}, allow: true}\n"),
       "server.yaml: rlqs.domains[0].buckets[0].match.name: must be a string"},
      {one_domain(rule),
       "server.yaml: rlqs.domains[0].buckets[0]: needs exactly one of "
       "`limit` (a budget), `allow: true` (ALLOW_ALL) or `deny: true` "
       "(DENY_ALL)"},
      {one_domain(rule + "          allow: true\n          deny: true\n"),
       "server.yaml: rlqs.domains[0].buckets[0]: needs exactly one of"},
      {one_domain(rule +
                  "          allow: true\n          limit: {requests: 1, per: "
                  "1s}\n"),
       "server.yaml: rlqs.domains[0].buckets[0]: needs exactly one of"},
      {one_domain(rule + "          allow: false\n"),
       "server.yaml: rlqs.domains[0].buckets[0].allow: must be true (leave it "
       "out otherwise); got \"false\""},
      {one_domain(rule + "          deny: yes\n"),
       "server.yaml: rlqs.domains[0].buckets[0].deny: must be true"},
      {one_domain(rule + "          allow: true\n          shared: true\n"),
       "server.yaml: rlqs.domains[0].buckets[0].shared: applies to a rule "
       "with a `limit` only"},
      {one_domain(rule + "          limit: {requests: 1, per: 1s}\n"
                         "          shared: sometimes\n"),
       "server.yaml: rlqs.domains[0].buckets[0].shared: must be true or "
       "false; got \"sometimes\""},
      {one_domain(rule + "          allow: true\n          ttl: 6s\n"),
       "server.yaml: rlqs.domains[0].buckets[0].ttl: unknown key; expected "
       "one of allow, assignmentTtl, deny, limit, match, shared"},
      {one_domain(rule + "          allow: true\n          assignmentTtl: "
                         "2h\n"),
       "server.yaml: rlqs.domains[0].buckets[0].assignmentTtl: must be whole "
       "seconds in [2s, 1h]; got \"2h\""},
      {one_domain(rule + "          allow: true\n          assignmentTtl: "
                         "2500ms\n"),
       "server.yaml: rlqs.domains[0].buckets[0].assignmentTtl: must be whole "
       "seconds in [2s, 1h]; got \"2500ms\""},
      {one_domain(rule + "          limit: 100\n"),
       "server.yaml: rlqs.domains[0].buckets[0].limit: must be a mapping; "
       "got \"100\""},
      {one_domain(rule + "          limit: {per: 1s}\n"),
       "server.yaml: rlqs.domains[0].buckets[0].limit: missing `requests` "
       "(tokens per `per`)"},
      {one_domain(rule + "          limit: {requests: 10}\n"),
       "server.yaml: rlqs.domains[0].buckets[0].limit: missing `per` (the "
       "fill interval, whole seconds: e.g. 1s)"},
      {one_domain(rule + "          limit: {requests: 0, per: 1s}\n"),
       "server.yaml: rlqs.domains[0].buckets[0].limit.requests: must be an "
       "integer in [1, 2^30]; got \"0\""},
      {one_domain(rule + "          limit: {requests: 1073741825, per: 1s}\n"),
       "server.yaml: rlqs.domains[0].buckets[0].limit.requests: must be an "
       "integer in [1, 2^30]; got \"1073741825\""},
      {one_domain(rule + "          limit: {requests: 1.5, per: 1s}\n"),
       "server.yaml: rlqs.domains[0].buckets[0].limit.requests: must be an "
       "integer in [1, 2^30]; got \"1.5\""},
      {one_domain(rule + "          limit: {requests: 10, per: 500ms}\n"),
       "server.yaml: rlqs.domains[0].buckets[0].limit.per: must be whole "
       "seconds in [1s, 1d]; got \"500ms\""},
      {one_domain(rule + "          limit: {requests: 10, per: 1500ms}\n"),
       "server.yaml: rlqs.domains[0].buckets[0].limit.per: must be whole "
       "seconds in [1s, 1d]; got \"1500ms\""},
      {one_domain(rule + "          limit: {requests: 10, per: 2d}\n"),
       "server.yaml: rlqs.domains[0].buckets[0].limit.per: must be whole "
       "seconds in [1s, 1d]; got \"2d\""},
      {one_domain(rule + "          limit: {requests: 10, per: soon}\n"),
       "server.yaml: rlqs.domains[0].buckets[0].limit.per: must be whole "
       "seconds in [1s, 1d]; got \"soon\""},
      {one_domain(rule + "          limit: {requests: 10, per: 1s, burst: "
                         "5}\n"),
       "server.yaml: rlqs.domains[0].buckets[0].limit.burst: unknown key; "
       "expected one of per, requests"},
      {one_domain("        - {match: {name: api, tenant: \"\"}, allow: "
                  "true}\n        - {match: {tenant: \"*\", name: api}, "
                  "deny: true}\n"),
       "server.yaml: rlqs.domains[0].buckets[1].match: the same match as "
       "rlqs.domains[0].buckets[0], which comes first: this rule would never "
       "apply"},
  };
  for (const Case& c : cases) {
    expect_config_error(c.yaml, "server.yaml", c.expect);
  }
}

// The domain of `yaml`'s rlqs block at index 0.
RlqsDomain domain_of(const std::string& yaml) {
  const RlqsConfig c = parsed(yaml);
  EXPECT_EQ(c.domains.size(), 1u);
  return c.domains.empty() ? RlqsDomain{} : c.domains[0];
}

// The index of the rule `id` matches in `d`, or -1.
int rule_of(const RlqsDomain& d, const RlqsBucketId& id) {
  const std::optional<RlqsRuleMatch> m = match_rlqs_bucket(d, id);
  return m.has_value() ? static_cast<int>(m->rule) : -1;
}

TEST(RlqsMatch, ExactAnyAndPatternValues) {
  const RlqsDomain d =
      domain_of(one_domain(R"(        - match: {name: api, tenant: acme}
          allow: true
        - match: {name: api, tenant: "*"}
          allow: true
        - match: {name: "/v*/users/*", tenant: ""}
          allow: true
        - match: {name: "*-internal"}
          allow: true
)"));
  EXPECT_EQ(rule_of(d, {{"name", "api"}, {"tenant", "acme"}}), 0);
  EXPECT_EQ(rule_of(d, {{"name", "api"}, {"tenant", "beta"}}), 1);
  EXPECT_EQ(rule_of(d, {{"name", "api"}, {"tenant", ""}}), 1);
  EXPECT_EQ(rule_of(d, {{"name", "/v2/users/42"}, {"tenant", "x"}}), 2);
  EXPECT_EQ(rule_of(d, {{"name", "/v/users/"}, {"tenant", "x"}}), 2);
  EXPECT_EQ(rule_of(d, {{"name", "/v2/user/42"}, {"tenant", "x"}}), -1);
  EXPECT_EQ(rule_of(d, {{"name", "db-internal"}}), 3);
  EXPECT_EQ(rule_of(d, {{"name", "-internal"}}), 3);
  EXPECT_EQ(rule_of(d, {{"name", "db-internal-2"}}), -1);
  EXPECT_EQ(rule_of(d, {{"name", "API"}, {"tenant", "acme"}}), -1);
}

TEST(RlqsMatch, EveryKeyNamedMustBeInTheBucketId) {
  const RlqsDomain d =
      domain_of(one_domain(R"(        - match: {name: api, tenant: "*"}
          allow: true
)"));
  EXPECT_EQ(rule_of(d, {{"name", "api"}}), -1);  // tenant missing
  EXPECT_EQ(rule_of(d, {{"tenant", "acme"}}), -1);
  EXPECT_EQ(rule_of(d, {}), -1);
}

TEST(RlqsMatch, ExtraKeysInTheBucketIdAreAllowed) {
  const RlqsDomain d = domain_of(one_domain(R"(        - match: {name: api}
          allow: true
)"));
  EXPECT_EQ(rule_of(d, {{"name", "api"}, {"tenant", "acme"}, {"zone", "a"}}),
            0);
}

TEST(RlqsMatch, TheFirstMatchWins) {
  const RlqsDomain d = domain_of(one_domain(R"(        - match: {tenant: "*"}
          deny: true
        - match: {name: api, tenant: acme}
          allow: true
        - match: {}
          limit: {requests: 5, per: 1s}
)"));
  // Rule 1 is more specific, but rule 0 comes first.
  EXPECT_EQ(rule_of(d, {{"name", "api"}, {"tenant", "acme"}}), 0);
  // An empty match takes everything left.
  EXPECT_EQ(rule_of(d, {{"name", "api"}}), 2);
  EXPECT_EQ(rule_of(d, {{"x", "y"}}), 2);
}

TEST(RlqsMatch, NoRuleLeavesTheBucketUnmatched) {
  const RlqsDomain d = domain_of(
      "version: 1\nrlqs:\n  domains:\n    - domain: edge\n      unmatched: "
      "deny\n");
  EXPECT_EQ(match_rlqs_bucket(d, {{"name", "api"}}), std::nullopt);
  EXPECT_EQ(d.unmatched, RlqsBlanket::kDenyAll);
}

TEST(RlqsMatch, PerIdRulesGiveEachBucketIdItsOwnBudget) {
  const RlqsDomain d =
      domain_of(one_domain(R"(        - match: {name: api, tenant: "*"}
          limit: {requests: 10, per: 1s}
)"));
  const std::optional<RlqsRuleMatch> acme =
      match_rlqs_bucket(d, {{"name", "api"}, {"tenant", "acme"}});
  const std::optional<RlqsRuleMatch> beta =
      match_rlqs_bucket(d, {{"name", "api"}, {"tenant", "beta"}});
  ASSERT_TRUE(acme.has_value() && beta.has_value());
  EXPECT_NE(acme->budget_key, beta->budget_key);
  // The rule's identity (its match and interval), then the bucket id.
  const std::string identity = "4:name3:api6:tenant1:*16:per=1,ttl=6,each";
  EXPECT_EQ(d.buckets[0].identity, identity);
  EXPECT_EQ(acme->budget_key, absl::StrCat(identity.size(), ":", identity,
                                           "4:name3:api6:tenant4:acme"));
  // Extra keys are part of the id, hence of the budget.
  const std::optional<RlqsRuleMatch> zoned = match_rlqs_bucket(
      d, {{"name", "api"}, {"tenant", "acme"}, {"zone", "a"}});
  ASSERT_TRUE(zoned.has_value());
  EXPECT_NE(zoned->budget_key, acme->budget_key);
}

TEST(RlqsMatch, ASharedRuleGivesEveryBucketIdItMatchesOneBudget) {
  const RlqsDomain d = domain_of(one_domain(R"(        - match: {name: api}
          allow: true
        - match: {name: search, tenant: "*"}
          limit: {requests: 10, per: 1s}
          shared: true
)"));
  const std::optional<RlqsRuleMatch> acme =
      match_rlqs_bucket(d, {{"name", "search"}, {"tenant", "acme"}});
  const std::optional<RlqsRuleMatch> beta =
      match_rlqs_bucket(d, {{"name", "search"}, {"tenant", "beta"}});
  ASSERT_TRUE(acme.has_value() && beta.has_value());
  EXPECT_EQ(acme->rule, 1u);
  EXPECT_EQ(acme->budget_key, beta->budget_key);
  const std::string& identity = d.buckets[1].identity;
  EXPECT_EQ(acme->budget_key, absl::StrCat(identity.size(), ":", identity));
}

TEST(RlqsMatch, BudgetKeysOfTrickyIdsNeverCollide) {
  // Ids whose naive concatenations coincide: separators, digits and
  // colons inside keys and values, empty strings, NUL bytes.
  const std::string nul("a\0b", 3);
  const std::vector<RlqsBucketId> ids = {
      {{"a", "bc"}},
      {{"ab", "c"}},
      {{"a", "b"}, {"c", ""}},
      {{"a", "b:c"}},
      {{"a:b", "c"}},
      {{"1:a", "1:b"}},
      {{"a", "1:b1:c"}},
      {{"a", ""}},
      {{"", "a"}},
      {{"a", nul}},
      {{"a", std::string("a\0", 2)}},
      {{"a", "b"}, {"c", "d"}},
      {{"a", "b1:c1:d"}},
      {{"a", "b"}, {"cd", ""}},
      {},
  };
  // Identities that run into ids the same way.
  const std::vector<std::string> identities = {"",  "1",     "11",    "1:1",
                                               "a", "3:a3:", "4:name"};
  std::set<std::string> keys;
  for (const std::string& identity : identities) {
    for (const RlqsBucketId& id : ids) {
      keys.insert(rlqs_budget_key(identity, /*shared=*/false, id));
    }
  }
  EXPECT_EQ(keys.size(), identities.size() * ids.size());
  // A shared rule's key is its identity alone: "1" and "11" stay apart.
  EXPECT_EQ(rlqs_budget_key("1", /*shared=*/true, {{"a", "b"}}), "1:1");
  EXPECT_EQ(rlqs_budget_key("11", /*shared=*/true, {{"a", "b"}}), "2:11");
  // The key does not depend on how the id was built: a map is sorted.
  RlqsBucketId one, two;
  one["b"] = "2";
  one["a"] = "1";
  two["a"] = "1";
  two["b"] = "2";
  EXPECT_EQ(rlqs_budget_key("r", false, one), rlqs_budget_key("r", false, two));
  EXPECT_EQ(rlqs_bucket_key(one), "1:a1:11:b1:2");
}

TEST(RlqsMatch, ARuleKeepsItsIdentityWhenOnlyItsRequestsOrPlaceChange) {
  const RlqsDomain was = domain_of(one_domain(R"(        - match: {name: api}
          limit: {requests: 10, per: 1s}
        - match: {name: search}
          allow: true
)"));
  // A rule inserted before, and the requests changed: the same identity,
  // hence the same budget keys.
  const RlqsDomain now = domain_of(one_domain(R"(        - match: {name: new}
          deny: true
        - match: {name: api}
          limit: {requests: 99, per: 1s}
        - match: {name: search}
          allow: true
)"));
  EXPECT_EQ(was.buckets[0].identity, now.buckets[1].identity);
  EXPECT_EQ(was.buckets[1].identity, now.buckets[2].identity);
  EXPECT_EQ(match_rlqs_bucket(was, {{"name", "api"}})->budget_key,
            match_rlqs_bucket(now, {{"name", "api"}})->budget_key);
  // Any of its interval, its TTL, `shared`, its match or its blanket rule
  // changed: another rule.
  const std::vector<std::string> others = {
      "        - match: {name: api}\n          limit: {requests: 10, per: "
      "2s}\n",
      "        - match: {name: api}\n          limit: {requests: 10, per: 1s}\n"
      "          assignmentTtl: 8s\n",
      "        - match: {name: api}\n          limit: {requests: 10, per: 1s}\n"
      "          shared: true\n",
      "        - match: {name: api, zone: \"*\"}\n"
      "          limit: {requests: 10, per: 1s}\n",
      "        - match: {name: api}\n          deny: true\n",
  };
  std::set<std::string> identities = {was.buckets[0].identity};
  for (const std::string& rule : others) {
    const RlqsDomain d = domain_of(one_domain(rule));
    identities.insert(d.buckets[0].identity);
  }
  EXPECT_EQ(identities.size(), 1 + others.size());
}

}  // namespace
}  // namespace rlqs_config_test
}  // namespace throttlekit::server
