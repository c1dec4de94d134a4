// throttlekit/observe/names.h
//
// Provides the metric and span-attribute names every ThrottleKit exporter
// uses (docs/admission.md, "Observability"), as constants so that a
// dashboard built for one service reads every other. The dotted names are
// the OpenTelemetry forms; `prometheus_name` gives the exposition form
// (dots to underscores, counters suffixed `_total`).
//
// Thread-safety: constants and a pure function.

#ifndef THROTTLEKIT_OBSERVE_NAMES_H_
#define THROTTLEKIT_OBSERVE_NAMES_H_

#include <string>
#include <string_view>

namespace throttlekit::names {

// Metrics.
// Counter; attributes `strategy`, `allowed`.
inline constexpr std::string_view kChecks = "throttlekit.checks";
// Histogram of `remaining` after each decision.
inline constexpr std::string_view kRemaining = "throttlekit.remaining";
// Histogram of a store round trip, ms.
inline constexpr std::string_view kStoreLatency = "throttlekit.store.latency";
// Gauges from one concurrency stats read.
inline constexpr std::string_view kConcurrencyLimit =
    "throttlekit.concurrency.limit";
inline constexpr std::string_view kConcurrencyInflight =
    "throttlekit.concurrency.inflight";
inline constexpr std::string_view kConcurrencyRttNoload =
    "throttlekit.concurrency.rtt_noload";
// Counter of admission denials; attribute `lane` (one of the lanes below).
inline constexpr std::string_view kDeniesByAxis = "throttlekit.denies_by_axis";

// The lanes of `kDeniesByAxis`: the binding axis, or the policy.
inline constexpr std::string_view kLaneRate = "rate";
inline constexpr std::string_view kLaneConcurrency = "concurrency";
inline constexpr std::string_view kLaneCost = "cost";
inline constexpr std::string_view kLanePolicy = "policy";

// Span attributes.
inline constexpr std::string_view kAttrStrategy = "throttlekit.strategy";
inline constexpr std::string_view kAttrAllowed = "throttlekit.allowed";
inline constexpr std::string_view kAttrLimit = "throttlekit.limit";
inline constexpr std::string_view kAttrRemaining = "throttlekit.remaining";
inline constexpr std::string_view kAttrRetryAfterMs =
    "throttlekit.retry_after_ms";
// Set on admission denials by an axis only (not on a policy denial).
inline constexpr std::string_view kAttrBindingAxis = "throttlekit.binding_axis";

// The Prometheus exposition name of a metric: dots become underscores and
// a counter gets `_total` ("throttlekit.checks" -> "throttlekit_checks_total").
inline std::string prometheus_name(std::string_view metric, bool counter) {
  std::string out(metric);
  for (char& c : out) {
    if (c == '.') c = '_';
  }
  if (counter) out += "_total";
  return out;
}

}  // namespace throttlekit::names

#endif  // THROTTLEKIT_OBSERVE_NAMES_H_
