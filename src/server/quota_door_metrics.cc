// src/server/quota_door_metrics.cc: the quota door's families of the
// Prometheus exposition (quota_door.h, docs/rlqs.md "Metrics"): streams,
// budgets and clients, reports and assignments, reloads, the share
// source's (a fleet's beats), and the requests the clients reported by
// domain and rule.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl_view.h"
#include "metrics.h"
#include "prometheus_family.h"
#include "quota_door.h"

namespace throttlekit::server {

void QuotaDoor::append_prometheus(std::string& out) {
  size_t open = 0;
  std::vector<std::shared_ptr<Budget>> budgets;
  std::shared_ptr<const Served> served;
  {
    MutexLock lock(mu_);
    open = streams_.size();
    for (const auto& [key, b] : budgets_) budgets.push_back(b);
    served = served_;
  }
  const RlqsConfig& config = served->config;
  size_t clients = 0;
  for (const auto& b : budgets) {
    MutexLock lock(b->mu);
    clients += b->budget.client_count();
  }
  const auto family = [&](std::string_view name, std::string_view type,
                          std::string_view help) {
    append_family(out, name, type, help);
  };
  const auto one = [&](std::string_view name, std::string_view type,
                       std::string_view help, int64_t value) {
    family(name, type, help);
    absl::StrAppend(&out, sv(name), " ", value, "\n");
  };
  one("throttlekit_rlqs_streams_open", "gauge",
      "Quota door: RLQS streams open.", static_cast<int64_t>(open));
  one("throttlekit_rlqs_streams_total", "counter",
      "Quota door: RLQS streams opened since start.",
      streams_total_.load(std::memory_order_relaxed));
  one("throttlekit_rlqs_budgets", "gauge",
      "Quota door: budgets tracked (one per domain and budget key).",
      static_cast<int64_t>(budgets.size()));
  one("throttlekit_rlqs_clients", "gauge",
      "Quota door: clients (stream and bucket) the budgets track, forgotten "
      "ones included while their assignments count.",
      static_cast<int64_t>(clients));
  one("throttlekit_rlqs_reports_total", "counter",
      "Quota door: usage report messages received.",
      reports_.load(std::memory_order_relaxed));
  one("throttlekit_rlqs_bad_reports_total", "counter",
      "Quota door: reports refused (the stream ended with their status).",
      bad_reports_.load(std::memory_order_relaxed));
  one("throttlekit_rlqs_abandoned_total", "counter",
      "Quota door: buckets abandoned (reported idle for abandonIdle).",
      abandoned_.load(std::memory_order_relaxed));
  one("throttlekit_rlqs_assignments_sent_total", "counter",
      "Quota door: bucket actions queued to streams.",
      assignments_.load(std::memory_order_relaxed));
  shares_->append_prometheus(out);
  family("throttlekit_rlqs_reloads_total", "counter",
         "Quota door: reloads of the rlqs block by result (applied, refused).");
  absl::StrAppend(&out, "throttlekit_rlqs_reloads_total{result=\"applied\"} ",
                  reloads_.load(std::memory_order_relaxed), "\n",
                  "throttlekit_rlqs_reloads_total{result=\"refused\"} ",
                  reload_errors_.load(std::memory_order_relaxed), "\n");
  family("throttlekit_rlqs_requests_total", "counter",
         "Quota door: requests the clients reported, by domain, rule (its "
         "index, or \"unmatched\") and outcome.");
  for (size_t d = 0; d < config.domains.size(); ++d) {
    const std::string domain = prometheus_label(config.domains[d].domain);
    for (size_t r = 0; r < served->counters[d].size(); ++r) {
      const std::string rule = r == config.domains[d].buckets.size()
                                   ? std::string("unmatched")
                                   : absl::StrCat(r);
      const Counters& c = *served->counters[d][r];
      absl::StrAppend(&out, "throttlekit_rlqs_requests_total{domain=\"", domain,
                      "\",rule=\"", rule, "\",allowed=\"true\"} ",
                      c.allowed.load(std::memory_order_relaxed), "\n",
                      "throttlekit_rlqs_requests_total{domain=\"", domain,
                      "\",rule=\"", rule, "\",allowed=\"false\"} ",
                      c.denied.load(std::memory_order_relaxed), "\n");
    }
  }
}

}  // namespace throttlekit::server
