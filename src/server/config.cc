// src/server/config.cc: the YAML configuration (config.h).

#include "config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <set>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl_view.h"
#include "envoy_config.h"
#include "file_text.h"
#include "throttlekit/core/decision.h"
#include "throttlekit/core/key.h"
#include "throttlekit/federation/federated_fair_escrow.h"
#include "throttlekit/federation/region_pool.h"
#include "yaml_reader.h"

namespace throttlekit::server {
namespace {

// The reader's vocabulary (mapping, integer, child, Errors, ...).
using namespace yaml_reader;  // NOLINT(build/namespaces)

// A count: an integer in [1, 2^53-1].
absl::StatusOr<int64_t> count(const YAML::Node& n, const std::string& path,
                              const Errors& errors) {
  return integer(n, path, 1, kMaxSafeInteger, errors, "[1, 2^53-1]");
}

// A finite number > 0.
absl::StatusOr<double> positive(const YAML::Node& n, const std::string& path,
                                const Errors& errors) {
  double v = 0;
  if (!n.IsScalar() || !absl::SimpleAtod(n.Scalar(), &v) || !std::isfinite(v) ||
      v <= 0) {
    return errors.at(
        path, absl::StrCat("must be a finite number > 0; got ", quoted(n)));
  }
  return v;
}

// The window of a windowed strategy: exactly one of `period`, `window`
// (durations), `periodMs`, `windowMs` (milliseconds).
absl::StatusOr<int64_t> window(Map& m) {
  std::optional<int64_t> out;
  for (const std::string_view key :
       {"period", "window", "periodMs", "windowMs"}) {
    const YAML::Node n = m.get(key);
    if (!n.IsDefined()) continue;
    if (out.has_value()) {
      return m.errors().at(
          m.path(),
          "give the window once (period, window, periodMs or windowMs)");
    }
    absl::StatusOr<int64_t> ms = duration(n, child(m.path(), key), m.errors());
    if (!ms.ok()) return ms.status();
    out = *ms;
  }
  if (!out.has_value()) {
    return m.errors().at(m.path(), "missing the window (period: e.g. 1m)");
  }
  return *out;
}

absl::StatusOr<int64_t> required_count(Map& m, std::string_view key) {
  const YAML::Node n = m.get(key);
  if (!n.IsDefined()) {
    return m.errors().at(m.path(), absl::StrCat("missing `", sv(key), "`"));
  }
  return count(n, child(m.path(), key), m.errors());
}

// The strategy named by `m`'s `strategy` key with its options.
absl::StatusOr<StrategySpec> strategy(Map& m) {
  const YAML::Node kind = m.get("strategy");
  const std::string kind_path = child(m.path(), "strategy");
  if (!kind.IsDefined()) return m.errors().at(m.path(), "missing `strategy`");
  if (!kind.IsScalar()) {
    return m.errors().at(kind_path, "must be a strategy name");
  }
  StrategySpec spec;
  spec.name = kind.Scalar();
  const std::string& k = spec.name;
  if (k == "gcra") {
    Gcra::Options o;
    TK_ASSIGN(o.limit, required_count(m, "limit"));
    TK_ASSIGN(o.period_ms, window(m));
    if (const YAML::Node b = m.get("burst"); b.IsDefined()) {
      TK_ASSIGN(o.burst, count(b, child(m.path(), "burst"), m.errors()));
    }
    spec.options = o;
  } else if (k == "tokenBucket") {
    TokenBucket::Options o;
    TK_ASSIGN(o.capacity, required_count(m, "capacity"));
    const YAML::Node r = m.get("refillPerSec");
    if (!r.IsDefined())
      return m.errors().at(m.path(), "missing `refillPerSec`");
    TK_ASSIGN(o.refill_per_sec,
              positive(r, child(m.path(), "refillPerSec"), m.errors()));
    spec.options = o;
  } else if (k == "fixedWindow") {
    FixedWindow::Options o;
    TK_ASSIGN(o.limit, required_count(m, "limit"));
    TK_ASSIGN(o.window_ms, window(m));
    spec.options = o;
  } else if (k == "slidingWindow") {
    SlidingWindow::Options o;
    TK_ASSIGN(o.limit, required_count(m, "limit"));
    TK_ASSIGN(o.window_ms, window(m));
    if (const YAML::Node b = m.get("buckets"); b.IsDefined()) {
      TK_ASSIGN(o.buckets, count(b, child(m.path(), "buckets"), m.errors()));
    }
    spec.options = o;
  } else if (k == "slidingLog" || k == "slidingWindowLog") {
    SlidingLog::Options o;
    TK_ASSIGN(o.limit, required_count(m, "limit"));
    TK_ASSIGN(o.window_ms, window(m));
    spec.options = o;
  } else if (k == "quota") {
    Quota::Options o;
    TK_ASSIGN(o.limit, required_count(m, "limit"));
    const YAML::Node p = m.get("period");
    const std::string p_path = child(m.path(), "period");
    if (!p.IsDefined()) {
      return m.errors().at(m.path(),
                           "missing `period` (day, week, month or a duration)");
    }
    if (p.IsScalar() && p.Scalar() == "day") {
      o.period = QuotaPeriod::kDay;
    } else if (p.IsScalar() && p.Scalar() == "week") {
      o.period = QuotaPeriod::kWeek;
    } else if (p.IsScalar() && p.Scalar() == "month") {
      o.period = QuotaPeriod::kMonth;
    } else {
      o.period = QuotaPeriod::kFixed;
      TK_ASSIGN(o.period_ms, duration(p, p_path, m.errors()));
    }
    if (const YAML::Node n = m.get("weekStartsOn"); n.IsDefined()) {
      TK_ASSIGN(o.week_starts_on, integer(n, child(m.path(), "weekStartsOn"), 0,
                                          6, m.errors(), "[0, 6]"));
    }
    if (const YAML::Node n = m.get("offsetMinutes"); n.IsDefined()) {
      TK_ASSIGN(o.offset_minutes,
                integer(n, child(m.path(), "offsetMinutes"), -840, 840,
                        m.errors(), "[-840, 840]"));
    }
    if (const YAML::Node n = m.get("anchorMs"); n.IsDefined()) {
      TK_ASSIGN(o.anchor_ms,
                integer(n, child(m.path(), "anchorMs"), -kMaxSafeInteger,
                        kMaxSafeInteger, m.errors(), "[-(2^53-1), 2^53-1]"));
    }
    spec.options = o;
  } else if (k == "tokenBudget") {
    TokenBudget::Options o;
    TK_ASSIGN(o.budget, required_count(m, "budget"));
    TK_ASSIGN(o.window_ms, window(m));
    spec.options = o;
  } else if (k == "leakyBucket") {
    return m.errors().at(kind_path,
                         "leakyBucket shapes traffic (it delays, it does not "
                         "decide) and is not served by the server");
  } else {
    return m.errors().at(
        kind_path,
        absl::StrCat("unknown strategy ", quoted(kind),
                     "; expected gcra, tokenBucket, fixedWindow, "
                     "slidingWindow, slidingLog, quota or tokenBudget"));
  }
  if (absl::Status s = m.unknown(); !s.ok()) return s;
  // The strategy's own validation (bounds between fields, e.g. buckets).
  if (absl::StatusOr<AnyStrategy> v = make_strategy(spec.options); !v.ok()) {
    return m.errors().at(m.path(), std::string(v.status().message()));
  }
  return spec;
}

// An adaptive limit from `m`: `adaptive` (gradient2 or aimd; required
// unless `law_required` is false, then gradient2 by default) with minLimit,
// maxLimit and initialLimit.
absl::StatusOr<AdaptiveConcurrencyOptions> local_limit(Map& m,
                                                       bool law_required) {
  const std::string& path = m.path();
  const Errors& errors = m.errors();
  AdaptiveConcurrencyOptions o;
  const YAML::Node law = m.get("adaptive");
  if (!law.IsDefined() && law_required) {
    return errors.at(path, "needs adaptive (gradient2 or aimd)");
  }
  if (!law.IsDefined() || (law.IsScalar() && law.Scalar() == "gradient2")) {
    o.law = ConcurrencyLaw::kGradient2;
  } else if (law.IsScalar() && law.Scalar() == "aimd") {
    o.law = ConcurrencyLaw::kAimd;
  } else {
    return errors.at(
        child(path, "adaptive"),
        absl::StrCat("must be gradient2 or aimd; got ", quoted(law)));
  }
  const auto limit = [&](std::string_view key, int64_t& field) -> absl::Status {
    const YAML::Node v = m.get(key);
    if (!v.IsDefined()) return absl::OkStatus();
    absl::StatusOr<int64_t> x = integer(
        v, child(path, key), 1, kMaxConcurrencyLimit, errors, "[1, 2^30]");
    if (!x.ok()) return x.status();
    field = *x;
    return absl::OkStatus();
  };
  if (absl::Status s = limit("minLimit", o.min_limit); !s.ok()) return s;
  if (absl::Status s = limit("maxLimit", o.max_limit); !s.ok()) return s;
  if (absl::Status s = limit("initialLimit", o.initial_limit); !s.ok()) {
    return s;
  }
  if (!m.has("initialLimit")) {
    o.initial_limit = std::clamp(o.initial_limit, o.min_limit, o.max_limit);
  }
  if (auto c = AdaptiveConcurrency::create(o); !c.ok()) {
    return errors.at(path, std::string(c.status().message()));
  }
  return o;
}

// `distributedConcurrency: {minLimit, maxLimit, aggregate, ...}`: the local
// adaptive limit (local_limit) and the fleet's options. The server's
// defaults differ from the library's in one place: `handoff` is on, so
// sum(in-flight) <= the global ceiling at every instant.
absl::StatusOr<ConcurrencySpec> distributed_concurrency(const YAML::Node& n,
                                                        const std::string& path,
                                                        const Errors& errors) {
  absl::StatusOr<Map> m = mapping(n, path, errors);
  if (!m.ok()) return m.status();
  DistributedConcurrencyOptions o;
  o.handoff = true;
  TK_ASSIGN(o.local, local_limit(*m, /*law_required=*/false));
  if (const YAML::Node a = m->get("aggregate"); a.IsDefined()) {
    if (a.IsScalar() && a.Scalar() == "min") {
      o.aggregate = HeartbeatAggregate::kMin;
    } else if (a.IsScalar() && a.Scalar() == "median") {
      o.aggregate = HeartbeatAggregate::kLowerMedian;
    } else {
      return errors.at(child(path, "aggregate"),
                       absl::StrCat("must be min or median; got ", quoted(a)));
    }
  }
  if (const YAML::Node v = m->get("heartbeat"); v.IsDefined()) {
    TK_ASSIGN(o.heartbeat_ms, duration(v, child(path, "heartbeat"), errors));
  }
  if (const YAML::Node v = m->get("leaseTtl"); v.IsDefined()) {
    TK_ASSIGN(o.lease_ttl_ms, duration(v, child(path, "leaseTtl"), errors));
  }
  if (const YAML::Node v = m->get("handoff"); v.IsDefined()) {
    TK_ASSIGN(o.handoff, boolean(v, child(path, "handoff"), errors));
  }
  if (const YAML::Node v = m->get("demandProportional"); v.IsDefined()) {
    TK_ASSIGN(o.demand_proportional,
              boolean(v, child(path, "demandProportional"), errors));
  }
  if (const YAML::Node v = m->get("eagerHeartbeats"); v.IsDefined()) {
    TK_ASSIGN(o.eager_heartbeats,
              boolean(v, child(path, "eagerHeartbeats"), errors));
  }
  if (const YAML::Node v = m->get("outage"); v.IsDefined()) {
    if (v.IsScalar() && v.Scalar() == "failClosed") {
      o.outage = ConcurrencyOutageMode::kFailClosed;
    } else if (v.IsScalar() && v.Scalar() == "localOnly") {
      o.outage = ConcurrencyOutageMode::kLocalOnly;
    } else {
      return errors.at(
          child(path, "outage"),
          absl::StrCat("must be failClosed or localOnly; got ", quoted(v)));
    }
  }
  if (const YAML::Node v = m->get("fenceMargin"); v.IsDefined()) {
    // A margin turns self-fencing on; 0 is allowed (no drift assumed).
    if (v.IsScalar() && v.Scalar() == "0") {
      o.fence_safety_margin_ms = 0;
    } else {
      TK_ASSIGN(o.fence_safety_margin_ms,
                duration(v, child(path, "fenceMargin"), errors));
    }
    o.self_fencing = true;
  }
  if (absl::Status s = m->unknown(); !s.ok()) return s;
  // The library's own validation, with placeholders for what the server
  // fills in (node id, key).
  DistributedConcurrencyOptions probe = o;
  probe.node_id = "config-check";
  probe.key = "config-check";
  if (absl::Status s = DistributedConcurrency::validate(probe); !s.ok()) {
    return errors.at(path, std::string(s.message()));
  }
  ConcurrencySpec spec;
  spec.adaptive = o.local;
  spec.distributed = DistributedSpec{std::move(o)};
  return spec;
}

absl::StatusOr<ConcurrencySpec> concurrency(const YAML::Node& n,
                                            const std::string& path,
                                            const Errors& errors) {
  absl::StatusOr<Map> m = mapping(n, path, errors);
  if (!m.ok()) return m.status();
  ConcurrencySpec spec;
  if (const YAML::Node f = m->get("maxInflight"); f.IsDefined()) {
    TK_ASSIGN(spec.max_inflight,
              integer(f, child(path, "maxInflight"), 1, kMaxConcurrencyLimit,
                      errors, "[1, 2^30]"));
  }
  if (m->has("distributed")) {
    if (spec.max_inflight != 0 || m->has("adaptive")) {
      return errors.at(path,
                       "give one of maxInflight (a fixed ceiling), adaptive "
                       "or distributed");
    }
    absl::StatusOr<ConcurrencySpec> d = distributed_concurrency(
        m->get("distributed"), child(path, "distributed"), errors);
    if (!d.ok()) return d.status();
    spec = *std::move(d);
  } else if (m->has("adaptive")) {
    if (spec.max_inflight != 0) {
      return errors.at(path,
                       "give maxInflight (a fixed ceiling) or adaptive, "
                       "not both");
    }
    TK_ASSIGN(spec.adaptive, local_limit(*m, /*law_required=*/true));
  } else if (spec.max_inflight == 0) {
    return errors.at(path,
                     "needs maxInflight (a fixed ceiling), adaptive "
                     "(gradient2 or aimd) or distributed");
  }
  if (absl::Status s = m->unknown(); !s.ok()) return s;
  return spec;
}

absl::StatusOr<AdmissionPolicy> admission(const YAML::Node& n,
                                          const std::string& path,
                                          const Errors& errors) {
  absl::StatusOr<Map> m = mapping(n, path, errors);
  if (!m.ok()) return m.status();
  AdmissionPolicy p;
  if (const YAML::Node c = m->get("concurrency"); c.IsDefined()) {
    TK_ASSIGN(p.concurrency,
              concurrency(c, child(path, "concurrency"), errors));
  }
  for (const std::string_view axis : {"rate", "cost"}) {
    const YAML::Node a = m->get(axis);
    if (!a.IsDefined()) continue;
    absl::StatusOr<Map> am = mapping(a, child(path, axis), errors);
    if (!am.ok()) return am.status();
    absl::StatusOr<StrategySpec> s = strategy(*am);
    if (!s.ok()) return s.status();
    (axis == "rate" ? p.rate : p.cost) = *std::move(s);
  }
  // A misspelt axis is reported as unknown, not as a missing one.
  if (absl::Status s = m->unknown(); !s.ok()) return s;
  if (!p.concurrency && !p.rate && !p.cost) {
    return errors.at(path,
                     "needs at least one axis: concurrency, rate or cost");
  }
  return p;
}

absl::StatusOr<FleetBudgetPolicy> fleet_budget(const YAML::Node& n,
                                               const std::string& path,
                                               const Errors& errors) {
  absl::StatusOr<Map> m = mapping(n, path, errors);
  if (!m.ok()) return m.status();
  FleetBudgetPolicy p;
  TK_ASSIGN(p.budget, required_count(*m, "budget"));
  TK_ASSIGN(p.window_ms, window(*m));
  if (absl::Status s = m->unknown(); !s.ok()) return s;
  return p;
}

absl::StatusOr<FederatedSpec> federated(const YAML::Node& n,
                                        const std::string& path,
                                        const Errors& errors) {
  absl::StatusOr<Map> m = mapping(n, path, errors);
  if (!m.ok()) return m.status();
  FederatedSpec spec;
  if (const YAML::Node b = m->get("batch"); b.IsDefined()) {
    TK_ASSIGN(spec.batch, integer(b, child(path, "batch"), 1, int64_t{1} << 20,
                                  errors, "[1, 2^20]"));
  }
  if (const YAML::Node r = m->get("region"); r.IsDefined()) {
    if (!r.IsScalar()) {
      return errors.at(child(path, "region"), "must be a region name");
    }
    spec.region = r.Scalar();
  }
  if (absl::Status s = m->unknown(); !s.ok()) return s;
  return spec;
}

// `fairEscrow:` or `federatedFairEscrow:` (`federated`).
absl::StatusOr<FairEscrowPolicy> fair_escrow(const YAML::Node& n,
                                             const std::string& path,
                                             const Errors& errors,
                                             bool federated) {
  absl::StatusOr<Map> m = mapping(n, path, errors);
  if (!m.ok()) return m.status();
  FairEscrowPolicy p;
  p.federated = federated;
  TK_ASSIGN(p.limit, required_count(*m, "limit"));
  TK_ASSIGN(p.window_ms, window(*m));
  p.quantum = std::min<int64_t>(p.quantum, p.limit);  // the default
  if (const YAML::Node q = m->get("quantum"); q.IsDefined()) {
    TK_ASSIGN(p.quantum,
              integer(q, child(path, "quantum"), federated ? 0 : 1, p.limit,
                      errors, federated ? "[0, limit]" : "[1, limit]"));
  }
  if (federated) {
    if (const YAML::Node r = m->get("region"); r.IsDefined()) {
      if (!r.IsScalar()) {
        return errors.at(child(path, "region"), "must be a region name");
      }
      p.region = r.Scalar();
    }
  }
  const YAML::Node tenants = m->get("tenants");
  const std::string tpath = child(path, "tenants");
  if (!tenants.IsDefined()) return errors.at(path, "missing `tenants`");
  if (!tenants.IsSequence() || tenants.size() == 0) {
    return errors.at(tpath,
                     "must be a non-empty list of {name, weight, hardCap}");
  }
  for (size_t i = 0; i < tenants.size(); ++i) {
    const std::string at = absl::StrCat(tpath, "[", i, "]");
    absl::StatusOr<Map> t = mapping(tenants[i], at, errors);
    if (!t.ok()) return t.status();
    WeightedFairEscrowOptions::Tenant tenant;
    const YAML::Node name = t->get("name");
    if (!name.IsDefined() || !name.IsScalar() || name.Scalar().empty()) {
      return errors.at(child(at, "name"), "must be the tenant's name");
    }
    tenant.name = name.Scalar();
    if (const YAML::Node w = t->get("weight"); w.IsDefined()) {
      TK_ASSIGN(tenant.weight, positive(w, child(at, "weight"), errors));
    }
    if (const YAML::Node c = t->get("hardCap"); c.IsDefined()) {
      TK_ASSIGN(tenant.hard_cap, integer(c, child(at, "hardCap"), 0, p.limit,
                                         errors, "[0, limit]"));
    }
    if (absl::Status s = t->unknown(); !s.ok()) return s;
    p.tenants.push_back(std::move(tenant));
  }
  if (absl::Status s = m->unknown(); !s.ok()) return s;
  // The library's validation (tenant names, weights, bounds) at load, on
  // an in-process stand-in for the store the server will use.
  absl::Status valid;
  if (federated) {
    auto e = FederatedFairEscrow::create(
        {.limit = p.limit,
         .window_ms = p.window_ms,
         .tenants = p.tenants,
         .pool = std::make_shared<MemoryRegionPool>(),
         .key = "config-check",
         .region = p.region,
         .quantum = p.quantum});
    valid = e.status();
  } else {
    auto e = WeightedFairEscrow::create({.limit = p.limit,
                                         .window_ms = p.window_ms,
                                         .tenants = p.tenants,
                                         .quantum = p.quantum});
    valid = e.status();
  }
  if (!valid.ok()) return errors.at(path, std::string(valid.message()));
  return p;
}

absl::StatusOr<PolicySpec> policy(const std::string& name, const YAML::Node& n,
                                  const std::string& path,
                                  const Errors& errors) {
  absl::StatusOr<Map> m = mapping(n, path, errors);
  if (!m.ok()) return m.status();
  PolicySpec spec;
  spec.name = name;
  const int kinds =
      int{m->has("strategy")} + int{m->has("admission")} +
      int{m->has("fleetBudget")} + int{m->has("distributedConcurrency")} +
      int{m->has("fairEscrow")} + int{m->has("federatedFairEscrow")};
  if (kinds != 1) {
    return errors.at(path,
                     "needs exactly one of strategy (a limiter), "
                     "admission, fleetBudget, distributedConcurrency, "
                     "fairEscrow or federatedFairEscrow");
  }
  if (m->has("fairEscrow") || m->has("federatedFairEscrow")) {
    const bool federated = m->has("federatedFairEscrow");
    const std::string_view block =
        federated ? "federatedFairEscrow" : "fairEscrow";
    absl::StatusOr<FairEscrowPolicy> f =
        fair_escrow(m->get(block), child(path, block), errors, federated);
    if (!f.ok()) return f.status();
    spec.body = *std::move(f);
    if (absl::Status s = m->unknown(); !s.ok()) return s;
  } else if (m->has("distributedConcurrency")) {
    AdmissionPolicy a;
    TK_ASSIGN(
        a.concurrency,
        distributed_concurrency(m->get("distributedConcurrency"),
                                child(path, "distributedConcurrency"), errors));
    spec.body = std::move(a);
    if (absl::Status s = m->unknown(); !s.ok()) return s;
  } else if (m->has("admission")) {
    absl::StatusOr<AdmissionPolicy> a =
        admission(m->get("admission"), child(path, "admission"), errors);
    if (!a.ok()) return a.status();
    spec.body = *std::move(a);
    if (absl::Status s = m->unknown(); !s.ok()) return s;
  } else if (m->has("fleetBudget")) {
    absl::StatusOr<FleetBudgetPolicy> f =
        fleet_budget(m->get("fleetBudget"), child(path, "fleetBudget"), errors);
    if (!f.ok()) return f.status();
    spec.body = *f;
    if (absl::Status s = m->unknown(); !s.ok()) return s;
  } else {
    LimiterPolicy limiter;
    if (const YAML::Node f = m->get("federated"); f.IsDefined()) {
      absl::StatusOr<FederatedSpec> fed =
          federated(f, child(path, "federated"), errors);
      if (!fed.ok()) return fed.status();
      limiter.federated = *std::move(fed);
    }
    absl::StatusOr<StrategySpec> s = strategy(*m);  // checks unknown keys
    if (!s.ok()) return s.status();
    limiter.strategy = *std::move(s);
    spec.body = std::move(limiter);
  }
  return spec;
}

absl::StatusOr<ServerConfig> parse_document(const YAML::Node& doc,
                                            const Errors& errors,
                                            std::string_view base_dir) {
  if (absl::Status s = check_shape(doc, "", 1, errors); !s.ok()) return s;
  absl::StatusOr<Map> top = mapping(doc, "", errors);
  if (!top.ok()) return top.status();
  ServerConfig config;
  const YAML::Node version = top->get("version");
  if (!version.IsDefined()) return errors.at("", "missing `version: 1`");
  if (!version.IsScalar() || version.Scalar() != "1") {
    return errors.at("version",
                     absl::StrCat("must be 1; got ", quoted(version)));
  }
  if (const YAML::Node n = top->get("leaseTtl"); n.IsDefined()) {
    TK_ASSIGN(config.lease_ttl_ms, duration(n, "leaseTtl", errors));
  }
  if (const YAML::Node n = top->get("maxKeyBytes"); n.IsDefined()) {
    TK_ASSIGN(config.max_key_bytes,
              integer(n, "maxKeyBytes", 1, static_cast<int64_t>(kMaxKeyBytes),
                      errors, "[1, 2^20]"));
  }
  if (const YAML::Node n = top->get("maxBatch"); n.IsDefined()) {
    TK_ASSIGN(config.max_batch,
              integer(n, "maxBatch", 1, 1'000'000, errors, "[1, 10^6]"));
  }
  if (const YAML::Node envoy = top->get("envoy"); envoy.IsDefined()) {
    TK_ASSIGN(config.envoy,
              yaml_reader::envoy_block(envoy, "envoy", errors, base_dir));
  }
  if (const YAML::Node rlqs = top->get("rlqs"); rlqs.IsDefined()) {
    TK_ASSIGN(config.rlqs, yaml_reader::rlqs_block(rlqs, "rlqs", errors));
  }
  if (const YAML::Node fa = top->get("forwardAuth"); fa.IsDefined()) {
    TK_ASSIGN(config.forward_auth,
              yaml_reader::forward_auth_block(fa, "forwardAuth", errors,
                                              config.envoy));
  }
  const YAML::Node limiters = top->get("limiters");
  if (!limiters.IsDefined()) {
    if (!config.envoy.domains.empty() || config.envoy.without_domains ||
        !config.rlqs.domains.empty()) {
      if (absl::Status s = top->unknown(); !s.ok()) return s;
      return config;
    }
    return errors.at("", "missing `limiters` (or an `envoy` or `rlqs` block)");
  }
  if (!limiters.IsMap() || limiters.size() == 0) {
    return errors.at("limiters",
                     "must be a non-empty mapping of names to "
                     "policies");
  }
  std::set<std::string> names;
  for (const auto& kv : limiters) {
    const std::string name = kv.first.Scalar();
    const std::string path = child("limiters", name);
    if (name.empty()) return errors.at(path, "a policy name must not be empty");
    if (!names.insert(name).second) {
      return errors.at(path, "defined twice");
    }
    absl::StatusOr<PolicySpec> p = policy(name, kv.second, path, errors);
    if (!p.ok()) return p.status();
    config.policies.push_back(*std::move(p));
  }
  if (absl::Status s = top->unknown(); !s.ok()) return s;
  return config;
}

}  // namespace

absl::StatusOr<ServerConfig> parse_config(std::string_view yaml,
                                          std::string_view source) {
  const Errors errors(source);
  return yaml_reader::read_yaml<ServerConfig>(
      yaml, source, [&](const YAML::Node& doc) {
        // `envoy.files` are named relative to the document's directory.
        const size_t slash = source.rfind('/');
        return parse_document(doc, errors,
                              slash == std::string_view::npos
                                  ? std::string_view()
                                  : source.substr(0, slash == 0 ? 1 : slash));
      });
}

absl::StatusOr<ServerConfig> load_config(const std::string& path) {
  const std::optional<std::string> text = read_file_text(path);
  if (!text.has_value()) {
    return absl::NotFoundError(
        absl::StrCat("cannot read the configuration file ", path));
  }
  return parse_config(*text, path);
}

}  // namespace throttlekit::server
