// src/server/envoy_rls_metrics.cc: the Envoy door's counters in the
// Prometheus exposition (the reference service's statistics, by domain and
// descriptor path) and the count of requests naming an unknown domain
// (envoy_rls.h, docs/envoy.md "Metrics").

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl_view.h"
#include "envoy_rls.h"
#include "envoy_rls_tree.h"
#include "metrics.h"
#include "prometheus_family.h"

namespace throttlekit::server {

void EnvoyLimits::append_prometheus(std::string& out) const {
  // Domains and each domain's limits in a stable order (by name, then by
  // path), so scrapes diff cleanly.
  std::vector<const Domain*> domains;
  for (const auto& [name, d] : domains_) domains.push_back(d.get());
  std::sort(domains.begin(), domains.end(),
            [](const Domain* a, const Domain* b) { return a->name < b->name; });
  struct Row {
    std::string domain, key;
    const LimitCounters* c;
  };
  std::vector<Row> rows;
  for (const Domain* d : domains) {
    const std::string label = prometheus_label(d->name);
    const size_t first = rows.size();
    const auto walk = [&](const auto& self, const Level& level) -> void {
      for (const std::unique_ptr<Node>& n : level.owned) {
        if (n->has_limit && !n->unlimited) {
          rows.push_back({label, prometheus_label(n->path), n->counters.get()});
        }
        self(self, n->children);
      }
    };
    walk(walk, d->top);
    std::sort(rows.begin() + static_cast<std::ptrdiff_t>(first), rows.end(),
              [](const Row& a, const Row& b) { return a.key < b.key; });
    rows.push_back({label, "(override)", d->overrides.get()});
  }
  const auto family = [&](std::string_view name, std::string_view help,
                          std::atomic<int64_t> LimitCounters::*field) {
    append_family(out, name, "counter", help);
    for (const Row& r : rows) {
      absl::StrAppend(&out, sv(name), "{domain=\"", r.domain, "\",key1=\"",
                      r.key, "\"} ",
                      (r.c->*field).load(std::memory_order_relaxed), "\n");
    }
  };
  family("ratelimit_service_rate_limit_total_hits",
         "Envoy door: hits counted against the limit.",
         &LimitCounters::total_hits);
  family("ratelimit_service_rate_limit_over_limit",
         "Envoy door: hits refused by the limit (counted in shadow mode too).",
         &LimitCounters::over_limit);
  family("ratelimit_service_rate_limit_near_limit",
         "Envoy door: hits admitted with over 80% of the limit used.",
         &LimitCounters::near_limit);
  family("ratelimit_service_rate_limit_within_limit",
         "Envoy door: hits admitted by the limit.",
         &LimitCounters::within_limit);
  family("ratelimit_service_rate_limit_shadow_mode",
         "Envoy door: hits over the limit answered OK in shadow mode.",
         &LimitCounters::shadow_mode);
  absl::StrAppend(&out,
                  "# HELP throttlekit_envoy_requests_total Envoy door: "
                  "ShouldRateLimit requests by domain and answer.\n"
                  "# TYPE throttlekit_envoy_requests_total counter\n");
  for (const Domain* d : domains) {
    const std::string label = prometheus_label(d->name);
    const auto line = [&](std::string_view code,
                          const std::atomic<int64_t>& v) {
      absl::StrAppend(&out, "throttlekit_envoy_requests_total{domain=\"", label,
                      "\",code=\"", sv(code), "\"} ",
                      v.load(std::memory_order_relaxed), "\n");
    };
    line("OK", d->requests->ok);
    line("OVER_LIMIT", d->requests->over_limit);
    line("ERROR", d->requests->error);
  }
  {
    absl::StrAppend(&out,
                    "# HELP ratelimit_service_rate_limit_domain_not_found "
                    "Envoy door: requests naming a domain the configuration "
                    "does not have (answered OK with no limit unless "
                    "unknownDomain is notFound).\n"
                    "# TYPE ratelimit_service_rate_limit_domain_not_found "
                    "counter\n");
    std::vector<std::pair<std::string, int64_t>> rows;
    {
      MutexLock lock(not_found_mu_);
      rows.assign(not_found_.begin(), not_found_.end());
    }
    std::sort(rows.begin(), rows.end());
    for (const auto& [name, n] : rows) {
      absl::StrAppend(&out,
                      "ratelimit_service_rate_limit_domain_not_found{domain=\"",
                      prometheus_label(name), "\"} ", n, "\n");
    }
  }
  absl::StrAppend(
      &out,
      "# HELP throttlekit_envoy_unrouted_requests_total Envoy door: requests "
      "refused before a configured domain was found (bad or unknown "
      "domain).\n"
      "# TYPE throttlekit_envoy_unrouted_requests_total counter\n"
      "throttlekit_envoy_unrouted_requests_total ",
      unrouted_.load(std::memory_order_relaxed), "\n");
}

void EnvoyLimits::count_not_found(std::string_view name) {
  MutexLock lock(not_found_mu_);
  auto it = not_found_.find(absl::string_view(name.data(), name.size()));
  if (it == not_found_.end()) {
    it = not_found_
             .emplace(not_found_.size() < kMaxNotFoundNames ? std::string(name)
                                                            : "(other)",
                      0)
             .first;
  }
  ++it->second;
}

}  // namespace throttlekit::server
