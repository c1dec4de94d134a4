// src/server/server.cc: the gRPC door (server.h).

#include "server.h"

#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl_view.h"
#include "blocking_pool.h"
#include "envoy/service/ratelimit/v3/rls.grpc.pb.h"
#include "envoy_rls.h"
#include "throttlekit/concurrency/beat_scheduler.h"
#include "throttlekit/core/binding_axis.h"
#include "throttlekit/observe/decision_observer.h"
#include "throttlekit/v1/throttlekit.grpc.pb.h"

namespace throttlekit::server {
namespace {

namespace v1 = ::throttlekit::v1;

// absl and gRPC share the canonical status codes.
grpc::Status to_grpc(const absl::Status& s) {
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()),
                      std::string(s.message()));
}

void to_wire(const Decision& d, v1::Decision* out) {
  out->set_allowed(d.allowed);
  out->set_limit(d.limit);
  out->set_remaining(d.remaining);
  out->set_reset_at(d.reset_at_ms);
  out->set_retry_after_ms(d.retry_after_ms);
}

using SteadyClock = std::chrono::steady_clock;

// Reports a limiter's or a budget's decision to its policy's metrics (an
// admission reports its own, as the library's observer).
void observe(const Policy& p, std::string_view key, double cost,
             const Decision& d, SteadyClock::duration took) {
  DecisionEvent e;
  e.kind = DecisionKind::kCheck;
  e.engine = p.strategy;
  e.key = key;
  e.cost = cost;
  e.decision = d;
  e.duration_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(took).count();
  notify(p.metrics.get(), e);
}

// proto3's default 0 means 1; anything else goes to the library, which
// refuses what is not a valid cost (negative, above 2^53-1).
double units(int64_t wire) {
  return wire == 0 ? 1.0 : static_cast<double>(wire);
}

// Compares without an early exit, so timing does not reveal how much of a
// guess was right.
bool same_secret(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  }
  return diff == 0;
}

// Loopback callers, or any caller presenting `secret` as `header` metadata.
absl::Status door_admits(const grpc::ServerContext& ctx,
                         const std::string& secret, std::string_view header,
                         std::string_view door) {
  if (!secret.empty()) {
    const auto& md = ctx.client_metadata();
    auto it = md.find(grpc::string_ref(header.data(), header.size()));
    if (it != md.end() &&
        same_secret(std::string_view(it->second.data(), it->second.size()),
                    secret)) {
      return absl::OkStatus();
    }
  }
  if (is_loopback_peer(ctx.peer())) return absl::OkStatus();
  return absl::PermissionDeniedError(absl::StrCat(
      sv(door), ": answers loopback callers only",
      secret.empty()
          ? " (this server has no secret for others)"
          : absl::StrCat("; others must send the secret as ", sv(header))));
}

// Envoy's global rate-limit service (docs/envoy.md) over the configured
// domains.
// On gRPC's callback API: the descriptors' checks go to their engines
// without waiting and the RPC finishes from the last answer
// (`EnvoyLimits::should_rate_limit_async`); no callback thread waits on a
// store.
class EnvoyRateLimitService final
    : public ::envoy::service::ratelimit::v3::RateLimitService::
          WithCallbackMethod_ShouldRateLimit<
              ::envoy::service::ratelimit::v3::RateLimitService::Service> {
 public:
  EnvoyRateLimitService(Policies& policies, BlockingPool& blocking)
      : policies_(policies), blocking_(blocking) {}

  grpc::ServerUnaryReactor* ShouldRateLimit(
      grpc::CallbackServerContext* ctx,
      const ::envoy::service::ratelimit::v3::RateLimitRequest* req,
      ::envoy::service::ratelimit::v3::RateLimitResponse* resp) override {
    grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
    // The limits stay alive until the answer (a reload swaps them).
    std::shared_ptr<EnvoyLimits> envoy = policies_.envoy();
    if (envoy == nullptr) {
      reactor->Finish(to_grpc(absl::NotFoundError(
          absl::StrCat("ShouldRateLimit: unknown domain \"", req->domain(),
                       "\" (this server has no envoy domains configured)"))));
      return reactor;
    }
    EnvoyLimits& limits = *envoy;
    limits.should_rate_limit_async(
        *req, resp, blocking_,
        [reactor, envoy = std::move(envoy)](absl::Status s) {
          reactor->Finish(to_grpc(s));
        });
    return reactor;
  }

 private:
  Policies& policies_;
  BlockingPool& blocking_;
};

class FleetService final : public v1::Fleet::Service {
 public:
  FleetService(Policies& policies, std::string secret)
      : policies_(policies), secret_(std::move(secret)) {}

  grpc::Status Reserve(grpc::ServerContext* ctx, const v1::ReserveRequest* req,
                       v1::ReserveResponse* resp) override {
    if (absl::Status s = admitted(*ctx); !s.ok()) return to_grpc(s);
    Policy* p = policies_.find(req->policy());
    if (p == nullptr) {
      return to_grpc(absl::NotFoundError(
          absl::StrCat("unknown policy \"", req->policy(), "\"")));
    }
    if (req->axis() == v1::AXIS_CONCURRENCY) {
      return to_grpc(absl::UnimplementedError(
          "Reserve: concurrency slots are not leasable; Admit holds them"));
    }
    if (p->federated == nullptr) {
      return to_grpc(absl::NotFoundError(
          absl::StrCat("Reserve: policy \"", p->name,
                       "\" is not leasable (only a federated: policy is)")));
    }
    const int64_t wants = req->wants() == 0 ? 1 : req->wants();
    if (wants < 1 || wants > kMaxSafeInteger) {
      return to_grpc(absl::InvalidArgumentError(absl::StrCat(
          "Reserve: wants must be in [1, 2^53-1] (0 means 1); got ", wants)));
    }
    const std::string& domain = req->caller().domain();
    if (static_cast<int64_t>(domain.size()) >
        policies_.config().max_key_bytes) {
      return to_grpc(absl::InvalidArgumentError(
          absl::StrCat("Reserve: caller.domain is ", domain.size(),
                       " bytes; the server's limit is ",
                       policies_.config().max_key_bytes, " (maxKeyBytes)")));
    }
    absl::StatusOr<LeaseGrant> g = p->store->lease_windowed(
        *p->lease_budget, p->lease_key(domain.empty() ? "*" : domain), wants);
    if (!g.ok()) return to_grpc(g.status());
    const int64_t left_ms = std::max<int64_t>(0, g->expires_at_ms - g->now_ms);
    v1::Lease* lease = resp->mutable_lease();
    lease->set_capacity(g->granted);
    lease->set_expiry_ms(g->expires_at_ms);
    lease->set_refresh_interval_ms(left_ms);
    lease->set_safe_capacity(g->granted);
    lease->set_retry_after_ms(g->granted == 0 ? std::max<int64_t>(1, left_ms)
                                              : 0);
    lease->set_limit(p->lease_budget->limit());
    return grpc::Status::OK;
  }

 private:
  // Loopback callers, or any caller presenting the fleet secret.
  absl::Status admitted(const grpc::ServerContext& ctx) const {
    return door_admits(ctx, secret_, "x-fleet-secret", "Fleet.Reserve");
  }

  Policies& policies_;
  const std::string secret_;
};

class MonitorService final : public v1::Monitor::Service {
 public:
  MonitorService(Policies& policies, SlotLeases& leases, std::string secret,
                 int64_t cancel_check_ms)
      : policies_(policies),
        leases_(leases),
        secret_(std::move(secret)),
        cancel_check_(std::max<int64_t>(1, cancel_check_ms)) {}

  grpc::Status GetSnapshot(grpc::ServerContext* ctx,
                           const v1::GetSnapshotRequest*,
                           v1::GetSnapshotResponse* resp) override {
    if (absl::Status s =
            door_admits(*ctx, secret_, "x-monitor-secret", "Monitor");
        !s.ok()) {
      return to_grpc(s);
    }
    v1::Snapshot* snap = resp->mutable_snapshot();
    v1::MonitorMeta* meta = snap->mutable_meta();
    meta->set_generated_at(SystemClock{}.now_ms());
    meta->set_mode("process");
    meta->set_lens_version("throttlekit-server 0.1");
    std::string json = "{\"policies\":[";
    bool first = true;
    for (const Policy* p : policies_.all()) {
      const PolicyMetrics::Snapshot m = p->metrics->snapshot();
      v1::PolicySummary* ps = snap->add_policies();
      ps->set_name(p->name);
      ps->set_kind(p->admission != nullptr ? "admitter" : "limiter");
      ps->set_strategy(p->strategy);
      ps->set_allowed(m.allowed);
      ps->set_denied(m.denied);
      ps->set_limit(m.limit);
      v1::LatencySummary* l = ps->mutable_latency();
      l->set_avg_ms(m.latency.avg_ms);
      l->set_p50_ms(m.latency.p50_ms);
      l->set_p99_ms(m.latency.p99_ms);
      l->set_max_ms(m.latency.max_ms);
      l->set_n(m.latency.n);
      absl::StrAppend(&json, first ? "" : ",", "{\"name\":\"",
                      json_escape(p->name), "\",\"kind\":\"", ps->kind(),
                      "\",\"allowed\":", m.allowed, ",\"denied\":", m.denied,
                      ",\"limit\":", m.limit);
      first = false;
      const auto top =
          [&](std::string_view field, const std::vector<KeyCount>& keys,
              google::protobuf::RepeatedPtrField<v1::KeyCount>* to) {
            absl::StrAppend(&json, ",\"", sv(field), "\":[");
            for (size_t i = 0; i < keys.size(); ++i) {
              v1::KeyCount* k = to->Add();
              k->set_key(keys[i].key);
              k->set_count(keys[i].count);
              absl::StrAppend(&json, i == 0 ? "" : ",", "{\"key\":\"",
                              json_escape(keys[i].key),
                              "\",\"count\":", keys[i].count, "}");
            }
            absl::StrAppend(&json, "]");
          };
      top("top_requested", p->metrics->top_requested(kTopKeys),
          ps->mutable_top_requested());
      top("top_denied", p->metrics->top_denied(kTopKeys),
          ps->mutable_top_denied());
      absl::StrAppend(&json, "}");
      if (p->admission != nullptr && p->admission->concurrency() != nullptr) {
        const AdaptiveConcurrencyStats c = p->admission->concurrency()->stats();
        v1::GuardSummary* g = snap->add_guards();
        g->set_name(p->name);
        g->set_limit(c.effective_limit);
        g->set_inflight(c.inflight);
        if (p->distributed != nullptr) {
          const DistributedConcurrencyStats d = p->distributed->stats();
          g->set_share(static_cast<double>(d.share));
          g->set_l_global(d.global_limit);
          g->set_nodes(d.live_nodes);
          g->set_fenced(d.fenced);
        }
      }
      for (const PolicyMetrics::Denial& d : p->metrics->recent_denials()) {
        fill(snap->add_recent_denials(), p->name, d);
      }
    }
    absl::StrAppend(&json, "],\"slots_held\":", leases_.held(),
                    ",\"slots_reclaimed\":", leases_.reclaimed_total(), "}");
    snap->set_raw_json(std::move(json));
    return grpc::Status::OK;
  }

  // Streams every denial recorded after the call began (of one policy, or
  // of all), in order per policy. A denial wakes the watchers at once
  // (the policies' DenialSignal); with nothing to send, a watcher looks
  // every `cancel_check_` whether its client left (the synchronous API
  // tells a handler only when asked). A watcher that falls more than a ring
  // behind (32 denials of one policy while it writes) misses the
  // overwritten ones. Ends when the client cancels or the server shuts
  // down; at most kMaxWatchers at once (RESOURCE_EXHAUSTED beyond).
  grpc::Status Watch(grpc::ServerContext* ctx, const v1::WatchRequest* req,
                     grpc::ServerWriter<v1::WatchResponse>* writer) override {
    if (absl::Status s =
            door_admits(*ctx, secret_, "x-monitor-secret", "Monitor");
        !s.ok()) {
      return to_grpc(s);
    }
    std::vector<const Policy*> watched;
    if (req->policy().empty()) {
      watched.assign(policies_.all().begin(), policies_.all().end());
    } else if (const Policy* p = policies_.find(req->policy())) {
      watched.push_back(p);
    } else {
      return to_grpc(absl::NotFoundError(absl::StrCat(
          "Monitor.Watch: no policy named \"", req->policy(), "\"")));
    }
    if (watchers_.fetch_add(1) >= kMaxWatchers) {
      watchers_.fetch_sub(1);
      return to_grpc(absl::ResourceExhaustedError(
          absl::StrCat("Monitor.Watch: ", kMaxWatchers,
                       " watchers already follow this "
                       "server; poll GetSnapshot instead")));
    }
    DenialSignal& signal = policies_.denial_signal();
    // Registered before the first read of a ring (denial_signal.h).
    const DenialSignal::Watcher registered(signal);
    std::vector<int64_t> cursor;
    std::vector<PolicyMetrics::Denial> batch;
    for (const Policy* p : watched) {
      cursor.push_back(p->metrics->denials_since(INT64_MAX, batch, nullptr));
    }
    grpc::Status status = grpc::Status::OK;
    while (!ctx->IsCancelled()) {
      const uint64_t seen = signal.epoch();
      if (signal.closed()) break;
      for (size_t i = 0; i < watched.size() && status.ok(); ++i) {
        batch.clear();
        cursor[i] =
            watched[i]->metrics->denials_since(cursor[i], batch, nullptr);
        for (const PolicyMetrics::Denial& d : batch) {
          v1::WatchResponse w;
          fill(w.mutable_denial(), watched[i]->name, d);
          if (!writer->Write(w)) {
            status = grpc::Status::CANCELLED;
            break;
          }
        }
      }
      if (!status.ok()) break;
      signal.wait(seen, cancel_check_);
    }
    watchers_.fetch_sub(1);
    return status;
  }

  // Ends every Watch (the server is shutting down).
  void stop() { policies_.denial_signal().close(); }

  static constexpr int kMaxWatchers = 16;
  static constexpr size_t kTopKeys = 10;

 private:
  static void fill(v1::DenialEvent* e, const std::string& policy,
                   const PolicyMetrics::Denial& d) {
    e->set_at(d.at_ms);
    e->set_policy(policy);
    e->set_key(d.key);
    e->set_axis(d.axis);
    e->set_limit(d.limit);
    e->set_remaining(d.remaining);
    e->set_retry_after_ms(d.retry_after_ms);
  }

  static std::string json_escape(std::string_view s) {
    std::string out;
    for (const char c : s) {
      if (c == '"' || c == '\\') {
        out += '\\';
        out += c;
      } else if (static_cast<unsigned char>(c) < 0x20) {
        out += absl::StrFormat("\\u%04x", c);
      } else {
        out += c;
      }
    }
    return out;
  }

  Policies& policies_;
  SlotLeases& leases_;
  const std::string secret_;
  const std::chrono::milliseconds cancel_check_;
  std::atomic<int> watchers_{0};
};

// Check, Admit and Debit run on gRPC's callback API (docs/async.md,
// docs/server.md): the handler starts the engine's `check_async` (the
// admission's `admit_async`) and returns; the RPC finishes from the
// completion, inline for an answer without I/O, else on the thread that
// read the store's reply. Verbs without an asynchronous form (CheckMany's
// batch at one instant, a fleet token budget's debit, fair escrows) run on
// the blocking pool, never on a callback thread. Peek, Forecast, Release
// and Heartbeat are synchronous.
class RateLimiterService final
    : public v1::RateLimiter::WithCallbackMethod_Check<
          v1::RateLimiter::WithCallbackMethod_CheckMany<
              v1::RateLimiter::WithCallbackMethod_Debit<
                  v1::RateLimiter::WithCallbackMethod_Admit<
                      v1::RateLimiter::Service>>>> {
 public:
  RateLimiterService(Policies& policies, SlotLeases& leases,
                     BlockingPool& blocking)
      : policies_(policies), leases_(leases), blocking_(blocking) {}

  grpc::ServerUnaryReactor* Check(grpc::CallbackServerContext* ctx,
                                  const v1::CheckRequest* req,
                                  v1::CheckResponse* resp) override {
    grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
    absl::StatusOr<Policy*> p =
        with_key(limiter(req->policy(), "Check"), req->key());
    if (!p.ok()) return finished(reactor, p.status());
    // The request, the response and the policy outlive the completion:
    // gRPC keeps the first two until the reactor finishes, the server the
    // policies until it has shut down.
    Policy* policy = *p;
    const SteadyClock::time_point t0 = SteadyClock::now();
    auto start = [reactor, policy, req, resp, t0] {
      policy->limiter->check_async(
          req->key(), units(req->cost()),
          [reactor, policy, req, resp, t0](absl::StatusOr<Decision> d) {
            if (!d.ok()) {
              reactor->Finish(to_grpc(d.status()));
              return;
            }
            observe(*policy, req->key(), units(req->cost()), *d,
                    SteadyClock::now() - t0);
            to_wire(*d, resp->mutable_decision());
            reactor->Finish(grpc::Status::OK);
          });
    };
    // An engine whose check would wait on the store runs on the blocking
    // pool, not on gRPC's callback thread.
    dispatch(policy->limiter->answers_without_waiting(), std::move(start));
    return reactor;
  }

  // CheckMany: one instant for the batch, in key order. An engine with a
  // `check_many_async` sends the batch without waiting (strict: the
  // store's clock, then every key's step pipelined; leased and federated:
  // every key's `check_at_async` at one `now`) and the RPC finishes from
  // its last answer; another engine's blocking `check_many` runs on the
  // blocking pool (a store-backed batch waits there, never on a callback
  // thread).
  grpc::ServerUnaryReactor* CheckMany(grpc::CallbackServerContext* ctx,
                                      const v1::CheckManyRequest* req,
                                      v1::CheckManyResponse* resp) override {
    grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
    absl::StatusOr<Policy*> p = limiter(req->policy(), "CheckMany");
    if (!p.ok()) return finished(reactor, p.status());
    Policy* policy = *p;
    if (policy->limiter->batches_without_waiting()) {
      absl::StatusOr<std::vector<std::string_view>> keys = batch_keys(*req);
      if (!keys.ok()) return finished(reactor, keys.status());
      const std::span<const std::string_view> view(*keys);
      const SteadyClock::time_point t0 = SteadyClock::now();
      policy->limiter->check_many_async(
          view, units(req->cost()),
          [this, reactor, policy, req, resp, keys = *std::move(keys),
           t0](absl::StatusOr<std::vector<Decision>> out) {
            reactor->Finish(answer_many(*policy, *req, keys, out, t0, *resp));
          });
      return reactor;
    }
    // On the embedded memory store nothing waits.
    dispatch(
        policy->limiter->answers_without_waiting() && policy->store == nullptr,
        [this, reactor, policy, req, resp] {
          reactor->Finish(check_many(*policy, *req, *resp));
        });
    return reactor;
  }

  grpc::Status Peek(grpc::ServerContext*, const v1::PeekRequest* req,
                    v1::PeekResponse* resp) override {
    absl::StatusOr<Policy*> p = limiter(req->policy(), "Peek");
    if (!p.ok()) return to_grpc(p.status());
    if (absl::Status s = key_fits(req->key()); !s.ok()) return to_grpc(s);
    absl::StatusOr<Decision> d = (*p)->limiter->peek(req->key());
    if (!d.ok()) return to_grpc(d.status());
    to_wire(*d, resp->mutable_decision());
    return grpc::Status::OK;
  }

  grpc::Status Forecast(grpc::ServerContext*, const v1::ForecastRequest* req,
                        v1::ForecastResponse* resp) override {
    absl::StatusOr<Policy*> p = limiter(req->policy(), "Forecast");
    if (!p.ok()) return to_grpc(p.status());
    if (absl::Status s = key_fits(req->key()); !s.ok()) return to_grpc(s);
    absl::StatusOr<throttlekit::Forecast> f =
        (*p)->limiter->forecast(req->key(), units(req->cost()));
    if (!f.ok()) return to_grpc(f.status());
    v1::Forecast* out = resp->mutable_forecast();
    out->set_spendable_now(f->spendable_now);
    out->set_next_replenish_at(f->next_replenish_at_ms);
    out->set_full_at(f->full_at_ms);
    return grpc::Status::OK;
  }

  // Debit on a limiter is its `check_async` (as Check); on a fleet token
  // budget, its `debit_async`: neither waits on the store.
  grpc::ServerUnaryReactor* Debit(grpc::CallbackServerContext* ctx,
                                  const v1::DebitRequest* req,
                                  v1::DebitResponse* resp) override {
    grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
    absl::StatusOr<Policy*> p = with_key(find(req->policy()), req->key());
    if (!p.ok()) return finished(reactor, p.status());
    Policy* policy = *p;
    const int64_t tokens = req->tokens() == 0 ? 1 : req->tokens();
    const SteadyClock::time_point t0 = SteadyClock::now();
    auto finish = [reactor, policy, req, resp, tokens,
                   t0](absl::StatusOr<Decision> d) {
      if (!d.ok()) {
        reactor->Finish(to_grpc(d.status()));
        return;
      }
      observe(*policy, req->key(), static_cast<double>(tokens), *d,
              SteadyClock::now() - t0);
      to_wire(*d, resp->mutable_decision());
      reactor->Finish(grpc::Status::OK);
    };
    if (policy->fleet_budget != nullptr) {
      policy->fleet_budget->debit_async(req->key(), tokens, std::move(finish));
    } else if (policy->limiter != nullptr && policy->debits) {
      dispatch(policy->limiter->answers_without_waiting(),
               [policy, req, tokens, finish = std::move(finish)]() mutable {
                 policy->limiter->check_async(req->key(),
                                              static_cast<double>(tokens),
                                              std::move(finish));
               });
    } else {
      reactor->Finish(to_grpc(wrong_kind(*policy, "Debit")));
    }
    return reactor;
  }

  // Admit is the admission's `admit_async`: each axis's engine asked
  // without waiting, the RPC finished from the last axis's completion.
  grpc::ServerUnaryReactor* Admit(grpc::CallbackServerContext* ctx,
                                  const v1::AdmitRequest* req,
                                  v1::AdmitResponse* resp) override {
    grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
    absl::StatusOr<Policy*> p = with_key(find(req->policy()), req->key());
    if (p.ok() && (*p)->admission == nullptr) p = wrong_kind(**p, "Admit");
    if (!p.ok()) return finished(reactor, p.status());
    Policy* policy = *p;
    auto start = [this, reactor, policy, req, resp] {
      AdmitRequest r;
      r.key = req->key();
      r.cost = units(req->cost());
      r.value = req->value() == 0 ? 1.0 : static_cast<double>(req->value());
      r.hold_s = static_cast<double>(req->hold());
      policy->admission->admit_async(
          r, [this, reactor, resp](absl::StatusOr<SlotLeases::Admission> a) {
            if (!a.ok()) {
              reactor->Finish(to_grpc(a.status()));
              return;
            }
            to_wire(a->decision(), resp->mutable_decision());
            if (std::optional<Axis> axis = a->binding_axis()) {
              resp->set_binding_axis(std::string(axis_name(*axis)));
            }
            resp->set_policy_denied(a->policy_denied());
            if (a->holds_slot()) {
              auto [id, expires_at] = leases_.hold(*std::move(a));
              resp->set_lease_id(std::move(id));
              resp->set_lease_expires_at(expires_at);
            }
            reactor->Finish(grpc::Status::OK);
          });
    };
    dispatch(policy->admission_answers_without_waiting, std::move(start));
    return reactor;
  }

  grpc::Status Release(grpc::ServerContext*, const v1::ReleaseRequest* req,
                       v1::ReleaseResponse*) override {
    leases_.release(req->lease_id(), req->dropped());
    return grpc::Status::OK;
  }

  grpc::Status Heartbeat(grpc::ServerContext*, const v1::HeartbeatRequest* req,
                         v1::HeartbeatResponse* resp) override {
    if (req->lease_ids_size() > policies_.config().max_batch) {
      return to_grpc(absl::InvalidArgumentError(
          absl::StrCat("Heartbeat: ", req->lease_ids_size(),
                       " lease ids; the server's limit is ",
                       policies_.config().max_batch, " (maxBatch)")));
    }
    const std::vector<std::string> ids(req->lease_ids().begin(),
                                       req->lease_ids().end());
    SlotLeases::Renewal r = leases_.renew(ids);
    for (std::string& id : r.live) resp->add_live_ids(std::move(id));
    for (std::string& id : r.reclaimed) resp->add_reclaimed_ids(std::move(id));
    resp->set_next_deadline(r.next_deadline);
    return grpc::Status::OK;
  }

 private:
  // Finishes `reactor` with `s` (a refusal before any engine is asked).
  static grpc::ServerUnaryReactor* finished(grpc::ServerUnaryReactor* reactor,
                                            const absl::Status& s) {
    reactor->Finish(to_grpc(s));
    return reactor;
  }

  // `p`, unless it is an error or `key` does not fit the server's limits.
  absl::StatusOr<Policy*> with_key(absl::StatusOr<Policy*> p,
                                   const std::string& key) const {
    if (!p.ok()) return p;
    if (absl::Status s = key_fits(key); !s.ok()) return s;
    return p;
  }

  // Runs `start` here when it waits on nothing, else on the blocking pool
  // (never a gRPC callback thread waiting on a store).
  template <class F>
  void dispatch(bool answers_without_waiting, F start) {
    if (answers_without_waiting) {
      start();
    } else {
      blocking_.run(std::move(start));
    }
  }

  // CheckMany's keys, each fitting, at most maxBatch of them (views of
  // the request's strings).
  absl::StatusOr<std::vector<std::string_view>> batch_keys(
      const v1::CheckManyRequest& req) const {
    const int64_t n = req.keys_size();
    if (n > policies_.config().max_batch) {
      return absl::InvalidArgumentError(
          absl::StrCat("CheckMany: ", n, " keys; the server's limit is ",
                       policies_.config().max_batch, " (maxBatch)"));
    }
    std::vector<std::string_view> keys;
    keys.reserve(static_cast<size_t>(n));
    for (const std::string& k : req.keys()) {
      if (absl::Status s = key_fits(k); !s.ok()) return s;
      keys.push_back(k);
    }
    return keys;
  }

  // CheckMany's answer from the batch's decisions (`t0`: when it started;
  // each key is observed with an equal share of the batch's time).
  grpc::Status answer_many(Policy& policy, const v1::CheckManyRequest& req,
                           const std::vector<std::string_view>& keys,
                           const absl::StatusOr<std::vector<Decision>>& out,
                           SteadyClock::time_point t0,
                           v1::CheckManyResponse& resp) {
    if (!out.ok()) return to_grpc(out.status());
    const SteadyClock::duration each =
        (SteadyClock::now() - t0) / std::max<size_t>(1, out->size());
    for (size_t i = 0; i < out->size(); ++i) {
      observe(policy, keys[i], units(req.cost()), (*out)[i], each);
      to_wire((*out)[i], resp.add_decisions());
    }
    return grpc::Status::OK;
  }

  // CheckMany's body on a blocking engine.
  grpc::Status check_many(Policy& policy, const v1::CheckManyRequest& req,
                          v1::CheckManyResponse& resp) {
    absl::StatusOr<std::vector<std::string_view>> keys = batch_keys(req);
    if (!keys.ok()) return to_grpc(keys.status());
    const SteadyClock::time_point t0 = SteadyClock::now();
    return answer_many(policy, req, *keys,
                       policy.limiter->check_many(*keys, units(req.cost())), t0,
                       resp);
  }

  absl::StatusOr<Policy*> find(const std::string& name) const {
    Policy* p = policies_.find(name);
    if (p == nullptr) {
      return absl::NotFoundError(absl::StrCat("unknown policy \"", name,
                                              "\" (the configuration names ",
                                              policies_.all().size(), ")"));
    }
    return p;
  }

  // The policy, if it is a limiter (the rate RPCs serve only limiters).
  absl::StatusOr<Policy*> limiter(const std::string& name,
                                  std::string_view rpc) const {
    absl::StatusOr<Policy*> p = find(name);
    if (p.ok() && (*p)->limiter == nullptr) return wrong_kind(**p, rpc);
    return p;
  }

  static absl::Status wrong_kind(const Policy& p, std::string_view rpc) {
    std::string_view serves = "Check, CheckMany, Peek and Forecast";
    if (p.debits) serves = "Check, CheckMany, Peek, Forecast and Debit";
    if (p.federated != nullptr || p.strategy == "fairEscrow" ||
        p.strategy == "federatedFairEscrow") {
      serves = "Check and CheckMany";
    }
    if (p.admission != nullptr) serves = "Admit, Release and Heartbeat";
    if (p.fleet_budget != nullptr) serves = "Debit";
    return absl::UnimplementedError(absl::StrCat(sv(rpc), ": policy \"", p.name,
                                                 "\" is a ", sv(p.kind),
                                                 " and serves ", sv(serves)));
  }

  absl::Status key_fits(const std::string& key) const {
    const int64_t limit = policies_.config().max_key_bytes;
    if (static_cast<int64_t>(key.size()) > limit) {
      return absl::InvalidArgumentError(
          absl::StrCat("key is ", key.size(), " bytes; the server's limit is ",
                       limit, " (maxKeyBytes)"));
    }
    return absl::OkStatus();
  }

  Policies& policies_;
  SlotLeases& leases_;
  BlockingPool& blocking_;
};

}  // namespace

bool is_loopback_peer(std::string_view peer) {
  const auto starts = [&](std::string_view p) {
    return peer.substr(0, p.size()) == p;
  };
  return starts("ipv4:127.") || starts("ipv6:[::1]:") ||
         starts("ipv6:[::ffff:127.") || starts("unix:");
}

struct Server::Impl {
  std::unique_ptr<Policies> policies;
  // Before the services: it outlives the calls they hand it.
  std::unique_ptr<BlockingPool> blocking;
  std::unique_ptr<SlotLeases> leases;
  std::unique_ptr<RateLimiterService> service;
  std::unique_ptr<EnvoyRateLimitService> envoy;
  std::unique_ptr<FleetService> fleet;
  std::unique_ptr<MonitorService> monitor;
  std::unique_ptr<grpc::Server> grpc_server;
  int port = 0;
  // Reclaims expired slots (null when the options turned it off).
  std::unique_ptr<ThreadBeatScheduler> reaper;
  // Watches the store until it is ready (its connections open and set
  // up), then sets the health service SERVING (null: the embedded store,
  // ready from the start).
  std::unique_ptr<ThreadBeatScheduler> readiness;
  std::atomic<bool> store_ready{false};
  std::atomic<bool> shut_down{false};
};

Server::Server(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

absl::StatusOr<std::unique_ptr<Server>> Server::start(
    std::unique_ptr<Policies> policies, ServerOptions options) {
  if (policies == nullptr) {
    return absl::InvalidArgumentError("server: policies are null");
  }
  auto impl = std::make_unique<Impl>();
  impl->leases = std::make_unique<SlotLeases>(policies->config().lease_ttl_ms,
                                              options.clock);
  impl->policies = std::move(policies);
  if (options.blocking_threads < 1 || options.blocking_threads > 4096) {
    return absl::InvalidArgumentError(
        absl::StrCat("server: blocking_threads must be in [1, 4096]; got ",
                     options.blocking_threads));
  }
  impl->blocking = std::make_unique<BlockingPool>(options.blocking_threads);
  impl->service = std::make_unique<RateLimiterService>(
      *impl->policies, *impl->leases, *impl->blocking);

  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  // One server per port: a second one on a port in use must fail, not
  // share it (gRPC sets SO_REUSEPORT unless told not to).
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  if (options.sync_threads < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "server: sync_threads must be >= 0; got ", options.sync_threads));
  }
  if (options.sync_threads > 0) {
    grpc::ResourceQuota quota("throttlekit-server");
    quota.SetMaxThreads(options.sync_threads);
    builder.SetResourceQuota(quota);
  }
  const bool tls = !options.tls_cert_chain.empty();
  if (tls != !options.tls_private_key.empty()) {
    return absl::InvalidArgumentError(
        "server: TLS needs both the certificate chain and the private key");
  }
  if (!tls && !options.tls_client_ca.empty()) {
    return absl::InvalidArgumentError(
        "server: a client CA (mutual TLS) needs the server's own certificate "
        "and key");
  }
  std::shared_ptr<grpc::ServerCredentials> credentials =
      grpc::InsecureServerCredentials();
  if (tls) {
    grpc::SslServerCredentialsOptions ssl(
        options.tls_client_ca.empty()
            ? GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE
            : GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
    ssl.pem_root_certs = options.tls_client_ca;
    ssl.pem_key_cert_pairs.push_back(
        {options.tls_private_key, options.tls_cert_chain});
    credentials = grpc::SslServerCredentials(ssl);
  }
  builder.AddListeningPort(options.listen, credentials, &impl->port);
  builder.RegisterService(impl->service.get());
  impl->envoy =
      std::make_unique<EnvoyRateLimitService>(*impl->policies, *impl->blocking);
  builder.RegisterService(impl->envoy.get());
  impl->fleet = std::make_unique<FleetService>(*impl->policies,
                                               std::move(options.fleet_secret));
  builder.RegisterService(impl->fleet.get());
  impl->monitor = std::make_unique<MonitorService>(
      *impl->policies, *impl->leases, std::move(options.monitor_secret),
      options.watch_cancel_check_ms);
  builder.RegisterService(impl->monitor.get());
  impl->grpc_server = builder.BuildAndStart();
  if (impl->grpc_server == nullptr || impl->port == 0) {
    return absl::UnavailableError(absl::StrCat(
        "server: cannot listen on ", options.listen,
        tls ? " with the TLS certificate and key given (are they PEM, and "
              "does the key belong to the certificate?)"
            : ""));
  }
  // The health service says NOT_SERVING until the shared store is ready:
  // its connections open in the background (docs/server.md, "Health"), so
  // a load balancer sends nothing before the first call can be answered.
  if (const std::shared_ptr<Coordinator>& store = impl->policies->store();
      store != nullptr) {
    grpc::HealthCheckServiceInterface* health =
        impl->grpc_server->GetHealthCheckService();
    health->SetServingStatus(false);
    impl->readiness = std::make_unique<ThreadBeatScheduler>();
    Impl* self = impl.get();
    impl->readiness->start([self, health, store]() -> int64_t {
      if (self->store_ready.load(std::memory_order_acquire)) return 60'000;
      if (!store->wait_ready(absl::Now()).ok()) return 10;
      self->store_ready.store(true, std::memory_order_release);
      health->SetServingStatus(true);
      return 60'000;
    });
  } else {
    impl->store_ready.store(true, std::memory_order_release);
  }
  if (options.reaper) {
    // Expired slots are reclaimed within a quarter of the lease TTL (at
    // most a second late).
    SlotLeases* leases = impl->leases.get();
    const int64_t period_ms =
        std::clamp<int64_t>(leases->ttl_ms() / 4, 5, 1000);
    impl->reaper = std::make_unique<ThreadBeatScheduler>();
    impl->reaper->start([leases, period_ms] {
      leases->reclaim_expired();
      return period_ms;
    });
  }
  return std::unique_ptr<Server>(new Server(std::move(impl)));
}

Server::~Server() { shutdown(); }

int Server::port() const { return impl_->port; }

void Server::shutdown() {
  if (impl_->shut_down.exchange(true)) return;
  if (impl_->reaper != nullptr) impl_->reaper->stop();
  if (impl_->readiness != nullptr) impl_->readiness->stop();
  impl_->monitor->stop();  // Watch streams end, so Shutdown need not wait
  impl_->grpc_server->Shutdown();
  // Credits federated limiters hold go back to their windows.
  impl_->policies->close().IgnoreError();
}

void Server::wait() { impl_->grpc_server->Wait(); }

bool Server::healthy() {
  const std::shared_ptr<Coordinator>& store = impl_->policies->store();
  return store == nullptr || store->ping().ok();
}

bool Server::store_ready() const {
  return impl_->store_ready.load(std::memory_order_acquire);
}

std::string Server::prometheus_text() {
  std::string out;
  const auto family = [&](std::string_view name, std::string_view type,
                          std::string_view help) {
    absl::StrAppend(&out, "# HELP ", sv(name), " ", sv(help), "\n# TYPE ",
                    sv(name), " ", sv(type), "\n");
  };
  struct Row {
    std::string label;
    PolicyMetrics::Snapshot m;
    const Policy* p;
  };
  std::vector<Row> rows;
  for (const Policy* p : impl_->policies->all()) {
    rows.push_back({prometheus_label(p->name), p->metrics->snapshot(), p});
  }
  family("throttlekit_checks_total", "counter",
         "Decisions made, by policy and outcome.");
  for (const Row& r : rows) {
    absl::StrAppend(&out, "throttlekit_checks_total{policy=\"", r.label,
                    "\",allowed=\"true\"} ", r.m.allowed, "\n",
                    "throttlekit_checks_total{policy=\"", r.label,
                    "\",allowed=\"false\"} ", r.m.denied, "\n");
  }
  family("throttlekit_denies_by_axis_total", "counter",
         "Admission denials by the binding axis (lane).");
  for (const Row& r : rows) {
    if (r.p->admission == nullptr) continue;
    for (size_t i = 0; i < PolicyMetrics::kLanes.size(); ++i) {
      absl::StrAppend(&out, "throttlekit_denies_by_axis_total{policy=\"",
                      r.label, "\",lane=\"", sv(PolicyMetrics::kLanes[i]),
                      "\"} ", r.m.denied_by_lane[i], "\n");
    }
  }
  family("throttlekit_limit", "gauge",
         "The ceiling the policy's last decision reported.");
  for (const Row& r : rows) {
    absl::StrAppend(&out, "throttlekit_limit{policy=\"", r.label, "\"} ",
                    r.m.limit, "\n");
  }
  family("throttlekit_decision_latency_seconds", "summary",
         "Time to decide (the engine's call), p50 and p99.");
  for (const Row& r : rows) {
    const auto& l = r.m.latency;
    absl::StrAppend(&out, "throttlekit_decision_latency_seconds{policy=\"",
                    r.label, "\",quantile=\"0.5\"} ", l.p50_ms / 1e3, "\n",
                    "throttlekit_decision_latency_seconds{policy=\"", r.label,
                    "\",quantile=\"0.99\"} ", l.p99_ms / 1e3, "\n",
                    "throttlekit_decision_latency_seconds_sum{policy=\"",
                    r.label, "\"} ", l.avg_ms * static_cast<double>(l.n) / 1e3,
                    "\n",
                    "throttlekit_decision_latency_seconds_count{policy=\"",
                    r.label, "\"} ", l.n, "\n");
  }
  family("throttlekit_concurrency_limit", "gauge",
         "An admission's in-flight ceiling in force (observed ceiling).");
  for (const Row& r : rows) {
    if (r.p->admission == nullptr || r.p->admission->concurrency() == nullptr) {
      continue;
    }
    absl::StrAppend(
        &out, "throttlekit_concurrency_limit{policy=\"", r.label, "\"} ",
        r.p->admission->concurrency()->stats().effective_limit, "\n");
  }
  family("throttlekit_concurrency_inflight", "gauge",
         "An admission's requests in flight.");
  for (const Row& r : rows) {
    if (r.p->admission == nullptr || r.p->admission->concurrency() == nullptr) {
      continue;
    }
    absl::StrAppend(&out, "throttlekit_concurrency_inflight{policy=\"", r.label,
                    "\"} ", r.p->admission->concurrency()->stats().inflight,
                    "\n");
  }
  // Distributed concurrency: one stats read per policy for four gauges.
  struct Fleet {
    const std::string* label;
    DistributedConcurrencyStats stats;
  };
  std::vector<Fleet> fleets;
  for (const Row& r : rows) {
    if (r.p->distributed != nullptr) {
      fleets.push_back({&r.label, r.p->distributed->stats()});
    }
  }
  if (!fleets.empty()) {
    const auto gauge = [&](std::string_view name, std::string_view help,
                           auto value) {
      family(name, "gauge", help);
      for (const Fleet& f : fleets) {
        absl::StrAppend(&out, sv(name), "{policy=\"", *f.label, "\"} ",
                        value(f.stats), "\n");
      }
    };
    gauge("throttlekit_concurrency_share",
          "Distributed concurrency: this server's share of the fleet ceiling.",
          [](const DistributedConcurrencyStats& d) { return d.share; });
    gauge("throttlekit_concurrency_global_limit",
          "Distributed concurrency: the fleet ceiling at the last beat.",
          [](const DistributedConcurrencyStats& d) { return d.global_limit; });
    gauge("throttlekit_concurrency_nodes",
          "Distributed concurrency: live servers at the last beat.",
          [](const DistributedConcurrencyStats& d) { return d.live_nodes; });
    gauge(
        "throttlekit_concurrency_fenced",
        "Distributed concurrency: 1 while this server has fenced itself.",
        [](const DistributedConcurrencyStats& d) { return d.fenced ? 1 : 0; });
    gauge(
        "throttlekit_concurrency_outage",
        "Distributed concurrency: 1 while this server holds no valid lease.",
        [](const DistributedConcurrencyStats& d) { return d.outage ? 1 : 0; });
  }
  family("throttlekit_slots_held", "gauge",
         "Admit slots held under a lease id.");
  absl::StrAppend(&out, "throttlekit_slots_held ", impl_->leases->held(), "\n");
  family("throttlekit_slots_reclaimed_total", "counter",
         "Admit slots reclaimed at expiry (their client stopped renewing).");
  absl::StrAppend(&out, "throttlekit_slots_reclaimed_total ",
                  impl_->leases->reclaimed_total(), "\n");
  family("throttlekit_store_up", "gauge",
         "1 when the store answers a ping (always on the embedded store).");
  absl::StrAppend(&out, "throttlekit_store_up ", healthy() ? 1 : 0, "\n");
  if (const std::shared_ptr<EnvoyLimits> envoy = impl_->policies->envoy();
      envoy != nullptr) {
    envoy->append_prometheus(out);
  }
  family("throttlekit_envoy_reloads_total", "counter",
         "Envoy door: configuration reloads by result (applied, refused: the "
         "domains in force stayed).");
  absl::StrAppend(&out, "throttlekit_envoy_reloads_total{result=\"applied\"} ",
                  impl_->policies->envoy_reloads(), "\n",
                  "throttlekit_envoy_reloads_total{result=\"refused\"} ",
                  impl_->policies->envoy_reload_errors(), "\n");
  return out;
}

Policies& Server::policies() { return *impl_->policies; }
SlotLeases& Server::leases() { return *impl_->leases; }

size_t Server::blocking_pool_threads() const {
  return impl_->blocking->threads();
}

}  // namespace throttlekit::server
