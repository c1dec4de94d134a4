#!/usr/bin/env python3
"""Runs bench/rate_limiter_benchmark once and prints the ratios that
docs/performance.md records (each ratio from one run of one binary).

Usage: scripts/bench_report.py [path/to/rate_limiter_benchmark] [--min-time S]
"""
import json
import subprocess
import sys


def main() -> int:
    binary = "build/release/bench/rate_limiter_benchmark"
    min_time = "0.5"
    args = sys.argv[1:]
    if args and not args[0].startswith("--"):
        binary = args.pop(0)
    if args[:1] == ["--min-time"]:
        min_time = args[1]
    out = subprocess.run(
        [binary, "--benchmark_format=json",
         f"--benchmark_min_time={min_time}",
         "--benchmark_repetitions=3",
         "--benchmark_report_aggregates_only=true"],
        check=True, capture_output=True, text=True).stdout
    data = json.loads(out)
    ns = {}
    counters = {}
    for b in data["benchmarks"]:
        if b.get("aggregate_name") != "median":
            continue
        name = b["run_name"]
        ns[name] = b["real_time"] if b["time_unit"] == "ns" else None
        counters[name] = {k: v for k, v in b.items()
                          if k in ("bytes_per_key", "table_bytes_per_key",
                                   "keys")}

    def t(name):
        for k, v in ns.items():
            if k == name:
                return v
        raise KeyError(name)

    ctx = data["context"]
    print(f"machine: {ctx.get('num_cpus')} x {ctx.get('mhz_per_cpu')} MHz, "
          f"{ctx.get('host_name')}, build {ctx.get('library_build_type')}")
    print("\n| benchmark | ns/op (median of 3) |\n|---|---|")
    for k, v in ns.items():
        if v is not None:
            print(f"| `{k}` | {v:.2f} |")
    system_clock = t("BM_Floor_SystemClockRead/real_time/threads:1")
    clock = t("BM_Floor_TscClockRead/real_time/threads:1")  # the default
    rdtsc = t("BM_Floor_Rdtsc")
    cas = t("BM_Floor_Cas/real_time/threads:1")
    lookup = t("BM_Floor_FlatHashMapLookup/real_time/threads:1")
    rows = []
    for strat in ("Gcra",):
        hot = t(f"BM_RateLimiter_CheckHotKey<{strat}>/real_time/threads:1")
        hot_at = t(f"BM_RateLimiter_CheckAtHotKey<{strat}>/real_time/threads:1")
        hot_at2 = t(f"BM_RateLimiter_CheckAtHotKey<{strat}>/real_time/threads:2")
        naive = t(f"BM_NaiveMutexMap_CheckAtHotKey<{strat}>/real_time/threads:1")
        naive2 = t(f"BM_NaiveMutexMap_CheckAtHotKey<{strat}>/real_time/threads:2")
        hot_sys = t(f"BM_RateLimiter_CheckHotKeySystemClock<{strat}>/real_time/threads:1")
        rows += [
            (f"{strat} check(), default (fast) clock, ns", hot, "<= 20, or the next row"),
            (f"{strat} check() / (fast clock + lookup + CAS)", hot / (clock + lookup + cas), "<= 1.3"),
            (f"{strat} check() on SystemClock / (clock_gettime + lookup + CAS)",
             hot_sys / (system_clock + lookup + cas), "<= 1.5"),
            ("fast clock read / clock_gettime read", clock / system_clock, ""),
            ("fast clock read / rdtsc", clock / rdtsc, ""),
            (f"{strat} check_at() / (lookup + CAS)", hot_at / (lookup + cas), "<= 1.5"),
            (f"naive mutex map / check_at(), 1 thread", naive / hot_at, ">= 2"),
            (f"naive mutex map / check_at(), 2 threads", naive2 / hot_at2, ">= 2"),
            (f"2-thread / 1-thread throughput, distinct hot keys", hot_at / hot_at2, ">= 1.6"),
        ]
    print("\n| strategy | check() hot key | check_at() hot key | check_at() 2 threads (real) | "
          "check_at() 10^6 keys | check_at() 10^6 keys, 2 threads (real) | check() 10^6 keys |")
    print("|---|---|---|---|---|---|---|")
    for strat in ("Gcra", "TokenBucket", "FixedWindow", "SlidingWindow",
                  "SlidingLog", "Quota", "TokenBudget"):
        cells = [
            t(f"BM_RateLimiter_CheckHotKey<{strat}>/real_time/threads:1"),
            t(f"BM_RateLimiter_CheckAtHotKey<{strat}>/real_time/threads:1"),
            t(f"BM_RateLimiter_CheckAtHotKey<{strat}>/real_time/threads:2"),
            t(f"BM_RateLimiter_CheckAtDistinctKeys<{strat}>/real_time/threads:1"),
            t(f"BM_RateLimiter_CheckAtDistinctKeys<{strat}>/real_time/threads:2"),
            t(f"BM_RateLimiter_CheckDistinctKeys<{strat}>/threads:1"),
        ]
        print(f"| {strat} | " + " | ".join(f"{c:.1f}" for c in cells) + " |")
    cell = t("BM_GcraCell_CheckAt/real_time/threads:1")
    rows.append(("GcraCell check_at() / CAS", cell / cas, "<= 4"))
    tb_cell = t("BM_TokenBucketCell_CheckAt/real_time/threads:1")
    rows.append(("Cell<TokenBucket> check_at() / GcraCell check_at()",
                 tb_cell / cell, "<= 1.1"))
    many = t("BM_RateLimiter_CheckManyDistinct<Gcra>/64")
    one_by_one = t("BM_RateLimiter_CheckOneByOneDistinct<Gcra>/64")
    rows.append(("check_many of 64 distinct keys / one check each",
                 many / one_by_one, "<= 0.4"))
    mem = counters.get("BM_MemoryStore_BytesPerGcraKey/iterations:1", {})
    print("\n| ratio | measured | target |\n|---|---|---|")
    for name, value, target in rows:
        print(f"| {name} | {value:.2f} | {target} |")
    if mem:
        print(f"| bytes per GCRA key at 10^6 keys (allocator) | "
              f"{mem['bytes_per_key']:.1f} | <= 96 |")
        print(f"| bytes per GCRA key at 10^6 keys (tables) | "
              f"{mem['table_bytes_per_key']:.1f} | |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
