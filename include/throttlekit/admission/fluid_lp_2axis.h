// throttlekit/admission/fluid_lp_2axis.h
//
// Provides `detail::solve_fluid_lp_2axis`, the solver of the 2-axis form
// (rate and cost; the model: fluid_lp.h). Coordinates: t = p_C, y = p_R;
// the plane of a class is the line y = v - c t.
//
// The 2-axis solver finds the optimal face F = {p >= 0 : D(p) = D_min}
// and gives the enumerator's tie rules only the vertices on it:
//   1. A point p0 of F. For fixed p_C = t, D(., t) is convex piecewise
//      linear in p_R with breakpoints v_j - c_j t and is least at a
//      weighted quantile of them: the rate budget filled greedily by
//      surplus v_j - c_j t (expected O(n) by selection). The outer
//      h(t) = min_{p_R} D(p_R, t) is convex (a partial minimum of a convex
//      function) with right derivative C - (the least cost of an optimal
//      fill), monotone in t: a search on its sign finds the least
//      minimiser, alternating the meeting point of h's tangents at the
//      bracket's ends (exact once they lie on the pieces next to it) with
//      bisection over the doubles (at most 128 probes; about 35 at 1000
//      classes).
//   2. F itself. A primal optimum x is read off p0 (classes above their
//      bid at lambda_j, below at 0, at their bid filling what is left of
//      the priced budgets), and D(p0) == sum v_j x_j certifies both (weak
//      duality). By complementary slackness with x, F is the polygon
//      {p >= 0 : a_j.p <= v_j where x_j > 0, a_j.p >= v_j where
//      x_j < lambda_j, p_k = 0 where budget k is left unused}: the region
//      between a concave and a convex envelope of lines (O(n log n)).
//   3. Its corners. No bid line crosses the interior of F (D would kink
//      there), so the vertices of the arrangement on F are F's corners:
//      the envelopes' breakpoints where they do not cross, and their
//      crossings. At each corner the planes through it (classes at their
//      bid within 1e-9) give the enumerator's own vertices there, from
//      the same plane pairs in the same order.
//   4. The tolerance. The tie rules below count as optimal every vertex
//      within the 1e-9 tolerance of the minimum, and off F D can grow
//      slowly enough (a budget within 1e-9 of a demand) for a vertex next
//      to F to be within it: from each candidate the solver walks along
//      every plane through it to the next vertex on either side (O(n)
//      each), keeps those within the tolerance with the enumerator's
//      vertices at each (as in step 3), and walks on from them. For the
//      walk a coordinate plane passes through a vertex only where its
//      coordinate is 0, as in the 3-axis solver.
//   The enumerator's tie rules then choose among these candidates exactly
//   as they do among all vertices.
// Time O(n log n) expected plus O(n) per candidate vertex: at most 128
// probes of O(n) each, the envelopes' sorts, and a handful of
// candidates unless F is a polygon with many corners (a budget that
// exactly matches a demand, such as a zero budget) or many planes meet at
// one corner (values proportional to costs: k planes cost O(k^2)
// arithmetic, of which the 8 lexicographically smallest vertices are
// kept). O(n) memory. Where the certificate of step 2 fails, the minimum
// of step 3 is not reached, or the walk of step 4 passes 256 vertices
// (numerically pathological input), the solver falls back to the
// enumerator.
//
// Against the enumerator (tests/admission/fluid_lp_test.cc): the result
// was the enumerator's bit for bit (the fallback answering in under 0.1%)
// on 800,000 random degenerate instances of one magnitude (ties,
// duplicates, parallel and concurrent planes, zero and exact budgets) and
// on 800,000 with values and volumes 10^12 apart inside one instance and
// instances scaled by 2^+-30 and 10^+-12. The contract tested is that
// every bid is within 1e-9 (relative) of the enumerator's and `bid_price`
// admits the same classes, on one magnitude always and on mixed
// magnitudes where the choice does not hang on the tolerance's width (no
// vertex has D between 1e-2 of the tolerance and the tolerance above the
// minimum); elsewhere, that D is within the tolerance of the
// enumerator's. There the tolerance, relative to the largest terms, can
// exceed the whole term of a small class and count as optimal vertices
// whose bids differ by 10^6, and the walk of step 4 reaches those joined
// to F by edges within the tolerance, which need not be all of them.
//
// A known limit of the tolerance rule, shared by both solvers: a
// coordinate within 1e-12 of |p_R| + |p_C| below 0 counts as 0, which
// compares prices in two units. With costs in units 2^30 apart from
// values, a pair of bid lines meeting at a small negative p_C becomes a
// point on p_C = 0 that is not a vertex. The enumerator can take it (it
// is optimal and can be more selective than every vertex); the 2-axis
// solver never generates it, so there the two can differ.
//
// Thread-safety: pure functions; safe to call concurrently.

#ifndef THROTTLEKIT_ADMISSION_FLUID_LP_2AXIS_H_
#define THROTTLEKIT_ADMISSION_FLUID_LP_2AXIS_H_

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <optional>
#include <span>
#include <tuple>
#include <utility>
#include <vector>

#include "throttlekit/admission/fluid_lp_enumerator.h"
#include "throttlekit/admission/fluid_lp_model.h"

namespace throttlekit::detail {

struct LpLine {
  double v;
  double c;
};

// A class of value > 0 with its surplus w = v - c t at one probe t.
struct LpSurplus {
  double surplus;
  double cost;
  double arrivals;
};

// The rate budget filled greedily at p_C = t, the classes of surplus > 0
// in the order (surplus descending, cost ascending): `marginal` is set when
// they ask for more than `requests`, and then `p_rate` is the surplus of
// the class that crosses the budget (the least minimiser of D(., t) over
// p_R >= 0: a weighted quantile); `cost_used` is the cost of the fill, the
// least cost among the fills optimal at t (the order's cost key), so
// `budgets.cost - cost_used` is the right derivative of min_{p_R} D(p_R, t)
// in t. Expected O(n): a weighted selection by halving, not a sort.
// `value` is min_{p_R} D(p_R, t) less t * C: R p_R + the surplus above
// p_R.
struct RateFill {
  bool marginal = false;
  double p_rate = 0;
  double cost_used = 0;
  double value = 0;
};

inline RateFill fill_rate_budget(std::span<const LpRow> rows, double requests,
                                 double t, std::vector<LpSurplus>& items) {
  items.clear();
  for (const LpRow& r : rows) {
    if (!(r.value > 0)) continue;
    const double w = r.value - r.a[1] * t;
    if (w > 0) items.push_back({w, r.a[1], r.arrivals});
  }
  auto first = [](const LpSurplus& x, const LpSurplus& y) {
    return x.surplus > y.surplus || (x.surplus == y.surplus && x.cost < y.cost);
  };
  size_t lo = 0;
  size_t hi = items.size();
  double volume = 0;
  double cost = 0;
  double worth = 0;  // sum of arrivals * surplus over [0, lo)
  // Invariant: [0, lo) fits within `requests` (volume, cost), and the
  // class that crosses the budget, if any, is in [lo, hi).
  while (hi - lo > 16) {
    const size_t mid = lo + (hi - lo) / 2;
    std::nth_element(items.begin() + lo, items.begin() + mid,
                     items.begin() + hi, first);
    double v = 0;
    double c = 0;
    double w = 0;
    for (size_t i = lo; i < mid; ++i) {
      v += items[i].arrivals;
      c += items[i].cost * items[i].arrivals;
      w += items[i].surplus * items[i].arrivals;
    }
    if (volume + v > requests) {
      hi = mid;
    } else {
      volume += v;
      cost += c;
      worth += w;
      lo = mid;
    }
  }
  std::sort(items.begin() + lo, items.begin() + hi, first);
  for (size_t i = lo; i < hi; ++i) {
    const LpSurplus& k = items[i];
    if (volume + k.arrivals > requests) {
      return {true, k.surplus, cost + k.cost * (requests - volume),
              requests * k.surplus + worth - k.surplus * volume};
    }
    volume += k.arrivals;
    cost += k.cost * k.arrivals;
    worth += k.surplus * k.arrivals;
  }
  return {false, 0.0, cost, worth};
}

// A point of the optimal face: p_C is the least minimiser of the convex
// h(t) = min_{p_R >= 0} D(p_R, t), p_R the least minimiser of D(., p_C).
// The search keeps lo < t* <= hi by the sign of h's right derivative and
// alternates two probes: where the tangents of h at lo and hi meet (h is
// piecewise linear, so once lo and hi lie on the pieces next to t* this is
// t*, and the next double above it settles the sign), and the midpoint of
// the doubles t / u in (lo, hi] (u a power of two above every v / c, so
// that scaling the values by 2^k scales every probe exactly), which bounds
// the search to twice 64 probes of `fill_rate_budget`. It stops when the
// doubles are adjacent or h at hi lies on lo's tangent (the kink is at hi).
inline Duals locate_fluid_lp_optimum(std::span<const LpRow> rows,
                                     const std::array<double, 3>& b) {
  std::vector<LpSurplus> items;
  items.reserve(rows.size());
  struct Probe {
    double t;
    double h;
    double slope;  // h's right derivative
  };
  auto probe = [&](double t) {
    const RateFill f = fill_rate_budget(rows, b[0], t, items);
    return Probe{t, t * b[1] + f.value, b[1] - f.cost_used};
  };
  Probe lo = probe(0);
  double t = 0;
  if (lo.slope < 0) {
    double t_max = 0;
    for (const LpRow& r : rows) {
      if (r.value > 0 && r.a[1] > 0) t_max = std::max(t_max, r.value / r.a[1]);
    }
    // t_max > 0: a fill that costs more than C >= 0 holds a class with
    // v > 0 and c > 0. From u on, every such class has surplus <= 0. An
    // overflowing v / c leaves p0 wrong, which the certificate catches.
    if (!(t_max < 0x1p1000)) t_max = 0x1p1000;
    const double u = std::ldexp(1.0, std::ilogb(t_max) + 2);
    Probe hi = probe(u);
    auto bits = [&](double x) { return std::bit_cast<uint64_t>(x / u); };
    for (int step = 0; bits(hi.t) - bits(lo.t) > 1 && step < 128; ++step) {
      if (hi.h <= lo.h + lo.slope * (hi.t - lo.t) +
                      0x1p-40 * (std::abs(hi.h) + std::abs(lo.h))) {
        break;
      }
      const uint64_t mid = bits(lo.t) + (bits(hi.t) - bits(lo.t)) / 2;
      double at = u * std::bit_cast<double>(mid);
      const bool tangent = step % 2 == 0;
      if (tangent) {
        const double meet = (hi.h - lo.h + lo.slope * lo.t - hi.slope * hi.t) /
                            (lo.slope - hi.slope);
        if (meet > lo.t && meet < hi.t) at = meet;
      }
      const Probe p = probe(at);
      if (p.slope >= 0) {
        hi = p;
      } else {
        lo = p;
        if (tangent) {
          const Probe q = probe(std::nextafter(at, HUGE_VAL));
          (q.slope >= 0 ? hi : lo) = q;
        }
      }
    }
    t = hi.t;
  }
  const RateFill fill = fill_rate_budget(rows, b[0], t, items);
  return Duals{fill.marginal ? fill.p_rate : 0.0, t, 0.0};
}

// The optimal face F = {p >= 0 : D(p) = D_min} as complementary slackness
// with one primal optimum x: p is optimal iff x_j > 0 implies
// v_j >= a_j . p (an `upper` line: y <= v - c t), x_j < lambda_j implies
// v_j <= a_j . p (a `lower` line), and a budget left unused has price 0.
// `primal` is the value of x and `feasible` whether x keeps within the
// budgets (within 1e-9): the certificate that p0 is optimal is
// D(p0) == primal.
struct FluidLpFace {
  std::vector<LpLine> upper;
  std::vector<LpLine> lower;
  bool cost_price_zero = false;
  double primal = 0;
  bool feasible = false;
};

// F from a point p0 of it: x = lambda above the bid, 0 below, and the
// classes at their bid (within 1e-9) fill what the others leave of the
// priced budgets: for a given volume, the cheapest-first and the
// dearest-first fills bound the cost, and their blend hits the cost budget
// (the set of (volume, cost) a box of classes can use is convex).
inline FluidLpFace fluid_lp_face(std::span<const LpRow> rows,
                                 const std::array<double, 3>& b,
                                 const Duals& p0) {
  std::vector<double> x(rows.size(), 0.0);
  std::vector<size_t> ties;
  double used_r = 0;
  double used_c = 0;
  for (size_t j = 0; j < rows.size(); ++j) {
    const LpRow& r = rows[j];
    if (!(r.value > 0)) continue;
    const double bid = row_bid(r, p0);
    if (at_bid(r.value, bid)) {
      ties.push_back(j);
    } else if (r.value > bid) {
      x[j] = r.arrivals;
      used_r += r.arrivals;
      used_c += r.a[1] * r.arrivals;
    }
  }
  const double room_r = std::max(0.0, b[0] - used_r);
  const double room_c = std::max(0.0, b[1] - used_c);
  std::sort(ties.begin(), ties.end(), [&](size_t i, size_t j) {
    return std::tie(rows[i].a[1], i) < std::tie(rows[j].a[1], j);
  });
  // Fills `ties` in order (reversed: dearest first) until the volume
  // reaches `volume_cap` or the cost reaches `cost_cap`.
  auto fill = [&](bool dearest, double volume_cap, double cost_cap) {
    std::vector<double> f(ties.size(), 0.0);
    double v = 0;
    double c = 0;
    for (size_t i = 0; i < ties.size(); ++i) {
      const size_t k = dearest ? ties.size() - 1 - i : i;
      const LpRow& r = rows[ties[k]];
      double take = std::min(r.arrivals, volume_cap - v);
      if (r.a[1] > 0) take = std::min(take, (cost_cap - c) / r.a[1]);
      if (!(take > 0)) break;
      f[k] = take;
      v += take;
      c += take * r.a[1];
    }
    return std::pair{f, c};
  };
  std::vector<double> tie_x(ties.size(), 0.0);
  if (p0.rate > 0) {
    auto [cheap, cheap_cost] = fill(false, room_r, HUGE_VAL);
    tie_x = cheap;
    if (p0.cost > 0) {
      auto [dear, dear_cost] = fill(true, room_r, HUGE_VAL);
      const double theta =
          dear_cost > cheap_cost
              ? std::clamp((room_c - cheap_cost) / (dear_cost - cheap_cost),
                           0.0, 1.0)
              : 0.0;
      for (size_t i = 0; i < ties.size(); ++i) {
        tie_x[i] = cheap[i] + theta * (dear[i] - cheap[i]);
      }
    }
  } else if (p0.cost > 0) {
    tie_x = fill(true, room_r, room_c).first;
  }
  for (size_t i = 0; i < ties.size(); ++i) {
    x[ties[i]] = tie_x[i];
    used_r += tie_x[i];
    used_c += tie_x[i] * rows[ties[i]].a[1];
  }

  FluidLpFace face;
  face.feasible = used_r <= b[0] + 1e-9 * std::max(b[0], used_r) &&
                  used_c <= b[1] + 1e-9 * std::max(b[1], used_c);
  face.lower.push_back({0.0, 0.0});  // p_R >= 0
  for (size_t j = 0; j < rows.size(); ++j) {
    const LpRow& r = rows[j];
    if (!(r.value > 0)) continue;  // v <= a . p for every p >= 0
    face.primal += r.value * x[j];
    if (x[j] > 1e-9 * r.arrivals) face.upper.push_back({r.value, r.a[1]});
    if (x[j] < r.arrivals * (1 - 1e-9)) face.lower.push_back({r.value, r.a[1]});
  }
  if (p0.rate == 0 && used_r < b[0] * (1 - 1e-9)) {
    face.upper.push_back({0.0, 0.0});  // the rate budget is slack: p_R = 0
  }
  face.cost_price_zero = p0.cost == 0 && used_c < b[1] * (1 - 1e-9);
  return face;
}

// One piece of an envelope: `line` from t = `from` to the next piece.
struct EnvelopePiece {
  LpLine line;
  double from;
};

// min_j (v_j - c_j t) over t >= 0 (max_j when `maximum`), as pieces in
// increasing t; empty for no lines. O(n log n).
inline std::vector<EnvelopePiece> envelope(std::vector<LpLine> lines,
                                           bool maximum) {
  // max_j (v_j - c_j t) = -min_j (-v_j - (-c_j) t).
  if (maximum) {
    for (LpLine& l : lines) l = {-l.v, -l.c};
  }
  std::sort(lines.begin(), lines.end(), [](const LpLine& x, const LpLine& y) {
    return std::tie(x.c, x.v) < std::tie(y.c, y.v);
  });
  auto meet = [](const LpLine& x, const LpLine& y) {
    return (y.v - x.v) / (y.c - x.c);
  };
  // The minimum takes the lines in increasing c as t increases.
  std::vector<LpLine> hull;
  for (const LpLine& l : lines) {
    if (!hull.empty() && hull.back().c == l.c) continue;  // never lower
    while (hull.size() >= 2 && meet(hull[hull.size() - 2], l) <=
                                   meet(hull[hull.size() - 2], hull.back())) {
      hull.pop_back();
    }
    hull.push_back(l);
  }
  std::vector<EnvelopePiece> pieces;
  for (size_t i = 0; i < hull.size(); ++i) {
    const double from = i == 0 ? -HUGE_VAL : meet(hull[i - 1], hull[i]);
    const LpLine line = maximum ? LpLine{-hull[i].v, -hull[i].c} : hull[i];
    if (from <= 0 && !pieces.empty()) pieces.clear();
    pieces.push_back({line, std::max(from, 0.0)});
  }
  return pieces;
}

inline const LpLine& piece_at(const std::vector<EnvelopePiece>& pieces,
                              double t) {
  auto it = std::upper_bound(
      pieces.begin(), pieces.end(), t,
      [](double t, const EnvelopePiece& p) { return t < p.from; });
  return std::prev(it)->line;
}

// Points (p_R, p_C) that include every corner of the face: its
// corners are breakpoints of the envelopes U = min(upper) and
// G = max(lower) where G <= U (within 1e-9), and the points where U and G
// cross; and `p0`. A superset: each point only costs a scan.
inline std::vector<Duals> fluid_lp_face_points(const FluidLpFace& face,
                                               const Duals& p0) {
  const std::vector<EnvelopePiece> u = envelope(face.upper, false);
  const std::vector<EnvelopePiece> g = envelope(face.lower, true);
  std::vector<double> ts = {0.0};
  if (!face.cost_price_zero) {
    for (const auto* pieces : {&u, &g}) {
      for (const EnvelopePiece& p : *pieces) {
        if (p.from > 0) ts.push_back(p.from);
      }
    }
  }
  std::sort(ts.begin(), ts.end());
  ts.erase(std::unique(ts.begin(), ts.end()), ts.end());

  std::vector<Duals> points = {p0};
  auto value = [](const LpLine& l, double t) { return l.v - l.c * t; };
  // G(t) <= U(t) within 1e-9 of the terms' size (v and c t cancel at
  // p_R = 0).
  auto feasible = [&](double t) {
    if (u.empty()) return true;
    const LpLine& top = piece_at(u, t);
    const LpLine& bottom = piece_at(g, t);
    const double size = std::max({std::abs(top.v), std::abs(top.c * t),
                                  std::abs(bottom.v), std::abs(bottom.c * t)});
    return value(top, t) - value(bottom, t) >= -1e-9 * size;
  };
  auto add = [&](double t) {
    points.push_back({value(piece_at(g, t), t), t, 0.0});
    if (!u.empty()) points.push_back({value(piece_at(u, t), t), t, 0.0});
  };
  // Where U and G cross after `t`, if they do.
  auto crossing = [&](double t) -> std::optional<double> {
    if (u.empty()) return std::nullopt;
    const LpLine& top = piece_at(u, t);
    const LpLine& bottom = piece_at(g, t);
    if (top.c == bottom.c) return std::nullopt;
    const double at = (top.v - bottom.v) / (top.c - bottom.c);
    if (!(at > t)) return std::nullopt;
    return at;
  };
  bool was_feasible = false;
  for (size_t i = 0; i < ts.size(); ++i) {
    const bool is_feasible = feasible(ts[i]);
    if (is_feasible) add(ts[i]);
    if (i > 0 && is_feasible != was_feasible) {
      if (std::optional<double> at = crossing(ts[i - 1]); at && *at < ts[i]) {
        add(*at);
      }
    }
    was_feasible = is_feasible;
  }
  if (!face.cost_price_zero) {
    if (std::optional<double> at = crossing(ts.back())) add(*at);
  }
  for (Duals& p : points) p.rate = std::max(p.rate, 0.0);
  return points;
}

// The 2-axis solver (steps 1 to 4 of the file comment), or nullopt when
// its certificate fails or its walk passes 256 vertices (the caller then
// runs the enumerator). `rows` from `fluid_lp_rows(classes, false)`.
inline std::optional<Duals> solve_fluid_lp_2axis(
    std::span<const LpRow> rows, const std::array<double, 3>& b) {
  const std::vector<LpPlane> planes = fluid_lp_planes(rows, 2);
  const Duals p0 = locate_fluid_lp_optimum(rows, b);
  const FluidLpFace face = fluid_lp_face(rows, b, p0);
  const double d0 = fluid_lp_dual_bounded(rows, b, p0, HUGE_VAL);
  const double tol = fluid_lp_tolerance(fluid_lp_scale(rows), d0);
  if (!face.feasible || !(std::abs(d0 - face.primal) <= tol)) {
    return std::nullopt;
  }
  const std::vector<Duals> points = fluid_lp_face_points(face, p0);

  // The planes through q, as indices into `planes` in increasing order:
  // classes at their bid within 1e-9, and the coordinate planes where q's
  // coordinate is 0, or (`near`, for the enumerator's candidates) within
  // 1e-9 of its scale among those classes. The walk uses the exact zeros,
  // as the 3-axis solver's does: with values of mixed magnitudes a
  // coordinate can be small against one class and still be what prices
  // out another.
  auto planes_through = [&](const Duals& q, bool near) {
    std::vector<size_t> at;
    double size = 0;
    double t_size = 0;
    for (size_t k = 2; k < planes.size(); ++k) {
      const LpPlane& plane = planes[k];
      if (at_bid(plane.rhs, q.rate + q.cost * plane.normal[1])) {
        at.push_back(k);
        size = std::max(size, plane.rhs);
        if (plane.normal[1] > 0) {
          t_size = std::max(t_size, plane.rhs / plane.normal[1]);
        }
      }
    }
    std::vector<size_t> axes;
    if (q.rate == 0 || (near && q.rate <= 1e-9 * size)) axes.push_back(0);
    if (q.cost == 0 || (near && q.cost <= 1e-9 * t_size)) axes.push_back(1);
    at.insert(at.begin(), axes.begin(), axes.end());
    return at;
  };
  std::vector<LpPlane> sub;
  auto vertices_of = [&](const std::vector<size_t>& indices,
                         std::vector<Duals>& out) {
    fluid_lp_vertices_of(planes, indices, 2, sub, out);
  };
  auto lex = [](const Duals& x, const Duals& y) {
    return std::tie(x.rate, x.cost) < std::tie(y.rate, y.cost);
  };

  // The enumerator's vertices at q, into `local`: those of the planes
  // through it (`near`), or the 8 lexicographically smallest when more
  // than 12 planes pass through it.
  std::vector<Duals> local;
  auto vertices_at = [&](const Duals& q) {
    const std::vector<size_t> at = planes_through(q, true);
    local.clear();
    vertices_of(at, local);
    if (at.size() > 12) {
      const size_t keep = std::min<size_t>(8, local.size());
      std::partial_sort(local.begin(), local.begin() + keep, local.end(), lex);
      local.resize(keep);
    }
  };
  std::vector<Duals> candidates;
  for (const Duals& q : points) {
    vertices_at(q);
    candidates.insert(candidates.end(), local.begin(), local.end());
  }
  std::sort(candidates.begin(), candidates.end(), lex);
  candidates.erase(std::unique(candidates.begin(), candidates.end()),
                   candidates.end());

  // The tie rules count every vertex within the tolerance of the minimum
  // as optimal, and D can grow slowly enough off F (a budget within 1e-9
  // of a demand) for a vertex next to F to be within it. So walk the
  // arrangement's edges from F's vertices to each next vertex along every
  // plane through them, keep those within the tolerance with the
  // enumerator's vertices at each, and keep walking from them (at most
  // 256, else the enumerator decides).
  const double scale = fluid_lp_scale(rows);
  double d_min = fluid_lp_dual_bounded(rows, b, Duals{}, HUGE_VAL);
  for (const Duals& p : candidates) {
    d_min = std::min(d_min, fluid_lp_dual_bounded(rows, b, p, HUGE_VAL));
  }
  const double bound = d_min + fluid_lp_tolerance(scale, d_min);
  // Whether p is within the tolerance and new (then it joins candidates).
  auto add = [&](const Duals& p) {
    if (fluid_lp_dual_bounded(rows, b, p, bound) > bound) return false;
    if (std::find(candidates.begin(), candidates.end(), p) !=
        candidates.end()) {
      return false;
    }
    candidates.push_back(p);
    return true;
  };
  std::vector<Duals> reached;
  for (size_t next = 0; next < candidates.size(); ++next) {
    if (candidates.size() > 256) return std::nullopt;
    const Duals q = candidates[next];
    const std::vector<size_t> at = planes_through(q, false);
    for (size_t k : at) {
      const LpPlane& along = planes[k];
      const double dir[2] = {along.normal[1], -along.normal[0]};
      // The nearest plane crossing the line on either side of q.
      double s_hi = HUGE_VAL;
      double s_lo = -HUGE_VAL;
      size_t hi = 0;
      size_t lo = 0;
      for (size_t m = 0; m < planes.size(); ++m) {
        if (std::binary_search(at.begin(), at.end(), m)) continue;
        const LpPlane& w = planes[m];
        const double rate = w.normal[0] * dir[0] + w.normal[1] * dir[1];
        if (rate == 0) continue;
        const double s =
            (w.rhs - w.normal[0] * q.rate - w.normal[1] * q.cost) / rate;
        if (s > 0 && s < s_hi) {
          s_hi = s;
          hi = m;
        } else if (s < 0 && s > s_lo) {
          s_lo = s;
          lo = m;
        }
      }
      for (auto [s, m] : {std::pair{s_hi, hi}, std::pair{s_lo, lo}}) {
        if (!std::isfinite(s)) continue;
        reached.clear();
        vertices_of({std::min(k, m), std::max(k, m)}, reached);
        for (const Duals& p : reached) {
          if (!add(p)) continue;
          vertices_at(p);
          for (const Duals& r : local) add(r);
        }
      }
    }
  }

  const VertexChoice choice = most_selective_vertex(rows, b, [&](auto&& visit) {
    for (const Duals& p : candidates) visit(p);
  });
  if (!(choice.d_min <= d0 + tol)) return std::nullopt;
  return choice.p;
}

}  // namespace throttlekit::detail

#endif  // THROTTLEKIT_ADMISSION_FLUID_LP_2AXIS_H_
