#!/usr/bin/env python3
"""The Envoy door from another language: a Python grpcio client.

Generates Python stubs from our proto/envoy files at test time (protoc and
grpc_python_plugin, the ones the C++ build uses), starts throttlekit-server
with server.yaml beside this file, sends every request of script.txt in
order and checks each answer is exactly the one written there: the same
script and answers the C++ test (tests/server/envoy_rls_test.cc) holds the
server to. Exits 0 when every answer matches, 1 otherwise (naming the
step), 2 when the environment is not usable.

Usage: python_client.py --server BIN --proto-dir DIR
"""

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PROTOS = [
    "envoy/service/ratelimit/v3/rls.proto",
    "envoy/extensions/common/ratelimit/v3/ratelimit.proto",
    "envoy/type/v3/ratelimit_unit.proto",
    "envoy/config/core/v3/base.proto",
]
UNIT_SECONDS = {1: 1, 2: 60, 3: 3600, 4: 86400, 5: 30 * 86400,
                6: 365 * 86400, 7: 7 * 86400}


def fail(message, code=1):
    print(f"python client: {message}", file=sys.stderr)
    sys.exit(code)


def generate_stubs(proto_dir, out_dir):
    plugin = shutil.which("grpc_python_plugin")
    if plugin is None or shutil.which("protoc") is None:
        fail("protoc and grpc_python_plugin are needed "
             "(protobuf-compiler, protobuf-compiler-grpc)", 2)
    subprocess.run(
        ["protoc", f"-I{proto_dir}", f"--python_out={out_dir}",
         f"--grpc_python_out={out_dir}",
         f"--plugin=protoc-gen-grpc_python={plugin}"] + PROTOS,
        check=True)


def read_script(rls_pb2, text_format):
    """[(line number, request, expected response or status name)]."""
    steps = []
    pending = None
    with open(os.path.join(HERE, "script.txt"), encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            tag, _, body = line.partition(":")
            body = body.strip()
            if tag == "request":
                pending = (number, text_format.Parse(
                    body, rls_pb2.RateLimitRequest()))
            elif tag == "expect":
                steps.append(pending + (text_format.Parse(
                    body, rls_pb2.RateLimitResponse()),))
                pending = None
            elif tag == "expect_error":
                steps.append(pending + (body,))
                pending = None
            else:
                fail(f"script.txt:{number}: unknown line {tag!r}", 2)
    return steps


def start_server(binary):
    proc = subprocess.Popen(
        [binary, "--config", os.path.join(HERE, "server.yaml"), "--listen",
         "127.0.0.1:0", "--reload-interval-ms", "0"],
        stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    # "throttlekit-server: listening on port N, store memory, ..."
    marker = "listening on port "
    if marker not in line:
        proc.kill()
        fail(f"the server did not start: {line!r}")
    port = int(line.split(marker)[1].split(",")[0])
    return proc, port


def run_once(binary, grpc, rls_pb2, rls_pb2_grpc, steps):
    """Returns (mismatches, whether an hour or day boundary was crossed)."""
    proc, port = start_server(binary)
    began = time.time()
    mismatches = []
    try:
        channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        grpc.channel_ready_future(channel).result(timeout=10)
        stub = rls_pb2_grpc.RateLimitServiceStub(channel)
        for number, request, expected in steps:
            try:
                got = stub.ShouldRateLimit(request, timeout=10)
            except grpc.RpcError as e:
                got_code = e.code().name
                if got_code != expected:
                    mismatches.append(
                        f"script.txt:{number}: expected {expected}, got "
                        f"{got_code}: {e.details()}")
                continue
            if isinstance(expected, str):
                mismatches.append(f"script.txt:{number}: expected {expected}, "
                                  f"got an answer: {got}")
                continue
            for i, status in enumerate(got.statuses):
                if status.HasField("current_limit"):
                    d = status.duration_until_reset
                    total = d.seconds + d.nanos / 1e9
                    unit = UNIT_SECONDS[status.current_limit.unit]
                    if not status.HasField("duration_until_reset") or \
                            not 0 < total <= unit:
                        mismatches.append(
                            f"script.txt:{number}: statuses[{i}]: "
                            f"duration_until_reset {total} s not in (0, "
                            f"{unit}]")
                status.ClearField("duration_until_reset")
            if got != expected:
                mismatches.append(f"script.txt:{number}: expected\n{expected}"
                                  f"got\n{got}")
        channel.close()
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            mismatches.append("the server did not stop within 10 s of SIGTERM")
    ended = time.time()
    crossed = int(began // 3600) != int(ended // 3600)
    return mismatches, crossed


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--server", required=True)
    parser.add_argument("--proto-dir", required=True)
    args = parser.parse_args()
    try:
        import grpc
        from google.protobuf import text_format
    except ImportError as e:
        fail(f"{e}: install python3-grpcio and python3-protobuf", 2)
    out = tempfile.mkdtemp(prefix="throttlekit-pystubs-")
    try:
        generate_stubs(args.proto_dir, out)
        sys.path.insert(0, out)
        from envoy.service.ratelimit.v3 import rls_pb2, rls_pb2_grpc
        steps = read_script(rls_pb2, text_format)
        if not steps:
            fail("script.txt holds no steps", 2)
        mismatches, crossed = run_once(args.server, grpc, rls_pb2,
                                       rls_pb2_grpc, steps)
        if crossed:
            # The hourly windows rolled over mid-script: once more, afresh.
            mismatches, crossed = run_once(args.server, grpc, rls_pb2,
                                           rls_pb2_grpc, steps)
    finally:
        shutil.rmtree(out, ignore_errors=True)
    if mismatches:
        fail("\n".join(mismatches))
    print(f"python client: {len(steps)} requests, every answer as written "
          f"(grpcio {grpc.__version__})")


if __name__ == "__main__":
    main()
