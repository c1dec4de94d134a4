// src/server/monitor_service.h (internal)
//
// `MonitorService`: the `Monitor` service, snapshots and the watch stream
// (docs/server.md).

#ifndef THROTTLEKIT_SRC_SERVER_MONITOR_SERVICE_H_
#define THROTTLEKIT_SRC_SERVER_MONITOR_SERVICE_H_

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl_view.h"
#include "denial_signal.h"
#include "metrics.h"
#include "policies.h"
#include "service_support.h"
#include "slot_leases.h"
#include "throttlekit/core/clock.h"
#include "throttlekit/observe/top_keys.h"
#include "throttlekit/v1/throttlekit.grpc.pb.h"

namespace throttlekit::server::services {

namespace v1 = ::throttlekit::v1;

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

}  // namespace throttlekit::server::services

#endif  // THROTTLEKIT_SRC_SERVER_MONITOR_SERVICE_H_
