"""What the benchmarks share about `herald emulator`: it serves HTTPS by default, as FCM is served,
with a certificate it makes at start (`--tls auto`), and prints the authority that signed it
(`export HERALD_CA_FILE=...`). The workers are given that authority as HERALD_CA_FILE, as a user
gives theirs, and the benchmark's own requests (urllib) trust it; a script's `--cleartext` asks
for `--tls off` instead (plain http, which a worker speaks HTTP/1.1 to). Only the standard library."""

import os
import ssl
import time
import urllib.request


def tls_flags(cleartext):
    """The emulator's flags for the road a script takes. `--tls auto` is its default, said all the
    same so that an emulator too old to serve TLS refuses the flag rather than serve cleartext."""
    return ["--tls", "off"] if cleartext else ["--tls", "auto"]


def scheme(cleartext):
    return "http" if cleartext else "https"


def trust(*paths):
    """From now on urllib trusts the authorities in these PEM files too (the emulators' own)."""
    context = ssl.create_default_context()
    for path in paths:
        context.load_verify_locations(cafile=path)
    urllib.request.install_opener(urllib.request.build_opener(urllib.request.HTTPSHandler(context=context)))


def bundle(paths, path):
    """One PEM file holding every authority in `paths`, for workers that reach several emulators
    (HERALD_CA_FILE names one file, as curl's CAINFO takes one); returns `path`."""
    with open(path, "w") as out:
        for authority_path in paths:
            with open(authority_path) as authority_file:
                out.write(authority_file.read())
    return path


def authority(log_path, process, seconds=30):
    """The HERALD_CA_FILE the emulator running as `process` printed to `log_path`; from now on
    urllib trusts it. Exits naming the log when none comes within `seconds`."""
    deadline = time.time() + seconds
    while True:
        if os.path.exists(log_path):
            with open(log_path) as lines:
                for line in lines:
                    if line.startswith("export HERALD_CA_FILE="):
                        path = line.split("=", 1)[1].split("  #")[0].strip().strip("'")
                        trust(path)
                        return path
        if time.time() > deadline or process.poll() is not None:
            raise SystemExit(f"herald emulator printed no HERALD_CA_FILE (is it serving TLS?); see {log_path}")
        time.sleep(0.1)
