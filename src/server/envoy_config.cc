// src/server/envoy_config.cc: the Envoy door's configuration
// (envoy_config.h), in the reference rate-limit service's format.

#include "envoy_config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <functional>
#include <map>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl_view.h"
#include "file_text.h"
#include "yaml_reader.h"

namespace throttlekit::server {
namespace {

// The reader's vocabulary (mapping, integer, child, Errors, ...).
using namespace yaml_reader;  // NOLINT(build/namespaces)

struct UnitRow {
  EnvoyUnit unit;
  std::string_view name;
  int64_t ms;
};

constexpr std::array<UnitRow, 7> kUnits = {{
    {EnvoyUnit::kSecond, "second", 1'000},
    {EnvoyUnit::kMinute, "minute", 60'000},
    {EnvoyUnit::kHour, "hour", 3'600'000},
    {EnvoyUnit::kDay, "day", 86'400'000},
    {EnvoyUnit::kWeek, "week", 7 * int64_t{86'400'000}},
    {EnvoyUnit::kMonth, "month", 30 * int64_t{86'400'000}},
    {EnvoyUnit::kYear, "year", 365 * int64_t{86'400'000}},
}};

const UnitRow& row(EnvoyUnit unit) {
  for (const UnitRow& r : kUnits) {
    if (r.unit == unit) return r;
  }
  return kUnits[0];  // unreachable: every enumerator has a row
}

// A non-empty string scalar under `key` of `m`, or an error; `required`
// says whether its absence is one.
absl::StatusOr<std::optional<std::string>> text(Map& m, std::string_view key,
                                                bool required,
                                                bool allow_empty) {
  const YAML::Node n = m.get(key);
  const std::string at = child(m.path(), key);
  if (!n.IsDefined() || n.IsNull()) {
    if (required) {
      return m.errors().at(m.path(), absl::StrCat("missing `", sv(key), "`"));
    }
    return std::optional<std::string>();
  }
  if (!n.IsScalar() || (!allow_empty && n.Scalar().empty())) {
    return m.errors().at(
        at, absl::StrCat("must be a non-empty string; got ", quoted(n)));
  }
  return std::optional<std::string>(n.Scalar());
}

// A `leased:` or `federated:` value (as `federated` says): true, false, or
// a map with an optional `batch` in [1, requests_per_unit] (default
// `envoy_default_lease_batch`) and, federated, an optional `region`.
// nullopt for false.
struct LeaseBlock {
  int64_t batch = 1;
  std::string region = "default";
};
absl::StatusOr<std::optional<LeaseBlock>> lease_block(const YAML::Node& n,
                                                      const std::string& path,
                                                      const EnvoyRateLimit& r,
                                                      bool federated,
                                                      const Errors& errors) {
  const char* const what = federated ? "federated" : "leased";
  if (r.unlimited || r.requests_per_unit == 0) {
    return errors.at(
        path, r.unlimited
                  ? absl::StrCat("an unlimited limit is never counted; it "
                                 "cannot be ",
                                 what)
                  : absl::StrCat("a limit of 0 refuses without counting; it "
                                 "cannot be ",
                                 what));
  }
  if (!federated && r.strategy != "fixedWindow") {
    return errors.at(path, absl::StrCat("leases count a fixed window; "
                                        "strategy ",
                                        r.strategy, " cannot be leased"));
  }
  if (federated && r.strategy != "fixedWindow" &&
      r.strategy != "slidingWindow") {
    return errors.at(path, absl::StrCat("only windowed strategies federate "
                                        "(fixedWindow, slidingWindow); "
                                        "strategy ",
                                        r.strategy, " cannot be federated"));
  }
  LeaseBlock out;
  out.batch = envoy_default_lease_batch(r.requests_per_unit);
  if (!n.IsMap()) {
    if (!n.IsScalar() || (n.Scalar() != "true" && n.Scalar() != "false")) {
      return errors.at(path, absl::StrCat("must be true, false or {batch: N",
                                          federated ? ", region: R" : "",
                                          "}; got ", quoted(n)));
    }
    if (n.Scalar() == "false") return std::optional<LeaseBlock>();
    return std::optional<LeaseBlock>(std::move(out));
  }
  absl::StatusOr<Map> lm = mapping(n, path, errors);
  if (!lm.ok()) return lm.status();
  if (const YAML::Node batch = lm->get("batch"); batch.IsDefined()) {
    TK_ASSIGN(out.batch, integer(batch, child(path, "batch"), 1,
                                 r.requests_per_unit, errors,
                                 absl::StrCat("[1, requests_per_unit = ",
                                              r.requests_per_unit, "]")));
  }
  if (federated) {
    std::optional<std::string> region;
    TK_ASSIGN(region,
              text(*lm, "region", /*required=*/false, /*allow_empty=*/false));
    if (region.has_value()) {
      if (region->size() > 64) {
        return errors.at(
            child(path, "region"),
            absl::StrCat("must be 1 .. 64 bytes; got ", region->size()));
      }
      out.region = *std::move(region);
    }
  }
  if (absl::Status s = lm->unknown(); !s.ok()) return s;
  return std::optional<LeaseBlock>(std::move(out));
}

// A `rate_limit: {unit, requests_per_unit, unlimited, name, replaces,
// strategy, burst, buckets, leased, federated}` block.
absl::StatusOr<EnvoyRateLimit> rate_limit(const YAML::Node& n,
                                          const std::string& path,
                                          const Errors& errors) {
  absl::StatusOr<Map> m = mapping(n, path, errors);
  if (!m.ok()) return m.status();
  EnvoyRateLimit r;
  if (const YAML::Node u = m->get("unlimited"); u.IsDefined()) {
    TK_ASSIGN(r.unlimited, boolean(u, child(path, "unlimited"), errors));
  }
  const YAML::Node unit = m->get("unit");
  const YAML::Node rpu = m->get("requests_per_unit");
  const YAML::Node strategy = m->get("strategy");
  const YAML::Node burst = m->get("burst");
  const YAML::Node buckets = m->get("buckets");
  std::optional<std::string> name;
  TK_ASSIGN(name, text(*m, "name", /*required=*/false, /*allow_empty=*/true));
  r.name = name.value_or("");
  if (r.unlimited) {
    // As the reference: an unlimited limit is never counted, so a unit
    // would mean nothing (its requests_per_unit is ignored).
    if (unit.IsDefined()) {
      return errors.at(child(path, "unit"),
                       "an unlimited limit takes no unit (it is never "
                       "counted)");
    }
    if (strategy.IsDefined() || burst.IsDefined() || buckets.IsDefined()) {
      return errors.at(path,
                       "an unlimited limit takes no strategy, burst or "
                       "buckets (it is never counted)");
    }
  } else {
    if (!unit.IsDefined()) {
      return errors.at(path,
                       "missing `unit` (second, minute, hour, day, "
                       "week, month or year)");
    }
    std::string lower = unit.IsScalar() ? unit.Scalar() : "";
    std::transform(lower.begin(), lower.end(), lower.begin(),
                   [](unsigned char c) { return std::tolower(c); });
    const auto it =
        std::find_if(kUnits.begin(), kUnits.end(),
                     [&](const UnitRow& u) { return u.name == lower; });
    if (!unit.IsScalar() || it == kUnits.end()) {
      return errors.at(child(path, "unit"),
                       absl::StrCat("unknown unit ", quoted(unit),
                                    "; expected second, minute, hour, day, "
                                    "week, month or year"));
    }
    r.unit = it->unit;
    if (!rpu.IsDefined()) {
      return errors.at(path,
                       "missing `requests_per_unit` (0 refuses every "
                       "request)");
    }
    TK_ASSIGN(r.requests_per_unit,
              integer(rpu, child(path, "requests_per_unit"), 0,
                      kMaxRequestsPerUnit, errors, "[0, 2^32-1]"));
    if (strategy.IsDefined()) {
      if (!strategy.IsScalar()) {
        return errors.at(child(path, "strategy"), "must be a strategy name");
      }
      r.strategy = strategy.Scalar();
    }
    int64_t burst_v = 0;
    int64_t buckets_v = 0;
    if (burst.IsDefined()) {
      if (r.strategy != "gcra") {
        return errors.at(child(path, "burst"), "applies to strategy gcra only");
      }
      TK_ASSIGN(burst_v, integer(burst, child(path, "burst"), 1,
                                 kMaxSafeInteger, errors, "[1, 2^53-1]"));
    }
    if (buckets.IsDefined()) {
      if (r.strategy != "slidingWindow") {
        return errors.at(child(path, "buckets"),
                         "applies to strategy slidingWindow only");
      }
      TK_ASSIGN(buckets_v, integer(buckets, child(path, "buckets"), 1, 100'000,
                                   errors, "[1, 100000]"));
    }
    r.burst = burst_v;
    r.buckets = buckets_v;
    absl::StatusOr<StrategyOptions> o = envoy_strategy_options(
        r.strategy, std::max<int64_t>(1, r.requests_per_unit), r.unit, burst_v,
        buckets_v);
    if (!o.ok()) {
      return errors.at(strategy.IsDefined() ? child(path, "strategy") : path,
                       std::string(o.status().message()));
    }
    // A limit of 0 refuses without counting: it needs no strategy.
    if (r.requests_per_unit > 0) r.options = *std::move(o);
  }
  const YAML::Node leased = m->get("leased");
  const YAML::Node federated = m->get("federated");
  if (leased.IsDefined() && federated.IsDefined()) {
    return errors.at(path,
                     "a limit is leased or federated, not both (a federated "
                     "limit leases its credits too)");
  }
  if (leased.IsDefined()) {
    absl::StatusOr<std::optional<LeaseBlock>> l =
        lease_block(leased, child(path, "leased"), r, false, errors);
    if (!l.ok()) return l.status();
    if (l->has_value()) r.leased_batch = (*l)->batch;
  }
  if (federated.IsDefined()) {
    absl::StatusOr<std::optional<LeaseBlock>> f =
        lease_block(federated, child(path, "federated"), r, true, errors);
    if (!f.ok()) return f.status();
    if (f->has_value()) {
      r.federated = EnvoyRateLimit::Federation{(*f)->region, (*f)->batch};
    }
  }
  if (const YAML::Node rep = m->get("replaces"); rep.IsDefined()) {
    if (absl::Status s = for_each_item(
            rep, child(path, "replaces"), errors,
            "a list of {name: <a limit's name>}",
            [&](const YAML::Node& item, const std::string& at) -> absl::Status {
              absl::StatusOr<Map> e = mapping(item, at, errors);
              if (!e.ok()) return e.status();
              std::optional<std::string> replaced;
              TK_ASSIGN(replaced, text(*e, "name", /*required=*/true,
                                       /*allow_empty=*/false));
              if (*replaced == r.name) {
                return errors.at(
                    child(at, "name"),
                    absl::StrCat("a limit cannot replace itself (\"", r.name,
                                 "\")"));
              }
              if (absl::Status u = e->unknown(); !u.ok()) return u;
              r.replaces.push_back(*std::move(replaced));
              return absl::OkStatus();
            });
        !s.ok()) {
      return s;
    }
  }
  if (absl::Status s = m->unknown(); !s.ok()) return s;
  return r;
}

// A list of descriptors at `path`; `composite` is the composite key of the
// level above (`domain` at the top), for errors naming duplicates.
absl::StatusOr<std::vector<EnvoyDescriptor>> descriptor_list(
    const YAML::Node& n, const std::string& path, const Errors& errors,
    const std::string& composite) {
  std::vector<EnvoyDescriptor> out;
  if (!n.IsDefined() || n.IsNull()) return out;
  if (!n.IsSequence()) {
    return errors.at(path,
                     absl::StrCat("must be a list of descriptors ({key, value, "
                                  "rate_limit, descriptors}); got ",
                                  quoted(n)));
  }
  // (key, value) -> the index that defined it, for duplicates.
  std::map<std::pair<std::string, std::string>, size_t> seen;
  for (size_t i = 0; i < n.size(); ++i) {
    const std::string at = absl::StrCat(path, "[", i, "]");
    absl::StatusOr<Map> m = mapping(n[i], at, errors);
    if (!m.ok()) return m.status();
    EnvoyDescriptor d;
    std::optional<std::string> key;
    TK_ASSIGN(key, text(*m, "key", /*required=*/true, /*allow_empty=*/false));
    d.key = *std::move(key);
    std::optional<std::string> value;
    TK_ASSIGN(value, text(*m, "value", /*required=*/false,
                          /*allow_empty=*/true));
    d.value = value.value_or("");
    const std::string full = absl::StrCat(composite, ".", d.key,
                                          d.value.empty() ? "" : "_", d.value);
    if (auto [it, fresh] = seen.emplace(std::pair(d.key, d.value), i); !fresh) {
      return errors.at(
          at, absl::StrCat("duplicate descriptor composite key \"", full,
                           "\" (also ", path, "[", it->second, "])"));
    }
    if (const YAML::Node r = m->get("rate_limit"); r.IsDefined()) {
      TK_ASSIGN(d.rate_limit, rate_limit(r, child(at, "rate_limit"), errors));
    }
    if (const YAML::Node s = m->get("shadow_mode"); s.IsDefined()) {
      TK_ASSIGN(d.shadow_mode, boolean(s, child(at, "shadow_mode"), errors));
    }
    // Metrics naming only (the reference's per-value metric keys): read and
    // checked, with no effect on decisions.
    for (const std::string_view flag : {"detailed_metric", "value_to_metric"}) {
      if (const YAML::Node f = m->get(flag); f.IsDefined()) {
        if (absl::StatusOr<bool> b = boolean(f, child(at, flag), errors);
            !b.ok()) {
          return b.status();
        }
      }
    }
    if (const YAML::Node s = m->get("share_threshold"); s.IsDefined()) {
      TK_ASSIGN(d.share_threshold,
                boolean(s, child(at, "share_threshold"), errors));
      if (d.share_threshold && d.value.find('*') == std::string::npos) {
        return errors.at(child(at, "share_threshold"),
                         "applies to a value with `*` (a pattern) only");
      }
    }
    // Reference features that change decisions or responses and are not
    // served yet: refused rather than ignored.
    for (const std::string_view unserved : {"quota_mode", "metadata"}) {
      if (m->has(unserved)) {
        return errors.at(child(at, unserved),
                         "not supported by throttlekit-server yet "
                         "(docs/envoy.md, \"Caveats\")");
      }
    }
    TK_ASSIGN(d.descriptors,
              descriptor_list(m->get("descriptors"), child(at, "descriptors"),
                              errors, full));
    if (absl::Status s = m->unknown(); !s.ok()) return s;
    out.push_back(std::move(d));
  }
  return out;
}

// A domain document (`domain`, `descriptors`) at `path`; `source` names it.
absl::StatusOr<EnvoyDomain> domain(const YAML::Node& n, const std::string& path,
                                   const Errors& errors, std::string source) {
  absl::StatusOr<Map> m = mapping(n, path, errors);
  if (!m.ok()) return m.status();
  EnvoyDomain d;
  d.source = std::move(source);
  std::optional<std::string> name;
  TK_ASSIGN(name, text(*m, "domain", /*required=*/true, /*allow_empty=*/false));
  d.domain = *std::move(name);
  TK_ASSIGN(d.descriptors,
            descriptor_list(m->get("descriptors"), child(path, "descriptors"),
                            errors, d.domain));
  if (absl::Status s = m->unknown(); !s.ok()) return s;
  return d;
}

absl::StatusOr<EnvoyDomain> parse_domain_text(std::string_view yaml,
                                              std::string_view source) {
  const Errors errors(source);
  return yaml_reader::read_yaml<EnvoyDomain>(
      yaml, source, [&](const YAML::Node& doc) -> absl::StatusOr<EnvoyDomain> {
        if (absl::Status s = check_shape(doc, "", 1, errors); !s.ok()) {
          return s;
        }
        return domain(doc, "", errors, std::string(source));
      });
}

}  // namespace

int64_t envoy_unit_ms(EnvoyUnit unit) { return row(unit).ms; }

std::string_view envoy_unit_name(EnvoyUnit unit) { return row(unit).name; }

std::optional<EnvoyUnit> envoy_unit_from_wire(int number) {
  for (const UnitRow& r : kUnits) {
    if (static_cast<int>(r.unit) == number) return r.unit;
  }
  return std::nullopt;
}

int64_t envoy_default_lease_batch(int64_t requests_per_unit) {
  return std::clamp<int64_t>(requests_per_unit / 16, 1, 256);
}

absl::StatusOr<StrategyOptions> envoy_strategy_options(
    std::string_view strategy, int64_t requests_per_unit, EnvoyUnit unit,
    int64_t burst, int64_t buckets) {
  const int64_t window_ms = envoy_unit_ms(unit);
  StrategyOptions options;
  if (strategy == "fixedWindow") {
    options = FixedWindow::Options{.limit = requests_per_unit,
                                   .window_ms = window_ms};
  } else if (strategy == "gcra") {
    options = Gcra::Options{
        .limit = requests_per_unit, .period_ms = window_ms, .burst = burst};
  } else if (strategy == "tokenBucket") {
    // A full bucket holds one unit's requests and refills at that rate.
    options = TokenBucket::Options{
        .capacity = requests_per_unit,
        .refill_per_sec = static_cast<double>(requests_per_unit) * 1000.0 /
                          static_cast<double>(window_ms)};
  } else if (strategy == "slidingWindow") {
    SlidingWindow::Options o{.limit = requests_per_unit,
                             .window_ms = window_ms};
    if (buckets > 0) o.buckets = buckets;
    options = o;
  } else if (strategy == "slidingLog") {
    options =
        SlidingLog::Options{.limit = requests_per_unit, .window_ms = window_ms};
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown strategy \"", sv(strategy),
                     "\"; expected fixedWindow (the default), gcra, "
                     "tokenBucket, slidingWindow or slidingLog"));
  }
  if (absl::StatusOr<AnyStrategy> s = make_strategy(options); !s.ok()) {
    return s.status();
  }
  return options;
}

absl::StatusOr<EnvoyDomain> parse_envoy_domain(std::string_view yaml,
                                               std::string_view source) {
  return parse_domain_text(yaml, source);
}

namespace yaml_reader {

absl::StatusOr<EnvoyConfig> envoy_block(const YAML::Node& n,
                                        const std::string& path,
                                        const Errors& errors,
                                        std::string_view base_dir) {
  absl::StatusOr<Map> m = mapping(n, path, errors);
  if (!m.ok()) return m.status();
  EnvoyConfig config;
  if (const YAML::Node h = m->get("headers"); h.IsDefined()) {
    const std::string s = h.IsScalar() ? h.Scalar() : "";
    if (s != "off") {
      config.headers = rate_limit_style_from_name(s);
      if (!config.headers.has_value()) {
        return errors.at(child(path, "headers"),
                         absl::StrCat("must be off, structured, draft07, "
                                      "draft06 or legacy; got ",
                                      quoted(h)));
      }
    }
  }
  if (const YAML::Node u = m->get("unknownDomain"); u.IsDefined()) {
    const std::string s = u.IsScalar() ? u.Scalar() : "";
    if (s == "notFound") {
      config.unknown_domain = EnvoyUnknownDomain::kNotFound;
    } else if (s != "allow") {
      return errors.at(
          child(path, "unknownDomain"),
          absl::StrCat("must be allow or notFound; got ", quoted(u)));
    }
  }
  if (const YAML::Node f = m->get("failPolicy"); f.IsDefined()) {
    const std::string s = f.IsScalar() ? f.Scalar() : "";
    if (s == "open") {
      config.fail_policy = FailPolicy::kOpen;
    } else if (s == "closed") {
      config.fail_policy = FailPolicy::kClosed;
    } else if (s != "error") {
      return errors.at(
          child(path, "failPolicy"),
          absl::StrCat("must be error, open or closed; got ", quoted(f)));
    }
  }
  // Where each domain was defined, for duplicates.
  std::map<std::string, std::string, std::less<>> defined_at;
  const auto add =
      [&](EnvoyDomain d,
          const std::function<absl::Status(std::string)>& dup) -> absl::Status {
    if (auto it = defined_at.find(d.domain); it != defined_at.end()) {
      return dup(absl::StrCat("duplicate domain \"", d.domain,
                              "\"; also defined at ", it->second));
    }
    defined_at.emplace(d.domain, d.source);
    config.domains.push_back(std::move(d));
    return absl::OkStatus();
  };
  if (const YAML::Node ds = m->get("domains"); ds.IsDefined()) {
    if (absl::Status s = for_each_item(
            ds, child(path, "domains"), errors,
            "a list of domains ({domain, descriptors})",
            [&](const YAML::Node& item, const std::string& at) -> absl::Status {
              absl::StatusOr<EnvoyDomain> d = domain(
                  item, at, errors, absl::StrCat(errors.source(), ": ", at));
              if (!d.ok()) return d.status();
              return add(*std::move(d), [&](std::string problem) {
                return errors.at(child(at, "domain"), problem);
              });
            });
        !s.ok()) {
      return s;
    }
  }
  if (const YAML::Node fs = m->get("files"); fs.IsDefined()) {
    if (absl::Status s = for_each_item(
            fs, child(path, "files"), errors, "a list of file names",
            [&](const YAML::Node& item, const std::string& at) -> absl::Status {
              if (!item.IsScalar() || item.Scalar().empty()) {
                return errors.at(at, absl::StrCat("must be a file name; got ",
                                                  quoted(item)));
              }
              const std::string& name = item.Scalar();
              const std::string file =
                  name.front() == '/' || base_dir.empty()
                      ? name
                      : absl::StrCat(sv(base_dir), "/", name);
              const std::optional<std::string> body = read_file_text(file);
              if (!body.has_value()) {
                return errors.at(at,
                                 absl::StrCat("cannot read the file ", file));
              }
              config.files.push_back(file);
              absl::StatusOr<EnvoyDomain> d = parse_domain_text(*body, file);
              if (!d.ok()) return d.status();
              return add(*std::move(d), [&](std::string problem) {
                return absl::InvalidArgumentError(
                    absl::StrCat(file, ": domain: ", problem));
              });
            });
        !s.ok()) {
      return s;
    }
  }
  if (absl::Status s = m->unknown(); !s.ok()) return s;
  if (config.domains.empty()) {
    // An explicit `domains: []` says the domains come from elsewhere.
    const YAML::Node ds = m->get("domains");
    if (!ds.IsDefined() || !ds.IsSequence() || m->get("files").IsDefined()) {
      return errors.at(path,
                       "needs at least one domain (domains or files; "
                       "`domains: []` when a control plane sends them)");
    }
    config.without_domains = true;
  }
  return config;
}

}  // namespace yaml_reader

}  // namespace throttlekit::server
