// throttlekit/admission/fluid_lp_3axis.h
//
// Provides `detail::solve_fluid_lp_3axis`, the solver of the 3-axis form
// (rate, cost and concurrency; the model: fluid_lp.h).
//
// Thread-safety: pure functions; safe to call concurrently.

#ifndef THROTTLEKIT_ADMISSION_FLUID_LP_3AXIS_H_
#define THROTTLEKIT_ADMISSION_FLUID_LP_3AXIS_H_

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <optional>
#include <span>
#include <vector>

#include "throttlekit/admission/fluid_lp_enumerator.h"
#include "throttlekit/admission/fluid_lp_model.h"

namespace throttlekit::detail {

// The 3-axis solver. The arrangement of the planes p_k = 0 and
// a_j . p = v_j in p >= 0; D is linear on each of its cells.
//
//   1. Descent. From the origin (the vertex of the three coordinate
//      planes), repeatedly take the edge out of the current vertex along
//      which D falls fastest per unit of length (an edge: the line of two
//      planes through the vertex, either way, staying in p >= 0) to the
//      next vertex on it. D is linear along the edge up to that vertex, so
//      every step lowers D strictly and no vertex repeats; at a vertex no
//      edge lowers, D is least over every cell around it (each cell there
//      is a cone spanned by edges), hence least everywhere (D is convex).
//      The simplex method in the dual, with the steepest edge.
//   2. The optimal face and its neighbourhood, as in the 2-axis solver's
//      step 4: from that vertex, walk every edge to its next vertex and
//      keep walking from those within the tolerance of the least D seen.
//      The optimal face is a polyhedron whose vertices are connected by
//      its edges, so the walk reaches all of them.
//   3. At each vertex reached, the planes through it (classes at their bid
//      within 1e-9, coordinates within 1e-9 of their scale) give the
//      enumerator's own vertices there, from the same plane triples in the
//      same order, and the enumerator's tie rules choose among them.
// Time O(n) per edge looked at: steps times the edges at a vertex (3 pairs
// of planes, both ways, at a simple vertex) for the descent, and the same
// per vertex walked. The steps are not bounded by a polynomial (as the
// simplex method's are not); on random instances they grow about linearly
// with n, so the whole measured about 15 n^2 ns (docs/admission.md), where
// the enumerator takes O(n^4). Falls back (nullopt: the caller runs the
// enumerator) when more than 24 planes meet at one vertex (values
// proportional to a mix of costs and holds), when the descent runs past
// 8 n + 64 steps or the walk past 256 vertices, or when a falling edge
// never meets another plane (neither happens in exact arithmetic).
//
// Against the enumerator (tests/admission/fluid_lp_test.cc): bit-equal on
// 240,000 random degenerate instances of one magnitude (ties, duplicates,
// parallel planes, planes through one line, zero and exact budgets, whole
// instances scaled by 2^+-30 and 10^+-12). With values 10^12 apart inside
// one instance, the tolerance (relative to the largest) spans vertices
// that price the smallest classes differently, and the walk, which goes on
// only from vertices within 64 tolerances of the minimum, can miss the one
// the tie rules would pick: the answer is then another vertex within the
// tolerance (D within it of the enumerator's), not the enumerator's.
//
// Why one function of 200 lines: its steps (the planes through a vertex,
// the edges out of it, the slope along one, the next vertex) are lambdas
// over one set of planes, their rows and one tolerance, shared by the
// walk's two phases (the descent, then the optimal face); as free functions
// each would take the same five arguments, and the tie rules that make the
// answer bit-equal to the enumerator's would be spread across them.
inline std::optional<Duals> solve_fluid_lp_3axis(
    std::span<const LpRow> rows, const std::array<double, 3>& b) {
  const std::vector<LpPlane> planes = fluid_lp_planes(rows, 3);
  // The rows that contribute a plane, aligned with planes[3 + i].
  std::vector<const LpRow*> priced;
  for (const LpRow& r : rows) {
    if (r.value > 0) priced.push_back(&r);
  }
  constexpr size_t kMostPlanesAtAVertex = 24;
  // The walk goes on from vertices this many tolerances above the least D,
  // so that vertices within the tolerance that no edge inside it joins
  // (a thin region when budgets nearly match demands) are still reached.
  constexpr double kReach = 64;
  using Vec = std::array<double, 3>;
  auto dot = [](const Vec& x, const Vec& y) {
    return x[0] * y[0] + x[1] * y[1] + x[2] * y[2];
  };
  auto norm = [&](const Vec& x) { return std::sqrt(dot(x, x)); };
  auto point = [](const Duals& q) {
    return Vec{q.rate, q.cost, q.concurrency};
  };

  // The planes through q, as indices into `planes` in increasing order:
  // classes at their bid within 1e-9, and the coordinate planes where q's
  // coordinate is 0, or (`near`, for the enumerator's candidates, as the
  // 2-axis solver takes them) within 1e-9 of its scale among those classes.
  // The walk uses the exact zeros: with values of mixed magnitudes a
  // coordinate can be small against one class and still be what prices
  // out another.
  auto planes_through = [&](const Duals& q, bool near) {
    std::vector<size_t> at;
    Vec size = {0, 0, 0};
    const Vec x = point(q);
    for (size_t k = 3; k < planes.size(); ++k) {
      const LpPlane& plane = planes[k];
      if (at_bid(plane.rhs, dot(plane.normal, x))) {
        at.push_back(k);
        for (int c = 0; c < 3; ++c) {
          if (plane.normal[c] > 0) {
            size[c] = std::max(size[c], plane.rhs / plane.normal[c]);
          }
        }
      }
    }
    std::vector<size_t> axes;
    for (int c = 0; c < 3; ++c) {
      if (x[c] == 0 || (near && x[c] <= 1e-9 * size[c])) axes.push_back(c);
    }
    at.insert(at.begin(), axes.begin(), axes.end());
    return at;
  };
  std::vector<LpPlane> sub;
  auto vertices_of = [&](const std::vector<size_t>& indices,
                         std::vector<Duals>& out) {
    fluid_lp_vertices_of(planes, indices, 3, sub, out);
  };

  // The edges out of q: the line of each pair of planes through it, each
  // way that stays in p >= 0 (a coordinate plane through q the line does
  // not lie in must be left upwards).
  struct Edge {
    size_t first;
    size_t second;
    Vec dir;
  };
  auto edges_of = [&](const std::vector<size_t>& at, std::vector<Edge>& out) {
    out.clear();
    for (size_t i = 0; i < at.size(); ++i) {
      const Vec& u = planes[at[i]].normal;
      for (size_t j = i + 1; j < at.size(); ++j) {
        const Vec& w = planes[at[j]].normal;
        const Vec d = {u[1] * w[2] - u[2] * w[1], u[2] * w[0] - u[0] * w[2],
                       u[0] * w[1] - u[1] * w[0]};
        const double len = norm(d);
        if (!(len > 1e-12 * norm(u) * norm(w))) continue;  // parallel
        for (double sign : {1.0, -1.0}) {
          const Vec dir = {sign * d[0] / len, sign * d[1] / len,
                           sign * d[2] / len};
          bool inside = true;
          for (size_t k : at) {
            if (k < 3 && dir[k] < -1e-12) inside = false;
          }
          if (inside) out.push_back({at[i], at[j], dir});
        }
      }
    }
  };
  // D's slope along `dir` from q (`at`: the planes through q), and the
  // sum of its terms' magnitudes (the scale a slope counts as 0 against).
  struct Slope {
    double g;
    double size;
  };
  auto slope = [&](const Duals& q, const std::vector<size_t>& at,
                   const Vec& dir) {
    Slope s{dot(b, dir), std::abs(dot(b, dir))};
    const Vec x = point(q);
    for (size_t i = 0; i < priced.size(); ++i) {
      const LpPlane& plane = planes[3 + i];
      const double rate = dot(plane.normal, dir);
      s.size += priced[i]->arrivals * std::abs(rate);
      if (std::binary_search(at.begin(), at.end(), 3 + i)) {
        if (rate < 0) s.g -= priced[i]->arrivals * rate;
      } else if (plane.rhs > dot(plane.normal, x)) {
        s.g -= priced[i]->arrivals * rate;
      }
    }
    return s;
  };
  // The next vertex from q along the edge: the nearest plane the line
  // meets beyond q, and the enumerator's vertex of the edge's two planes
  // and that one.
  auto next_along = [&](const Duals& q, const std::vector<size_t>& at,
                        const Edge& e) -> std::optional<Duals> {
    const Vec x = point(q);
    double best = HUGE_VAL;
    size_t hit = 0;
    for (size_t m = 0; m < planes.size(); ++m) {
      if (std::binary_search(at.begin(), at.end(), m)) continue;
      const LpPlane& w = planes[m];
      const double rate = dot(w.normal, e.dir);
      if (rate == 0) continue;
      const double s = (w.rhs - dot(w.normal, x)) / rate;
      if (s > 0 && s < best) {
        best = s;
        hit = m;
      }
    }
    if (!std::isfinite(best)) return std::nullopt;
    std::vector<size_t> three = {e.first, e.second, hit};
    std::sort(three.begin(), three.end());
    std::vector<Duals> out;
    vertices_of(three, out);
    if (out.empty()) return std::nullopt;
    return out.front();
  };

  // 1. Descent from the origin.
  Duals q{};
  std::vector<Edge> edges;
  const size_t most_steps = 8 * planes.size() + 64;
  for (size_t step = 0;; ++step) {
    if (step > most_steps) return std::nullopt;
    const std::vector<size_t> at = planes_through(q, false);
    if (at.size() > kMostPlanesAtAVertex) return std::nullopt;
    edges_of(at, edges);
    const Edge* down = nullptr;
    double steepest = 0;
    for (const Edge& e : edges) {
      const Slope d = slope(q, at, e.dir);
      if (d.g < -1e-12 * d.size && d.g < steepest) {
        steepest = d.g;
        down = &e;
      }
    }
    if (down == nullptr) break;
    const std::optional<Duals> next = next_along(q, at, *down);
    if (!next) return std::nullopt;
    q = *next;
  }

  // 2. The optimal face and the vertices next to it within the tolerance.
  const double scale = fluid_lp_scale(rows);
  const double d0 = fluid_lp_dual_bounded(rows, b, q, HUGE_VAL);
  double d_min =
      std::min(d0, fluid_lp_dual_bounded(rows, b, Duals{}, HUGE_VAL));
  std::vector<Duals> walked = {q};
  for (size_t next = 0; next < walked.size(); ++next) {
    if (walked.size() > 256) return std::nullopt;
    const Duals from = walked[next];
    const std::vector<size_t> at = planes_through(from, false);
    if (at.size() > kMostPlanesAtAVertex) return std::nullopt;
    edges_of(at, edges);
    for (const Edge& e : edges) {
      const std::optional<Duals> to = next_along(from, at, e);
      if (!to) continue;
      const double d = fluid_lp_dual_bounded(rows, b, *to, HUGE_VAL);
      d_min = std::min(d_min, d);
      if (d > d_min + kReach * fluid_lp_tolerance(scale, d_min)) continue;
      if (std::none_of(walked.begin(), walked.end(),
                       [&](const Duals& w) { return w == *to; })) {
        walked.push_back(*to);
      }
    }
  }

  // 3. The enumerator's vertices at every vertex walked.
  std::vector<Duals> candidates;
  for (const Duals& w : walked) {
    const std::vector<size_t> near = planes_through(w, true);
    if (near.size() > kMostPlanesAtAVertex) return std::nullopt;
    vertices_of(near, candidates);
  }
  const double tol = fluid_lp_tolerance(scale, d0);
  const VertexChoice choice = most_selective_vertex(rows, b, [&](auto&& visit) {
    for (const Duals& p : candidates) visit(p);
  });
  if (!(choice.d_min <= d0 + tol)) return std::nullopt;
  return choice.p;
}

}  // namespace throttlekit::detail

#endif  // THROTTLEKIT_ADMISSION_FLUID_LP_3AXIS_H_
