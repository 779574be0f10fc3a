"""What the benchmarks share about `herald emulator --tls auto`: the authority of the certificate
it made, read from its start-up lines (`export HERALD_CA_FILE=...`), for the workers
(HERALD_CA_FILE) and for the benchmark's own requests (urllib). Only the standard library."""

import os
import ssl
import time
import urllib.request


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
                        context = ssl.create_default_context(cafile=path)
                        urllib.request.install_opener(urllib.request.build_opener(urllib.request.HTTPSHandler(context=context)))
                        return path
        if time.time() > deadline or process.poll() is not None:
            raise SystemExit(f"herald emulator --tls auto printed no HERALD_CA_FILE; see {log_path}")
        time.sleep(0.1)
