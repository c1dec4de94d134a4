// src/server/envoy_rls.cc: the Envoy rate-limit service's decisions
// (envoy_rls.h, docs/envoy.md).

#include "envoy_rls.h"

#include <algorithm>
#include <cstddef>
#include <limits>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl_view.h"
#include "envoy_rls_tree.h"
#include "metrics.h"
#include "throttlekit/core/decision.h"
#include "value_pattern.h"

namespace throttlekit::server {

namespace rls = ::envoy::service::ratelimit::v3;
namespace rlc = ::envoy::extensions::common::ratelimit::v3;

namespace {

// `s` as an RFC 8941 string for structured headers, or "envoy" when it is
// not one (not printable ASCII, or longer than 256 bytes).
std::optional<RateLimitPolicyName> policy_name_for(std::string_view s) {
  if (auto n = RateLimitPolicyName::create(s); n.ok()) return *std::move(n);
  if (auto n = RateLimitPolicyName::create("envoy"); n.ok()) {
    return *std::move(n);
  }
  return std::nullopt;
}

// The reply to a limit of 0 requests: refused until the unit's window
// ends (nothing is counted).
Decision refused(int64_t now_ms, EnvoyUnit unit) {
  const int64_t window_ms = envoy_unit_ms(unit);
  const int64_t start =
      now_ms - (((now_ms % window_ms) + window_ms) % window_ms);
  return Decision{.allowed = false,
                  .limit = 0,
                  .remaining = 0,
                  .reset_at_ms = start + window_ms,
                  .retry_after_ms = start + window_ms - now_ms};
}

// Adds a descriptor's decision `d` of `hits` against a limit of
// `requests_per_unit` to `c`: the hits in total_hits, and in over_limit
// (and shadow_mode when `shadow`) or within_limit (and near_limit past 80%
// of the limit, unless `leased`: a leased limit's remaining is this
// server's).
void count(EnvoyLimits::LimitCounters& c, int64_t hits,
           int64_t requests_per_unit, bool leased, const Decision& d,
           bool shadow) {
  constexpr auto kRelaxed = std::memory_order_relaxed;
  c.total_hits.fetch_add(hits, kRelaxed);
  if (!d.allowed) {
    c.over_limit.fetch_add(hits, kRelaxed);
    if (shadow) c.shadow_mode.fetch_add(hits, kRelaxed);
    return;
  }
  c.within_limit.fetch_add(hits, kRelaxed);
  if (!leased &&
      5 * (requests_per_unit - d.remaining) > 4 * requests_per_unit) {
    c.near_limit.fetch_add(hits, kRelaxed);
  }
}

rls::RateLimitResponse::RateLimit::Unit wire_unit(EnvoyUnit unit) {
  return static_cast<rls::RateLimitResponse::RateLimit::Unit>(
      static_cast<int>(unit));
}

// The request's own fields checked (its domain, the number of its
// descriptors, its hits_addend), before any descriptor is looked at.
absl::Status check_request(const rls::RateLimitRequest& req,
                           int64_t max_descriptors) {
  if (req.domain().empty()) {
    return absl::InvalidArgumentError("ShouldRateLimit: the domain is empty");
  }
  const int n = req.descriptors_size();
  if (n == 0) {
    return absl::InvalidArgumentError(
        "ShouldRateLimit: no descriptors (a request needs at least one)");
  }
  if (n > max_descriptors) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ShouldRateLimit: ", n, " descriptors; the server's limit is ",
        max_descriptors, " (maxBatch)"));
  }
  if (req.hits_addend() > kMaxHitsAddend) {
    return absl::InvalidArgumentError(
        absl::StrCat("ShouldRateLimit: hits_addend is ", req.hits_addend(),
                     "; at most ", kMaxHitsAddend));
  }
  return absl::OkStatus();
}

}  // namespace

EnvoyLimits::EnvoyLimits(Options options, std::shared_ptr<Coordinator> store,
                         ServerClock clock)
    : options_(options), store_(std::move(store)), clock_(clock) {}

absl::Status EnvoyLimits::close() {
  absl::Status first;
  for (const Holder& h : holders_) first.Update(h.close());
  return first;
}

absl::Status EnvoyLimits::close_dropped(const EnvoyLimits& next) {
  absl::flat_hash_set<const void*> kept;
  for (const Holder& h : next.holders_) kept.insert(h.limiter);
  absl::Status first;
  for (const Holder& h : holders_) {
    if (!kept.contains(h.limiter)) first.Update(h.close());
  }
  return first;
}

absl::Status EnvoyLimits::make_limit_engine(const EnvoyRateLimit& limit,
                                            const std::string& prefix,
                                            Node& node, const Node* reuse) {
  node.signature = absl::StrCat(
      limit.strategy, "/", limit.requests_per_unit, "/",
      static_cast<int>(limit.unit), "/", limit.burst, "/", limit.buckets, "/",
      limit.leased_batch.value_or(0), "/",
      limit.federated.has_value()
          ? absl::StrCat(limit.federated->batch, "@", limit.federated->region)
          : "-",
      "/", static_cast<int>(fail_policy_.mode()), "/",
      fail_policy_.closed_retry_ms());
  node.leased = limit.leased_batch.has_value() || limit.federated.has_value();
  if (reuse != nullptr && reuse->engine != nullptr &&
      reuse->signature == node.signature) {
    node.engine = reuse->engine;
    node.leased_limiter = reuse->leased_limiter;
    node.federated_limiter = reuse->federated_limiter;
    if (node.leased_limiter != nullptr) hold(node.leased_limiter);
    if (node.federated_limiter != nullptr) hold(node.federated_limiter);
    return absl::OkStatus();
  }
  if (!node.leased) {
    absl::StatusOr<std::shared_ptr<Engine>> e = make_policy_engine(
        StrategySpec{.name = limit.strategy, .options = *limit.options}, store_,
        prefix, clock_, fail_policy_);
    if (!e.ok()) return e.status();
    node.engine = *std::move(e);
    return absl::OkStatus();
  }
  if (store_ == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        limit.federated.has_value() ? "federated" : "leased",
        " needs a store the servers share (--redis or --postgres); the "
        "embedded memory store has nothing to lease from"));
  }
  if (limit.federated.has_value()) {
    absl::StatusOr<AnyStrategy> strategy = make_strategy(*limit.options);
    if (!strategy.ok()) return strategy.status();
    FederationOptions o;
    o.region = limit.federated->region;
    o.prefix = prefix;
    o.batch = limit.federated->batch;
    absl::StatusOr<std::unique_ptr<ServerFederatedLimiter>> f =
        federate(*strategy, store_, std::move(o), clock_);
    if (!f.ok()) return f.status();
    node.federated_limiter = *std::move(f);
    hold(node.federated_limiter);
    node.engine = make_engine(node.federated_limiter);
    return absl::OkStatus();
  }
  absl::StatusOr<std::unique_ptr<BasicLeasedLimiter<ServerClock>>> l =
      BasicLeasedLimiter<ServerClock>::create(
          {.prefix = prefix,
           .limit = limit.requests_per_unit,
           .window_ms = envoy_unit_ms(limit.unit),
           .batch = *limit.leased_batch,
           .fail_policy = fail_policy_},
          store_, clock_);
  if (!l.ok()) return l.status();
  node.leased_limiter = *std::move(l);
  hold(node.leased_limiter);
  node.engine = make_engine(node.leased_limiter);
  return absl::OkStatus();
}

EnvoyLimits::~EnvoyLimits() = default;

size_t EnvoyLimits::domains() const { return domains_.size(); }

absl::StatusOr<std::unique_ptr<EnvoyLimits>> EnvoyLimits::create(
    const EnvoyConfig& config, Options options,
    std::shared_ptr<Coordinator> store, ServerClock clock,
    const EnvoyLimits* previous) {
  std::unique_ptr<EnvoyLimits> out(
      new EnvoyLimits(options, std::move(store), clock));
  out->headers_ = config.headers;
  out->fail_policy_ = config.fail_policy;
  out->unknown_domain_ = config.unknown_domain;
  out->unknown_ = std::make_unique<Domain>();
  // The previous limits' nodes by domain and path, to carry over.
  absl::flat_hash_map<std::string, const Node*> old_nodes;
  const auto node_id = [](std::string_view domain, std::string_view path) {
    return absl::StrCat(sv(domain), "\n", sv(path));
  };
  if (previous != nullptr) {
    for (const auto& entry : previous->domains_) {
      const std::string& name = entry.first;
      const auto walk = [&](const auto& self, const Level& level) -> void {
        for (const std::unique_ptr<Node>& n : level.owned) {
          old_nodes.emplace(node_id(name, n->path), n.get());
          self(self, n->children);
        }
      };
      walk(walk, entry.second->top);
    }
    // Override engines embed the fail policy: kept while it is unchanged.
    if (previous->fail_policy_.mode() == out->fail_policy_.mode() &&
        previous->fail_policy_.closed_retry_ms() ==
            out->fail_policy_.closed_retry_ms()) {
      MutexLock lock(previous->overrides_mu_);
      MutexLock mine(out->overrides_mu_);
      out->overrides_ = previous->overrides_;
    }
    out->unrouted_.store(previous->unrouted_.load(std::memory_order_relaxed),
                         std::memory_order_relaxed);
    MutexLock lock(previous->not_found_mu_);
    MutexLock mine(out->not_found_mu_);
    out->not_found_ = previous->not_found_;
  }
  // Builds `descriptors` into `level`, their paths under `parent`.
  const auto build = [&](const auto& self, const std::string& domain,
                         const std::vector<EnvoyDescriptor>& descriptors,
                         const std::string& parent,
                         Level& level) -> absl::Status {
    for (const EnvoyDescriptor& d : descriptors) {
      auto node = std::make_unique<Node>();
      const std::string segment =
          d.value.empty() ? d.key : absl::StrCat(d.key, "_", d.value);
      node->path =
          parent.empty() ? segment : absl::StrCat(parent, ".", segment);
      node->pattern = split_value_pattern(d.value);
      node->value = d.value;
      node->share_threshold = d.share_threshold;
      node->shadow = d.shadow_mode;
      const auto old = old_nodes.find(node_id(domain, node->path));
      const Node* was = old == old_nodes.end() ? nullptr : old->second;
      if (was != nullptr) node->counters = was->counters;
      if (d.rate_limit.has_value()) {
        const EnvoyRateLimit& r = *d.rate_limit;
        node->has_limit = true;
        node->unlimited = r.unlimited;
        node->requests_per_unit = r.requests_per_unit;
        node->unit = r.unit;
        node->name = r.name;
        node->replaces = r.replaces;
        node->header_name =
            policy_name_for(r.name.empty() ? node->path : r.name);
        node->leased = r.leased_batch.has_value() || r.federated.has_value();
        if (r.options.has_value()) {
          if (absl::Status e = out->make_limit_engine(
                  r,
                  absl::StrCat("throttlekit:envoy:", domain, ":", node->path),
                  *node, was);
              !e.ok()) {
            return absl::Status(e.code(),
                                absl::StrCat("envoy domain ", domain, ", ",
                                             node->path, ": ", e.message()));
          }
        }
      }
      if (absl::Status s =
              self(self, domain, d.descriptors, node->path, node->children);
          !s.ok()) {
        return s;
      }
      Level::ByKey& by_key = level.by_key[d.key];
      if (d.value.empty()) {
        by_key.any = node.get();
      } else if (!node->pattern.empty()) {
        by_key.patterns.push_back(node.get());
      } else {
        by_key.exact.emplace(d.value, node.get());
      }
      level.owned.push_back(std::move(node));
    }
    return absl::OkStatus();
  };
  for (const EnvoyDomain& d : config.domains) {
    auto domain = std::make_unique<Domain>();
    domain->name = d.domain;
    domain->header_name = policy_name_for(d.domain);
    if (previous != nullptr) {
      if (auto it = previous->domains_.find(d.domain);
          it != previous->domains_.end()) {
        domain->overrides = it->second->overrides;
        domain->requests = it->second->requests;
      }
    }
    if (absl::Status s = build(build, d.domain, d.descriptors, "", domain->top);
        !s.ok()) {
      return s;
    }
    if (!out->domains_.emplace(d.domain, std::move(domain)).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("envoy: duplicate domain \"", d.domain, "\""));
    }
  }
  return out;
}

absl::StatusOr<Engine*> EnvoyLimits::override_engine(int64_t requests_per_unit,
                                                     EnvoyUnit unit) {
  const std::pair<int64_t, int> id(requests_per_unit, static_cast<int>(unit));
  MutexLock lock(overrides_mu_);
  if (auto it = overrides_.find(id); it != overrides_.end()) {
    return it->second.get();
  }
  if (static_cast<int64_t>(overrides_.size()) >= kMaxLimitOverrides) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "ShouldRateLimit: the server counts at most ", kMaxLimitOverrides,
        " distinct limit overrides; this request brings another (",
        requests_per_unit, " per ", sv(envoy_unit_name(unit)), ")"));
  }
  absl::StatusOr<StrategyOptions> o =
      envoy_strategy_options("fixedWindow", requests_per_unit, unit);
  if (!o.ok()) return o.status();
  absl::StatusOr<std::shared_ptr<Engine>> e = make_policy_engine(
      StrategySpec{.name = "fixedWindow", .options = *o}, store_,
      absl::StrCat("throttlekit:envoy:override:", requests_per_unit, ":",
                   sv(envoy_unit_name(unit))),
      clock_, fail_policy_);
  if (!e.ok()) return e.status();
  Engine* engine = e->get();
  overrides_.emplace(id, *std::move(e));
  return engine;
}

absl::Status EnvoyLimits::should_rate_limit(const rls::RateLimitRequest& req,
                                            rls::RateLimitResponse* resp) {
  const Domain* domain = nullptr;
  std::vector<Plan> plans;
  absl::Status s = plan(req, domain, plans);
  if (s.ok()) {
    const int64_t now_ms = clock_.now_ms();
    std::vector<absl::StatusOr<Decision>> answers(plans.size());
    for (size_t i = 0; i < plans.size(); ++i) {
      if (asks_engine(plans[i])) answers[i] = answer(plans[i], now_ms);
    }
    s = assemble(resp, *domain, plans, answers, now_ms);
  }
  account(domain, *resp, s);
  return s;
}

// One request in flight on the asynchronous path: its plans, the engines'
// answers as they arrive, and the completion. Freed by the last arrival.
struct EnvoyLimits::Pending {
  EnvoyLimits* limits = nullptr;
  rls::RateLimitResponse* resp = nullptr;
  const Domain* domain = nullptr;
  std::vector<Plan> plans;
  std::vector<absl::StatusOr<Decision>> answers;
  int64_t now_ms = 0;
  // Answers still to come, plus one held while they are being asked.
  std::atomic<size_t> left{1};
  absl::AnyInvocable<void(absl::Status) &&> done;

  // The last arrival (acq_rel: every answer written before it is seen)
  // assembles the response and completes.
  void arrive() {
    if (left.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
    std::unique_ptr<Pending> self(this);
    const absl::Status s =
        limits->assemble(resp, *domain, plans, answers, now_ms);
    limits->account(domain, *resp, s);
    std::move(done)(s);
  }
};

void EnvoyLimits::should_rate_limit_async(
    const rls::RateLimitRequest& req, rls::RateLimitResponse* resp,
    BlockingPool& blocking, absl::AnyInvocable<void(absl::Status) &&> done) {
  auto pending = std::make_unique<Pending>();
  const Domain* domain = nullptr;
  if (absl::Status s = plan(req, domain, pending->plans); !s.ok()) {
    account(domain, *resp, s);
    std::move(done)(s);
    return;
  }
  pending->limits = this;
  pending->resp = resp;
  pending->domain = domain;
  pending->answers.resize(pending->plans.size());
  pending->done = std::move(done);
  // A descriptor whose engine would wait on the store without an
  // asynchronous form (a peek, or an engine that has none) sends the whole
  // request to the blocking pool: its answers are asked there, in order.
  const bool waits = std::any_of(
      pending->plans.begin(), pending->plans.end(), [&](const Plan& p) {
        return asks_store(p) &&
               (p.peek || !p.engine->answers_without_waiting());
      });
  if (waits) {
    blocking.run([p = pending.release()] {
      p->now_ms = p->limits->clock_.now_ms();
      for (size_t i = 0; i < p->plans.size(); ++i) {
        if (asks_engine(p->plans[i])) {
          p->answers[i] = p->limits->answer(p->plans[i], p->now_ms);
        }
      }
      p->arrive();
    });
    return;
  }
  Pending* p = pending.release();
  p->now_ms = clock_.now_ms();
  for (size_t i = 0; i < p->plans.size(); ++i) {
    const Plan& plan = p->plans[i];
    if (!asks_engine(plan)) continue;
    if (!asks_store(plan)) {
      p->answers[i] = answer(plan, p->now_ms);  // nothing waits
      continue;
    }
    // On a shared store the store's clock decides (see `answer`).
    p->left.fetch_add(1, std::memory_order_relaxed);
    plan.engine->check_async(plan.key, plan.hits,
                             [p, i](absl::StatusOr<Decision> d) {
                               p->answers[i] = std::move(d);
                               p->arrive();
                             });
  }
  p->arrive();  // the hold: every answer has been asked for
}

void EnvoyLimits::account(const Domain* domain,
                          const rls::RateLimitResponse& resp,
                          const absl::Status& s) {
  if (domain == nullptr) {
    unrouted_.fetch_add(1, std::memory_order_relaxed);
  } else if (!s.ok()) {
    domain->requests->error.fetch_add(1, std::memory_order_relaxed);
  } else if (resp.overall_code() == rls::RateLimitResponse::OVER_LIMIT) {
    domain->requests->over_limit.fetch_add(1, std::memory_order_relaxed);
  } else {
    domain->requests->ok.fetch_add(1, std::memory_order_relaxed);
  }
}

bool EnvoyLimits::asks_engine(const Plan& p) {
  if (p.node == nullptr && !p.from_override) return false;  // no limit
  return p.node == nullptr || !p.node->unlimited;
}

bool EnvoyLimits::asks_store(const Plan& p) const {
  return asks_engine(p) && store_ != nullptr && p.requests_per_unit > 0 &&
         p.engine != nullptr;
}

absl::StatusOr<Decision> EnvoyLimits::answer(const Plan& p, int64_t now_ms) {
  if (p.requests_per_unit == 0) return refused(now_ms, p.unit);
  if (p.engine == nullptr) {  // every counted limit has one
    return absl::InternalError("ShouldRateLimit: a limit without engine");
  }
  if (p.peek) return p.engine->peek(p.key);
  if (store_ != nullptr) {
    // On a shared store the store's clock decides (strict: read inside
    // the script or transaction; leased: read as the credits are spent),
    // never a `now` read before the round trip. A stale `now` reaching
    // the store after the window's state expired there would find it
    // cold and count the ended window afresh (docs/redis.md, "Physical
    // TTL and a stale now").
    return p.engine->check(p.key, p.hits);
  }
  return p.engine->check_at(p.key, now_ms, p.hits);
}

absl::Status EnvoyLimits::plan(const rls::RateLimitRequest& req,
                               const Domain*& domain_out,
                               std::vector<Plan>& plans) {
  // Everything is checked before anything is counted.
  if (absl::Status s = check_request(req, options_.max_descriptors); !s.ok()) {
    return s;
  }
  const int n = req.descriptors_size();
  const auto found = domains_.find(req.domain());
  const bool known = found != domains_.end();
  if (!known && unknown_domain_ == EnvoyUnknownDomain::kNotFound) {
    return absl::NotFoundError(
        absl::StrCat("ShouldRateLimit: unknown domain \"", req.domain(),
                     "\" (the configuration names ", domains_.size(), ")"));
  }
  const Domain& domain = known ? *found->second : *unknown_;
  // A bad request to an unknown domain counts as unrouted.
  if (known) domain_out = &domain;
  const double request_hits =
      req.hits_addend() == 0 ? 1.0 : static_cast<double>(req.hits_addend());
  plans.assign(static_cast<size_t>(n), Plan{});
  for (int i = 0; i < n; ++i) {
    const rlc::RateLimitDescriptor& d = req.descriptors(i);
    const auto bad = [&](std::string_view problem) {
      return absl::InvalidArgumentError(
          absl::StrCat("ShouldRateLimit: descriptors[", i, "]", sv(problem)));
    };
    const int entries = d.entries_size();
    if (entries == 0) return bad(": no entries (at least one is required)");
    for (int j = 0; j < entries; ++j) {
      if (d.entries(j).key().empty()) {
        return bad(absl::StrCat(".entries[", j, "]: the key is empty"));
      }
    }
    Plan& p = plans[static_cast<size_t>(i)];
    p.hits = request_hits;
    if (d.has_hits_addend()) {
      const uint64_t hits = d.hits_addend().value();
      if (hits > static_cast<uint64_t>(kMaxHitsAddend)) {
        return bad(
            absl::StrCat(".hits_addend: ", hits, "; at most ", kMaxHitsAddend));
      }
      p.peek = hits == 0;
      p.hits = p.peek ? 1.0 : static_cast<double>(hits);
    }
    if (!known) continue;  // no limit applies, not even an override
    if (d.has_limit()) {
      const std::optional<EnvoyUnit> unit =
          envoy_unit_from_wire(static_cast<int>(d.limit().unit()));
      if (!unit.has_value()) {
        return bad(
            absl::StrCat(".limit.unit: ", static_cast<int>(d.limit().unit()),
                         " is not a unit (SECOND .. YEAR)"));
      }
      p.from_override = true;
      p.requests_per_unit = d.limit().requests_per_unit();
      p.unit = *unit;
      // Per domain and full descriptor (keys and values), as the
      // reference keys an override.
      append_length_prefixed(p.key, domain.name);
      for (const rlc::RateLimitDescriptor::Entry& e : d.entries()) {
        append_length_prefixed(p.key, e.key());
        append_length_prefixed(p.key, e.value());
      }
    } else {
      // The counter key is built along the way: each entry's value (or, for
      // a pattern sharing its count, the pattern).
      std::string key;
      const Level* level = &domain.top;
      for (int j = 0; j < entries && level != nullptr; ++j) {
        const rlc::RateLimitDescriptor::Entry& e = d.entries(j);
        const Node* next = nullptr;
        if (auto k = level->by_key.find(e.key()); k != level->by_key.end()) {
          const Level::ByKey& by_key = k->second;
          if (auto x = by_key.exact.find(e.value()); x != by_key.exact.end()) {
            next = x->second;
          }
          for (size_t q = 0; next == nullptr && q < by_key.patterns.size();
               ++q) {
            if (matches_value_pattern(by_key.patterns[q]->pattern, e.value())) {
              next = by_key.patterns[q];
            }
          }
          if (next == nullptr) next = by_key.any;
        }
        if (next == nullptr) break;
        append_length_prefixed(key,
                               next->share_threshold ? next->value : e.value());
        if (j == entries - 1) {
          if (next->has_limit) p.node = next;
        } else {
          level = &next->children;
        }
      }
      if (p.node != nullptr) {
        p.requests_per_unit = p.node->requests_per_unit;
        p.unit = p.node->unit;
        p.engine = p.node->engine.get();
        p.key = std::move(key);
      }
    }
    if (static_cast<int64_t>(p.key.size()) > options_.max_key_bytes) {
      return bad(absl::StrCat(": its counter key is ", p.key.size(),
                              " bytes; the server's limit is ",
                              options_.max_key_bytes, " (maxKeyBytes)"));
    }
  }
  if (!known) {
    domain_out = &domain;
    count_not_found(req.domain());
    return absl::OkStatus();
  }
  // Overrides need their engines before anything is counted (the cap on
  // them refuses the whole request).
  for (Plan& p : plans) {
    if (p.from_override && p.requests_per_unit > 0) {
      absl::StatusOr<Engine*> e = override_engine(p.requests_per_unit, p.unit);
      if (!e.ok()) return e.status();
      p.engine = *e;
    }
  }
  // `replaces`: a matched limit named by another matched limit is dropped
  // (the reference collects the names from every matched limit, unlimited
  // ones included).
  absl::flat_hash_set<absl::string_view> replaced;
  for (const Plan& p : plans) {
    if (p.node == nullptr) continue;
    for (const std::string& r : p.node->replaces) replaced.insert(r);
  }
  if (!replaced.empty()) {
    for (Plan& p : plans) {
      if (p.node != nullptr && !p.node->name.empty() &&
          replaced.contains(p.node->name)) {
        p = Plan{};
      }
    }
  }

  return absl::OkStatus();
}

absl::Status EnvoyLimits::assemble(
    rls::RateLimitResponse* resp, const Domain& domain,
    const std::vector<Plan>& plans,
    const std::vector<absl::StatusOr<Decision>>& answers, int64_t now_ms) {
  const int n = static_cast<int>(plans.size());
  bool over = false;
  // The descriptor whose numbers the headers carry: the one closest to its
  // limit, an over-limit one taking precedence (the last such), as the
  // reference picks it.
  int chosen = -1;
  int64_t chosen_remaining = std::numeric_limits<uint32_t>::max();
  std::vector<Decision> decisions(plans.size());
  for (int i = 0; i < n; ++i) {
    const Plan& p = plans[static_cast<size_t>(i)];
    rls::RateLimitResponse::DescriptorStatus* status = resp->add_statuses();
    status->set_code(rls::RateLimitResponse::OK);
    if (!asks_engine(p)) {
      if (p.node != nullptr) {  // unlimited
        status->set_limit_remaining(std::numeric_limits<uint32_t>::max());
      }
      continue;
    }
    const absl::StatusOr<Decision>& d = answers[static_cast<size_t>(i)];
    if (!d.ok()) return d.status();
    // The time the reset is measured from: the decision's own instant on
    // the memory store, now (after the round trip) on a shared one.
    const int64_t decided_ms = store_ != nullptr ? clock_.now_ms() : now_ms;
    decisions[static_cast<size_t>(i)] = *d;
    const bool shadow = p.node != nullptr && p.node->shadow;
    const bool refuses = !d->allowed && !shadow;
    if (!p.peek) {  // a check without counting adds no hit
      count(p.node != nullptr ? *p.node->counters : *domain.overrides,
            static_cast<int64_t>(p.hits), p.requests_per_unit,
            p.node != nullptr && p.node->leased, *d, shadow);
    }
    over = over || refuses;
    status->set_code(refuses ? rls::RateLimitResponse::OVER_LIMIT
                             : rls::RateLimitResponse::OK);
    rls::RateLimitResponse::RateLimit* limit = status->mutable_current_limit();
    if (p.node != nullptr) limit->set_name(p.node->name);
    limit->set_requests_per_unit(static_cast<uint32_t>(p.requests_per_unit));
    limit->set_unit(wire_unit(p.unit));
    const int64_t remaining = std::clamp<int64_t>(
        d->remaining, 0, std::numeric_limits<uint32_t>::max());
    status->set_limit_remaining(static_cast<uint32_t>(remaining));
    const int64_t until_ms = std::max<int64_t>(0, d->reset_at_ms - decided_ms);
    status->mutable_duration_until_reset()->set_seconds(until_ms / 1000);
    status->mutable_duration_until_reset()->set_nanos(
        static_cast<int32_t>(until_ms % 1000) * 1'000'000);
    if (remaining < chosen_remaining) {
      chosen = i;
      chosen_remaining = remaining;
    }
    if (refuses) {
      chosen = i;
      chosen_remaining = 0;
    }
  }
  resp->set_overall_code(over ? rls::RateLimitResponse::OVER_LIMIT
                              : rls::RateLimitResponse::OK);
  if (headers_.has_value() && chosen >= 0) {
    const Plan& p = plans[static_cast<size_t>(chosen)];
    const std::optional<RateLimitPolicyName>& name =
        p.node != nullptr ? p.node->header_name : domain.header_name;
    if (name.has_value()) {
      const RateLimitFields fields =
          rate_limit_fields(decisions[static_cast<size_t>(chosen)], now_ms,
                            *name, envoy_unit_ms(p.unit), *headers_);
      fields.for_each([&](std::string_view key, std::string_view value) {
        ::envoy::config::core::v3::HeaderValue* h =
            resp->add_response_headers_to_add();
        h->set_key(std::string(key));
        h->set_value(std::string(value));
      });
    }
  }
  return absl::OkStatus();
}

}  // namespace throttlekit::server
