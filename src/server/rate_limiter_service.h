// src/server/rate_limiter_service.h (internal)
//
// `RateLimiterService`: the `RateLimiter` service, the policies' verbs
// (Check, Admit, Debit, CheckMany, Peek, Forecast, Release, Heartbeat...;
// docs/server.md).

#ifndef THROTTLEKIT_SRC_SERVER_RATE_LIMITER_SERVICE_H_
#define THROTTLEKIT_SRC_SERVER_RATE_LIMITER_SERVICE_H_

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
#include "server.h"
#include "service_support.h"
#include "throttlekit/concurrency/beat_scheduler.h"
#include "throttlekit/core/binding_axis.h"
#include "throttlekit/observe/decision_observer.h"
#include "throttlekit/v1/throttlekit.grpc.pb.h"

namespace throttlekit::server::services {

namespace v1 = ::throttlekit::v1;

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

}  // namespace throttlekit::server::services

#endif  // THROTTLEKIT_SRC_SERVER_RATE_LIMITER_SERVICE_H_
