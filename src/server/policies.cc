// src/server/policies.cc: the configured policies over one store
// (policies.h).

#include "policies.h"

#include <unistd.h>

#include <cstdio>
#include <type_traits>
#include <utility>
#include <variant>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl_view.h"
#include "envoy_rls.h"
#include "throttlekit/coordinator/strict_rate_limiter.h"
#include "throttlekit/federation/federated_fair_escrow.h"
#include "throttlekit/store/rate_limiter.h"
#include "throttlekit/twotier/weighted_fair_escrow.h"

namespace throttlekit::server {
namespace {

absl::Status named(std::string_view policy, const absl::Status& s) {
  return absl::Status(
      s.code(),
      absl::StrCat("policy ", absl::string_view(policy.data(), policy.size()),
                   ": ", s.message()));
}

// A fair escrow behind the limiter interface: Check (and CheckMany) admit
// the tenant named by the key; the rest is UNIMPLEMENTED (an escrow's
// answer depends on the other tenants' activity, so it has no peek).
template <class Escrow>
class EscrowEngine final : public Engine {
 public:
  // `in_memory`: the escrow's state is in this process (no store to wait
  // on).
  EscrowEngine(std::unique_ptr<Escrow> escrow, std::string_view what,
               ServerClock clock, bool in_memory)
      : escrow_(std::move(escrow)),
        what_(what),
        clock_(clock),
        in_memory_(in_memory) {}

  // An escrow with `admit_at_async` (the weighted-fair escrow) never
  // waits on its store; the others do unless their state is in memory.
  static constexpr bool kAsync = requires(Escrow & e, DecisionCompletion d) {
    e.admit_at_async(std::string_view(), int64_t{0}, 1.0, std::move(d));
  };

  bool answers_without_waiting() const override { return kAsync || in_memory_; }
  bool batches_without_waiting() const override { return kAsync || in_memory_; }

  absl::StatusOr<Decision> check(std::string_view key, double cost) override {
    return escrow_->admit(key, cost);
  }
  void check_async(std::string_view key, double cost,
                   DecisionCompletion on_done) override {
    check_at_async(key, clock_.now_ms(), cost, std::move(on_done));
  }
  void check_at_async(std::string_view key, int64_t now_ms, double cost,
                      DecisionCompletion on_done) override {
    if constexpr (kAsync) {
      escrow_->admit_at_async(key, now_ms, cost, std::move(on_done));
    } else {
      std::move(on_done)(escrow_->admit_at(key, now_ms, cost));
    }
  }
  void check_many_async(std::span<const std::string_view> keys, double cost,
                        Completion<std::vector<Decision>> on_done) override {
    if constexpr (kAsync) {
      if (absl::Status s = known(keys); !s.ok()) {
        std::move(on_done)(std::move(s));
        return;
      }
      if (batch_settled_inline(keys, cost, on_done)) return;
      const int64_t now_ms = clock_.now_ms();
      gather_each_async(keys.size(), std::move(on_done),
                        [&](size_t i, auto on_answer) {
                          escrow_->admit_at_async(keys[i], now_ms, cost,
                                                  std::move(on_answer));
                        });
    } else {
      std::move(on_done)(check_many_vector(*this, keys, cost));
    }
  }
  absl::StatusOr<Decision> check_at(std::string_view key, int64_t now_ms,
                                    double cost) override {
    return escrow_->admit_at(key, now_ms, cost);
  }
  absl::Status check_many(std::span<const std::string_view> keys,
                          std::span<Decision> out, double cost) override {
    if (out.size() < keys.size()) {
      return absl::InvalidArgumentError("check_many: out is shorter than keys");
    }
    if (absl::Status s = known(keys); !s.ok()) return s;
    const int64_t now_ms = clock_.now_ms();
    for (size_t i = 0; i < keys.size(); ++i) {
      absl::StatusOr<Decision> d = escrow_->admit_at(keys[i], now_ms, cost);
      if (!d.ok()) return d.status();
      out[i] = *d;
    }
    return absl::OkStatus();
  }
  absl::StatusOr<Decision> peek(std::string_view) override {
    return unserved("Peek");
  }
  absl::StatusOr<Forecast> forecast(std::string_view, double) override {
    return unserved("Forecast");
  }
  absl::Status reset(std::string_view) override { return unserved("reset"); }

 private:
  // Every tenant of a batch is known before anything is spent.
  absl::Status known(std::span<const std::string_view> keys) const {
    for (const std::string_view key : keys) {
      if (absl::StatusOr<double> u = escrow_->used(key); !u.ok()) {
        return u.status();
      }
    }
    return absl::OkStatus();
  }

  absl::Status unserved(std::string_view op) const {
    return absl::UnimplementedError(
        absl::StrCat(sv(what_), " answers Check only, not ", sv(op),
                     " (its answer depends on the other tenants)"));
  }

  std::unique_ptr<Escrow> escrow_;
  std::string_view what_;
  ServerClock clock_;
  bool in_memory_;
};

absl::Status fair_escrow(Policy& p, const FairEscrowPolicy& f,
                         const std::shared_ptr<Coordinator>& store,
                         ServerClock clock, const PolicyContext& context) {
  const std::string key = absl::StrCat("throttlekit:", p.name);
  p.kind = "limiter";
  if (!f.federated) {
    p.strategy = "fairEscrow";
    auto e = BasicWeightedFairEscrow<ServerClock>::create(
        {.limit = f.limit,
         .window_ms = f.window_ms,
         .tenants = f.tenants,
         .coordinator = store,
         .key = store != nullptr ? key : std::string(),
         .quantum = f.quantum},
        clock);
    if (!e.ok()) return e.status();
    p.limiter =
        std::make_shared<EscrowEngine<BasicWeightedFairEscrow<ServerClock>>>(
            *std::move(e), "fairEscrow", clock, /*in_memory=*/store == nullptr);
    return absl::OkStatus();
  }
  p.strategy = "federatedFairEscrow";
  if (context.region_pool == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "federatedFairEscrow needs the region pool in Redis (--redis, "
        "--redis-cluster or --redis-sentinel); ",
        store == nullptr ? "the embedded memory store"
                         : absl::StrCat("the ", sv(store->backend()), " store"),
        " cannot hold it"));
  }
  absl::StatusOr<std::shared_ptr<RegionPool>> pool = context.region_pool();
  if (!pool.ok()) return pool.status();
  auto e =
      BasicFederatedFairEscrow<ServerClock>::create({.limit = f.limit,
                                                     .window_ms = f.window_ms,
                                                     .tenants = f.tenants,
                                                     .pool = *std::move(pool),
                                                     .key = key,
                                                     .region = f.region,
                                                     .quantum = f.quantum},
                                                    clock);
  if (!e.ok()) return e.status();
  p.limiter =
      std::make_shared<EscrowEngine<BasicFederatedFairEscrow<ServerClock>>>(
          *std::move(e), "federatedFairEscrow", clock, /*in_memory=*/false);
  return absl::OkStatus();
}

// Builds `p.admission` (and `p.distributed` for a fleet-wide concurrency
// axis).
absl::Status admission(Policy& p, const AdmissionPolicy& a,
                       const std::shared_ptr<Coordinator>& store,
                       ServerClock clock, const PolicyContext& context) {
  const std::string& name = p.name;
  ServerAdmission::Options o;
  o.observer = p.metrics;
  if (a.concurrency.has_value() && a.concurrency->distributed.has_value()) {
    if (store == nullptr) {
      return absl::InvalidArgumentError(
          "distributedConcurrency needs a store the fleet shares (--redis or "
          "--postgres); the embedded memory store cannot coordinate");
    }
    DistributedConcurrencyOptions d = a.concurrency->distributed->options;
    d.node_id = context.node_id.empty() ? default_node_id() : context.node_id;
    d.key = absl::StrCat("throttlekit:", name);
    auto node = DistributedConcurrency::create(std::move(d), store);
    if (!node.ok()) return node.status();
    p.distributed = *std::move(node);
    if (context.beat_at_start) {
      // A failed first beat is not fatal: the outage mode decides until
      // the store answers (the store's own health is on /healthz).
      (void)p.distributed->beat_now();
    }
    o.concurrency = p.distributed->limiter();
  } else if (a.concurrency.has_value()) {
    if (a.concurrency->adaptive.has_value()) {
      auto c = AdaptiveConcurrency::create(*a.concurrency->adaptive);
      if (!c.ok()) return c.status();
      o.concurrency = std::shared_ptr<AdaptiveConcurrency>(*std::move(c));
    } else {
      o.max_inflight = a.concurrency->max_inflight;
    }
  }
  if (a.rate.has_value()) {
    auto e = make_policy_engine(
        *a.rate, store, absl::StrCat("throttlekit:", name, ":rate"), clock);
    if (!e.ok()) return e.status();
    o.rate = *std::move(e);
  }
  if (a.cost.has_value()) {
    auto e = make_policy_engine(
        *a.cost, store, absl::StrCat("throttlekit:", name, ":cost"), clock);
    if (!e.ok()) return e.status();
    o.cost = *std::move(e);
  }
  p.admission_answers_without_waiting =
      (o.rate == nullptr || o.rate->answers_without_waiting()) &&
      (o.cost == nullptr || o.cost->answers_without_waiting());
  auto u = ServerAdmission::create(std::move(o), clock);
  if (!u.ok()) return u.status();
  p.admission = *std::move(u);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::shared_ptr<Engine>> make_policy_engine(
    const StrategySpec& spec, const std::shared_ptr<Coordinator>& store,
    const std::string& prefix, ServerClock clock, FailPolicy fail_policy) {
  return std::visit(
      [&](const auto& options) -> absl::StatusOr<std::shared_ptr<Engine>> {
        using O = std::decay_t<decltype(options)>;
        using S = std::variant_alternative_t<
            ::throttlekit::detail::VariantIndex<O, StrategyOptions>::value,
            AnyStrategy>;
        if (store == nullptr) {
          auto l = RateLimiter<S, ServerClock>::create(
              options, RateLimiterOptions{.prefix = prefix}, clock);
          if (!l.ok()) return l.status();
          return make_engine(
              std::make_unique<RateLimiter<S, ServerClock>>(*std::move(l)));
        }
        auto l = StrictRateLimiter<S, ServerClock>::create(
            options, store,
            StrictRateLimiterOptions{.prefix = prefix,
                                     .fail_policy = fail_policy},
            clock);
        if (!l.ok()) return l.status();
        return make_engine(*std::move(l));
      },
      spec.options);
}

std::string default_node_id() {
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) != 0 || host[0] == '\0') {
    std::snprintf(host, sizeof(host), "host");
  }
  return absl::StrCat(host, ":", static_cast<int64_t>(getpid()));
}

absl::StatusOr<std::unique_ptr<Policies>> Policies::create(
    const ServerConfig& config, std::shared_ptr<Coordinator> store,
    ServerClock clock, PolicyContext context) {
  std::unique_ptr<Policies> out(new Policies());
  out->config_ = config;
  out->store_name_ = store == nullptr ? "memory" : store->backend();
  out->store_ = store;
  out->node_id_ = context.node_id.empty() ? default_node_id() : context.node_id;
  for (const PolicySpec& spec : config.policies) {
    auto p = std::make_unique<Policy>();
    p->name = spec.name;
    p->metrics = std::make_shared<PolicyMetrics>(out->denial_signal_);
    const std::string prefix = absl::StrCat("throttlekit:", spec.name);
    const auto* l = std::get_if<LimiterPolicy>(&spec.body);
    if (l != nullptr && l->federated.has_value()) {
      p->kind = "limiter";
      p->strategy = l->strategy.name;
      if (store == nullptr) {
        return absl::InvalidArgumentError(absl::StrCat(
            "policy ", spec.name,
            ": federated needs a store the fleet shares (--redis or "
            "--postgres); the embedded memory store cannot coordinate"));
      }
      absl::StatusOr<AnyStrategy> s = make_strategy(l->strategy.options);
      if (!s.ok()) return named(spec.name, s.status());
      absl::StatusOr<FederatedBudget> b = federated_budget(*s);
      if (!b.ok()) return named(spec.name, b.status());
      auto budget = LeaseBudget::create({b->limit, b->window_ms});
      if (!budget.ok()) return named(spec.name, budget.status());
      FederationOptions o;
      o.region = l->federated->region;
      o.prefix = prefix;
      o.batch = l->federated->batch;
      auto f = federate(*s, store, std::move(o), clock);
      if (!f.ok()) return named(spec.name, f.status());
      p->federated = std::shared_ptr<ServerFederatedLimiter>(*std::move(f));
      p->limiter = make_engine(p->federated);
      p->lease_budget = *budget;
      p->lease_prefix = prefix;
      p->store = store;
    } else if (l != nullptr) {
      p->kind = "limiter";
      p->strategy = l->strategy.name;
      p->debits =
          std::holds_alternative<TokenBudget::Options>(l->strategy.options);
      auto e = make_policy_engine(l->strategy, store, prefix, clock);
      if (!e.ok()) return named(spec.name, e.status());
      p->limiter = *std::move(e);
      p->store = store;
    } else if (const auto* a = std::get_if<AdmissionPolicy>(&spec.body)) {
      p->kind = "admitter";
      if (absl::Status s = admission(*p, *a, store, clock, context); !s.ok()) {
        return named(spec.name, s);
      }
    } else if (const auto* e = std::get_if<FairEscrowPolicy>(&spec.body)) {
      if (absl::Status s = fair_escrow(*p, *e, store, clock, context);
          !s.ok()) {
        return named(spec.name, s);
      }
    } else {
      const auto& f = std::get<FleetBudgetPolicy>(spec.body);
      p->kind = "budget";
      p->strategy = "tokenBudget";
      if (store == nullptr) {
        return absl::InvalidArgumentError(absl::StrCat(
            "policy ", spec.name,
            ": fleetBudget needs a store the fleet shares (--redis or "
            "--postgres); the embedded memory store cannot coordinate"));
      }
      auto b = FleetTokenBudget::create(
          {.budget = f.budget, .window_ms = f.window_ms, .prefix = prefix},
          store);
      if (!b.ok()) return named(spec.name, b.status());
      p->fleet_budget = *std::move(b);
    }
    out->order_.push_back(p.get());
    out->by_name_.emplace(spec.name, std::move(p));
  }
  if (!config.envoy.domains.empty() || config.envoy.without_domains) {
    auto envoy = EnvoyLimits::create(config.envoy,
                                     {.max_key_bytes = config.max_key_bytes,
                                      .max_descriptors = config.max_batch},
                                     store, clock);
    if (!envoy.ok()) return envoy.status();
    out->envoy_.store(std::shared_ptr<EnvoyLimits>(*std::move(envoy)),
                      std::memory_order_release);
  }
  out->clock_ = clock;
  return out;
}

absl::Status Policies::reload_envoy(const EnvoyConfig& config) {
  MutexLock lock(reload_mu_);
  const std::shared_ptr<EnvoyLimits> current = envoy();
  std::shared_ptr<EnvoyLimits> next;
  if (!config.domains.empty() || config.without_domains ||
      envoy_fed_.load(std::memory_order_acquire)) {
    auto made = EnvoyLimits::create(config,
                                    {.max_key_bytes = config_.max_key_bytes,
                                     .max_descriptors = config_.max_batch},
                                    store_, clock_, current.get());
    if (!made.ok()) {
      envoy_reload_errors_.fetch_add(1, std::memory_order_relaxed);
      return made.status();
    }
    next = *std::move(made);
  }
  envoy_.store(next, std::memory_order_release);
  envoy_reloads_.fetch_add(1, std::memory_order_relaxed);
  // Requests still on `current` may lease once more after this; what they
  // take dies with its window (window-coupled), never over-admits.
  if (current != nullptr) {
    if (next != nullptr) return current->close_dropped(*next);
    return current->close();
  }
  return absl::OkStatus();
}

Policies::~Policies() = default;

absl::Status Policies::close() {
  absl::Status first;
  for (Policy* p : order_) {
    if (p->federated != nullptr) first.Update(p->federated->close());
  }
  if (const std::shared_ptr<EnvoyLimits> envoy = this->envoy();
      envoy != nullptr) {
    first.Update(envoy->close());
  }
  return first;
}

}  // namespace throttlekit::server
