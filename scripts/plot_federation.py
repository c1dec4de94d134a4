#!/usr/bin/env python3
"""Plots the federation sweep (scripts/eval_federation.sh): utilisation
(admitted / min(L, issued)) against demand skew for K = 2, 3, 5 regions,
federated (solid) beside the static partition (dashed), as an SVG; prints
the sweep and outage tables in Markdown.

Usage: plot_federation.py results.txt out.svg
"""
import sys


def parse(path):
    sweep, outage = [], []
    for line in open(path):
        words = line.split()
        if len(words) < 2 or words[0] != "RESULT":
            continue
        fields = dict(w.split("=", 1) for w in words[2:] if "=" in w)
        (sweep if words[1] == "sweep" else outage).append(fields)
    return sweep, outage


def main():
    sweep, outage = parse(sys.argv[1])
    w, h, left, top, pw, ph = 720, 360, 60, 20, 600, 280
    colors = {"2": "#1f77b4", "3": "#2ca02c", "5": "#d62728"}
    x = lambda s: left + s * pw
    y = lambda u: top + (1 - u) * ph
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" '
           'font-family="sans-serif" font-size="11">',
           f'<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="none" '
           'stroke="#999"/>']
    for u in (0, 0.25, 0.5, 0.75, 1.0):
        out.append(f'<text x="{left - 8}" y="{y(u) + 4}" text-anchor="end">'
                   f'{u:.2f}</text>')
        out.append(f'<line x1="{left}" x2="{left + pw}" y1="{y(u)}" '
                   f'y2="{y(u)}" stroke="#eee"/>')
    for s in (0, 0.25, 0.5, 0.75, 1.0):
        out.append(f'<text x="{x(s)}" y="{top + ph + 16}" '
                   f'text-anchor="middle">{s:.2f}</text>')
    out.append(f'<text x="{left + pw / 2}" y="{h - 6}" text-anchor="middle">'
               'demand skew (0: uniform, 1: all demand in one region)</text>')
    out.append(f'<text x="14" y="{top + ph / 2}" transform="rotate(-90 14 '
               f'{top + ph / 2})" text-anchor="middle">utilisation</text>')
    for k, color in colors.items():
        rows = sorted((float(r["skew"]), r) for r in sweep if r["regions"] == k)
        if not rows:
            continue
        for key, dash in (("utilisation", ""), ("partition", ' stroke-dasharray="6,3"')):
            pts = " ".join(f"{x(s):.1f},{y(float(r[key])):.1f}" for s, r in rows)
            out.append(f'<polyline fill="none" stroke="{color}" '
                       f'stroke-width="2"{dash} points="{pts}"/>')
        ly = top + 14 + 16 * list(colors).index(k)
        out.append(f'<text x="{left + 10}" y="{ly}" fill="{color}">K = {k}: '
                   'federated (solid), static partition (dashed)</text>')
    out.append("</svg>")
    open(sys.argv[2], "w").write("\n".join(out) + "\n")

    print("| K | skew | worst window (L) | utilisation | static partition "
          "| global round trips / window |")
    print("|---:|---:|---:|---:|---:|---:|")
    for r in sorted(sweep, key=lambda r: (int(r["regions"]), float(r["skew"]))):
        print(f'| {r["regions"]} | {float(r["skew"]):.2f} | {r["worst"]} '
              f'({r["limit"]}) | {r["utilisation"]} | {r["partition"]} | '
              f'{r["trips_per_window"]} |')
    for r in outage:
        print(" ".join(f"{k}={v}" for k, v in r.items()))


if __name__ == "__main__":
    main()
