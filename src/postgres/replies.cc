// src/postgres/replies.cc: see replies.h.

#include "replies.h"

#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace throttlekit::postgres_internal {
namespace {

// The first `n` columns of `row` after `skip`, as integers.
absl::Status parse_ints(const std::vector<std::string>& row, size_t skip,
                        size_t n, absl::string_view what, int64_t* out) {
  if (row.size() < skip + n) {
    return absl::InternalError(absl::StrCat("postgres: ", what, " returned ",
                                            row.size(), " columns; expected ",
                                            skip + n));
  }
  for (size_t k = 0; k < n; ++k) {
    if (!absl::SimpleAtoi(row[skip + k], &out[k])) {
      return absl::InternalError(absl::StrCat(
          "postgres: ", what, " returned a non-integer: ", row[skip + k]));
    }
  }
  return absl::OkStatus();
}

// The comma-separated items of `text`, each read by `parse`.
template <class T, class Parse>
std::vector<T> split(const std::string& text, Parse parse) {
  std::vector<T> out;
  size_t at = 0;
  while (at < text.size()) {
    size_t comma = text.find(',', at);
    if (comma == std::string::npos) comma = text.size();
    out.push_back(parse(text.substr(at, comma - at)));
    at = comma + 1;
  }
  return out;
}

int64_t to_int(const std::string& x) {
  return std::strtoll(x.c_str(), nullptr, 10);
}

double to_double(const std::string& x) {
  return std::strtod(x.c_str(), nullptr);
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

}  // namespace

absl::StatusOr<Decision> to_decision(const std::vector<std::string>& row) {
  int64_t v[4];
  if (absl::Status s = parse_ints(row, 1, 4, "a strategy function", v);
      !s.ok()) {
    return s;
  }
  return Decision{row[0] == "t", v[0], v[1], v[2], v[3]};
}

absl::StatusOr<LeaseGrant> to_grant(const std::vector<std::string>& row) {
  int64_t v[5];
  if (absl::Status s = parse_ints(row, 0, 5, "a lease function", v); !s.ok()) {
    return s;
  }
  return LeaseGrant{v[0], v[1], v[2], v[3], v[4]};
}

absl::StatusOr<int64_t> to_count(const std::vector<std::string>& row) {
  int64_t v;
  if (absl::Status s = parse_ints(row, 0, 1, "a counting function", &v);
      !s.ok()) {
    return s;
  }
  return v;
}

absl::StatusOr<HeartbeatGrant> to_heartbeat_grant(
    const std::vector<std::string>& row) {
  int64_t v[5];
  if (absl::Status s = parse_ints(row, 0, 5, "the heartbeat function", v);
      !s.ok()) {
    return s;
  }
  if (row.size() < 6 || (row[5] != "t" && row[5] != "f")) {
    return absl::InternalError(
        "postgres: the heartbeat function returned no stale flag");
  }
  return HeartbeatGrant{.share = v[0],
                        .generation = v[1],
                        .global_limit = v[2],
                        .live_nodes = v[3],
                        .lease_expires_at_ms = v[4],
                        .stale = row[5] == "t"};
}

absl::StatusOr<int64_t> to_now_ms(const std::vector<std::string>& row) {
  int64_t now = 0;
  if (row.size() != 1 || !absl::SimpleAtoi(row[0], &now)) {
    return absl::InternalError("postgres: the store's clock replied badly");
  }
  return now;
}

absl::StatusOr<std::vector<HeartbeatNode>> parse_heartbeat_table(
    const std::string& ids, const std::string& values) {
  std::vector<HeartbeatNode> nodes;
  if (ids.empty()) return nodes;
  for (size_t at = 0; at <= ids.size();) {
    size_t end = ids.find(',', at);
    if (end == std::string::npos) end = ids.size();
    std::string id;
    for (size_t i = at; i + 1 < end; i += 2) {
      const int hi = hex_value(ids[i]), lo = hex_value(ids[i + 1]);
      if (hi < 0 || lo < 0) {
        return absl::InternalError("postgres: a heartbeat id is malformed");
      }
      id.push_back(static_cast<char>(hi * 16 + lo));
    }
    nodes.push_back(HeartbeatNode{.id = std::move(id)});
    at = end + 1;
  }
  const std::vector<int64_t> v = split<int64_t>(values, &to_int);
  if (v.size() != nodes.size() * 9) {
    return absl::InternalError(absl::StrCat("postgres: a heartbeat table has ",
                                            nodes.size(), " ids and ", v.size(),
                                            " values"));
  }
  for (size_t i = 0; i < nodes.size(); ++i) {
    HeartbeatNode& n = nodes[i];
    const int64_t* x = &v[i * 9];
    n.local_limit = x[0];
    n.inflight = x[1];
    n.expires_at_ms = x[2];
    n.share = x[3];
    n.seq = x[4];
    n.demand = x[5];
    n.generation = x[6];
    n.acked_share = x[7];
    n.max_unacked = x[8];
  }
  return nodes;
}

std::string stored_row_sql(const std::string& table) {
  return absl::StrCat(
      "SELECT ", table, "_now($2), r.kind, r.d1, r.d2, r.n1, r.n2, ",
      "array_to_string(r.ticks, ','), array_to_string(r.counts, ',') ",
      "FROM (SELECT 1) AS one LEFT JOIN ", table, " AS r ON r.id = sha256($1)");
}

absl::StatusOr<StoredRow> to_stored_row(const PgRow& r) {
  const std::vector<std::string>& v = r.values;
  if (v.size() != 8 || r.nulls.size() != 8) {
    return absl::InternalError("postgres: forecast read a bad row");
  }
  StoredRow out;
  out.now = to_int(v[0]);
  if (!r.nulls[1]) {
    out.kind = std::atoi(v[1].c_str());
    out.d1 = to_double(v[2]);
    out.d2 = to_double(v[3]);
    out.n1 = to_int(v[4]);
    out.n2 = to_int(v[5]);
    if (!r.nulls[6]) out.ticks = split<int64_t>(v[6], &to_int);
    if (!r.nulls[7]) out.counts = split<double>(v[7], &to_double);
  }
  return out;
}

}  // namespace throttlekit::postgres_internal
