// src/server/rlqs_config.cc: the quota door's configuration (rlqs_config.h).

#include "rlqs_config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <functional>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl_view.h"
#include "value_pattern.h"
#include "yaml_reader.h"

namespace throttlekit::server {
namespace {

// The reader's vocabulary (mapping, integer, duration, child, Errors, ...).
using namespace yaml_reader;  // NOLINT(build/namespaces)

// A duration in whole seconds within [lo_s, hi_s]; `bounds` says them as
// written in the error, e.g. "[1s, 1d]".
absl::StatusOr<int64_t> whole_seconds(const YAML::Node& n,
                                      const std::string& path, int64_t lo_s,
                                      int64_t hi_s, std::string_view bounds,
                                      const Errors& errors) {
  const absl::StatusOr<int64_t> ms = duration(n, path, errors);
  if (!ms.ok() || *ms % 1000 != 0 || *ms / 1000 < lo_s || *ms / 1000 > hi_s) {
    return errors.at(path, absl::StrCat("must be whole seconds in ", sv(bounds),
                                        "; got ", quoted(n)));
  }
  return *ms / 1000;
}

// An assignment time to live: whole seconds in [2s, 1h].
absl::StatusOr<int64_t> assignment_ttl(const YAML::Node& n,
                                       const std::string& path,
                                       const Errors& errors) {
  return whole_seconds(n, path, kMinRlqsAssignmentTtlS, kMaxRlqsAssignmentTtlS,
                       "[2s, 1h]", errors);
}

// `true`, the only value `allow` and `deny` take (leave them out
// otherwise).
absl::Status only_true(const YAML::Node& n, const std::string& path,
                       const Errors& errors) {
  if (!n.IsScalar() || n.Scalar() != "true") {
    return errors.at(path, absl::StrCat("must be true (leave it out "
                                        "otherwise); got ",
                                        quoted(n)));
  }
  return absl::OkStatus();
}

// A rule's `match`: a mapping of non-empty keys to string values.
absl::StatusOr<std::vector<RlqsMatchEntry>> match(const YAML::Node& n,
                                                  const std::string& path,
                                                  const Errors& errors) {
  if (!n.IsMap()) {
    return errors.at(path,
                     absl::StrCat("must be a mapping of bucket id keys to "
                                  "values ({} matches every bucket); got ",
                                  quoted(n)));
  }
  std::vector<RlqsMatchEntry> out;
  for (const auto& kv : n) {
    const std::string key = kv.first.Scalar();
    const std::string at = child(path, key);
    if (key.empty()) return errors.at(path, "a match key must not be empty");
    if (!kv.second.IsScalar()) {
      return errors.at(at, absl::StrCat("must be a string: a value, a pattern "
                                        "with `*`, or \"\" or \"*\" for any "
                                        "value; got ",
                                        quoted(kv.second)));
    }
    RlqsMatchEntry e{.key = key, .value = kv.second.Scalar()};
    if (e.value != "*") e.pattern = split_value_pattern(e.value);
    out.push_back(std::move(e));
  }
  std::sort(out.begin(), out.end(),
            [](const RlqsMatchEntry& a, const RlqsMatchEntry& b) {
              return a.key < b.key;
            });
  for (size_t i = 1; i < out.size(); ++i) {
    if (out[i].key == out[i - 1].key) {
      return errors.at(child(path, out[i].key), "duplicate key");
    }
  }
  return out;
}

// A rule's `limit: {requests, per}`.
absl::StatusOr<RlqsLimit> limit(const YAML::Node& n, const std::string& path,
                                const Errors& errors) {
  absl::StatusOr<Map> m = mapping(n, path, errors);
  if (!m.ok()) return m.status();
  RlqsLimit l;
  const YAML::Node requests = m->get("requests");
  if (!requests.IsDefined()) {
    return errors.at(path, "missing `requests` (tokens per `per`)");
  }
  TK_ASSIGN(l.requests, integer(requests, child(path, "requests"), 1,
                                kMaxRlqsRequests, errors, "[1, 2^30]"));
  const YAML::Node per = m->get("per");
  if (!per.IsDefined()) {
    return errors.at(path,
                     "missing `per` (the fill interval, whole seconds: e.g. "
                     "1s)");
  }
  TK_ASSIGN(l.fill_interval_s,
            whole_seconds(per, child(path, "per"), kMinRlqsFillIntervalS,
                          kMaxRlqsFillIntervalS, "[1s, 1d]", errors));
  if (absl::Status s = m->unknown(); !s.ok()) return s;
  return l;
}

// Two matches select the same bucket ids ("" and "*" both mean any value).
bool same_match(const std::vector<RlqsMatchEntry>& a,
                const std::vector<RlqsMatchEntry>& b) {
  const auto any = [](const RlqsMatchEntry& e) {
    return e.value.empty() || e.value == "*";
  };
  return std::equal(a.begin(), a.end(), b.begin(), b.end(),
                    [&](const RlqsMatchEntry& x, const RlqsMatchEntry& y) {
                      return x.key == y.key &&
                             (x.value == y.value || (any(x) && any(y)));
                    });
}

// One entry of `buckets`; `default_ttl_s` is the domain's.
absl::StatusOr<RlqsBucketRule> rule(const YAML::Node& n,
                                    const std::string& path,
                                    int64_t default_ttl_s,
                                    const Errors& errors) {
  absl::StatusOr<Map> m = mapping(n, path, errors);
  if (!m.ok()) return m.status();
  RlqsBucketRule r;
  r.assignment_ttl_s = default_ttl_s;
  const YAML::Node mt = m->get("match");
  if (!mt.IsDefined()) {
    return errors.at(path, "missing `match` ({} matches every bucket)");
  }
  TK_ASSIGN(r.match, match(mt, child(path, "match"), errors));
  const YAML::Node lim = m->get("limit");
  const YAML::Node allow = m->get("allow");
  const YAML::Node deny = m->get("deny");
  if (int{lim.IsDefined()} + int{allow.IsDefined()} + int{deny.IsDefined()} !=
      1) {
    return errors.at(path,
                     "needs exactly one of `limit` (a budget), `allow: true` "
                     "(ALLOW_ALL) or `deny: true` (DENY_ALL)");
  }
  if (lim.IsDefined()) {
    TK_ASSIGN(r.limit, limit(lim, child(path, "limit"), errors));
  } else if (allow.IsDefined()) {
    if (absl::Status s = only_true(allow, child(path, "allow"), errors);
        !s.ok()) {
      return s;
    }
    r.blanket = RlqsBlanket::kAllowAll;
  } else {
    if (absl::Status s = only_true(deny, child(path, "deny"), errors);
        !s.ok()) {
      return s;
    }
    r.blanket = RlqsBlanket::kDenyAll;
  }
  if (const YAML::Node t = m->get("assignmentTtl"); t.IsDefined()) {
    TK_ASSIGN(r.assignment_ttl_s,
              assignment_ttl(t, child(path, "assignmentTtl"), errors));
  }
  if (const YAML::Node s = m->get("shared"); s.IsDefined()) {
    TK_ASSIGN(r.shared, boolean(s, child(path, "shared"), errors));
    if (!r.limit.has_value()) {
      return errors.at(child(path, "shared"),
                       "applies to a rule with a `limit` only");
    }
  }
  if (absl::Status s = m->unknown(); !s.ok()) return s;
  r.identity = rlqs_rule_identity(r);
  return r;
}

// `allow` or `deny` at `path`.
absl::StatusOr<RlqsBlanket> blanket(const YAML::Node& n,
                                    const std::string& path,
                                    const Errors& errors) {
  if (n.IsScalar() && n.Scalar() == "allow") return RlqsBlanket::kAllowAll;
  if (n.IsScalar() && n.Scalar() == "deny") return RlqsBlanket::kDenyAll;
  return errors.at(path,
                   absl::StrCat("must be allow or deny; got ", quoted(n)));
}

// One entry of `domains`.
absl::StatusOr<RlqsDomain> domain(const YAML::Node& n, const std::string& path,
                                  const Errors& errors) {
  absl::StatusOr<Map> m = mapping(n, path, errors);
  if (!m.ok()) return m.status();
  RlqsDomain d;
  d.source = absl::StrCat(errors.source(), ": ", path);
  const YAML::Node name = m->get("domain");
  if (!name.IsDefined()) return errors.at(path, "missing `domain`");
  if (!name.IsScalar() || name.Scalar().empty()) {
    return errors.at(
        child(path, "domain"),
        absl::StrCat("must be a non-empty string; got ", quoted(name)));
  }
  d.domain = name.Scalar();
  if (const YAML::Node t = m->get("assignmentTtl"); t.IsDefined()) {
    TK_ASSIGN(d.assignment_ttl_s,
              assignment_ttl(t, child(path, "assignmentTtl"), errors));
  }
  if (const YAML::Node u = m->get("unmatched"); u.IsDefined()) {
    TK_ASSIGN(d.unmatched, blanket(u, child(path, "unmatched"), errors));
  }
  if (const YAML::Node bs = m->get("buckets"); bs.IsDefined()) {
    const std::string list = child(path, "buckets");
    if (absl::Status s = for_each_item(
            bs, list, errors,
            "a list of rules ({match, limit | allow | deny, assignmentTtl, "
            "shared})",
            [&](const YAML::Node& item, const std::string& at) -> absl::Status {
              absl::StatusOr<RlqsBucketRule> r =
                  rule(item, at, d.assignment_ttl_s, errors);
              if (!r.ok()) return r.status();
              for (size_t i = 0; i < d.buckets.size(); ++i) {
                if (same_match(d.buckets[i].match, r->match)) {
                  return errors.at(
                      child(at, "match"),
                      absl::StrCat("the same match as ", list, "[", i,
                                   "], which comes first: this rule would "
                                   "never apply"));
                }
              }
              d.buckets.push_back(*std::move(r));
              return absl::OkStatus();
            });
        !s.ok()) {
      return s;
    }
  }
  if (absl::Status s = m->unknown(); !s.ok()) return s;
  return d;
}

}  // namespace

const RlqsDomain* RlqsConfig::find(std::string_view name) const {
  for (const RlqsDomain& d : domains) {
    if (d.domain == name) return &d;
  }
  return nullptr;
}

bool rlqs_rule_matches(const RlqsBucketRule& rule, const RlqsBucketId& id) {
  for (const RlqsMatchEntry& e : rule.match) {
    const auto it = id.find(e.key);
    if (it == id.end()) return false;
    if (e.value.empty() || e.value == "*") continue;
    if (e.pattern.empty() ? it->second != e.value
                          : !matches_value_pattern(e.pattern, it->second)) {
      return false;
    }
  }
  return true;
}

std::optional<RlqsRuleMatch> match_rlqs_bucket(const RlqsDomain& domain,
                                               const RlqsBucketId& id) {
  for (size_t i = 0; i < domain.buckets.size(); ++i) {
    const RlqsBucketRule& r = domain.buckets[i];
    if (rlqs_rule_matches(r, id)) {
      return RlqsRuleMatch{
          .rule = i, .budget_key = rlqs_budget_key(r.identity, r.shared, id)};
    }
  }
  return std::nullopt;
}

std::string rlqs_rule_identity(const RlqsBucketRule& rule) {
  std::string identity;
  for (const RlqsMatchEntry& e : rule.match) {
    append_length_prefixed(identity, e.key);
    append_length_prefixed(identity, e.value.empty() ? "*" : e.value);
  }
  if (rule.limit.has_value()) {
    append_length_prefixed(identity,
                           absl::StrCat("per=", rule.limit->fill_interval_s,
                                        ",ttl=", rule.assignment_ttl_s,
                                        rule.shared ? ",shared" : ",each"));
  } else {
    append_length_prefixed(
        identity,
        absl::StrCat(rule.blanket == RlqsBlanket::kAllowAll ? "allow" : "deny",
                     ",ttl=", rule.assignment_ttl_s));
  }
  return identity;
}

std::string rlqs_budget_key(std::string_view identity, bool shared,
                            const RlqsBucketId& id) {
  std::string key;
  append_length_prefixed(key, identity);
  if (!shared) key += rlqs_bucket_key(id);
  return key;
}

std::string rlqs_bucket_key(const RlqsBucketId& id) {
  std::string key;
  for (const auto& [k, v] : id) {
    append_length_prefixed(key, k);
    append_length_prefixed(key, v);
  }
  return key;
}

namespace yaml_reader {

absl::StatusOr<RlqsConfig> rlqs_block(const YAML::Node& n,
                                      const std::string& path,
                                      const Errors& errors) {
  absl::StatusOr<Map> m = mapping(n, path, errors);
  if (!m.ok()) return m.status();
  RlqsConfig config;
  if (const YAML::Node u = m->get("unknownDomain"); u.IsDefined()) {
    const std::string s = u.IsScalar() ? u.Scalar() : "";
    if (s == "notFound") {
      config.unknown_domain = RlqsUnknownDomain::kNotFound;
    } else if (s != "allow") {
      return errors.at(
          child(path, "unknownDomain"),
          absl::StrCat("must be allow or notFound; got ", quoted(u)));
    }
  }
  if (const YAML::Node h = m->get("fleetHeartbeat"); h.IsDefined()) {
    const absl::StatusOr<int64_t> ms =
        duration(h, child(path, "fleetHeartbeat"), errors);
    if (!ms.ok() || *ms < kMinRlqsFleetHeartbeatMs ||
        *ms > kMaxRlqsFleetHeartbeatMs) {
      return errors.at(
          child(path, "fleetHeartbeat"),
          absl::StrCat("must be a duration in [10ms, 1m]; got ", quoted(h)));
    }
    config.fleet_heartbeat_ms = *ms;
  }
  if (const YAML::Node a = m->get("abandonIdle"); a.IsDefined()) {
    const bool zero = a.IsScalar() && (a.Scalar() == "0" || a.Scalar() == "0s");
    const absl::StatusOr<int64_t> ms =
        zero ? absl::StatusOr<int64_t>(0)
             : duration(a, child(path, "abandonIdle"), errors);
    if (!ms.ok() || *ms > kMaxRlqsAbandonIdleMs) {
      return errors.at(
          child(path, "abandonIdle"),
          absl::StrCat("must be 0s (never) or a duration up to 1d; got ",
                       quoted(a)));
    }
    config.abandon_idle_ms = *ms;
  }
  const YAML::Node ds = m->get("domains");
  if (!ds.IsDefined()) {
    return errors.at(path, "missing `domains` (at least one domain)");
  }
  const std::string list = child(path, "domains");
  if (absl::Status s = for_each_item(
          ds, list, errors, "a list of domains ({domain, buckets, unmatched})",
          [&](const YAML::Node& item, const std::string& at) -> absl::Status {
            absl::StatusOr<RlqsDomain> d = domain(item, at, errors);
            if (!d.ok()) return d.status();
            if (const RlqsDomain* was = config.find(d->domain)) {
              return errors.at(
                  child(at, "domain"),
                  absl::StrCat("duplicate domain \"", d->domain,
                               "\"; also defined at ", was->source));
            }
            config.domains.push_back(*std::move(d));
            return absl::OkStatus();
          });
      !s.ok()) {
    return s;
  }
  if (config.domains.empty()) {
    return errors.at(list, "needs at least one domain");
  }
  if (absl::Status s = m->unknown(); !s.ok()) return s;
  return config;
}

}  // namespace yaml_reader

}  // namespace throttlekit::server
